/** heatmap-cell.js under node:test: a cell in words (tooltip, live region) and revealing it. */
import assert from "node:assert/strict";
import { test } from "node:test";

import { cellFacts, cellSentence, revealCell } from "../../frontend/js/heatmap-cell.js";
import { NO_ZOOM } from "../../frontend/js/heatmap-zoom.js";

const head = {
  tokens: [{ text: "[CLS]" }, { text: "they" }, { text: "it" }],
  n: 3,
  probs: Float32Array.from([1, 0, 0, 0.25, 0.75, 0, 0, 0.5, 0.5]),
  gold: Uint8Array.from([1, 0, 0, 1, 1, 0, 0, 1, 1]),
  mask: Uint8Array.from([1, 0, 0, 0, 1, 1, 0, 1, 1]),
  causal: false,
};

test("a kept edge, a missed one, a predicted zero, an exact zero", () => {
  assert.equal(cellFacts(head, 1, 1).verdict, "★ kept by the method");
  assert.equal(cellFacts(head, 1, 0).verdict, "× missed by the method");
  assert.equal(cellFacts(head, 1, 0).kind, "missed");
  assert.equal(cellFacts(head, 1, 2).verdict, "predicted by the method (p = 0)");
  assert.equal(cellFacts(head, 0, 2).verdict, "not predicted");
  assert.equal(cellFacts(head, 0, 2).p, "0 (exact zero)");
  assert.equal(cellFacts({ ...head, mask: null }, 1, 1).verdict, "× missed by the method");
  assert.equal(cellFacts({ ...head, causal: true }, 0, 2).verdict, "outside the causal region (j > i)");
});

test("the sentence a screen reader hears names both tokens, p and the verdict", () => {
  assert.equal(
    cellSentence(cellFacts(head, 1, 0)),
    'query "they" (1), key "[CLS]" (0): p = 0.2500, × missed by the method',
  );
});

test("revealing a cell pans rows and columns only as needed", () => {
  const lay = { m: 100 };
  assert.equal(revealCell(lay, NO_ZOOM, 99, 99), NO_ZOOM); // everything is in view at zoom 1
  const z = { z: 4, r0: 0, c0: 0 }; // 25 cells a side in view
  assert.equal(revealCell(lay, z, 10, 24), z);
  assert.deepEqual(revealCell(lay, z, 30, 3), { z: 4, r0: 6, c0: 0 });
  assert.deepEqual(revealCell(lay, z, 3, 50), { z: 4, r0: 0, c0: 26 });
  assert.deepEqual(revealCell(lay, { z: 4, r0: 40, c0: 40 }, 39, 80), { z: 4, r0: 39, c0: 56 });
});
