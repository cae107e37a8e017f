/**
 * Steps 5–6: softmax versus α-entmax on the same scores, and the attention graph G of exact
 * non-zeros ("stars").
 * @module lecture/steps-sparse
 */

import { el, fmt, pct } from "../dom.js";
import { drawMatrix, FUTURE_FILL, sequential, star, withTooltip, ZERO_FILL } from "./matrix.js";
import { outlineRow } from "./steps-attention.js";
import { formula, legend, prose, slider, stats } from "./panel.js";

/** @typedef {import("./steps.js").StepContext} StepContext */

/**
 * Row-wise softmax of the scores over the valid keys (j ≤ i when causal); masked cells get 0.
 * @param {number[][]} S (n, n) scores
 * @param {boolean} causal
 * @returns {Float64Array} row-major (n, n)
 */
export function softmaxRows(S, causal) {
  const n = S.length;
  const P = new Float64Array(n * n);
  for (let i = 0; i < n; i++) {
    const last = causal ? i : n - 1;
    let m = -Infinity;
    for (let j = 0; j <= last; j++) m = Math.max(m, S[i][j]);
    let z = 0;
    for (let j = 0; j <= last; j++) z += Math.exp(S[i][j] - m);
    for (let j = 0; j <= last; j++) P[i * n + j] = Math.exp(S[i][j] - m) / z;
  }
  return P;
}

/**
 * Number of exact zeros of P inside the valid region V.
 * @param {Float64Array} P @param {number} n @param {boolean} causal
 */
export function countZeros(P, n, causal) {
  let z = 0;
  for (let i = 0; i < n; i++) for (let j = 0; j < (causal ? i + 1 : n); j++) if (P[i * n + j] === 0) z++;
  return z;
}

/** |V|: n², or n(n+1)/2 when causal. */
export function validCount(n, causal) {
  return causal ? (n * (n + 1)) / 2 : n * n;
}

/**
 * Step 5: softmax and α-entmax side by side, an α slider that re-runs the analysis.
 * @param {StepContext} ctx
 */
export function renderEntmax(ctx) {
  formula(ctx.panel, String.raw`\operatorname{softmax}(z)_j = \frac{\exp(z_j)}{\sum_k \exp(z_k)}`);
  formula(
    ctx.panel,
    String.raw`\alpha\text{-entmax}(z)_j = \big[(\alpha-1)\,z_j - \tau\big]_+^{1/(\alpha-1)}`,
    "τ is chosen so that the row sums to 1; [·]₊ = max(·, 0)",
  );
  slider(ctx.panel, {
    id: "alpha",
    label: "α",
    min: 1,
    max: 2,
    step: 0.05,
    value: ctx.state.alpha,
    format: (v) => v.toFixed(2),
    ticks: [
      [1, "1 softmax"],
      [1.5, "1.5 entmax"],
      [2, "2 sparsemax"],
    ],
    onChange: (v) => ctx.update({ alpha: v }),
  });
  stats(ctx.panel, [
    { label: "zeros · softmax", value: "0", id: "zeros-softmax" },
    { label: "zeros · entmax", value: "", id: "zero-count", tone: "accent" },
    { label: "valid pairs |V|", value: "", id: "valid-count" },
  ]);
  prose(
    ctx.panel,
    "Softmax never gives an exact 0. Entmax cuts every score below the threshold ",
    { tex: String.raw`\tau/(\alpha-1)` },
    " to exactly 0: α = 1 is softmax, α = 2 is sparsemax. Move α and the model is re-run.",
  );
  refreshEntmax(ctx);
}

/**
 * Redraw step 5's picture and numbers for a new analysis (the slider stays in place).
 * @param {StepContext} ctx
 */
