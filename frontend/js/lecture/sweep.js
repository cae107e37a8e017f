/**
 * A small sparsity–recall sweep computed in the browser for one head, used by the last slide when
 * the server's Pareto sweep (GET …/pareto) is not available: window, strided and fixed patterns
 * over their natural grids, and Sparsefinder's distance threshold when projections are present.
 * Metrics and frontiers come from the main page's twins of sparse_core.metrics (../metrics.js).
 * @module lecture/sweep
 */

import { computeMetrics, goldSparsity, paretoFront } from "../metrics.js";
import { window as windowMask } from "../patterns.js";
import { fixed, maskFrom, strided } from "./patterns.js";

/**
 * Sweep the structured patterns (and sf-distance) for one head.
 * @param {{n: number, causal: boolean, gold: Uint8Array, goldCount: number,
 *   proj?: {queries: number[][], keys: number[][]} | null}} o
 * @returns {{scope: string, gold_sparsity: number, points: object[], frontiers: Record<string, number[]>}}
 */
export function localSweep({ n, causal, gold, goldCount, proj }) {
  /** @type {{method: string, params: object, sparsity: number, recall: number}[]} */
  const points = [];
  const add = (method, params, mask) => {
    const m = computeMetrics(mask, gold, n, causal);
    points.push({ method, params, sparsity: m.sparsity, recall: m.recall });
  };
  for (let w = 1; w <= 2 * n - 1; w += 2) add("window", { window: w }, windowMask(n, w, causal));
  for (let l = 1; l <= n; l++) add("strided", { stride: l }, strided(n, l, causal).mask);
  for (let l = 2; l <= n; l++) {
    for (const c of new Set([1, Math.max(1, Math.round(l / 4))])) {
      add("fixed", { stride: l, c }, fixed(n, l, c, causal).mask);
    }
  }
  if (proj?.queries?.length) {
    const Q = proj.queries;
    const K = proj.keys;
    const d = new Float64Array(n * n);
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < n; j++) d[i * n + j] = Q[i].reduce((s, v, k) => s + (v - K[j][k]) ** 2, 0);
    }
    const sorted = Array.from(d).sort((a, b) => a - b);
    for (let q = 1; q <= 24; q++) {
      const t = sorted[Math.min(sorted.length - 1, Math.floor((q / 24) * sorted.length))] * 1.0001;
      add("sf-distance", { threshold: Number(t.toPrecision(3)) }, maskFrom(n, (i, j) => d[i * n + j] < t));
    }
  }
  const frontiers = {};
  for (const m of new Set(points.map((p) => p.method))) {
    const idx = points.map((p, k) => (p.method === m ? k : -1)).filter((k) => k >= 0);
    frontiers[m] = paretoFront(idx.map((k) => [points[k].sparsity, points[k].recall])).map(
      (k) => idx[k],
    );
  }
  return { scope: "browser", gold_sparsity: goldSparsity(goldCount, n, causal), points, frontiers };
}
