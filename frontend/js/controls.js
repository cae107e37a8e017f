/**
 * The method panel: a method picker and one control per parameter, built from the ParamSpec list
 * the API returns for this text (`analysis.methods[*].params`; never hard-coded ranges; values
 * are read through params.js, the twin of ParamSpec.clean):
 * int / float -> a range slider with its value, choice -> a select, bool -> a checkbox. The
 * add-ons every method has (`window`, `globals`) are grouped under "Add-ons". Below it, the
 * current setting's metrics (definitions §4), computed in the browser, and its block sparsity at the
 * tile size picked in the metrics panel's header (`store.block`: what a block-sparse
 * kernel can skip).
 */

import { getMetrics } from "./api.js";
import { el, fmt } from "./dom.js";
import { markInput } from "./live.js";
import { coerceParam, resolveParams } from "./params.js";
import { sliderScale, typedValue } from "./slider-scale.js";
import * as store from "./state.js";

const ADDONS = new Set(["window", "globals"]);
/** A slider's width (CSS px) its scale is made for: the method panel's width, less padding. */
const SLIDER_PX = 240;

/**
 * Whether the page can compute `m` for `analysis`: the server's word (`available`: sf-* need an
 * artefact, indexer and seer a trained selector beside it); an older body without it: sf-* rule.
 */
export function methodAvailable(analysis, m) {
  return m.available ?? (!m.needs_artefact || Boolean(analysis.artefact));
}

/** The methods the page can compute for this analysis. */
export function availableMethods(analysis) {
  return analysis.methods.filter((m) => methodAvailable(analysis, m));
}

/** Format a parameter value for its slider's readout. */
function show(spec, v) {
  if (spec.kind === "float") return Number(v).toFixed(spec.step && spec.step < 0.1 ? 2 : 1);
  if (spec.name === "window" && Number(v) === 0) return "off";
  // the band |i − j| ≤ (w − 1) / 2 is symmetric: an even width keeps what w − 1 keeps; say so
  if (spec.name === "window" && Number(v) % 2 === 0) return `${v}≡${Number(v) - 1}`;
  return String(v);
}

/**
 * Mount the method panel in `root` and the metrics in `metricsRoot`.
 * @param {HTMLElement} root
 * @param {HTMLElement} metricsRoot
 * @param {{serverMetrics?: boolean}} [opts] serverMetrics: show the server's output error (the
 *   page; a notebook widget has no server)
 */
