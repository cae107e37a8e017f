/**
 * The notebook widget's view (anywidget; app/widget.py bundles this module and the page's modules
 * it imports into one ESM string). It mounts the page's own head grid (grid.js), method panel and
 * metrics (controls.js), heatmap (heatmap.js) and live pipeline (live.js) on the page's store
 * (state.js), fed from the widget's model instead of the HTTP API:
 *
 * - `_analysis`: the analyze body (what POST /api/analyze answers), computed in Python;
 * - `_head`: the open head's payload (what GET …/heads/{layer}/{head} answers), set by Python
 *   whenever `layer` / `head` / the analysis change;
 * - `_recall`: the current setting's recall on every head, for the grid's "recall" colouring;
 * - `_thumbs`: every head's graph pooled to k × k, drawn into the grid's tiles (thumbImage);
 * - `layer`, `head`, `method`, `params`: synced both ways (a tile click or a slider here sets the
 *   trait; setting the trait in Python redraws here). A slider being dragged is sent to Python at
 *   most every {@link PARAMS_MS} ms (the last value always goes).
 *
 * Every render gets its own copy of the modules (the bundle instantiates them per view), so two
 * views of one widget, or two widgets, never share a store.
 * @module widget/widget
 */

import { initMethodPanel } from "../controls.js";
import { el } from "../dom.js";
import { initGrid, thumbImage } from "../grid.js";
import { prepareHead } from "../head.js";
import { initHeatmap } from "../heatmap.js";
import { initLive } from "../live.js";
import * as store from "../state.js";

/** Trait names synced both ways with the store. */
const SYNCED = ["layer", "head", "method", "params"];
/** Least time between two `params` sent while a slider moves (ms). */
const PARAMS_MS = 120;
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

/**
 * anywidget's render: mount the view in `el`, return the clean-up.
 * @param {{model: {get: (k: string) => any, set: (k: string, v: any) => void,
 *   on: (ev: string, fn: () => void) => void, off?: (ev: string, fn: () => void) => void,
 *   save_changes: () => void}, el: HTMLElement}} props
 */
