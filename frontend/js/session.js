/**
 * The page's data flow with the server: analyse a text, open heads, fetch Pareto sweeps, and keep
 * the address bar in step with the state (url.js) so that it is always a shareable link.
 *
 * - `analyze()` POSTs the store's text / α / causal, then reconciles the rest of the view state
 *   (layer, head, method, params, selection) with the new analysis and opens the head.
 * - Changing `layer` / `head` opens that head: its payload is fetched once, prepared into typed
 *   arrays (head.js) and kept in a small LRU, so going back to a head is instant.
 * - When the server has evicted the analysis (404), the text is POSTed again (same id) and the
 *   request retried once.
 */

import * as api from "./api.js";
import { availableMethods } from "./controls.js";
import { prepareHead, withMethods } from "./head.js";
import { markHeadStart } from "./live.js";
import { PAYLOAD_METHODS, lacksData, learnMethods } from "./methods.js";
import { resolveParams } from "./params.js";
import { LOD_MIN } from "./heatmap-lod.js";
import * as store from "./state.js";
import { completeSummary, ensureMethod, firstSummary } from "./summary.js";
import { MAX_TEXT_IN_URL, encodeState } from "./url.js";
import { QUERY_KEYS, toShare, viewDefaults } from "./view-state.js";

/** Listeners told of every head prepared (the head grid draws its thumbnail). */
const headListeners = new Set();

/**
 * Call `fn(analysisId, layer, head, data)` whenever a head's payload has been prepared.
 * @param {(id: string, layer: number, head: number, data: object) => void} fn
 */
export function onHeadLoaded(fn) {
  headListeners.add(fn);
}

function told(id, layer, head) {
  return (data) => {
    for (const fn of headListeners) fn(id, layer, head, data);
    return data;
  };
}

/** Prepared heads kept at most: about 8 M cells in all (e.g. all 72 heads at n = 128). */
const CACHE_CELLS = 8_000_000;
/** While the whole model is shown (model-view.js) the sweep revisits every head on each new
 * setting: up to this many cells are kept then (every head of a 6 × 12 model at n = 512). */
const MODEL_CACHE_CELLS = 20_000_000;
const heads = new Map(); // "id/layer/head" -> Promise<HeadData>
const whole = new Map(); // a long text's "id/layer/head" -> Promise: its methods' part is in
let analyzing = null; // the analyze request in flight

/** Fields the input bar shows errors for; the others go under the bar. */
const INPUT_FIELDS = new Set(["text", "alpha", "causal", "model"]);

function errorFor(err) {
  const field = err.field && INPUT_FIELDS.has(err.field) ? err.field : "_";
  return { [field]: err.message };
}

/** Run `fn(analysis)`; if the server forgot the analysis (404), analyse the text again once. */
async function withAnalysis(fn) {
  const a = store.get().analysis;
  try {
    return await fn(a);
  } catch (err) {
    if (!(err instanceof api.ApiError) || err.status !== 404 || err.field !== "id") throw err;
    const s = store.get();
    const again = await api.analyze({ ...requestOf(s), truncate: Boolean(a.truncated) || !!s.start });
    learnMethods(again.methods);
    store.set({ analysis: again });
    return fn(again);
  }
}

/**
 * The prepared head (layer, head) of the current analysis, fetched once: first its graph (packed
 * CSR) with the data of `method` alone (`?part=graph&method=…`: a small fraction of the whole
 * payload, most of which is every other method's data, docs/methods.md), the rest (`?part=
 * methods`) when a method lacking it is asked for (`lacksData`), when the first view is on
 * screen (`adopt`), or at once for a long text. The promise holds `method`'s data; `method`
 * null: the whole head (every method's data).
 * @param {number} layer
 * @param {number} head
 * @param {string|null} [method] the method whose data the head must hold (default: the shown one)
 * @returns {Promise<import("./head.js").HeadData>}
 */
