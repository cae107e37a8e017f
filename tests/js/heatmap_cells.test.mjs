/**
 * heatmap-draw.js `fillCells` under node:test: the colour of every visible cell of a head under a
 * mask (exact zero white, predicted zero sand, kept edge blue on √p, missed edge red), special
 * tokens hidden or not.
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import { MISSED_LUT, PROB_LUT, SHADE_PX, ZERO_PX, probIndex } from "../../frontend/js/colours.js";
import { fillCells } from "../../frontend/js/heatmap-draw.js";

// a 3-token head: p = 0.5 on (0, 0), 0.25 on (1, 2), 1 on (2, 1); zeros elsewhere
const n = 3;
const probs = new Float32Array([0.5, 0, 0, 0, 0, 0.25, 0, 1, 0]);
const gold = Uint8Array.from(probs, (p) => (p > 0 ? 1 : 0));

test("no method: gold edges on the blue ramp, zeros white", () => {
  const px = new Uint32Array(9);
  fillCells(px, Int32Array.from([0, 1, 2]), n, null, probs, gold);
  for (let x = 0; x < 9; x++) {
    assert.equal(px[x], gold[x] ? PROB_LUT[probIndex(probs[x])] : ZERO_PX, `cell ${x}`);
  }
  assert.notEqual(px[0], px[7]); // 0.5 and 1 on different tints
});

test("a mask: kept edges blue, missed red, predicted zeros sand, the rest white", () => {
  const mask = Uint8Array.from([1, 1, 0, 0, 0, 0, 0, 1, 1]); // keeps (0,0) (2,1); misses (1,2)
  const px = new Uint32Array(9);
  fillCells(px, Int32Array.from([0, 1, 2]), n, mask, probs, gold);
  assert.equal(px[0], PROB_LUT[probIndex(0.5)]);
  assert.equal(px[5], MISSED_LUT[probIndex(0.25)]);
  assert.equal(px[7], PROB_LUT[probIndex(1)]);
  assert.equal(px[1], SHADE_PX); // a zero inside the mask
  assert.equal(px[8], SHADE_PX);
  for (const x of [2, 3, 4, 6]) assert.equal(px[x], ZERO_PX);
});

test("hidden tokens: the visible rows and columns only, in order", () => {
  const px = new Uint32Array(4);
  fillCells(px, Int32Array.from([1, 2]), n, null, probs, gold); // token 0 hidden
  assert.deepEqual([...px], [ZERO_PX, PROB_LUT[probIndex(0.25)], PROB_LUT[probIndex(1)], ZERO_PX]);
});
