/**
 * The heatmap's painting on a 2D canvas context, given its layout (heatmap-layout.js) and
 * viewport (heatmap-zoom.js): the cells' colours (one pixel per cell: `fillCells`, pure), grid
 * lines, the marks of the gold edges (★ kept / × missed, or dots), the overlay (labels, the locked
 * row, the hovered token or cell, the selected cluster's ticks, the minimap) and the legend.
 * No state and no events: heatmap.js calls these.
 */

import * as colours from "./colours.js";
import { el } from "./dom.js";
import { DOT_MIN, GRID_MIN, STAR_MIN, labelPlan, minimapBox } from "./heatmap-layout.js";
import { viewport } from "./heatmap-zoom.js";

export const FONT = "12px system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif";
/** A locked or hovered token's label: the widest a label is drawn (the layout's margins fit it). */
export const FONT_BOLD = `600 ${FONT}`;

/**
 * The m × m cell colours (ABGR words, row-major) of a head under a mask: white for an exact zero
 * P_ij = 0, the sand shade for a zero inside the mask M, and for the gold graph G = {P_ij > 0} a
 * tint on √P_ij, blue where the method keeps the edge, red where it misses it.
 * @param {Uint32Array} px m·m words, written
 * @param {Int32Array} vis visible index -> token
 * @param {number} n the head's tokens
 * @param {Uint8Array|null} mask n·n, 1 = kept (null: no method, every edge kept)
 * @param {Float32Array} probs n·n
 * @param {Uint8Array} gold n·n, 1 where P_ij > 0
 */
export function fillCells(px, vis, n, mask, probs, gold) {
  const m = vis.length;
  for (let a = 0; a < m; a++) {
    const row = vis[a] * n;
    for (let b = 0; b < m; b++) {
      const x = row + vis[b];
      const kept = mask === null || mask[x] === 1;
      if (!gold[x]) px[a * m + b] = kept && mask !== null ? colours.SHADE_PX : colours.ZERO_PX;
      else px[a * m + b] = (kept ? colours.PROB_LUT : colours.MISSED_LUT)[colours.probIndex(probs[x])];
    }
  }
}

/**
 * The cells canvas: the cell image `off` (m × m px, or the pooled region `place`) scaled to the
 * viewport, clipped to the matrix; grid lines and marks when the cells are big enough; the matrix's border.
 */
export function drawCells(ctx, lay, zoom, off, head, mask, place = null) {
  const { m, left, top, size } = lay;
  // `place`: the cells [a0, b0, rows, cols] the image covers (a pooled region, heatmap-lod.js)
  const [pa, pb, ph, pw] = place ?? [0, 0, m, m];
  ctx.clearRect(0, 0, lay.width, lay.height);
  ctx.imageSmoothingEnabled = false;
  const view = viewport(lay, zoom);
  const { ec, x0, y0 } = view;
  ctx.save();
  ctx.beginPath();
  ctx.rect(left, top, size, size);
  ctx.clip();
  ctx.drawImage(off, x0 + pb * ec, y0 + pa * ec, pw * ec, ph * ec);
  if (ec >= GRID_MIN) drawGridLines(ctx, lay, view);
  if (ec >= DOT_MIN) drawMarks(ctx, lay, view, head, mask);
  ctx.restore();
  ctx.strokeStyle = "#9ca3af";
  ctx.lineWidth = 1;
  ctx.strokeRect(left - 0.5, top - 0.5, size + 1, size + 1);
}

function drawGridLines(ctx, lay, { ec, x0, y0 }) {
  const { m, left, top, size } = lay;
  ctx.beginPath();
  for (let a = 1; a < m; a++) {
    const vx = Math.round(x0 + a * ec) + 0.5;
    const vy = Math.round(y0 + a * ec) + 0.5;
    if (vx > left && vx < left + size) {
      ctx.moveTo(vx, top);
      ctx.lineTo(vx, top + size);
    }
    if (vy > top && vy < top + size) {
      ctx.moveTo(left, vy);
      ctx.lineTo(left + size, vy);
    }
  }
  ctx.strokeStyle = "rgba(17, 24, 39, 0.08)";
  ctx.lineWidth = 1;
  ctx.stroke();
}