export function loadHead(layer, head, method = store.get().method) {
  const a = store.get().analysis;
  const key = `${a.id}/${layer}/${head}`;
  let p = heads.get(key);
  if (p) {
    heads.delete(key); // re-insert: most recently used last
    heads.set(key, p);
  } else {
    // a method without data of its own (window, BigBird, …: the seed is always in) asks none
    const first = method && PAYLOAD_METHODS.has(method) ? [method] : [];
    p = withAnalysis((an) => api.getHead(an.id, layer, head, "graph", first))
      .then((payload) => prepareHead(payload, a.causal, first))
      .then(told(a.id, layer, head));
    p.catch(() => heads.delete(key));
    heads.set(key, p);
    // a long text: every method's data at once, as before (its heatmap takes longer to draw)
    if (a.n > LOD_MIN) completeHead(key, p).catch(() => {});
    const cells = store.get().view === "model" ? MODEL_CACHE_CELLS : CACHE_CELLS;
    const limit = Math.max(2, Math.floor(cells / (a.n * a.n)));
    while (heads.size > limit) heads.delete(heads.keys().next().value);
  }
  return p.then((data) => (lacks(data, method) ? completeHead(key, p) : data));
}

/** Whether a prepared head lacks `method`'s data (null: any method's). */
function lacks(data, method) {
  return method === null ? !!data.methodsPending : lacksData(data, method);
}

/** The whole head of `key` (its methods' part added to the graph `p` holds), fetched once. */
function completeHead(key, p) {
  if (!whole.has(key)) {
    const w = p.then((graph) => (graph.methodsPending ? addMethods(key, graph) : graph));
    w.catch(() => whole.delete(key));
    whole.set(key, w);
  }
  return whole.get(key);
}

/**
 * Fetch a head's methods' part and publish the whole head (`withMethods`): in the cache, and
 * as `headData` when the graph is shown (the mask of any method is then computed).
 */
async function addMethods(key, graph) {
  const a = store.get().analysis;
  let part;
  try {
    part = await withAnalysis((an) => api.getHead(an.id, graph.layer, graph.head, "methods"));
  } catch (err) {
    if (store.get().headData === graph) store.set({ errors: errorFor(err) });
    throw err;
  }
  const done = withMethods(graph, part);
  if (heads.has(key)) heads.set(key, Promise.resolve(done));
  if (store.get().analysis === a && store.get().headData === graph) store.set({ headData: done });
  return done;
}

/** When the open head is whole (a long text's methods' part arrived, or failed). */
function headWhole() {
  const s = store.get();
  return (whole.get(`${s.analysis.id}/${s.layer}/${s.head}`) ?? Promise.resolve()).catch(() => null);
}

/** The open head's methods' part (after the first view: a method switch then finds it in). */
function completeOpenHead() {
  const s = store.get();
  return loadHead(s.layer, s.head, null).catch(() => null);
}

/**
 * Fetch and prepare every other head in the background, one at a time, once the open head and
 * its Pareto data are shown (adopt: not competing with them for the server's cores), so that
 * opening another head needs no server round trip. Only when they all fit in the cache; a new
 * analysis stops it.
 */
async function prefetchHeads(a) {
  if (a.layers * a.heads * a.n * a.n > CACHE_CELLS) return;
  for (let k = 0; k < a.layers * a.heads; k++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    if (store.get().analysis !== a) return;
    try {
      await loadHead(Math.floor(k / a.heads), k % a.heads);
    } catch {
      return; // the next head change reports the problem
    }
  }
}

/** Open the store's (layer, head): fetch, prepare, publish `headData`. */
async function openHead() {
  const s = store.get();
  if (!s.analysis) return;
  const { layer, head } = s;
  markHeadStart();
  try {
    const data = await loadHead(layer, head);
    const now = store.get();
    if (now.layer === layer && now.head === head && now.analysis) store.set({ headData: data });
  } catch (err) {
    store.set({ errors: errorFor(err) });
  }
}

/** Which Pareto data the state asks for: the scope, and the x-axis when it is block sparsity. */
function paretoKeyOf(s) {
  const where = s.scope === "mean" ? "mean" : `${s.layer}/${s.head}`;
  return s.paretoX === "block" ? `${where}/block${s.block}` : where;
}

