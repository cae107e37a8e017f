/**
 * Lecture mode (`/lecture?step=K&text=…&alpha=…`): a full-screen walk through attention on one
 * sentence, one idea per slide, keyboard driven (← → space, Home, End, F for full screen).
 * The URL always names the slide shown, so any slide is a shareable link.
 * @module lecture/main
 */

import * as api from "../api.js";
import { debounce, el, pct } from "../dom.js";
import { prepareHead } from "../head.js";
import { parseState, STEPS, toSearch } from "./state.js";
import { refitAll } from "./panel.js";
import { STEP_LIST } from "./steps.js";

const config = readConfig();
const defaults = { text: config.default_text, alpha: config.default_alpha };
let state = readShared() ?? parseState(location.search, defaults);
/** The lecture's own path (a shared link may have opened it under /s/{id}). */
const BASE = "/lecture";

const $ = (id) => /** @type {HTMLElement} */ (document.getElementById(id));
const figure = $("figure");
const panel = $("panel");

/** The data of the current analysis and head (set by {@link load}). */
let data = null;
let loadSeq = 0;

/** API answers already fetched, by request: stepping back and forth never refetches. */
const fetched = new Map();

/** `make()` once per key; a failed call is forgotten, so it can be retried. */
function once(key, make) {
  if (!fetched.has(key)) {
    const p = make();
    fetched.set(key, p);
    p.catch(() => fetched.delete(key));
  }
  return fetched.get(key);
}

/** Read the server's JSON island (defaults only; the URL holds the state). */
function readConfig() {
  const node = document.getElementById("lecture-config");
  const cfg = node ? JSON.parse(node.textContent || "{}") : {};
  return {
    default_text: cfg.default_text ?? "The chef who ran to the store was out of food.",
    default_alpha: cfg.default_alpha ?? 1.5,
    models: Array.isArray(cfg.models) ? cfg.models : [],
  };
}

/**
 * A lecture share too long for a redirect arrives as the `shared-state` island
 * ({id, state, created, analysis}, app/web/routes/share.py) instead of a URL query.
 * @returns {import("./state.js").LectureState | null}
 */
function readShared() {
  const node = document.getElementById("shared-state");
  if (!node) return null;
  try {
    const s = JSON.parse(node.textContent || "{}").state;
    if (!s || s.lecture_step == null || typeof s.text !== "string") return null;
    const q = new URLSearchParams({
      step: String(s.lecture_step),
      text: s.text,
      alpha: String(s.alpha ?? defaults.alpha),
      causal: s.causal ? "1" : "0",
    });
    if (s.model) q.set("model", String(s.model));
    if (s.layer != null && s.head != null) {
      q.set("layer", String(s.layer));
      q.set("head", String(s.head));
    }
    return parseState(`?${q}`, defaults);
  } catch {
    return null;
  }
}

// ------------------------------------------------------------------------------- navigation

/** Write the state into the address bar. */
function writeUrl(push) {
  const url = `${BASE}${toSearch(state, defaults)}`;
  if (url === `${location.pathname}${location.search}`) return;
  if (push) history.pushState(null, "", url);
  else history.replaceState(null, "", url);
  syncLinks();
}

/** Go to slide k (1-based). */
function goto(k) {
  const step = Math.min(STEPS, Math.max(1, k));
  if (step === state.step) return;
  state = { ...state, step };
  writeUrl(true);
  render();
}

function onKey(ev) {
  if (ev.altKey || ev.ctrlKey || ev.metaKey) return;
  const t = /** @type {HTMLElement} */ (ev.target);
  if (t && (t.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(t.tagName))) {
    if (ev.key === "Escape") t.blur();
    return;
  }
  // space / enter on a focused control presses it, as usual
  if (t && ["BUTTON", "SUMMARY", "A"].includes(t.tagName) && [" ", "Enter"].includes(ev.key)) return;
  const keys = {
    ArrowRight: () => goto(state.step + 1),
    ArrowDown: () => goto(state.step + 1),
    PageDown: () => goto(state.step + 1),
    " ": () => goto(state.step + (ev.shiftKey ? -1 : 1)),
    ArrowLeft: () => goto(state.step - 1),
    ArrowUp: () => goto(state.step - 1),
    PageUp: () => goto(state.step - 1),
    Home: () => goto(1),
    End: () => goto(STEPS),
    f: toggleFullscreen,
    F: toggleFullscreen,
  };
  const action = keys[ev.key];
  if (action) {
    ev.preventDefault();
    action();
  }
}

