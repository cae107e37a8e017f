/**
 * The heatmap's level of detail (tests/js/heatmap_lod.test.mjs): a long text's head drawn as a
 * max-pooled picture of the visible region, so that no gold edge vanishes at any n or zoom.
 *
 * A canvas scaled down with nearest-neighbour sampling shows one cell of every f it covers: at
 * n = 4,096 on an 800 px square, 4 rows of 5 are simply not drawn, and a gold edge on them is
 * lost. Here the visible region (rows a0 … a1 − 1, columns b0 … b1 − 1 of the visible cells) is
 * pooled into f × f blocks, f = ⌈1 / (ec · dpr)⌉ for a zoomed cell of ec CSS px (so one block is
 * at least one device pixel and the picture is only ever scaled up), and a block's colour is
 * decided by the cells it holds, in this order:
 *
 *   any gold edge the method misses -> the red ramp on the largest such p (a × never hides);
 *   else any gold edge              -> the blue ramp on the largest p (max pooling);
 *   else any pair the mask predicts -> the sand shade;
 *   else                            -> white (every pair an exact zero).
 *
 * With f = 1 that is exactly heatmap-draw.js `fillCells` on the region (tested). The cost is the
 * gold edges of the visible rows (read through `rowStarts`, a CSR index of the head's row-major
 * edges) plus, under a method, one read of the mask per visible cell: never a full-size image.
 * The same pooling of the whole matrix to ≤ OVERVIEW px is the minimap (the overview); the
 * server's tile pyramid (app/engine/lod.py, GET …/tiles/{level}/{ti}/{tj}) pools the same way.
 */

import * as colours from "./colours.js";
import { centreOn, maxZoom } from "./heatmap-zoom.js";

/** Above this many visible tokens the heatmap always paints through the pooled region. */
export const LOD_MIN = 1024;
/** The overview's side at most (pooled cells), as the server's tile. */
export const OVERVIEW = 256;

/** Whether the heatmap paints pooled regions: a long text, or cells under one device pixel. */
export function lodActive(lay, dpr = 1) {
  return lay.m > LOD_MIN || lay.cell * dpr < 1;
}

/**
 * CSR index of the head's gold edges (row-major, as head.js orders them): the edges of query i
 * are e = starts[i] … starts[i + 1] − 1.
 * @param {number} n
 * @param {Int32Array} edgeI
 * @returns {Int32Array} n + 1
 */
export function rowStarts(n, edgeI) {
  const starts = new Int32Array(n + 1);
  for (let e = 0; e < edgeI.length; e++) starts[edgeI[e] + 1]++;
  for (let i = 0; i < n; i++) starts[i + 1] += starts[i];
  return starts;
}

/**
 * The region of visible cells a viewport shows, and its pooling.
 * @param {{m: number, cell: number}} lay
 * @param {{z: number, r0: number, c0: number}} zoom
 * @param {number} dpr device pixels per CSS px
 * @returns {{a0: number, a1: number, b0: number, b1: number, f: number, rows: number, cols: number}}
 */
export function regionOf(lay, zoom, dpr = 1) {
  const { m } = lay;
  const k = m / zoom.z; // visible cells a side
  const a0 = Math.max(0, Math.floor(zoom.r0));
  const b0 = Math.max(0, Math.floor(zoom.c0));
  const a1 = Math.min(m, Math.ceil(zoom.r0 + k));
  const b1 = Math.min(m, Math.ceil(zoom.c0 + k));
  const f = Math.max(1, Math.ceil(1 / (lay.cell * zoom.z * dpr) - 1e-9));
  return { a0, a1, b0, b1, f, rows: Math.ceil((a1 - a0) / f), cols: Math.ceil((b1 - b0) / f) };
}

/** The whole matrix pooled to at most `side` cells a side (the overview / minimap). */
export function wholeRegion(m, side = OVERVIEW) {
  const f = Math.max(1, Math.ceil(m / side));
  const k = Math.ceil(m / f);
  return { a0: 0, a1: m, b0: 0, b1: m, f, rows: k, cols: k };
}

/**
 * The pooled colours of a region (ABGR words, row-major, `rows` × `cols`).
 * @param {Uint32Array} px rows · cols words, written
 * @param {ReturnType<typeof regionOf>} region
 * @param {{n: number, probs: Float32Array, edgeJ: Int32Array}} head
 * @param {{vis: Int32Array, pos: Int32Array}} lay visible index <-> token
 * @param {Uint8Array|null} mask n·n, 1 = kept (null: no method, every edge kept)
 * @param {Int32Array} starts `rowStarts` of the head
 */
