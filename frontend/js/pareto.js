/**
 * The live Pareto plot (Plotly, vendored at /static/vendor/plotly.min.js): sparsity (x) against
 * recall (y) for every method's sweep on this text — the open head, or the mean over heads — with
 * each method's frontier (definitions §4: by sparsity descending, keep a point iff its recall beats every
 * recall kept before it; indices from the server) and the current setting as a highlighted star
 * that follows the sliders. The x-axis is the token sparsity, or (`store.paretoX === "block"`, the
 * server's `x=block`) the block sparsity at the chosen tile size: the axis is read from the data
 * drawn (`x`, `block`), so plot, frontiers and star always agree.
 *
 * The sweep is drawn with `Plotly.react` when the data change. Any Plotly edit (restyle, relayout,
 * even of one shape) replots the figure, 100+ ms with hundreds of sweep points, so the star is
 * drawn on a canvas laid over the plot, placed in pixels from the axis ranges and the plot area
 * (`_fullLayout._size`). A slider step only redraws that canvas: no DOM, style or layout change,
 * so the frame needs no repaint or re-layerisation of the page (moving an element with a CSS
 * transform made Chromium re-layerise every paint chunk of the page, ~1,000 of them Plotly's
 * points: measured with bench/bench_page.py --compare); the canvas' size and the plot's offset in it are
 * read only after Plotly drew or the container resized. Clicking a point applies its
 * method and parameters. All hover text is escaped (Plotly renders a subset of HTML in labels).
 *
 * The legend is HTML under the plot (not Plotly's: in a one-column panel it took more height than
 * the plot and sat over the x-axis title): one toggle button per method (aria-pressed: shown),
 * and the frontier points as a table, each row's button applying that point (keyboard: Tab to it,
 * Enter). The mode bar keeps zoom, pan and reset only (no cloud upload).
 */

import { loadPlotly, plotlyNow } from "./plotly.js";
import { resolveParams } from "./params.js";
import { escapeHtml, fmt } from "./dom.js";
import { markInput } from "./live.js";
import * as store from "./state.js";
import { methodStyles, swatch } from "./colours.js";
import { rove, setStop } from "./roving.js";

export { swatch }; // the legend's swatch (colours.js)

/** Categorical colours, one per method, in the registry's order. */
export const PALETTE = [
  "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
  "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#1f2937",
];
const FONT = {
  family: "system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif",
  size: 13,
};
/** Store keys that change the line under the plot. */
const NOTE_KEYS = ["pareto", "paretoStatus", "scope", "meanMetrics", "layer", "head", "paretoY"];

/**
 * The x coordinate of a point (or of the current metrics) on the axis of Pareto data `data`: its
 * token sparsity, or its block sparsity at `data.block` when `data.x === "block"`.
 */
export function xOf(data, m) {
  if (data?.x !== "block") return m.sparsity;
  const v = m.block_sparsity?.[String(data.block)];
  return typeof v === "number" ? v : NaN;
}

/** The y-axes the plot offers: recall and mass recall (higher is better), output error (lower). */
export const Y_AXES = {
  recall: { title: "recall", higher: true },
  mass_recall: { title: "mass recall", higher: true },
  output_error: { title: "output error ‖(P̃ − P)V‖ / ‖PV‖", higher: false },
};

/** The plot's y: the store's `paretoY` when the data carry it, else recall. */
export function yKey(s, data) {
  const y = s.paretoY ?? "recall";
  if (y === "output_error" && !data?.points?.some((p) => typeof p.output_error === "number")) {
    return "recall";
  }
  return Y_AXES[y] ? y : "recall";
}

/**
 * Each method's frontier over (x, y) (definitions §4's rule: by x descending, keep a point iff
 * its y beats every y kept before it; for output error lower beats): the server's frontiers for
 * recall, computed here for the other axes.
 */
