/**
 * Structured attention patterns: the JS twin of sparse_core/patterns.py (definitions §2).
 *
 * A mask is a `Uint8Array` of n × n cells, row-major: `mask[i * n + j] = 1` iff query i may attend
 * to key j (0-based positions). Every function is deterministic; the "random" patterns draw from
 * the shared integer hash (rng.js), so they equal Python's masks cell for cell.
 *
 *   strided A1   causal: max(0, i − l) ≤ j ≤ i        bidirectional: |i − j| ≤ l
 *   strided A2   (i − j) mod l = 0 (and j ≤ i when causal)
 *   fixed A1     ⌊j / l⌋ = ⌊i / l⌋ (and j ≤ i when causal)
 *   fixed A2     j mod l ≥ l − c: the last c positions of every block (project choice)
 *
 * Causal forms are the bidirectional ones intersected with the valid region V = {j ≤ i}.
 */

import { BIGBIRD_STREAM, LONGFORMER_STREAM, hashUniform } from "./rng.js";

/** @typedef {Uint8Array} Mask  n × n, row-major, 0/1 */

/** An empty (all-zero) n × n mask. */
export function emptyMask(n) {
  return new Uint8Array(n * n);
}

/**
 * The valid region V (definitions §4): all n² pairs, or {(i, j) : j ≤ i} when causal.
 * @returns {Mask}
 */
export function validRegion(n, causal) {
  const m = new Uint8Array(n * n);
  if (!causal) return m.fill(1);
  for (let i = 0; i < n; i++) m.fill(1, i * n, i * n + i + 1);
  return m;
}

/** AND the valid region into `m` in place (causal: clear j > i). */
export function andValid(m, n, causal) {
  if (!causal) return m;
  for (let i = 0; i < n - 1; i++) m.fill(0, i * n + i + 1, (i + 1) * n);
  return m;
}

/**
 * OR the band |i − j| ≤ ⌊w / 2⌋ into `m` in place; w = 0 is "off" (even w behaves like w + 1,
 * as in Python).
 */
export function orBand(m, n, width) {
  if (width <= 0) return m;
  const h = Math.floor(width / 2);
  for (let i = 0; i < n; i++) {
    m.fill(1, i * n + Math.max(0, i - h), i * n + Math.min(n - 1, i + h) + 1);
  }
  return m;
}

/** Resolve positions in [−n, n) (negative ones count from the end) to [0, n). */
function resolvePositions(n, positions) {
  return positions.map((p) => {
    if (!Number.isInteger(p) || p < -n || p >= n) {
      throw new RangeError(`positions must be integers in [-${n}, ${n}), got ${p}`);
    }
    return ((p % n) + n) % n;
  });
}

/** OR full rows and columns of the global `positions` into `m` in place. */
export function orGlobals(m, n, positions) {
  for (const p of resolvePositions(n, positions)) {
    m.fill(1, p * n, (p + 1) * n);
    for (let i = 0; i < n; i++) m[i * n + p] = 1;
  }
  return m;
}

/** Local window of width w: {(i, j) : |i − j| ≤ ⌊w / 2⌋}, AND V (the lecture's window step). */
export function window(n, width, causal = false) {
  return andValid(orBand(emptyMask(n), n, width), n, causal);
}

/**
 * Strided attention (Child et al. 2019), stride l; `part` is "A1", "A2" or "union" (merged head).
 * @returns {Mask}
 */
export function strided(n, stride, causal = true, part = "union") {
  const m = emptyMask(n);
  const a1 = part !== "A2";
  const a2 = part !== "A1";
  for (let i = 0; i < n; i++) {
    const row = i * n;
    for (let j = 0; j < n; j++) {
      const d = i - j;
      if ((a1 && Math.abs(d) <= stride) || (a2 && d % stride === 0)) m[row + j] = 1;
    }
  }
  return andValid(m, n, causal);
}

/**
 * Fixed factorized attention (Child et al. 2019), block length l, c summary positions.
 * A1 = the block of i; A2 = {j : l − (q+1)c ≤ j mod l < l − qc} with q = h mod ⌊l / c⌋ for
 * `head` h (null: q = 0, the last c positions of every block). Requires 1 ≤ c ≤ l.
 * @returns {Mask}
 */
