/**
 * The whole model (`view=model`): every layer × head at a readable size at once, as BertViz's
 * model view, with the current method's mask over each (docs/model-view.md).
 *
 * Each head is a square picture of its gold graph, max-pooled to the picture's device pixels so
 * that no gold edge vanishes at any n (heatmap-lod.js `poolCells` on the whole matrix: a block is
 * red if it holds a gold edge the method misses, else blue on its largest kept p, else sand if
 * the mask predicts a pair there, else white: every pair an exact zero). Until a head's payload
 * is in the page the picture is the analysis body's thumbnail (app/engine/thumbs.py, 24 × 24
 * pooled cells, no request), shown with a dashed frame; the overlay comes with the sweep
 * (sweep.js: the current setting evaluated on every head in the background, one head per task),
 * which hands each head's mask here (`onSweepHead`). Each label carries the head's recall; hover
 * or focus reads its numbers out; a click or Enter opens the head in the one-head view.
 *
 * Keyboard: the heads are ONE tab stop (roving tabindex, roving.js); the arrow keys, Home and End
 * move between them and read the focused head's numbers into the readout line (aria-live).
 *
 * Timing: `performance.measure("model-view")` from the change that asked for a paint (the view
 * opened, a new analysis, a new setting) to the frame after the last head is painted with it
 * (bench/bench_model_view.py).
 */

import { fmt, el } from "./dom.js";
import { bodyThumbImage } from "./grid.js";
import { poolCells, rowStarts, wholeRegion } from "./heatmap-lod.js";
import { nextIndex, setStop } from "./roving.js";
import * as store from "./state.js";
import { onSweepHead, settingKey } from "./sweep.js";
import { visibleTokens } from "./tokens.js";

/** Keys whose change asks for a new paint of every head. */
const REPAINT = ["analysis", "method", "params"];

/** The identity visible-index maps of a head of n tokens (every token shown), cached per n. */
const identity = new Map();
function layOf(n) {
  if (!identity.has(n)) {
    const ix = Int32Array.from({ length: n }, (_, i) => i);
    identity.set(n, { m: n, vis: ix, pos: ix });
  }
  return identity.get(n);
}

/**
 * The visible-index maps of the page's tokens: every token, or without [CLS]/[SEP] when the view
 * hides them (the heatmap's `hideSpecial`, tokens.js `visibleTokens`); `pos` is -1 for a hidden one.
 * @param {{special?: boolean}[]} tokens
 * @param {boolean} hideSpecial
 * @returns {{m: number, vis: Int32Array, pos: Int32Array}}
 */
export function visibleLay(tokens, hideSpecial) {
  const n = tokens.length;
  if (!hideSpecial) return layOf(n);
  const vis = Int32Array.from(visibleTokens(tokens, true));
  const pos = new Int32Array(n).fill(-1);
  vis.forEach((t, a) => { pos[t] = a; });
  return { m: vis.length, vis, pos };
}

/**
 * The head's picture with the mask: the whole n × n matrix max-pooled to at most `side` cells a
 * side (one block ≥ one device pixel), as ABGR words.
 * @param {{n: number, probs: Float32Array, edgeI: Int32Array, edgeJ: Int32Array}} head
 * @param {Uint8Array|null} mask
 * @param {number} side device pixels of the picture
 * @param {{m: number, vis: Int32Array, pos: Int32Array}} [lay] the tokens shown (`visibleLay`)
 * @returns {ImageData}
 */
export function modelPicture(head, mask, side, lay = layOf(head.n)) {
  const region = wholeRegion(lay.m, Math.max(1, side));
  const img = new ImageData(region.cols, region.rows);
  poolCells(new Uint32Array(img.data.buffer), region, head, lay, mask,
    rowStarts(head.n, head.edgeI));
  return img;
}

/** Put an image into a tile's canvas (drawn pixelated at the canvas' CSS size). */
function put(canvas, img) {
  if (canvas.width !== img.width || canvas.height !== img.height) {
    canvas.width = img.width;
    canvas.height = img.height;
  }
  canvas.getContext("2d").putImageData(img, 0, 0);
}

/**
 * Mount the whole model's heads in `root`, its readout line in `readout`, and toggle
 * `layout.model-view` (app's layout: the model spans the page, the one-head panels are hidden).
 * @param {HTMLElement} root
 * @param {HTMLElement} readout
 * @param {HTMLElement} panel the section shown in the model view
 */