/** ★ / × (big cells) on every visible gold edge, or an amber dot on kept ones (small cells). */
function drawMarks(ctx, lay, view, head, mask) {
  const { pos } = lay;
  const { ec: cell, x0: left, y0: top } = view;
  const lo = -cell, hiX = lay.left + lay.size + cell, hiY = lay.top + lay.size + cell;
  const n = head.n;
  const caught = new Path2D();
  const missed = new Path2D();
  const big = cell >= STAR_MIN;
  const r = big ? cell * 0.36 : Math.max(0.8, cell * 0.22);
  for (let e = 0; e < head.goldCount; e++) {
    const a = pos[head.edgeI[e]];
    const b = pos[head.edgeJ[e]];
    if (a < 0 || b < 0) continue;
    const cx = left + (b + 0.5) * cell;
    const cy = top + (a + 0.5) * cell;
    if (cx < lo || cy < lo || cx > hiX || cy > hiY) continue; // off the zoomed view
    const kept = mask === null || mask[head.edgeI[e] * n + head.edgeJ[e]] === 1;
    if (!big) {
      if (kept) caught.rect(cx - r, cy - r, 2 * r, 2 * r); // a few px: a square reads as a dot
    } else if (kept) addStar(caught, cx, cy, r);
    else {
      const d = r * 0.75;
      missed.moveTo(cx - d, cy - d);
      missed.lineTo(cx + d, cy + d);
      missed.moveTo(cx + d, cy - d);
      missed.lineTo(cx - d, cy + d);
    }
  }
  ctx.fillStyle = colours.CAUGHT;
  ctx.fill(caught);
  if (!big) return;
  ctx.strokeStyle = colours.CAUGHT_STROKE;
  ctx.lineWidth = 1;
  ctx.stroke(caught);
  ctx.lineCap = "round";
  ctx.strokeStyle = "#ffffff";
  ctx.lineWidth = Math.max(3, cell * 0.22);
  ctx.stroke(missed);
  ctx.strokeStyle = colours.MISSED;
  ctx.lineWidth = Math.max(2, cell * 0.12);
  ctx.stroke(missed);
}

/**
 * The overlay canvas: token labels, the hovered token's row and column (the rest dimmed) or the
 * locked row (the rest dimmed), the hovered cell's crosshair, the selected cluster's ticks, and
 * the minimap when zoomed.
 * @param {object} marks `{locked, hovered, cell, members}`: visible indices of the locked row and
 *   the hovered token (-1: none), the hovered cell `{a, b}` or null, the cluster's members or null
 */
export function drawOverlay(ctx, lay, zoom, off, marks) {
  const { m, left, top, size } = lay;
  const view = viewport(lay, zoom);
  const { ec, x0, y0 } = view;
  const { locked, hovered: hv, cell: hoverCell, members } = marks;
  ctx.clearRect(0, 0, lay.width, lay.height);
  ctx.save();
  ctx.beginPath();
  ctx.rect(left, top, size, size);
  ctx.clip();
  if (hv >= 0) {
    // a hovered token: its edges alone (its row, as a query, and its column, as a key)
    ctx.fillStyle = "rgba(255, 255, 255, 0.78)";
    ctx.beginPath();
    ctx.rect(left, top, size, size);
    ctx.rect(left + size, y0 + hv * ec, -size, ec); // holes (even-odd): the row…
    ctx.rect(x0 + hv * ec, top + size, ec, -size); // …and the column
    ctx.fill("evenodd");
    outline(ctx, left, y0 + hv * ec, size, ec, colours.CLUSTER, 1.5);
    outline(ctx, x0 + hv * ec, top, ec, size, colours.CLUSTER, 1.5);
  } else if (locked >= 0) {
    ctx.fillStyle = "rgba(255, 255, 255, 0.72)";
    const ly = y0 + locked * ec;
    ctx.fillRect(left, top, size, ly - top);
    ctx.fillRect(left, ly + ec, size, top + size - ly - ec);
  }
  if (locked >= 0) outline(ctx, left, y0 + locked * ec, size, ec, colours.ACCENT, 2);
  if (hoverCell) {
    const { a, b } = hoverCell;
    ctx.fillStyle = "rgba(17, 24, 39, 0.06)";
    ctx.fillRect(left, y0 + a * ec, size, ec);
    ctx.fillRect(x0 + b * ec, top, ec, size);
    outline(ctx, x0 + b * ec, y0 + a * ec, ec, ec, colours.ACCENT, 2);
  }
  ctx.restore();
  if (members) {
    ctx.fillStyle = colours.CLUSTER;
    for (let a = 0; a < m; a++) {
      const t = lay.vis[a];
      const ya = y0 + a * ec, xa = x0 + a * ec;
      if (members.queries[t] && ya >= top - ec && ya < top + size) ctx.fillRect(left - 5, Math.max(top, ya), 4, Math.max(ec, 1));
      if (members.keys[t] && xa >= left - ec && xa < left + size) ctx.fillRect(Math.max(left, xa), top - 5, Math.max(ec, 1), 4);
    }
  }
  const strong = new Set([locked, hv, hoverCell ? hoverCell.a : -1, hoverCell ? hoverCell.b : -1]);
  drawLabels(ctx, lay, labelPlan(lay, view, strong), members);
  if (zoom.z > 1) drawMinimap(ctx, lay, zoom, off);
}

function drawLabels(ctx, lay, plan, members) {
  const { left, top, vis } = lay;
  ctx.textBaseline = "middle";
  for (const { a, text, strong, row, col } of plan) {
    const inCluster = members && (members.queries[vis[a]] || members.keys[vis[a]]);
    ctx.font = strong ? FONT_BOLD : FONT;
    ctx.fillStyle = strong ? colours.ACCENT : inCluster ? colours.CLUSTER : "#4b5563";
    if (row !== null) {
      if (strong) clearLabel(ctx, text, left - 8, row, "right");
      ctx.textAlign = "right";
      ctx.fillText(text, left - 8, row); // row label
    }
    if (col !== null) {
      ctx.save();
      ctx.translate(col, top - 8);
      ctx.rotate(-Math.PI / 2);
      if (strong) clearLabel(ctx, text, 0, 0, "left");
      ctx.textAlign = "left";
      ctx.fillText(text, 0, 0); // column label, rotated
      ctx.restore();
    }
  }
}

