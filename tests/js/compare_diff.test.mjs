/** compare-diff.js under node:test: side by side's difference counts, pane classes and pooling. */
import assert from "node:assert/strict";
import { test } from "node:test";

import { DIFF, PANE, cellAt, diffMasks, paneCodes, poolMax, poolPane } from "../../frontend/js/compare-diff.js";

const mask = (rows) => Uint8Array.from(rows.flat());

test("only A, only B and both are counted cell by cell, with the Jaccard overlap", () => {
  const a = mask([[1, 1, 0], [0, 1, 0], [1, 0, 0]]);
  const b = mask([[1, 0, 0], [0, 1, 1], [0, 0, 1]]);
  const d = diffMasks(a, b);
  assert.equal(d.onlyA, 2); // (0,1) (2,0)
  assert.equal(d.onlyB, 2); // (1,2) (2,2)
  assert.equal(d.both, 2); // (0,0) (1,1)
  assert.equal(d.jaccard, 2 / 6);
  assert.deepEqual([...d.codes], [
    DIFF.BOTH, DIFF.ONLY_A, DIFF.NONE,
    DIFF.NONE, DIFF.BOTH, DIFF.ONLY_B,
    DIFF.ONLY_A, DIFF.NONE, DIFF.ONLY_B,
  ]);
  // swapping A and B swaps the "only" counts
  const e = diffMasks(b, a);
  assert.equal(e.onlyA, d.onlyB);
  assert.equal(e.onlyB, d.onlyA);
});

test("identical or empty graphs: nothing only on one side; the overlap of two empty graphs is 1", () => {
  const a = mask([[1, 0], [1, 1]]);
  assert.deepEqual({ ...diffMasks(a, a), codes: null }, { codes: null, onlyA: 0, onlyB: 0, both: 3, jaccard: 1 });
  const z = new Uint8Array(4);
  assert.equal(diffMasks(z, z).jaccard, 1);
  assert.throws(() => diffMasks(a, new Uint8Array(9)), /differ in size \(4 and 9 cells\)/);
});

test("a pane's classes: gold kept / missed by the mask, the mask's zeros, exact zeros", () => {
  const gold = mask([[1, 1], [0, 0]]);
  const m = mask([[1, 0], [1, 0]]);
  assert.deepEqual([...paneCodes(gold, m)], [PANE.KEPT, PANE.MISSED, PANE.MASK, PANE.ZERO]);
  assert.deepEqual([...paneCodes(gold, null)], [PANE.KEPT, PANE.KEPT, PANE.ZERO, PANE.ZERO]);
});

test("pooling keeps the highest class of every block: one edge of 512² survives at 100 px", () => {
  const n = 512;
  const codes = new Uint8Array(n * n);
  codes[300 * n + 7] = DIFF.ONLY_B;
  codes[300 * n + 8] = DIFF.BOTH;
  codes[511 * n + 511] = DIFF.ONLY_A;
  const { img, m } = poolMax(codes, n, 100);
  assert.equal(m, 100);
  const at = (i, j) => img[Math.floor((i * m) / n) * m + Math.floor((j * m) / n)];
  assert.equal(at(300, 7), DIFF.ONLY_B); // ONLY_B outranks BOTH in the same pixel
  assert.equal(at(511, 511), DIFF.ONLY_A);
  assert.equal(img.reduce((s, v) => s + (v > 0 ? 1 : 0), 0), 2);
  // uneven blocks: every cell lands in exactly one pixel
  const ones = new Uint8Array(7 * 7).fill(1);
  const small = poolMax(ones, 7, 3);
  assert.deepEqual([...small.img], Array(9).fill(1));
  // a pane at least n wide draws the cells themselves
  assert.equal(poolMax(codes, n, 600).img, codes);
});

test("the cell under a point of a pane", () => {
  assert.deepEqual(cellAt(0, 0, 300, 10), { i: 0, j: 0 });
  assert.deepEqual(cellAt(299.9, 31, 300, 10), { i: 1, j: 9 });
  assert.equal(cellAt(300, 5, 300, 10), null);
  assert.equal(cellAt(-1, 5, 300, 10), null);
});

test("a pane pooled from gold and mask is the pooled class image, at every size", () => {
  let seed = 7;
  const rand = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
  for (const [n, side] of [[512, 240], [512, 100], [97, 31], [64, 64], [50, 80], [300, 299]]) {
    const gold = Uint8Array.from({ length: n * n }, () => (rand() < 0.1 ? 1 : 0));
    const mask = Uint8Array.from({ length: n * n }, () => (rand() < 0.3 ? 1 : 0));
    const want = poolMax(paneCodes(gold, mask), n, side);
    const got = poolPane(gold, mask, n, side);
    assert.equal(got.m, want.m, `${n} at ${side}`);
    assert.deepEqual([...got.img], [...want.img], `${n} at ${side}`);
    // no mask: every gold edge kept
    assert.deepEqual([...poolPane(gold, null, n, side).img], [...poolMax(paneCodes(gold, null), n, side).img]);
  }
  // every class shows: a single missed edge survives the pooling of 512² to 100 px
  const gold = new Uint8Array(512 * 512);
  gold[333 * 512 + 444] = 1;
  const { img, m } = poolPane(gold, new Uint8Array(512 * 512), 512, 100);
  assert.equal(img[Math.floor((333 * m) / 512) * m + Math.floor((444 * m) / 512)], PANE.MISSED);
});
