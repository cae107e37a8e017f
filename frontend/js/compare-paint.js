/**
 * Side by side's painting: one pane (A, B or the difference A − B) on its canvas from its class
 * image (compare-diff.js), the linked-hover outline, and the PNG export of the three panes with
 * the legend and counts.
 *
 * Colours: the panes use the heatmap's meaning (colours.js) in flat tones — blue a gold edge the
 * mask keeps, red one it misses, sand a zero the mask keeps, white a zero. The difference uses
 * the Okabe–Ito colour-blind-safe pair, each with its own mark so colour is never alone (the
 * legend shows the same marks, static/css/compare.css): only in A vermillion #d55e00 with a white
 * diagonal, only in B blue #0072b2 with a white dot, in both grey #8c8c8c, plain.
 */

import { ACCENT, MISSED, SHADE, ZERO } from "./colours.js";
import { DIFF, PANE, poolMax, poolPane } from "./compare-diff.js";
import { labelPlan } from "./heatmap-layout.js";
import { tokenLabel } from "./tokens.js";

export const ONLY_A = "#d55e00";
export const ONLY_B = "#0072b2";
export const BOTH = "#8c8c8c";
const KEPT = "#2f6db5";

const rgb = (hex) => [1, 3, 5].map((k) => parseInt(hex.slice(k, k + 2), 16));
const PANE_RGB = { [PANE.ZERO]: rgb(ZERO), [PANE.MASK]: rgb(SHADE), [PANE.KEPT]: rgb(KEPT), [PANE.MISSED]: rgb(MISSED) };
const DIFF_RGB = { [DIFF.NONE]: rgb(ZERO), [DIFF.BOTH]: rgb(BOTH), [DIFF.ONLY_B]: rgb(ONLY_B), [DIFF.ONLY_A]: rgb(ONLY_A) };
/** Cells at least this big (CSS px) get the diff's marks. */
const MARK_MIN = 7;

/** The panes' token labels' font (static/css/compare.css `.cmp-rows`, `.cmp-cols`). */
export const LABEL_FONT = "11px system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif";
/** The widest label margin (CSS px): a longer token is cut with "…". */
export const MAX_MARGIN = 64;
/** A matrix that would be narrower than this (CSS px) beside its labels' margin gets no labels:
 * the labels are drawn while they fit. */
export const LABELLED_MIN = 110;

let ruler = null;

/**
 * The label margin (CSS px) for panes of these tokens: the widest label (tokens.js `tokenLabel`)
 * in LABEL_FONT, at most MAX_MARGIN, plus a gap — one margin for every pane, so that the three
 * matrices keep one size.
 * @param {Array<Array<{text: string}>|null>} lists each pane's tokens (null: none yet)
 */
export function labelMargin(lists) {
  ruler ??= document.createElement("canvas").getContext("2d");
  ruler.font = LABEL_FONT;
  let widest = 10;
  for (const tokens of lists) {
    for (const t of tokens ?? []) widest = Math.max(widest, ruler.measureText(tokenLabel(t.text)).width);
  }
  return Math.ceil(Math.min(widest, MAX_MARGIN)) + 6;
}

/**
 * The pane's side in CSS px (its canvas is square, as wide as its figure less the labels'
 * margin `p.margin0` while a matrix of at least LABELLED_MIN fits beside it); measured on a
 * resize and when the margin changes (compare.js), so that a slider frame forces no layout.
 */
export function measure(p) {
  const width = Math.floor(p.fig.getBoundingClientRect().width || 240);
  const margin = p.labels && p.margin0 && width - p.margin0 >= LABELLED_MIN ? p.margin0 : 0;
  p.margin = margin;
  p.sideCss = Math.max(60, width - margin);
}

/**
 * Pane `p`'s token labels on its axes (query rows at the left, key columns on top, rotated), by
 * the main heatmap's rule (heatmap-layout.js `labelPlan` at zoom 1): every step-th token, one
 * per heatmap-layout.js LABEL_PX of cells; none while they do not fit (`p.margin` 0). Rebuilt only when the
 * tokens, the side or the margin changed.
 * @param {object} p {plot, rows, cols, labels: string[]|null, n, sideCss, margin}
 */