export function frontiersOf(data, y) {
  if (y === "recall") return data.frontiers ?? {};
  const better = Y_AXES[y].higher ? (a, b) => a > b : (a, b) => a < b;
  const by = {};
  data.points.forEach((p, k) => {
    if (!Number.isFinite(xOf(data, p)) || typeof p[y] !== "number") return;
    (by[p.method] ??= []).push(k);
  });
  const out = {};
  for (const [m, ks] of Object.entries(by)) {
    ks.sort((a, b) => xOf(data, data.points[b]) - xOf(data, data.points[a]) ||
      (better(data.points[a][y], data.points[b][y]) ? -1 : 1) || a - b);
    const kept = [];
    let best = null;
    for (const k of ks) {
      const v = data.points[k][y];
      if (best === null || better(v, best)) {
        kept.push(k);
        best = v;
      }
    }
    out[m] = kept;
  }
  return out;
}

/** The x-axis title of Pareto data. */
export function xTitle(data) {
  return data?.x === "block" ? `block sparsity (${data.block} × ${data.block} tiles)` : "sparsity";
}
/** The star's outer radius (CSS px). */
const STAR_R = 12;

/** A five-pointed star as an SVG path of outer radius r around (0, 0), point up. */
function starPath(r) {
  const pts = [];
  for (let k = 0; k < 10; k++) {
    const rad = k % 2 === 0 ? r : r * 0.45;
    const a = -Math.PI / 2 + (k * Math.PI) / 5;
    pts.push(`${(rad * Math.cos(a)).toFixed(2)},${(rad * Math.sin(a)).toFixed(2)}`);
  }
  return `M${pts.join("L")}Z`;
}

function paramText(params) {
  return Object.entries(params)
    .map(([k, v]) => `${k}=${typeof v === "number" && !Number.isInteger(v) ? v.toFixed(2) : v}`)
    .join(", ");
}

/**
 * Mount the plot in `root`.
 * @param {HTMLElement} root
 * @param {HTMLElement} note one line under the plot (scope, loading, errors)
 */
