/**
 * view-state.js under node:test: the store's defaults come from the one definition, the address
 * codec reads back what it writes and reads the old page's addresses as it did, and bad values
 * are left out with a message. (The same cases against Python: tests/test_view_schema.py.)
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import * as store from "../../frontend/js/state.js";
import { BLOCK_SIZES, DEFAULT_BLOCK, decodeState, encodeState } from "../../frontend/js/url.js";
import {
  FLAGS, VIEW_FIELDS, decodeQuery, encodeQuery, field, fromShare, toShare, viewDefaults,
} from "../../frontend/js/view-state.js";
import { VIEW_SCHEMA } from "../../frontend/js/view-schema.js";

test("the store starts at the definition's defaults", () => {
  const s = store.get();
  for (const f of VIEW_FIELDS) if (f.state !== false) assert.deepEqual(s[f.key], f.default, f.key);
  assert.equal(s.alpha, 1.5);
  assert.equal(s.block, "128");
  assert.deepEqual(BLOCK_SIZES, ["16", "32", "64", "128"]);
  assert.equal(DEFAULT_BLOCK, "128");
  assert.deepEqual(field("alpha").lo, 1);
  assert.deepEqual(field("alpha").hi, 2);
  assert.notEqual(viewDefaults().params, viewDefaults().params); // a fresh object each time
});

test("a state written to the address reads back (a saved view's page: every flag)", () => {
  const s = { ...viewDefaults(), analysis: { id: "x" }, text: "A cat & a dog.", alpha: 1.25,
    causal: true, layer: 2, head: 5, method: "strided", params: { stride: 4, globals: true },
    lockedRow: 0, cluster: null, scope: "mean", gridColour: "recall", hideSpecial: true,
    block: "32", paretoX: "block" };
  const got = decodeState(encodeState(s, { withText: false }));
  assert.deepEqual(got, {
    alpha: 1.25, causal: true, layer: 2, head: 5, method: "strided",
    params: { stride: "4", globals: "1" }, lockedRow: 0, cluster: null, scope: "mean",
    gridColour: "recall", hideSpecial: true, block: "32", paretoX: "block", paretoPoints: false, zoom: "",
    compare: "off", cmpLayer: 0, cmpHead: 0, cmpMethod: "", cmpAlpha: 2, cmpModel: "",
    resultsY: "recall",
    view: "head",
  });
  assert.equal(decodeState(encodeState(s)).text, "A cat & a dog.");
});

test("the old page's addresses read as before", () => {
  assert.deepEqual(decodeState("?text=hi&alpha=2&start=40&block=64&px=block"),
    { text: "hi", alpha: 2, truncate: true, start: 40, block: "64", paretoX: "block" });
  assert.deepEqual(decodeState("?id=abc&method=window"), { id: "abc", method: "window", params: {} });
  assert.deepEqual(decodeState("?row=&cluster="), { lockedRow: null, cluster: null });
  assert.equal(encodeQuery({ ...viewDefaults(), text: "x".repeat(1501), analysis: { id: "k" } }),
    "id=k&alpha=1.5&layer=0&head=0&method=window");
});

test("bad values are left out, each with a message naming its key", () => {
  const { state, errors } = decodeQuery("?alpha=two&scope=all&layer=7&hide=yes&p.1x=3");
  assert.deepEqual(state, { layer: 7, params: {} });
  assert.equal(errors.alpha, 'alpha must be a number in [1, 2] or own, got "two"');
  assert.equal(errors.scope, 'scope must be one of head, mean, got "all"');
  assert.equal(errors.hide, 'hide must be 1 or 0, got "yes"');
  assert.match(errors["p.1x"], /is not a slider/);
});

test("shares: the flags that differ from their defaults, read back with bad ones left out", () => {
  const share = toShare({ ...viewDefaults(), text: "t", hideSpecial: true, block: "16" });
  assert.deepEqual(share.view, { hideSpecial: true, block: "16" });
  assert.equal(share.lecture_step, null);
  const { state, errors } = fromShare({ ...share, view: { ...share.view, grid: "red", block: 64 } });
  assert.equal(state.block, "64"); // a number: its string
  assert.equal(state.hideSpecial, true);
  assert.ok(!("gridColour" in state));
  assert.deepEqual(Object.keys(errors), ["view.grid"]);
  assert.deepEqual([...FLAGS.keys()], ["scope", "grid", "hideSpecial", "block", "paretoX", "paretoPoints", "zoom",
    "compare", "cmpLayer", "cmpHead", "cmpMethod", "cmpAlpha", "cmpModel", "resultsY", "view"]);
  assert.equal(VIEW_SCHEMA.fields.length, VIEW_FIELDS.length);
});

test("the corpus-results y-axis is in the address and shares", () => {
  const s = { ...viewDefaults(), text: "t", analysis: { id: "x" }, resultsY: "task" };
  assert.match(encodeState(s), /ry=task/);
  assert.equal(decodeState(encodeState(s)).resultsY, "task");
  assert.ok(!encodeState({ ...s, resultsY: "recall" }).includes("ry=")); // the default: not written
  assert.equal(toShare(s).view.resultsY, "task");
  assert.match(decodeQuery("?ry=loss").errors.ry, /^ry must be one of recall, task/);
});

test("the heatmap's zoom is in the address and shares", () => {
  const s = { ...viewDefaults(), text: "t", analysis: { id: "x" }, zoom: "5.11@120.3,98" };
  assert.match(encodeState(s), /zoom=5\.11%40120\.3%2C98/);
  assert.equal(decodeState(encodeState(s)).zoom, "5.11@120.3,98");
  assert.ok(!encodeState({ ...s, zoom: "" }).includes("zoom")); // zoom 1: not written
  assert.equal(toShare(s).view.zoom, "5.11@120.3,98");
  const { errors } = decodeQuery("?zoom=9@x");
  assert.match(errors.zoom, /^zoom must be z@row,column/);
});

test("side by side is in the address and shares", () => {
  const s = { ...viewDefaults(), text: "t", analysis: { id: "x" }, compare: "head", cmpLayer: 3,
    cmpHead: 1 };
  const q = encodeState(s);
  assert.match(q, /&cmp=head&cl=3&ch=1$/);
  assert.deepEqual(decodeState(q).compare, "head");
  assert.equal(decodeState(q).cmpLayer, 3);
  assert.ok(!encodeState({ ...s, compare: "off", cmpLayer: 0, cmpHead: 0 }).includes("cmp"));
  assert.deepEqual(toShare(s).view, { compare: "head", cmpLayer: 3, cmpHead: 1 });
  const back = fromShare(toShare({ ...s, compare: "alpha", cmpAlpha: 1.25 }));
  assert.deepEqual([back.state.compare, back.state.cmpAlpha], ["alpha", 1.25]);
  const { errors, notices } = decodeQuery("?cmp=both&ca=0.5");
  assert.equal(errors.cmp, 'cmp must be one of off, head, method, alpha, model, got "both"');
  assert.equal(notices.ca, "ca=0.5 is below the minimum 1: using 1"); // clamped
});

test("numbers out of their range are clamped to it, with a notice", () => {
  const { state, errors, notices } = decodeQuery(
    "?alpha=7&layer=2000&head=-3&start=99999999&row=100001&cluster=-1&hide=yes");
  assert.deepEqual(state, {
    alpha: 2, layer: 1023, head: 0, start: 10000000, truncate: true, lockedRow: 100000, cluster: 0,
  });
  assert.equal(notices.alpha, "alpha=7 is above the maximum 2: using 2");
  assert.equal(notices.head, "head=-3 is below the minimum 0: using 0");
  assert.equal(notices.layer, "layer=2000 is above the maximum 1023: using 1023");
  assert.deepEqual(Object.keys(errors), ["hide"]); // garbage is still left out, with its message
  const low = decodeQuery("?alpha=0.5&alpha=9");
  assert.equal(low.state.alpha, 1);
  assert.equal(low.notices.alpha, "alpha=0.5 is below the minimum 1: using 1");
  // not numbers of their kind: left out as before
  const bad = decodeQuery("?layer=1.5&alpha=1e9&head=0x3");
  assert.deepEqual(bad.state, {});
  assert.deepEqual(Object.keys(bad.errors).sort(), ["alpha", "head", "layer"]);
  assert.deepEqual(bad.notices, {});
});

test("the whole model is a view field: in the address and in shares", () => {
  const s = { ...viewDefaults(), text: "t", analysis: { id: "x" }, view: "model" };
  assert.match(encodeState(s), /(^|&)view=model(&|$)/);
  assert.equal(decodeState(encodeState(s)).view, "model");
  assert.ok(!encodeState({ ...s, view: "head" }).includes("view=")); // the default: not written
  assert.equal(toShare(s).view.view, "model");
  assert.equal(fromShare(toShare(s)).state.view, "model");
  assert.match(decodeQuery("?view=grid").errors.view, /^view must be one of head, model/);
});
