/**
 * Figure exports of the main page, as Blobs ready to download:
 *
 * - heatmap PNG: the two on-screen canvases (cells, then labels and selection) composed on white
 *   and saved with `canvas.toBlob`, at the screen's pixel ratio;
 * - heatmap SVG: a standalone document drawn from the store (same colours as the canvas, from the
 *   same lookup tables): vector cells (runs of equal colour merged into one rect), ★ / × marks and
 *   token labels for at most `VECTOR_MAX` visible tokens; beyond that the cells are one embedded
 *   PNG `<image>` (one pixel per cell, scaled without smoothing) under vector axis labels;
 * - Pareto PNG / SVG: `Plotly.toImage` of the plot's own figure plus the current setting as a ★
 *   trace (on screen the ★ is an overlay outside the figure);
 * - POS PNG / SVG: an SVG of the cluster bars computed as the panel computes them, rasterised
 *   through an `<img>` for the PNG.
 *
 * Every piece of user text (tokens, method labels) goes through `xmlText`, so no token can break
 * out of an SVG element or attribute.
 */

import * as colours from "./colours.js";
import { fmt } from "./dom.js";
import { kmeansMembership } from "./methods.js";
import { xOf } from "./pareto.js";
import * as pos from "./pos.js";
import { tokenLabel, visibleTokens } from "./tokens.js";

/** Up to this many visible tokens the heatmap SVG is all vector. */
export const VECTOR_MAX = 128;
const SVG_NS = "http://www.w3.org/2000/svg";
const FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif";
const XML_ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&apos;" };

/**
 * Text safe inside an XML element or a quoted attribute: markup characters escaped, characters
 * XML 1.0 forbids (C0 controls but tab / newline / CR, U+FFFE, U+FFFF, lone surrogates) replaced.
 * @param {unknown} s
 */
