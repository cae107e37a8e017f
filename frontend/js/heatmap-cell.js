/**
 * One heatmap cell in words, pure (tests/js/heatmap_cell.test.mjs): what the tooltip shows on
 * hover and what the keyboard's cell cursor says in the live region (a screen reader reads it),
 * and the pan that brings a cell into a zoomed view.
 */

import { fmt } from "./dom.js";
import { clampPan } from "./heatmap-zoom.js";

/**
 * The facts of cell (i, j): the query and key tokens, p, and what the method does with it.
 * @param {{tokens: Array<{text: string}>, n: number, probs: Float32Array, gold: Uint8Array,
 *   mask: Uint8Array|null, causal: boolean}} o
 * @param {number} i query
 * @param {number} j key
 * @returns {{query: string, key: string, p: string, verdict: string, kind: string}}
 */
export function cellFacts({ tokens, n, probs, gold, mask, causal }, i, j) {
  const x = i * n + j;
  const kept = mask ? mask[x] === 1 : false;
  let verdict, kind = "";
  if (causal && j > i) verdict = "outside the causal region (j > i)";
  else if (gold[x]) {
    kind = kept ? "caught" : "missed";
    verdict = kept ? "★ kept by the method" : "× missed by the method";
  } else verdict = kept ? "predicted by the method (p = 0)" : "not predicted";
  return {
    query: `${JSON.stringify(tokens[i].text)} (${i})`,
    key: `${JSON.stringify(tokens[j].text)} (${j})`,
    p: probs[x] > 0 ? fmt(probs[x], 4) : "0 (exact zero)",
    verdict,
    kind,
  };
}

/** The facts as one sentence (the live region's text). */
export function cellSentence(f) {
  return `query ${f.query}, key ${f.key}: p = ${f.p}, ${f.verdict}`;
}

/**
 * The zoom with visible cell (a, b) in view (rows and columns), the pan changed only as much as
 * needed; the same zoom object when it already is.
 * @param {{m: number}} lay
 * @param {{z: number, r0: number, c0: number}} zoom
 */
export function revealCell(lay, zoom, a, b) {
  const k = lay.m / zoom.z; // cells a side in view
  const pan = (at, v) => (v < at ? v : v + 1 > at + k ? v + 1 - k : at);
  const r0 = pan(zoom.r0, a);
  const c0 = pan(zoom.c0, b);
  return r0 === zoom.r0 && c0 === zoom.c0 ? zoom : clampPan(lay, { z: zoom.z, r0, c0 });
}
