/**
 * The embeddable view of a shared link (/embed/{id}): the shared head's entmax probabilities as a
 * canvas heatmap with the shared method's mask over it, and its metrics. Cells: blue = a weight
 * the method keeps (darker = larger p), red = a weight it misses, sand = an exact zero it
 * predicts, white = an exact zero it skips. The mask and metrics are recomputed in the browser
 * (methods.js, metrics.js); the server's metrics are the fallback.
 *
 * The shared state comes from the `shared-state` JSON island ({id, state, created, analysis});
 * the text reaches the page only through the template (escaped) and textContent.
 */

import { analyze, getHead, getMetrics } from "./api.js";
import { ACCENT, MISSED_PX, PROB_LUT, SHADE_PX, ZERO_PX, probIndex } from "./colours.js";
import { byId, fmt, readIsland } from "./dom.js";
import { prepareHead } from "./head.js";
import { predict } from "./methods.js";
import { computeMetrics } from "./metrics.js";

/** Canvas pixels per cell: crisp cells up to about 540 px. */
function cellSize(n) {
  return Math.max(1, Math.floor(540 / n));
}

function setStatus(text, isError = false) {
  const node = byId("embed-status");
  node.textContent = text;
  node.classList.toggle("error", isError);
}

function clamp(v, lo, hi) {
  return Math.min(hi, Math.max(lo, v));
}

/**
 * Draw P (n × n, row-major) at `s` pixels per cell, coloured against the predicted mask (or P
 * alone when there is none); outline the selected query row, if any.
 * @param {HTMLCanvasElement} canvas
 * @param {import("./head.js").HeadData} h
 * @param {Uint8Array|null} mask
 * @param {number|null} row
 */
function drawHeatmap(canvas, h, mask, row) {
  const n = h.n;
  const s = cellSize(n);
  canvas.width = n * s;
  canvas.height = n * s;
  const ctx = canvas.getContext("2d");
  const img = ctx.createImageData(n * s, n * s);
  const px = new Uint32Array(img.data.buffer);
  const w = n * s;
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < n; j++) {
      const p = h.probs[i * n + j];
      const kept = !mask || mask[i * n + j];
      let c = ZERO_PX;
      if (p > 0) c = kept ? PROB_LUT[probIndex(p)] : MISSED_PX;
      else if (mask && kept) c = SHADE_PX;
      for (let y = i * s; y < (i + 1) * s; y++) px.fill(c, y * w + j * s, y * w + (j + 1) * s);
    }
  }
  ctx.putImageData(img, 0, 0);
  if (row !== null && row >= 0 && row < n) {
    ctx.strokeStyle = ACCENT;
    ctx.lineWidth = Math.max(1, s / 4);
    ctx.strokeRect(0.5, row * s + 0.5, w - 1, s - 1);
  }
}

/** Hovering a cell names its query and key tokens and their probability. */
function attachReadout(canvas, h, tokens) {
  const out = byId("embed-readout");
  canvas.addEventListener("mousemove", (ev) => {
    const r = canvas.getBoundingClientRect();
    const i = Math.floor(((ev.clientY - r.top) / r.height) * h.n);
    const j = Math.floor(((ev.clientX - r.left) / r.width) * h.n);
    if (i < 0 || j < 0 || i >= h.n || j >= h.n) return;
    const p = h.probs[i * h.n + j];
    out.textContent = `${tokens[i]?.text ?? i} → ${tokens[j]?.text ?? j}: p = ${
      p > 0 ? p.toPrecision(3) : "0 (exact zero)"
    }`;
  });
  canvas.addEventListener("mouseleave", () => {
    out.textContent = "";
  });
}

function showMetrics(values) {
  for (const dd of byId("embed-metrics").querySelectorAll("dd[data-metric]")) {
    const v = values[dd.dataset.metric];
    if (v !== undefined) dd.textContent = fmt(v);
  }
}

/** The method's slider values: its defaults for this text, then the shared values over them. */
function fullParams(analysis, method, shared) {
  const spec = (analysis.methods ?? []).find((m) => m.name === method);
  const params = {};
  for (const p of spec?.params ?? []) params[p.name] = p.default;
  return { ...params, ...shared };
}

async function main() {
  const shared = readIsland("shared-state");
  const s = shared.state;
  setStatus("Analysing…");
  const analysis = await analyze({
    text: s.text,
    alpha: s.alpha,
    causal: s.causal,
    truncate: s.truncate,
  });
  const layer = clamp(s.layer ?? 0, 0, analysis.layers - 1);
  const head = clamp(s.head ?? 0, 0, analysis.heads - 1);
  const h = prepareHead(await getHead(analysis.id, layer, head), analysis.causal);
  const params = fullParams(analysis, s.method, s.params ?? {});
  let mask = null;
  try {
    mask = predict(h, s.method, params);
  } catch {
    mask = null; // e.g. an sf-* method without an artefact: show P alone
  }
  const canvas = byId("embed-heatmap");
  drawHeatmap(canvas, h, mask, s.token ?? null);
  attachReadout(canvas, h, analysis.tokens);
  showMetrics({ gold_sparsity: h.goldSparsity });
  const summary = `${h.n} tokens · ${h.goldCount} nonzero weights of ${h.n * h.n}`;
  if (mask) {
    showMetrics(computeMetrics(mask, h.gold, h.n, h.causal));
    setStatus(`${summary} · red: weights ${s.method} misses`);
    return;
  }
  setStatus(summary);
  try {
    showMetrics(await getMetrics(analysis.id, layer, head, s.method, params));
  } catch (err) {
    setStatus(`${summary} · ${s.method}: ${err.message}`);
  }
}

main().catch((err) => setStatus(err.message || String(err), true));
