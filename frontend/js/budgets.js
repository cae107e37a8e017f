/**
 * The oracle-budget panel (definitions §8, sparse_core/budgets.py): how many keys, and
 * how much attention mass, each query needs to recover a share ρ (0.9 or 0.99) of its true
 * support G_i. For query i, with c_i = ⌈ρ·|G_i|⌉ gold keys to recover,
 *
 * - k budget: the least k whose top-k keys by score hold c_i gold keys (the oracle `topk`);
 * - p budget: the mass of the c_i gold keys with the largest P (the least p of the oracle `topp`).
 *
 * Two views of GET /api/analyses/{id}/budgets, both for the level and the budget picked here:
 * the open head's distribution over its queries (a histogram, quantiles and mean), and every
 * head's distribution side by side (q10–q90 whisker, q25–q75 box, median tick; heads by layer,
 * the open head in the accent colour, the median over every head's queries dashed). The strip
 * is one keyboard stop: ← / → open the previous / next head, as a click on a head does.
 *
 * The data are fetched only once the panel is on screen (IntersectionObserver), once per
 * analysis (every head) and once per head (every query). Plain SVG through dom.js; no HTML is
 * parsed.
 */

import { getBudgets } from "./api.js";
import { el, svg } from "./dom.js";
import * as store from "./state.js";
import { roveButtons } from "./roving.js";

/** Quantile positions in the body's `q` (sparse_core/budgets.py QUANTILES: 0 .1 .25 .5 .75 .9 1). */
const Q10 = 1;
const Q25 = 2;
const Q50 = 3;
const Q75 = 4;
const Q90 = 5;

/** Histogram bins of a k budget: [lo, hi] key counts, finer where most queries are. */
const K_EDGES = [1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513];

/**
 * The histogram of a distribution: bins and their counts.
 * @param {number[]} values one per query (k: integers ≥ 1; p: masses in (0, 1]; 0: no support)
 * @param {"k"|"p"} kind
 * @returns {{label: string, count: number}[]}
 */
export function histogram(values, kind) {
  const vals = values.filter((v) => v > 0);
  if (!vals.length) return [];
  if (kind === "k") {
    const top = Math.max(...vals);
    const bins = [];
    for (let b = 0; b + 1 < K_EDGES.length && K_EDGES[b] <= top; b++) {
      const lo = K_EDGES[b];
      const hi = K_EDGES[b + 1] - 1;
      bins.push({ lo, hi, label: lo === hi ? String(lo) : `${lo}–${hi}`, count: 0 });
    }
    if (top >= K_EDGES[K_EDGES.length - 1]) {
      bins.push({ lo: K_EDGES[K_EDGES.length - 1], hi: Infinity, label: "513+", count: 0 });
    }
    for (const v of vals) bins.find((b) => v >= b.lo && v <= b.hi).count++;
    return bins;
  }
  // p: bins 0.05 wide from the lowest value's up to 1 (the last bin closed)
  const lo = Math.min(19, Math.floor(Math.min(...vals) * 20));
  const bins = [];
  for (let b = lo; b < 20; b++) bins.push({ label: `${(b / 20).toFixed(2)}–${((b + 1) / 20).toFixed(2)}`, count: 0 });
  for (const v of vals) bins[Math.min(19, Math.floor(v * 20)) - lo].count++;
  return bins;
}

/** A value as the panel writes it: keys as integers (one decimal off-grid), masses to 3 places. */
export function fmtBudget(v, kind) {
  if (v === null || v === undefined || Number.isNaN(v)) return "–";
  if (kind === "p") return v.toFixed(3);
  return Number.isInteger(v) ? String(v) : v.toFixed(1);
}

const W = 360; // viewBox width of both charts
const ACCENT = "#1d4ed8"; // app.css --accent
const INK = "#475569";