export function initPareto(root, note) {
  let Plotly = plotlyNow(); // loaded by the first draw (plotly.js): never before the heatmap
  let drawn = null; // the pareto body drawn last
  let bound = false; // plot events bound (Plotly.purge drops them)
  let colourOf = new Map();
  /** @type {Map<string, {colour: string, marker: string}>} */
  let styleOf = new Map();
  /** Methods hidden from the plot with their legend button (kept across redraws). */
  const hidden = new Set();
  const legendBox = document.createElement("div");
  legendBox.className = "pareto-legend";
  legendBox.id = "pareto-legend";
  legendBox.setAttribute("role", "group");
  legendBox.setAttribute("aria-label", "methods shown in the plot");
  const list = document.createElement("details");
  list.className = "pareto-list";
  list.id = "pareto-list";
  const listSummary = document.createElement("summary");
  listSummary.textContent = "frontier points as a table";
  const listBody = document.createElement("div");
  list.append(listSummary, listBody);
  list.addEventListener("toggle", () => list.open && fillList());
  root.parentElement.after(legendBox, list);
  rove(legendBox, () => [...legendBox.children], { cols: () => legendBox.children.length });
  // shown large or back (export.js): drawn again at the new height
  root.addEventListener("pareto-resize", () => {
    drawn = null;
    draw(store.get());
  });
  const heading = root.closest(".panel")?.querySelector(".panel-head h2") ?? null;
  const wrap = root.parentElement;
  const canvas = document.createElement("canvas");
  canvas.className = "pareto-star";
  canvas.setAttribute("aria-hidden", "true");
  canvas.style.visibility = "hidden";
  wrap.append(canvas);
  const star = new Path2D(starPath(STAR_R));
  /** The canvas' size (CSS px, device pixel ratio) and the plot's offset in the container;
   * null: to be read again (after Plotly drew, or the container resized). */
  let box = null;
  /** Where the star is drawn (CSS px) and in which colour; null: nothing drawn. */
  let shown = null;
  new ResizeObserver(() => {
    box = null;
    if (drawn) moveCurrent(store.get());
  }).observe(wrap);

  /** The current setting's metrics: the open head's, or the mean over heads. */
  function current(s) {
    return s.scope === "mean" ? s.meanMetrics ?? null : s.result?.metrics ?? null;
  }

  /** The x range: from a little below the smallest x shown (sweep, gold, current) to 1. */
  function xRange(data, s) {
    const cur = current(s);
    const xs = data.points.map((p) => xOf(data, p)).filter(Number.isFinite);
    const c = cur ? xOf(data, cur) : 1;
    const gold = data.x === "block" ? 1 : data.gold_sparsity;
    const lo = Math.min(...xs, gold, Number.isFinite(c) ? c : 1);
    return [Math.max(0, lo - 0.04) - 0.01, 1.01];
  }

  /** The plot: what is left of a wide window below the plot's top (one screen), else 380. */
  function plotHeight() {
    if (root.closest(".pareto-large")) return Math.round(Math.min(760, window.innerHeight * 0.7));
    if (window.innerWidth < 1100) return 380;
    const top = root.getBoundingClientRect().top + window.scrollY;
    return Math.round(Math.min(440, Math.max(340, window.innerHeight - top - 40)));
  }

  /** The y range: [0, 1] for the recalls; from 0 to the largest error shown for output error. */
  function yRange(s, data) {
    const y = yKey(s, data);
    if (y !== "output_error") return [-0.02, 1.04];
    const top = Math.max(0.05, ...data.points.map((p) => p.output_error).filter(Number.isFinite));
    return [-0.02 * top, 1.04 * top];
  }

  function layout(s, data) {
    return {
      font: FONT,
      margin: { l: 48, r: 10, t: 30, b: 40 },
      height: plotHeight(),
      uirevision: "pareto", // methods hidden from the legend stay hidden across updates
      xaxis: {
        title: { text: xTitle(data), standoff: 6 },
        range: xRange(data, s),
        zeroline: false,
        gridcolor: "#eef0f3",
      },
      yaxis: {
        title: { text: Y_AXES[yKey(s, data)].title },
        range: yRange(s, data),
        zeroline: false,
        gridcolor: "#eef0f3",
      },
      showlegend: false, // the HTML legend under the plot (exports turn Plotly's back on)
      legend: { orientation: "h", x: 0, y: -0.16, yanchor: "top", font: { ...FONT, size: 11 } },
      hovermode: "closest",
      hoverlabel: { align: "left", font: { ...FONT, size: 12 } },
      plot_bgcolor: "#ffffff",
      paper_bgcolor: "#ffffff",
      // the gold graph's token sparsity (no block figure of the gold graph is served)
      shapes: data.x === "block" ? [] : [
        {
          type: "line", xref: "x", yref: "paper", y0: 0, y1: 1,
          x0: data.gold_sparsity, x1: data.gold_sparsity,
          line: { color: "#6b7280", width: 1, dash: "dot" },
        },
      ],
      annotations: data.x === "block" ? [] : [
        {
          // at the foot of its line: the top edge is under Plotly's toolbar
          x: data.gold_sparsity, y: 0.01, xref: "x", yref: "paper", yanchor: "bottom",
          xanchor: "right", showarrow: false, textangle: -90,
          text: "gold sparsity", font: { ...FONT, size: 11, color: "#6b7280" },
        },
      ],
    };
  }

  /** Traces: per method its sweep points and its frontier (the legend entry). */
  function traces(s, data) {
    const labels = new Map(s.analysis.methods.map((m) => [m.name, m.label]));
    styleOf = methodStyles(s.analysis.methods);
    colourOf = new Map([...styleOf].map(([name, st]) => [name, st.colour]));
    const byMethod = new Map();
    data.points.forEach((p, k) => {
      if (!byMethod.has(p.method)) byMethod.set(p.method, []);
      byMethod.get(p.method).push(k);
    });
    const y = yKey(s, data);
    const fronts = frontiersOf(data, y);
    const hover = (p) =>
      `<b>${escapeHtml(labels.get(p.method) ?? p.method)}</b><br>${escapeHtml(paramText(p.params))}` +
      `<br>sparsity ${fmt(p.sparsity)} · recall ${fmt(p.recall)}` +
      ` · mass recall ${fmt(p.mass_recall)}` +
      (typeof p.output_error === "number" ? `<br>output error ${fmt(p.output_error)}` : "") +
      (data.x === "block" ? `<br>block sparsity (${data.block}) ${fmt(xOf(data, p))}` : "") +
      `<br>exact ${fmt(p.exact)} · precision ${fmt(p.precision)}`;
    const out = [];
    for (const [method, idx] of byMethod) {
      const colour = colourOf.get(method) ?? "#888";
      const symbol = styleOf.get(method)?.marker ?? "circle";
      const label = escapeHtml(labels.get(method) ?? method);
      const front = fronts[method] ?? [];
      const trace = (ks, extra) => ({
        type: "scatter", name: label, legendgroup: method, hoverinfo: "text", customdata: ks,
        x: ks.map((k) => xOf(data, data.points[k])), y: ks.map((k) => data.points[k][y] ?? NaN),
        text: ks.map((k) => hover(data.points[k])), ...extra,
      });
      out.push(trace(idx, {
        mode: "markers",
        showlegend: false,
        visible: s.paretoPoints === true && !hidden.has(method), // frontiers only unless asked
        marker: { color: colour, size: 6, opacity: 0.35, symbol },
      }));
      out.push(trace(front, {
        visible: !hidden.has(method),
        mode: "lines+markers",
        line: { color: colour, width: 2 },
        marker: { color: colour, size: 8, symbol, line: { color: "#ffffff", width: 0.5 } },
      }));
    }
    return out;
  }

  function draw(s) {
    const data = s.pareto;
    if (!data || !s.analysis) {
      if (Plotly && drawn) {
        Plotly.purge(root); // removes the plot's event handlers too: bound again on the next draw
        bound = false;
      }
      drawn = null;
      return;
    }
    if (!Plotly) {
      loadPlotly().then((P) => {
        Plotly = P;
        const now = store.get();
        if (now.pareto) {
          draw(now);
          bindEvents();
        }
      }, (err) => (note.textContent = `The plot cannot be drawn: ${err.message}`));
      return;
    }
    Plotly.react(root, traces(s, data), layout(s, data), {
      displaylogo: false,
      responsive: true,
      // no mode bar (three more tab stops on the first screen): a drag zooms, a double click
      // resets (said under the plot)
      displayModeBar: false,
      doubleClick: "reset",
    });
    drawn = data;
    box = null;
    drawLegend(s, data);
    if (list.open) fillList();
    if (heading) {
      heading.textContent = `${data.x === "block" ? "Block sparsity" : "Sparsity"} – ` +
        Y_AXES[yKey(s, data)].title.split(" ‖")[0];
    }
    moveCurrent(s);
  }

  /**
   * Place the star at the current setting: data -> pixels through the axis ranges and the plot
   * area, relative to the plot's container. Hidden when there is no current value or it is off
   * the axes.
   */
  function moveCurrent(s) {
    const m = current(s);
    const size = root._fullLayout?._size;
    if (!drawn || !m || !size) {
      showStar(null);
      return;
    }
    const [x0, x1] = root.layout.xaxis.range;
    const [y0, y1] = root.layout.yaxis.range;
    const fx = (xOf(drawn, m) - x0) / (x1 - x0);
    const y = yKey(s, drawn);
    const my = y === "output_error" ? (s.scope === "mean" ? NaN : s.outputError ?? NaN) : m[y];
    const fy = (my - y0) / (y1 - y0);
    if (!Number.isFinite(fx) || !Number.isFinite(fy)) {
      showStar(null);
      return;
    }
    if (fx < 0) {
      // left of the axis: widen it once (a replot), then place the star
      Plotly.relayout(root, { "xaxis.range": xRange(drawn, s) });
      return;
    }
    const inside = fx <= 1 && fy >= 0 && fy <= 1;
    if (!box) box = measureBox();
    const at = {
      x: box.left + size.l + fx * size.w,
      y: box.top + size.t + (1 - fy) * size.h,
      fill: colourOf.get(s.method) ?? "#111827",
    };
    showStar(inside ? at : null);
  }

  /** The container's size and the plot's offset in it (a layout read: never in a slider frame
   * unless the container was resized). */
  function measureBox() {
    const dpr = window.devicePixelRatio || 1;
    const w = wrap.clientWidth;
    const h = wrap.clientHeight;
    if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
      canvas.width = Math.round(w * dpr);
      canvas.height = Math.round(h * dpr);
      canvas.style.width = `${w}px`;
      canvas.style.height = `${h}px`;
      shown = null;
    }
    return { left: root.offsetLeft, top: root.offsetTop, dpr };
  }

  /** Draw the star at `at` ({x, y} CSS px in the container, fill colour), or hide it (null). */
  function showStar(at) {
    const visibility = at ? "visible" : "hidden";
    if (canvas.style.visibility !== visibility) canvas.style.visibility = visibility;
    if (!at || (shown && shown.x === at.x && shown.y === at.y && shown.fill === at.fill)) return;
    const ctx = canvas.getContext("2d");
    const { dpr } = box;
    const pad = STAR_R + 3;
    if (shown) ctx.clearRect((shown.x - pad) * dpr, (shown.y - pad) * dpr, 2 * pad * dpr, 2 * pad * dpr);
    ctx.setTransform(dpr, 0, 0, dpr, at.x * dpr, at.y * dpr);
    ctx.fillStyle = at.fill;
    ctx.strokeStyle = "#111827";
    ctx.lineWidth = 2;
    ctx.lineJoin = "round";
    ctx.fill(star);
    ctx.stroke(star);
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    shown = at;
  }

  /** The methods drawn, in the registry's order, with their labels. */
  function methodsOf(s, data) {
    const present = new Set(data.points.map((p) => p.method));
    return s.analysis.methods.filter((m) => present.has(m.name));
  }

  /** One toggle per method: its colour, its label, pressed while it is shown. */
  function drawLegend(s, data) {
    const at = Math.max(0, [...legendBox.children].findIndex((b) => b.getAttribute("tabindex") === "0"));
    legendBox.replaceChildren(
      ...methodsOf(s, data).map((m) => {
        const b = document.createElement("button");
        b.type = "button";
        b.className = "pareto-key";
        b.dataset.method = m.name;
        b.setAttribute("aria-pressed", String(!hidden.has(m.name)));
        b.title = "show or hide this method in the plot";
        b.dataset.colour = colourOf.get(m.name) ?? "#888";
        b.dataset.marker = styleOf.get(m.name)?.marker ?? "circle";
        b.append(swatch(b.dataset.colour, b.dataset.marker), document.createTextNode(m.label));
        b.addEventListener("click", () => {
          if (hidden.has(m.name)) hidden.delete(m.name);
          else hidden.add(m.name);
          draw(store.get());
          // the legend was drawn anew: the focus stays on this method's key
          const again = legendBox.querySelector(`[data-method="${m.name}"]`);
          if (again) {
            setStop([...legendBox.children], [...legendBox.children].indexOf(again));
            again.focus();
          }
        });
        return b;
      }),
    );
    // one tab stop: the arrow keys move between the methods (roving.js)
    const keys = [...legendBox.children];
    setStop(keys, Math.min(at, keys.length - 1));
  }

  /** The frontier points as a table: each row's button applies its setting (Enter, or a click). */
  function fillList() {
    const s = store.get();
    const data = drawn;
    if (!data || !s.analysis) {
      listBody.replaceChildren();
      return;
    }
    const table = document.createElement("table");
    table.id = "pareto-table";
    const y = yKey(s, data);
    const yName = Y_AXES[y].title.split(" ‖")[0];
    const fronts = frontiersOf(data, y);
    const head = table.createTHead().insertRow();
    for (const t of ["method · setting", data.x === "block" ? "block sp." : "sparsity", yName, ""]) {
      const th = document.createElement("th");
      th.scope = "col";
      th.textContent = t;
      head.append(th);
    }
    const body = table.createTBody();
    for (const m of methodsOf(s, data)) {
      for (const k of fronts[m.name] ?? []) {
        const p = data.points[k];
        const row = body.insertRow();
        row.dataset.method = m.name;
        row.dataset.index = String(k);
        const x = xOf(data, p);
        const what = row.insertCell();
        const setting = document.createElement("span");
        setting.className = "pareto-setting";
        setting.textContent = paramText(p.params);
        what.append(document.createTextNode(m.label), document.createElement("br"), setting);
        for (const t of [fmt(x), fmt(p[y])]) row.insertCell().textContent = t;
        const b = document.createElement("button");
        b.type = "button";
        b.className = "pareto-apply";
        b.textContent = "apply";
        b.setAttribute("aria-label", `apply ${m.label} ${paramText(p.params)}: sparsity ${fmt(x)}, ${yName} ${fmt(p[y])}`);
        b.addEventListener("click", () => apply(k));
        row.insertCell().append(b);
      }
    }
    listBody.replaceChildren(table);
  }

  /** Apply point k of the drawn sweep: its method and its parameters. */
  function apply(k) {
    const p = drawn?.points[k];
    const spec = p && store.get().analysis?.methods.find((m) => m.name === p.method);
    if (!spec) return;
    markInput();
    store.set({ method: p.method, params: resolveParams(spec, p.params) });
  }

  function showNote(s) {
    const where = s.scope === "mean" ? "mean over all heads" : `layer ${s.layer}, head ${s.head}`;
    if (s.paretoStatus === "loading") note.textContent = `Computing the sweep (${where})…`;
    else if (s.paretoStatus && s.paretoStatus !== "ready") note.textContent = s.paretoStatus;
    else if (!s.pareto) note.textContent = "";
    else if (s.paretoY === "output_error" && s.scope === "mean") {
      note.textContent = `${where} · output error is measured per head: pick "this head" to plot it (recall shown)`;
    }
    else if (s.scope === "mean" && !s.meanMetrics) {
      note.textContent = `${where} · ★ current setting: computing over every head…`;
    }
    else if (s.pareto.x === "block" && s.analysis && s.analysis.n <= Number(s.pareto.block)) {
      // one tile holds the whole text: every pattern keeps it, every point sits at x = 0
      const small = ["16", "32", "64"].filter((b) => Number(b) < s.analysis.n).pop();
      note.textContent = `${where} · ${s.analysis.n} tokens fit one ${s.pareto.block} × ` +
        `${s.pareto.block} tile, so every pattern's block sparsity is 0` +
        (small ? `: pick tile ${small} under Metrics to compare` : ": compare token sparsity");
    } else {
      const axis = s.pareto.x === "block" ? ` · x: ${s.pareto.block} × ${s.pareto.block} tiles` : "";
      note.textContent = `${where}${axis} · ★ = current setting · click a point to apply its setting · drag to zoom, double-click to reset`;
    }
  }

  function bindEvents() {
    if (bound || !root.on || !drawn) return;
    bound = true;
    // zoom, pan, resize: the axes moved under the star
    root.on("plotly_relayout", () => {
      box = null;
      moveCurrent(store.get());
    });
    root.on("plotly_afterplot", () => {
      box = null;
      moveCurrent(store.get());
    });
    root.on("plotly_click", (ev) => {
      const pt = ev.points?.[0];
      if (!pt || !drawn || pt.customdata === undefined) return;
      apply(Number(pt.customdata));
    });
  }

  store.subscribe((s, changed) => {
    if (changed.has("pareto") || changed.has("analysis")) {
      draw(s);
      bindEvents();
    } else if ((changed.has("paretoPoints") || changed.has("paretoY")) && drawn) {
      draw(s);
    } else if (["result", "meanMetrics", "scope", "method", "outputError"].some((k) => changed.has(k))) {
      moveCurrent(s);
    }
    if (NOTE_KEYS.some((k) => changed.has(k))) showNote(s);
  });
}