export function render({ model, el: host }) {
  const title = el("p", { class: "sw-title" });
  const grid = el("div", { class: "grid", attrs: { role: "group", "aria-label": "heads" } });
  const gridLegend = el("div", { class: "grid-legend" });
  const toggle = el("div", { class: "sw-toggle" });
  for (const [value, text] of [["gold", "gold sparsity"], ["recall", "recall"]]) {
    const b = el("button", { text, attrs: { type: "button", "data-value": value } });
    b.addEventListener("click", () => store.set({ gridColour: value }));
    toggle.append(b);
  }
  const methodPanel = el("div", { class: "method-panel" });
  const metrics = el("div", { class: "metrics" });
  const heatmapLegend = el("div", { class: "legend" });
  const heatmap = el("div", { class: "heatmap" });
  const headTitle = el("p", { class: "sw-head" });
  const error = el("p", { class: "sw-error", attrs: { role: "alert", hidden: "" } });
  const root = el("div", { class: "sparsescope-widget" }, [
    title,
    el("div", { class: "sw-side" }, [grid, gridLegend, toggle, methodPanel, metrics]),
    el("div", { class: "sw-main" }, [headTitle, error, heatmapLegend, heatmap]),
  ]);
  host.replaceChildren(root);

  initGrid(grid, gridLegend);
  initMethodPanel(methodPanel, metrics, { serverMetrics: false });
  initHeatmap(heatmap, heatmapLegend);
  initLive();

  let pulling = false; // a change that came from the model is not sent back to it
  let pushing = false; // while the store's traits are copied into the model, pulls wait

  /** Model -> store: the analysis, the synced traits, and the head payload when it matches. */
  function pull() {
    if (pushing) return;
    const analysis = model.get("_analysis");
    if (!analysis || !analysis.id) return;
    const s = store.get();
    const patch = {};
    if (!s.analysis || s.analysis.id !== analysis.id) {
      Object.assign(patch, {
        analysis,
        text: analysis.text ?? s.text,
        alpha: analysis.alpha,
        causal: analysis.causal,
        status: "ready",
      });
    }
    for (const k of SYNCED) {
      if (k === "params" && timer) continue; // a slider value waiting to be sent wins
      const v = model.get(k);
      if (!same(v, s[k])) patch[k] = v;
    }
    const payload = model.get("_head");
    const layer = patch.layer ?? s.layer;
    const head = patch.head ?? s.head;
    const current = s.headData;
    const fresh =
      patch.analysis !== undefined || !current || current.layer !== layer || current.head !== head;
    if (payload && payload.layer === layer && payload.head === head && payload.n === analysis.n) {
      if (fresh || current.payload !== payload) {
        const prepared = prepareHead(payload, analysis.causal);
        prepared.payload = payload;
        patch.headData = prepared;
      }
    } else if (fresh) {
      patch.headData = null;
    }
    pulling = true;
    try {
      store.set(patch);
      store.set({ headRecall: recallFor(store.get()) });
    } finally {
      pulling = false;
    }
    drawThumbs();
  }

  let thumbsDrawn = "";
  /** Every tile's thumbnail from `_thumbs`, once per analysis (the page draws them as heads load). */
  function drawThumbs() {
    const t = model.get("_thumbs");
    const a = store.get().analysis;
    if (!t || !a || t.analysis !== a.id || thumbsDrawn === a.id) return;
    grid.querySelectorAll(".tile").forEach((tile, idx) => {
      const canvas = tile.querySelector("canvas.tile-thumb");
      const probs = t.probs[idx];
      if (!canvas || !probs) return;
      canvas.width = canvas.height = t.k;
      const data = { n: t.k, probs: Float32Array.from(probs) };
      canvas.getContext("2d").putImageData(thumbImage(data, t.k), 0, 0);
      canvas.hidden = false;
      tile.classList.add("has-thumb");
    });
    thumbsDrawn = a.id;
  }

  /** `_recall` as the grid's headRecall, when it is for the store's analysis and setting. */
  function recallFor(s) {
    const r = model.get("_recall");
    const ok = r && s.analysis && r.analysis === s.analysis.id && r.method === s.method &&
      same(r.params, s.params);
    return ok ? Float64Array.from(r.recall) : null;
  }

  let timer = 0;
  let lastSent = 0;
  /** Store -> model for the synced traits that differ; `params` rate-limited while dragging. */
  function push() {
    // a snapshot: a real (Backbone) model fires change:<trait> synchronously inside model.set, and
    // pull() would then write the model's other, not yet updated traits back into the store (a tile
    // click would set the layer and lose the head); pulls wait until every trait is set
    const s = { ...store.get() };
    const methodChanged = !same(model.get("method"), s.method);
    let dirty = false;
    pushing = true;
    try {
      dirty = pushTraits(s, methodChanged);
    } finally {
      pushing = false;
    }
    if (dirty) {
      model.save_changes();
      pull();
    }
  }

  function pushTraits(s, methodChanged) {
    let dirty = false;
    for (const k of SYNCED) {
      if (same(model.get(k), s[k])) continue;
      if (k === "params" && !methodChanged) {
        const wait = lastSent + PARAMS_MS - performance.now();
        if (wait > 0) {
          clearTimeout(timer);
          timer = setTimeout(() => {
            timer = 0;
            push();
          }, wait);
          continue;
        }
        lastSent = performance.now();
      }
      model.set(k, k === "params" ? { ...s[k] } : s[k]);
      dirty = true;
    }
    return dirty;
  }

  /** Store -> model: a click or a slider here becomes the trait's value in Python. */
  const unsubscribe = store.subscribe((s, changed) => {
    if (changed.has("gridColour") || changed.has("analysis")) {
      for (const b of toggle.children) b.classList.toggle("on", b.dataset.value === s.gridColour);
    }
    if (["analysis", "layer", "head", "headData"].some((k) => changed.has(k)) && s.analysis) {
      const a = s.analysis;
      title.replaceChildren(
        `${a.model} · ${a.n} tokens · α = ${a.alpha} · ${a.causal ? "causal" : "bidirectional"} `,
        el("small", { text: a.artefact ? `· Sparsefinder ${a.artefact}` : "· no Sparsefinder artefact" }),
      );
      const shown = s.headData && s.headData.layer === s.layer && s.headData.head === s.head;
      headTitle.textContent = `Layer ${s.layer} · head ${s.head} · ${shown ? `n = ${s.headData.n}` : "loading…"}`;
      host.dataset.layer = String(s.layer);
      host.dataset.head = String(s.head);
    }
    if (changed.has("result")) {
      error.textContent = s.result?.error ?? "";
      error.hidden = !s.result?.error;
      host.dataset.drawn = s.headData ? `${s.headData.layer}/${s.headData.head}` : "";
    }
    if (pulling) return;
    if (changed.has("method") || changed.has("params")) {
      const r = recallFor(s);
      if (r || s.headRecall) store.set({ headRecall: r });
    }
    if (SYNCED.some((k) => changed.has(k))) push();
  });

  const events = [
    "change:_analysis",
    "change:_head",
    "change:_recall",
    "change:_thumbs",
    ...SYNCED.map((k) => `change:${k}`),
  ];
  for (const ev of events) model.on(ev, pull);
  pull();
  return () => {
    clearTimeout(timer);
    unsubscribe();
    if (model.off) for (const ev of events) model.off(ev, pull);
  };
}
