/**
 * The head grid: every layer × head as a small tile, coloured by the head's gold sparsity
 * (sparsity(G), definitions §4; scale stretched over this text's range) or by the current method's recall
 * (absolute scale [0, 1]). Clicking a tile opens that head; the open head is outlined. Arrow keys
 * move between heads.
 *
 * Each tile draws its head's graph small (a canvas: P pooled by max into at most 24 × 24 cells,
 * white where every P is exactly 0, blue by √p), as BertViz's model view shows every head's shape.
 * Every head is drawn at once from the analysis body's `thumbs` (app/engine/thumbs.py: the same blocks,
 * √p in seven steps), so a 512-token text shows all 72 heads without fetching their payloads; a
 * head whose payload is in the page (the open one, those prefetched) is redrawn from its exact
 * probabilities (the full 256-step ramp). The tile's frame and label are the chosen metric. Gold sparsity is coloured on this text's
 * range, or on [0, 1] when the heads do not differ (α = 1: every head dense, the lightest colour).
 *
 * Coloured by role (definitions §11), each tile takes its head's role colour and a short label
 * (role-words.js; the roles are loaded by roles.js into the store's `roles`) and the legend names
 * every role's colour.
 *
 * Recall colours come from `headRecall` in the store (the current setting, computed in the
 * browser for every head, see sweep.js); until a head's value is there, the tile shows the
 * server's summary figure for the method's defaults, marked with a dashed outline.
 */

import { recallColour, sparsityColour, textOn } from "./colours.js";
import { el, fmt } from "./dom.js";
import { PROB_LUT, ZERO_PX, probIndex } from "./colours.js";
import { ROLE_INFO, ROLE_ORDER, pct } from "./role-words.js";
import { nextIndex, setStop } from "./roving.js";
import { onHeadLoaded } from "./session.js";
import * as store from "./state.js";

/** Thumbnail side, in pooled cells, at most. */
const THUMB = 24;

/**
 * The head's graph pooled (max) into a k × k image, k = min(n, THUMB).
 * @returns {ImageData}
 */
export function thumbImage(data, k) {
  const n = data.n;
  const img = new ImageData(k, k);
  const px = new Uint32Array(img.data.buffer);
  for (let a = 0; a < k; a++) {
    const i0 = Math.floor((a * n) / k), i1 = Math.max(i0 + 1, Math.floor(((a + 1) * n) / k));
    for (let b = 0; b < k; b++) {
      const j0 = Math.floor((b * n) / k), j1 = Math.max(j0 + 1, Math.floor(((b + 1) * n) / k));
      let best = 0;
      for (let i = i0; i < i1; i++) {
        const row = i * n;
        for (let j = j0; j < j1; j++) if (data.probs[row + j] > best) best = data.probs[row + j];
      }
      px[a * k + b] = best > 0 ? PROB_LUT[probIndex(best)] : ZERO_PX;
    }
  }
  return img;
}

/** Characters of the body's thumbnails (base64url's alphabet): two cells of states 0–7 each. */
const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const CODE = new Int8Array(128).fill(-1);
for (let c = 0; c < ALPHABET.length; c++) CODE[ALPHABET.charCodeAt(c)] = c;
/** Pixel of a cell state: 0 white (every p exactly 0), s ≥ 1 the √p ramp at (s − 1) / 6. */
const STATE_PX = Uint32Array.from({ length: 8 }, (_, s) =>
  s === 0 ? ZERO_PX : PROB_LUT[Math.round(((s - 1) / 6) * 255)],
);

/**
 * One head's thumbnail from the analysis body (`thumbs.cells[idx]`, app/engine/thumbs.py) as a k × k
 * image; null when the string does not hold k² cells.
 * @param {string} cells
 * @param {number} k
 * @returns {ImageData | null}
 */