/** The open head's histogram. */
function drawHistogram(bins, kind) {
  const H = 96;
  const pad = { l: 6, r: 6, t: 12, b: 22 };
  const root = svg("svg", {
    class: "budgets-hist",
    attrs: { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "histogram of this head's queries" },
  });
  const max = Math.max(1, ...bins.map((b) => b.count));
  const bw = (W - pad.l - pad.r) / Math.max(1, bins.length);
  const every = Math.ceil(bins.length / (kind === "p" ? 5 : 9)); // labels that fit
  bins.forEach((b, t) => {
    const h = ((H - pad.t - pad.b) * b.count) / max;
    const x = pad.l + t * bw;
    root.append(
      svg("rect", {
        attrs: { x: x + 1, y: H - pad.b - h, width: Math.max(1, bw - 2), height: h, fill: INK },
      }, [svg("title", { text: `${kind} ${b.label}: ${b.count} queries` })]),
    );
    if (b.count && bw >= 12) {
      root.append(svg("text", { class: "budgets-tick", text: String(b.count), attrs: { x: x + bw / 2, y: H - pad.b - h - 2 } }));
    }
    if (t % every === 0) {
      const label = kind === "p" ? b.label.split("–")[0] : b.label;
      root.append(svg("text", { class: "budgets-tick", text: label, attrs: { x: x + bw / 2, y: H - 8 } }));
    }
  });
  root.append(svg("line", { attrs: { x1: pad.l, x2: W - pad.r, y1: H - pad.b, y2: H - pad.b, stroke: "#94a3b8" } }));
  return root;
}

/**
 * Every head's distribution side by side.
 * @param {object} all the scope "all" body
 * @param {"k"|"p"} kind
 * @param {string} level "0.9" | "0.99"
 * @param {{layer: number, head: number}} open the open head
 */
function drawStrip(all, kind, level, open) {
  const H = 150;
  const pad = { l: 34, r: 6, t: 8, b: 18 };
  const heads = all.heads;
  const layers = Math.max(...heads.map((h) => h.layer)) + 1;
  const perLayer = heads.length / layers;
  const slots = heads.length + (layers - 1); // one empty slot between layers
  const step = (W - pad.l - pad.r) / slots;
  const qs = heads.map((h) => h[kind][level].q);
  // y: keys on a log2 axis from 1, masses linear up to 1
  let y;
  const ticks = [];
  if (kind === "k") {
    const top = 2 ** Math.ceil(Math.log2(Math.max(2, ...qs.map((q) => q[Q90] ?? 1))));
    const span = Math.log2(top);
    y = (v) => H - pad.b - ((H - pad.t - pad.b) * Math.log2(Math.max(1, v))) / span;
    for (let v = 1; v <= top; v *= span > 5 ? 4 : 2) ticks.push([v, String(v)]);
  } else {
    const low = Math.min(0.9, Math.max(0, Math.floor(Math.min(...qs.map((q) => q[Q10] ?? 1)) * 10) / 10));
    y = (v) => H - pad.b - ((H - pad.t - pad.b) * (v - low)) / Math.max(1e-9, 1 - low);
    for (let t = 0; t <= 4; t++) ticks.push([low + ((1 - low) * t) / 4, (low + ((1 - low) * t) / 4).toFixed(2)]);
  }
  const root = svg("svg", { class: "budgets-strip", attrs: { viewBox: `0 0 ${W} ${H}` } });
  for (const [v, label] of ticks) {
    root.append(
      svg("line", { attrs: { x1: pad.l, x2: W - pad.r, y1: y(v), y2: y(v), stroke: "#e2e8f0" } }),
      svg("text", { class: "budgets-axis", text: label, attrs: { x: pad.l - 4, y: y(v) + 3 } }),
    );
  }
  const pooled = all.pooled[kind][level].q[Q50];
  const xOf = (t) => pad.l + (t + Math.floor(t / perLayer) + 0.5) * step;
  heads.forEach((h, t) => {
    const q = h[kind][level].q;
    if (q[Q50] === null) return;
    const isOpen = h.layer === open.layer && h.head === open.head;
    const colour = isOpen ? ACCENT : INK;
    const x = xOf(t);
    const bw = Math.max(1.5, step * 0.7);
    const g = svg("g", { class: isOpen ? "budgets-head open" : "budgets-head", attrs: { "data-index": t } }, [
      svg("title", {
        text:
          `layer ${h.layer} head ${h.head}: median ${fmtBudget(q[Q50], kind)}, ` +
          `q10–q90 ${fmtBudget(q[Q10], kind)}–${fmtBudget(q[Q90], kind)}, mean ${fmtBudget(h[kind][level].mean, kind)}`,
      }),
      svg("rect", { attrs: { x: x - step / 2, y: pad.t, width: step, height: H - pad.t - pad.b, fill: "transparent" } }),
      svg("line", { attrs: { x1: x, x2: x, y1: y(q[Q10]), y2: y(q[Q90]), stroke: colour, "stroke-width": 1 } }),
      svg("rect", {
        attrs: { x: x - bw / 2, y: y(q[Q75]), width: bw, height: Math.max(1, y(q[Q25]) - y(q[Q75])), fill: colour, opacity: isOpen ? 1 : 0.55 },
      }),
      svg("line", { attrs: { x1: x - bw / 2 - 1, x2: x + bw / 2 + 1, y1: y(q[Q50]), y2: y(q[Q50]), stroke: isOpen ? "#000" : "#0f172a", "stroke-width": 1.5 } }),
    ]);
    root.append(g);
  });
  root.append(
    svg("line", {
      class: "budgets-pooled",
      attrs: { x1: pad.l, x2: W - pad.r, y1: y(pooled), y2: y(pooled), stroke: ACCENT, "stroke-dasharray": "4 3" },
    }),
  );
  for (let l = 0; l < layers; l++) {
    const x = (xOf(l * perLayer) + xOf((l + 1) * perLayer - 1)) / 2;
    root.append(svg("text", { class: "budgets-tick", text: `L${l}`, attrs: { x, y: H - 4 } }));
  }
  return { root, xOf, count: heads.length, perLayer };
}

