/**
 * Step 7: the Sparse Transformer's fixed and strided patterns (Child et al. 2019) laid over this
 * head's attention graph, with a stride slider and the two-hop argument for l ≈ √n.
 * @module lecture/step-patterns
 */

import { el, pct } from "../dom.js";
import { drawMatrix, FUTURE_FILL, star, withTooltip } from "./matrix.js";
import { formula, legend, prose, slider, stats } from "./panel.js";
import { computeMetrics } from "../metrics.js";
import { fixed, strided, stridedVia } from "./patterns.js";
import { tex } from "./tex.js";

/** @typedef {import("./steps.js").StepContext} StepContext */

/** Cell fills by part code: 0 none, 1 A1, 2 A2, 3 both. */
const PART_FILL = ["#f8f9fb", "#cfe0fa", "#fde0bd", "#d9cdf7"];
const HIT = "#0f766e";
const MISS = "#dc2626";

/** Summary positions per block for a stride l (the paper's c ≪ l; at least 1). */
export const summaryWidth = (l) => Math.max(1, Math.round(l / 4));

/**
 * @param {StepContext} ctx
 */
export function renderPatterns(ctx) {
  const n = ctx.labels.length;
  const l0 = Math.max(2, Math.round(Math.sqrt(n)));
  const causal = ctx.state.causal;
  slider(ctx.panel, {
    id: "stride",
    label: "stride l",
    min: 2,
    max: Math.max(3, n - 1),
    step: 1,
    value: l0,
    format: (v) => `${v}  ·  √n ≈ ${Math.sqrt(n).toFixed(1)}`,
    onInput: (v) => draw(ctx, v),
  });
  formula(
    ctx.panel,
    String.raw`\text{cost} \propto n\Big(l + \frac{n}{l}\Big) \;\ge\; 2n\sqrt{n}\quad\text{at } l = \sqrt{n}`,
  );
  stats(ctx.panel, [
    { label: "strided · recall", value: "", id: "recall-strided", tone: "accent" },
    { label: "strided · sparsity", value: "", id: "sparsity-strided" },
  ]);
  stats(ctx.panel, [
    { label: "fixed · recall", value: "", id: "recall-fixed", tone: "accent" },
    { label: "fixed · sparsity", value: "", id: "sparsity-fixed" },
  ]);
  const hop = el("p", { class: "prose", attrs: { id: "two-hop" } });
  ctx.panel.append(hop);
  prose(
    ctx.panel,
    "Fixed patterns do not look at the text: ",
    { b: "red stars" },
    causal ? " are edges of G that a pattern misses." : " are edges of G that a pattern misses (bidirectional forms: a project choice).",
  );
  draw(ctx, l0);
}