export function bodyThumbImage(cells, k) {
  if (typeof cells !== "string" || cells.length !== Math.ceil((k * k) / 2)) return null;
  const img = new ImageData(k, k);
  const px = new Uint32Array(img.data.buffer);
  for (let c = 0; c < k * k; c++) {
    const code = CODE[cells.charCodeAt(c >> 1) & 127];
    if (code < 0) return null;
    px[c] = STATE_PX[c & 1 ? code & 7 : code >> 3];
  }
  return img;
}

/**
 * A k × k thumbnail pooled again into m × m blocks (the same block edges), keeping each block's
 * darkest pixel: on the √p ramp the darkest is the largest p, and white (every p 0) only where the
 * whole block is white. A tile smaller than k device pixels would otherwise drop whole rows and
 * columns when the browser scales the canvas down (nearest neighbour: `image-rendering: pixelated`).
 * @param {ImageData} img
 * @param {number} m
 * @returns {ImageData}
 */
export function fitThumb(img, m) {
  const k = img.width;
  if (m >= k) return img;
  const src = new Uint32Array(img.data.buffer);
  const out = new ImageData(m, m);
  const dst = new Uint32Array(out.data.buffer);
  const lum = (v) => 299 * (v & 255) + 587 * ((v >>> 8) & 255) + 114 * ((v >>> 16) & 255);
  for (let a = 0; a < m; a++) {
    const i0 = Math.floor((a * k) / m), i1 = Math.max(i0 + 1, Math.floor(((a + 1) * k) / m));
    for (let b = 0; b < m; b++) {
      const j0 = Math.floor((b * k) / m), j1 = Math.max(j0 + 1, Math.floor(((b + 1) * k) / m));
      let best = src[i0 * k + j0];
      let dark = lum(best);
      for (let i = i0; i < i1; i++) {
        for (let j = j0; j < j1; j++) {
          const v = src[i * k + j];
          const l = lum(v);
          if (l < dark) [best, dark] = [v, l];
        }
      }
      dst[a * m + b] = best;
    }
  }
  return out;
}

/** Put a k × k thumbnail into a tile's canvas (pooled to `side` pixels if smaller) and show it. */
function drawTile(tile, img, side) {
  tile._thumb = img; // the full-size thumbnail, for a later resize
  const shown = fitThumb(img, side);
  const canvas = tile.firstChild;
  if (canvas.width !== shown.width) canvas.width = canvas.height = shown.width;
  canvas.getContext("2d").putImageData(shown, 0, 0);
  canvas.hidden = false;
  tile.classList.add("has-thumb");
}

/** Store keys that change the tiles' colours or marks. */
const REPAINT = ["gridColour", "headRecall", "method", "layer", "head", "headData", "summaryAt", "roles"];

/**
 * Mount the grid in `root` and its colour legend in `legend`.
 * @param {HTMLElement} root
 * @param {HTMLElement} legend
 */
