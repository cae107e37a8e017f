/**
 * Steps 1–4 of the lecture: tokens, query/key vectors, scaled scores, the causal mask.
 * Each `render*` fills `ctx.figure` (the picture) and `ctx.panel` (formulas beside it).
 * @module lecture/steps-attention
 */

import { el, fmt } from "../dom.js";
import { drawMatrix, diverging, MASK_FILL, withTooltip } from "./matrix.js";
import { formula, legend, prose, stats } from "./panel.js";

/** @typedef {import("./steps.js").StepContext} StepContext */

/**
 * Step 1: the sentence becomes n tokens, each a vector x_i.
 * @param {StepContext} ctx
 */
export function renderTokens(ctx) {
  const { analysis, labels, special } = ctx;
  const row = el("ol", { class: "token-row", attrs: { "aria-label": "tokens" } });
  labels.forEach((t, i) => {
    row.append(
      el("li", { class: special[i] ? "tok tok-special" : "tok" }, [
        el("span", { class: "tok-text", text: t }),
        el("span", { class: "tok-idx", text: String(i) }),
      ]),
    );
  });
  const slide = el("div", { class: "tokens-slide" }, [
    el("p", {
      class: "sentence-big",
      text: `“${ctx.state.text}”`,
      attrs: { id: "sentence-big" },
    }),
    el("p", { class: "flow-arrow", text: "↓ tokenizer (sub-words, plus [CLS] and [SEP])" }),
    row,
    el("p", { class: "flow-arrow", text: "↓ each token i becomes a vector xᵢ" }),
  ]);
  ctx.figure.append(slide);
  // a long sentence: smaller type until it fits (never below 14 px: the CSS floors it)
  for (let f = 1; f > 0.45; f *= 0.92) {
    slide.style.fontSize = `${f.toFixed(3)}rem`;
    if (slide.scrollHeight <= ctx.size.height && slide.scrollWidth <= ctx.size.width) break;
  }
  formula(
    ctx.panel,
    String.raw`X = \begin{bmatrix} x_0^\top \\ \vdots \\ x_{n-1}^\top \end{bmatrix} \in \mathbb{R}^{n \times d}`,
  );
  formula(ctx.panel, String.raw`x_i = E[w_i] + P[i]`, "token embedding + position embedding");
  prose(
    ctx.panel,
    "Self-attention sees a set of vectors, one per token. It has no notion of order, so a ",
    { b: "position embedding" },
    " is added to each token's embedding.",
  );
  const d = ctx.raw?.d_model;
  stats(ctx.panel, [
    { label: "tokens n", value: String(analysis.n), id: "stat-n" },
    { label: "width d", value: d ? String(d) : "–" },
    { label: "layers × heads", value: `${analysis.layers} × ${analysis.heads}` },
  ]);
}

/**
 * Step 2: one head's query and key vectors, as two small heatmaps.
 * @param {StepContext} ctx
 */
