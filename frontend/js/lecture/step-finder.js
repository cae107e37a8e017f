/**
 * Step 8: Sparsefinder (Treviso et al. 2022). Queries and keys of one head, projected to r = 4
 * dimensions by the learned map, drawn in 2-D (the two principal axes of those r-dim points);
 * a distance threshold t and the k-means clusters (top-1) predict the graph. The predictions are
 * the explorer's (../methods.js: sfDistance, sfKmeans, kmeansMembership), so the slide's numbers
 * are the page's and Python's for the same setting.
 * @module lecture/step-finder
 */

import { el, pct, svg } from "../dom.js";
import { kmeansMembership, projectedDistances, sfDistance, sfKmeans } from "../methods.js";
import { computeMetrics } from "../metrics.js";
import { formula, legend, prose, slider, stats } from "./panel.js";
import { frame, PALETTE } from "./plot.js";

/** @typedef {import("./steps.js").StepContext} StepContext */

/** The idea in one paragraph (prose parts). */
const WHY = [
  "A small linear map per head puts each query near the keys it attends to, so the graph is predicted ",
  { b: "before" },
  " any score is computed.",
];

/**
 * The 2-D principal-axis coordinates of a set of r-dim points (power iteration with deflation).
 * @param {number[][]} pts
 * @returns {number[][]} (len, 2)
 */
export function pca2(pts) {
  const r = pts[0].length;
  if (r <= 2) return pts.map((p) => [p[0], p[1] ?? 0]);
  const mean = Array.from({ length: r }, (_, k) => pts.reduce((s, p) => s + p[k], 0) / pts.length);
  const X = pts.map((p) => p.map((v, k) => v - mean[k]));
  const C = Array.from({ length: r }, (_, a) =>
    Array.from({ length: r }, (_, b) => X.reduce((s, p) => s + p[a] * p[b], 0)),
  );
  const axes = [];
  for (let e = 0; e < 2; e++) {
    let v = Array.from({ length: r }, (_, k) => 1 / Math.sqrt(r) + 0.01 * k);
    let lambda = 0;
    for (let it = 0; it < 200; it++) {
      const w = C.map((row) => row.reduce((s, c, k) => s + c * v[k], 0));
      const norm = Math.hypot(...w) || 1;
      lambda = norm;
      v = w.map((x) => x / norm);
    }
    axes.push(v);
    for (let a = 0; a < r; a++) for (let b = 0; b < r; b++) C[a][b] -= lambda * v[a] * v[b];
  }
  return X.map((p) => axes.map((ax) => p.reduce((s, v, k) => s + v * ax[k], 0)));
}

/**
 * @param {StepContext} ctx
 */
