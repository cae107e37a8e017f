/**
 * The heatmap's hit-testing, pure (tests/js/heatmap_hit.test.mjs): a point of the overlay canvas
 * (CSS px from its corner) -> the visible cell (row a = query, column b = key) under it, the row
 * or column label it is over, or the minimap; and back: a cell -> its box and centre.
 */

import { minimapBox } from "./heatmap-layout.js";
import { viewport } from "./heatmap-zoom.js";

/**
 * @typedef {{kind: "cell", a: number, b: number} | {kind: "row", a: number}
 *   | {kind: "col", b: number} | {kind: "minimap", u: number, v: number} | {kind: "none"}} Hit
 */

/**
 * What the point (px, py) is over: a cell of the matrix, a row label (left of it, its row), a
 * column label (above it, its column), the minimap (when zoomed: the matrix point (u, v) in
 * cells), or nothing.
 * @param {import("./heatmap-layout.js").Layout} lay
 * @param {{z: number, r0: number, c0: number}} zoom
 * @returns {Hit}
 */
export function hitTest(lay, zoom, px, py) {
  const x = px - lay.left;
  const y = py - lay.top;
  if (zoom.z > 1) {
    const mm = minimapBox(lay);
    const mx = px - mm.x, my = py - mm.y;
    if (mx >= 0 && my >= 0 && mx <= mm.side && my <= mm.side) {
      return { kind: "minimap", u: (mx / mm.side) * lay.m, v: (my / mm.side) * lay.m };
    }
  }
  const ec = lay.cell * zoom.z;
  const a = Math.floor(y / ec + zoom.r0);
  const b = Math.floor(x / ec + zoom.c0);
  const inA = a >= 0 && a < lay.m && y >= 0 && y < lay.size;
  const inB = b >= 0 && b < lay.m && x >= 0 && x < lay.size;
  if (inA && inB) return { kind: "cell", a, b };
  if (y >= 0 && y < lay.size && x < 0 && a >= 0 && a < lay.m) return { kind: "row", a };
  if (x >= 0 && x < lay.size && y < 0 && b >= 0 && b < lay.m) return { kind: "col", b };
  return { kind: "none" };
}

/** The matrix point (u, v), in cells, under the point (px, py) of the minimap (unclamped). */
export function minimapPoint(lay, px, py) {
  const mm = minimapBox(lay);
  return { u: ((px - mm.x) / mm.side) * lay.m, v: ((py - mm.y) / mm.side) * lay.m };
}

/** Whether the point (px, py) is on the matrix (edges included): the wheel zooms there. */
export function onMatrix(lay, px, py) {
  const x = px - lay.left;
  const y = py - lay.top;
  return !(x < 0 || y < 0 || x > lay.size || y > lay.size);
}

/** Cell (a, b)'s box: its top-left corner (x, y) and side, CSS px (may be off the matrix). */
export function cellBox(lay, zoom, a, b) {
  const { ec, x0, y0 } = viewport(lay, zoom);
  return { x: x0 + b * ec, y: y0 + a * ec, side: ec };
}

/** Cell (a, b)'s centre, CSS px. */
export function cellCentre(lay, zoom, a, b) {
  const { ec, x0, y0 } = viewport(lay, zoom);
  return { x: x0 + (b + 0.5) * ec, y: y0 + (a + 0.5) * ec };
}
