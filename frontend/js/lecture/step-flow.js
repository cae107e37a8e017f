/**
 * Step 11: information flow through the layers. Entmax's exact zeros make "can input token j
 * influence token t after layer l?" an exact yes or no: a path through every layer's graph (the
 * union of the heads, plus the residual self-edge). The picture stacks the levels (inputs at the
 * bottom, the target at the top) and marks, on each, the positions with a path to the slide's
 * focus token; the inputs are sized by their attention-rollout mass (Abnar & Zuidema 2020). Data:
 * GET /api/analyses/{id}/flow (sparse_core/flow.py), the explorer's information-flow panel's.
 * @module lecture/step-flow
 */

import * as api from "../api.js";
import { el, svg } from "../dom.js";
import { levelName } from "../flow.js";
import { formula, prose, slider, stats } from "./panel.js";
import { frame } from "./plot.js";

/** @typedef {import("./steps.js").StepContext} StepContext */

/**
 * @param {StepContext} ctx
 */
export async function renderFlow(ctx) {
  formula(ctx.panel, String.raw`B_\ell = I \;\vee\; \textstyle\bigvee_h \,G_{\ell,h}`, "one layer's graph: any head, or the residual");
  formula(
    ctx.panel,
    String.raw`R = \hat A_\ell \cdots \hat A_0,\quad \hat A_\ell = \tfrac12\big(\tfrac1H\textstyle\sum_h P_{\ell,h} + I\big)`,
    "attention rollout: how much of t comes from each input",
  );
  const layers = ctx.analysis.layers;
  const holder = el("div", { class: "matrix-wrap", attrs: { id: "flow-figure" } });
  ctx.figure.append(holder);
  const statBox = el("div");
  ctx.panel.append(statBox);
  let seq = 0;
  const draw = async (layer) => {
    const mine = ++seq;
    let body;
    try {
      body = await api.getFlow(ctx.analysis.id, ctx.focus, layer);
    } catch (err) {
      if (mine !== seq || !ctx.figure.isConnected) return;
      holder.replaceChildren(
        el("p", {
          class: "notice notice-error",
          text: `The information flow is not available: ${err.message}`,
          attrs: { id: "flow-error", role: "alert" },
        }),
      );
      return;
    }
    if (mine !== seq || !ctx.figure.isConnected) return;
    holder.replaceChildren(picture(ctx, body));
    statBox.replaceChildren();
    stats(statBox, [
      { label: "inputs reaching it", value: `${body.reached} / ${body.n}`, id: "flow-reached", tone: "accent" },
      { label: "its own share", value: `${(100 * body.mass[body.token]).toFixed(1)} %` },
      { label: "with softmax", value: `${body.n} / ${body.n}` },
    ]);
  };
  slider(ctx.panel, {
    id: "flow-layer",
    label: "target after layer",
    min: 0,
    max: layers - 1,
    step: 1,
    value: layers - 1,
    format: (v) => `after layer ${v}`,
    onChange: (v) => draw(v),
  });
  prose(
    ctx.panel,
    "A token after layer ℓ has read every position its heads attend to, and those positions read theirs one layer below. With softmax every weight is positive, so ",
    { b: "everything reaches everything" },
    " after one layer. Entmax's zeros are exact: a token that is not marked here has ",
    { b: "no path at all" },
    " to the focus token, and the rollout gives it exactly zero.",
  );
  await draw(layers - 1);
}

/** The levels as rows of dots, inputs at the bottom, sized by rollout mass on the input row. */
function picture(ctx, body) {
  const n = body.n;
  const levels = body.levels.length; // layer + 2
  const f = frame({
    width: ctx.size.width,
    height: Math.min(ctx.size.height, 140 + 60 * levels),
    x: [-0.6, n - 0.4],
    y: [-1.4, levels - 0.5],
    yTicks: Array.from({ length: levels }, (_, k) => k),
    tickFormat: (k) => levelName(k, body.layer),
  });
  const step = (f.sx(1) - f.sx(0)) || 1;
  const r = Math.max(2, Math.min(11, step * 0.36));
  const max = Math.max(...body.mass);
  body.levels.forEach((idx, k) => {
    const on = new Set(idx);
    for (let j = 0; j < n; j++) {
      const reached = on.has(j);
      const rad = k === 0 && reached ? Math.max(2, r * Math.sqrt(body.mass[j] / max)) : reached ? r * 0.7 : r * 0.35;
      const dot = svg("circle", {
        class: reached ? "flow-dot flow-dot-on" : "flow-dot",
        attrs: { cx: f.sx(j), cy: f.sy(k), r: rad },
      });
      if (k === 0) {
        const label = ctx.labels[j];
        dot.append(svg("title", { text: reached ? `${label}: ${(100 * body.mass[j]).toFixed(2)} %` : `${label}: no path` }));
      }
      f.layer.append(dot);
    }
  });
  const target = svg("circle", {
    class: "flow-target",
    attrs: { cx: f.sx(body.token), cy: f.sy(levels - 1), r: r * 1.2 },
  });
  f.layer.append(target);
  // projector-legible labels (18 px); when they would crowd, every k-th one (and the target)
  const font = 18;
  const every = n > 14 ? Math.max(1, Math.ceil(font / (0.64 * step))) : 1;
  for (let j = 0; j < n; j++) {
    if (j % every !== 0 && j !== body.token) continue;
    const x = f.sx(j);
    const y = f.sy(-0.7);
    f.layer.append(
      svg("text", {
        class: j === body.token ? "flow-label flow-label-target" : "flow-label",
        text: ctx.labels[j],
        attrs: {
          x,
          y,
          "text-anchor": n > 14 ? "end" : "middle",
          transform: n > 14 ? `rotate(-40 ${x} ${y})` : null,
          "font-size": font,
        },
      }),
    );
  }
  return f.root;
}
