/**
 * The heatmap's layout, pure (no DOM; tests/js/heatmap_layout.test.mjs): for a head of n tokens
 * (its visible ones: special tokens hidden or not) and the room the page gives it, the cell size,
 * the label margins, the canvas size; the height it may take; the minimap's corner; and which
 * token labels are drawn where for a viewport (heatmap-zoom.js).
 *
 * Sizes are CSS px. The matrix is m × m cells of side `cell` (whole pixels from 4 px up, so grid
 * lines are crisp; at most MAX_CELL), at (`left`, `top`) = the label margin, and fills at most
 * MAX_SIZE.
 */

import { tokenLabel, visibleTokens } from "./tokens.js";

export const LABEL_PX = 14; // vertical room one label needs
export const MAX_LABEL = 110; // widest label margin (CSS px)
export const MAX_SIZE = 880; // largest matrix side (CSS px)
export const MAX_CELL = 28; // largest cell (CSS px): a short text stays small enough to leave room
export const BELOW_HEATMAP = 14; // CSS px kept under the matrix (the hint and the token strip)
export const STAR_MIN = 9; // cells at least this big (CSS px) get ★ / × marks, smaller ones dots
export const DOT_MIN = 3; // cells at least this big get dots
export const GRID_MIN = 10; // cells at least this big get grid lines
/** A narrower window is one column: the page scrolls and the width alone sizes the matrix. */
export const NARROW = 700;
/**
 * Fitting the window's height may not shrink cells below this (CSS px): a long text's matrix
 * takes the width it has instead (the page scrolls), and the page gives it the wide layout
 * (`BIG_HEAD` tokens and more: main.js) — ≥ 700 px square at 1440 × 900 for n ≈ 500.
 */
export const MIN_FIT_CELL = 2;
export const BIG_HEAD = 256;

/**
 * @typedef {object} Layout
 * @property {Int32Array} vis visible index -> token
 * @property {Int32Array} pos token -> visible index (-1: hidden)
 * @property {number} m visible tokens
 * @property {string[]} labels the visible tokens' labels
 * @property {number} left x of the matrix (the row labels' margin)
 * @property {number} top y of the matrix (the column labels' margin)
 * @property {number} cell a cell's side at zoom 1
 * @property {number} size the matrix's side
 * @property {number} width the canvas's width
 * @property {number} height the canvas's height
 * @property {number} step every step-th label is drawn at zoom 1
 */

/**
 * The layout of a head.
 * @param {object} o
 * @param {Array<{text: string, special: boolean}>} o.tokens the analysis' tokens
 * @param {number} o.n the head's tokens (tokens.length)
 * @param {boolean} o.hideSpecial leave out [CLS] / [SEP]
 * @param {(text: string) => number} o.measure a label's width (CSS px) in the label font
 * @param {number} o.width the room's width (the heatmap element's clientWidth)
 * @param {number} o.fit the height it may take (`fitHeight`)
 * @returns {Layout}
 */
export function layoutOf({ tokens, n, hideSpecial, measure, width, fit }) {
  const vis = visibleTokens(tokens, hideSpecial);
  const m = vis.length;
  const labels = Array.from(vis, (t) => tokenLabel(tokens[t].text));
  const widest = Math.max(...labels.map(measure), 10);
  const margin = Math.ceil(Math.min(widest, MAX_LABEL)) + 10;
  const byWidth = width - margin - 12;
  const byHeight = fit - margin;
  const avail = Math.max(160, m * MIN_FIT_CELL > byHeight ? byWidth : Math.min(byWidth, byHeight));
  let cell = Math.min(avail, MAX_SIZE) / m;
  if (cell >= 4) cell = Math.min(MAX_CELL, Math.floor(cell)); // whole pixels: crisp grid lines
  const size = cell * m;
  const pos = new Int32Array(n).fill(-1); // token -> visible index
  vis.forEach((t, a) => (pos[t] = a));
  return { vis, pos, m, labels, left: margin, top: margin, cell, size,
    width: margin + size + 8, height: margin + size + 8, step: Math.ceil(LABEL_PX / cell) };
}

/**
 * The height the matrix may take: on a wide window, what is left of the window below the
 * heatmap's top (`top`: in the page, not scrolled) less the hint and the token strip, so that the
 * heatmap, the metrics and the Pareto plot are on one screen; on a narrow one (one column,
 * scrolling), the width decides (Infinity).
 */
export function fitHeight({ innerWidth, innerHeight, top }) {
  if (innerWidth < NARROW) return Infinity;
  return Math.max(300, innerHeight - top - BELOW_HEATMAP);
}

/** The minimap (the whole matrix, small, when zoomed) in the labels' empty corner. */
export function minimapBox(lay) {
  const side = Math.max(40, Math.min(lay.left, lay.top) - 16);
  return { x: 4, y: 4, side };
}

/**
 * Which labels are drawn, and where, for a viewport: every `step`-th one (one per LABEL_PX of
 * the zoomed cells) and every `strong` one (locked, hovered); a row label at `y` (its centre, or
 * null when off the matrix) right-aligned at `x` = left - 8, a column label at `x` (null when
 * off), rotated, from `y` = top - 8.
 * @param {Layout} lay
 * @param {{ec: number, x0: number, y0: number}} view heatmap-zoom.js `viewport`
 * @param {Set<number>} strong visible indices drawn bold
 * @returns {Array<{a: number, text: string, strong: boolean, row: number|null, col: number|null}>}
 */
export function labelPlan(lay, view, strong) {
  const { m, left, top, size, labels } = lay;
  const { ec, x0, y0 } = view;
  const step = Math.ceil(LABEL_PX / ec);
  const out = [];
  for (let a = 0; a < m; a++) {
    const bold = strong.has(a);
    if (a % step !== 0 && !bold) continue;
    const my = y0 + (a + 0.5) * ec;
    const mx = x0 + (a + 0.5) * ec;
    out.push({
      a,
      text: labels[a],
      strong: bold,
      row: my >= top && my <= top + size ? my : null,
      col: mx >= left && mx <= left + size ? mx : null,
    });
  }
  return out;
}