export function renderVectors(ctx) {
  if (!needRaw(ctx)) return;
  const { queries, keys, d_head: dh } = ctx.raw;
  // vectors as columns (q_i = W_Q x_i is a column vector): rows are the d_h dimensions
  const dims = Array.from({ length: dh }, (_, k) => (dh > 16 && k % 4 !== 0 ? "" : String(k)));
  const maxAbs = absMax([...queries.flat(), ...keys.flat()]);
  const w = (ctx.size.width - 32) / 2;
  const box = el("div", { class: "figure-row" });
  for (const [name, mat, sym] of [
    ["queries: one column qᵢ per token", queries, "q"],
    ["keys: one column kⱼ per token", keys, "k"],
  ]) {
    const { canvas, geom } = drawMatrix({
      rows: dims,
      cols: ctx.labels,
      colDim: ctx.special,
      rowAxis: "dimension",
      width: w,
      height: ctx.size.height - 70,
      maxCell: 40,
      showText: false,
      cell: (k, t) => ({ fill: diverging(mat[t][k], maxAbs) }),
      overlay: (c, g) => outlineCol(c, g, ctx.focus),
    });
    const wrap = withTooltip(
      canvas,
      geom,
      (k, t) => `${sym} of “${ctx.labels[t]}”, dimension ${k}: ${fmt(mat[t][k], 3)}`,
    );
    box.append(
      el("figure", { class: "panel-fig" }, [el("figcaption", { text: name }), wrap]),
    );
  }
  ctx.figure.append(box);
  legend(ctx.figure, [
    { color: diverging(-maxAbs, maxAbs), label: `negative (−${maxAbs.toFixed(1)})` },
    { color: "#ffffff", label: "0" },
    { color: diverging(maxAbs, maxAbs), label: `positive (+${maxAbs.toFixed(1)})` },
    { color: "#f59e0b", label: `“${ctx.labels[ctx.focus]}”`, shape: "outline" },
  ]);
  formula(ctx.panel, String.raw`q_i = W_Q\, x_i \qquad k_j = W_K\, x_j`);
  formula(
    ctx.panel,
    String.raw`W_Q,\ W_K:\ d_h \times d \text{ matrices}, \quad d_h = ${dh}`,
    "every head has its own projections",
  );
  prose(
    ctx.panel,
    "A query asks “what am I looking for?”, a key says “what do I offer?”. These are the real vectors of ",
    { b: `layer ${ctx.layer}, head ${ctx.head}` },
    ` for this sentence: ${ctx.labels.length} vectors of ${dh} numbers each.`,
  );
}

/**
 * Step 3: the scaled dot-product scores S = QKᵀ/√d_h.
 * @param {StepContext} ctx
 */
export function renderScores(ctx) {
  if (!needRaw(ctx)) return;
  const S = ctx.raw.scores;
  const maxAbs = absMax(S.flat());
  scoreMatrix(ctx, S, maxAbs, false);
  const dh = ctx.raw.d_head;
  formula(ctx.panel, String.raw`S = \frac{Q K^\top}{\sqrt{d_h}}, \qquad S_{ij} = \frac{q_i^\top k_j}{\sqrt{d_h}}`);
  const f = ctx.focus;
  const last = S[f].length - 1; // step 3 is before the mask: every key
  const argmax = (keep) => {
    let best = -1;
    for (let j = 0; j <= last; j++) if (keep(j) && (best < 0 || S[f][j] > S[f][best])) best = j;
    return best;
  };
  const best = argmax(() => true);
  const word = argmax((j) => !ctx.special[j]);
  prose(
    ctx.panel,
    "Each cell compares query i with key j. Dividing by ",
    { tex: String.raw`\sqrt{d_h} = \sqrt{${dh}} \approx ${Math.sqrt(dh).toFixed(2)}` },
    " keeps the scores from growing with the dimension, so the normaliser does not saturate.",
  );
  prose(
    ctx.panel,
    "Row ",
    { b: `“${ctx.labels[f]}”` },
    ": its highest score is for ",
    { b: `“${ctx.labels[best]}”` },
    ` (${fmt(S[f][best], 2)})`,
    ctx.special[best] && word >= 0
      ? `, a special token many heads lean on; among the words, “${ctx.labels[word]}” (${fmt(S[f][word], 2)}).`
      : ".",
  );
}

/**
 * Step 4: the causal mask, −∞ above the diagonal.
 * @param {StepContext} ctx
 */
