/** role-words.js under node:test: the sentence that says what one head does. */
import assert from "node:assert/strict";
import { test } from "node:test";

import { ROLE_INFO, ROLE_ORDER, pct, roleSentence } from "../../frontend/js/role-words.js";

const base = { rows: 12, syntax: null };

test("a head with a role says it with its share", () => {
  const s = roleSentence({ ...base, role: "previous", share: 0.8333, leading: "previous" });
  assert.equal(s, "Attends to the previous token in 83 % of rows (previous).");
});

test("a mixed head names its largest share; a broad one below one half says mostly broad", () => {
  const m = roleSentence({ ...base, role: "mixed", share: 0.38, leading: "delimiter" });
  assert.match(m, /^No single role \(mixed\): it most often attends to punctuation, in 38 % of rows\.$/);
  const b = roleSentence({ ...base, role: "broad", share: 0.42, leading: "broad" });
  assert.match(b, /^Mostly broad: it spreads over more than half of the keys in 42 % of rows\.$/);
  const b2 = roleSentence({ ...base, role: "broad", share: 0.7, leading: "broad" });
  assert.match(b2, /^Spreads over more than half of the keys in 70 % of rows \(broad\)\.$/);
});

test("the relation tracked best, with its fixed-offset baseline", () => {
  const syntax = { relation: "det", direction: "head", accuracy: 0.9, rows: 10, baseline: 0.7, offset: 1 };
  const s = roleSentence({ ...base, role: "next", share: 0.6, leading: "next", syntax });
  assert.ok(s.endsWith("Tracks det best: the top key is the word's head in 90 % of its 10 rows " +
    "(always taking the token at +1: 70 %)."), s);
  const dep = { ...syntax, direction: "dependent", offset: -2 };
  assert.match(roleSentence({ ...base, role: "sink", share: 0.9, leading: "sink", syntax: dep }),
    /a det dependent of the word in 90 % of its 10 rows \(always taking the token at -2: 70 %\)/);
  assert.equal(roleSentence({ ...base, rows: 0, role: "mixed", share: 0, leading: "sink" }),
    "No query rows to describe.");
});

test("every role has a colour and a label, in the server's order then mixed", () => {
  assert.deepEqual(ROLE_ORDER, ["sink", "previous", "next", "self", "delimiter", "syntactic",
    "local", "broad", "mixed"]);
  const colours = new Set(ROLE_ORDER.map((r) => ROLE_INFO[r].colour));
  assert.equal(colours.size, ROLE_ORDER.length);
  assert.equal(pct(0.005), "1 %");
});
