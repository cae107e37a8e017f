/**
 * Canvas matrices for slides: an n × m grid of cells with token labels on both axes, optional
 * numbers in the cells, and an overlay hook (stars, circles). One canvas per matrix, drawn at the
 * device pixel ratio; never one DOM element per cell.
 * @module lecture/matrix
 */

import { el } from "../dom.js";

/**
 * @typedef {object} Cell
 * @property {string} fill      CSS colour of the cell
 * @property {string} [text]    text drawn in the cell when it is large enough
 * @property {string} [ink]     colour of that text (default: dark or light by fill)
 * @property {boolean} [hatch]  draw diagonal hatching (masked / exactly zero)
 */

/**
 * @typedef {object} MatrixSpec
 * @property {string[]} rows          row labels (queries)
 * @property {string[]} cols          column labels (keys, or vector dimensions)
 * @property {(i: number, j: number) => Cell} cell
 * @property {number} width           CSS pixels available
 * @property {number} height          CSS pixels available
 * @property {string} [rowAxis]       axis caption on the left, e.g. "query i"
 * @property {string} [colAxis]       axis caption on top, e.g. "key j"
 * @property {boolean[]} [rowDim]     dim these row labels (special tokens)
 * @property {boolean[]} [colDim]
 * @property {number} [maxCell=72]    largest cell edge in CSS px
 * @property {boolean} [showText=true] numbers in cells when there is room
 * @property {(ctx: CanvasRenderingContext2D, g: Geometry) => void} [overlay]
 */

/**
 * @typedef {object} Geometry
 * @property {number} x0 left of the grid (CSS px)
 * @property {number} y0 top of the grid
 * @property {number} cell cell edge
 * @property {number} n rows
 * @property {number} m columns
 * @property {(x: number, y: number) => ({i: number, j: number} | null)} hit
 * @property {(i: number, j: number) => [number, number]} center
 */

const FONT = '"Source Sans 3", "Segoe UI", system-ui, sans-serif';
const INK = "#1d232b";
const MUTED = "#8a94a3";
/** Smallest text drawn on a canvas (CSS px): the lecture's floor for a projector. */
export const MIN_FONT = 14;

/**
 * Draw a matrix into a new canvas.
 * @param {MatrixSpec} spec
 * @returns {{canvas: HTMLCanvasElement, geom: Geometry}}
 */