export function xmlText(s) {
  return String(s)
    .replace(/[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]/g, "\uFFFD")
    .replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, "\uFFFD")
    .replace(/[&<>"']/g, (c) => XML_ESCAPES[c]);
}

/** A packed ImageData word (0xAABBGGRR) as `#rrggbb`. */
function packedHex(v) {
  const r = v & 255;
  const g = (v >>> 8) & 255;
  const b = (v >>> 16) & 255;
  return `#${((1 << 24) | (r << 16) | (g << 8) | b).toString(16).slice(1)}`;
}

/** Number for SVG coordinates: at most 2 decimals. */
const num = (x) => String(Math.round(x * 100) / 100);

/** The method's label, parameters and metrics, as the title line of an export. */
export function describe(s) {
  const a = s.analysis;
  const spec = a.methods.find((m) => m.name === s.method);
  const params = Object.entries(s.params).map(([k, v]) => `${k}=${v}`).join(", ");
  const m = s.result?.metrics;
  const b = m?.block_sparsity?.[s.block];
  const block = typeof b === "number" ? ` · block sparsity (${s.block}) ${fmt(b)}` : "";
  const metrics = m ? ` · recall ${fmt(m.recall)} · sparsity ${fmt(m.sparsity)}${block}` : "";
  return {
    head: `${a.model ? `${a.model} · ` : ""}layer ${s.layer} · head ${s.head} · n = ${a.n} · ${a.alpha === "own" ? "the model's own α" : `α = ${a.alpha}`}${a.causal ? " · causal" : ""}`,
    method: `${spec ? spec.label : s.method} (${params})${metrics}`,
  };
}

/** Split `text` into lines of at most `width` characters at spaces (a long word is cut). */
export function wrapLines(text, width, maxLines = 3) {
  const words = String(text).replace(/\s+/g, " ").trim().split(" ");
  const lines = [];
  let line = "";
  for (const w of words) {
    if (line && line.length + 1 + w.length > width) {
      lines.push(line);
      line = "";
    }
    line = line ? `${line} ${w}` : w.slice(0, width);
  }
  if (line) lines.push(line);
  if (lines.length > maxLines) {
    lines.length = maxLines;
    lines[maxLines - 1] = `${lines[maxLines - 1].slice(0, width - 1)}…`;
  }
  return lines;
}

/** The legend of the heatmap's colours and marks, as lines of an export. */
export const HEATMAP_LEGEND = [
  "rows: queries i · columns: keys j",
  "blue: p > 0 kept by the pattern (★) · red: p > 0 missed (×)",
  "sand: predicted by the pattern, p = 0 · white: exact zero, not predicted",
];

// ------------------------------------------------------------------------------ heatmap

/** Packed colour of cell x: the heatmap's own rule (heatmap.js `drawCells`). */
function cellPx(head, mask, x) {
  const kept = mask === null || mask[x] === 1;
  if (!head.gold[x]) return kept && mask !== null ? colours.SHADE_PX : colours.ZERO_PX;
  return (kept ? colours.PROB_LUT : colours.MISSED_LUT)[colours.probIndex(head.probs[x])];
}

/**
 * The open head's heatmap as a standalone SVG document (a string).
 * @param {import("./state.js").State} s
 */
export function heatmapSvg(s) {
  const head = s.headData;
  const a = s.analysis;
  const mask = s.result?.mask ?? null;
  const n = head.n;
  const vis = visibleTokens(a.tokens, s.hideSpecial);
  const m = vis.length;
  const labels = Array.from(vis, (t) => tokenLabel(a.tokens[t].text));
  const vector = m <= VECTOR_MAX;
  const cell = vector ? Math.max(4, Math.min(28, Math.floor(760 / m))) : 760 / m;
  const size = cell * m;
  const longest = Math.max(...labels.map((t) => t.length), 3);
  const margin = Math.min(120, Math.ceil(longest * 6.6) + 14);
  const d = describe(s);
  const left = margin + 10;
  const width = Math.max(left + size + 20, 560);
  // the subtitle (method, setting, metrics) and the text wrapped to the figure: nothing clipped
  const chars = Math.floor((width - 20) / 6.6);
  const methodLines = wrapLines(d.method, chars, 3);
  const textLines = wrapLines(`“${s.text}”`, chars, 2);
  const sub = 16 * (methodLines.length - 1);
  const top = margin + 56 + sub + 16 * textLines.length;
  const height = top + size + 24 + 15 * HEATMAP_LEGEND.length;
  const step = Math.ceil(14 / cell);
  const out = [];
  out.push(
    `<?xml version="1.0" encoding="UTF-8"?>`,
    `<svg xmlns="${SVG_NS}" xmlns:xlink="http://www.w3.org/1999/xlink" width="${num(width)}" height="${num(height)}" viewBox="0 0 ${num(width)} ${num(height)}" font-family="${xmlText(FONT)}">`,
    `<title>${xmlText(`sparsescope · ${d.head}`)}</title>`,
    `<rect width="100%" height="100%" fill="#ffffff"/>`,
    `<text x="10" y="20" font-size="14" font-weight="600" fill="#111827">${xmlText(d.head)}</text>`,
    ...methodLines.map((t, k) => `<text x="10" y="${38 + 16 * k}" font-size="12" fill="#374151">${xmlText(t)}</text>`),
    ...textLines.map((t, k) => `<text x="10" y="${56 + sub + 16 * k}" font-size="11" fill="#6b7280">${xmlText(t)}</text>`),
  );
  if (vector) {
    // runs of one colour per row: one rect each (white is the background)
    const rects = [];
    for (let r = 0; r < m; r++) {
      const row = vis[r] * n;
      let c0 = 0;
      let prev = cellPx(head, mask, row + vis[0]);
      for (let c = 1; c <= m; c++) {
        const px = c < m ? cellPx(head, mask, row + vis[c]) : -1;
        if (px === prev) continue;
        if (prev !== colours.ZERO_PX) {
          rects.push(`<rect x="${num(left + c0 * cell)}" y="${num(top + r * cell)}" width="${num((c - c0) * cell)}" height="${num(cell)}" fill="${packedHex(prev)}"/>`);
        }
        c0 = c;
        prev = px;
      }
    }
    out.push(`<g shape-rendering="crispEdges">${rects.join("")}</g>`);
    out.push(marks(s, vis, cell, left, top));
  } else {
    out.push(cellsImage(head, mask, vis, left, top, size));
  }
  out.push(`<rect x="${num(left - 0.5)}" y="${num(top - 0.5)}" width="${num(size + 1)}" height="${num(size + 1)}" fill="none" stroke="#9ca3af"/>`);
  // axis labels (every `step`-th when the cells are smaller than a line of text)
  const fs = Math.max(7, Math.min(12, cell * 0.85));
  const lab = [];
  for (let r = 0; r < m; r++) {
    if (r % step !== 0) continue;
    const mid = num((r + 0.5) * cell);
    const t = xmlText(labels[r]);
    lab.push(`<text x="${num(left - 6)}" y="${num(top)}" dy="${mid}" text-anchor="end" dominant-baseline="middle">${t}</text>`);
    lab.push(`<text transform="translate(${num(left)} ${num(top - 6)}) rotate(-90)" dy="${mid}" dominant-baseline="middle">${t}</text>`);
  }
  out.push(`<g font-size="${num(fs)}" fill="#4b5563">${lab.join("")}</g>`);
  HEATMAP_LEGEND.forEach((line, k) => {
    const y = top + size + 22 + 15 * k;
    out.push(`<text x="10" y="${num(y)}" font-size="11" fill="#6b7280">${xmlText(line)}</text>`);
  });
  out.push(`</svg>`);
  return out.join("\n");
}

/** ★ on kept gold edges and × on missed ones (dots on small cells), as two paths. */
function marks(s, vis, cell, left, top) {
  const head = s.headData;
  const mask = s.result?.mask ?? null;
  const pos = new Int32Array(head.n).fill(-1);
  vis.forEach((t, a) => (pos[t] = a));
  const big = cell >= 9;
  const r = big ? cell * 0.36 : Math.max(1, cell * 0.3);
  const stars = [];
  const crosses = [];
  for (let e = 0; e < head.goldCount; e++) {
    const i = head.edgeI[e];
    const j = head.edgeJ[e];
    const a = pos[i];
    const b = pos[j];
    if (a < 0 || b < 0) continue;
    const cx = left + (b + 0.5) * cell;
    const cy = top + (a + 0.5) * cell;
    const kept = mask === null || mask[i * head.n + j] === 1;
    if (kept) stars.push(big ? starPath(cx, cy, r) : `M${num(cx - r)} ${num(cy - r)}h${num(2 * r)}v${num(2 * r)}h${num(-2 * r)}Z`);
    else if (big) {
      const q = r * 0.7;
      crosses.push(`M${num(cx - q)} ${num(cy - q)}L${num(cx + q)} ${num(cy + q)}M${num(cx + q)} ${num(cy - q)}L${num(cx - q)} ${num(cy + q)}`);
    }
  }
  const parts = [];
  if (stars.length) {
    parts.push(`<path d="${stars.join("")}" fill="${colours.CAUGHT}" stroke="${big ? colours.CAUGHT_STROKE : "none"}" stroke-width="0.8"/>`);
  }
  if (crosses.length) {
    const w = Math.max(2, cell * 0.12);
    parts.push(`<path d="${crosses.join("")}" fill="none" stroke="#ffffff" stroke-width="${num(w + 2)}" stroke-linecap="round"/>`);
    parts.push(`<path d="${crosses.join("")}" fill="none" stroke="${colours.MISSED}" stroke-width="${num(w)}" stroke-linecap="round"/>`);
  }
  return `<g>${parts.join("")}</g>`;
}

function starPath(cx, cy, r) {
  let p = "";
  for (let k = 0; k < 10; k++) {
    const rad = k % 2 === 0 ? r : r * 0.45;
    const ang = -Math.PI / 2 + (k * Math.PI) / 5;
    p += `${k === 0 ? "M" : "L"}${num(cx + rad * Math.cos(ang))} ${num(cy + rad * Math.sin(ang))}`;
  }
  return `${p}Z`;
}

/** The cells as one PNG (a pixel per cell) scaled to the matrix, without smoothing. */
function cellsImage(head, mask, vis, left, top, size) {
  const m = vis.length;
  const canvas = document.createElement("canvas");
  canvas.width = canvas.height = m;
  const ctx = canvas.getContext("2d");
  const img = ctx.createImageData(m, m);
  const px = new Uint32Array(img.data.buffer);
  for (let a = 0; a < m; a++) {
    const row = vis[a] * head.n;
    for (let b = 0; b < m; b++) px[a * m + b] = cellPx(head, mask, row + vis[b]);
  }
  ctx.putImageData(img, 0, 0);
  const url = canvas.toDataURL("image/png");
  return `<image x="${num(left)}" y="${num(top)}" width="${num(size)}" height="${num(size)}" preserveAspectRatio="none" image-rendering="pixelated" style="image-rendering:pixelated" href="${url}" xlink:href="${url}"/>`;
}

/**
 * The heatmap as on screen (labels, locked row, selection included), as a PNG Blob.
 * @param {HTMLElement} root the heatmap's element (holds `.heatmap-cells` and `.heatmap-overlay`)
 * @returns {Promise<Blob>}
 */
export function heatmapPng(root, s = null) {
  const cells = root.querySelector(".heatmap-cells");
  const overlay = root.querySelector(".heatmap-overlay");
  if (!cells || cells.hidden || !cells.width) return Promise.reject(new Error("no heatmap is drawn yet"));
  // with the state: a title (head, method, metrics), the text and the legend around it
  const scale = cells.width / (parseFloat(cells.style.width) || cells.width);
  const d = s?.analysis ? describe(s) : null;
  const textLines = d ? wrapLines(`“${s.text}”`, 90, 2) : [];
  const head = d ? (46 + 16 * textLines.length) * scale : 0;
  const foot = d ? (12 + 15 * HEATMAP_LEGEND.length) * scale : 0;
  const out = document.createElement("canvas");
  out.width = Math.max(cells.width, d ? Math.round(560 * scale) : 0);
  out.height = cells.height + head + foot;
  const ctx = out.getContext("2d");
  ctx.fillStyle = "#ffffff";
  ctx.fillRect(0, 0, out.width, out.height);
  ctx.drawImage(cells, 0, head);
  if (overlay) ctx.drawImage(overlay, 0, head);
  if (d) {
    ctx.save();
    ctx.scale(scale, scale);
    ctx.textBaseline = "alphabetic";
    ctx.fillStyle = "#111827";
    ctx.font = `600 14px ${FONT}`;
    ctx.fillText(d.head, 10, 20);
    ctx.fillStyle = "#374151";
    ctx.font = `12px ${FONT}`;
    ctx.fillText(d.method, 10, 38);
    ctx.fillStyle = "#6b7280";
    ctx.font = `11px ${FONT}`;
    textLines.forEach((t, k) => ctx.fillText(t, 10, 56 + 16 * k));
    const y0 = (cells.height + head) / scale;
    HEATMAP_LEGEND.forEach((t, k) => ctx.fillText(t, 10, y0 + 14 + 15 * k));
    ctx.restore();
  }
  return canvasBlob(out);
}

/** `canvas.toBlob` as a promise. */
function canvasBlob(canvas) {
  return new Promise((resolve, reject) =>
    canvas.toBlob((b) => (b ? resolve(b) : reject(new Error("the browser could not encode the PNG"))), "image/png"),
  );
}

// ------------------------------------------------------------------------------ Pareto

/**
 * The Pareto plot as PNG or SVG, through `Plotly.toImage` of its figure plus the ★ of the current
 * setting.
 * @param {HTMLElement} gd the plot's element
 * @param {import("./state.js").State} s
 * @param {"png"|"svg"} format
 * @returns {Promise<Blob>}
 */
export async function paretoImage(gd, s, format) {
  const Plotly = window.Plotly;
  if (!Plotly || !gd.data || !gd.data.length) throw new Error("the Pareto plot is not drawn yet");
  const cur = s.scope === "mean" ? s.meanMetrics : s.result?.metrics;
  const data = [...gd.data];
  if (cur) {
    data.push({
      type: "scatter", mode: "markers", name: "current setting", x: [xOf(s.pareto, cur)], y: [cur.recall],
      marker: { symbol: "star", size: 18, color: "#111827", line: { color: "#ffffff", width: 1 } },
      hoverinfo: "skip",
    });
  }
  const where = s.scope === "mean" ? "mean over heads" : `layer ${s.layer}, head ${s.head}`;
  const layout = {
    ...gd.layout,
    showlegend: true, // the page's legend is HTML (pareto.js): the export draws Plotly's
    width: 900,
    height: 600,
    margin: { ...(gd.layout.margin ?? {}), t: 50 },
    title: { text: `${s.pareto?.x === "block" ? `Block sparsity (${s.pareto.block})` : "Sparsity"}–recall · ${where}${s.analysis?.model ? ` · ${s.analysis.model}` : ""}`, x: 0.02, font: { size: 15 } },
  };
  const url = await Plotly.toImage({ data, layout }, { format, width: 900, height: 600, scale: format === "png" ? 2 : 1 });
  return dataUrlBlob(url);
}

/** A `data:` URL (base64 or URL-encoded) as a Blob. */
export function dataUrlBlob(url) {
  const comma = url.indexOf(",");
  const head = url.slice(5, comma);
  const body = url.slice(comma + 1);
  const type = head.split(";")[0] || "application/octet-stream";
  if (head.endsWith(";base64")) {
    const bin = atob(body);
    const bytes = new Uint8Array(bin.length);
    for (let k = 0; k < bin.length; k++) bytes[k] = bin.charCodeAt(k);
    return new Blob([bytes], { type });
  }
  return new Blob([decodeURIComponent(body)], { type });
}

// ------------------------------------------------------------------------------ POS

/**
 * The POS panel's cluster bars as an SVG document, or null when the head has no clusters.
 * @param {import("./state.js").State} s
 */
export function posSvg(s) {
  const setting = pos.clusterSetting(s);
  const head = s.headData;
  if (!setting) return null;
  // the panel's own palette (a namespace import: a pos.js without it fails here, not at load)
  const UPOS = pos.UPOS;
  if (!Array.isArray(UPOS)) throw new Error("pos.js does not export its UPOS palette");
  const member = kmeansMembership(head, setting.clusters, setting.topK);
  const sides = [
    ["Queries", pos.posShares(member.queries, head.pos)],
    ["Keys", pos.posShares(member.keys, head.pos)],
  ];
  const B = setting.clusters;
  const barW = Math.max(16, Math.min(40, Math.floor(360 / B)));
  const gap = Math.round(barW * 0.35);
  const groupW = B * (barW + gap);
  const chartH = 220;
  const left = 44;
  const top = 64;
  const width = left + 2 * groupW + 60;
  const seen = new Set();
  const body = [];
  sides.forEach(([title, clusters], g) => {
    const x0 = left + g * (groupW + 40);
    body.push(`<text x="${x0}" y="${top - 10}" font-size="13" font-weight="600" fill="#111827">${title}</text>`);
    clusters.forEach(({ count, shares }, c) => {
      const x = x0 + c * (barW + gap);
      let y = top + chartH;
      for (const [tag, colour] of UPOS) {
        const share = shares.get(tag);
        if (!share) continue;
        seen.add(tag);
        const h = share * chartH;
        y -= h;
        body.push(`<rect x="${num(x)}" y="${num(y)}" width="${barW}" height="${num(h)}" fill="${colour}"><title>${xmlText(`cluster ${c} · ${title.toLowerCase()}: ${tag} ${(share * 100).toFixed(0)}%`)}</title></rect>`);
      }
      if (s.cluster === c) body.push(`<rect x="${num(x - 2)}" y="${top - 2}" width="${barW + 4}" height="${chartH + 4}" fill="none" stroke="${colours.CLUSTER}" stroke-width="2"/>`);
      body.push(`<text x="${num(x + barW / 2)}" y="${top + chartH + 15}" font-size="11" text-anchor="middle" fill="#374151">${c}</text>`);
      body.push(`<text x="${num(x + barW / 2)}" y="${top + chartH + 28}" font-size="9" text-anchor="middle" fill="#6b7280">n=${count}</text>`);
    });
  });
  const axis = [0, 0.5, 1].map((t) => {
    const y = num(top + chartH * (1 - t));
    return `<line x1="${left - 4}" x2="${width - 16}" y1="${y}" y2="${y}" stroke="#eef0f3"/><text x="${left - 8}" y="${y}" font-size="10" text-anchor="end" dominant-baseline="middle" fill="#6b7280">${t * 100}%</text>`;
  });
  const legend = [];
  let lx = left;
  const ly = top + chartH + 52;
  for (const [tag, colour] of UPOS.filter(([t]) => seen.has(t))) {
    legend.push(`<rect x="${lx}" y="${ly - 9}" width="11" height="11" fill="${colour}"/><text x="${lx + 15}" y="${ly}" font-size="11" fill="#374151">${tag}</text>`);
    lx += 26 + tag.length * 7.5;
  }
  const height = ly + 18;
  const w = Math.max(width, lx + 10);
  const caption = `layer ${s.layer} · head ${s.head} · k-means B = ${B}, top-${setting.topK} · POS shares of each cluster's tokens (special tokens left out)`;
  return [
    `<?xml version="1.0" encoding="UTF-8"?>`,
    `<svg xmlns="${SVG_NS}" width="${num(w)}" height="${num(height)}" viewBox="0 0 ${num(w)} ${num(height)}" font-family="${xmlText(FONT)}">`,
    `<rect width="100%" height="100%" fill="#ffffff"/>`,
    `<text x="10" y="20" font-size="14" font-weight="600" fill="#111827">k-means clusters by part of speech</text>`,
    `<text x="10" y="37" font-size="11" fill="#374151">${xmlText(caption)}</text>`,
    ...axis,
    ...body,
    ...legend,
    `</svg>`,
  ].join("\n");
}

/**
 * Rasterise an SVG document to a PNG Blob (at `scale` × its size) through an `<img>`.
 * @param {string} svg
 * @param {number} [scale]
 * @returns {Promise<Blob>}
 */
export function svgToPng(svg, scale = 2) {
  const url = URL.createObjectURL(new Blob([svg], { type: "image/svg+xml" }));
  return new Promise((resolve, reject) => {
    const img = new Image();
    img.onload = () => {
      const canvas = document.createElement("canvas");
      canvas.width = Math.ceil(img.naturalWidth * scale);
      canvas.height = Math.ceil(img.naturalHeight * scale);
      const ctx = canvas.getContext("2d");
      ctx.scale(scale, scale);
      ctx.drawImage(img, 0, 0);
      URL.revokeObjectURL(url);
      canvasBlob(canvas).then(resolve, reject);
    };
    img.onerror = () => {
      URL.revokeObjectURL(url);
      reject(new Error("the SVG could not be rasterised"));
    };
    img.src = url;
  });
}