/**
 * Fetch the Pareto sweep of the current scope (the open head, or the mean over heads), its
 * frontiers over token sparsity, or over block sparsity at the chosen tile size.
 */
async function loadPareto() {
  const s = store.get();
  if (!s.analysis) return;
  const scope = s.scope;
  const block = s.paretoX === "block" ? s.block : null;
  const want = paretoKeyOf(s);
  store.set({ paretoStatus: "loading", paretoKey: want });
  try {
    const data = await withAnalysis((a) =>
      scope === "mean"
        ? api.getPareto(a.id, null, null, block)
        : api.getPareto(a.id, s.layer, s.head, block),
    );
    if (store.get().paretoKey === want) store.set({ pareto: data, paretoStatus: "ready" });
  } catch (err) {
    if (store.get().paretoKey === want) {
      store.set({ pareto: null, paretoStatus: `The sweep is not available: ${err.message}` });
    }
  }
}

/** The text of the analysis shown (null before the first); the selection a new text drops. */
let adoptedText = null;
/** The view an analysis could not show ({want}) and what it showed instead ({shown}). */
let held = null;
const UNSELECTED = { lockedRow: null, cluster: null, zoom: "" };

/**
 * Make `a` the page's analysis and restore as much of the view (layer, head, method, params,
 * selection) as fits it; `keep` overrides the current view (a shared link).
 */
function adopt(a, keep, seed = null) {
  // a new text starts unlocked (UX.md: state a person did not choose must not follow them): the
  // selection of the text before (e.g. the first visit's example) is not carried over
  const text = store.get().text;
  const fresh = adoptedText !== null && text !== adoptedText;
  adoptedText = text;
  // what the analysis before could not show (another model: no artefact for a method, fewer
  // layers or heads) comes back when the user did not change it meanwhile
  const s0 = store.get();
  const back = held && s0.method === held.shown.method && s0.layer === held.shown.layer &&
    s0.head === held.shown.head ? held.want : {};
  const want = { ...s0, ...(fresh ? UNSELECTED : {}), ...back, ...keep };
  const clamp = (v, n) => (Number.isInteger(v) ? Math.min(Math.max(v, 0), n - 1) : 0); // nearest
  const methods = availableMethods(a);
  const spec = methods.find((m) => m.name === want.method) ?? methods[0] ?? null;
  const sameMethod = spec !== null && spec.name === want.method;
  heads.clear();
  whole.clear();
  learnMethods(a.methods);
  if (seed) {
    heads.set(`${a.id}/${seed.layer}/${seed.head}`, Promise.resolve(seed.data));
    queueMicrotask(() => told(a.id, seed.layer, seed.head)(seed.data));
  }
  store.set({
    analysis: a,
    alpha: a.alpha,
    causal: a.causal,
    truncate: Boolean(a.truncated),
    start: a.truncated ? (a.window_start ?? want.start ?? 0) : 0,
    model: a.model,
    status: "ready",
    headData: null,
    result: null,
    pareto: null,
    headRecall: null,
    meanMetrics: null,
    layer: clamp(want.layer, a.layers),
    head: clamp(want.head, a.heads),
    method: spec ? spec.name : want.method,
    params: spec ? resolveParams(spec, sameMethod ? want.params : {}) : {},
    lockedRow: Number.isInteger(want.lockedRow) ? Math.min(want.lockedRow, a.n - 1) : null,
    cluster: Number.isInteger(want.cluster) ? want.cluster : null,
    zoom: typeof want.zoom === "string" ? want.zoom : "",
  });
  const s = store.get();
  const shown = { method: s.method, layer: s.layer, head: s.head };
  const kept = shown.method === want.method && shown.layer === want.layer && shown.head === want.head;
  held = kept ? null : {
    shown, want: { method: want.method, params: want.params, layer: want.layer, head: want.head },
  };
  const opened = openHead();
  const seedFits = seed?.pareto && s.scope === "head" && s.layer === seed.layer &&
    s.head === seed.head && s.paretoX !== "block"; // the preloaded data are over token sparsity
  let swept = Promise.resolve();
  if (seedFits) {
    store.set({ pareto: seed.pareto, paretoStatus: "ready", paretoKey: paretoKeyOf(s) });
  } else if (a.n > LOD_MIN) {
    // a long text: the heatmap first, its sweep after
    swept = opened.then(headWhole).then(loadPareto);
  } else {
    // the heatmap first, then its sweep: each request uses both of the server's cores, so at
    // once they only competed (the head came ~0.4 s later, the sweep no sooner: bench_open)
    swept = opened.then(loadPareto);
  }
  // the shown method's summary when the analysis came without it (another method was asked
  // for); once the first view is on screen (the head and its Pareto data: nothing competes with
  // them for the server's cores), every other method's summary (summary.js) and the other heads
  ensureMethod(a, s.method);
  Promise.all([opened, swept]).then(async () => {
    if (store.get().analysis !== a) return;
    await completeOpenHead(); // the other methods' data of the open head (a switch is instant)
    if (store.get().analysis !== a) return;
    completeSummary(a);
    prefetchHeads(a);
  });
  keepLink(a);
}

