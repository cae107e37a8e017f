/**
 * "Download this view": one self-contained HTML file that opens offline, anywhere, and redraws
 * the open head with Plotly — no server, no network.
 *
 * The file holds, inline: the Plotly bundle (its text fetched once from the server's
 * /static/vendor/plotly.min.js), the view's data in a `<script type="application/json">` island
 * (`<`, `>`, `&` written as \u003c, \u003e, \u0026, so no token can end the element), and a small
 * renderer, `renderView`, inlined with `Function.prototype.toString` — so it must not use
 * anything outside its own body.
 */

import { methodStyles } from "./colours.js";
import { describe } from "./export-figures.js";

/** The Plotly bundle's text, fetched once. */
let plotlyText = null;

async function plotlySource(url) {
  if (plotlyText === null) {
    const resp = await fetch(url);
    if (!resp.ok) throw new Error(`could not fetch ${url} (HTTP ${resp.status})`);
    plotlyText = await resp.text();
  }
  return plotlyText;
}

/** JSON that is safe inside an HTML element (the server's `json_for_html`). */
function jsonForHtml(data) {
  return JSON.stringify(data).replace(/</g, "\\u003c").replace(/>/g, "\\u003e").replace(/&/g, "\\u0026");
}

/** Script text that is safe inside `<script>`: no `</script` (or `<!--`) can end it early. */
function scriptSafe(js) {
  // in a string or a regular expression both escapes read back as the same characters
  return js.replace(/<\/(script)/gi, "<\\/$1").replace(/<!--/g, "<\\x21--");
}

const HTML_ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
const escapeHtml = (s) => String(s).replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]);

/** A 0/1 n × n mask as base64 of its bits, row-major, most significant bit first. */
function maskBits(mask) {
  const bytes = new Uint8Array(Math.ceil(mask.length / 8));
  for (let x = 0; x < mask.length; x++) if (mask[x]) bytes[x >> 3] |= 128 >> (x & 7);
  let bin = "";
  for (let k = 0; k < bytes.length; k += 0x8000) bin += String.fromCharCode(...bytes.subarray(k, k + 0x8000));
  return btoa(bin);
}

/**
 * The data a standalone view needs (also what the JSON export's `view` holds).
 * @param {import("./state.js").State} s
 */
export function viewData(s) {
  const a = s.analysis;
  const head = s.headData;
  const spec = a.methods.find((m) => m.name === s.method);
  const edges = [];
  for (let e = 0; e < head.goldCount; e++) {
    const i = head.edgeI[e];
    const j = head.edgeJ[e];
    edges.push([i, j, head.probs[i * head.n + j]]);
  }
  const d = describe(s);
  return {
    format: "sparsescope-view/1",
    title: `sparsescope · layer ${s.layer}, head ${s.head}`,
    subtitle: d.head,
    methodLine: d.method,
    model: a.model,
    alpha: a.alpha,
    causal: a.causal,
    n: head.n,
    layer: s.layer,
    head: s.head,
    tokens: a.tokens.map((t) => t.text),
    special: a.tokens.map((t) => t.special),
    hideSpecial: Boolean(s.hideSpecial),
    goldSparsity: head.goldSparsity,
    edges,
    method: { name: s.method, label: spec ? spec.label : s.method, params: s.params },
    metrics: s.result?.metrics ?? null,
    block: s.block, // the tile size of the block sparsity shown (a key of metrics.block_sparsity)
    mask: s.result?.mask ? maskBits(s.result.mask) : null,
    pareto: s.pareto ?? null,
    scope: s.scope,
    current: (s.scope === "mean" ? s.meanMetrics : s.result?.metrics) ?? null,
    labels: Object.fromEntries(a.methods.map((m) => [m.name, m.label])),
    // each method's colour and marker, as the page draws them (colours.js methodStyles)
    styles: Object.fromEntries([...methodStyles(a.methods)].map(([k, v]) => [k, v])),
    exported: new Date().toISOString(),
    source: `${location.origin}${location.pathname}`,
    text: s.text,
    // the live view: the address bar is the view (a share page's own address for long texts)
    live: location.href,
  };
}

