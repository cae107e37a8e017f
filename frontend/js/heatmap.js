/**
 * The open head's attention heatmap on <canvas> (no per-cell DOM, so n = 512 stays fluid): the
 * view that wires the DOM, the canvases, the pointer and keys and the store to pure modules —
 * heatmap-layout.js (cell size, margins, labels), heatmap-zoom.js (zoom and pan),
 * heatmap-hit.js (pointer -> cell and back) — and to the painting in heatmap-draw.js.
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
 * views). The wheel (Ctrl / pinch anywhere; a plain wheel on a wide window) and + / − / 0 zoom,
 * a drag or Shift + arrows pan, the minimap (when zoomed) moves the view. Linked hover (side by
 * side, compare.js): the hovered cell goes out as a `heatmap-hover` event on the root, and a
 * `heatmap-show-cell` event outlines another view's cell here.
 */

import { el } from "./dom.js";
import { cellFacts, cellSentence, revealCell } from "./heatmap-cell.js";
import { focusRow, zoomKey, zoomOfKey } from "./heatmap-focus.js";
import { FONT_BOLD, drawCells, drawLegend, drawOverlay, fillCells } from "./heatmap-draw.js";
import { cellCentre, hitTest, minimapPoint, onMatrix } from "./heatmap-hit.js";
import { NARROW, fitHeight, layoutOf } from "./heatmap-layout.js";
import { focusRow as focusTokenRow, lodActive, lodPainter } from "./heatmap-lod.js";
import {
  NO_ZOOM,
  arrowPan,
  centreOn,
  dragPan,
  keyZoom,
  refit,
  revealRow,
  wheelScrolls,
  wheelZoom,
  zoomAround,
} from "./heatmap-zoom.js";
import * as store from "./state.js";

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
  // the keyboard's cell, in words, for a screen reader (and visible under the matrix)
  const said = el("p", { class: "cell-said", attrs: { "aria-live": "polite", id: "cell-said" } });
  root.append(empty, cells, overlay, tooltip);
  root.after(said);
  overlay.setAttribute("role", "img");
  overlay.setAttribute("aria-label", "attention heatmap: rows are queries, columns are keys. " +
    "Arrow keys move a cell cursor (its p is read out), +/− zoom, Shift+arrows pan");
  overlay.setAttribute("aria-describedby", "cell-said");
  drawLegend(legend);

  /** Layout of the current head, recomputed on head / size / special-token changes. */
  let lay = null;
  let hoverCell = null; // {a, b} visible row / column under the pointer
  const off = document.createElement("canvas"); // m × m, one pixel per cell
  let img = null; // its pixels, reused by every repaint
  let painted = false; // the first heatmap was drawn
  let freshHead = false; // a new head is waiting for its first paint
  /** Zoom and pan (heatmap-zoom.js): `z` ≥ 1, the first visible row `r0` and column `c0`. */
  let zoom = NO_ZOOM;
  let drag = null; // {x, y, r0, c0, moved} while the pointer pans
  let keyCol = null; // the keyboard cell cursor's column (visible index; its row: the locked one)
  /** Long texts: pooled regions instead of the m × m image (heatmap-lod.js). */
  const lod = lodPainter();
  let lodOn = false;
  let maskVersion = 0; // bumped with every new mask or head (the pooled images' cache key)

  function layout() {
    const s = store.get();
    if (!s.headData || !s.analysis) return null;
    const ctx = cells.getContext("2d");
    // measured bold: a locked or hovered row's label is drawn bold and must not be clipped
    ctx.font = FONT_BOLD;
    const top = root.getBoundingClientRect().top + window.scrollY;
    return layoutOf({
      tokens: s.analysis.tokens,
      n: s.headData.n,
      hideSpecial: s.hideSpecial,
      measure: (t) => ctx.measureText(t).width,
      width: root.clientWidth,
      fit: fitHeight({ innerWidth: window.innerWidth, innerHeight: window.innerHeight, top }),
    });
  }

  /** Take a new zoom and repaint. */
  function setView(next) {
    zoom = next;
    paint();
    remember();
  }

  /** The zoom into the store (the address and shares keep it: view field `zoom`). */
  function remember() {
    const key = zoomKey(zoom);
    if (store.get().zoom !== key) store.set({ zoom: key });
  }
  /** The zoom a new analysis opens on (the store's, from a link), applied at its first layout. */
  let opening = null;

  function paint() {
    paintCells();
    paintOverlay();
    root.dataset.zoom = zoom.z.toFixed(2);
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
    lodOn = lodActive(lay, dpr);
    root.dataset.lod = lodOn ? "pooled" : "cells";
    maskVersion++;
    // the m × m image only when it is painted (a long text pools its visible region instead)
    off.width = off.height = lodOn ? 1 : lay.m;
    img = lodOn ? null : off.getContext("2d").createImageData(lay.m, lay.m);
    root.style.height = `${lay.height}px`;
    if (opening !== null) {
      // a link's zoom; else a long text's locked row opens zoomed on it (its ★ / × legible)
      const s = store.get();
      const locked = s.lockedRow !== null ? lay.pos[s.lockedRow] ?? -1 : -1;
      zoom = opening ? zoomOfKey(lay, opening) : focusRow(lay, locked) ?? NO_ZOOM;
      opening = null;
    }
    setView(refit(lay, zoom));
  }

  /** Paint every cell (one pixel per cell, scaled up) and the marks of the gold edges. */
  function paintCells() {
    const s = store.get();
    const head = s.headData;
    if (!lay || !head) return;
    const mask = s.result?.mask ?? null;
    if (lodOn) {
      const dpr = window.devicePixelRatio || 1;
      const { canvas, place } = lod.region(lay, zoom, head, mask, dpr, maskVersion);
      drawCells(cells.getContext("2d"), lay, zoom, canvas, head, mask, place);
    } else {
      fillCells(new Uint32Array(img.data.buffer), lay.vis, head.n, mask, head.probs, head.gold);
      off.getContext("2d").putImageData(img, 0, 0);
      drawCells(cells.getContext("2d"), lay, zoom, off, head, mask);
    }
    if (freshHead) {
      // the frame that shows a newly opened head (bench/bench_longpage.py reads it)
      freshHead = false;
      requestAnimationFrame(() => performance.mark("heatmap-head-paint"));
    }
    if (!painted) {
      // the frame that shows the first heatmap (bench/bench_page.py --first-paint reads it)
      painted = true;
      requestAnimationFrame(() => performance.mark("heatmap-first-paint"));
    }
  }

  /** Token labels, selection and hover highlights (and the minimap when zoomed). */
  function paintOverlay() {
    if (!lay) return;
    const s = store.get();
    const { pos } = lay;
    const mini = lodOn && zoom.z > 1
      ? lod.overview(lay, s.headData, s.result?.mask ?? null, maskVersion) : off;
    drawOverlay(overlay.getContext("2d"), lay, zoom, mini, {
      locked: s.lockedRow !== null ? pos[s.lockedRow] ?? -1 : -1,
      hovered: s.hoverToken !== null ? pos[s.hoverToken] ?? -1 : -1,
      cell: hoverCell,
      members: s.clusterMembers,
    });
  }

  // ---------------------------------------------------------------- pointer

  /** The point of a pointer event on the overlay, CSS px from its corner. */
  function pointOf(ev) {
    const rect = overlay.getBoundingClientRect();
    return { x: ev.clientX - rect.left, y: ev.clientY - rect.top };
  }

  /** What a pointer event is over (heatmap-hit.js). */
  function hit(ev) {
    const { x, y } = pointOf(ev);
    return hitTest(lay, zoom, x, y);
  }

  // zoom: the wheel (Ctrl / pinch anywhere; a plain wheel on a wide window), + / − / 0 keys
  overlay.addEventListener("wheel", (ev) => {
    if (!lay || !(ev.ctrlKey || ev.metaKey || window.innerWidth >= NARROW)) return;
    const { x, y } = pointOf(ev);
    if (!onMatrix(lay, x, y)) return;
    const z = wheelZoom(zoom, ev.deltaY, ev.deltaMode);
    if (wheelScrolls(lay, zoom, z)) return; // let it scroll
    ev.preventDefault();
    setView(zoomAround(lay, zoom, z, x - lay.left, y - lay.top));
  }, { passive: false });
  // pan: drag (a click that does not move still locks a row)
  overlay.addEventListener("mousedown", (ev) => {
    if (!lay || ev.button !== 0) return;
    const h = hit(ev);
    if (h.kind === "minimap") {
      setView(centreOn(lay, zoom, h.u, h.v));
      drag = { x: ev.clientX, y: ev.clientY, minimap: true, moved: true };
      return;
    }
    if (zoom.z > 1) drag = { x: ev.clientX, y: ev.clientY, r0: zoom.r0, c0: zoom.c0, moved: false };
  });
  window.addEventListener("mousemove", (ev) => {
    if (!drag || !lay) return;
    if (drag.minimap) {
      const { x, y } = pointOf(ev);
      const { u, v } = minimapPoint(lay, x, y);
      setView(centreOn(lay, zoom, u, v));
      return;
    }
    const dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
    if (!drag.moved && Math.hypot(dx, dy) < 4) return;
    drag.moved = true;
    overlay.classList.add("panning");
    setView(dragPan(lay, zoom, drag, dx, dy));
  });
  window.addEventListener("mouseup", () => {
    if (!drag) return;
    overlay.classList.remove("panning");
    if (drag.moved) suppressClick = true; // the click that ends a drag locks nothing
    drag = null;
  });
  let suppressClick = false;

  overlay.addEventListener("mousemove", (ev) => {
    if (!lay || drag?.moved) return;
    const h = hit(ev);
    const s = store.get();
    if (h.kind === "cell") {
      if (!hoverCell || hoverCell.a !== h.a || hoverCell.b !== h.b) {
        const start = performance.now();
        hoverCell = { a: h.a, b: h.b };
        showTooltip(ev, lay.vis[h.a], lay.vis[h.b]);
        paintOverlay();
        performance.measure("hover", { start }); // tooltip and crosshair of a new cell
        tell({ i: lay.vis[h.a], j: lay.vis[h.b] });
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
    const locking = store.get().lockedRow !== i;
    store.set({ lockedRow: locking ? i : null });
    // a click on a long text's unzoomed matrix locks the row and zooms there: marks legible
    const focus = locking && zoom.z === 1 ? focusRow(lay, h.a) : null;
    if (focus) {
      const { x, y } = pointOf(ev);
      setView(zoomAround(lay, zoom, focus.z, x - lay.left, y - lay.top));
    }
    // a touch screen has no wheel and no keys: freeing the row goes back to the whole matrix
    if (!locking && zoom.z > 1 && matchMedia("(hover: none), (pointer: coarse)").matches) setView(NO_ZOOM);
  });
  // keyboard: ↑ / ↓ move the locked query row, Esc clears the selection
  overlay.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape") store.set({ lockedRow: null, cluster: null });
    const z = keyZoom(zoom, ev.key);
    if (lay && z !== null) {
      ev.preventDefault();
      setView(zoomAround(lay, zoom, z));
      return;
    }
    if (lay && ev.shiftKey && ev.key.startsWith("Arrow")) {
      // Shift + arrows pan by a quarter of the view
      ev.preventDefault();
      setView(arrowPan(lay, zoom, ev.key) ?? zoom);
      return;
    }
    if (!lay || !["ArrowUp", "ArrowDown", "ArrowLeft", "ArrowRight"].includes(ev.key)) return;
    ev.preventDefault();
    // ↑ / ↓ move the locked query row, ← / → the key column of the keyboard's cell cursor
    const at = store.get().lockedRow === null ? -1 : lay.pos[store.get().lockedRow];
    let next = at < 0 ? 0 : at;
    if (ev.key === "ArrowDown") next = Math.min(lay.m - 1, at + 1);
    if (ev.key === "ArrowUp") next = Math.max(0, at - 1);
    const col = keyCol === null ? next : keyCol;
    if (ev.key === "ArrowLeft") keyCol = Math.max(0, col - 1);
    else if (ev.key === "ArrowRight") keyCol = Math.min(lay.m - 1, col + 1);
    else keyCol = col;
    const shown = revealCell(lay, revealRow(lay, zoom, next), next, keyCol);
    const scrolled = shown.r0 !== zoom.r0 || shown.c0 !== zoom.c0;
    zoom = shown;
    remember();
    hoverCell = { a: next, b: keyCol };
    if (scrolled) paintCells(); // the cells moved under the labels too
    if (store.get().lockedRow === lay.vis[next]) paintOverlay();
    store.set({ lockedRow: lay.vis[next] }); // repaints the overlay
    sayCell(next, keyCol);
  });

  /** The keyboard's cell: its facts in the live region, and the tooltip beside it. */
  function sayCell(a, b) {
    const f = facts(lay.vis[a], lay.vis[b]);
    said.textContent = cellSentence(f);
    tell({ i: lay.vis[a], j: lay.vis[b] }); // the keyboard's cell is linked too (compare.js)
    fillTooltip(f);
    const c = cellCentre(lay, zoom, a, b);
    const o = overlay.getBoundingClientRect();
    moveTooltip({ clientX: o.left + c.x, clientY: o.top + c.y });
  }

  function leaveCell() {
    if (!hoverCell) return;
    hoverCell = null;
    tooltip.hidden = true;
    paintOverlay();
    tell(null);
  }

  /** Linked hover (compare.js): the cell under the pointer, as an event on `root`. */
  function tell(cell) {
    root.dispatchEvent(new CustomEvent("heatmap-hover", { detail: cell }));
  }
  // … and the cell another view's pointer is on, outlined here (null: none)
  root.addEventListener("heatmap-show-cell", (ev) => {
    if (!lay) return;
    const c = ev.detail;
    const a = c ? lay.pos[c.i] ?? -1 : -1, b = c ? lay.pos[c.j] ?? -1 : -1;
    hoverCell = a >= 0 && b >= 0 ? { a, b } : null;
    tooltip.hidden = true;
    paintOverlay();
  });

  /** Cell (i, j)'s facts from memory (heatmap-cell.js): tokens, p, what the method does. */
  function facts(i, j) {
    const s = store.get();
    const head = s.headData;
    return cellFacts({ tokens: s.analysis.tokens, n: head.n, probs: head.probs, gold: head.gold,
      mask: s.result ? s.result.mask : null, causal: s.analysis.causal }, i, j);
  }

  function fillTooltip(f) {
    tooltip.replaceChildren(
      row("query", f.query),
      row("key", f.key),
      row("p", f.p),
      el("div", { class: `tt-verdict ${f.kind}`, text: f.verdict }),
    );
    tooltip.hidden = false;
  }

  /** Fill the tooltip from memory: tokens, p and whether the method keeps the edge. */
  function showTooltip(ev, i, j) {
    fillTooltip(facts(i, j));
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

  // token search (token-search.js): zoom onto a token's query row and lock it
  root.addEventListener("heatmap-focus", (ev) => {
    const s = store.get();
    const i = ev.detail.token;
    if (!lay || !s.headData || lay.pos[i] < 0) return;
    setView(focusTokenRow(lay, zoom, s.headData, i));
    store.set({ lockedRow: i });
  });

  // ---------------------------------------------------------------- store

  store.subscribe((s, changed) => {
    if (changed.has("analysis") || changed.has("hideSpecial")) {
      zoom = NO_ZOOM;
      opening = changed.has("analysis") ? s.zoom ?? "" : "";
      keyCol = null;
      said.textContent = "";
    }
    if (changed.has("headData") || changed.has("hideSpecial") || changed.has("analysis")) {
      hoverCell = null;
      tooltip.hidden = true;
      freshHead = changed.has("headData") && s.headData !== null;
      resize();
      return;
    }
    if (changed.has("result")) {
      maskVersion++;
      paintCells();
    }
    if (changed.has("result") && zoom.z > 1) paintOverlay(); // the minimap shows the mask too
    if (["lockedRow", "hoverToken", "clusterMembers"].some((k) => changed.has(k))) paintOverlay();
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