export function initGrid(root, legend) {
  let tiles = [];
  let side = Infinity; // device pixels of a tile's thumbnail (measured once it is shown)

  /** Device pixels of a thumbnail as laid out now (a shown canvas), or Infinity. */
  function measure(canvas) {
    if (!canvas || !canvas.clientWidth) return Infinity;
    return Math.max(1, Math.floor(canvas.clientWidth * (window.devicePixelRatio || 1)));
  }

  /** Measure the thumbnails' size; redraw them all when it changed (a resize, the first draw). */
  function refit() {
    const now = measure(tiles.find((t) => t._thumb)?.firstChild);
    if (now === side || now === Infinity) return;
    side = now;
    for (const tile of tiles) if (tile._thumb) drawTile(tile, tile._thumb, side);
  }

  function build(s) {
    const a = s.analysis;
    if (!a) {
      root.replaceChildren(el("p", { class: "empty", text: "No analysis yet." }));
      tiles = [];
      return;
    }
    root.style.setProperty("--heads", String(a.heads));
    const head = [el("span", { class: "grid-corner", text: "L\\H" })];
    for (let h = 0; h < a.heads; h++) head.push(el("span", { class: "grid-axis", text: String(h) }));
    tiles = [];
    const rows = [];
    for (let l = 0; l < a.layers; l++) {
      rows.push(el("span", { class: "grid-axis", text: String(l) }));
      for (let h = 0; h < a.heads; h++) {
        const thumb = el("canvas", { class: "tile-thumb", attrs: { width: "1", height: "1", hidden: "" } });
        const label = el("span", { class: "tile-label" });
        const tile = el("button", {
          class: "tile",
          attrs: { type: "button", "data-layer": String(l), "data-head": String(h) },
        }, [thumb, label]);
        tiles.push(tile);
        rows.push(tile);
      }
    }
    root.replaceChildren(...head, ...rows);
    const t = a.thumbs;
    if (t && Array.isArray(t.cells) && tiles.length) {
      const t0 = performance.now();
      // the new tiles' size (another model: another head count), measured on the first one
      tiles[0].classList.add("has-thumb");
      tiles[0].firstChild.hidden = false;
      side = measure(tiles[0].firstChild);
      tiles.forEach((tile, idx) => {
        const img = bodyThumbImage(t.cells[idx], t.k);
        if (img) {
          drawTile(tile, img, side);
          tile.dataset.thumb = "body";
        }
      });
      if (tiles[0].dataset.thumb !== "body") {
        tiles[0].classList.remove("has-thumb"); // a malformed string: the tile shows its figure
        tiles[0].firstChild.hidden = true;
      }
      performance.measure("grid-thumbs", { start: t0 }); // every tile drawn (bench_page.py)
    } else side = Infinity;
    paint(s);
  }

  function paint(s) {
    const a = s.analysis;
    if (!a) return;
    if (s.gridColour === "role") {
      paintRoles(s);
      return;
    }
    root.classList.remove("by-role");
    const gold = a.summary.map((row) => row.gold_sparsity);
    let lo = Math.min(...gold);
    let hi = Math.max(...gold);
    if (hi - lo < 0.01) [lo, hi] = [0, 1]; // no spread to show (α = 1: all dense): absolute
    const byRecall = s.gridColour === "recall";
    tiles.forEach((tile, k) => {
      const row = a.summary[k];
      const live = s.headRecall ? s.headRecall[k] : NaN;
      const summary = row.methods[s.method]?.recall ?? NaN;
      const recall = Number.isFinite(live) ? live : summary;
      const value = byRecall ? recall : row.gold_sparsity;
      const bg = Number.isFinite(value)
        ? byRecall ? recallColour(value) : sparsityColour(value, lo, hi)
        : "#e5e7eb";
      tile.style.background = bg;
      tile.style.color = Number.isFinite(value) ? textOn(bg) : "#6b7280";
      tile.lastChild.textContent = Number.isFinite(value) ? fmt(value, 2).replace(/^0/, "") : "–";
      const open = row.layer === s.layer && row.head === s.head;
      tile.classList.toggle("open", open && !!s.headData);
      tile.setAttribute("aria-pressed", String(open)); // the open head
      // the name holds the tile's visible figure (axe: label-content-name-mismatch)
      tile.setAttribute("aria-label", `${byRecall ? "recall" : "gold sparsity"} ` +
        `${tile.lastChild.textContent}, layer ${row.layer}, head ${row.head}`);
      tile.classList.toggle("stale", byRecall && !Number.isFinite(live));
      const own = a.own_alpha?.[row.layer]?.[row.head];
      tile.title =
        `layer ${row.layer}, head ${row.head}\ngold sparsity ${fmt(row.gold_sparsity)}` +
        (Number.isFinite(recall) ? `\nrecall (${s.method}) ${fmt(recall)}` : "") +
        (Number.isFinite(own) ? `\nthe model's own α ${fmt(own, 3)} (trained; ` +
          `${a.alpha === "own" ? "shown at it" : `shown at α = ${a.alpha}`})` : "");
      tile.dataset.ownAlpha = Number.isFinite(own) ? String(own) : "";
      tile.dataset.role = "";
    });
    // one tab stop: the open head's tile; the arrow keys move between heads (roving tabindex)
    setStop(tiles, s.layer * a.heads + s.head);
    legend.replaceChildren(
      el("span", { text: byRecall ? `recall of ${s.method}: 0` : `gold sparsity: ${fmt(lo, 2)}` }),
      el("span", { class: `grid-ramp ${byRecall ? "recall" : "sparsity"}` }),
      el("span", { text: byRecall ? "1" : fmt(hi, 2) }),
    );
  }

  /** Tiles coloured by their head's role; the legend names each role's colour. */
  function paintRoles(s) {
    const a = s.analysis;
    const r = s.roles?.id === a.id ? s.roles : null;
    root.classList.add("by-role"); // the tile is its role's colour (no thumbnail)
    tiles.forEach((tile, k) => {
      const row = a.summary[k];
      const item = r?.roles?.[row.layer]?.[row.head];
      const info = item ? ROLE_INFO[item.role] : null;
      const bg = info ? info.colour : "#e5e7eb";
      tile.style.background = bg;
      tile.style.color = info ? textOn(bg) : "#6b7280";
      tile.lastChild.textContent = info ? info.label : "–";
      const open = row.layer === s.layer && row.head === s.head;
      tile.classList.toggle("open", open && !!s.headData);
      tile.setAttribute("aria-pressed", String(open));
      tile.classList.remove("stale");
      tile.dataset.role = item ? item.role : "";
      const said = item
        ? item.role === "mixed" ? `mixed, mostly ${item.leading} ${pct(item.share)}` : `${item.role} ${pct(item.share)}`
        : "loading";
      tile.setAttribute("aria-label", `${tile.lastChild.textContent} (role: ${said}), layer ${row.layer}, head ${row.head}`);
      tile.title = `layer ${row.layer}, head ${row.head}\nrole: ${said} of rows` +
        (item?.syntax ? `\ntracks ${item.syntax.relation}: ${pct(item.syntax.accuracy)}` : "");
    });
    setStop(tiles, s.layer * a.heads + s.head);
    if (!r || r.error) {
      legend.replaceChildren(el("span", { text: r?.error ? `roles: ${r.error}` : "roles: loading…" }));
      return;
    }
    legend.replaceChildren(
      el("span", { class: "role-legend-title", text: "role:" }),
      ...ROLE_ORDER.map((role) =>
        el("span", { class: "role-key" }, [
          el("span", { class: "role-swatch", attrs: { "aria-hidden": "true" } }),
          el("span", { text: role }),
        ])),
    );
    legend.querySelectorAll(".role-swatch").forEach((sw, k) => {
      sw.style.background = ROLE_INFO[ROLE_ORDER[k]].colour;
    });
  }

  root.addEventListener("click", (ev) => {
    const tile = ev.target.closest(".tile");
    if (tile) store.set({ layer: Number(tile.dataset.layer), head: Number(tile.dataset.head) });
  });
  root.addEventListener("keydown", (ev) => {
    const s = store.get();
    if (!s.analysis) return;
    const { layers, heads } = s.analysis;
    const k = nextIndex(ev.key, s.layer * heads + s.head, layers * heads, heads);
    if (k === null || ev.altKey || ev.ctrlKey || ev.metaKey) return;
    ev.preventDefault();
    store.set({ layer: Math.floor(k / heads), head: k % heads });
    tiles[k].focus();
  });

  // small tiles: the thumbnail and the frame's colour carry it; the figure is in the tooltip
  new ResizeObserver(() => {
    if (tiles.length) root.classList.toggle("compact", tiles[0].clientWidth < 34);
    refit();
  }).observe(root);

  onHeadLoaded((id, layer, head, data) => {
    const a = store.get().analysis;
    if (!a || a.id !== id) return;
    const tile = tiles[layer * a.heads + head];
    if (!tile) return;
    const k = Math.min(data.n, THUMB);
    drawTile(tile, thumbImage(data, k), side);
    tile.dataset.thumb = "payload";
    if (side === Infinity) refit();
  });

  store.subscribe((s, changed) => {
    if (changed.has("analysis")) build(s);
    else if (REPAINT.some((k) => changed.has(k))) paint(s);
  });
}
