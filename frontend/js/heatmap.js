/**
 * The open head's attention heatmap on <canvas> (no per-cell DOM, so n = 512 stays fluid).
 *
 * Two stacked canvases:
 * - `cells`: one colour per (query i, key j) — white for an exact zero P_ij = 0, the sand shade
 *   for a zero inside the current method's mask M, and for the gold graph G = {P_ij > 0} a tint
 *   on √P_ij, blue where the method keeps the edge, (i, j) ∈ M ∩ G, red where it misses it,
 *   (i, j) ∈ G \ M — then the marks of the gold edges: ★ kept / × missed on big cells, an amber
 *   dot on kept ones on small cells (below 3 px a cell is its own dot).
 *   Repainted only when the head, the mask or the layout changes.
 * - `overlay`: token labels, the locked query row, the hovered token, the selected cluster's
 *   tokens and the hovered cell. Cheap; repainted on every hover.
 *
 * Hovering a cell shows a tooltip (query, key, p, kept or missed) computed from the arrays in
 * memory — no server call. Clicking a cell or a row label locks that query row (click again to
 * unlock; ↑ / ↓ move it, Esc clears it). Hovering a label sets the store's `hoverToken` (linked
 * views).
 */

import * as colours from "./colours.js";
import { el, fmt } from "./dom.js";
import * as store from "./state.js";
import { tokenLabel, visibleTokens } from "./tokens.js";

const FONT = "12px system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif";
const FONT_BOLD = `600 ${FONT}`;
const LABEL_PX = 14; // vertical room one label needs
const MAX_LABEL = 110; // widest label margin (CSS px)
const MAX_SIZE = 880; // largest matrix side (CSS px)
const MAX_CELL = 28; // largest cell (CSS px): a short text stays small enough to leave room
const BELOW_HEATMAP = 14; // CSS px kept under the matrix (the hint and the token strip may scroll)
const STAR_MIN = 9; // cells at least this big (CSS px) get ★ / × marks, smaller ones dots
const DOT_MIN = 3; // cells at least this big get dots
const GRID_MIN = 10; // cells at least this big get grid lines

/**
 * Mount the heatmap in `root` (an empty element) and keep it in step with the store.
 * @param {HTMLElement} root
 * @param {HTMLElement} legend element that receives the legend of the marks
 */
