/**
 * sparsescope's page: boot the views on the one state store and restore the view from the URL
 * (or from a shared view's data island).
 *
 * Module map: state.js (the store) · session.js (server data, URL) · live.js (slider -> mask ->
 * metrics) · sweep.js (the setting on every head) · methods.js / patterns.js / rng.js /
 * metrics.js (the JS twin of sparse_core) · views: inputbar.js, grid.js, controls.js,
 * heatmap.js, tokens.js, pareto.js, pos.js, budgets.js, flow.js, results.js, compare.js (side by
 * side).
 */

import { initBudgets } from "./budgets.js";
import { initCompare } from "./compare.js";
import { initMethodPanel } from "./controls.js";
import { byId, readIsland } from "./dom.js";
import { initGrid } from "./grid.js";
import { initRoles } from "./roles.js";
import { initHeatmap } from "./heatmap.js";
import { BIG_HEAD } from "./heatmap-layout.js";
import { initInputBar } from "./inputbar.js";
import { initLive } from "./live.js";
import { initModelCard } from "./model-card.js";
import { initModelView } from "./model-view.js";
import { initWindowPicker } from "./window.js";
import { initPareto } from "./pareto.js";
import { initPos } from "./pos.js";
import { initFlow } from "./flow.js";
import { initResults } from "./results.js";
import { adoptPreloaded, analyze, initSession, reopen } from "./session.js";
import * as store from "./state.js";
import { initSweep } from "./sweep.js";
import { initTokenSearch } from "./token-search.js";
import { initTokenStrip } from "./tokens.js";
import { VIEW_FIELDS, decodeQuery, fromShare } from "./view-state.js";
import { analysisNotices } from "./address-notices.js";
import { roveButtons } from "./roving.js";

/**
 * The saved view the page was opened on (`<script type="application/json" id="shared-state">`:
 * a share link, a gallery example, or the first visit's example; see app/web/routes/share.py), and
 * the `base` of its address (session.js `addressOf`); null on a plain `/?…`.
 */
function savedView() {
  if (!document.getElementById("shared-state")) return null;
  const island = readIsland("shared-state");
  const { state } = island;
  const saved = fromShare(state); // flags a newer or older page wrote wrong are left out
  if (Object.keys(saved.errors).length) console.warn("saved view:", saved.errors);
  return {
    view: saved.state,
    // the first visit's example lives at `/?text=…` once changed; a share or gallery page keeps
    // its own address, the query overriding the saved view
    base: island.home
      ? null
      : { path: location.pathname, text: state.text, start: state.start ?? 0 },
  };
}

/**
 * The view an address with its own text (`/?text=…`, `/?id=…`) opens on: the landing example's
 * layer, head, method, parameters and view flags (the `first-view` island, app/web/routes/pages.py
 * `first_view`), only the fields it names; {} without it. The address's own values win.
 */
function firstView() {
  if (!document.getElementById("first-view")) return {};
  const island = readIsland("first-view");
  const { state, errors } = fromShare(island);
  if (Object.keys(errors).length) console.warn("first view:", errors);
  const named = new Set([...Object.keys(island), ...Object.keys(island.view ?? {}).map((k) => `view.${k}`)]);
  return Object.fromEntries(VIEW_FIELDS.filter((f) => f.share && named.has(f.share) && f.key in state)
    .map((f) => [f.key, state[f.key]]));
}

/** Values of the address the view does not allow (left out) or clamped to their range
 * (changed), said under the input bar. */
function reportAddress(errors, notices = {}) {
  const left = Object.values(errors);
  const changed = Object.values(notices);
  if (!left.length && !changed.length) return;
  const _ = [
    ...(changed.length ? [`Changed in this address: ${changed.join("; ")}.`] : []),
    ...(left.length ? [`Left out of this address: ${left.join("; ")}.`] : []),
  ].join(" ");
  store.set({ errors: { ...store.get().errors, _ } });
}

/** Once the first analysis is adopted: the address's values it clamped (layer, head, row,
 * sliders: address-notices.js), said with the codec's own. */
function reportClamps(query, errors, notices) {
  const stop = store.subscribe((s, changed) => {
    if (!changed.has("analysis") || !s.analysis) return;
    stop();
    reportAddress(errors, { ...notices, ...analysisNotices(query, s) });
  });
}