/**
 * Draw a view from its data into `root` with `Plotly`. Self-contained: it is inlined into the
 * downloaded file as source text, so it uses nothing but its arguments and the DOM.
 * @param {any} Plotly
 * @param {ReturnType<typeof viewData>} data
 * @param {HTMLElement} root
 */
export function renderView(Plotly, data, root) {
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  const node = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  };
  const fmt = (x) => (typeof x === "number" && isFinite(x) ? x.toFixed(3) : "–");
  const n = data.n;
  const vis = [];
  for (let t = 0; t < n; t++) if (!(data.hideSpecial && data.special[t])) vis.push(t);
  if (!vis.length) for (let t = 0; t < n; t++) vis.push(t);
  const pos = new Int32Array(n).fill(-1);
  vis.forEach((t, a) => (pos[t] = a));
  const m = vis.length;
  let mask = null;
  if (data.mask) {
    const bin = atob(data.mask);
    mask = new Uint8Array(n * n);
    for (let x = 0; x < n * n; x++) mask[x] = (bin.charCodeAt(x >> 3) >> (7 - (x & 7))) & 1;
  }
  const gold = new Float32Array(n * n);
  for (const [i, j, p] of data.edges) gold[i * n + j] = p;

  const head = node("header", "v-head");
  head.append(node("h1", "", data.title), node("p", "v-sub", `${data.subtitle} · ${data.model}`), node("p", "v-sub", data.methodLine));
  const metrics = node("dl", "v-metrics");
  for (const k of ["recall", "sparsity", "exact", "precision"]) {
    const d = node("div");
    d.append(node("dt", "", k), node("dd", "", fmt(data.metrics ? data.metrics[k] : NaN)));
    metrics.append(d);
  }
  if (data.block && data.metrics && data.metrics.block_sparsity) {
    const bs = node("div");
    bs.append(node("dt", "", `block sparsity (${data.block} × ${data.block})`), node("dd", "", fmt(data.metrics.block_sparsity[data.block])));
    metrics.append(bs);
  }
  const gs = node("div");
  gs.append(node("dt", "", "gold sparsity"), node("dd", "", fmt(data.goldSparsity)));
  metrics.append(gs);
  head.append(metrics);
  if (data.text) {
    const q = node("blockquote", "v-text", data.text);
    head.append(q);
  }
  if (data.live) {
    const p = node("p", "v-sub");
    const a = node("a", "", "Open this view live in sparsescope");
    if (/^https?:\/\//.test(data.live)) a.href = data.live;
    p.append(a);
    head.append(p);
  }
  const heat = node("div", "v-plot v-heatmap");
  const pareto = node("div", "v-plot v-pareto");
  const foot = node("p", "v-foot", `Exported ${data.exported} from ${data.source}. Rows are queries i, columns keys j; blue: p > 0 kept by the method (★), red: p > 0 missed (×), sand: predicted but p = 0, white: exact zero.`);
  root.append(head, heat, pareto, foot);

  // --- heatmap: predicted zeros, kept and missed probabilities (on √p), then the marks
  const grid = (f) => vis.map((i) => vis.map((j) => f(i * n + j)));
  const kept = (x) => mask === null || mask[x] === 1;
  const labels = vis.map((t) => esc(data.tokens[t].length > 14 ? `${data.tokens[t].slice(0, 13)}…` : data.tokens[t]));
  const blues = [[0, "#c6dbef"], [0.17, "#9ecae1"], [0.33, "#6baed6"], [0.5, "#4292c6"], [0.67, "#2171b5"], [0.83, "#08519c"], [1, "#08306b"]];
  const reds = [[0, "#fcae91"], [0.2, "#fb6a4a"], [0.4, "#ef3b2c"], [0.6, "#cb181d"], [0.8, "#a50f15"], [1, "#67000d"]];
  const hm = (z, colorscale, name, extra) => ({
    type: "heatmap", z, x: vis.map((_, b) => b), y: vis.map((_, a) => a), colorscale, zmin: 0, zmax: 1,
    name, showscale: false, hoverongaps: false, xgap: 0, ygap: 0, ...extra,
  });
  const traces = [
    hm(grid((x) => (mask && mask[x] === 1 && !gold[x] ? 1 : null)), [[0, "#f2dfb5"], [1, "#f2dfb5"]], "predicted, p = 0", { hoverinfo: "skip" }),
    hm(grid((x) => (gold[x] && kept(x) ? Math.sqrt(gold[x]) : null)), blues, "p > 0 (kept)", {
      customdata: grid((x) => gold[x]), hovertemplate: "query %{y} · key %{x}<br>p = %{customdata:.4f}<extra>kept</extra>",
      showscale: true, colorbar: { title: { text: "p" }, tickvals: [0.1, 0.316, 0.5, 0.707, 1], ticktext: ["0.01", "0.1", "0.25", "0.5", "1"], thickness: 12 },
    }),
    hm(grid((x) => (gold[x] && !kept(x) ? Math.sqrt(gold[x]) : null)), reds, "p > 0 (missed)", {
      customdata: grid((x) => gold[x]), hovertemplate: "query %{y} · key %{x}<br>p = %{customdata:.4f}<extra>missed</extra>",
    }),
  ];
  if (m <= 128) {
    const star = { x: [], y: [] };
    const cross = { x: [], y: [] };
    for (const [i, j] of data.edges) {
      if (pos[i] < 0 || pos[j] < 0) continue;
      const into = kept(i * n + j) ? star : cross;
      into.x.push(pos[j]);
      into.y.push(pos[i]);
    }
    const size = Math.max(4, Math.min(14, 560 / m));
    traces.push({ type: "scatter", mode: "markers", name: "gold edge kept (★)", ...star, hoverinfo: "skip",
      marker: { symbol: "star", size, color: "#f59e0b", line: { color: "#7c2d12", width: 0.6 } } });
    if (mask) {
      traces.push({ type: "scatter", mode: "markers", name: "gold edge missed (×)", ...cross, hoverinfo: "skip",
        marker: { symbol: "x", size, color: "#dc2626", line: { color: "#ffffff", width: 1 } } });
    }
  }
  const step = Math.max(1, Math.ceil(m / 64));
  const ticks = vis.map((_, a) => a).filter((a) => a % step === 0);
  const axis = { tickvals: ticks, ticktext: ticks.map((a) => labels[a]), showgrid: false, zeroline: false, range: [-0.5, m - 0.5], tickfont: { size: m > 40 ? 9 : 12 } };
  const side = Math.max(460, Math.min(900, 16 * m + 200));
  Plotly.newPlot(heat, traces, {
    width: side + 120, height: side + 40, margin: { t: 130, l: 120, r: 20, b: 20 }, plot_bgcolor: "#ffffff",
    xaxis: { ...axis, side: "top", tickangle: -60, title: { text: "key j" } },
    yaxis: { ...axis, range: [m - 0.5, -0.5], scaleanchor: "x", title: { text: "query i" } },
    showlegend: false, font: { family: "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif" },
  }, { displaylogo: false, responsive: true });

  // --- Pareto plot of the sweep (when the page had one)
  const pd = data.pareto;
  if (!pd || !pd.points || !pd.points.length) {
    pareto.append(node("p", "v-note", "No sparsity–recall sweep was loaded on the page for this view."));
    return;
  }
  const palette = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#1f2937"];
  const names = Object.keys(data.labels);
  const byMethod = new Map();
  pd.points.forEach((p, k) => {
    if (!byMethod.has(p.method)) byMethod.set(p.method, []);
    byMethod.get(p.method).push(k);
  });
  // x: token sparsity, or block sparsity at pd.block when the page showed x = block
  const onBlocks = pd.x === "block";
  const xOf = (m) => (onBlocks ? (m.block_sparsity ? m.block_sparsity[String(pd.block)] : NaN) : m.sparsity);
  const xName = onBlocks ? `block sparsity (${pd.block} × ${pd.block} tiles)` : "sparsity";
  const ptraces = [];
  for (const [method, idx] of byMethod) {
    const style = (data.styles && data.styles[method]) || null;
    const colour = style ? style.colour : palette[Math.max(0, names.indexOf(method)) % palette.length];
    const symbol = style ? style.marker : "circle";
    const label = esc(data.labels[method] || method);
    const front = (pd.frontiers && pd.frontiers[method]) || [];
    const tr = (ks, extra) => ({
      type: "scatter", name: label, legendgroup: method, x: ks.map((k) => xOf(pd.points[k])), y: ks.map((k) => pd.points[k].recall),
      text: ks.map((k) => `${label}<br>${esc(Object.entries(pd.points[k].params).map(([a, b]) => `${a}=${b}`).join(", "))}`),
      hovertemplate: `%{text}<br>${xName} %{x:.3f} · recall %{y:.3f}<extra></extra>`, ...extra,
    });
    ptraces.push(tr(idx, { mode: "markers", showlegend: false, marker: { color: colour, size: 6, opacity: 0.35, symbol } }));
    ptraces.push(tr(front, { mode: "lines+markers", line: { color: colour, width: 2 }, marker: { color: colour, size: 8, symbol } }));
  }
  if (data.current) {
    ptraces.push({ type: "scatter", mode: "markers", name: "current setting", x: [xOf(data.current)], y: [data.current.recall],
      marker: { symbol: "star", size: 18, color: "#111827", line: { color: "#ffffff", width: 1 } } });
  }
  const where = data.scope === "mean" ? "mean over heads" : `layer ${data.layer}, head ${data.head}`;
  Plotly.newPlot(pareto, ptraces, {
    title: { text: `${onBlocks ? "Block sparsity" : "Sparsity"}–recall · ${where}`, x: 0.02 }, width: 900, height: 560, plot_bgcolor: "#ffffff",
    xaxis: { title: { text: xName }, gridcolor: "#eef0f3", zeroline: false },
    yaxis: { title: { text: "recall" }, range: [-0.02, 1.04], gridcolor: "#eef0f3", zeroline: false },
    legend: { orientation: "h", x: 0, y: -0.16, yanchor: "top" }, hovermode: "closest",
    shapes: onBlocks ? [] : [{ type: "line", xref: "x", yref: "paper", x0: pd.gold_sparsity, x1: pd.gold_sparsity, y0: 0, y1: 1, line: { color: "#6b7280", width: 1, dash: "dot" } }],
    font: { family: "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif" },
  }, { displaylogo: false, responsive: true });
}