export function drawMatrix(spec) {
  const { rows, cols, width, height } = spec;
  const n = rows.length;
  const m = cols.length;
  const canvas = /** @type {HTMLCanvasElement} */ (el("canvas", { class: "matrix" }));
  const ctx = /** @type {CanvasRenderingContext2D} */ (canvas.getContext("2d"));

  // Two passes: the label font depends on the cell size, which depends on the label widths.
  let cell = Math.min(spec.maxCell ?? 72, width / (m + 4), height / (n + 4));
  let font = 0;
  let rowLab = 0;
  let colLab = 0;
  const axisPad = spec.rowAxis ? 1 : 0;
  for (let pass = 0; pass < 2; pass++) {
    font = Math.round(Math.max(MIN_FONT, Math.min(22, cell * 0.6)));
    ctx.font = `${font}px ${FONT}`;
    rowLab = Math.max(...rows.map((s) => ctx.measureText(s).width), 0) + font * 0.7;
    const colW = Math.max(...cols.map((s) => ctx.measureText(s).width), 0);
    colLab = colW * Math.SQRT1_2 + font * 1.2; // labels at −45°
    const axis = axisPad * font * 1.6;
    cell = Math.min(
      spec.maxCell ?? 72,
      (width - rowLab - axis - colLab * 0.6) / m,
      (height - colLab - axis) / n,
    );
    cell = Math.max(4, Math.floor(cell));
  }
  const axis = axisPad * font * 1.6;
  const x0 = Math.ceil(axis + rowLab);
  const y0 = Math.ceil(axis + colLab);
  const w = Math.ceil(x0 + m * cell + colLab * 0.6);
  const h = Math.ceil(y0 + n * cell + 4);

  const dpr = window.devicePixelRatio || 1;
  canvas.width = Math.round(w * dpr);
  canvas.height = Math.round(h * dpr);
  canvas.style.width = `${w}px`;
  canvas.style.height = `${h}px`;
  ctx.scale(dpr, dpr);

  // cells; a value is printed only where it is legible: at >= MIN_FONT px and narrower than
  // its cell (hovering any cell shows its value in the tooltip)
  const cellFont = Math.floor(Math.min(18, cell * 0.42));
  const showText = spec.showText !== false && cellFont >= MIN_FONT;
  let printed = 0;
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < m; j++) {
      const c = spec.cell(i, j);
      const x = x0 + j * cell;
      const y = y0 + i * cell;
      ctx.fillStyle = c.fill;
      ctx.fillRect(x, y, cell, cell);
      if (c.hatch) hatch(ctx, x, y, cell);
      if (showText && c.text) {
        ctx.font = `${cellFont}px ${FONT}`;
        if (ctx.measureText(c.text).width > cell - 4) continue;
        printed++;
        ctx.fillStyle = c.ink ?? (isDark(c.fill) ? "#ffffff" : INK);
        ctx.textAlign = "center";
        ctx.textBaseline = "middle";
        ctx.fillText(c.text, x + cell / 2, y + cell / 2 + 1);
      }
    }
  }
  // grid lines (only when cells are big enough to read them)
  if (cell >= 10) {
    ctx.strokeStyle = "rgba(255,255,255,0.9)";
    ctx.lineWidth = cell >= 24 ? 1.5 : 1;
    ctx.beginPath();
    for (let i = 0; i <= n; i++) {
      ctx.moveTo(x0, y0 + i * cell);
      ctx.lineTo(x0 + m * cell, y0 + i * cell);
    }
    for (let j = 0; j <= m; j++) {
      ctx.moveTo(x0 + j * cell, y0);
      ctx.lineTo(x0 + j * cell, y0 + n * cell);
    }
    ctx.stroke();
  }

  // labels; on long texts only every k-th one, so that they never overlap
  const rowStep = Math.max(1, Math.ceil((font * 1.05) / cell));
  const colStep = Math.max(1, Math.ceil(font / (cell * Math.SQRT1_2)));
  ctx.font = `${font}px ${FONT}`;
  ctx.textBaseline = "middle";
  ctx.textAlign = "right";
  for (let i = 0; i < n; i += rowStep) {
    ctx.fillStyle = spec.rowDim?.[i] ? MUTED : INK;
    ctx.fillText(rows[i], x0 - font * 0.4, y0 + (i + 0.5) * cell);
  }
  ctx.textAlign = "left";
  for (let j = 0; j < m; j += colStep) {
    ctx.save();
    ctx.translate(x0 + (j + 0.5) * cell, y0 - font * 0.4);
    ctx.rotate(-Math.PI / 4);
    ctx.fillStyle = spec.colDim?.[j] ? MUTED : INK;
    ctx.fillText(cols[j], 0, 0);
    ctx.restore();
  }
  // axis captions
  ctx.fillStyle = MUTED;
  ctx.font = `italic ${font}px ${FONT}`;
  if (spec.rowAxis) {
    ctx.save();
    ctx.translate(font * 0.8, y0 + (n * cell) / 2);
    ctx.rotate(-Math.PI / 2);
    ctx.textAlign = "center";
    ctx.fillText(spec.rowAxis, 0, 0);
    ctx.restore();
  }
  if (spec.colAxis) {
    ctx.textAlign = "right";
    ctx.fillText(spec.colAxis, x0 - font * 0.4, y0 - font * 0.8);
  }

  /** @type {Geometry} */
  const geom = {
    x0,
    y0,
    cell,
    n,
    m,
    hit(x, y) {
      const j = Math.floor((x - x0) / cell);
      const i = Math.floor((y - y0) / cell);
      return i >= 0 && i < n && j >= 0 && j < m ? { i, j } : null;
    },
    center: (i, j) => [x0 + (j + 0.5) * cell, y0 + (i + 0.5) * cell],
  };
  if (spec.overlay) spec.overlay(ctx, geom);
  // the smallest text drawn, for the legibility test (canvas text is not in the DOM)
  canvas.dataset.minFont = String(printed ? Math.min(font, cellFont) : font);
  canvas.dataset.values = String(printed);
  return { canvas, geom };
}

/** Diagonal hatching inside one cell. */
function hatch(ctx, x, y, s) {
  ctx.save();
  ctx.beginPath();
  ctx.rect(x, y, s, s);
  ctx.clip();
  ctx.strokeStyle = "rgba(60,70,85,0.22)";
  ctx.lineWidth = 1;
  const step = Math.max(4, s / 5);
  ctx.beginPath();
  for (let d = -s; d < s; d += step) {
    ctx.moveTo(x + d, y + s);
    ctx.lineTo(x + d + s, y);
  }
  ctx.stroke();
  ctx.restore();
}

