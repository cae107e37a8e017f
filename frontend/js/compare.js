/**
 * Side by side (docs/compare.md): the open head A and a second pane B that
 * differs from it in ONE thing — another head, another method, another α or another model — next
 * to each other, with their difference A − B: cells only in A, only in B, in both, counted.
 *
 * - The graphs compared: the gold graphs G = {P_ij > 0} of A and B for head / α / model, the
 *   predicted masks (M ∪ W ∪ Glob) ∩ V of the two methods for method (compare-diff.js).
 * - Each pane colours the gold graph through its mask: kept, missed, the mask's zeros, zeros;
 *   shrunk by max-pooling, so no edge vanishes at n = 512 (compare-diff.js `poolMax`).
 * - Linked hover: the cell under the pointer in any pane — or in the main heatmap
 *   (its `heatmap-hover` event) — is outlined in every pane and in the heatmap
 *   (`heatmap-show-cell`), and the readout says both panes' values.
 * - B's mask is recomputed in the same frame as A's (the store's `result`), so the slider
 *   latency bench_page.py measures includes it (`--compare`).
 * - The view lives in the store's view fields compare, cmpLayer, cmpHead, cmpMethod, cmpAlpha,
 *   cmpModel: the address, shares and exports keep it; PNG export of the three panes + legend.
 */

import { cellAt, diffMasks } from "./compare-diff.js";
import { cellFacts } from "./heatmap-cell.js";
import { comparePng, labelMargin, labelsOf, measure, paintLabels, paintPane, renderPane } from "./compare-paint.js";
import { paneB } from "./compare-data.js";
import { availableMethods } from "./controls.js";
import { el, fmt } from "./dom.js";
import { download } from "./export.js";
import { predict } from "./methods.js";
import * as store from "./state.js";

const MODES = [["head", "another head"], ["method", "another method"], ["alpha", "another α"], ["model", "another model"]];
const B_KEYS = ["compare", "cmpLayer", "cmpHead", "cmpMethod", "cmpAlpha", "cmpModel"];

/** Sensible B values for `mode` where the store's would make B equal to A. */
export function defaultsFor(mode, s, models) {
  const a = s.analysis;
  if (mode === "head" && s.cmpLayer === s.layer && s.cmpHead === s.head) {
    const k = (s.layer * a.heads + s.head + 1) % (a.layers * a.heads);
    return { cmpLayer: Math.floor(k / a.heads), cmpHead: k % a.heads };
  }
  if (mode === "method" && (!s.cmpMethod || s.cmpMethod === s.method)) {
    const other = availableMethods(a).find((m) => m.name !== s.method);
    return other ? { cmpMethod: other.name } : {};
  }
  if (mode === "alpha" && s.cmpAlpha === s.alpha) return { cmpAlpha: s.alpha === 2 ? 1.5 : 2 };
  if (mode === "model" && (!s.cmpModel || s.cmpModel === (s.model ?? a.model))) {
    const other = models.find((m) => m.id !== (s.model ?? a.model));
    return other ? { cmpModel: other.id } : {};
  }
  return {};
}

/**
 * Mount side by side in `root` (the panel's body) with its on/off button in `toggle`'s place.
 * @param {HTMLElement} root
 * @param {HTMLElement} heatmap the main heatmap's element (linked hover)
 * @param {Array<{id: string}>} models the served models (config island)
 */
