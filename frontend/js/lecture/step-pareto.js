/**
 * Step 9: the sparsity–recall trade-off of every method on this text and head, with each method's
 * Pareto frontier (definitions §4), from GET /api/analyses/{id}/pareto: the same sweep, points and
 * frontiers as the explorer's Pareto plot (sparse_core.pareto). When the server cannot give them,
 * the slide says so and why; it never draws a different sweep.
 * @module lecture/step-pareto
 */

import { el, pct, svg } from "../dom.js";
import { formula, legend, prose, stats } from "./panel.js";
import { frame, PALETTE } from "./plot.js";
import { markerPath, methodStyles } from "../colours.js";

/** @typedef {import("./steps.js").StepContext} StepContext */

/**
 * @param {StepContext} ctx
 */
export async function renderPareto(ctx) {
  formula(ctx.panel, String.raw`\text{recall}(M) = \frac{|M \cap G|}{|G|}`);
  formula(ctx.panel, String.raw`\text{sparsity}(M) = 1 - \frac{|M \cap V|}{|V|}`);
  const loading = el("p", { class: "notice", text: "Sweeping every method over its grid…" });
  ctx.figure.append(loading);
  let data;
  try {
    data = await ctx.pareto();
  } catch (err) {
    if (!ctx.figure.isConnected) return; // the user moved on
    loading.replaceWith(
      el("p", {
        class: "notice notice-error",
        text: `The sparsity–recall sweep is not available: ${err.message}`,
        attrs: { id: "pareto-error", role: "alert" },
      }),
    );
    return;
  }
  if (!ctx.figure.isConnected) return; // the user moved on
  loading.remove();
  const labelOf = Object.fromEntries((ctx.analysis.methods ?? []).map((m) => [m.name, m.label]));
  const methods = Object.keys(data.frontiers ?? {});
  // one colour and marker per method, family by hue: as the explorer draws them (colours.js)
  const styles = methodStyles(ctx.analysis.methods ?? []);
  const color = Object.fromEntries(methods.map((m, k) => [m, styles.get(m)?.colour ?? PALETTE[k % PALETTE.length]]));
  const marker = Object.fromEntries(methods.map((m) => [m, styles.get(m)?.marker ?? "circle"]));
  const ticks = [0, 0.2, 0.4, 0.6, 0.8, 1];
  // the legend first (short names in a grid; the full name on hover): the plot takes what is left
  const key = legend(
    ctx.figure,
    methods.map((m) => ({ color: color[m], marker: marker[m], label: shortName(labelOf[m] ?? m), shape: "line" })),
  );
  key.classList.add("legend-methods");
  [...key.children].forEach((li, k) => li.setAttribute("title", labelOf[methods[k]] ?? methods[k]));
  const keyH = key.getBoundingClientRect().height;
  const f = frame({
    width: ctx.size.width,
    height: Math.max(260, ctx.size.height - keyH - 24),
    x: [0, 1],
    y: [0, 1.02],
    xTicks: ticks,
    yTicks: ticks,
    tickFormat: (v) => v.toFixed(1),
    xLabel: "sparsity → (fewer pairs computed)",
    yLabel: "recall →",
  });
  const pts = data.points ?? [];
  // all points, faint
  for (const p of pts) {
    const dot = svg("circle", {
      class: "pareto-point",
      attrs: { cx: f.sx(p.sparsity), cy: f.sy(p.recall), r: 4, fill: color[p.method] ?? "#9ca3af" },
    });
    const label = `${labelOf[p.method] ?? p.method} ${fmtParams(p.params)}`;
    dot.append(svg("title", { text: `${label}: recall ${pct(p.recall)}, sparsity ${pct(p.sparsity)}` }));
    f.layer.append(dot);
  }
  // frontiers
  for (const m of methods) {
    const idx = data.frontiers[m];
    if (!idx?.length) continue;
    const front = idx.map((k) => pts[k]).sort((a, b) => a.sparsity - b.sparsity);
    const d = front.map((p, k) => `${k ? "L" : "M"}${f.sx(p.sparsity)},${f.sy(p.recall)}`).join("");
    f.layer.append(svg("path", { class: "pareto-front", attrs: { d, stroke: color[m] } }));
    for (const p of front) {
      f.layer.append(
        svg("path", {
          class: "pareto-front-point",
          attrs: { d: markerPath(marker[m], 6), transform: `translate(${f.sx(p.sparsity)},${f.sy(p.recall)})`, fill: color[m], "data-method": m, "data-marker": marker[m] },
        }),
      );
    }
  }
  // the gold graph itself: recall 1 at the gold sparsity
  const gs = data.gold_sparsity;
  if (Number.isFinite(gs)) {
    f.layer.append(
      svg("line", {
        class: "gold-line",
        attrs: { x1: f.sx(gs), x2: f.sx(gs), y1: f.box.top, y2: f.box.bottom },
      }),
    );
    f.layer.append(
      svg("text", {
        class: "gold-label",
        text: "G itself",
        attrs: { x: f.sx(gs) - 14, y: f.sy(1) + 6, "text-anchor": "end" },
      }),
      svg("path", { class: "gold-star", attrs: { d: starPath(f.sx(gs), f.sy(1), 11) } }),
    );
  }
  key.before(el("div", { class: "matrix-wrap" }, [f.root]));

  // best recall among settings that keep at least half of the pairs out
  let best = null;
  for (const p of pts) if (p.sparsity >= 0.5 && (!best || p.recall > best.recall)) best = p;
  stats(ctx.panel, [
    { label: "gold sparsity", value: pct(gs), tone: "accent" },
    { label: "settings swept", value: String(pts.length), id: "pareto-count" },
    { label: "best recall at ≥ 50 % sparsity", value: best ? `${pct(best.recall)}` : "–" },
  ]);
  prose(
    ctx.panel,
    "Each dot is one method at one setting, on this sentence and head; lines join each method's best settings (its frontier). Up and right is better: ",
    { b: "skip most pairs, miss few edges" },
    ". No pattern can beat G itself at recall 1.",
  );
  if (best)
    prose(ctx.panel, "Here the best at ≥ 50 % sparsity is ", { b: labelOf[best.method] ?? best.method }, ` (${fmtParams(best.params)}).`);
}

/** "l=4, c=1" from a params object. */
function fmtParams(params) {
  return Object.entries(params ?? {})
    .map(([k, v]) => `${k}=${v}`)
    .join(", ");
}

/** SVG path of a five-pointed star centred at (x, y), outer radius r. */
function starPath(x, y, r) {
  let d = "";
  for (let k = 0; k < 10; k++) {
    const rad = k % 2 === 0 ? r : r * 0.45;
    const a = -Math.PI / 2 + (k * Math.PI) / 5;
    d += `${k ? "L" : "M"}${(x + rad * Math.cos(a)).toFixed(1)},${(y + rad * Math.sin(a)).toFixed(1)}`;
  }
  return `${d}Z`;
}

/** A method's short name: without its parenthesis ("Oracle top-k (true scores)" -> "Oracle top-k")
 * and its family's prefix. */
function shortName(label) {
  const bare = label.replace(/\s*\([^)]*\)\s*$/, "");
  return bare.includes(": ") ? bare.split(": ").pop() : bare; // "Sparse Transformer: fixed" -> "fixed"
}