/**
 * Show a tooltip over a matrix while the pointer is on a cell.
 * @param {HTMLCanvasElement} canvas
 * @param {Geometry} geom
 * @param {(i: number, j: number) => string} describe plain text for cell (i, j)
 * @returns {HTMLElement} a wrapper holding the canvas and its tooltip
 */
export function withTooltip(canvas, geom, describe) {
  const tip = el("div", { class: "tip", attrs: { hidden: true, role: "status" } });
  const wrap = el("div", { class: "matrix-wrap" }, [canvas, tip]);
  canvas.addEventListener("pointermove", (ev) => {
    const r = canvas.getBoundingClientRect();
    const x = ev.clientX - r.left;
    const y = ev.clientY - r.top;
    const h = geom.hit(x, y);
    if (!h) {
      tip.hidden = true;
      return;
    }
    tip.textContent = describe(h.i, h.j);
    tip.hidden = false;
    tip.style.left = `${canvas.offsetLeft + x + 14}px`;
    tip.style.top = `${canvas.offsetTop + y + 14}px`;
  });
  canvas.addEventListener("pointerleave", () => {
    tip.hidden = true;
  });
  return wrap;
}

// ------------------------------------------------------------------------------------- colours

/** Linear interpolation between two RGB triples, as a CSS colour. */
function mix(a, b, t) {
  const c = a.map((v, k) => Math.round(v + (b[k] - v) * t));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}

const WHITE = [255, 255, 255];
const RED = [196, 48, 43];
const BLUE = [37, 99, 170];
const INDIGO = [49, 38, 132];
const TEAL = [12, 116, 110];

/**
 * Diverging colour for a signed value: blue (negative) – white – red (positive).
 * @param {number} v @param {number} maxAbs scale
 */
export function diverging(v, maxAbs) {
  const t = Math.max(-1, Math.min(1, v / (maxAbs || 1)));
  return t >= 0 ? mix(WHITE, RED, t) : mix(WHITE, BLUE, -t);
}

/**
 * Sequential colour for a probability p in [0, 1]; every p > 0 gets a visible tint so that exact
 * zeros (drawn separately) stand apart from small weights.
 * @param {number} p
 * @param {"indigo"|"teal"} [hue="indigo"]
 */
export function sequential(p, hue = "indigo") {
  const t = p <= 0 ? 0 : 0.1 + 0.9 * Math.pow(Math.min(1, p), 0.6);
  return mix(WHITE, hue === "teal" ? TEAL : INDIGO, t);
}

/** Fill of an exactly-zero cell and of a masked (−∞) cell. */
export const ZERO_FILL = "#ffffff";
export const MASK_FILL = "#4b5563";
/** Fill of a masked cell in probability views (lighter: the mask is old news there). */
export const FUTURE_FILL = "#d7dbe0";

/** Rough luminance test for choosing the cell text colour. */
function isDark(fill) {
  const m = /rgb\((\d+),(\d+),(\d+)\)/.exec(fill);
  if (!m) return fill === MASK_FILL;
  const [r, g, b] = m.slice(1).map(Number);
  return 0.299 * r + 0.587 * g + 0.114 * b < 140;
}

/**
 * Draw a five-pointed star centred at (x, y).
 * @param {CanvasRenderingContext2D} ctx
 * @param {number} x @param {number} y @param {number} r outer radius
 * @param {string} fill
 * @param {string} [stroke]
 */
export function star(ctx, x, y, r, fill, stroke) {
  ctx.beginPath();
  for (let k = 0; k < 10; k++) {
    const rad = k % 2 === 0 ? r : r * 0.45;
    const a = -Math.PI / 2 + (k * Math.PI) / 5;
    const px = x + rad * Math.cos(a);
    const py = y + rad * Math.sin(a);
    if (k === 0) ctx.moveTo(px, py);
    else ctx.lineTo(px, py);
  }
  ctx.closePath();
  ctx.fillStyle = fill;
  ctx.fill();
  if (stroke) {
    ctx.strokeStyle = stroke;
    ctx.lineWidth = Math.max(1, r / 6);
    ctx.stroke();
  }
}