function toggleFullscreen() {
  if (document.fullscreenElement) document.exitFullscreen();
  else document.documentElement.requestFullscreen?.().catch(() => {});
}

// ---------------------------------------------------------------------------------- chrome

/** Build the progress bar: one link per slide. */
function buildProgress() {
  const list = $("progress-steps");
  list.replaceChildren();
  STEP_LIST.forEach((s, k) => {
    const a = el("a", { title: s.title, attrs: { href: "#", "data-step": k + 1 } }, [
      el("span", { class: "progress-num", text: String(k + 1) }),
      el("span", { class: "progress-label", text: s.short }),
    ]);
    a.addEventListener("click", (ev) => {
      ev.preventDefault();
      goto(k + 1);
    });
    list.append(el("li", {}, [a]));
  });
  syncLinks();
}

/** Point every progress link at its slide with the current text / α, mark the current one. */
function syncLinks() {
  document.querySelectorAll("#progress-steps a").forEach((a) => {
    const k = Number(a.getAttribute("data-step"));
    a.setAttribute("href", `${BASE}${toSearch({ ...state, step: k }, defaults)}`);
    if (k === state.step) a.setAttribute("aria-current", "step");
    else a.removeAttribute("aria-current");
    a.classList.toggle("done", k < state.step);
  });
  $("progress-fill").style.width = `${(100 * state.step) / STEPS}%`;
  $("step-count").textContent = `${state.step} / ${STEPS}`;
  $("prev").toggleAttribute("disabled", state.step <= 1);
  $("next").toggleAttribute("disabled", state.step >= STEPS);
}

/** The context strip under the title: the sentence and the analysis settings. */
function showContext() {
  $("sentence").textContent = `“${state.text}”`;
  const bits = [`α = ${state.alpha.toFixed(2)}`, state.causal ? "causal" : "bidirectional"];
  if (data) bits.push(data.analysis.model.split("/").pop());
  $("settings").textContent = bits.join(" · ");
}

/** Fill the head picker from the analysis summary. */
function buildHeadPicker(analysis) {
  const select = /** @type {HTMLSelectElement} */ ($("head-select"));
  select.replaceChildren();
  for (const s of analysis.summary ?? []) {
    select.append(
      el("option", {
        title: `layer ${s.layer}, head ${s.head}: gold sparsity ${pct(s.gold_sparsity)}`,
        text: `L${s.layer} · H${s.head} · ${pct(s.gold_sparsity)} sparse`,
        attrs: { value: `${s.layer}:${s.head}` },
      }),
    );
  }
  select.value = `${state.layer}:${state.head}`;
}

// ------------------------------------------------------------------------------------ data

/**
 * The head to show when the URL names none: the one with the median gold sparsity (neither
 * trivially dense nor trivially sparse).
 */
function pickHead(analysis) {
  const rows = [...(analysis.summary ?? [])].sort((a, b) => a.gold_sparsity - b.gold_sparsity);
  const mid = rows[Math.floor(rows.length / 2)] ?? { layer: 0, head: 0 };
  return { layer: mid.layer, head: mid.head };
}

/** The query row the slides follow: the last token that is a word (not [SEP], not "."). */
function pickFocus(tokens) {
  for (let i = tokens.length - 1; i >= 0; i--) {
    if (!tokens[i].special && /[\p{L}\p{N}]/u.test(tokens[i].text)) return i;
  }
  return tokens.length - 1;
}