export function paintLabels(p) {
  const labels = p.margin && p.labels && p.labels.length === p.n ? p.labels : null;
  const key = labels ? `${p.sideCss}|${p.margin}|${p.n}` : "";
  if (p.labelKey === key && p.labelsOf === labels) return;
  p.labelKey = key;
  p.labelsOf = labels;
  p.plot.style.paddingLeft = p.plot.style.paddingTop = `${labels ? p.margin : 0}px`;
  p.fig.classList.toggle("labelled", Boolean(labels));
  if (!labels) {
    p.rows.replaceChildren();
    p.cols.replaceChildren();
    return;
  }
  for (const box of [p.rows, p.cols]) {
    box.style.width = box === p.rows ? `${p.margin - 4}px` : `${p.sideCss}px`;
    box.style.height = box === p.rows ? `${p.sideCss}px` : `${p.margin - 4}px`;
    box.style.left = box === p.rows ? "0" : `${p.margin}px`;
    box.style.top = box === p.rows ? `${p.margin}px` : "0";
  }
  const plan = labelPlan({ m: p.n, left: 0, top: 0, size: p.sideCss, labels },
    { ec: p.sideCss / p.n, x0: 0, y0: 0 }, new Set());
  const span = (text, a, prop, at) => {
    const s = document.createElement("span");
    s.textContent = text;
    s.dataset.token = String(a);
    s.style[prop] = `${at}px`;
    return s;
  };
  p.rows.replaceChildren(...plan.map((it) => span(it.text, it.a, "top", it.row)));
  p.cols.replaceChildren(...plan.map((it) => span(it.text, it.a, "left", it.col)));
}

/** Pane `p`'s labels from an analysis' tokens (null: none). */
export function labelsOf(tokens) {
  return tokens ? tokens.map((t) => tokenLabel(t.text)) : null;
}

/**
 * Render pane `p`'s classes into its offscreen image, pooled to its size: the difference's from
 * its class image (`p.codes`, n × n), A's and B's from their gold graph and mask (`p.src`,
 * compare-diff.js `poolPane`); once per new class image (a slider frame re-renders only the panes
 * whose classes changed). A pane with data has n > 0.
 * @param {object} p {fig, canvas, off, codes, src, n}
 * @param {boolean} isDiff the difference pane (its colours)
 */
export function renderPane(p, isDiff = false) {
  if (!p.sideCss) measure(p);
  if (!p.n) return;
  const dpr = window.devicePixelRatio || 1;
  const side = Math.round(p.sideCss * dpr);
  const { img, m } = p.src ? poolPane(p.src.gold, p.src.mask, p.n, side) : poolMax(p.codes, p.n, side);
  const lut = isDiff ? DIFF_RGB : PANE_RGB;
  if (p.off.width !== m) p.off.width = p.off.height = m;
  const octx = p.off.getContext("2d");
  const data = octx.createImageData(m, m);
  const px = data.data;
  for (let x = 0, k = 0; x < m * m; x++, k += 4) {
    const c = lut[img[x]];
    px[k] = c[0];
    px[k + 1] = c[1];
    px[k + 2] = c[2];
    px[k + 3] = 255;
  }
  octx.putImageData(data, 0, 0);
}

/**
 * Show pane `p`: its rendered image scaled to the canvas, the diff's marks, and the hovered cell.
 * @param {object} p
 * @param {{i: number, j: number}|null} hover
 * @param {boolean} isDiff
 */
export function paintPane(p, hover, isDiff = false) {
  if (!p.sideCss) measure(p);
  const side = p.sideCss;
  const dpr = window.devicePixelRatio || 1;
  const w = Math.round(side * dpr);
  // drawn at the figure's width; shown at 100 % of it (static/css/compare.css), square
  if (p.canvas.width !== w) p.canvas.width = p.canvas.height = w;
  p.side = side;
  const ctx = p.canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.fillStyle = "#f8fafc";
  ctx.fillRect(0, 0, side, side);
  if (!p.n) return;
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(p.off, 0, 0, side, side);
  if (isDiff) drawMarks(ctx, p.codes, p.n, side);
  ctx.strokeStyle = "#cbd5e1";
  ctx.lineWidth = 1;
  ctx.strokeRect(0.5, 0.5, side - 1, side - 1);
  if (hover) outlineCell(p, hover);
}

/** The marks of the diff's classes where cells are big enough: ╱ only in A, • only in B. */
function drawMarks(ctx, codes, n, side) {
  const c = side / n;
  if (c < MARK_MIN) return;
  ctx.strokeStyle = ctx.fillStyle = "#ffffff";
  ctx.lineWidth = Math.max(1, c / 8);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < n; j++) {
      const v = codes[i * n + j];
      const x = j * c, y = i * c;
      if (v === DIFF.ONLY_A) {
        ctx.beginPath();
        ctx.moveTo(x + c * 0.2, y + c * 0.8);
        ctx.lineTo(x + c * 0.8, y + c * 0.2);
        ctx.stroke();
      } else if (v === DIFF.ONLY_B) {
        ctx.beginPath();
        ctx.arc(x + c / 2, y + c / 2, c * 0.18, 0, 2 * Math.PI);
        ctx.fill();
      }
    }
  }
}