export function poolCells(px, region, head, lay, mask, starts) {
  const { a0, a1, b0, b1, f, rows, cols } = region;
  const { n, probs, edgeJ } = head;
  const { vis, pos } = lay;
  const size = rows * cols;
  const kept = new Float32Array(size); // largest kept p (0: none)
  const missed = new Float32Array(size); // largest missed p
  const shade = mask === null ? null : new Uint8Array(size);
  const colOf = new Int32Array(b1 - b0); // visible column -> pooled column
  for (let b = b0; b < b1; b++) colOf[b - b0] = ((b - b0) / f) | 0;
  for (let a = a0; a < a1; a++) {
    const i = vis[a];
    const base = (((a - a0) / f) | 0) * cols;
    for (let e = starts[i]; e < starts[i + 1]; e++) {
      const j = edgeJ[e];
      const b = pos[j];
      if (b < b0 || b >= b1) continue;
      const x = i * n + j;
      const p = probs[x];
      const c = base + colOf[b - b0];
      if (mask === null || mask[x] === 1) {
        if (p > kept[c]) kept[c] = p;
      } else if (p > missed[c]) missed[c] = p;
    }
    if (shade !== null) {
      const row = i * n;
      for (let b = b0; b < b1; b++) if (mask[row + vis[b]] === 1) shade[base + colOf[b - b0]] = 1;
    }
  }
  for (let c = 0; c < size; c++) {
    if (missed[c] > 0) px[c] = colours.MISSED_LUT[colours.probIndex(missed[c])];
    else if (kept[c] > 0) px[c] = colours.PROB_LUT[colours.probIndex(kept[c])];
    else px[c] = shade !== null && shade[c] ? colours.SHADE_PX : colours.ZERO_PX;
  }
}

/** Cells of a focused row are about this big (CSS px): ★ / × drawn (STAR_MIN 9). */
export const FOCUS_CELL = 14;

/**
 * The zoom that shows token i's query row with cells of about FOCUS_CELL px, centred on the
 * row's strongest key (its largest P_ij; the diagonal for an empty row), never zooming out.
 * @returns {{z: number, r0: number, c0: number}}
 */
export function focusRow(lay, zoom, head, i) {
  const { n, probs } = head;
  let best = i, bp = 0;
  for (let j = 0; j < n; j++) {
    if (lay.pos[j] >= 0 && probs[i * n + j] > bp) {
      bp = probs[i * n + j];
      best = j;
    }
  }
  const z = Math.max(zoom.z, Math.min(maxZoom(lay), FOCUS_CELL / lay.cell));
  const b = lay.pos[best] >= 0 ? lay.pos[best] : lay.pos[i];
  return centreOn(lay, { ...zoom, z }, b + 0.5, lay.pos[i] + 0.5);
}

/**
 * A painter of pooled regions for one heatmap: it keeps the head's CSR index and two scratch
 * canvases (the region and the overview), and repaints them only when the head, the mask or the
 * region changes. `region(...)` returns what heatmap-draw.js `drawCells` places: the canvas and
 * its cells `[a0, b0, height, width]`.
 */
export function lodPainter() {
  const regionCanvas = document.createElement("canvas");
  const overviewCanvas = document.createElement("canvas");
  let starts = null, startsOf = null;
  let lastRegion = "", lastOverview = "";

  function index(head) {
    if (startsOf !== head) {
      starts = rowStarts(head.n, head.edgeI);
      startsOf = head;
      lastRegion = lastOverview = "";
    }
    return starts;
  }

  function fill(canvas, reg, head, lay, mask) {
    canvas.width = reg.cols;
    canvas.height = reg.rows;
    const ctx = canvas.getContext("2d");
    const img = ctx.createImageData(reg.cols, reg.rows);
    poolCells(new Uint32Array(img.data.buffer), reg, head, lay, mask, index(head));
    ctx.putImageData(img, 0, 0);
  }

  return {
    /** The pooled visible region of `zoom`. */
    region(lay, zoom, head, mask, dpr, maskKey) {
      const reg = regionOf(lay, zoom, dpr);
      index(head);
      const key = [reg.a0, reg.a1, reg.b0, reg.b1, reg.f, maskKey, lay.m].join(",");
      if (key !== lastRegion) {
        fill(regionCanvas, reg, head, lay, mask);
        lastRegion = key;
      }
      return { canvas: regionCanvas, place: [reg.a0, reg.b0, reg.rows * reg.f, reg.cols * reg.f] };
    },
    /** The whole matrix pooled to ≤ OVERVIEW px a side (the minimap). */
    overview(lay, head, mask, maskKey) {
      index(head);
      const key = [maskKey, lay.m].join(",");
      if (key !== lastOverview) {
        fill(overviewCanvas, wholeRegion(lay.m), head, lay, mask);
        lastOverview = key;
      }
      return overviewCanvas;
    },
  };
}