/** Fetch the analysis and the head's data for the current state. */
async function load() {
  const seq = ++loadSeq;
  document.body.dataset.loading = "1";
  const req = {
    text: state.text, alpha: state.alpha, causal: state.causal, truncate: true,
    model: state.model,
  };
  const analysis = await once(
    `analyze\u0000${req.model}\u0000${req.alpha}\u0000${req.causal}\u0000${req.text}`,
    () => api.analyze(req),
  );
  let { layer, head } = state;
  if (layer === null || head === null || layer >= analysis.layers || head >= analysis.heads) {
    ({ layer, head } = pickHead(analysis));
  }
  let hd;
  try {
    hd = await once(`head/${analysis.id}/${layer}/${head}`, () =>
      api.getHead(analysis.id, layer, head),
    );
  } catch (err) {
    if (err.status !== 404) throw err;
    fetched.clear(); // the server evicted the analysis: analyse again
    return load();
  }
  let raw = null;
  let rawError = "";
  try {
    raw = await once(`raw/${analysis.id}/${layer}/${head}`, () =>
      api.getRaw(analysis.id, layer, head),
    );
  } catch (err) {
    rawError = `Raw vectors are not available: ${err.message}`;
  }
  if (seq !== loadSeq) return false; // a newer load started meanwhile
  const n = analysis.n;
  // the explorer's typed arrays and predictors work on the same head (../head.js, ../methods.js)
  const prepared = prepareHead(hd, analysis.causal);
  const P = new Float64Array(n * n); // the payload's p, not rounded to float32
  for (const [i, j, p] of hd.edges) P[i * n + j] = p;
  state = { ...state, layer, head };
  writeUrl(false);
  data = {
    analysis,
    layer,
    head,
    headData: hd,
    prepared,
    raw,
    rawError,
    P,
    gold: prepared.gold,
    goldCount: prepared.goldCount,
    labels: analysis.tokens.map((t) => t.text),
    special: analysis.tokens.map((t) => Boolean(t.special)),
    focus: pickFocus(analysis.tokens),
  };
  buildHeadPicker(analysis);
  delete document.body.dataset.loading;
  return true;
}

/**
 * Change analysis settings (α, causal, text, head) and re-run. If the current slide can refresh
 * in place (the α slider's slide), it does; otherwise it is rebuilt.
 * @param {{alpha?: number, causal?: boolean, text?: string, layer?: number, head?: number}} patch
 */
async function update(patch) {
  const onlyAlpha = Object.keys(patch).every((k) => k === "alpha");
  state = { ...state, ...patch };
  if ("text" in patch) state = { ...state, layer: null, head: null };
  writeUrl("text" in patch);
  showContext();
  try {
    if (!(await load())) return;
  } catch (err) {
    showError(err);
    return;
  }
  const step = STEP_LIST[state.step - 1];
  if (onlyAlpha && step.refresh) {
    step.refresh(makeContext());
    showContext();
    document.body.dataset.ready = String(Date.now());
  } else render();
}

function makeContext() {
  return {
    ...data,
    state,
    figure,
    panel,
    size: {
      width: Math.max(120, figure.clientWidth - fit.width),
      height: Math.max(120, figure.clientHeight - fit.height),
    },
    update,
    pareto: () => {
      const { analysis, layer, head } = data;
      return once(`pareto/${analysis.id}/${layer}/${head}`, () =>
        api.getPareto(analysis.id, layer, head),
      );
    },
  };
}

// ---------------------------------------------------------------------------------- render

let renderSeq = 0;

/** How much a step's picture must give up to fit (main.js measures, see {@link render}). */
let fit = { width: 0, height: 0, roomy: 0 };

/** Render the current slide from the loaded data. */
async function render() {
  const seq = ++renderSeq;
  const step = STEP_LIST[state.step - 1];
  $("step-title").textContent = step.title;
  document.title = `${state.step}. ${step.title} · sparsescope lecture`;
  document.body.dataset.step = String(state.step);
  delete document.body.dataset.ready;
  syncLinks();
  showContext();
  figure.replaceChildren();
  panel.replaceChildren();
  $("slide").classList.toggle("lec-wide", Boolean(step.wide));
  $("slide").classList.remove("lec-roomy", "lec-roomier");
  if (!data) {
    figure.append(el("p", { class: "notice", text: "Running the model on this sentence…" }));
    return;
  }
  // Draw, measure, and draw again smaller when something does not fit: a panel whose text
  // overflows gets a wider column, a picture that overflows is drawn into less room. Nothing is
  // ever cut off, whatever the screen (a projector at 1280 × 720 included).
  fit = { width: 0, height: 0, roomy: 0 };
  for (let attempt = 0; attempt < 5; attempt++) {
    figure.replaceChildren();
    panel.replaceChildren();
    $("slide").classList.toggle("lec-roomy", fit.roomy === 1);
    $("slide").classList.toggle("lec-roomier", fit.roomy === 2);
    try {
      await step.render(makeContext());
    } catch (err) {
      showError(err);
    }
    if (seq !== renderSeq) return;
    await document.fonts?.ready;
    if (seq !== renderSeq) return;
    refitAll(panel);
    const [overW, overH] = overflow(figure);
    if (panel.scrollHeight > panel.clientHeight + 1 && fit.roomy < 2) {
      fit = { ...fit, roomy: fit.roomy + 1 };
    } else if (overW > 1 || overH > 1) {
      fit = {
        ...fit,
        width: fit.width + Math.max(0, overW) + 4,
        height: fit.height + Math.max(0, overH) + 4,
      };
    } else break;
  }
  document.body.dataset.ready = String(Date.now());
}