export function renderMask(ctx) {
  if (!needRaw(ctx)) return;
  const S = ctx.raw.scores;
  const n = S.length;
  const maxAbs = absMax(S.flatMap((row, i) => row.slice(0, i + 1)));
  scoreMatrix(ctx, S, maxAbs, true);
  formula(
    ctx.panel,
    String.raw`e_{ij} = \begin{cases} q_i^\top k_j / \sqrt{d_h}, & j \le i \\ -\infty, & j > i \end{cases}`,
  );
  prose(
    ctx.panel,
    "A decoder must not peek at the future. Scores of later keys are set to ",
    { tex: String.raw`-\infty` },
    ", so after normalising their weight is exactly 0, and all rows are still computed in parallel.",
  );
  prose(
    ctx.panel,
    "The lecture's slide writes j < i; here, as in GPT-style decoders, a token also sees itself (j ≤ i).",
  );
  stats(ctx.panel, [
    { label: "valid pairs |V|", value: String((n * (n + 1)) / 2), id: "stat-valid" },
    { label: "masked", value: String((n * (n - 1)) / 2) },
  ]);
  if (!ctx.state.causal) {
    const btn = el("button", {
      class: "btn",
      text: "Use the causal mask from here on",
      attrs: { type: "button", id: "use-causal" },
    });
    btn.addEventListener("click", () => ctx.update({ causal: true }));
    prose(ctx.panel, "This analysis is bidirectional (an encoder): the next steps use all n² pairs.");
    ctx.panel.append(btn);
  }
}

// ------------------------------------------------------------------------------------- helpers

/** Score heatmap with numbers; `masked` greys out and labels j > i as −∞. */
function scoreMatrix(ctx, S, maxAbs, masked) {
  const { canvas, geom } = drawMatrix({
    rows: ctx.labels,
    cols: ctx.labels,
    rowDim: ctx.special,
    colDim: ctx.special,
    rowAxis: "query i",
    colAxis: "key j →",
    width: ctx.size.width,
    height: ctx.size.height - 50,
    cell: (i, j) =>
      masked && j > i
        ? { fill: MASK_FILL, text: "−∞", ink: "#e5e7eb" }
        : { fill: diverging(S[i][j], maxAbs), text: fmt(S[i][j], 1) },
    overlay: (c, g) => outlineRow(c, g, ctx.focus),
  });
  ctx.figure.append(
    withTooltip(canvas, geom, (i, j) =>
      masked && j > i
        ? `${ctx.labels[i]} → ${ctx.labels[j]}: masked (future), −∞`
        : `${ctx.labels[i]} → ${ctx.labels[j]}: S = ${fmt(S[i][j], 3)}`,
    ),
  );
  legend(ctx.figure, [
    { color: diverging(-maxAbs, maxAbs), label: `low (${fmt(-maxAbs, 1)})` },
    { color: diverging(maxAbs, maxAbs), label: `high (${fmt(maxAbs, 1)})` },
    ...(masked ? [{ color: MASK_FILL, label: "−∞ (future)" }] : []),
    { color: "#f59e0b", label: `row of “${ctx.labels[ctx.focus]}”`, shape: "outline" },
  ]);
}

/** Outline one query row of a matrix. */
export function outlineRow(c, g, i) {
  c.strokeStyle = "#f59e0b";
  c.lineWidth = 3;
  c.strokeRect(g.x0 - 1.5, g.y0 + i * g.cell - 1.5, g.m * g.cell + 3, g.cell + 3);
}

/** Outline one column of a matrix. */
function outlineCol(c, g, j) {
  c.strokeStyle = "#f59e0b";
  c.lineWidth = 3;
  c.strokeRect(g.x0 + j * g.cell - 1.5, g.y0 - 1.5, g.cell + 3, g.n * g.cell + 3);
}

/** Largest |x| of a list (at least a tiny positive number). */
function absMax(xs) {
  let m = 1e-9;
  for (const x of xs) if (Number.isFinite(x)) m = Math.max(m, Math.abs(x));
  return m;
}

/** Show a notice instead of the picture when the raw vectors are not available. */
function needRaw(ctx) {
  if (ctx.raw) return true;
  ctx.figure.append(
    el("p", { class: "notice", text: ctx.rawError || "Raw vectors are not available for this text." }),
  );
  return false;
}