/**
 * Mount the panel in `root`.
 * @param {HTMLElement} root the panel's body
 * @param {HTMLElement} controls where the level and budget toggles go (the panel's header)
 */
export function initBudgets(root, controls) {
  const view = { level: "0.9", kind: "k" };
  const buttons = [];
  const toggle = (key, value, text, title) => {
    const b = el("button", { text, title, attrs: { type: "button", "data-budget": key, "data-value": value } });
    b.addEventListener("click", () => {
      view[key] = value;
      render();
    });
    buttons.push(b);
    return b;
  };
  controls.append(
    el("div", { class: "toggles", attrs: { role: "group", "aria-label": "recall to reach" } }, [
      el("span", { class: "toggles-label", text: "recall" }),
      toggle("level", "0.9", "0.9"),
      toggle("level", "0.99", "0.99"),
    ]),
    el("div", { class: "toggles", attrs: { role: "group", "aria-label": "budget" } }, [
      toggle("kind", "k", "k keys", "the least top-k (keys by score)"),
      toggle("kind", "p", "p mass", "the least top-p (attention mass kept)"),
    ]),
  );
  for (const g of controls.querySelectorAll("[role=group]")) roveButtons(/** @type {HTMLElement} */ (g));
  const headLine = el("p", { class: "budgets-line" });
  const histBox = el("div", { class: "budgets-chart" });
  const allLine = el("p", { class: "budgets-line" });
  const stripBox = el("div", {
    class: "budgets-chart budgets-strip-box",
    attrs: { tabindex: 0, role: "group", "aria-label": "every head's budget; ← and → open the previous or next head" },
  });
  const note = el("p", { class: "muted budgets-note" });
  root.append(headLine, histBox, allLine, stripBox, note);

  const data = { id: null, all: null, head: null, headKey: null, error: null };
  let visible = false;
  let strip = null;

  function load() {
    const s = store.get();
    const id = s.analysis?.id;
    if (!visible || !id) return;
    if (data.id !== id) {
      Object.assign(data, { id, all: null, head: null, headKey: null, error: null });
      getBudgets(id).then(
        (body) => data.id === id && ((data.all = body), render()),
        (err) => data.id === id && ((data.error = err.message), render()),
      );
    }
    const key = `${id}:${s.layer}:${s.head}`;
    if (data.headKey !== key) {
      data.headKey = key;
      data.head = null;
      data.error = null;
      getBudgets(id, s.layer, s.head).then(
        (body) => data.headKey === key && ((data.head = body), render()),
        (err) => data.headKey === key && ((data.error = err.message), render()),
      );
    }
    render();
  }

  function openHead(t) {
    if (!strip) return;
    const i = Math.max(0, Math.min(strip.count - 1, t));
    store.set({ layer: Math.floor(i / strip.perLayer), head: i % strip.perLayer });
  }

  function render() {
    const s = store.get();
    for (const b of buttons) {
      const on = view[b.dataset.budget] === b.dataset.value;
      b.classList.toggle("on", on);
      b.setAttribute("aria-pressed", String(on));
    }
    const { level, kind } = view;
    const what = kind === "k" ? "keys (top-k by score)" : "attention mass (top-p)";
    note.textContent = data.error
      ? `Budgets not shown: ${data.error}`
      : `Per query: the least ${what} that recovers ${Math.round(Number(level) * 100)} % of its true support (definitions §8).`;
    const h = data.head;
    if (h && `${data.id}:${h.layer}:${h.head}` === data.headKey) {
      const d = h[kind][level];
      headLine.textContent =
        `This head (layer ${h.layer}, head ${h.head}): median ${fmtBudget(d.q[Q50], kind)}, ` +
        `q10–q90 ${fmtBudget(d.q[Q10], kind)}–${fmtBudget(d.q[Q90], kind)}, mean ${fmtBudget(d.mean, kind)}` +
        (kind === "k" ? ` (support: median ${fmtBudget(h.support.q[Q50], "k")} keys)` : "");
      histBox.replaceChildren(drawHistogram(histogram(d.values, kind), kind));
    } else {
      headLine.textContent = s.analysis ? "This head: loading…" : "";
      histBox.replaceChildren();
    }
    if (data.all && data.all.heads?.length) {
      const pooled = data.all.pooled[kind][level];
      allLine.textContent =
        `Every head (${data.all.heads.length}, each q10–q90, box q25–q75): over all queries median ` +
        `${fmtBudget(pooled.q[Q50], kind)}, q90 ${fmtBudget(pooled.q[Q90], kind)} (dashed)`;
      strip = drawStrip(data.all, kind, level, { layer: s.layer, head: s.head });
      stripBox.replaceChildren(strip.root);
    } else {
      allLine.textContent = s.analysis && !data.error ? "Every head: loading…" : "";
      strip = null;
      stripBox.replaceChildren();
    }
  }

  stripBox.addEventListener("click", (ev) => {
    const g = ev.target.closest?.(".budgets-head");
    if (g) openHead(Number(g.dataset.index));
  });
  stripBox.addEventListener("keydown", (ev) => {
    if (!strip || (ev.key !== "ArrowLeft" && ev.key !== "ArrowRight")) return;
    ev.preventDefault();
    const s = store.get();
    openHead(s.layer * strip.perLayer + s.head + (ev.key === "ArrowRight" ? 1 : -1));
  });

  store.subscribe((s, changed) => {
    if (["analysis", "layer", "head"].some((k) => changed.has(k))) load();
  });
  if (typeof IntersectionObserver === "function") {
    new IntersectionObserver((entries) => {
      if (entries.some((e) => e.isIntersecting) && !visible) {
        visible = true;
        load();
      }
    }).observe(root);
  } else {
    visible = true;
  }
  render();
}