export function refreshEntmax(ctx) {
  ctx.figure.replaceChildren();
  const n = ctx.labels.length;
  const causal = ctx.state.causal;
  const zeros = countZeros(ctx.P, n, causal);
  const valid = validCount(n, causal);
  setText("zero-count", `${zeros} of ${valid}`);
  setText("valid-count", String(valid));
  const zc = document.getElementById("zero-count");
  if (zc) zc.dataset.zeros = String(zeros);
  if (!ctx.raw) {
    ctx.figure.append(el("p", { class: "notice", text: ctx.rawError || "No scores for this text." }));
    return;
  }
  const soft = softmaxRows(ctx.raw.scores, causal);
  const row = el("div", { class: "figure-row" });
  const w = (ctx.size.width - 24) / 2;
  for (const [title, P, hue] of [
    ["softmax (α = 1)", soft, "indigo"],
    [`${ctx.state.alpha.toFixed(2)}-entmax`, ctx.P, "teal"],
  ]) {
    const { canvas, geom } = drawMatrix({
      rows: ctx.labels,
      cols: ctx.labels,
      rowDim: ctx.special,
      colDim: ctx.special,
      width: w,
      height: ctx.size.height - 90,
      maxCell: 48,
      cell: (i, j) => probCell(P[i * n + j], causal && j > i, hue),
      overlay: (c, g) => outlineRow(c, g, ctx.focus),
    });
    const wrap = withTooltip(canvas, geom, (i, j) =>
      causal && j > i
        ? `${ctx.labels[i]} → ${ctx.labels[j]}: masked`
        : `${ctx.labels[i]} → ${ctx.labels[j]}: p = ${P[i * n + j] === 0 ? "0 (exactly)" : fmt(P[i * n + j], 4)}`,
    );
    row.append(el("figure", { class: "panel-fig" }, [el("figcaption", { text: title }), wrap]));
  }
  ctx.figure.append(row);
  if ([...row.querySelectorAll("canvas")].every((c) => c.dataset.values === "0")) {
    ctx.figure.append(
      el("p", { class: "fig-note", text: "Cells too small to print p legibly here: hover a cell for its value." }),
    );
  }
  legend(ctx.figure, [
    { color: sequential(0.02, "teal"), label: "small p > 0" },
    { color: sequential(1, "teal"), label: "p = 1" },
    { color: ZERO_FILL, label: "exactly 0", shape: "hatch" },
    ...(causal ? [{ color: FUTURE_FILL, label: "masked (future)" }] : []),
  ]);
}

/** Cell of a probability matrix: masked, exact zero (hatched) or tinted by p. */
function probCell(p, masked, hue) {
  if (masked) return { fill: FUTURE_FILL };
  if (p === 0) return { fill: ZERO_FILL, hatch: true, text: "0", ink: "#9ca3af" };
  const text = p >= 0.995 ? "1" : p < 0.005 ? "<.01" : fmt(p, 2).replace(/^0/, "");
  return { fill: sequential(p, hue), text };
}

function setText(id, text) {
  const node = document.getElementById(id);
  if (node) node.textContent = text;
}

/**
 * Step 6: the attention graph G = {(i, j) : p_ij > 0}, one star per edge.
 * @param {StepContext} ctx
 */
export function renderGraph(ctx) {
  const n = ctx.labels.length;
  const causal = ctx.state.causal;
  const { canvas, geom } = drawMatrix({
    rows: ctx.labels,
    cols: ctx.labels,
    rowDim: ctx.special,
    colDim: ctx.special,
    rowAxis: "query i",
    colAxis: "key j →",
    width: ctx.size.width,
    height: ctx.size.height - 50,
    cell: (i, j) => ({ fill: causal && j > i ? FUTURE_FILL : "#fbfbfd" }),
    overlay: (c, g) => {
      outlineRow(c, g, ctx.focus);
      for (let i = 0; i < n; i++) {
        for (let j = 0; j < n; j++) {
          const p = ctx.P[i * n + j];
          if (p > 0) {
            const [x, y] = g.center(i, j);
            star(c, x, y, g.cell * (0.2 + 0.3 * Math.sqrt(p)), sequential(0.35 + 0.65 * p, "teal"));
          }
        }
      }
    },
  });
  ctx.figure.append(
    withTooltip(canvas, geom, (i, j) => {
      const p = ctx.P[i * n + j];
      return p > 0
        ? `edge ${ctx.labels[i]} → ${ctx.labels[j]}: p = ${fmt(p, 4)}`
        : `${ctx.labels[i]} → ${ctx.labels[j]}: no edge (p = 0)`;
    }),
  );
  legend(ctx.figure, [
    { color: sequential(1, "teal"), label: "edge (size ∝ √p)", shape: "star" },
    ...(causal ? [{ color: FUTURE_FILL, label: "future (not valid)" }] : []),
  ]);

  const edges = ctx.goldCount;
  const valid = validCount(n, causal);
  formula(ctx.panel, String.raw`G = \{\, (i, j) \;:\; p_{ij} > 0 \,\}`);
  formula(
    ctx.panel,
    String.raw`\text{sparsity}(G) = 1 - \frac{|G|}{|V|} = 1 - \frac{${edges}}{${valid}}`,
  );
  const f = ctx.focus;
  const keys = [];
  for (let j = 0; j < n; j++) if (ctx.P[f * n + j] > 0) keys.push(ctx.labels[j]);
  stats(ctx.panel, [
    { label: "edges |G|", value: String(edges), id: "edge-count" },
    { label: "gold sparsity", value: pct(1 - edges / valid), tone: "accent" },
    { label: "keys per query", value: (edges / n).toFixed(1) },
  ]);
  prose(
    ctx.panel,
    "Entmax hands us a graph: each query keeps only a few keys. ",
    { b: `“${ctx.labels[f]}”` },
    ` attends to ${keys.length === 1 ? "1 key" : `${keys.length} keys`}: ${keys.map((k) => `“${k}”`).join(", ")}.`,
  );
  prose(
    ctx.panel,
    "This is the ground truth: a sparse pattern that covers every star gives exactly the same output, computing only those scores.",
  );
}
