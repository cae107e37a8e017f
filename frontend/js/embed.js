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
import { ACCENT, CAUGHT, MISSED, MISSED_PX, PROB_LUT, SHADE_PX, ZERO_PX, probIndex } from "./colours.js";
import { byId, fmt, readIsland } from "./dom.js";
import { prepareHead } from "./head.js";
import { predict } from "./methods.js";
import { computeMetrics } from "./metrics.js";
import { tokenLabel, visibleTokens } from "./tokens.js";
import { field, fromShare } from "./view-state.js";

const LABEL_FONT = "11px system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif";

/** ★ on every kept gold edge, × on every missed one (cells of side `cs` from `margin`). */
function drawMarks(ctx, h, mask, vis, margin, cs) {
  const n = h.n;
  const r = cs * 0.36;
  const stars = new Path2D();
  const crosses = new Path2D();
  for (let a = 0; a < vis.length; a++) {
    for (let b = 0; b < vis.length; b++) {
      const x = vis[a] * n + vis[b];
      if (!(h.probs[x] > 0)) continue;
      const cx = margin + (b + 0.5) * cs;
      const cy = margin + (a + 0.5) * cs;
      if (mask[x]) {
        for (let k = 0; k < 10; k++) {
          const ang = -Math.PI / 2 + (k * Math.PI) / 5;
          const rr = k % 2 ? r * 0.45 : r;
          const px = cx + rr * Math.cos(ang);
          const py = cy + rr * Math.sin(ang);
          if (k) stars.lineTo(px, py);
          else stars.moveTo(px, py);
        }
        stars.closePath();
      } else {
        crosses.moveTo(cx - r, cy - r);
        crosses.lineTo(cx + r, cy + r);
        crosses.moveTo(cx + r, cy - r);
        crosses.lineTo(cx - r, cy + r);
      }
    }
  }
  ctx.fillStyle = CAUGHT;
  ctx.fill(stars);
  ctx.strokeStyle = MISSED;
  ctx.lineWidth = Math.max(1, cs / 8);
  ctx.stroke(crosses);
}

/** Canvas pixels per cell: crisp cells up to about 540 px. */
function cellSize(n) {
  return Math.max(1, Math.floor(540 / n));
}