export function renderFinder(ctx) {
  const proj = ctx.headData?.proj;
  if (!proj || !proj.queries?.length || !proj.keys?.length) {
    ctx.figure.append(
      el("p", {
        class: "notice",
        text:
          "No Sparsefinder projections for this model: the server has no artefact fitted for it " +
          "(`sparsescope fit` makes one). The formulas still hold; the picture needs the artefact.",
      }),
    );
    formula(
      ctx.panel,
      String.raw`\tilde q_i = W_h q_i + b_h,\quad \tilde k_j = W_h k_j + b_h \in \mathbb{R}^{4}`,
    );
    formula(ctx.panel, String.raw`(i, j) \in \hat G \iff \lVert \tilde q_i - \tilde k_j \rVert^2 < t`);
    formula(
      ctx.panel,
      String.raw`\text{clusters: } (i, j) \in \hat G \iff c(\tilde q_i) = c(\tilde k_j)`,
    );
    prose(ctx.panel, ...WHY);
    return;
  }
  const head = ctx.prepared;
  const n = head.n;
  const causal = head.causal;
  const Q = proj.queries;
  const K = proj.keys;
  const r = head.rank;
  // distances ‖q̃_i − k̃_j‖² of all valid pairs, to place the slider and its default
  const dist = projectedDistances(head);
  const d = [];
  const goldD = [];
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < (causal ? i + 1 : n); j++) {
      d.push(dist[i * n + j]);
      if (ctx.gold[i * n + j]) goldD.push(dist[i * n + j]);
    }
  }
  goldD.sort((a, b) => a - b);
  const tMax = Math.max(...d) * 1.01;
  const t0 = goldD.length ? goldD[Math.min(goldD.length - 1, Math.floor(goldD.length * 0.9))] * 1.001 : tMax / 4;

  // the middle one of the artefact's cluster counts; every token to its nearest centroid
  const Bs = [...head.centroids.keys()].sort((a, b) => a - b);
  const B = Bs.length ? Bs[Math.floor((Bs.length - 1) / 2)] : 0;
  const cents = B ? ctx.headData.centroids[String(B)] : [];
  const clusterOf = (member) => {
    const c = new Int32Array(n);
    member.forEach((row, k) => {
      for (let t = 0; t < n; t++) if (row[t]) c[t] = k;
    });
    return c;
  };
  const top1 = B ? kmeansMembership(head, B, 1) : null;
  const cq = top1 ? clusterOf(top1.queries) : new Int32Array(n);
  const ck = top1 ? clusterOf(top1.keys) : new Int32Array(n);

  formula(
    ctx.panel,
    String.raw`\tilde q_i = W_h q_i + b_h,\quad \tilde k_j = W_h k_j + b_h \in \mathbb{R}^{${r}}`,
  );
  formula(ctx.panel, String.raw`(i, j) \in \hat G \iff \lVert \tilde q_i - \tilde k_j \rVert^2 < t`);
  if (cents.length) {
    formula(
      ctx.panel,
      String.raw`\text{clusters: } (i, j) \in \hat G \iff c(\tilde q_i) = c(\tilde k_j)`,
      `B = ${B} k-means centroids, each token to its nearest`,
    );
  }
  const tInput = slider(ctx.panel, {
    id: "threshold",
    label: "distance threshold t",
    min: 0,
    max: Number(tMax.toPrecision(3)),
    step: Number((tMax / 200).toPrecision(2)),
    value: Number(t0.toPrecision(3)),
    format: (v) => v.toFixed(2),
    onInput: (v) => update(v),
  });
  stats(ctx.panel, [
    { label: "recall · distance", value: "", id: "sf-recall", tone: "accent" },
    { label: "sparsity · distance", value: "", id: "sf-sparsity" },
    ...(cents.length
      ? [
          { label: "recall · clusters", value: "", id: "sf-kmeans-recall", tone: "accent" },
          { label: "sparsity · clusters", value: "", id: "sf-kmeans-sparsity" },
        ]
      : []),
  ]);
  prose(ctx.panel, ...WHY, " Click a query (●) to follow it.");

  if (cents.length) {
    const km = computeMetrics(sfKmeans(head, B, 1), ctx.gold, n, causal);
    setText("sf-kmeans-recall", pct(km.recall));
    setText("sf-kmeans-sparsity", pct(km.sparsity));
  }

  // the picture
  const xy = pca2([...Q, ...K, ...cents]);
  const xs = xy.map((p) => p[0]);
  const ys = xy.map((p) => p[1]);
  const pad = (lo, hi) => [lo - 0.08 * (hi - lo || 1), hi + 0.08 * (hi - lo || 1)];
  const f = frame({
    width: ctx.size.width,
    height: ctx.size.height - 120,
    x: pad(Math.min(...xs), Math.max(...xs)),
    y: pad(Math.min(...ys), Math.max(...ys)),
    axes: false,
  });
  const edgesG = svg("g", { class: "sf-edges" });
  const pointsG = svg("g");
  const labelsG = svg("g", { class: "sf-labels" });
  f.layer.append(edgesG, pointsG, labelsG);
  const size = Math.max(7, Math.min(13, ctx.size.height / 60));
  const at = (k) => [f.sx(xy[k][0]), f.sy(xy[k][1])];
  const keyNodes = K.map((_, j) => {
    const [x, y] = at(n + j);
    const node = svg("rect", {
      class: "sf-key",
      attrs: {
        x: x - size,
        y: y - size,
        width: 2 * size,
        height: 2 * size,
        fill: PALETTE[ck[j] % PALETTE.length],
      },
    });
    node.append(svg("title", { text: `key k̃ “${ctx.labels[j]}”` }));
    pointsG.append(node);
    return node;
  });
  cents.forEach((_, c) => {
    const [x, y] = at(2 * n + c);
    const s = size * 1.2;
    pointsG.append(
      svg("path", {
        class: "sf-centroid",
        attrs: {
          d: `M${x - s},${y - s}L${x + s},${y + s}M${x - s},${y + s}L${x + s},${y - s}`,
          stroke: PALETTE[c % PALETTE.length],
        },
      }),
    );
  });
  let focus = ctx.focus;
  Q.forEach((_, i) => {
    const [x, y] = at(i);
    const node = svg("circle", {
      class: "sf-query",
      attrs: { cx: x, cy: y, r: size * 1.05, fill: PALETTE[cq[i] % PALETTE.length], "data-i": i },
    });
    node.append(svg("title", { text: `query q̃ “${ctx.labels[i]}”` }));
    node.addEventListener("click", () => {
      focus = i;
      update(Number(tInput.value));
    });
    pointsG.append(node);
  });
  const wrap = el("div", { class: "matrix-wrap" }, [f.root]);
  ctx.figure.append(
    wrap,
    el("p", {
      class: "fig-note",
      text: `layer ${ctx.layer}, head ${ctx.head}: the ${r}-D points seen along their two main axes; colours are k-means clusters, distances are measured in all ${r} dimensions.`,
    }),
  );
  legend(ctx.figure, [
    { color: "#6b7280", label: "query q̃ᵢ", shape: "circle" },
    { color: "#6b7280", label: "key k̃ⱼ" },
    { color: "#6b7280", label: "key within t", shape: "pred" },
    ...(cents.length ? [{ color: "#374151", label: "centroid", shape: "cross" }] : []),
    { color: "#0f766e", label: "edge of G, predicted", shape: "line" },
    { color: "#dc2626", label: "edge of G, missed", shape: "line" },
  ]);

  /** Redraw the focus query's edges and the numbers for threshold t. */
  function update(t) {
    const mask = sfDistance(head, t);
    const s = computeMetrics(mask, ctx.gold, n, causal);
    setText("sf-recall", pct(s.recall));
    setText("sf-sparsity", pct(s.sparsity));
    edgesG.replaceChildren();
    labelsG.replaceChildren();
    const [qx, qy] = at(focus);
    const shown = new Set([focus]);
    for (let j = 0; j < n; j++) {
      const valid = !causal || j <= focus;
      const pred = valid && mask[focus * n + j] === 1;
      keyNodes[j].classList.toggle("sf-pred", pred);
      if (valid && ctx.gold[focus * n + j]) {
        const [kx, ky] = at(n + j);
        edgesG.append(
          svg("line", {
            class: pred ? "sf-hit" : "sf-miss",
            attrs: { x1: qx, y1: qy, x2: kx, y2: ky },
          }),
        );
        shown.add(n + j);
      }
    }
    for (const k of shown) {
      const [x, y] = at(k);
      const isQ = k < n;
      labelsG.append(
        svg("text", {
          class: isQ ? "sf-label-q" : "sf-label-k",
          text: ctx.labels[isQ ? k : k - n],
          attrs: { x: x + size * 1.4, y: y - size * 0.9 },
        }),
      );
    }
    pointsG.querySelectorAll(".sf-query").forEach((c) => {
      c.classList.toggle("sf-focus", Number(c.getAttribute("data-i")) === focus);
    });
  }
  update(Number(tInput.value)); // t0 snapped to the slider's step
}

function setText(id, text) {
  const node = document.getElementById(id);
  if (node) node.textContent = text;
}