export function initMethodPanel(root, metricsRoot, { serverMetrics = true } = {}) {
  const picker = el("select", { attrs: { id: "method", "aria-label": "method" } });
  // where a model has no Sparsefinder artefact at this α: one line on how to make one
  const hint = el("p", { class: "help artefact-hint", attrs: { id: "artefact-hint" } });
  hint.hidden = true;
  const params = el("div", { class: "params" });
  root.replaceChildren(el("label", { class: "row", text: "Method " }, [picker]), hint, params);
  let controls = new Map(); // name -> {spec, input, out, range, scale}
  let built = "";

  function build(s) {
    const a = s.analysis;
    if (!a) return;
    const spec = a.methods.find((m) => m.name === s.method);
    const avail = new Set(availableMethods(a).map((m) => m.name));
    const option = (m) => {
      const o = el("option", {
        text: avail.has(m.name) ? m.label : `${m.label} (off: no fitted predictor)`,
        attrs: { value: m.name },
      });
      o.disabled = !avail.has(m.name);
      o.selected = m.name === s.method;
      return o;
    };
    // grouped by family (sparse_core.methods.FAMILIES, in the registry's order)
    const groups = new Map();
    for (const m of a.methods) {
      const key = m.family || "";
      if (!groups.has(key)) groups.set(key, { label: m.family_label || "other", items: [] });
      groups.get(key).items.push(m);
    }
    picker.replaceChildren(
      ...[...groups.entries()].flatMap(([key, g]) =>
        key
          ? [el("optgroup", { attrs: { label: g.label, "data-family": key } }, g.items.map(option))]
          : g.items.map(option),
      ),
    );
    controls = new Map();
    const main = [];
    const addons = [];
    for (const p of spec ? spec.params : []) {
      (ADDONS.has(p.name) ? addons : main).push(control(p, s.params[p.name]));
    }
    params.replaceChildren(
      ...main,
      ...(addons.length ? [el("h3", { text: "Add-ons" }), ...addons] : []),
    );
    built = `${a.id}/${s.method}`;
  }

  function control(spec, value) {
    const id = `param-${spec.name}`;
    let input;
    let range = null;
    let scale = null;
    const out = el("output", { attrs: { for: id } });
    if (spec.kind === "bool") {
      input = el("input", { attrs: { type: "checkbox", id } });
      input.checked = !!value;
    } else if (spec.kind === "choice") {
      input = el("select", { attrs: { id } });
      for (const c of spec.choices ?? []) {
        const o = el("option", { text: String(c), attrs: { value: String(c) } });
        o.selected = String(c) === String(value);
        input.append(o);
      }
    } else {
      // a number field (every value exactly) and a slider on a scale that fits the range
      input = el("input", {
        attrs: {
          type: "number", id, class: "param-number",
          min: String(spec.min),
          max: String(spec.max),
          step: String(spec.step ?? (spec.kind === "int" ? 1 : "any")),
          inputmode: spec.kind === "int" ? "numeric" : "decimal",
        },
      });
      input.value = String(value);
      scale = sliderScale(spec, SLIDER_PX);
      range = el("input", {
        attrs: {
          type: "range", class: "param-range", "data-scale": scale.kind,
          min: String(scale.min), max: String(scale.max), step: String(scale.step),
          "aria-label": `${spec.label} (slider)`,
        },
      });
      range.dataset.range = spec.name;
      range.value = String(scale.toPos(Number(value)));
      range.setAttribute("aria-valuetext", show(spec, value));
      out.textContent = special(spec, value);
    }
    input.dataset.param = spec.name;
    controls.set(spec.name, { spec, input, out, range, scale });
    const label = el("label", { class: "param-name", text: spec.label, attrs: { for: id } });
    const helpId = `${id}-help`;
    const parts = [label, out, input];
    if (range) parts.push(range);
    if (spec.help) {
      parts.push(el("p", { class: "param-help", text: spec.help, attrs: { id: helpId } }));
      input.setAttribute("aria-describedby", helpId);
    }
    return el("div", { class: `param param-${spec.kind}` }, parts);
  }

  function read(spec, input) {
    return spec.kind === "bool" ? input.checked : coerceParam(spec, input.value);
  }

  function sync(s) {
    for (const [name, { spec, input, out, range, scale }] of controls) {
      const v = s.params[name];
      if (spec.kind === "bool") input.checked = !!v;
      else if (document.activeElement !== input && String(input.value) !== String(v)) {
        input.value = String(v);
      }
      if (range) showRange(spec, range, scale, out, v);
    }
    const a = s.analysis;
    hint.hidden = !a || Boolean(a.artefact);
    if (a && !a.artefact && a.alpha === "own") {
      hint.replaceChildren(
        "Learned methods (sf-*) are fitted on graphs of one α; this model's heads each run at " +
          "their own α, so pick one α for all heads (softmax, entmax, sparsemax or other) to use them.",
      );
    } else if (a && !a.artefact) {
      // plain words: a page user cannot fit a predictor; the docs say how (docs/methods.md)
      hint.replaceChildren(
        `The learned methods (sf-*) are off: this server has no Sparsefinder predictor fitted ` +
          `for this model at α = ${a.alpha}. Every other method works at any α.`,
      );
    }
  }

  picker.addEventListener("change", () => {
    const a = store.get().analysis;
    const spec = a.methods.find((m) => m.name === picker.value);
    markInput();
    store.set({ method: spec.name, params: resolveParams(spec) });
  });
  params.addEventListener("input", (ev) => {
    const fromRange = ev.target.dataset.range;
    const name = fromRange ?? ev.target.dataset.param;
    const c = name && controls.get(name);
    if (!c) return;
    let v;
    if (fromRange) {
      v = coerceParam(c.spec, c.scale.toValue(Number(c.range.value)));
      c.input.value = String(v);
    } else if (c.range) {
      const typed = typedValue(c.spec, c.input.value);
      if (typed === null) return; // half typed ("", "-"): wait
      v = coerceParam(c.spec, typed);
    } else v = read(c.spec, c.input);
    if (c.range) showRange(c.spec, c.range, c.scale, c.out, v, !fromRange);
    markInput();
    store.set({ params: { ...store.get().params, [name]: v } });
  });

  // ------------------------------------------------------------------ metrics

  const rows = ["recall", "mass_recall", "sparsity", "exact", "precision"].map((k) => {
    const value = el("span", { class: "metric-value", text: "–" });
    const bar = el("span", { class: "metric-bar" }, [el("span")]);
    const row = el("div", {
      class: `metric metric-${k.replace("_", "-")}`,
      attrs: { "data-metric": k },
      ...(k === "mass_recall" ? { title: "the share of the attention mass the pattern keeps, averaged over queries (definitions §8)" } : {}),
    }, [el("span", { class: "metric-name", text: k.replace("_", " ") }), value, bar]);
    return { k, row, value, fill: bar.firstChild };
  });
  // what the misses cost this head: the server's figure (it needs the head's values and entmax
  // over the kept pairs), asked for once the sliders rest, beside recall
  const errValue = el("span", { class: "metric-value", text: "–" });
  const errBar = el("span", { class: "metric-bar metric-bar-cost" }, [el("span")]);
  const errRow = el("div", {
    class: "metric metric-output-error",
    attrs: { "data-metric": "output_error" },
    title: "what the pattern's misses cost this head: ‖(P̃ − P)V‖ / ‖PV‖, P̃ the head's entmax " +
      "over the kept pairs only (0: the head's output is unchanged; lower is better)",
  }, [el("span", { class: "metric-name", text: "output error" }), errValue, errBar]);
  // (a notebook widget has no server to ask: no row)
  if (serverMetrics) rows.splice(1, 0, { k: "output_error", row: errRow, value: errValue, fill: errBar.firstChild, server: true });
  const errors = new Map(); // setting key -> output error (or NaN: failed)
  let errTimer = 0;
  function settingKey(s) {
    const h = s.headData;
    return h && s.analysis ? `${s.analysis.id}/${h.layer}/${h.head}/${s.method}/${JSON.stringify(s.params ?? {})}` : null;
  }
  function askError(s) {
    clearTimeout(errTimer);
    const key = settingKey(s);
    if (!key || errors.has(key)) return;
    errTimer = setTimeout(async () => {
      const h = s.headData;
      try {
        const m = await getMetrics(s.analysis.id, h.layer, h.head, s.method, s.params ?? {});
        errors.set(key, typeof m.output_error === "number" ? m.output_error : NaN);
      } catch {
        errors.set(key, NaN);
      }
      if (errors.size > 500) errors.delete(errors.keys().next().value);
      if (settingKey(store.get()) === key) showMetrics(store.get());
    }, 250);
  }
  const blockName = el("span", { class: "metric-name" });
  const blockValue = el("span", { class: "metric-value", text: "–" });
  const blockBar = el("span", { class: "metric-bar" }, [el("span")]);
  const blockRow = el("div", {
    class: "metric metric-block",
    attrs: { "data-metric": "block_sparsity" },
    title: "share of the B × B tiles (of those the causal / length mask reaches) with no edge of " +
      "the pattern: what a block-sparse kernel (FlashAttention / FlexAttention tiles) can skip",
  }, [blockName, blockValue, blockBar]);
  // a block method's own block size (its `block` or `page` slider), when it is not the one above
  const ownName = el("span", { class: "metric-name" });
  const ownValue = el("span", { class: "metric-value", text: "–" });
  const ownBar = el("span", { class: "metric-bar" }, [el("span")]);
  const ownRow = el("div", {
    class: "metric metric-own-block",
    attrs: { "data-metric": "block_sparsity_own" },
    title: "block sparsity at the method's own block size: what its block kernel skips",
  }, [ownName, ownValue, ownBar]);
  const gold = el("p", { class: "muted gold-line" });
  // where a tile or a method's block is as long as the text: said, not shown as a number
  const tileNote = el("p", { class: "muted tile-note", attrs: { "data-note": "tile" } });
  const blockNote = el("p", { class: "block-note", attrs: { "data-note": "block", role: "note" } });
  const problem = el("p", { class: "field-error", attrs: { role: "alert" } });
  metricsRoot.replaceChildren(...rows.map((r) => r.row), blockRow, tileNote, ownRow, blockNote, problem, gold);

  function showMetrics(s) {
    const m = s.result?.metrics;
    say(problem, s.result?.error ?? "");
    problem.hidden = !s.result?.error;
    for (const r of rows) {
      if (r.server) {
        const key = settingKey(s);
        const v = key && errors.has(key) ? errors.get(key) : NaN;
        say(r.value, key && !errors.has(key) ? "…" : fmt(v));
        fillBar(r.fill, Math.min(1, v));
        const now = Number.isFinite(v) ? v : null; // the Pareto plot's star, on output error
        if (store.get().outputError !== now) store.set({ outputError: now });
        if (key && !errors.has(key)) askError(s);
        continue;
      }
      const v = m ? m[r.k] : NaN;
      say(r.value, fmt(v));
      fillBar(r.fill, v);
    }
    const b = m?.block_sparsity?.[s.block] ?? NaN;
    say(blockName, `block sparsity, ${s.block} × ${s.block} tiles`);
    blockRow.dataset.block = s.block;
    say(blockValue, fmt(b));
    fillBar(blockBar.firstChild, b);
    const n = s.analysis?.n ?? 0;
    // one tile covers the whole text: its block sparsity is 0 whatever the pattern keeps
    const oneTile = n > 0 && n <= Number(s.block);
    blockRow.hidden = oneTile;
    tileNote.hidden = !oneTile;
    if (oneTile) {
      say(tileNote, `block sparsity: the ${n} tokens fit in one ${s.block} × ${s.block} tile, so a ` +
        "tiled kernel skips nothing (a smaller tile size above shows more).");
    }
    const own = s.params?.block ?? s.params?.page;
    const wholeBlock = own !== undefined && n > 0 && Number(own) >= n;
    blockNote.hidden = !wholeBlock;
    if (wholeBlock) {
      say(blockNote, `Every key is kept: the text (n = ${n}) is shorter than one block ` +
        `(B = ${own}), so sparsity 0 and recall 1 say nothing about the method here. Pick a smaller ` +
        "block, or a longer text.");
    }
    ownRow.hidden = own === undefined || wholeBlock || String(own) === String(s.block);
    if (!ownRow.hidden) {
      const v = m?.block_sparsity?.[String(own)] ?? NaN;
      say(ownName, `block sparsity, ${own} × ${own} (its own blocks)`);
      ownRow.dataset.block = String(own);
      say(ownValue, fmt(v));
      fillBar(ownBar.firstChild, v);
    }
    const ownAlpha = s.headData
      ? s.analysis?.own_alpha?.[s.headData.layer]?.[s.headData.head]
      : undefined;
    say(gold, s.headData
      ? `gold sparsity of layer ${s.headData.layer}, head ${s.headData.head}: ` +
        `${fmt(s.headData.goldSparsity)} · |G| = ${s.headData.goldCount} edges` +
        (Number.isFinite(ownAlpha)
          ? ` · the model's own α for this head: ${fmt(ownAlpha, 3)} (this view: ` +
            `${s.analysis.alpha === "own" ? "each head at its own α" : `α = ${s.analysis.alpha}`})`
          : "")
      : "");
  }

  store.subscribe((s, changed) => {
    if (!s.analysis) return;
    if (changed.has("analysis") || changed.has("method") || built !== `${s.analysis.id}/${s.method}`) {
      build(s);
    }
    if (changed.has("params") || changed.has("method") || changed.has("analysis")) sync(s);
    if (changed.has("result") || changed.has("headData") || changed.has("block") ||
        changed.has("params") || changed.has("method")) showMetrics(s);
  });
}

/** A metric's bar filled to `v` in [0, 1]: the size of its background (app.css), a repaint of the
 * bar alone; a width would relay out the panel and re-layerise the page on every slider step. */
function fillBar(fill, v) {
  fill.style.backgroundSize = `${Number.isFinite(v) ? (v * 100).toFixed(1) : 0}% 100%`;
}

/** What a value means where the number alone does not say it (the window: off, even widths). */
function special(spec, v) {
  const said = show(spec, v);
  return said === String(v) || spec.kind === "float" ? "" : said;
}

/** The slider's position, its spoken value and the readout of a parameter at `v`. */
function showRange(spec, range, scale, out, v, moveRange = true) {
  const pos = String(scale.toPos(Number(v)));
  if (moveRange && range.value !== pos) range.value = pos;
  const said = show(spec, v);
  if (range.getAttribute("aria-valuetext") !== said) range.setAttribute("aria-valuetext", said);
  say(out, special(spec, v));
}

/** Set a node's text where it changed (an equal write still relays out and repaints it). */
function say(node, text) {
  if (node.textContent !== text) node.textContent = text;
}