export function fixed(n, stride, c, causal = true, part = "union", head = null) {
  if (c < 1 || c > stride) throw new RangeError(`c must be in [1, ${stride}], got ${c}`);
  const q = head === null ? 0 : head % Math.floor(stride / c);
  const lo = stride - (q + 1) * c;
  const hi = stride - q * c;
  const m = emptyMask(n);
  const a1 = part !== "A2";
  const a2 = part !== "A1";
  for (let i = 0; i < n; i++) {
    const row = i * n;
    const block = Math.floor(i / stride);
    for (let j = 0; j < n; j++) {
      const r = j % stride;
      if ((a1 && Math.floor(j / stride) === block) || (a2 && r >= lo && r < hi)) m[row + j] = 1;
    }
  }
  return andValid(m, n, causal);
}

/**
 * Draw min(k, m_i) of the m_i free columns of each row without replacement (partial
 * Fisher–Yates, sparse_core.patterns._sample_rows):
 *
 *     cand = free columns of row i, ascending; m = |cand|
 *     for t in 0 .. min(k, m) − 1:
 *         p = t + ⌊hashUniform(seed, stream, i, t) · (m − t)⌋;  swap cand[t], cand[p]
 *     chosen = cand[0 .. min(k, m) − 1]
 *
 * ORs the chosen cells into `out` in place.
 */
function orSampledRows(out, free, n, k, seed, stream) {
  const cand = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    let m = 0;
    for (let j = 0; j < n; j++) if (free[i * n + j]) cand[m++] = j;
    const steps = Math.min(k, m);
    for (let t = 0; t < steps; t++) {
      const p = t + Math.floor(hashUniform(seed, stream, i, t) * (m - t));
      const tmp = cand[t];
      cand[t] = cand[p];
      cand[p] = tmp;
      out[i * n + cand[t]] = 1;
    }
  }
  return out;
}

/**
 * BigBird: window of width `width` + global tokens `globals` + r random keys per row, drawn
 * without replacement among the valid keys not already in the row (hash stream 1, per-head seed).
 * @returns {Mask}
 */
export function bigbird(n, { randomKeys, width = 3, globals = [0, -1], seed = 0, causal = false }) {
  const base = andValid(orGlobals(orBand(emptyMask(n), n, width), n, globals), n, causal);
  if (randomKeys === 0) return base;
  const valid = validRegion(n, causal);
  const free = new Uint8Array(n * n);
  for (let x = 0; x < n * n; x++) free[x] = valid[x] & (base[x] ^ 1);
  return orSampledRows(base, free, n, randomKeys, seed, BIGBIRD_STREAM);
}

/**
 * The g = min(nGlobals, n) random global positions of Longformer, in draw order: partial
 * Fisher–Yates over [0, n) with p = t + ⌊hashUniform(seed, 2, t) · (n − t)⌋.
 * @returns {number[]}
 */
export function longformerGlobals(n, nGlobals, seed = 0) {
  const g = Math.min(nGlobals, n);
  const cand = Array.from({ length: n }, (_, k) => k);
  for (let t = 0; t < g; t++) {
    const p = t + Math.floor(hashUniform(seed, LONGFORMER_STREAM, t) * (n - t));
    [cand[t], cand[p]] = [cand[p], cand[t]];
  }
  return cand.slice(0, g);
}

/** Longformer: window of width `width` + g random global tokens for the text, AND V. */
export function longformer(n, { width, nGlobals, seed = 0, causal = false }) {
  const m = orGlobals(orBand(emptyMask(n), n, width), n, longformerGlobals(n, nGlobals, seed));
  return andValid(m, n, causal);
}

/**
 * Finish a predicted mask in place (docs/architecture.md): M' = (M ∪ W_w ∪ Glob) ∩ V — OR the
 * window of width `window` (0 = off) and, if `globals`, full rows and columns for the first and
 * last token; then AND the valid region.
 * @returns {Mask} the same array
 */
export function finish(mask, n, { window: width = 0, globals = false, causal = false } = {}) {
  orBand(mask, n, width);
  if (globals) orGlobals(mask, n, [0, -1]);
  return andValid(mask, n, causal);
}
