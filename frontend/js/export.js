/**
 * The main page's share and export tools, loaded as their own module next to main.js (they share
 * its state store: ES modules are singletons per URL):
 *
 * - in the view bar (#view-actions): Share (share.js), "Download view" (one self-contained HTML
 *   file, export-view.js), "Download JSON" (the analysis, the open head's edges, the method, its
 *   metrics and the Pareto sweep, plus the ShareState that reopens the view), "Download CSV" (the
 *   metrics table: the current setting, then every point of the Pareto sweep, each with its
 *   block sparsity at every tile size);
 * - in the header of the heatmap, Pareto and POS panels: PNG and SVG downloads
 *   (export-figures.js);
 * - when the page was opened from the gallery (/gallery/{slug}), a banner with the example's
 *   title and what to look at.
 *
 * Buttons are enabled only while there is something to export; failures are reported in the
 * bar's status line, never thrown.
 */

import { el, readIsland } from "./dom.js";
import {
  heatmapSvg,
  paretoImage,
  posSvg,
  svgToPng,
} from "./export-figures.js";
import { standaloneHtml, viewData } from "./export-view.js";
import { initShare, shareState } from "./share.js";
import * as store from "./state.js";
import { roveButtons } from "./roving.js";

/**
 * Save `blob` as `filename` (an object URL on a temporary link; revoked a little later).
 * @param {Blob} blob
 * @param {string} filename
 */