const STYLE = `
body{margin:0;padding:1.2rem 1.6rem;font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#111827;background:#f6f7f9}
h1{font-size:1.3rem;margin:0 0 .2rem}.v-sub{margin:.1rem 0;color:#374151}
.v-metrics{display:flex;flex-wrap:wrap;gap:.4rem 1.4rem;margin:.6rem 0 1rem}.v-metrics div{display:flex;gap:.35rem}
.v-metrics dt{color:#6b7280}.v-metrics dd{margin:0;font-weight:650}
.v-plot{background:#fff;border:1px solid #e5e7eb;border-radius:10px;margin:0 0 1rem;display:inline-block;vertical-align:top;margin-right:1rem}
.v-text{margin:.6rem 0;padding:.4rem .7rem;border-left:3px solid #cbd5e1;color:#374151;max-height:8rem;overflow:auto;white-space:pre-wrap;max-width:60rem}
.v-foot,.v-note{color:#6b7280;font-size:.85rem;max-width:60rem;overflow-wrap:anywhere}`;

/**
 * The self-contained HTML document of the current view.
 * @param {import("./state.js").State} s
 * @param {string} plotlyUrl where the page loads Plotly from
 * @returns {Promise<string>}
 */
export async function standaloneHtml(s, plotlyUrl) {
  const data = viewData(s);
  const plotly = await plotlySource(plotlyUrl);
  const boot = `(${renderView.toString()})(window.Plotly, JSON.parse(document.getElementById("view-data").textContent), document.getElementById("view"));`;
  return [
    "<!doctype html>",
    '<html lang="en"><head><meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    `<title>${escapeHtml(data.title)}</title>`,
    `<style>${STYLE}</style>`,
    "</head><body>",
    '<main id="view"></main>',
    `<script type="application/json" id="view-data">${jsonForHtml(data)}</script>`,
    `<script>${scriptSafe(plotly)}</script>`,
    `<script>${scriptSafe(boot)}</script>`,
    "</body></html>",
  ].join("\n");
}
