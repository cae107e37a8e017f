/**
 * Sparse Transformer patterns for the lecture slides, built on the main page's JS twin of
 * sparse_core/patterns.py (../patterns.js): each cell gets a part code so a slide can colour A1
 * and A2 apart: 0 = neither, 1 = A1 only, 2 = A2 only, 3 = both.
 * @module lecture/patterns
 */

import { fixed as fixedMask, strided as stridedMask } from "../patterns.js";

/**
 * @typedef {object} PartGrid
 * @property {number} n
 * @property {Uint8Array} code  row-major n × n part codes
 * @property {Uint8Array} mask  the merged head A1 ∪ A2 (0/1), as ../metrics.js expects
 * @property {(i: number, j: number) => number} at
 * @property {(i: number, j: number) => boolean} has
 */

/** @param {number} n @param {Uint8Array} a1 @param {Uint8Array} a2 @returns {PartGrid} */
function parts(n, a1, a2) {
  const code = new Uint8Array(n * n);
  const mask = new Uint8Array(n * n);
  for (let k = 0; k < n * n; k++) {
    code[k] = a1[k] | (a2[k] << 1);
    mask[k] = code[k] > 0 ? 1 : 0;
  }
  return { n, code, mask, at: (i, j) => code[i * n + j], has: (i, j) => code[i * n + j] > 0 };
}

/**
 * Strided attention, stride l (causal: A1 = {j : max(0, i − l) ≤ j ≤ i},
 * A2 = {j : (i − j) mod l = 0, j ≤ i}; bidirectional: |i − j| ≤ l and (i − j) mod l = 0).
 * @param {number} n @param {number} l @param {boolean} causal
 * @returns {PartGrid}
 */
export function strided(n, l, causal) {
  return parts(n, stridedMask(n, l, causal, "A1"), stridedMask(n, l, causal, "A2"));
}

/**
 * Fixed attention, block length l, c summary positions (A1 = the block of i,
 * A2 = {j : j mod l ≥ l − c}, the last c positions of every block; causal adds j ≤ i).
 * @param {number} n @param {number} l @param {number} c 1 ≤ c ≤ l
 * @param {boolean} causal
 * @returns {PartGrid}
 */
export function fixed(n, l, c, causal) {
  return parts(n, fixedMask(n, l, c, causal, "A1"), fixedMask(n, l, c, causal, "A2"));
}

/**
 * A two-hop route from query i to key j < i through the causal strided pattern:
 * i → k by A1 (|i − k| ≤ l) and k → j by A2 ((k − j) mod l = 0). Returns k, or null when j is
 * reached in one hop (or not at all).
 * @param {number} i @param {number} j @param {number} l
 * @returns {number|null}
 */
export function stridedVia(i, j, l) {
  if (j > i || i - j <= l || (i - j) % l === 0) return null;
  for (let k = i; k >= Math.max(0, i - l); k--) if ((k - j) % l === 0) return k;
  return null;
}
