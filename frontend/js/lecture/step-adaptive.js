/**
 * Step 12: adaptive sparsity. A model trained with a learned α per head
 * (`sparsescope adapt --alpha learned`: α_h = 1 + sigmoid(a_h), definitions §7) chooses each head's
 * sparsity itself. The picture is the head grid coloured by each head's own α, with that head's
 * gold sparsity at its own α; the panel gives the slide's head's support (keys per query) at
 * α = 1.25, 1.5 and its own α. Every number is computed: three analyses of the slide's sentence
 * (POST /api/analyze at 1.25, 1.5 and "own") and the head's edges at each.
 *
 * Which model: the lecture's own when it has an own α per head (`own_alpha` of the analysis
 * body), else a served model trained with entmax (`own_alpha` of GET /api/models, a learned-α one
 * first: `sparsescope/all-MiniLM-L6-v2-entmax-learned`). When no served model has one, the slide
 * says so and shows the same head at α = 1.25, 1.5 and 2 on the lecture's model instead.
 * @module lecture/step-adaptive
 */

import * as api from "../api.js";
import { el, readIsland } from "../dom.js";
import { sparsityColour, textOn } from "../colours.js";
import { formula, prose, stats } from "./panel.js";

/** @typedef {import("./steps.js").StepContext} StepContext */

/** The fixed α the slide compares a head's own α with. */
export const FIXED = [1.25, 1.5];

/** Analyses and head bodies already fetched by this slide (stepping back and forth refetches nothing). */
const cache = new Map();

function once(key, make) {
  if (!cache.has(key)) {
    const p = make();
    cache.set(key, p);
    p.catch(() => cache.delete(key));
  }
  return cache.get(key);
}

/**
 * The model whose own α the slide shows: the lecture's own when it has one per head, else a
 * served model trained with entmax (a learned-α one first), else null.
 * @param {StepContext} ctx
 * @returns {string|null}
 */
function ownModel(ctx) {
  const mine = ctx.analysis.own_alpha;
  // a model trained at one α for every head (the shipped entmax-1.5 one) has no α per head to show
  const uniform = Array.isArray(mine) && new Set(mine.flat().map((a) => a.toFixed(4))).size === 1;
  if (Array.isArray(mine) && !uniform) return ctx.analysis.model;
  const models = (readIsland("lecture-config")?.models ?? []).filter(
    (m) => m.own_alpha && !(uniform && m.id === ctx.analysis.model),
  );
  const learned = models.find((m) => /learned/i.test(m.id));
  return (learned ?? models[0])?.id ?? null;
}

/** The analysis of the slide's sentence on `model` at `alpha` (a number or "own"). */
function analysis(ctx, model, alpha) {
  const req = { text: ctx.state.text, alpha, causal: ctx.state.causal, truncate: true, model };
  return once(`a\u0000${model}\u0000${alpha}\u0000${req.causal}\u0000${req.text}`, () => api.analyze(req));
}

/** Mean keys per query of one head of an analysis (|G| / n), and the focus row's count. */
async function support(a, layer, head, focus) {
  const hd = await once(`h/${a.id}/${layer}/${head}`, () => api.getHead(a.id, layer, head));
  let row = 0;
  for (const [i] of hd.edges) if (i === focus) row += 1;
  return { mean: hd.edges.length / a.n, row };
}

/**
 * @param {StepContext} ctx
 */
