/**
 * The heatmap's zoom and pan, pure (tests/js/heatmap_zoom.test.mjs). A zoom is `{z, r0, c0}`:
 * the factor z ≥ 1 and the first visible row r0 and column c0 (fractional cells); every function
 * returns a new one, kept in range (`clampPan`).
 *
 * The viewport maps cell (a, b) to CSS px: a zoomed cell is ec = cell · z wide, and cell (0, 0)
 * sits at (x0, y0) = (left − c0 · ec, top − r0 · ec), off the matrix when panned; the view shows
 * m / z cells a side. Zooming around a point keeps the matrix point under it fixed.
 */

/** Not zoomed. */
export const NO_ZOOM = Object.freeze({ z: 1, r0: 0, c0: 0 });
/** A zoomed cell is at most about this big (CSS px). */
export const ZOOM_CELL = 44;
/** One +/− key press zooms by this factor. */
export const KEY_STEP = 1.5;

/**
 * The viewport: effective cell size and where cell (0, 0) sits (may be off the matrix).
 * @param {import("./heatmap-layout.js").Layout} lay
 * @param {{z: number, r0: number, c0: number}} zoom
 */
export function viewport(lay, zoom) {
  const ec = lay.cell * zoom.z;
  return { ec, x0: lay.left - zoom.c0 * ec, y0: lay.top - zoom.r0 * ec };
}

/** The largest zoom: cells of about 44 px, and at least 4× on a long text. */
export function maxZoom(lay) {
  return lay ? Math.max(1, ZOOM_CELL / lay.cell, lay.m >= 48 ? 4 : 1) : 1;
}

/** The zoom with the view kept on the matrix (and at the origin when not zoomed). */
export function clampPan(lay, zoom) {
  const k = lay.m / zoom.z; // visible cells a side
  let c0 = Math.min(Math.max(0, zoom.c0), lay.m - k);
  let r0 = Math.min(Math.max(0, zoom.r0), lay.m - k);
  if (zoom.z === 1) c0 = r0 = 0;
  return { z: zoom.z, r0, c0 };
}

/** The zoom of a new layout: z kept under its largest, the view on the matrix. */
export function refit(lay, zoom) {
  return clampPan(lay, { ...zoom, z: Math.min(zoom.z, maxZoom(lay)) });
}

/**
 * Zoom to `z` (kept in [1, maxZoom]) around the matrix point (px, py), CSS px from its corner
 * (default: its centre): the matrix point under it stays there.
 */
export function zoomAround(lay, zoom, z, px = lay.size / 2, py = lay.size / 2) {
  const zNew = Math.min(maxZoom(lay), Math.max(1, z));
  const ec = lay.cell * zoom.z;
  const u = zoom.c0 + px / ec;
  const v = zoom.r0 + py / ec;
  const ecNew = lay.cell * zNew;
  return clampPan(lay, { z: zNew, c0: u - px / ecNew, r0: v - py / ecNew });
}

/** The zoom a key asks for ("+" / "=" in, "-" out, "0" back to 1), or null for another key. */
export function keyZoom(zoom, key) {
  if (key === "0") return 1;
  if (key === "-") return zoom.z / KEY_STEP;
  if (key === "+" || key === "=") return zoom.z * KEY_STEP;
  return null;
}

/** The zoom a wheel turn asks for (`deltaMode` 1: lines, else pixels). */
export function wheelZoom(zoom, deltaY, deltaMode) {
  return zoom.z * Math.exp(-deltaY * (deltaMode === 1 ? 0.05 : 0.0025));
}

/** Whether a wheel turn asking for `z` should scroll the page instead (already at the end). */
export function wheelScrolls(lay, zoom, z) {
  return (z > zoom.z && zoom.z >= maxZoom(lay)) || (z < zoom.z && zoom.z <= 1);
}

/** Centre the view on the matrix point (u, v), in cells (a minimap click). */
export function centreOn(lay, zoom, u, v) {
  const k = lay.m / zoom.z;
  return clampPan(lay, { z: zoom.z, c0: u - k / 2, r0: v - k / 2 });
}

/** Pan by a drag of (dx, dy) CSS px from the zoom `from` the drag started at. */
export function dragPan(lay, zoom, from, dx, dy) {
  const ec = lay.cell * zoom.z;
  return clampPan(lay, { z: zoom.z, c0: from.c0 - dx / ec, r0: from.r0 - dy / ec });
}

/** Pan by a quarter of the view for Shift + an arrow key (null for another key). */
export function arrowPan(lay, zoom, key) {
  const q = lay.m / zoom.z / 4;
  const d = { ArrowLeft: [0, -q], ArrowRight: [0, q], ArrowUp: [-q, 0], ArrowDown: [q, 0] }[key];
  return d ? clampPan(lay, { z: zoom.z, r0: zoom.r0 + d[0], c0: zoom.c0 + d[1] }) : null;
}

/** Scroll the view just enough to show row `a` (the locked row moved by ↑ / ↓). */
export function revealRow(lay, zoom, a) {
  const k = lay.m / zoom.z;
  let r0 = zoom.r0;
  if (a < r0) r0 = a;
  if (a + 1 > r0 + k) r0 = a + 1 - k;
  return clampPan(lay, { ...zoom, r0 });
}
