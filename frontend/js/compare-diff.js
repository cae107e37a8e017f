/**
 * Side by side's pure part (no DOM; node unit tests: tests/js/compare_diff.test.mjs): the
 * difference of two graphs A and B on the same n × n cells, its counts, the cell classes of one
 * pane, and the max-pooling that shrinks an n × n class image to a pane of `side` pixels without
 * losing a class (docs/compare.md).
 *
 * The difference (A − B) of two 0/1 masks (values 0 or 1 only), row-major n × n (a gold graph G = {P_ij > 0} or a
 * method's predicted mask M' = (M ∪ W ∪ Glob) ∩ V):
 *
 *     only A = A \ B      only B = B \ A      both = A ∩ B
 *
 * and the Jaccard overlap |A ∩ B| / |A ∪ B| (1 when both are empty).
 */

/** Diff classes, by drawing priority (a pooled pixel shows the highest class under it). */
export const DIFF = Object.freeze({ NONE: 0, BOTH: 1, ONLY_B: 2, ONLY_A: 3 });

/** Pane classes: an exact zero, a zero the mask keeps, a gold edge the mask keeps, one it misses. */
export const PANE = Object.freeze({ ZERO: 0, MASK: 1, KEPT: 2, MISSED: 3 });

/** Diff class of k = 2·A + B (0/1 each): none, only B, only A, both. */
const DIFF_OF = Uint8Array.of(DIFF.NONE, DIFF.ONLY_B, DIFF.ONLY_A, DIFF.BOTH);
/** Pane class of k = 2·gold + mask: zero, the mask's zero, missed, kept. */
const PANE_OF = Uint8Array.of(PANE.ZERO, PANE.MASK, PANE.MISSED, PANE.KEPT);

/**
 * The diff class of every cell and the counts (one branch-free pass: a slider frame runs it on
 * n² = 262,144 cells at n = 512).
 * @param {Uint8Array} a n × n, 0/1
 * @param {Uint8Array} b n × n, 0/1
 * @returns {{codes: Uint8Array, onlyA: number, onlyB: number, both: number, jaccard: number}}
 */
export function diffMasks(a, b) {
  if (a.length !== b.length) {
    throw new RangeError(`the graphs differ in size (${a.length} and ${b.length} cells)`);
  }
  const codes = new Uint8Array(a.length);
  const count = new Int32Array(4);
  for (let x = 0; x < a.length; x++) {
    const k = (a[x] << 1) | b[x];
    count[k]++;
    codes[x] = DIFF_OF[k];
  }
  const [, onlyB, onlyA, both] = count;
  const union = onlyA + onlyB + both;
  return { codes, onlyA, onlyB, both, jaccard: union ? both / union : 1 };
}

/**
 * A pane's class of every cell: the gold graph G read through the mask M (null: no mask, every
 * gold edge counts as kept).
 * @param {Uint8Array} gold n × n, 0/1
 * @param {Uint8Array|null} mask n × n, 0/1
 * @returns {Uint8Array}
 */
export function paneCodes(gold, mask) {
  const codes = new Uint8Array(gold.length);
  if (mask === null) {
    for (let x = 0; x < gold.length; x++) codes[x] = gold[x] * PANE.KEPT;
    return codes;
  }
  for (let x = 0; x < gold.length; x++) codes[x] = PANE_OF[(gold[x] << 1) | mask[x]];
  return codes;
}

/**
 * Shrink an n × n class image to side × side by the maximum class under each pixel (cells
 * [⌊p·n/side⌋, ⌊(p+1)·n/side⌋) of pixel p), so that no class vanishes at any n. With side ≥ n
 * the image itself is returned (drawn one cell a pixel, scaled up).
 * @param {Uint8Array} codes n × n
 * @param {number} n
 * @param {number} side pixels
 * @returns {{img: Uint8Array, m: number}} the m × m image (m = min(n, side))
 */
export function poolMax(codes, n, side) {
  if (side >= n) return { img: codes, m: n };
  const m = Math.max(1, Math.floor(side));
  const img = new Uint8Array(m * m);
  const start = new Int32Array(m + 1);
  for (let p = 0; p <= m; p++) start[p] = Math.floor((p * n) / m);
  for (let pr = 0; pr < m; pr++) {
    const row = pr * m;
    for (let i = start[pr]; i < start[pr + 1]; i++) {
      const base = i * n;
      for (let pc = 0; pc < m; pc++) {
        let best = img[row + pc];
        for (let j = start[pc]; j < start[pc + 1]; j++) if (codes[base + j] > best) best = codes[base + j];
        img[row + pc] = best;
      }
    }
  }
  return { img, m };
}

/**
 * A pane's classes pooled to side × side straight from its gold graph and mask: the same image as
 * `poolMax(paneCodes(gold, mask), n, side)` in one pass, without the n × n class image (a slider
 * frame in side by side pools A's pane, and B's, at n² = 262,144 cells each).
 * @param {Uint8Array} gold n × n, 0/1
 * @param {Uint8Array|null} mask n × n, 0/1
 * @param {number} n
 * @param {number} side pixels
 * @returns {{img: Uint8Array, m: number}}
 */
export function poolPane(gold, mask, n, side) {
  if (side >= n || mask === null) return poolMax(paneCodes(gold, mask), n, side);
  const m = Math.max(1, Math.floor(side));
  const img = new Uint8Array(m * m);
  const start = new Int32Array(m + 1);
  for (let p = 0; p <= m; p++) start[p] = Math.floor((p * n) / m);
  for (let pr = 0; pr < m; pr++) {
    const row = pr * m;
    for (let i = start[pr]; i < start[pr + 1]; i++) {
      const base = i * n;
      for (let pc = 0; pc < m; pc++) {
        let best = img[row + pc];
        for (let x = base + start[pc], end = base + start[pc + 1]; x < end; x++) {
          const c = PANE_OF[(gold[x] << 1) | mask[x]];
          if (c > best) best = c;
        }
        img[row + pc] = best;
      }
    }
  }
  return { img, m };
}

/**
 * The cell (i, j) under a point of a pane of `size` CSS px showing n × n cells, or null.
 * @returns {{i: number, j: number}|null}
 */
export function cellAt(x, y, size, n) {
  if (x < 0 || y < 0 || x >= size || y >= size || n <= 0) return null;
  return { i: Math.min(n - 1, Math.floor((y / size) * n)), j: Math.min(n - 1, Math.floor((x / size) * n)) };
}