export function initModelView(root, readout, panel) {
  const layout = document.querySelector("main.layout");
  let tiles = [];
  let numbers = []; // per head: the metrics of the setting painted, or null
  let painted = 0; // heads painted with the current setting
  let asked = performance.now(); // when the current paint was asked for
  let focusK = 0;
  let hovered = false; // the pointer is over a head (the readout shows it)
  let drawn = []; // per head: the {head, mask} last painted (repainted when [CLS]/[SEP] hide)
  let lay = null; // the tokens shown (visibleLay), for the current analysis and hideSpecial
  const layNow = (s) => (lay ??= visibleLay(s.analysis.tokens, s.hideSpecial));

  const isOn = () => store.get().view === "model";

  function side(canvas) {
    const w = canvas.clientWidth || 96;
    return Math.max(1, Math.floor(w * (window.devicePixelRatio || 1)));
  }

  function build(s) {
    const a = s.analysis;
    tiles = [];
    numbers = [];
    drawn = [];
    lay = null;
    painted = 0;
    if (!a) {
      root.replaceChildren(el("p", { class: "empty", text: "No analysis yet." }));
      return;
    }
    root.style.setProperty("--heads", String(a.heads));
    const cells = [el("span", { class: "mv-corner", text: "" })];
    for (let h = 0; h < a.heads; h++) {
      cells.push(el("span", { class: "mv-axis", attrs: { "aria-hidden": "true" }, text: `H${h}` }));
    }
    for (let l = 0; l < a.layers; l++) {
      cells.push(el("span", { class: "mv-axis mv-row", attrs: { "aria-hidden": "true" }, text: `L${l}` }));
      for (let h = 0; h < a.heads; h++) {
        const canvas = el("canvas", { class: "mv-pic", attrs: { width: "1", height: "1", "aria-hidden": "true" } });
        const label = el("span", { class: "mv-label" }, [
          el("span", { class: "mv-name" }, [el("span", { class: "sr-only", text: `L${l} ` }), `H${h}`]),
          el("span", { class: "mv-recall" }, [
            el("span", { class: "sr-only", text: ", recall " }), el("span", { class: "mv-rv" }),
          ]),
        ]);
        const tile = el("button", {
          class: "mv-tile stale",
          attrs: { type: "button", "data-layer": String(l), "data-head": String(h), tabindex: "-1" },
        }, [canvas, label]);
        tiles.push(tile);
        numbers.push(null);
        cells.push(tile);
      }
    }
    root.replaceChildren(...cells);
    const t = a.thumbs;
    tiles.forEach((tile, k) => {
      const img = t && Array.isArray(t.cells) ? bodyThumbImage(t.cells[k], t.k) : null;
      if (img) put(tile.firstChild, img);
      tile.dataset.paint = img ? "thumb" : "none";
    });
    focusK = s.layer * a.heads + s.head;
    mark(s);
  }

  /** The open head outlined and the tab stop; labels of the setting. */
  function mark(s) {
    const a = s.analysis;
    if (!a || !tiles.length) return;
    const open = s.layer * a.heads + s.head;
    tiles.forEach((tile, k) => {
      tile.classList.toggle("open", k === open);
      tile.setAttribute("aria-current", k === open ? "true" : "false");
    });
    focusK = open; // the tab stop: the open head (the arrows move it from there)
    setStop(tiles, focusK);
  }

  /** The numbers of head k as one line (the readout and the tooltip). */
  function describe(k) {
    const s = store.get();
    const a = s.analysis;
    if (!a || !tiles[k]) return "";
    const l = Math.floor(k / a.heads), h = k % a.heads;
    const row = a.summary?.[k];
    const m = numbers[k];
    const parts = [`Layer ${l}, head ${h}`];
    if (row) parts.push(`gold sparsity ${fmt(row.gold_sparsity)}`);
    if (m) {
      parts.push(`${s.method}: recall ${fmt(m.recall)}`, `sparsity ${fmt(m.sparsity)}`,
        `exact ${fmt(m.exact)}`, `mass recall ${fmt(m.mass_recall)}`);
    } else parts.push(`${s.method}: computing…`);
    return parts.join(" · ");
  }

  function show(k) {
    readout.textContent = describe(k) + " · Enter opens it";
  }

  /** The setting over the whole model (the readout while no head is hovered or focused). */
  function summary() {
    const s = store.get();
    if (!s.analysis || !tiles.length) return void (readout.textContent = "");
    const params = Object.entries(s.params).map(([k, v]) => `${k} ${v}`).join(", ");
    const setting = `${s.method}${params ? ` (${params})` : ""}`;
    if (painted < tiles.length) {
      readout.textContent = `${setting}: evaluating every head… ${painted} of ${tiles.length}`;
      return;
    }
    const mean = numbers.reduce((acc, m) => acc + m.recall, 0) / numbers.length;
    const worst = numbers.reduce((w, m, k) => (m.recall < numbers[w].recall ? k : w), 0);
    const a = s.analysis;
    readout.textContent = `${setting}: mean recall ${fmt(mean)} over ${tiles.length} heads; ` +
      `lowest L${Math.floor(worst / a.heads)} H${worst % a.heads} (${fmt(numbers[worst].recall)})`;
  }
  const inside = () => tiles.includes(/** @type {HTMLElement} */ (document.activeElement));

  /** A new setting (or analysis, or the view opened): every picture waits for the sweep. */
  function restart() {
    painted = 0;
    asked = performance.now();
    numbers = numbers.map(() => null);
    for (const tile of tiles) {
      tile.classList.add("stale");
      tile.querySelector(".mv-rv").textContent = "";
      tile.dataset.setting = "";
    }
    root.dataset.painted = "0";
    if (!inside()) summary();
  }

  onSweepHead(({ k, head, mask, metrics, setting }) => {
    const s = store.get();
    const tile = tiles[k];
    if (!isOn() || !tile || setting !== settingKey(s)) return;
    put(tile.firstChild, modelPicture(head, mask, side(tile.firstChild), layNow(s)));
    drawn[k] = { head, mask };
    const first = numbers[k] === null; // a sweep restarted on the same setting paints k again
    numbers[k] = metrics;
    tile.dataset.paint = "mask";
    tile.dataset.setting = setting;
    tile.dataset.recall = String(metrics.recall);
    tile.classList.remove("stale");
    tile.querySelector(".mv-rv").textContent = fmt(metrics.recall, 2).replace(/^0/, "");
    tile.title = describe(k).replaceAll(" · ", "\n");
    if (first) painted += 1;
    root.dataset.painted = String(painted);
    if (!inside() && !hovered) summary();
    if (first && painted === tiles.length) {
      requestAnimationFrame(() => {
        performance.measure("model-view", { start: asked }); // bench/bench_model_view.py
        root.dataset.done = setting;
      });
    }
    if (tiles.indexOf(/** @type {HTMLElement} */ (document.activeElement)) === k) show(k);
  });

  root.addEventListener("click", (ev) => {
    const tile = /** @type {HTMLElement} */ (ev.target).closest?.(".mv-tile");
    if (!tile) return;
    store.set({ view: "head", layer: Number(tile.dataset.layer), head: Number(tile.dataset.head) });
  });
  root.addEventListener("keydown", (ev) => {
    const a = store.get().analysis;
    if (!a || ev.altKey || ev.ctrlKey || ev.metaKey || ev.shiftKey) return;
    const at = tiles.indexOf(/** @type {HTMLElement} */ (ev.target));
    if (at < 0) return;
    const k = nextIndex(ev.key, at, tiles.length, a.heads);
    if (k === null) return;
    ev.preventDefault();
    focusK = k;
    setStop(tiles, k);
    tiles[k].focus();
    show(k);
  });
  root.addEventListener("focusin", (ev) => {
    const k = tiles.indexOf(/** @type {HTMLElement} */ (ev.target));
    if (k >= 0) show(k);
  });
  root.addEventListener("mouseover", (ev) => {
    const tile = /** @type {HTMLElement} */ (ev.target).closest?.(".mv-tile");
    hovered = !!tile;
    if (tile) show(tiles.indexOf(tile));
  });
  root.addEventListener("mouseleave", () => {
    hovered = false;
    if (!inside()) summary();
  });
  root.addEventListener("focusout", (ev) => {
    if (!tiles.includes(/** @type {HTMLElement} */ (ev.relatedTarget)) && !hovered) summary();
  });

  store.subscribe((s, changed) => {
    if (changed.has("view")) {
      layout?.classList.toggle("model-view", s.view === "model");
      panel.hidden = s.view !== "model";
      if (s.view === "model") restart();
    }
    if (changed.has("analysis")) {
      build(s);
      restart();
    } else if (REPAINT.some((key) => changed.has(key))) restart();
    else if (changed.has("hideSpecial") && s.analysis) {
      // the same setting, other tokens shown: repaint what is painted (the sweep is not rerun)
      lay = null;
      tiles.forEach((tile, k) => {
        if (drawn[k]) put(tile.firstChild, modelPicture(drawn[k].head, drawn[k].mask, side(tile.firstChild), layNow(s)));
      });
    }
    if (["analysis", "layer", "head"].some((key) => changed.has(key))) mark(s);
  });
}
