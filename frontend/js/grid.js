/**
 * The head grid: every layer × head as a small tile, coloured by the head's gold sparsity
 * (sparsity(G), SPEC §4; scale stretched over this text's range) or by the current method's recall
 * (absolute scale [0, 1]). Clicking a tile opens that head; the open head is outlined. Arrow keys
 * move between heads.
 *
 * Recall colours come from `headRecall` in the store (the current setting, computed in the
 * browser for every head, see sweep.js); until a head's value is there, the tile shows the
 * server's summary figure for the method's defaults, marked with a dashed outline.
 */

import { recallColour, sparsityColour, textOn } from "./colours.js";
import { el, fmt } from "./dom.js";
import * as store from "./state.js";

/** Store keys that change the tiles' colours or marks. */
const REPAINT = ["gridColour", "headRecall", "method", "layer", "head", "headData"];

/**
 * Mount the grid in `root` and its colour legend in `legend`.
 * @param {HTMLElement} root
 * @param {HTMLElement} legend
 */
export function initGrid(root, legend) {
  let tiles = [];

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
        const tile = el("button", {
          class: "tile",
          attrs: { type: "button", "data-layer": String(l), "data-head": String(h) },
        });
        tiles.push(tile);
        rows.push(tile);
      }
    }
    root.replaceChildren(...head, ...rows);
    paint(s);
  }

  function paint(s) {
    const a = s.analysis;
    if (!a) return;
    const gold = a.summary.map((row) => row.gold_sparsity);
    const lo = Math.min(...gold);
    const hi = Math.max(...gold);
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
      tile.textContent = Number.isFinite(value) ? fmt(value, 2).replace(/^0/, "") : "–";
      tile.classList.toggle("open", row.layer === s.layer && row.head === s.head && !!s.headData);
      tile.classList.toggle("stale", byRecall && !Number.isFinite(live));
      tile.title =
        `layer ${row.layer}, head ${row.head}\ngold sparsity ${fmt(row.gold_sparsity)}` +
        (Number.isFinite(recall) ? `\nrecall (${s.method}) ${fmt(recall)}` : "");
    });
    legend.replaceChildren(
      el("span", { text: byRecall ? `recall of ${s.method}: 0` : `gold sparsity: ${fmt(lo, 2)}` }),
      el("span", { class: `grid-ramp ${byRecall ? "recall" : "sparsity"}` }),
      el("span", { text: byRecall ? "1" : fmt(hi, 2) }),
    );
  }

  root.addEventListener("click", (ev) => {
    const tile = ev.target.closest(".tile");
    if (tile) store.set({ layer: Number(tile.dataset.layer), head: Number(tile.dataset.head) });
  });
  root.addEventListener("keydown", (ev) => {
    const s = store.get();
    if (!s.analysis) return;
    const moves = { ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0] };
    const mv = moves[ev.key];
    if (!mv) return;
    ev.preventDefault();
    const layer = Math.min(s.analysis.layers - 1, Math.max(0, s.layer + mv[0]));
    const head = Math.min(s.analysis.heads - 1, Math.max(0, s.head + mv[1]));
    store.set({ layer, head });
    tiles[layer * s.analysis.heads + head].focus();
  });

  store.subscribe((s, changed) => {
    if (changed.has("analysis")) build(s);
    else if (REPAINT.some((k) => changed.has(k))) paint(s);
  });
}