/** Toggle buttons (`data-toggle="key" data-value="v"`) that write one store key. */
function initToggles() {
  const buttons = [...document.querySelectorAll("[data-toggle]")];
  for (const b of buttons) {
    b.addEventListener("click", () => {
      const v = b.dataset.value;
      store.set({ [b.dataset.toggle]: v === "true" ? true : v === "false" ? false : v });
    });
  }
  store.subscribe((s) => {
    for (const b of buttons) {
      const on = String(s[b.dataset.toggle]) === b.dataset.value;
      b.classList.toggle("on", on);
      b.setAttribute("aria-pressed", String(on));
    }
  });
  // each group of toggles is one tab stop (the arrow keys move inside it)
  for (const group of new Set(buttons.map((b) => b.parentElement))) roveButtons(group);
}

/** A long text's heatmap gets the wide layout (app.css `.layout.big-head`): the matrix takes the
 * width of two columns, the metrics and the Pareto plot go under the head grid. */
function initBigHead() {
  const layout = document.querySelector("main.layout");
  store.subscribe((s, changed) => {
    if (changed.has("analysis") && layout) {
      layout.classList.toggle("big-head", !!s.analysis && s.analysis.n >= BIG_HEAD);
    }
  });
}

/** After a failed analysis the previous text's results stay on screen: greyed, and labelled as
 * the previous text's (app.css `.layout.stale`, the status row's `#stale-note`). */
function initStale() {
  const layout = document.querySelector("main.layout");
  const note = byId("stale-note");
  let shownText = ""; // the text the results on screen are of
  store.subscribe((s, changed) => {
    if (changed.has("analysis") && s.analysis && s.status !== "error") shownText = s.text ?? "";
    if (!changed.has("status") && !changed.has("analysis")) return;
    const stale = s.status === "error" && !!s.analysis;
    layout?.classList.toggle("stale", stale);
    if (layout) {
      if (stale) layout.setAttribute("aria-describedby", "stale-note");
      else layout.removeAttribute("aria-describedby");
    }
    note.hidden = !stale;
    if (stale) {
      const t = shownText;
      note.textContent = `Not analysed (see the message above). Shown below, greyed: the previous text${
        t ? `, “${t.length > 60 ? `${t.slice(0, 60)}…` : t}”` : ""}.`;
    }
  });
}

/** Keep `panel` at the top of the screen while the page above it still grows (plots drawn after
 * a jump: the Pareto plot, the budgets), for at most `ms`; the reader's own wheel, touch, key or
 * click ends it at once. */
function holdInView(panel, ms = 60000) {
  const ends = ["wheel", "touchstart", "keydown", "mousedown"];
  const ro = new ResizeObserver(() => panel.scrollIntoView({ block: "start", behavior: "instant" }));
  const stop = () => {
    ro.disconnect();
    clearTimeout(timer);
    for (const t of ends) removeEventListener(t, stop, true);
  };
  const timer = setTimeout(stop, ms);
  for (const t of ends) addEventListener(t, stop, true);
  ro.observe(document.body);
}

/** "More views": every panel under the first screen one click away (a jump to it, held in place
 * while the panels above it finish drawing; the whole model switches the view). */
function initMoreMenu() {
  const menu = document.getElementById("more-menu");
  if (!menu) return;
  menu.addEventListener("click", (ev) => {
    const a = /** @type {HTMLElement} */ (ev.target).closest("a");
    if (!a) return;
    ev.preventDefault();
    menu.open = false;
    if (a.dataset.view) store.set({ view: a.dataset.view });
    else if (store.get().view !== "head") store.set({ view: "head" });
    const target = document.getElementById(a.getAttribute("href").slice(1));
    const panel = target?.closest(".panel");
    requestAnimationFrame(() => {
      if (!panel) return;
      panel.scrollIntoView({ block: "start", behavior: "instant" });
      panel.setAttribute("tabindex", "-1");
      panel.focus({ preventScroll: true });
      holdInView(panel);
    });
  });
  menu.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape" && menu.open) {
      menu.open = false;
      menu.querySelector("summary")?.focus();
    }
  });
}