/**
 * How far the content of `box` (a clipping element) reaches past its box, [x, y] in CSS px:
 * what scrolls past its right / bottom edge and what a centred child sticks out on the left / top.
 */
function overflow(box) {
  const r = box.getBoundingClientRect();
  let left = 0;
  let top = 0;
  for (const e of box.querySelectorAll("*")) {
    const b = e.getBoundingClientRect();
    if (b.width === 0 && b.height === 0) continue;
    left = Math.max(left, r.left - b.left, b.right - r.right);
    top = Math.max(top, r.top - b.top, b.bottom - r.bottom);
  }
  return [
    Math.max(box.scrollWidth - box.clientWidth, 2 * left),
    Math.max(box.scrollHeight - box.clientHeight, top),
  ];
}

function showError(err) {
  delete document.body.dataset.loading;
  figure.replaceChildren(el("p", { class: "notice notice-error", text: String(err.message || err) }));
}

// ------------------------------------------------------------------------------------ boot

/** Save this slide as a short link (POST /api/share) and show it, selected, for copying. */
async function shareSlide() {
  const box = $("share-box");
  const out = /** @type {HTMLInputElement} */ ($("share-url"));
  box.hidden = false;
  out.value = "saving…";
  try {
    const res = await api.share({
      text: state.text,
      alpha: state.alpha,
      causal: state.causal,
      truncate: true,
      model: data?.analysis?.model ?? state.model,
      layer: state.layer,
      head: state.head,
      lecture_step: state.step,
    });
    out.value = new URL(res.url, location.origin).href;
  } catch {
    out.value = location.href; // no share store here: the address bar is the link
  }
  out.focus();
  out.select();
}

/** The model picker (shown when the server serves several models): a change re-runs the lecture
 * on that model; a decoder is always causal. */
function bindModelPicker() {
  const select = /** @type {HTMLSelectElement} */ ($("model-select"));
  const models = config.models ?? [];
  select.closest("label").hidden = models.length < 2;
  select.replaceChildren(
    ...models.map((m) => {
      const o = document.createElement("option");
      o.value = m.id;
      o.textContent = `${m.id.split("/").pop()} (${m.architecture})`;
      return o;
    }),
  );
  select.value = models.some((m) => m.id === state.model) ? state.model : (models[0]?.id ?? "");
  select.addEventListener("change", () => {
    select.blur();
    const m = models.find((x) => x.id === select.value);
    update({ model: select.value, layer: null, head: null, ...(m?.decoder ? { causal: true } : {}) });
  });
}

function bindChrome() {
  document.addEventListener("keydown", onKey);
  $("prev").addEventListener("click", () => goto(state.step - 1));
  $("next").addEventListener("click", () => goto(state.step + 1));
  $("fullscreen").addEventListener("click", toggleFullscreen);
  $("share").addEventListener("click", shareSlide);
  $("share-close").addEventListener("click", () => {
    $("share-box").hidden = true;
  });
  $("head-select").addEventListener("change", (ev) => {
    const [layer, head] = /** @type {HTMLSelectElement} */ (ev.target).value.split(":").map(Number);
    /** @type {HTMLSelectElement} */ (ev.target).blur();
    update({ layer, head });
  });
  bindModelPicker();
  const input = /** @type {HTMLInputElement} */ ($("text-input"));
  input.value = state.text;
  $("text-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const text = input.value.trim();
    if (text && text !== state.text) update({ text });
    input.blur();
    /** @type {HTMLDetailsElement} */ ($("text-details")).open = false;
  });
  window.addEventListener("popstate", async () => {
    const next = parseState(location.search, defaults);
    const same =
      next.text === state.text && next.alpha === state.alpha && next.causal === state.causal &&
      next.model === state.model &&
      next.layer === state.layer && next.head === state.head;
    state = next;
    input.value = state.text;
    if (!same) {
      try {
        await load();
      } catch (err) {
        showError(err);
        return;
      }
    }
    render();
  });
  window.addEventListener("resize", debounce(() => render(), 150));
}

async function boot() {
  buildProgress();
  bindChrome();
  showContext();
  render();
  try {
    await load();
  } catch (err) {
    showError(err);
    return;
  }
  render();
}

boot();