/**
 * Open a view whose data came with the page (the `preload` island, app/web/preload.py): the analysis,
 * the open head's payload and maybe its Pareto data, exactly as the API answers them. Nothing is
 * requested before the heatmap is painted. False when the island does not match the view (e.g.
 * the query asked for another α): the caller analyses instead.
 * @param {{analysis: object, layer: number, head: number, payload: object, pareto?: object}} pre
 * @param {object} view the view the page opens on (store fields)
 * @param {object} keep view fields to restore (params, selection)
 */
export function adoptPreloaded(pre, view, keep) {
  const a = pre?.analysis;
  if (!a || a.alpha !== view.alpha || a.causal !== view.causal) return false;
  if (view.model && a.model !== view.model) return false;
  const clamp = (v, n) => (Number.isInteger(v) ? Math.min(Math.max(v, 0), n - 1) : 0); // nearest
  const layer = clamp(view.layer, a.layers);
  const head = clamp(view.head, a.heads);
  if (layer !== pre.layer || head !== pre.head) return false;
  const data = prepareHead(pre.payload, a.causal);
  adopt(a, keep, { layer, head, data, pareto: pre.pareto ?? null });
  return true;
}

/**
 * Analyse the store's text with its α and causal flag, then restore the view (see `adopt`).
 * @param {object} [keep] view fields to restore instead of the current ones (a shared link)
 */
export async function analyze(keep = {}) {
  const s = store.get();
  // the shown method's summary only: the others are fetched after the first view (summary.js)
  const req = { ...requestOf(s), summary: firstSummary(s) };
  store.set({ status: "loading", errors: {} });
  const mine = (analyzing = api.analyze(req).catch((err) => {
    // a text over the model's positions: analyse its first window, and say so (status line)
    if (!req.truncate && isTooLong(err)) return api.analyze({ ...req, truncate: true });
    throw err;
  }));
  let a;
  try {
    a = await mine;
  } catch (err) {
    if (analyzing === mine) store.set({ status: "error", errors: errorFor(err) });
    return;
  } finally {
    if (analyzing === mine) analyzing = null;
  }
  if (analyzing !== null) return; // a newer request superseded this one
  adopt(a, keep);
}

/** The `POST /api/analyze` body of the state: a window (`start`) only for a long text. */
export function requestOf(s) {
  const req = { text: s.text, alpha: s.alpha, causal: s.causal };
  if (s.model) req.model = s.model;
  if (s.start) Object.assign(req, { truncate: true, start: s.start });
  else if (s.truncate) req.truncate = true;
  return req;
}

/** The API's "text is N tokens long but the model takes at most M positions" refusal. */
function isTooLong(err) {
  return err instanceof api.ApiError && err.status === 400 && err.field === "text" &&
    /truncate/.test(err.message);
}

/**
 * Reopen a cached analysis by id (a link whose text was too long for the URL).
 * @param {string} id
 * @param {object} keep view fields to restore
 */
