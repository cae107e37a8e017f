/**
 * Step 10: block selection, the way today's sparse kernels choose what to compute (definitions §8
 * §8 `moba`, MoonshotAI/MoBA `moba/moba_naive.py`). The keys are cut into blocks of B; query i
 * scores each block by its mean key, g_ib = q_i · k̄_b (unscaled, as MoBA's gate), keeps its own
 * block and the best k − 1 others (ties to the lower block; causal: no block after its own, and
 * inside its own block only j ≤ i). A kernel then skips every B × B tile no query of the row block
 * kept. Drawn on this head's raw queries and keys (GET …/raw: texts of ≤ 64 tokens) with a small
 * B (≈ n / 5, so a sentence has a few blocks; the registry's MoBA uses 16–128 on long texts).
 * @module lecture/step-blocks
 */

import { el, pct } from "../dom.js";
import { computeMetrics } from "../metrics.js";
import { drawMatrix, FUTURE_FILL, star, withTooltip } from "./matrix.js";
import { formula, legend, prose, slider, stats } from "./panel.js";

/** @typedef {import("./steps.js").StepContext} StepContext */

const KEPT = "#cfe0fa";
const SKIPPED = "#f8f9fb";
const HIT = "#0f766e";
const MISS = "#dc2626";

/** The lecture's block size for n tokens: about five blocks, at least 2 keys each. */
export const lectureBlock = (n) => Math.max(2, Math.round(n / 5));

/**
 * MoBA's choice for every query: the kept blocks of each row, in order.
 * @param {number[][]} queries (n, d) the head's queries
 * @param {number[][]} keys (n, d) its keys
 * @param {number} B block size
 * @param {number} k blocks per query (the own block counts)
 * @param {boolean} causal
 * @returns {{gates: number[][], kept: number[][], T: number}} gates (n, T) (−∞: not allowed)
 */
export function mobaBlocks(queries, keys, B, k, causal) {
  const n = queries.length;
  const d = queries[0].length;
  const T = Math.ceil(n / B);
  const mean = [];
  for (let b = 0; b < T; b++) {
    const m = new Float64Array(d);
    const hi = Math.min(n, (b + 1) * B);
    for (let j = b * B; j < hi; j++) for (let t = 0; t < d; t++) m[t] += keys[j][t];
    for (let t = 0; t < d; t++) m[t] /= hi - b * B;
    mean.push(m);
  }
  const gates = [];
  const kept = [];
  for (let i = 0; i < n; i++) {
    const own = Math.floor(i / B);
    const g = mean.map((m, b) => {
      if (causal && b > own) return -Infinity;
      let s = 0;
      for (let t = 0; t < d; t++) s += queries[i][t] * m[t];
      return s;
    });
    gates.push(g);
    const order = g
      .map((_, b) => b)
      .filter((b) => b !== own && g[b] > -Infinity)
      .sort((a, b) => (g[b] !== g[a] ? g[b] - g[a] : a - b));
    kept.push([own, ...order.slice(0, Math.max(0, k - 1))]);
  }
  return { gates, kept, T };
}

/** The kept blocks as an n × n 0/1 mask (∩ V: causal keeps j ≤ i). */
export function maskOf(kept, n, B, causal) {
  const m = new Uint8Array(n * n);
  kept.forEach((blocks, i) => {
    for (const b of blocks) {
      const hi = Math.min(n, (b + 1) * B, causal ? i + 1 : n);
      for (let j = b * B; j < hi; j++) m[i * n + j] = 1;
    }
  });
  return m;
}

/**
 * @param {StepContext} ctx
 */
export function renderBlocks(ctx) {
  const n = ctx.labels.length;
  if (!ctx.raw) {
    ctx.figure.append(
      el("p", { class: "notice", text: ctx.rawError || "Raw vectors are not available for this text." }),
    );
    return;
  }
  const B = lectureBlock(n);
  const T = Math.ceil(n / B);
  const k0 = Math.min(2, T);
  slider(ctx.panel, {
    id: "blocks-k",
    label: "blocks per query k",
    min: 1,
    max: Math.max(2, T),
    step: 1,
    value: k0,
    format: (v) => `${v} of ${T}  ·  B = ${B}`,
    onInput: (v) => draw(ctx, B, Math.min(v, T)),
  });
  formula(
    ctx.panel,
    String.raw`\bar{k}_b = \tfrac{1}{|b|}\textstyle\sum_{j \in b} k_j, \qquad g_{ib} = q_i^\top \bar{k}_b`,
    "each block is judged by its mean key (MoBA's gate)",
  );
  stats(ctx.panel, [
    { label: "recall", value: "", id: "recall-blocks", tone: "accent" },
    { label: `tiles skipped (B = ${B})`, value: "", id: "tiles-blocks" },
  ]);
  const why = el("p", { class: "prose", attrs: { id: "blocks-focus" } });
  ctx.panel.append(why);
  prose(
    ctx.panel,
    "A kernel computes whole B × B tiles, so choosing blocks is what saves time. But a block's mean key blurs the one far key a query needs: ",
    { b: "red stars" },
    " are edges of G in blocks the gate passed over.",
  );
  draw(ctx, B, k0);
}