/** Redraw both grids and the numbers for stride l. */
function draw(ctx, l) {
  const n = ctx.labels.length;
  const causal = ctx.state.causal;
  const c = summaryWidth(l);
  const pats = [
    {
      name: "strided",
      grid: strided(n, l, causal),
      a1: causal
        ? String.raw`\mathrm{A1}(i) = \{ j : \max(0, i-l) \le j \le i \}`
        : String.raw`\mathrm{A1}(i) = \{ j : |i-j| \le l \}`,
      a2: String.raw`\mathrm{A2}(i) = \{ j : (i-j) \bmod l = 0 \}`,
    },
    {
      name: "fixed",
      grid: fixed(n, l, c, causal),
      a1: String.raw`\mathrm{A1}(i) = \{ j : \lfloor j/l \rfloor = \lfloor i/l \rfloor \}`,
      a2: String.raw`\mathrm{A2}(i) = \{ j : j \bmod l \ge l - c \},\ c = ${c}`,
    },
  ];
  // a two-hop route from the followed query to the farthest word it cannot reach directly
  const i = ctx.focus;
  let via = null;
  let target = -1;
  if (causal) {
    for (let j = 0; j < i && via === null; j++) {
      if (ctx.special[j]) continue;
      via = stridedVia(i, j, l);
      if (via !== null) target = j;
    }
  }
  ctx.figure.replaceChildren();
  const row = el("div", { class: "figure-row" });
  const w = (ctx.size.width - 24) / 2;
  for (const p of pats) {
    const { canvas, geom } = drawMatrix({
      rows: ctx.labels,
      cols: ctx.labels,
      rowDim: ctx.special,
      colDim: ctx.special,
      width: w,
      height: ctx.size.height - 170,
      maxCell: 48,
      showText: false,
      cell: (a, b) => ({ fill: causal && b > a ? FUTURE_FILL : PART_FILL[p.grid.at(a, b)] }),
      overlay: (g2d, g) => {
        for (let a = 0; a < n; a++) {
          for (let b = 0; b < n; b++) {
            if (ctx.P[a * n + b] > 0) {
              const [x, y] = g.center(a, b);
              star(g2d, x, y, g.cell * 0.32, p.grid.has(a, b) ? HIT : MISS, "#ffffff");
            }
          }
        }
        if (p.name === "strided" && via !== null) hopPath(g2d, g, i, via, target);
      },
    });
    const wrap = withTooltip(canvas, geom, (a, b) => {
      const code = p.grid.at(a, b);
      const part = ["not in the pattern", "A1", "A2", "A1 and A2"][code];
      const edge = ctx.P[a * n + b] > 0 ? " · edge of G" : "";
      return `${ctx.labels[a]} → ${ctx.labels[b]}: ${part}${edge}`;
    });
    row.append(
      el("figure", { class: "panel-fig" }, [
        el("figcaption", { text: `${p.name}, l = ${l}` }),
        wrap,
        tex(p.a1, { className: "formula-fig" }),
        tex(p.a2, { className: "formula-fig" }),
      ]),
    );
    const s = computeMetrics(p.grid.mask, ctx.gold, n, causal);
    setText(`recall-${p.name}`, pct(s.recall));
    setText(`sparsity-${p.name}`, pct(s.sparsity));
  }
  ctx.figure.append(row);
  legend(ctx.figure, [
    { color: PART_FILL[1], label: "A1" },
    { color: PART_FILL[2], label: "A2" },
    { color: PART_FILL[3], label: "both" },
    { color: HIT, label: "edge covered", shape: "star" },
    { color: MISS, label: "edge missed", shape: "star" },
  ]);
  const hop = document.getElementById("two-hop");
  if (hop) {
    hop.replaceChildren();
    if (via !== null) {
      hop.append(
        "Two hops reach everything: ",
        el("strong", { text: `“${ctx.labels[i]}”` }),
        ` reads “${ctx.labels[via]}” (A1, nearby), which read `,
        el("strong", { text: `“${ctx.labels[target]}”` }),
        ` (A2, every ${l}th) one layer earlier. Each row keeps about l + n/l keys.`,
      );
    } else {
      hop.append(
        "With l ≈ √n, A1 covers the last l positions and A2 every l-th one: any key is reached in at most two hops, each row keeping about l + n/l keys.",
      );
    }
  }
}

/** Circle the cells (i, k) and (k, j) of a two-hop route and join them. */
function hopPath(c, g, i, k, j) {
  const [x1, y1] = g.center(i, k);
  const [x2, y2] = g.center(k, j);
  c.save();
  c.strokeStyle = "#f59e0b";
  c.lineWidth = 3;
  c.setLineDash([6, 5]);
  c.beginPath();
  c.moveTo(x1, y1);
  c.lineTo(x1, y2);
  c.lineTo(x2, y2);
  c.stroke();
  c.setLineDash([]);
  for (const [x, y] of [
    [x1, y1],
    [x2, y2],
  ]) {
    c.beginPath();
    c.arc(x, y, g.cell * 0.48, 0, 2 * Math.PI);
    c.stroke();
  }
  c.restore();
}

function setText(id, text) {
  const node = document.getElementById(id);
  if (node) node.textContent = text;
}
