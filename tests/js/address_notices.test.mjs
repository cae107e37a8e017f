/**
 * address-notices.js and params.js `coerceParam` under node:test: the address's values that only
 * the analysis bounds (layers, heads, tokens, slider ranges) are clamped to the nearest allowed
 * value, and each change is worded.
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import { analysisNotices } from "../../frontend/js/address-notices.js";
import { coerceParam, resolveParams } from "../../frontend/js/params.js";

const WINDOW = {
  name: "window",
  params: [
    { name: "window", kind: "int", min: 0, max: 64, default: 3 },
    { name: "globals", kind: "bool", default: false },
    { name: "scale", kind: "float", min: 0.5, max: 2, default: 1 },
  ],
};
const analysis = { layers: 6, heads: 12, n: 20, methods: [WINDOW] };

test("a slider value out of its range is clamped; garbage takes the default", () => {
  const [w, , sc] = WINDOW.params;
  assert.equal(coerceParam(w, "5000"), 64);
  assert.equal(coerceParam(w, "-4"), 0);
  assert.equal(coerceParam(w, "7"), 7);
  assert.equal(coerceParam(w, "7.5"), 3); // an int must be integral: the default
  assert.equal(coerceParam(w, "abc"), 3);
  assert.equal(coerceParam(sc, "9.25"), 2);
  assert.equal(coerceParam(sc, "0.1"), 0.5);
  assert.deepEqual(resolveParams(WINDOW, { window: "999", globals: "1" }),
    { window: 64, globals: true, scale: 1 });
});

test("the notices say what the adopted view changed of the address", () => {
  const query = { layer: 9, head: 30, lockedRow: 50, method: "window",
    params: { window: "5000", globals: "1", scale: "x", nope: "1" } };
  const s = { analysis, layer: 5, head: 11, lockedRow: 19, method: "window",
    params: resolveParams(WINDOW, query.params) };
  const got = analysisNotices(query, s);
  assert.deepEqual(got, {
    layer: "layer=9 is above the last layer 5: using 5",
    head: "head=30 is above the last head 11: using 11",
    row: "row=50 is above the last token 19: using 19",
    "p.window": "p.window=5000 is above the maximum 64: using 64",
    "p.scale": 'p.scale="x" is not a value of scale: using the default 1',
    "p.nope": "p.nope is not a slider of window: left out",
  });
});

test("values the view shows as given make no notice", () => {
  const query = { layer: 2, head: 3, lockedRow: 4, params: { window: "7", globals: "0" } };
  const s = { analysis, layer: 2, head: 3, lockedRow: 4, method: "window",
    params: resolveParams(WINDOW, query.params) };
  assert.deepEqual(analysisNotices(query, s), {});
  assert.deepEqual(analysisNotices(query, { ...s, analysis: null }), {});
  // another method than the address asked for (no artefact): its sliders are not compared
  assert.deepEqual(analysisNotices({ ...query, method: "sf-kmeans" }, s), {});
});