function initHeadTitle() {
  const title = byId("head-title");
  store.subscribe((s, changed) => {
    if (!["analysis", "layer", "head", "headData"].some((k) => changed.has(k))) return;
    title.textContent = s.analysis
      ? `Layer ${s.layer} · head ${s.head}${s.headData ? ` · n = ${s.headData.n}` : " · loading…"}`
      : "Attention";
  });
}

/** The status line under the input bar: the analysis at a glance, or the model's limit. */
function initStatus(maxTokens) {
  const status = byId("status");
  const render = (s) => {
    if (s.status === "loading") status.textContent = "Analysing…";
    else if (s.analysis) {
      const a = s.analysis;
      status.textContent = [
        a.model,
        `${a.n} tokens`,
        a.alpha === "own" ? "α: the model's own" : `α = ${a.alpha}`,
        a.decoder ? "causal (a decoder)" : a.causal ? "causal" : "bidirectional",
        ...(a.truncated ? [`tokens ${a.window_start ?? 0}–${a.window_end ?? a.n} of ${a.total_tokens ?? "?"}`] : []),
        a.artefact
          ? `Sparsefinder artefact ${a.artefact}`
          : "no Sparsefinder artefact for this α (sf-* methods off)",
      ].join(" · ");
    } else status.textContent = maxTokens ? `The model takes up to ${maxTokens} tokens.` : "";
    status.title = status.textContent; // one line on a wide window: the whole of it on hover
  };
  const modelName = document.getElementById("model-name");
  store.subscribe((s, changed) => {
    if (changed.has("status") || changed.has("analysis")) render(s);
    if (changed.has("analysis") && s.analysis && modelName) modelName.textContent = s.analysis.model;
  });
  render(store.get());
}

function main() {
  const config = readIsland("config");
  initToggles();
  initBigHead();
  initStale();
  initMoreMenu();
  initHeadTitle();
  initStatus(config.max_tokens);
  initInputBar(() => analyze(), config.models ?? []);
  initModelCard(byId("model-card"), config.models ?? []);
  initWindowPicker(byId("window-picker"), (start) => {
    store.set({ start, truncate: true });
    analyze();
  });
  initGrid(byId("grid"), byId("grid-legend"));
  initRoles(byId("head-role"));
  initMethodPanel(byId("method-panel"), byId("metrics"));
  initHeatmap(byId("heatmap"), byId("heatmap-legend"));
  initTokenStrip(byId("tokens"));
  initTokenSearch(byId("token-search"), byId("heatmap"));
  initCompare(byId("compare"), byId("heatmap"), config.models ?? []);
  initPareto(byId("pareto"), byId("pareto-note"));
  initPos(byId("pos"));
  initBudgets(byId("budgets"), byId("budgets-controls"));
  initFlow(byId("flow"), /** @type {HTMLSelectElement} */ (byId("flow-layer")));
  initResults(byId("results"), /** @type {HTMLInputElement} */ (byId("results-file")), byId("results-scope"), config.results !== false);
  initModelView(byId("model-view"), byId("model-readout"), byId("model-panel"));
  initLive();
  initSweep();
  initSession();

  // the address bar is the truth: its query overrides the saved view (a share, an example)
  const saved = savedView();
  const { state: query, errors, notices } = decodeQuery(location.search);
  reportClamps(query, errors, notices);
  const { id, params, ...view } = saved ? { ...saved.view, ...query } : { params: {}, ...firstView(), ...query };
  // a model trained with entmax opens at its own α (per head) unless the address says otherwise
  const models = config.models ?? [];
  const opened = models.find((m) => m.id === view.model) ?? models[0];
  if (view.alpha === undefined && opened?.own_alpha) view.alpha = "own";
  // a model without an α of its own runs "own" at 1.5: the view says so
  if (view.alpha === "own" && opened && !opened.own_alpha) view.alpha = 1.5;
  store.set({ ...view, base: saved?.base ?? null });
  const keep = { params, lockedRow: view.lockedRow, cluster: view.cluster, zoom: view.zoom ?? "" };
  const pre = document.getElementById("preload") ? readIsland("preload") : null;
  if (pre && !query.text && adoptPreloaded(pre, store.get(), keep)) return; // reportClamps said it
  if (view.text) analyze(keep);
  else if (id) reopen(id, keep);
  reportAddress(errors, notices);
}

main();