/**
 * Outline cell (i, j) on pane `p` (painted: paintPane) with a crosshair.
 * @param {object} p
 * @param {{i: number, j: number}|null} hover
 */
export function outlineCell(p, hover) {
  const ctx = p.canvas.getContext("2d");
  if (!hover || !p.n || hover.i >= p.n || hover.j >= p.n) return;
  const c = p.side / p.n;
  const w = Math.max(c, 4);
  const x = (hover.j + 0.5) * c - w / 2, y = (hover.i + 0.5) * c - w / 2;
  ctx.save();
  ctx.strokeStyle = ACCENT;
  ctx.lineWidth = 2;
  ctx.strokeRect(x - 1, y - 1, w + 2, w + 2);
  ctx.globalAlpha = 0.35;
  ctx.lineWidth = 1;
  ctx.beginPath();
  ctx.moveTo(0, (hover.i + 0.5) * c);
  ctx.lineTo(p.side, (hover.i + 0.5) * c);
  ctx.moveTo((hover.j + 0.5) * c, 0);
  ctx.lineTo((hover.j + 0.5) * c, p.side);
  ctx.stroke();
  ctx.restore();
}

/**
 * The three panes, their titles, the legend with its counts and what the diff compares, as one
 * PNG at 2× (a Blob).
 * @param {object[]} panes painted panes
 * @param {{basis: string, onlyA: number, onlyB: number, both: number, jaccard: number}} it
 * @param {string} title
 * @returns {Promise<Blob>}
 */
export function comparePng(panes, it, title) {
  const side = 420, gap = 24, pad = 24, scale = 2;
  const width = pad * 2 + side * 3 + gap * 2;
  const height = pad + 28 + 22 + side + 70;
  const cv = document.createElement("canvas");
  cv.width = width * scale;
  cv.height = height * scale;
  const ctx = cv.getContext("2d");
  ctx.scale(scale, scale);
  ctx.fillStyle = "#ffffff";
  ctx.fillRect(0, 0, width, height);
  ctx.fillStyle = "#111827";
  ctx.font = "600 18px system-ui, sans-serif";
  ctx.fillText(title, pad, pad + 14);
  ctx.font = "13px system-ui, sans-serif";
  const top = pad + 28 + 22;
  panes.forEach((p, k) => {
    const x = pad + k * (side + gap);
    ctx.fillStyle = "#111827";
    ctx.fillText(p.title.textContent, x, top - 8, side);
    ctx.imageSmoothingEnabled = false;
    if (!p.n) return;
    ctx.drawImage(p.off, x, top, side, side); // the pane's own image (cells, or pooled)
    ctx.save();
    ctx.translate(x, top);
    if (k === panes.length - 1 && p.codes) drawMarks(ctx, p.codes, p.n, side); // the difference's marks
    ctx.strokeStyle = "#cbd5e1";
    ctx.strokeRect(0.5, 0.5, side - 1, side - 1);
    ctx.restore();
  });
  // the legend: swatch with its mark, words and count
  const y = top + side + 28;
  let x = pad;
  ctx.fillStyle = "#111827";
  const basis = `A − B over the ${it.basis}:`;
  ctx.fillText(basis, x, y + 11);
  x += ctx.measureText(basis).width + 14;
  for (const [colour, text, count, mark] of [[ONLY_A, "only in A", it.onlyA, "a"], [ONLY_B, "only in B", it.onlyB, "b"], [BOTH, "in both", it.both, ""]]) {
    ctx.fillStyle = colour;
    ctx.fillRect(x, y, 14, 14);
    ctx.strokeStyle = ctx.fillStyle = "#ffffff";
    ctx.lineWidth = 2;
    ctx.beginPath();
    if (mark === "a") {
      ctx.moveTo(x + 3, y + 11);
      ctx.lineTo(x + 11, y + 3);
      ctx.stroke();
    } else if (mark === "b") {
      ctx.arc(x + 7, y + 7, 2.6, 0, 2 * Math.PI);
      ctx.fill();
    }
    ctx.fillStyle = "#111827";
    const words = `${text} ${count}`;
    ctx.fillText(words, x + 20, y + 11);
    x += 20 + ctx.measureText(words).width + 18;
  }
  ctx.fillText(`overlap |A∩B| / |A∪B| = ${it.jaccard.toFixed(3)}`, x, y + 11);
  ctx.fillStyle = "#4b5563";
  ctx.fillText("panes: blue kept gold edge · red missed · sand predicted, p = 0 · white zero", pad, y + 38);
  return new Promise((resolve, reject) => cv.toBlob((blob) => (blob ? resolve(blob) : reject(new Error("PNG export failed"))), "image/png"));
}
