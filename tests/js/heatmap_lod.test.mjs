/**
 * heatmap-lod.js under node:test: the pooled picture of a region never loses a gold edge (a
 * property test against the dense graph), a missed edge is never hidden by a kept one, f = 1 is
 * exactly fillCells, and the region / overview arithmetic.
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import { MISSED_LUT, PROB_LUT, SHADE_PX, ZERO_PX, probIndex } from "../../frontend/js/colours.js";
import { fillCells } from "../../frontend/js/heatmap-draw.js";
import {
  LOD_MIN, lodActive, poolCells, regionOf, rowStarts, wholeRegion,
} from "../../frontend/js/heatmap-lod.js";

/** A deterministic PRNG (mulberry32). */
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A random sparse head of n tokens (as head.js prepares it) and a random mask. */
function randomHead(n, density, seed) {
  const r = rng(seed);
  const probs = new Float32Array(n * n);
  const gold = new Uint8Array(n * n);
  const mask = new Uint8Array(n * n);
  const ei = [], ej = [];
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < n; j++) {
      if (r() < density) {
        probs[i * n + j] = Math.fround(0.001 + r());
        gold[i * n + j] = 1;
        ei.push(i);
        ej.push(j);
      }
      mask[i * n + j] = r() < 0.3 ? 1 : 0;
    }
  }
  return { n, probs, gold, mask, edgeI: Int32Array.from(ei), edgeJ: Int32Array.from(ej) };
}

const identity = (n) => ({
  vis: Int32Array.from({ length: n }, (_, k) => k),
  pos: Int32Array.from({ length: n }, (_, k) => k),
});

test("rowStarts indexes the row-major edges by query", () => {
  const s = rowStarts(4, Int32Array.from([0, 0, 2, 3, 3, 3]));
  assert.deepEqual(Array.from(s), [0, 2, 2, 3, 6]);
});

for (const [n, density, seed] of [[37, 0.05, 1], [300, 0.01, 2], [1100, 0.001, 3]]) {
  test(`property: no gold edge vanishes, at any pooling (n = ${n})`, () => {
    const head = randomHead(n, density, seed);
    const lay = identity(n);
    const starts = rowStarts(n, head.edgeI);
    for (const f of [1, 2, 3, 7, 16, Math.ceil(n / 256)]) {
      for (const mask of [null, head.mask]) {
        const k = Math.ceil(n / f);
        const reg = { a0: 0, a1: n, b0: 0, b1: n, f, rows: k, cols: k };
        const px = new Uint32Array(k * k);
        poolCells(px, reg, head, lay, mask, starts);
        // every block's colour from the dense graph, the same rule
        for (let A = 0; A < k; A++) {
          for (let B = 0; B < k; B++) {
            let kept = 0, missed = 0, shade = false;
            for (let i = A * f; i < Math.min(n, (A + 1) * f); i++) {
              for (let j = B * f; j < Math.min(n, (B + 1) * f); j++) {
                const x = i * n + j;
                const on = mask === null || mask[x] === 1;
                if (head.gold[x]) {
                  if (on) kept = Math.max(kept, head.probs[x]);
                  else missed = Math.max(missed, head.probs[x]);
                } else if (mask !== null && on) shade = true;
              }
            }
            const want = missed > 0 ? MISSED_LUT[probIndex(missed)]
              : kept > 0 ? PROB_LUT[probIndex(kept)] : shade ? SHADE_PX : ZERO_PX;
            const got = px[A * k + B];
            assert.equal(got, want, `f=${f} block (${A}, ${B})`);
            if (kept > 0 || missed > 0) assert.notEqual(got, ZERO_PX); // a gold edge shows
          }
        }
      }
    }
  });
}

test("f = 1 is exactly fillCells on the region, hidden tokens too", () => {
  const n = 40;
  const head = randomHead(n, 0.08, 7);
  const vis = Int32Array.from({ length: n - 2 }, (_, k) => k + 1); // [CLS] / [SEP] hidden
  const pos = new Int32Array(n).fill(-1);
  vis.forEach((t, a) => (pos[t] = a));
  const m = vis.length;
  for (const mask of [null, head.mask]) {
    const dense = new Uint32Array(m * m);
    fillCells(dense, vis, n, mask, head.probs, head.gold);
    const reg = { a0: 5, a1: 30, b0: 2, b1: 21, f: 1, rows: 25, cols: 19 };
    const px = new Uint32Array(25 * 19);
    poolCells(px, reg, head, { vis, pos }, mask, rowStarts(n, head.edgeI));
    for (let a = 0; a < 25; a++) {
      for (let b = 0; b < 19; b++) assert.equal(px[a * 19 + b], dense[(a + 5) * m + b + 2]);
    }
  }
});

test("a missed edge is never hidden by a kept one in its block", () => {
  const n = 4;
  const probs = new Float32Array(16);
  probs[0] = 0.9; // (0, 0) kept, strong
  probs[5] = 0.01; // (1, 1) missed, weak
  const head = { n, probs, edgeI: Int32Array.from([0, 1]), edgeJ: Int32Array.from([0, 1]) };
  const mask = new Uint8Array(16);
  mask[0] = 1;
  const px = new Uint32Array(4);
  poolCells(px, { a0: 0, a1: 4, b0: 0, b1: 4, f: 2, rows: 2, cols: 2 }, head, identity(4), mask,
    rowStarts(n, head.edgeI));
  assert.equal(px[0], MISSED_LUT[probIndex(probs[5])]); // red, though 0.9 is kept beside it
  assert.notEqual(px[0], PROB_LUT[probIndex(probs[0])]);
  assert.equal(px[3], ZERO_PX); // nothing predicted, no edge
});

test("regionOf: the visible cells and a pooling of at least one device pixel", () => {
  const lay = { m: 4096, cell: 800 / 4096 };
  const r = regionOf(lay, { z: 1, r0: 0, c0: 0 }, 1);
  assert.deepEqual([r.a0, r.a1, r.b0, r.b1], [0, 4096, 0, 4096]);
  assert.equal(r.f, 6); // ⌈4096 / 800⌉
  assert.ok(r.rows <= 800 && r.rows * r.f >= 4096);
  const z = regionOf(lay, { z: 8, r0: 100.5, c0: 2000 }, 2);
  assert.deepEqual([z.a0, z.a1, z.b0, z.b1], [100, 613, 2000, 2512]);
  assert.equal(z.f, 1); // 1.56 CSS px cells at dpr 2: no pooling
  assert.equal(regionOf({ m: 512, cell: 1.5 }, { z: 1, r0: 0, c0: 0 }, 1).f, 1);
});

test("the overview is at most 256 cells a side and covers the matrix", () => {
  for (const m of [10, 256, 257, 4096, 16384]) {
    const w = wholeRegion(m);
    assert.ok(w.rows <= 256 && w.rows * w.f >= m, `m = ${m}`);
  }
});

test("lodActive: long texts, or cells under a device pixel", () => {
  assert.equal(lodActive({ m: LOD_MIN + 1, cell: 2 }, 1), true);
  assert.equal(lodActive({ m: 512, cell: 1.1 }, 1), false);
  assert.equal(lodActive({ m: 512, cell: 0.6 }, 1), true);
  assert.equal(lodActive({ m: 512, cell: 0.6 }, 2), false);
});