export function initCompare(root, heatmap, models = []) {
  const onBtn = el("button", { class: "cmp-on", text: "Side by side", attrs: { type: "button", "aria-pressed": "false" } });
  const mode = el("select", { attrs: { id: "cmp-mode", "aria-label": "pane B differs from A in" } },
    MODES.map(([v, t]) => {
      // another model needs a second one served (`serve --model` given twice)
      const one = v === "model" && models.length < 2;
      return el("option", { text: one ? `${t} (one is served)` : t, attrs: one ? { value: v, disabled: "" } : { value: v } });
    }));
  const pickB = el("span", { class: "cmp-pick" });
  const png = el("button", { text: "PNG", attrs: { type: "button", title: "download the three panes and the legend" } });
  const bar = el("div", { class: "cmp-bar" }, [onBtn, el("label", { text: "B shows " }, [mode]), pickB, png]);
  const panes = ["A", "B", "A − B"].map((name) => {
    const canvas = el("canvas", { attrs: { role: "img", "aria-label": `pane ${name}` } });
    const title = el("div", { class: "cmp-title" });
    // the token labels of the query rows and the key columns (compare-paint.js paintLabels)
    const rows = el("div", { class: "cmp-rows", attrs: { "aria-hidden": "true" } });
    const cols = el("div", { class: "cmp-cols", attrs: { "aria-hidden": "true" } });
    const plot = el("div", { class: "cmp-plot" }, [rows, cols, canvas]);
    const fig = el("figure", { class: "cmp-pane", attrs: { "data-pane": name[0] === "A" && name.length > 1 ? "D" : name } }, [title, plot]);
    return { name, canvas, title, fig, plot, rows, cols, labels: null, margin0: 0, off: document.createElement("canvas"), codes: null, src: null, n: 0 };
  });
  const [pa, pb, pd] = panes;
  const legend = el("div", { class: "cmp-legend", attrs: { id: "cmp-legend" } });
  const readout = el("p", { class: "cmp-readout", attrs: { "aria-live": "polite", id: "cmp-readout" } });
  const note = el("p", { class: "cmp-note muted", attrs: { role: "status" } });
  const body = el("div", { class: "cmp-body" }, [
    el("div", { class: "cmp-panes" }, panes.map((p) => p.fig)), legend, readout, note]);
  root.replaceChildren(bar, body);

  let b = null; // pane B's data (compare-data.js), null while loading
  let asked = ""; // the B request in flight or shown
  let maskB = null; // B's mask, with the key it was computed for
  let maskKey = "";
  let diff = null;
  let hover = null; // {i, j}

  const s0 = () => store.get();
  const on = (s) => s.compare !== "off" && !!s.analysis && !!s.headData;

  onBtn.addEventListener("click", () => {
    const s = s0();
    if (s.compare !== "off") return store.set({ compare: "off" });
    if (!s.analysis) return;
    store.set({ ...defaultsFor("head", s, models), compare: "head" });
  });
  mode.addEventListener("change", () => store.set({ ...defaultsFor(mode.value, s0(), models), compare: mode.value }));
  png.addEventListener("click", () => {
    const s = s0();
    if (!on(s) || !diff) return;
    comparePng(panes, legendItems(s), titleOf(s)).then((blob) =>
      download(blob, `sparsescope-compare-${s.compare}-L${s.layer}-H${s.head}.png`));
  });

  /** B's own control: a head, a method, an α or a model. */
  function buildPick(s) {
    const a = s.analysis;
    // a choice of B turns the comparison on (B's control is there before it is)
    const setB = (x) => store.set({ ...x, compare: s.compare });
    let input;
    if (s.compare === "head") {
      input = el("select", { attrs: { id: "cmp-b", "aria-label": "pane B's head" } });
      for (let l = 0; l < a.layers; l++) {
        for (let h = 0; h < a.heads; h++) input.append(el("option", { text: `L${l} H${h}`, attrs: { value: `${l}/${h}` } }));
      }
      input.value = `${s.cmpLayer}/${s.cmpHead}`;
      input.addEventListener("change", () => {
        const [l, h] = input.value.split("/").map(Number);
        setB({ cmpLayer: l, cmpHead: h });
      });
    } else if (s.compare === "method") {
      input = el("select", { attrs: { id: "cmp-b", "aria-label": "pane B's method" } },
        availableMethods(a).map((m) => el("option", { text: m.label, attrs: { value: m.name } })));
      input.value = s.cmpMethod;
      input.addEventListener("change", () => setB({ cmpMethod: input.value }));
    } else if (s.compare === "alpha") {
      input = el("input", { attrs: { id: "cmp-b", type: "number", min: "1", max: "2", step: "0.05", "aria-label": "pane B's α" } });
      input.value = String(s.cmpAlpha);
      input.addEventListener("change", () => {
        const v = Number(input.value);
        if (Number.isFinite(v) && v >= 1 && v <= 2) setB({ cmpAlpha: v });
        else note.textContent = `B's α must be a number in [1, 2], got ${JSON.stringify(input.value)}`;
      });
    } else {
      input = el("select", { attrs: { id: "cmp-b", "aria-label": "pane B's model" } },
        models.map((m) => el("option", { text: m.id, attrs: { value: m.id } })));
      input.value = s.cmpModel;
      input.addEventListener("change", () => setB({ cmpModel: input.value }));
    }
    pickB.replaceChildren(input);
  }

  function titleOf(s) {
    const what = { head: "two heads", method: "two methods", alpha: "two α", model: "two models" }[s.compare];
    return `Side by side: ${what} · ${s.analysis.n} tokens`;
  }

  function labelA(s) {
    const a = s.analysis;
    return `A · L${s.layer} H${s.head} · ${s.method}${s.compare === "alpha" ? ` · α = ${a.alpha}` : ""}${s.compare === "model" ? ` · ${a.model}` : ""}`;
  }

  function labelB(s) {
    if (!b) return "B · loading…";
    const m = settingOfB(s).method ?? "gold only";
    if (s.compare === "alpha") return `B · L${b.layer} H${b.headIndex} · ${m} · α = ${b.analysis.alpha}`;
    if (s.compare === "model") return `B · L${b.layer} H${b.headIndex} · ${m} · ${b.analysis.model}`;
    return `B · L${b.layer} H${b.headIndex} · ${m}`;
  }

  /** What the diff compares, and its counts (the legend and the export). */
  function legendItems(s) {
    const basis = s.compare === "method" ? "predicted masks" : "gold graphs (P > 0)";
    return { basis, onlyA: diff.onlyA, onlyB: diff.onlyB, both: diff.both, jaccard: diff.jaccard, labelA: labelA(s), labelB: labelB(s) };
  }

  // the legend's parts, made once; a slider frame writes only the texts that changed
  const say = (node, text) => {
    if (node.textContent !== text) node.textContent = text;
  };
  const basisEl = el("span", { class: "cmp-basis" });
  const countEl = { onlyA: el("strong", { class: "cmp-count" }), onlyB: el("strong", { class: "cmp-count" }),
    both: el("strong", { class: "cmp-count" }) };
  const overlapEl = el("span", { class: "muted" });
  const item = (cls, text, count) => el("span", { class: `cmp-li ${cls}` }, [
    el("span", { class: "cmp-swatch", attrs: { "aria-hidden": "true" } }), el("span", { text: `${text} ` }), count]);
  legend.append(basisEl, item("only-a", "only in A", countEl.onlyA), item("only-b", "only in B", countEl.onlyB),
    item("both", "in both", countEl.both), overlapEl);

  function renderLegend(s) {
    legend.hidden = !diff;
    if (!diff) return;
    const it = legendItems(s);
    say(basisEl, `A − B over the ${it.basis}:`);
    for (const k of ["onlyA", "onlyB", "both"]) {
      say(countEl[k], String(it[k]));
      legend.dataset[k] = String(it[k]);
    }
    say(overlapEl, `overlap ${fmt(it.jaccard)}`);
  }

  /** B's method and parameters: B's own (method), else A's where B's analysis offers it. */
  function settingOfB(s) {
    if (s.compare === "method") return { method: b.method, params: b.params };
    return b.available.has(s.method) ? { method: s.method, params: s.params } : { method: null, params: null };
  }

  /** B's mask for the current setting (recomputed only when what it depends on changed). */
  function maskOfB(s) {
    if (!b) return null;
    const { method, params } = settingOfB(s);
    if (!method) return null;
    const key = `${method}|${JSON.stringify(params)}`;
    if (key !== maskKey || b.head !== maskB?.head) {
      let mask = null;
      try {
        mask = predict(b.head, method, params);
      } catch (err) {
        note.textContent = `B's mask: ${err.message}`;
      }
      maskB = { head: b.head, mask };
      maskKey = key;
    }
    return maskB.mask;
  }

  /**
   * Set pane `p`'s classes from the inputs `from` (identities), re-rendering only when they
   * changed: a slider frame re-renders A and the difference (method) or A and B (head, α, model).
   */
  function update(p, from, make) {
    const same = p.from && from.length === p.from.length && from.every((v, k) => v === p.from[k]);
    if (same) return;
    p.from = from;
    const got = make();
    p.codes = got?.codes ?? null;
    p.src = got?.src ?? null;
    p.n = got?.n ?? 0;
    measure(p); // the label margin may have changed with the tokens
    paintLabels(p);
    renderPane(p, p === pd);
    paintPane(p, hover, p === pd);
  }

  // the panes' token labels, made once per analysis (a slider frame keeps them)
  const labelCache = new WeakMap();
  const labelled = (tokens) => {
    if (!tokens) return null;
    if (!labelCache.has(tokens)) labelCache.set(tokens, labelsOf(tokens));
    return labelCache.get(tokens);
  };
  let marginOf = { a: null, b: null, margin: 0 };

  /** Each pane's labels and the one margin they share; a pane whose margin changed repaints. */
  function setLabels(s) {
    const tokA = s.analysis.tokens;
    const tokB = b ? b.analysis.tokens : null;
    if (marginOf.a !== tokA || marginOf.b !== tokB) marginOf = { a: tokA, b: tokB, margin: labelMargin([tokA, tokB]) };
    pa.labels = labelled(tokA);
    pb.labels = labelled(tokB);
    pd.labels = pa.labels;
    for (const p of panes) {
      if (p.margin0 === marginOf.margin) continue;
      p.margin0 = marginOf.margin;
      p.from = null; // re-measured, re-rendered and labelled by update()
    }
  }

  /** Recompute the panes' classes and the diff, and paint (synchronous: in A's frame). */
  function recompute() {
    const s = s0();
    const A = s.headData;
    const maskA = s.result?.mask ?? null;
    say(pa.title, labelA(s));
    say(pb.title, labelB(s));
    say(pd.title, "A − B");
    setLabels(s);
    // A's and B's panes are pooled straight from gold and mask (compare-diff.js poolPane)
    update(pa, [A, maskA], () => ({ src: { gold: A.gold, mask: maskA }, n: A.n }));
    const mB = b ? maskOfB(s) : null;
    update(pb, [b, mB], () => (b ? { src: { gold: b.head.gold, mask: mB }, n: b.head.n } : null));
    const byMask = s.compare === "method";
    update(pd, byMask ? [A, b, maskA, mB] : [A, b], () => {
      diff = null;
      if (!b) return null;
      if (b.head.n !== A.n) {
        note.textContent = `A has ${A.n} tokens, B ${b.head.n} (another tokenizer): no cell-by-cell difference.`;
        return null;
      }
      const none = new Uint8Array(A.n * A.n);
      diff = byMask ? diffMasks(maskA ?? none, mB ?? none) : diffMasks(A.gold, b.head.gold);
      return { codes: diff.codes, n: A.n };
    });
    renderLegend(s);
    if (b) root.dataset.state = "ready";
  }

  async function refreshB() {
    const s = s0();
    const key = JSON.stringify([s.compare, s.analysis.id, s.layer, s.head, s.cmpLayer, s.cmpHead, s.cmpMethod, s.cmpAlpha, s.cmpModel, s.headData === null]);
    if (key === asked) return recompute();
    asked = key;
    b = null;
    note.textContent = "";
    root.dataset.state = "loading";
    recompute();
    try {
      const got = await paneB(s);
      if (asked !== key) return;
      b = got;
      note.textContent = got.note;
    } catch (err) {
      if (asked !== key) return;
      root.dataset.state = "error";
      note.textContent = err.message;
      return;
    }
    recompute();
  }

  function sync(s) {
    const shown = on(s);
    onBtn.setAttribute("aria-pressed", String(s.compare !== "off"));
    onBtn.classList.toggle("on", s.compare !== "off");
    body.hidden = !shown;
    png.disabled = !shown;
    mode.disabled = !s.analysis;
    root.classList.toggle("comparing", shown);
    if (!shown) {
      asked = "";
      b = null;
      for (const p of panes) p.from = null;
      // B's control shown at once: picking B (or what it differs in) turns the comparison on
      if (s.analysis && s.compare === "off") {
        const m = mode.value === "model" && models.length < 2 ? "head" : mode.value;
        buildPick({ ...s, ...defaultsFor(m, s, models), compare: m });
      }
      return;
    }
    mode.value = s.compare;
    buildPick(s);
    refreshB();
  }

  store.subscribe((s, changed) => {
    if (["compare", "analysis", "layer", "head", "headData", ...B_KEYS].some((k) => changed.has(k))) return sync(s);
    if (on(s) && changed.has("result")) recompute();
  });
  sync(s0());

  // ------------------------------------------------------------ linked hover
  function showCell(cell, fromHeatmap = false) {
    hover = cell;
    for (const p of panes) if (p.n) paintPane(p, hover, p === pd);
    readout.textContent = cell ? sayCell(s0(), cell) : "";
    if (!fromHeatmap) heatmap.dispatchEvent(new CustomEvent("heatmap-show-cell", { detail: cell }));
  }

  /** The hovered cell in words: its tokens, then each pane's p and verdict (heatmap-cell.js). */
  function sayCell(s, { i, j }) {
    const side = (name, analysis, head, mask) => {
      if (!head || i >= head.n || j >= head.n) return `${name}: —`;
      const f = cellFacts({ tokens: analysis.tokens, n: head.n, probs: head.probs, gold: head.gold,
        mask, causal: analysis.causal }, i, j);
      return mask ? `${name}: p = ${f.p}, ${f.verdict}` : `${name}: p = ${f.p}`;
    };
    const A = s.headData;
    const f = cellFacts({ tokens: s.analysis.tokens, n: A.n, probs: A.probs, gold: A.gold, mask: null,
      causal: s.analysis.causal }, i, j);
    const d = diff && pd.codes ? ["", "in both", "only in B", "only in A"][pd.codes[i * pd.n + j]] : "";
    return [`query ${f.query} → key ${f.key}`, side("A", s.analysis, A, s.result?.mask ?? null),
      side("B", b?.analysis, b?.head, b ? maskOfB(s) : null), ...(d ? [d] : [])].join(" · ");
  }

  for (const p of panes) {
    p.canvas.addEventListener("mousemove", (ev) => {
      if (!p.n) return;
      const r = p.canvas.getBoundingClientRect();
      const c = cellAt(ev.clientX - r.left, ev.clientY - r.top, r.width, p.n);
      if (c && (!hover || hover.i !== c.i || hover.j !== c.j)) showCell(c);
    });
    p.canvas.addEventListener("mouseleave", () => showCell(null));
  }
  heatmap.addEventListener("heatmap-hover", (ev) => {
    if (on(s0()) && b) showCell(ev.detail, true);
  });
  // a new width (not a taller readout): measure, re-render and repaint the panes
  new ResizeObserver(() => {
    if (!on(s0())) return;
    for (const p of panes) {
      const before = p.sideCss;
      measure(p);
      if (p.sideCss === before) continue;
      paintLabels(p);
      renderPane(p, p === pd);
      paintPane(p, hover, p === pd);
    }
  }).observe(root);
}