/** White box under a label anchored at its right or left end, so a highlighted one stays
 * readable over the cluster ticks and neighbours. */
function clearLabel(ctx, text, x, y, anchor) {
  const w = ctx.measureText(text).width + 4;
  ctx.fillStyle = "#ffffff";
  ctx.fillRect(anchor === "left" ? x - 2 : x - w + 2, y - 8, w, 16);
  ctx.fillStyle = colours.ACCENT;
}

/** The whole matrix, small, in the labels' empty corner, with the zoomed view framed. */
function drawMinimap(ctx, lay, zoom, off) {
  const { x, y, side } = minimapBox(lay);
  ctx.save();
  ctx.fillStyle = "#ffffff";
  ctx.fillRect(x - 2, y - 2, side + 4, side + 4);
  ctx.imageSmoothingEnabled = true;
  ctx.drawImage(off, x, y, side, side);
  ctx.strokeStyle = "#9ca3af";
  ctx.lineWidth = 1;
  ctx.strokeRect(x - 0.5, y - 0.5, side + 1, side + 1);
  const k = side / lay.m;
  const vis = lay.m / zoom.z;
  outline(ctx, x + zoom.c0 * k, y + zoom.r0 * k, vis * k, vis * k, colours.ACCENT, 2);
  ctx.restore();
}

function outline(ctx, x, y, w, h, colour, width) {
  ctx.strokeStyle = colour;
  ctx.lineWidth = width;
  ctx.strokeRect(x, y, w, h);
}

/** A five-pointed star of outer radius r centred on (cx, cy), added to `path`. */
export function addStar(path, cx, cy, r) {
  const inner = r * 0.45;
  for (let k = 0; k < 10; k++) {
    const rad = k % 2 === 0 ? r : inner;
    const ang = -Math.PI / 2 + (k * Math.PI) / 5;
    const x = cx + rad * Math.cos(ang);
    const y = cy + rad * Math.sin(ang);
    if (k === 0) path.moveTo(x, y);
    else path.lineTo(x, y);
  }
  path.closePath();
}

/** Legend of the marks: swatches drawn with the same code as the heatmap. */
export function drawLegend(legend) {
  const swatch = (draw) => {
    const c = el("canvas", { class: "swatch" });
    c.width = c.height = 18;
    draw(c.getContext("2d"));
    return c;
  };
  const cellBg = (ctx, fill) => {
    ctx.fillStyle = fill;
    ctx.fillRect(0.5, 0.5, 17, 17);
    ctx.strokeStyle = "#9ca3af";
    ctx.strokeRect(0.5, 0.5, 17, 17);
  };
  const star = swatch((ctx) => {
    cellBg(ctx, colours.probColour(0.3));
    const p = new Path2D();
    addStar(p, 9, 9, 7.5);
    ctx.fillStyle = colours.CAUGHT;
    ctx.fill(p);
    ctx.strokeStyle = colours.CAUGHT_STROKE;
    ctx.stroke(p);
  });
  const cross = swatch((ctx) => {
    cellBg(ctx, colours.missedColour(0.3));
    ctx.lineCap = "round";
    for (const [w, c] of [[4, "#ffffff"], [2.2, colours.MISSED]]) {
      ctx.beginPath();
      ctx.moveTo(4, 4);
      ctx.lineTo(14, 14);
      ctx.moveTo(14, 4);
      ctx.lineTo(4, 14);
      ctx.lineWidth = w;
      ctx.strokeStyle = c;
      ctx.stroke();
    }
  });
  const shade = swatch((ctx) => cellBg(ctx, colours.SHADE));
  const zero = swatch((ctx) => cellBg(ctx, colours.ZERO));
  const ramp = (colour) => {
    const c = el("canvas", { class: "ramp" });
    c.width = 90;
    c.height = 12;
    const rctx = c.getContext("2d");
    for (let x = 0; x < 90; x++) {
      rctx.fillStyle = colour(((x + 1) / 90) ** 2);
      rctx.fillRect(x, 0, 1, 12);
    }
    return c;
  };
  const item = (sw, text) => el("span", { class: "legend-item" }, [sw, el("span", { text })]);
  legend.replaceChildren(
    item(star, "p > 0, kept (★ / dot)"),
    item(cross, "p > 0, missed (×)"),
    item(shade, "p = 0, predicted"),
    item(zero, "p = 0 (exact zero)"),
    el("span", { class: "legend-item" }, [
      el("span", { class: "ramp-end", text: "p: 0⁺" }),
      el("span", { class: "ramps" }, [ramp(colours.probColour), ramp(colours.missedColour)]),
      el("span", { class: "ramp-end", text: "1" }),
    ]),
  );
}