export function initHeatmap(root, legend) {
  const cells = el("canvas", { class: "heatmap-cells" });
  const overlay = el("canvas", { class: "heatmap-overlay", attrs: { tabindex: "0" } });
  const tooltip = el("div", { class: "tooltip", attrs: { role: "status", hidden: "" } });
  const empty = el("p", { class: "empty", text: "Analyze a text, then pick a head." });
  root.append(empty, cells, overlay, tooltip);
  overlay.setAttribute("aria-label", "attention heatmap: rows are queries, columns are keys");
  drawLegend(legend);

  /** Layout of the current head, recomputed on head / size / special-token changes. */
  let lay = null;
  let hoverCell = null; // {a, b} visible row / column under the pointer
  const off = document.createElement("canvas"); // m × m, one pixel per cell
  let img = null; // its pixels, reused by every repaint
  let painted = false; // the first heatmap was drawn
  /** Zoom and pan: `z` ≥ 1, the first visible row `r0` and column `c0` (fractional cells). */
  let zoom = { z: 1, r0: 0, c0: 0 };
  let drag = null; // {x, y, r0, c0, moved} while the pointer pans

  function layout() {
    const s = store.get();
    const head = s.headData;
    if (!head || !s.analysis) return null;
    const vis = visibleTokens(s.analysis.tokens, s.hideSpecial);
    const m = vis.length;
    const labels = Array.from(vis, (t) => tokenLabel(s.analysis.tokens[t].text));
    const ctx = cells.getContext("2d");
    ctx.font = FONT;
    const widest = Math.max(...labels.map((t) => ctx.measureText(t).width), 10);
    const margin = Math.ceil(Math.min(widest, MAX_LABEL)) + 10;
    const avail = Math.max(160, Math.min(root.clientWidth - margin - 12, fitHeight() - margin));
    let cell = Math.min(avail, MAX_SIZE) / m;
    if (cell >= 4) cell = Math.min(MAX_CELL, Math.floor(cell)); // whole pixels: crisp grid lines
    const size = cell * m;
    const pos = new Int32Array(head.n).fill(-1); // token -> visible index
    vis.forEach((t, a) => (pos[t] = a));
    return { vis, pos, m, labels, left: margin, top: margin, cell, size,
      width: margin + size + 8, height: margin + size + 8, step: Math.ceil(LABEL_PX / cell) };
  }

  /** The viewport: effective cell size and where cell (0, 0) sits (may be off the matrix). */
  function vp() {
    const ec = lay.cell * zoom.z;
    return { ec, x0: lay.left - zoom.c0 * ec, y0: lay.top - zoom.r0 * ec };
  }

  /** The largest zoom: cells of about 44 px, and at least 4× on a long text. */
  function maxZoom() {
    return lay ? Math.max(1, 44 / lay.cell, lay.m >= 48 ? 4 : 1) : 1;
  }

  /** Set the zoom (kept in range) around the matrix point (px, py), CSS px from its corner. */
  function setZoom(z, px = lay.size / 2, py = lay.size / 2) {
    if (!lay) return;
    const zNew = Math.min(maxZoom(), Math.max(1, z));
    const ec = lay.cell * zoom.z;
    const u = zoom.c0 + px / ec;
    const v = zoom.r0 + py / ec;
    const ecNew = lay.cell * zNew;
    zoom = { z: zNew, c0: u - px / ecNew, r0: v - py / ecNew };
    clampPan();
    paint();
  }

  function clampPan() {
    const k = lay.m / zoom.z; // visible cells a side
    zoom.c0 = Math.min(Math.max(0, zoom.c0), lay.m - k);
    zoom.r0 = Math.min(Math.max(0, zoom.r0), lay.m - k);
    if (zoom.z === 1) zoom.c0 = zoom.r0 = 0;
  }

  function paint() {
    drawCells();
    drawOverlay();
    root.dataset.zoom = zoom.z.toFixed(2);
  }

  /**
   * The height the matrix may take: on a wide window, what is left of the window below the
   * heatmap's top (in the page, not scrolled) less the hint and the token strip, so that the
   * heatmap, the metrics and the Pareto plot are on one screen; on a narrow one (one column,
   * scrolling), the width decides.
   */
  function fitHeight() {
    if (window.innerWidth < 700) return Infinity;
    const top = root.getBoundingClientRect().top + window.scrollY;
    return Math.max(300, window.innerHeight - top - BELOW_HEATMAP);
  }

  function resize() {
    lay = layout();
    const on = lay !== null;
    empty.hidden = on;
    cells.hidden = overlay.hidden = !on;
    if (!on) return;
    const dpr = window.devicePixelRatio || 1;
    for (const c of [cells, overlay]) {
      c.width = Math.round(lay.width * dpr);
      c.height = Math.round(lay.height * dpr);
      c.style.width = `${lay.width}px`;
      c.style.height = `${lay.height}px`;
      c.getContext("2d").setTransform(dpr, 0, 0, dpr, 0, 0);
    }
    off.width = off.height = lay.m;
    img = off.getContext("2d").createImageData(lay.m, lay.m);
    root.style.height = `${lay.height}px`;
    if (zoom.z > maxZoom()) zoom.z = maxZoom();
    clampPan();
    paint();
  }

  /** Paint every cell (one pixel per cell, scaled up) and the marks of the gold edges. */
  function drawCells() {
    const s = store.get();
    const head = s.headData;
    if (!lay || !head) return;
    const { vis, m, left, top, size } = lay;
    const n = head.n;
    const mask = s.result?.mask ?? null;
    const { probs, gold } = head;
    const px = new Uint32Array(img.data.buffer);
    for (let a = 0; a < m; a++) {
      const row = vis[a] * n;
      for (let b = 0; b < m; b++) {
        const x = row + vis[b];
        const kept = mask === null || mask[x] === 1;
        if (!gold[x]) px[a * m + b] = kept && mask !== null ? colours.SHADE_PX : colours.ZERO_PX;
        else px[a * m + b] = (kept ? colours.PROB_LUT : colours.MISSED_LUT)[colours.probIndex(probs[x])];
      }
    }
    off.getContext("2d").putImageData(img, 0, 0);
    const ctx = cells.getContext("2d");
    ctx.clearRect(0, 0, lay.width, lay.height);
    ctx.imageSmoothingEnabled = false;
    const { ec, x0, y0 } = vp();
    ctx.save();
    ctx.beginPath();
    ctx.rect(left, top, size, size);
    ctx.clip();
    ctx.drawImage(off, x0, y0, m * ec, m * ec);
    if (ec >= GRID_MIN) drawGridLines(ctx);
    if (ec >= DOT_MIN) drawMarks(ctx, head, mask);
    ctx.restore();
    ctx.strokeStyle = "#9ca3af";
    ctx.lineWidth = 1;
    ctx.strokeRect(left - 0.5, top - 0.5, size + 1, size + 1);
    if (!painted) {
      // the frame that shows the first heatmap (bench/bench_page.py --first-paint reads it)
      painted = true;
      requestAnimationFrame(() => performance.mark("heatmap-first-paint"));
    }
  }

  function drawGridLines(ctx) {
    const { m, left, top, size } = lay;
    const { ec, x0, y0 } = vp();
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
  function drawMarks(ctx, head, mask) {
    const { pos } = lay;
    const { ec: cell, x0: left, y0: top } = vp();
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

  /** Token labels, selection and hover highlights (and the minimap when zoomed). */
  function drawOverlay() {
    if (!lay) return;
    const s = store.get();
    const ctx = overlay.getContext("2d");
    const { m, left, top, size, pos } = lay;
    const { ec, x0, y0 } = vp();
    ctx.clearRect(0, 0, lay.width, lay.height);
    ctx.save();
    ctx.beginPath();
    ctx.rect(left, top, size, size);
    ctx.clip();
    const locked = s.lockedRow !== null ? pos[s.lockedRow] ?? -1 : -1;
    const hv = s.hoverToken !== null ? pos[s.hoverToken] ?? -1 : -1;
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
    const members = s.clusterMembers;
    if (members) {
      ctx.fillStyle = colours.CLUSTER;
      for (let a = 0; a < m; a++) {
        const t = lay.vis[a];
        const ya = y0 + a * ec, xa = x0 + a * ec;
        if (members.queries[t] && ya >= top - ec && ya < top + size) ctx.fillRect(left - 5, Math.max(top, ya), 4, Math.max(ec, 1));
        if (members.keys[t] && xa >= left - ec && xa < left + size) ctx.fillRect(Math.max(left, xa), top - 5, Math.max(ec, 1), 4);
      }
    }
    drawLabels(ctx, s, locked, hv, members);
    if (zoom.z > 1) drawMinimap(ctx);
  }

  /** The whole matrix, small, in the labels' empty corner, with the zoomed view framed. */
  function minimapBox() {
    const side = Math.max(40, Math.min(lay.left, lay.top) - 16);
    return { x: 4, y: 4, side };
  }

  function drawMinimap(ctx) {
    const { x, y, side } = minimapBox();
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

  function drawLabels(ctx, s, locked, hv, members) {
    const { m, left, top, size, labels, vis } = lay;
    const { ec, x0, y0 } = vp();
    const step = Math.ceil(LABEL_PX / ec);
    const hovA = hoverCell ? hoverCell.a : -1;
    const hovB = hoverCell ? hoverCell.b : -1;
    ctx.textBaseline = "middle";
    for (let a = 0; a < m; a++) {
      const strong = a === locked || a === hv || a === hovA || a === hovB;
      const inCluster = members && (members.queries[vis[a]] || members.keys[vis[a]]);
      if (a % step !== 0 && !strong) continue;
      ctx.font = strong ? FONT_BOLD : FONT;
      ctx.fillStyle = strong ? colours.ACCENT : inCluster ? colours.CLUSTER : "#4b5563";
      const text = labels[a];
      const my = y0 + (a + 0.5) * ec;
      const mx = x0 + (a + 0.5) * ec;
      if (my >= top && my <= top + size) {
        if (strong) clearLabel(ctx, text, left - 8, my, "right");
        ctx.textAlign = "right";
        ctx.fillText(text, left - 8, my); // row label
      }
      if (mx >= left && mx <= left + size) {
        ctx.save();
        ctx.translate(mx, top - 8);
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

  // ---------------------------------------------------------------- pointer

  /** Visible row / column under a pointer event, or which label axis it is over. */
  function hit(ev) {
    const rect = overlay.getBoundingClientRect();
    const x = ev.clientX - rect.left - lay.left;
    const y = ev.clientY - rect.top - lay.top;
    if (zoom.z > 1) {
      const mm = minimapBox();
      const mx = ev.clientX - rect.left - mm.x, my = ev.clientY - rect.top - mm.y;
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

  // zoom: the wheel (Ctrl / pinch anywhere; a plain wheel on a wide window), + / − / 0 keys
  overlay.addEventListener("wheel", (ev) => {
    if (!lay || !(ev.ctrlKey || ev.metaKey || window.innerWidth >= 700)) return;
    const rect = overlay.getBoundingClientRect();
    const px = ev.clientX - rect.left - lay.left;
    const py = ev.clientY - rect.top - lay.top;
    if (px < 0 || py < 0 || px > lay.size || py > lay.size) return;
    const z = zoom.z * Math.exp(-ev.deltaY * (ev.deltaMode === 1 ? 0.05 : 0.0025));
    if ((z > zoom.z && zoom.z >= maxZoom()) || (z < zoom.z && zoom.z <= 1)) return; // let it scroll
    ev.preventDefault();
    setZoom(z, px, py);
  }, { passive: false });
  // pan: drag (a click that does not move still locks a row)
  overlay.addEventListener("mousedown", (ev) => {
    if (!lay || ev.button !== 0) return;
    const h = hit(ev);
    if (h.kind === "minimap") {
      centreOn(h.u, h.v);
      drag = { x: ev.clientX, y: ev.clientY, minimap: true, moved: true };
      return;
    }
    if (zoom.z > 1) drag = { x: ev.clientX, y: ev.clientY, r0: zoom.r0, c0: zoom.c0, moved: false };
  });
  window.addEventListener("mousemove", (ev) => {
    if (!drag || !lay) return;
    if (drag.minimap) {
      const rect = overlay.getBoundingClientRect();
      const mm = minimapBox();
      centreOn(((ev.clientX - rect.left - mm.x) / mm.side) * lay.m,
        ((ev.clientY - rect.top - mm.y) / mm.side) * lay.m);
      return;
    }
    const dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
    if (!drag.moved && Math.hypot(dx, dy) < 4) return;
    drag.moved = true;
    overlay.classList.add("panning");
    const ec = lay.cell * zoom.z;
    zoom.c0 = drag.c0 - dx / ec;
    zoom.r0 = drag.r0 - dy / ec;
    clampPan();
    paint();
  });
  window.addEventListener("mouseup", () => {
    if (!drag) return;
    overlay.classList.remove("panning");
    if (drag.moved) suppressClick = true; // the click that ends a drag locks nothing
    drag = null;
  });
  let suppressClick = false;

  /** Centre the zoomed view on matrix point (u, v) in cells (the minimap). */
  function centreOn(u, v) {
    const k = lay.m / zoom.z;
    zoom.c0 = u - k / 2;
    zoom.r0 = v - k / 2;
    clampPan();
    paint();
  }

  overlay.addEventListener("mousemove", (ev) => {
    if (!lay || drag?.moved) return;
    const h = hit(ev);
    const s = store.get();
    if (h.kind === "cell") {
      if (!hoverCell || hoverCell.a !== h.a || hoverCell.b !== h.b) {
        const start = performance.now();
        hoverCell = { a: h.a, b: h.b };
        showTooltip(ev, lay.vis[h.a], lay.vis[h.b]);
        drawOverlay();
        performance.measure("hover", { start }); // tooltip and crosshair of a new cell
      } else moveTooltip(ev);
      if (s.hoverToken !== null) store.set({ hoverToken: null });
      return;
    }
    leaveCell();
    const token = h.kind === "row" ? lay.vis[h.a] : h.kind === "col" ? lay.vis[h.b] : null;
    store.set({ hoverToken: token });
  });
  overlay.addEventListener("mouseleave", () => {
    leaveCell();
    store.set({ hoverToken: null });
  });
  overlay.addEventListener("click", (ev) => {
    if (suppressClick) {
      suppressClick = false;
      return;
    }
    if (!lay) return;
    const h = hit(ev);
    if (h.kind !== "cell" && h.kind !== "row") return;
    const i = lay.vis[h.a];
    store.set({ lockedRow: store.get().lockedRow === i ? null : i });
  });
  // keyboard: ↑ / ↓ move the locked query row, Esc clears the selection
  overlay.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape") store.set({ lockedRow: null, cluster: null });
    if (lay && (ev.key === "+" || ev.key === "=" || ev.key === "-" || ev.key === "0")) {
      ev.preventDefault();
      setZoom(ev.key === "0" ? 1 : ev.key === "-" ? zoom.z / 1.5 : zoom.z * 1.5);
      return;
    }
    if (lay && ev.shiftKey && ev.key.startsWith("Arrow")) {
      // Shift + arrows pan by a quarter of the view
      ev.preventDefault();
      const q = lay.m / zoom.z / 4;
      if (ev.key === "ArrowLeft") zoom.c0 -= q;
      if (ev.key === "ArrowRight") zoom.c0 += q;
      if (ev.key === "ArrowUp") zoom.r0 -= q;
      if (ev.key === "ArrowDown") zoom.r0 += q;
      clampPan();
      paint();
      return;
    }
    if (!lay || (ev.key !== "ArrowUp" && ev.key !== "ArrowDown")) return;
    ev.preventDefault();
    const at = store.get().lockedRow === null ? -1 : lay.pos[store.get().lockedRow];
    const next = ev.key === "ArrowDown" ? Math.min(lay.m - 1, at + 1) : Math.max(0, at - 1);
    const k = lay.m / zoom.z;
    if (next < zoom.r0) zoom.r0 = next;
    if (next + 1 > zoom.r0 + k) zoom.r0 = next + 1 - k;
    clampPan();
    store.set({ lockedRow: lay.vis[next] });
  });

  function leaveCell() {
    if (!hoverCell) return;
    hoverCell = null;
    tooltip.hidden = true;
    drawOverlay();
  }

  /** Fill the tooltip from memory: tokens, p and whether the method keeps the edge. */
  function showTooltip(ev, i, j) {
    const s = store.get();
    const head = s.headData;
    const toks = s.analysis.tokens;
    const x = i * head.n + j;
    const p = head.probs[x];
    const kept = s.result ? s.result.mask[x] === 1 : false;
    const valid = !s.analysis.causal || j <= i;
    let verdict;
    if (!valid) verdict = "outside the causal region (j > i)";
    else if (head.gold[x]) verdict = kept ? "★ kept by the method" : "× missed by the method";
    else verdict = kept ? "predicted by the method (p = 0)" : "not predicted";
    tooltip.replaceChildren(
      row("query", `${JSON.stringify(toks[i].text)} (${i})`),
      row("key", `${JSON.stringify(toks[j].text)} (${j})`),
      row("p", p > 0 ? fmt(p, 4) : "0 (exact zero)"),
      el("div", {
        class: `tt-verdict ${head.gold[x] ? (kept ? "caught" : "missed") : ""}`,
        text: verdict,
      }),
    );
    tooltip.hidden = false;
    moveTooltip(ev);
  }

  function moveTooltip(ev) {
    const rect = root.getBoundingClientRect();
    const x = ev.clientX - rect.left;
    const y = ev.clientY - rect.top;
    const w = tooltip.offsetWidth;
    tooltip.style.left = `${x + 16 + w > rect.width ? x - w - 12 : x + 16}px`;
    tooltip.style.top = `${y + 14}px`;
  }

  // ---------------------------------------------------------------- store

  store.subscribe((s, changed) => {
    if (changed.has("analysis") || changed.has("hideSpecial")) zoom = { z: 1, r0: 0, c0: 0 };
    if (changed.has("headData") || changed.has("hideSpecial") || changed.has("analysis")) {
      hoverCell = null;
      tooltip.hidden = true;
      resize();
      return;
    }
    if (changed.has("result")) drawCells();
    if (changed.has("result") && zoom.z > 1) drawOverlay(); // the minimap shows the mask too
    if (["lockedRow", "hoverToken", "clusterMembers"].some((k) => changed.has(k))) drawOverlay();
  });
  let pending = false;
  new ResizeObserver(() => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      const before = lay ? lay.width : 0;
      const next = layout();
      if (!next || next.width !== before) resize();
    });
  }).observe(root.parentElement);
  window.addEventListener("resize", () => {
    if (lay) resize();
  });
}

function row(key, value) {
  return el("div", { class: "tt-row" }, [
    el("span", { class: "tt-key", text: key }),
    el("span", { text: value }),
  ]);
}

function outline(ctx, x, y, w, h, colour, width) {
  ctx.strokeStyle = colour;
  ctx.lineWidth = width;
  ctx.strokeRect(x, y, w, h);
}

/** A five-pointed star of outer radius r centred on (cx, cy), added to `path`. */
function addStar(path, cx, cy, r) {
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
function drawLegend(legend) {
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
