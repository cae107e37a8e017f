/**
 * The heatmap's zoom in the address and the focus on a locked row, pure
 * (tests/js/heatmap_focus.test.mjs). The zoom {z, r0, c0} (heatmap-zoom.js) is the view field
 * `zoom` (sparse_core/view_schema.py) as "z@r0,c0" ("" at zoom 1), so a link or a share reopens
 * the same view; a long text's locked row opens zoomed so that its ★ / × marks can be read.
 */

import { STAR_MIN } from "./heatmap-layout.js";
import { NO_ZOOM, centreOn, clampPan, maxZoom } from "./heatmap-zoom.js";

const KEY = /^([0-9]{1,3}(?:\.[0-9]{1,2})?)@([0-9]{1,6}(?:\.[0-9]{1,2})?),([0-9]{1,6}(?:\.[0-9]{1,2})?)$/;

/** The address form of a zoom: "" at zoom 1, else "z@r0,c0" (z to 2 decimals, pan to 1). */
export function zoomKey(zoom) {
  if (!zoom || zoom.z <= 1.001) return "";
  const r = (v, d) => String(Number(v.toFixed(d)));
  return `${r(zoom.z, 2)}@${r(Math.max(0, zoom.r0), 1)},${r(Math.max(0, zoom.c0), 1)}`;
}

/** The zoom of an address form, kept on the matrix of `lay` (NO_ZOOM for "" or a bad one). */
export function zoomOfKey(lay, key) {
  const m = KEY.exec(key ?? "");
  if (!m || !lay) return NO_ZOOM;
  const z = Math.min(maxZoom(lay), Math.max(1, Number(m[1])));
  return clampPan(lay, { z, r0: Number(m[2]), c0: Number(m[3]) });
}

/**
 * The zoom that makes a locked row's marks legible: cells of STAR_MIN px centred on its
 * diagonal cell (a, a); null when the cells already are that big (or no row is locked).
 * @param {{m: number, cell: number}} lay
 * @param {number} a the locked row's visible index (−1: none)
 */
export function focusRow(lay, a) {
  if (!lay || a < 0 || lay.cell >= STAR_MIN) return null;
  const z = Math.min(maxZoom(lay), STAR_MIN / lay.cell);
  return centreOn(lay, { ...NO_ZOOM, z }, a + 0.5, a + 0.5);
}