export function download(blob, filename) {
  const url = URL.createObjectURL(blob);
  const a = el("a", { attrs: { href: url, download: filename } });
  a.hidden = true;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** `sparsescope-L2-H3-strided` for the current view. */
function baseName(s) {
  return `sparsescope-L${s.layer}-H${s.head}-${s.method}`.replace(/[^A-Za-z0-9._-]/g, "_");
}

const svgBlob = (text) => new Blob([text], { type: "image/svg+xml" });

/** The analysis JSON export. */
export function analysisJson(s) {
  const view = viewData(s);
  return {
    format: "sparsescope-analysis/1",
    exported: view.exported,
    source: view.source,
    state: shareState(s),
    analysis: s.analysis,
    head: {
      layer: s.layer,
      head: s.head,
      n: view.n,
      gold_sparsity: view.goldSparsity,
      edges: view.edges,
    },
    // metrics.block_sparsity holds every tile size; `block` is the one the page showed
    method: { ...view.method, metrics: view.metrics, block: Number(s.block) },
    pareto: s.pareto ?? null,
  };
}

/** Tile sizes of the CSV's block sparsity columns (sparse_core.metrics.BLOCKS). */
const CSV_BLOCKS = ["16", "32", "64", "128"];

/** One CSV field: quoted when it holds a comma, a quote or a line break (RFC 4180). */
function csvField(v) {
  const t = v === null || v === undefined || (typeof v === "number" && !Number.isFinite(v)) ? "" : String(v);
  return /[",\r\n]/.test(t) ? `"${t.replace(/"/g, '""')}"` : t;
}

/**
 * The metrics table as CSV: one row for the current setting (the metrics panel's figures, of the
 * open head or, in the mean scope, the mean over heads once computed), then one per point of the
 * Pareto sweep on the page, with `on_frontier` over the plot's x-axis. Columns: scope, layer,
 * head, row, method, params, recall, sparsity, exact, precision, mass_recall, block_sparsity_B for
 * every tile size B, on_frontier.
 * @param {import("./state.js").State} s
 * @returns {string}
 */
export function metricsCsv(s) {
  const head = ["scope", "layer", "head", "row", "method", "params", "recall", "sparsity", "exact",
    "precision", "mass_recall", ...CSV_BLOCKS.map((b) => `block_sparsity_${b}`), "on_frontier"];
  const lines = [head.join(",")];
  const paramText = (p) => Object.entries(p ?? {}).map(([k, v]) => `${k}=${v}`).join(";");
  const row = (scope, layer, hd, kind, method, params, m, front) => [
    scope, layer, hd, kind, method, paramText(params), m.recall, m.sparsity, m.exact, m.precision,
    m.mass_recall, ...CSV_BLOCKS.map((b) => m.block_sparsity?.[b]), front,
  ].map(csvField).join(",");
  const cur = s.scope === "mean" ? s.meanMetrics : s.result?.metrics;
  const here = (scope) => (scope === "mean" ? ["mean", "", ""] : ["head", s.layer, s.head]);
  if (cur) lines.push(row(...here(s.scope), "current", s.method, s.params, cur, ""));
  const pd = s.pareto;
  if (pd?.points) {
    const front = new Set(Object.values(pd.frontiers ?? {}).flat());
    const [scope, layer, hd] = pd.scope === "mean" ? ["mean", "", ""] : ["head", pd.layer ?? s.layer, pd.head ?? s.head];
    pd.points.forEach((p, k) => lines.push(row(scope, layer, hd, "sweep", p.method, p.params, p, front.has(k) ? 1 : 0)));
  }
  return `${lines.join("\r\n")}\r\n`;
}

let statusLine = null;

function report(msg) {
  if (statusLine) statusLine.textContent = msg;
}

/** Run an export action, reporting what happened. */
async function run(label, action) {
  report(`${label}…`);
  try {
    await action();
    report(`${label}: downloaded`);
  } catch (err) {
    report(`${label} failed: ${err.message || err}`);
  }
}

/** One PNG / SVG pair of buttons for a panel, enabled by `ready(state)`. */
function figureButtons(name, ready, actions) {
  const group = el("span", { class: "export-group", attrs: { role: "group", "aria-label": `download the ${name}` } });
  const buttons = Object.entries(actions).map(([fmt, action]) => {
    const b = el("button", {
      class: "tool tool-small",
      text: fmt.toUpperCase(),
      title: `Download the ${name} as ${fmt.toUpperCase()}`,
      attrs: { type: "button", "data-export": `${name}-${fmt}` },
    });
    b.addEventListener("click", () => run(`${name} ${fmt.toUpperCase()}`, action));
    return b;
  });
  group.append(el("span", { class: "export-label", text: "⤓", attrs: { "aria-hidden": "true" } }), ...buttons);
  roveButtons(group); // one tab stop, the arrow keys move between the formats
  const sync = (s) => {
    const ok = ready(s);
    for (const b of buttons) b.disabled = !ok;
  };
  return { group, sync };
}

/** The `.panel-head` of the panel that holds element `id`, or null. */
function panelHead(id) {
  return document.getElementById(id)?.closest(".panel")?.querySelector(".panel-head") ?? null;
}

/** A banner for a gallery example (the shared-state island's `gallery` entry). */
function galleryBanner(bar) {
  if (!document.getElementById("shared-state")) return;
  const island = readIsland("shared-state");
  const g = island.gallery;
  if (!g) return;
  const home = island.home === true; // the first visit's example
  const close = el("button", { class: "tool tool-small", text: "×", title: "Hide", attrs: { type: "button", "aria-label": "hide the example's note" } });
  const banner = el("aside", { class: "gallery-banner", attrs: { "aria-label": "gallery example" } }, [
    el("div", { class: "gallery-banner-text" }, [
      el("strong", { text: home ? `An analysed example: ${g.title}` : g.title }),
      el("p", { class: "banner-explain", attrs: { id: "banner-explain" }, text: home
        ? `${g.explain} Type or paste your own text above, then Analyze.`
        : g.explain }),
      ...(g.credit && !home ? [el("p", { class: "muted", text: g.credit })] : []),
    ]),
    // the first visit's example: the header's Gallery link leads to the others
    ...(home ? [] : [el("a", { class: "tool", text: "← Gallery", attrs: { href: "/gallery" } })]),
    close,
  ]);
  banner.classList.toggle("banner-home", home);
  const explain = banner.querySelector(".banner-explain");
  // the story in one line, read in full with one click (or Enter)
  const more = el("button", { class: "link-button banner-more", text: "read it all", attrs: { type: "button", "aria-expanded": "false", "aria-controls": "banner-explain" } });
  close.before(more);
  more.addEventListener("click", () => {
    const open = explain.classList.toggle("open");
    more.setAttribute("aria-expanded", String(open));
    more.textContent = open ? "less" : "read it all";
  });
  close.addEventListener("click", () => banner.remove());
  // the banner goes once the text is no longer the example's
  store.subscribe((s, changed) => {
    if (changed.has("analysis") && s.analysis && s.text !== island.state.text) banner.remove();
  });
  (bar.closest(".status-row") ?? bar).after(banner);
}

function init() {
  const bar = document.getElementById("view-actions");
  if (!bar) return; // a page without the tools (e.g. an older template)
  const config = readIsland("config");
  const get = () => store.get();
  const hasHead = (s) => Boolean(s.analysis && s.headData);

  const actions = el("div", { class: "view-tools" });
  const { button: shareButton } = initShare(actions, get);
  const html = el("button", { class: "tool", text: "Download view", title: "One HTML file with this view and Plotly inside: opens offline", attrs: { type: "button", "data-export": "view-html" } });
  const json = el("button", { class: "tool", text: "Download JSON", title: "The analysis, this head's edges, the method, its metrics and the sweep", attrs: { type: "button", "data-export": "analysis-json" } });
  const csv = el("button", { class: "tool", text: "Download CSV", title: "The metrics of the current setting and of every sweep point, block sparsity at every tile size included", attrs: { type: "button", "data-export": "metrics-csv" } });
  statusLine = el("span", { class: "export-status muted", attrs: { role: "status" } });
  // the downloads behind one disclosure: one tab stop until opened
  const menu = el("details", { class: "export-menu" }, [
    el("summary", { class: "tool", text: "Download…", title: "this view as one HTML file, the analysis as JSON, the metrics as CSV" }),
    el("div", { class: "export-menu-items" }, [html, json, csv]),
  ]);
  menu.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape" && menu.open) {
      menu.open = false;
      menu.querySelector("summary")?.focus();
    }
  });
  actions.append(menu, statusLine);
  bar.append(actions);
  galleryBanner(bar);

  html.addEventListener("click", () =>
    run("view HTML", async () => {
      const s = get();
      const text = await standaloneHtml(s, config.plotly ?? "/static/vendor/plotly.min.js");
      download(new Blob([text], { type: "text/html" }), `${baseName(s)}.html`);
    }),
  );
  json.addEventListener("click", () =>
    run("analysis JSON", async () => {
      const s = get();
      const text = JSON.stringify(analysisJson(s), null, 1);
      download(new Blob([text], { type: "application/json" }), `${baseName(s)}.json`);
    }),
  );

  csv.addEventListener("click", () =>
    run("metrics CSV", async () => {
      const s = get();
      download(new Blob([metricsCsv(s)], { type: "text/csv" }), `${baseName(s)}-metrics.csv`);
    }),
  );

  const figures = [];
  const heatHead = panelHead("heatmap");
  if (heatHead) {
    // PNGs rendered from the vector figure at 2× and 3× (≥ 1,800 px wide, for papers and slides):
    // the whole matrix, its title, subtitle and legend, no hover or locked-row dimming
    const png = (scale) => async () => {
      const svg = heatmapSvg(get());
      // k× of a figure at least 900 px wide (a short text's figure is narrower)
      const w = Number(/ width="([0-9.]+)"/.exec(svg)?.[1] ?? 900);
      const k = scale * Math.max(1, 900 / w);
      download(await svgToPng(svg, k), `${baseName(get())}-heatmap@${scale}x.png`);
    };
    const f = figureButtons("heatmap", hasHead, {
      png: png(2),
      "png3x": png(3),
      svg: async () => download(svgBlob(heatmapSvg(get())), `${baseName(get())}-heatmap.svg`),
    });
    const [b2, b3] = f.group.querySelectorAll("button");
    b2.textContent = "PNG 2×";
    b2.title = "Download the heatmap as PNG at 2× (print)";
    b3.textContent = "3×";
    b3.title = "Download the heatmap as PNG at 3× (slides, posters)";
    heatHead.append(f.group);
    figures.push(f);
  }
  const paretoHead = panelHead("pareto");
  if (paretoHead) {
    const gd = document.getElementById("pareto");
    const f = figureButtons("pareto", (s) => Boolean(s.pareto && s.analysis), {
      png: async () => download(await paretoImage(gd, get(), "png"), `${baseName(get())}-pareto.png`),
      svg: async () => download(await paretoImage(gd, get(), "svg"), `${baseName(get())}-pareto.svg`),
    });
    // the plot large: the panel over the page (Esc or the button again brings it back)
    const big = el("button", { class: "tool tool-small", text: "⤢ larger", title: "Show the plot large (Esc: back)", attrs: { type: "button", "aria-pressed": "false", "data-action": "pareto-large" } });
    const panel = gd.closest(".panel");
    const setBig = (on) => {
      panel.classList.toggle("pareto-large", on);
      big.setAttribute("aria-pressed", String(on));
      big.textContent = on ? "⤡ smaller" : "⤢ larger";
      gd.dispatchEvent(new Event("pareto-resize")); // drawn again at the new size (pareto.js)
    };
    big.addEventListener("click", () => setBig(!panel.classList.contains("pareto-large")));
    panel.addEventListener("keydown", (ev) => {
      if (ev.key === "Escape" && panel.classList.contains("pareto-large")) setBig(false);
    });
    f.group.append(big);
    paretoHead.append(f.group);
    figures.push(f);
  }
  const posHead = panelHead("pos");
  if (posHead) {
    const svgOf = () => {
      const svg = posSvg(get());
      if (!svg) throw new Error("this head has no k-means clusters to export");
      return svg;
    };
    const f = figureButtons("pos", (s) => hasHead(s) && s.headData.centroids.size > 0, {
      png: async () => download(await svgToPng(svgOf()), `${baseName(get())}-pos.png`),
      svg: async () => download(svgBlob(svgOf()), `${baseName(get())}-pos.svg`),
    });
    posHead.append(f.group);
    figures.push(f);
  }

  const sync = (s) => {
    const ok = hasHead(s);
    shareButton.disabled = !s.analysis;
    html.disabled = json.disabled = csv.disabled = !ok;
    for (const f of figures) f.sync(s);
  };
  store.subscribe((s, changed) => {
    if (["analysis", "headData", "pareto", "method"].some((k) => changed.has(k))) sync(s);
  });
  sync(store.get());
}

init();