/** The side (CSS px) the heatmap may take: the window less the figure's other parts. */
function roomFor(canvas) {
  const fig = canvas.closest("figure");
  const rest = fig.getBoundingClientRect().height - canvas.getBoundingClientRect().height;
  return Math.max(160, Math.min(560, window.innerWidth - 18, window.innerHeight - 24 - rest));
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
function drawHeatmap(canvas, h, mask, row, labels, vis, room = 480) {
  const n = h.n;
  const m = vis.length;
  const ctx0 = canvas.getContext("2d");
  ctx0.font = LABEL_FONT;
  const widest = Math.max(10, ...vis.map((t) => ctx0.measureText(labels[t]).width));
  const margin = Math.ceil(Math.min(widest, 100)) + 8;
  // the matrix and its labels fit the room the frame leaves (an 800 × 600 iframe: all of it)
  const cs = Math.max(1, Math.floor(Math.min(480, room - margin - 4) / m));
  const w = margin + m * cs + 4;
  const dpr = window.devicePixelRatio || 1;
  canvas.width = Math.round(w * dpr);
  canvas.height = Math.round(w * dpr);
  canvas.style.width = `${w}px`;
  canvas.style.height = `${w}px`;
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.fillStyle = "#ffffff";
  ctx.fillRect(0, 0, w, w);
  const off = document.createElement("canvas");
  off.width = off.height = m;
  const img = off.getContext("2d").createImageData(m, m);
  const px = new Uint32Array(img.data.buffer);
  for (let a = 0; a < m; a++) {
    for (let b = 0; b < m; b++) {
      const x = vis[a] * n + vis[b];
      const p = h.probs[x];
      const kept = !mask || mask[x];
      let c = ZERO_PX;
      if (p > 0) c = kept ? PROB_LUT[probIndex(p)] : MISSED_PX;
      else if (mask && kept) c = SHADE_PX;
      px[a * m + b] = c;
    }
  }
  off.getContext("2d").putImageData(img, 0, 0);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(off, margin, margin, m * cs, m * cs);
  // the marks, as on the page and in its exports: ★ a kept gold edge, × a missed one (not by
  // colour alone); drawn while a cell is large enough to hold one
  if (mask && cs >= 7) drawMarks(ctx, h, mask, vis, margin, cs);
  ctx.strokeStyle = "#9ca3af";
  ctx.strokeRect(margin - 0.5, margin - 0.5, m * cs + 1, m * cs + 1);
  // token labels: rows (queries) left, columns (keys) on top, every `step`-th when cells are small
  const step = Math.ceil(13 / cs);
  ctx.font = LABEL_FONT;
  ctx.fillStyle = "#4b5563";
  ctx.textBaseline = "middle";
  for (let a = 0; a < m; a += step) {
    const mid = margin + (a + 0.5) * cs;
    ctx.textAlign = "right";
    ctx.fillText(labels[vis[a]], margin - 4, mid);
    ctx.save();
    ctx.translate(mid, margin - 4);
    ctx.rotate(-Math.PI / 2);
    ctx.textAlign = "left";
    ctx.fillText(labels[vis[a]], 0, 0);
    ctx.restore();
  }
  const at = row === null ? -1 : vis.indexOf(row);
  if (at >= 0) {
    ctx.strokeStyle = ACCENT;
    ctx.lineWidth = 2;
    ctx.strokeRect(margin, margin + at * cs, m * cs, cs);
  }
  return { margin, cs, m, w };
}

/** Hovering a cell names its query and key tokens and their probability. */
function attachReadout(canvas, h, tokens, geo, vis) {
  const out = byId("embed-readout");
  canvas.addEventListener("mousemove", (ev) => {
    const r = canvas.getBoundingClientRect();
    const k = geo.w / r.width; // the canvas may be shown smaller than drawn (max-width)
    const a = Math.floor(((ev.clientY - r.top) * k - geo.margin) / geo.cs);
    const b = Math.floor(((ev.clientX - r.left) * k - geo.margin) / geo.cs);
    if (a < 0 || b < 0 || a >= geo.m || b >= geo.m) return;
    const i = vis[a];
    const j = vis[b];
    const p = h.probs[i * h.n + j];
    out.textContent = `${tokens[i]?.text ?? i} → ${tokens[j]?.text ?? j}: p = ${
      p > 0 ? p.toPrecision(3) : "0 (exact zero)"
    }`;
  });
  canvas.addEventListener("mouseleave", () => {
    out.textContent = "";
  });
}

/** The tile size of the block sparsity shown: the shared view's (the page's picker), else the
 * default (view-state.js). */
let block = field("block").default;

function showMetrics(values) {
  for (const dd of byId("embed-metrics").querySelectorAll("dd[data-metric]")) {
    const v = dd.dataset.metric === "block" ? values.block_sparsity?.[block] : values[dd.dataset.metric];
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
  const view = fromShare(s).state; // the flags, checked as the page checks them
  if (view.block !== undefined) block = view.block;
  byId("embed-block-name").textContent = `block sparsity (${block})`;
  setStatus("Analysing…");
  const analysis = await analyze({
    text: s.text,
    alpha: s.alpha,
    causal: s.causal,
    truncate: s.truncate,
    ...(s.truncate && s.start ? { start: s.start } : {}),
    ...(s.model ? { model: s.model } : {}),
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
  const labels = analysis.tokens.map((t) => tokenLabel(t.text));
  const vis = visibleTokens(analysis.tokens, view.hideSpecial === true);
  const geo = drawHeatmap(canvas, h, mask, s.token ?? null, labels, vis, roomFor(canvas));
  attachReadout(canvas, h, analysis.tokens, geo, vis);
  showMetrics({ gold_sparsity: h.goldSparsity });
  const summary = `${analysis.model} · ${h.n} tokens · ${h.goldCount} nonzero weights of ${h.n * h.n}`;
  if (mask) {
    showMetrics(computeMetrics(mask, h.gold, h.n, h.causal));
    setStatus(`${summary} · ★ kept · ×, red: weights ${s.method} misses`);
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