export async function renderAdaptive(ctx) {
  formula(
    ctx.panel,
    String.raw`\alpha_{\ell,h} = 1 + \operatorname{sigmoid}(a_{\ell,h})`,
    "a is trained with the weights: each head learns its own α (Correia et al. 2019)",
  );
  const model = ownModel(ctx) ?? ctx.analysis.model;
  const hasOwn = ownModel(ctx) !== null;
  const alphas = [...FIXED, hasOwn ? "own" : 2];
  const runs = await Promise.all(alphas.map((a) => analysis(ctx, model, a)));
  const own = runs[2];
  const layer = ctx.layer < own.layers ? ctx.layer : 0;
  const head = ctx.head < own.heads ? ctx.head : 0;
  const focus = Math.min(ctx.focus, own.n - 1);
  const sizes = await Promise.all(runs.map((a) => support(a, layer, head, focus)));
  if (!ctx.figure.isConnected) return;

  ctx.figure.append(grid(ctx, own, hasOwn, layer, head));
  const ownAlpha = hasOwn ? own.own_alpha[layer][head] : 2;
  const name = (k) => (k < 2 ? `α = ${alphas[k]}` : hasOwn ? `own α = ${ownAlpha.toFixed(2)}` : "α = 2");
  const box = el("div", { attrs: { id: "adaptive-support", "data-model": model } });
  ctx.panel.append(box);
  prose(box, `L${layer} · H${head}: keys per query (mean over the sentence)`);
  stats(
    box,
    sizes.map((s, k) => ({
      label: name(k),
      value: s.mean.toFixed(1),
      id: `adaptive-support-${k}`,
      tone: k === 2 ? "accent" : undefined,
      title: `“${ctx.labels[focus] ?? ""}” keeps ${s.row} keys`,
    })),
  );
  if (hasOwn) {
    prose(
      ctx.panel,
      "Correia et al. (2019) found that learned α spread out: ",
      { b: "some heads stay near softmax, others move towards sparsemax" },
      ", so each head picks its own sparsity instead of one α for all. This model's range from ",
      { b: `${Math.min(...own.own_alpha.flat()).toFixed(2)} to ${Math.max(...own.own_alpha.flat()).toFixed(2)}` },
      ".",
    );
  } else {
    ctx.figure.prepend(
      el("p", {
        class: "notice",
        text: "This server's model has one α for every head, so its heads cannot differ here. " +
          "The model that learned an α per head ships with sparsescope " +
          "(sparsescope/all-MiniLM-L6-v2-entmax-learned): start the server with it as a --model to " +
          "show its α on this slide. Below: this model at α = 1.25, 1.5 and 2.",
        attrs: { id: "adaptive-none" },
      }),
    );
    prose(ctx.panel, "A larger α zeroes more keys: ", { b: "α sets the support size" }, ".");
  }
}

/**
 * The (L, H) head grid: each cell coloured by the head's own α (or, without one, its gold
 * sparsity at 1.5), with that α and the head's gold sparsity written in it.
 */
function grid(ctx, own, hasOwn, layer, head) {
  const { layers, heads } = own;
  const values = hasOwn ? own.own_alpha.flat() : [];
  const lo = hasOwn ? Math.min(...values) : 0;
  const hi = hasOwn ? Math.max(...values) : 1;
  const sparse = new Map(own.summary.map((r) => [`${r.layer}:${r.head}`, r.gold_sparsity]));
  const cell = Math.max(40, Math.min(96, (ctx.size.width - 80) / heads, (ctx.size.height - 110) / layers));
  const table = el("div", {
    class: "adaptive-grid",
    attrs: {
      id: "adaptive-grid",
      role: "table",
      "aria-label": hasOwn ? "each head's own α and its gold sparsity" : "each head's gold sparsity at α = 2",
    },
  });
  table.style.gridTemplateColumns = `auto repeat(${heads}, ${cell}px)`;
  const header = el("div", { attrs: { role: "row" }, class: "adaptive-row" }, [
    el("span", { attrs: { role: "columnheader" }, class: "adaptive-corner", text: "" }),
    ...Array.from({ length: heads }, (_, h) =>
      el("span", { attrs: { role: "columnheader" }, class: "adaptive-th", text: `H${h}` }),
    ),
  ]);
  table.append(header);
  for (let l = 0; l < layers; l++) {
    const row = el("div", { attrs: { role: "row" }, class: "adaptive-row" }, [
      el("span", { attrs: { role: "rowheader" }, class: "adaptive-th", text: `L${l}` }),
    ]);
    for (let h = 0; h < heads; h++) {
      const a = hasOwn ? own.own_alpha[l][h] : null;
      const s = sparse.get(`${l}:${h}`) ?? 0;
      const bg = hasOwn ? sparsityColour(a, lo, hi) : sparsityColour(s, 0, 1);
      const c = el(
        "span",
        {
          class: `adaptive-cell${l === layer && h === head ? " adaptive-open" : ""}`,
          attrs: {
            role: "cell",
            "data-alpha": a ?? "",
            "data-sparsity": s,
            title: `L${l} H${h}: ${hasOwn ? `own α ${a.toFixed(3)}, ` : ""}${(100 * s).toFixed(1)} % of the pairs zero`,
          },
        },
        [
          el("span", { class: "adaptive-alpha", text: hasOwn ? a.toFixed(2) : "" }),
          el("span", { class: "adaptive-sparse", text: `${Math.round(100 * s)} %` }),
        ],
      );
      c.style.background = bg;
      c.style.color = textOn(bg);
      c.style.height = `${Math.round(cell * 0.8)}px`;
      row.append(c);
    }
    table.append(row);
  }
  const caption = el("p", {
    class: "adaptive-caption",
    text: hasOwn
      ? `top number and colour: the head's own α (light ${lo.toFixed(2)}, dark ${hi.toFixed(2)}) · bottom: its gold sparsity at that α`
      : "colour: each head's gold sparsity at α = 2",
  });
  return el("div", { class: "adaptive-wrap" }, [table, caption]);
}