/** Redraw the grid and the numbers for k blocks per query. */
function draw(ctx, B, k) {
  const n = ctx.labels.length;
  const causal = ctx.state.causal;
  const { queries, keys } = ctx.raw;
  const { gates, kept } = mobaBlocks(queries, keys, B, k, causal);
  const mask = maskOf(kept, n, B, causal);
  const keptSet = kept.map((bs) => new Set(bs));
  ctx.figure.replaceChildren();
  const { canvas, geom } = drawMatrix({
    rows: ctx.labels,
    cols: ctx.labels,
    rowDim: ctx.special,
    colDim: ctx.special,
    rowAxis: "query i",
    colAxis: "key j",
    width: ctx.size.width,
    height: ctx.size.height - 60,
    maxCell: 48,
    showText: false,
    cell: (a, b) => ({
      fill: causal && b > a ? FUTURE_FILL : mask[a * n + b] ? KEPT : SKIPPED,
    }),
    overlay: (g2d, g) => {
      for (let a = 0; a < n; a++) {
        for (let b = 0; b < n; b++) {
          if (ctx.P[a * n + b] > 0) {
            const [x, y] = g.center(a, b);
            star(g2d, x, y, g.cell * 0.32, mask[a * n + b] ? HIT : MISS, "#ffffff");
          }
        }
      }
      // block boundaries, and the followed query's row
      g2d.save();
      g2d.strokeStyle = "#334155";
      g2d.lineWidth = 2;
      for (let t = 0; t * B <= n; t++) {
        const at = Math.min(n, t * B) * g.cell;
        g2d.beginPath();
        g2d.moveTo(g.x0 + at, g.y0);
        g2d.lineTo(g.x0 + at, g.y0 + n * g.cell);
        g2d.moveTo(g.x0, g.y0 + at);
        g2d.lineTo(g.x0 + n * g.cell, g.y0 + at);
        g2d.stroke();
      }
      g2d.strokeStyle = "#f59e0b";
      g2d.lineWidth = 3;
      g2d.strokeRect(g.x0, g.y0 + ctx.focus * g.cell, n * g.cell, g.cell);
      g2d.restore();
    },
  });
  const wrap = withTooltip(canvas, geom, (a, b) => {
    const blk = Math.floor(b / B);
    const g = gates[a][blk];
    const gate = Number.isFinite(g) ? `gate ${g.toFixed(2)}` : "not allowed";
    const state = keptSet[a].has(blk) ? (blk === Math.floor(a / B) ? "own block" : "kept") : "skipped";
    const edge = ctx.P[a * n + b] > 0 ? ` · edge of G (p = ${ctx.P[a * n + b].toFixed(2)})` : "";
    return `${ctx.labels[a]} → ${ctx.labels[b]}: block ${blk}, ${gate}, ${state}${edge}`;
  });
  ctx.figure.append(wrap);
  legend(ctx.figure, [
    { color: KEPT, label: "blocks kept" },
    { color: HIT, label: "edge kept", shape: "star" },
    { color: MISS, label: "edge missed", shape: "star" },
  ]);
  const m = computeMetrics(mask, ctx.gold, n, causal, [B]);
  setText("recall-blocks", pct(m.recall));
  setText("tiles-blocks", pct(m.block_sparsity[String(B)]));
  const why = document.getElementById("blocks-focus");
  if (why) {
    const i = ctx.focus;
    const names = kept[i].map((b) => `${b}`).join(", ");
    why.replaceChildren(
      el("strong", { text: `“${ctx.labels[i]}”` }),
      ` (orange row) keeps block${kept[i].length > 1 ? "s" : ""} ${names}: its own, then the highest g.`,
    );
  }
}

function setText(id, text) {
  const node = document.getElementById(id);
  if (node) node.textContent = text;
}