export async function reopen(id, keep) {
  store.set({ status: "loading", errors: {} });
  try {
    adopt(await api.getAnalysis(id), keep);
  } catch (err) {
    const msg = err.status === 404
      ? "This link's analysis is no longer on the server (its text was too long for the " +
        "link); paste the text and Analyze."
      : err.message;
    store.set({ status: "error", errors: { _: msg } });
  }
}

/**
 * A text too long for the address bar gets a permanent link: the view is saved like a share
 * (`POST /api/share`) and the address becomes `/s/{id}?…` (the query overriding the saved view,
 * the window included), instead of a cache id that dies with the server's cache. One per text.
 */
const saving = new Map(); // text + window -> Promise<base>
function keepLink(a) {
  const s = store.get();
  if (!s.text || s.text.length <= MAX_TEXT_IN_URL) return;
  if (s.base && s.base.text === s.text) return;
  const key = s.text; // one link per text: the window is in its query (`start`)
  if (!saving.has(key)) {
    const state = shareStateOf(s, a);
    const p = api.share(state).then((body) => ({ path: body.url, text: s.text }));
    p.catch(() => saving.delete(key));
    saving.set(key, p);
  }
  saving.get(key).then((base) => {
    const now = store.get();
    if (now.text === base.text) {
      store.set({ base });
      writeUrl();
    }
  }, () => {}); // no link then: the address keeps the cache id (url.js)
}

/** A ShareState of the view (share.js has the full one; this one names the window too). */
function shareStateOf(s, a) {
  return toShare({
    ...viewDefaults(), // the rest of the view is in the address's query
    text: s.text, alpha: s.alpha, causal: Boolean(s.causal), truncate: Boolean(a.truncated),
    start: s.start, model: s.model, layer: s.layer, head: s.head, method: s.method,
  });
}

/**
 * The address of the view: on a page opened on a saved view (a share `/s/{id}`, a gallery
 * example `/gallery/{slug}`) whose text is still the one shown, that page with the view in its
 * query (which overrides the saved one); else `/?…` with the text in the query.
 * @param {import("./state.js").State} s
 */
export function addressOf(s) {
  if (s.base && s.base.text === s.text) {
    return `${s.base.path}?${encodeState(s, { withText: false })}`;
  }
  return `/?${encodeState(s)}`;
}

/**
 * Write the state into the address bar once the view has been still for URL_SETTLE_MS: a
 * `replaceState` of an address that holds the text costs milliseconds (6-13 ms at 512 tokens on
 * a busy machine), so it never runs in the middle of a slider drag, between an input and its frame.
 */
const URL_SETTLE_MS = 200;
let urlTimer = 0;
function writeUrl() {
  clearTimeout(urlTimer);
  urlTimer = setTimeout(() => {
    urlTimer = 0;
    const url = addressOf(store.get());
    if (url !== `${location.pathname}${location.search}`) history.replaceState(null, "", url);
  }, URL_SETTLE_MS);
}

/** Store keys whose change rewrites the address: the view's (view-state.js) and the page's base. */
const URL_KEYS = [...QUERY_KEYS, "analysis", "base"];

/** Subscribe the session to the store. */
export function initSession() {
  store.subscribe((s, changed) => {
    if (!s.analysis) return;
    if ((changed.has("layer") || changed.has("head")) && !changed.has("analysis")) {
      openHead();
      if (s.scope === "head") loadPareto();
    }
    const axis = changed.has("paretoX") || (changed.has("block") && s.paretoX === "block");
    if ((changed.has("scope") || axis) && !changed.has("analysis")) loadPareto();
    if (changed.has("method") && !changed.has("analysis")) {
      ensureMethod(s.analysis, s.method);
      // the open head drawn without this method's data: fetch it (addMethods publishes it)
      if (s.headData && lacksData(s.headData, s.method)) loadHead(s.layer, s.head).catch(() => {});
    }
    if (URL_KEYS.some((k) => changed.has(k))) writeUrl();
  });
}
