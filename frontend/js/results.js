/**
 * The corpus-results panel: the output of `sparsescope pareto` beside the current
 * text. Its source is the server's `--results DIR` (GET /api/results: the mean over heads, and with
 * pareto-heads.npz GET /api/results/heads/{layer}/{head}), or a pareto.json picked in the page
 * (read in the browser, checked by {@link checkPareto}; the mean over heads only). Nothing is sent
 * anywhere: a picked file stays in the page.
 *
 * The plot: each method's corpus frontier (solid) and this text's frontier (dashed) over
 * (sparsity, recall), the corpus and text gold sparsity, and the current setting as a star; the
 * table: each method's best recall at sparsity ≥ 0.8 and ≥ 0.9, corpus beside this text. A
 * foreign or broken file gets a message saying what is wrong, never a half-drawn plot.
 *
 * Served results of `sparsescope pareto --lengths` (pareto-lengths.json) add a second chart:
 * each method's best recall at a fixed sparsity (buttons: the levels of the file) against the
 * text length, one line per method, the gold sparsity at each length under its tick. It is of
 * the corpus alone, so it is drawn with or without an analysed text.
 */

import { ApiError, getPareto, getResults, getResultsHead } from "./api.js";
import { el, svg } from "./dom.js";
import { PALETTE } from "./pareto.js";
import { methodStyles } from "./colours.js";
import { roveButtons } from "./roving.js";
import * as store from "./state.js";

/** Largest pareto.json read in the page (the server's cap too: app/engine/results.py). */
export const MAX_FILE_BYTES = 32 << 20;
/** The sparsity levels of the table. */
export const LEVELS = [0.8, 0.9];

const isShare = (v) => typeof v === "number" && Number.isFinite(v) && v >= 0 && v <= 1;

/**
 * Check a parsed pareto.json the way the server does (app/engine/results.py `check_pareto`).
 * @param {any} body
 * @param {string[]} methods the method names this page knows
 * @returns {string|null} what is wrong, or null
 */
export function checkPareto(body, methods) {
  if (!body || typeof body !== "object" || Array.isArray(body))
    return "the file must hold a JSON object (what `sparsescope pareto` writes)";
  const missing = ["model", "alpha", "texts", "gold_sparsity", "points", "frontiers"].filter(
    (k) => !(k in body),
  );
  if (missing.length) return `not a \`sparsescope pareto\` result: it lacks ${missing.join(", ")}`;
  if (typeof body.model !== "string") return "model must be a string";
  if (!Number.isInteger(body.texts) || body.texts < 1) return "texts must be a whole number ≥ 1";
  if (typeof body.alpha !== "number" || !(body.alpha >= 1 && body.alpha <= 2))
    return "alpha must be a number in [1, 2]";
  if (!isShare(body.gold_sparsity)) return "gold_sparsity must be a number in [0, 1]";
  const pts = body.points;
  if (!Array.isArray(pts) || !pts.length) return "points must be a non-empty list";
  for (let k = 0; k < pts.length; k++) {
    const p = pts[k];
    if (!p || typeof p !== "object" || !p.params || typeof p.params !== "object")
      return `point ${k} must be an object with params`;
    if (!methods.includes(p.method))
      return `point ${k} has method ${JSON.stringify(String(p.method).slice(0, 40))}; known methods: ${methods.join(", ")}`;
    for (const m of ["sparsity", "recall"])
      if (!isShare(p[m])) return `point ${k}'s ${m} must be a number in [0, 1]`;
  }
  const task = checkTask(body);
  if (task) return task;
  const fronts = body.frontiers;
  if (!fronts || typeof fronts !== "object" || Array.isArray(fronts))
    return "frontiers must be an object of method -> point indices";
  for (const [name, idx] of Object.entries(fronts)) {
    const ok =
      Array.isArray(idx) &&
      idx.every((i) => Number.isInteger(i) && i >= 0 && i < pts.length && pts[i].method === name);
    if (!ok) return `frontier ${JSON.stringify(name.slice(0, 40))} must list indices of its own method's points`;
  }
  return null;
}

/**
 * Check the task axis of a pareto.json (`sparsescope pareto --task`, definitions §9), when it has one:
 * `task.loss_full` a number ≥ 0 and every point's `task_loss` null or a number ≥ 0.
 * @returns {string|null} what is wrong, or null
 */
export function checkTask(body) {
  if (body.task === undefined || body.task === null) return null;
  if (typeof body.task === "object" && body.task.objective === "sts") { // pareto --task sts
    const r = (v) => typeof v === "number" && Number.isFinite(v) && v >= -1 && v <= 1;
    if (!r(body.task.spearman_full)) return "an STS task's spearman_full must be a number in [-1, 1]";
    for (let k = 0; k < body.points.length; k++) {
      const v = body.points[k].task_spearman;
      if (v !== undefined && v !== null && !r(v)) return `point ${k}'s task_spearman must be a number in [-1, 1] or null`;
    }
    return null;
  }
  const ok = (v) => typeof v === "number" && Number.isFinite(v) && v >= 0;
  if (typeof body.task !== "object" || !ok(body.task.loss_full))
    return "task must be an object whose loss_full is a number ≥ 0 (what `sparsescope pareto --task` writes)";
  for (let k = 0; k < body.points.length; k++) {
    const v = body.points[k].task_loss;
    if (v !== undefined && v !== null && !ok(v)) return `point ${k}'s task_loss must be a number ≥ 0 or null`;
  }
  return null;
}

/** Whether a checked pareto.json carries task losses (a task block and one point with a loss). */
export function hasTask(body) {
  return Boolean(body?.task) && body.points.some((p) => typeof p.task_loss === "number");
}

/**
 * Each method's frontier points that have a task loss, sorted by sparsity (the task axis:
 * `sparsescope pareto --task` scores the frontier points only, definitions §9).
 * @returns {Map<string, {sparsity: number, recall: number, task_loss: number, params: object}[]>}
 */
export function taskLines(body) {
  const out = new Map();
  for (const [name, idx] of Object.entries(body.frontiers ?? {})) {
    const pts = idx
      .map((i) => body.points[i])
      .filter((p) => typeof p.task_loss === "number")
      .sort((a, b) => a.sparsity - b.sparsity);
    if (pts.length) out.set(name, pts);
  }
  return out;
}

/**
 * Each method's frontier as points sorted by sparsity, from a Pareto-shaped body.
 * @returns {Map<string, {sparsity: number, recall: number}[]>}
 */
export function frontierLines(body) {
  const out = new Map();
  for (const [name, idx] of Object.entries(body.frontiers ?? {})) {
    const pts = idx.map((i) => body.points[i]).sort((a, b) => a.sparsity - b.sparsity);
    if (pts.length) out.set(name, pts);
  }
  return out;
}

/** A method's best recall among its frontier points with sparsity ≥ level (null: none). */
export function bestAt(line, level) {
  let best = null;
  for (const p of line ?? []) if (p.sparsity >= level && (best === null || p.recall > best)) best = p.recall;
  return best;
}

/**
 * Mount the panel.
 * @param {HTMLElement} root
 * @param {HTMLInputElement} file the file input
 * @param {HTMLElement} scopeGroup the "this head / mean" toggle group
 */
export function initResults(root, file, scopeGroup, served = true) {
  const source = el("p", { class: "results-source", attrs: { id: "results-source" } });
  const message = el("p", { class: "results-message", attrs: { id: "results-message", role: "alert" } });
  const warn = el("p", { class: "results-warn", attrs: { id: "results-warn" } });
  const plot = el("div", { class: "results-plot", attrs: { id: "results-plot" } });
  const table = el("div", { class: "results-table", attrs: { id: "results-table" } });
  const lengthsBox = el("div", { class: "results-lengths", attrs: { id: "results-lengths" } });
  lengthsBox.hidden = true;
  root.append(source, message, warn, el("div", { class: "results-body" }, [plot, table]), lengthsBox);
  /** The sparsity level of the lengths chart (one of the file's levels). */
  let lengthLevel = null;
  /** @type {{name: string, body: any, heads: {layers: number, heads: number}|null, served: boolean}|null} */
  let src = null;
  let scope = "head";
  let seq = 0;
  /** Fetched bodies by scope (a slider move redraws the star without refetching). */
  const memo = new Map();
  const once = (key, fn) => {
    if (!memo.has(key)) memo.set(key, fn().catch((err) => (memo.delete(key), Promise.reject(err))));
    return memo.get(key);
  };

  const say = (text) => {
    message.textContent = text;
    message.hidden = !text;
  };
  // the y-axis toggle, shown when the results carry task losses (the view's `resultsY`)
  const yGroup = el("div", {
    class: "toggles results-y",
    attrs: { id: "results-y", role: "group", "aria-label": "corpus results y-axis" },
  }, [
    el("button", { text: "recall", attrs: { type: "button", "data-y": "recall", "aria-pressed": "true" } }),
    el("button", { text: "task loss", attrs: { type: "button", "data-y": "task", "aria-pressed": "false" } }),
  ]);
  yGroup.hidden = true;
  scopeGroup.after(yGroup);
  roveButtons(yGroup); // one tab stop each
  roveButtons(scopeGroup);
  for (const b of yGroup.querySelectorAll("button"))
    b.addEventListener("click", () => store.set({ resultsY: b.dataset.y }));
  const buttons = [...scopeGroup.querySelectorAll("button")];
  for (const b of buttons)
    b.addEventListener("click", () => {
      scope = b.dataset.scope;
      draw();
    });

  const draw = async () => {
    const s = store.get();
    const a = s.analysis;
    for (const b of buttons) b.setAttribute("aria-pressed", String(b.dataset.scope === scope));
    if (!src) {
      plot.replaceChildren();
      table.replaceChildren();
      warn.textContent = "";
      return;
    }
    const body = src.body;
    const task = hasTask(body);
    const y = task && s.resultsY === "task" ? "task" : "recall";
    yGroup.hidden = !task;
    for (const b of yGroup.querySelectorAll("button")) b.setAttribute("aria-pressed", String(b.dataset.y === y));
    root.dataset.y = y;
    source.textContent =
      `${src.served ? "Served" : "Opened"}: ${src.name} · ${body.model} · α = ${body.alpha}` +
      ` · ${body.texts} texts · corpus gold sparsity ${body.gold_sparsity.toFixed(3)}` +
      (src.heads ? ` · per head (${src.heads.layers} × ${src.heads.heads})` : " · mean over heads only");
    if (!a) return;
    const perHead = scope === "head" && src.heads && src.heads.layers === a.layers && src.heads.heads === a.heads;
    const mismatch = [];
    if (body.model !== a.model) mismatch.push(`model ${body.model} (this text: ${a.model})`);
    if (Math.abs(body.alpha - a.alpha) > 1e-9) mismatch.push(`α ${body.alpha} (this text: ${a.alpha})`);
    warn.textContent =
      (mismatch.length ? `These corpus results are for ${mismatch.join(", ")}: compare with care. ` : "") +
      (scope === "head" && !perHead
        ? src.heads
          ? "Their heads do not match this model's: showing the mean over heads."
          : "No per-head figures in these results: showing the mean over heads."
        : "");
    if (y === "task") {
      // the task loss restricts every head at once: one figure for the model, the corpus mean
      ++seq;
      say("");
      warn.textContent = mismatch.length ? `These corpus results are for ${mismatch.join(", ")}: compare with care.` : "";
      renderTask(a, body);
      return;
    }
    const mine = ++seq;
    try {
      const [corpus, text] = await Promise.all([
        perHead ? once(`c/${s.layer}/${s.head}`, () => getResultsHead(s.layer, s.head)) : Promise.resolve(body),
        perHead
          ? once(`t/${a.id}/${s.layer}/${s.head}`, () => getPareto(a.id, s.layer, s.head))
          : once(`t/${a.id}`, () => getPareto(a.id)),
      ]);
      if (mine !== seq) return;
      const current = perHead ? s.result?.metrics : s.meanMetrics;
      render(a, corpus, text, current, perHead ? `layer ${s.layer}, head ${s.head}` : "mean over heads");
    } catch (err) {
      if (mine !== seq) return;
      say(`The corpus comparison is not available: ${err.message}`);
    }
  };

  const render = (a, corpus, text, current, what) => {
    say("");
    root.dataset.analysis = a.id; // which analysis the figures are of (tests wait on it)
    const names = a.methods.map((m) => m.name);
    const label = Object.fromEntries(a.methods.map((m) => [m.name, m.label]));
    const styles = methodStyles(a.methods);
    const colour = (m) => styles.get(m)?.colour ?? PALETTE[Math.max(0, names.indexOf(m)) % PALETTE.length];
    const cl = frontierLines(corpus);
    const tl = frontierLines(text);
    plot.replaceChildren(chart(cl, tl, corpus.gold_sparsity, text.gold_sparsity, current, colour, what));
    const methods = names.filter((m) => cl.has(m) || tl.has(m));
    const f = (v) => (v === null ? "–" : v.toFixed(3));
    table.replaceChildren(
      el("table", { attrs: { id: "results-rows" } }, [
        el("caption", { text: `best recall on each frontier (${what})` }),
        el("thead", {}, [
          el("tr", {}, [
            el("th", { text: "method", attrs: { scope: "col" } }),
            ...LEVELS.flatMap((lv) => [
              el("th", { text: `corpus ≥ ${lv}`, attrs: { scope: "col" } }),
              el("th", { text: `this text ≥ ${lv}`, attrs: { scope: "col" } }),
            ]),
          ]),
        ]),
        el(
          "tbody",
          {},
          methods.map((m) =>
            el("tr", { attrs: { "data-method": m } }, [
              el("th", { attrs: { scope: "row" } }, [
                el("span", { class: "results-swatch", attrs: { style: `background:${colour(m)}` } }),
                label[m] ?? m,
              ]),
              ...LEVELS.flatMap((lv) => [
                el("td", { class: "corpus", text: f(bestAt(cl.get(m), lv)) }),
                el("td", { class: "text", text: f(bestAt(tl.get(m), lv)) }),
              ]),
            ]),
          ),
        ),
      ]),
    );
  };

  const renderTask = (a, body) => {
    root.dataset.analysis = a.id;
    const names = a.methods.map((m) => m.name);
    const label = Object.fromEntries(a.methods.map((m) => [m.name, m.label]));
    const styles = methodStyles(a.methods);
    const colour = (m) => styles.get(m)?.colour ?? PALETTE[Math.max(0, names.indexOf(m)) % PALETTE.length];
    const lines = taskLines(body);
    plot.replaceChildren(taskChart(lines, body.task, colour));
    const f = (v) => (v === null ? "–" : v.toFixed(3));
    const lowest = (pts, lv) => {
      let best = null;
      for (const p of pts ?? []) if (p.sparsity >= lv && (best === null || p.task_loss < best)) best = p.task_loss;
      return best;
    };
    const metric = body.task.metric ?? "task loss";
    table.replaceChildren(
      el("table", { attrs: { id: "results-rows" } }, [
        el("caption", {
          text: `lowest ${metric} on each frontier (every head restricted; no restriction: ${body.task.loss_full.toFixed(3)})`,
        }),
        el("thead", {}, [
          el("tr", {}, [
            el("th", { text: "method", attrs: { scope: "col" } }),
            ...LEVELS.map((lv) => el("th", { text: `corpus ≥ ${lv}`, attrs: { scope: "col" } })),
          ]),
        ]),
        el(
          "tbody",
          {},
          names.filter((m) => lines.has(m)).map((m) =>
            el("tr", { attrs: { "data-method": m } }, [
              el("th", { attrs: { scope: "row" } }, [
                el("span", { class: "results-swatch", attrs: { style: `background:${colour(m)}` } }),
                label[m] ?? m,
              ]),
              ...LEVELS.map((lv) => el("td", { class: "corpus", text: f(lowest(lines.get(m), lv)) })),
            ]),
          ),
        ),
      ]),
    );
  };

  const drawLengths = () => {
    const lb = src?.body?.lengths;
    lengthsBox.hidden = !lb;
    if (!lb) return lengthsBox.replaceChildren();
    const levels = lb.sparsity_levels.map((v) => String(v));
    if (!levels.includes(lengthLevel)) lengthLevel = levels.includes("0.9") ? "0.9" : levels[levels.length - 1];
    const a = store.get().analysis;
    // each method in the page's own colour (colours.js methodStyles), labels from the page
    const order = Object.keys(lb.recall_at_sparsity);
    const label = a ? Object.fromEntries(a.methods.map((m) => [m.name, m.label])) : {};
    const styles = a ? methodStyles(a.methods) : new Map();
    const colour = (m) => styles.get(m)?.colour ?? PALETTE[Math.max(0, order.indexOf(m)) % PALETTE.length];
    const pick = el(
      "div",
      { class: "toggles", attrs: { id: "results-lengths-level", role: "group", "aria-label": "sparsity level" } },
      levels.map((lv) => {
        const b = el("button", {
          class: lv === lengthLevel ? "on" : undefined,
          text: `sparsity ≥ ${lv}`,
          attrs: { type: "button", "data-level": lv, "aria-pressed": String(lv === lengthLevel) },
        });
        b.addEventListener("click", () => {
          lengthLevel = lv;
          drawLengths();
        });
        return b;
      }),
    );
    lengthsBox.replaceChildren(
      el("h3", { text: "Sparsity against length" }),
      pick,
      lengthsChart(lb, lengthLevel, colour, (m) => label[m] ?? m),
    );
  };

  let adopt = (next) => {
    src = next;
    memo.clear();
    say("");
    drawLengths();
    draw();
  };

  file.addEventListener("change", async () => {
    const f = file.files?.[0];
    if (!f) return;
    if (f.size > MAX_FILE_BYTES) return say(`${f.name} is over ${MAX_FILE_BYTES >> 20} MB: not a pareto.json.`);
    let body;
    try {
      body = JSON.parse(await f.text());
    } catch (err) {
      return say(`${f.name} is not valid JSON (${err.message}).`);
    }
    const a = store.get().analysis;
    const known = a ? a.methods.map((m) => m.name) : [];
    const problem = checkPareto(body, known);
    if (problem) return say(`${f.name} cannot be shown: ${problem}.`);
    adopt({ name: f.name, body, heads: null, served: false });
  });

  // nothing to show until results are served or opened: the panel is one line (panels.css)
  const panel = root.closest(".panel");
  const empty = (yes) => {
    if (panel) panel.dataset.empty = String(yes);
  };
  empty(true);
  const adoptShown = adopt;
  adopt = (next) => {
    empty(false);
    adoptShown(next);
  };
  if (served) {
    getResults()
      .then((body) => {
        if (!src) adopt({ name: body.name, body, heads: body.heads, served: true });
      })
      .catch((err) => {
        source.textContent = `The server's corpus results are not available: ${err.message}`;
      });
  } else {
    source.textContent =
      "No corpus results on this server. Open a pareto.json (a corpus sweep's results) to see " +
      "this text beside a corpus.";
  }

  store.subscribe((s, changed) => {
    if (changed.has("analysis")) drawLengths(); // the page's method labels and colours
    if (["analysis", "layer", "head", "resultsY"].some((k) => changed.has(k))) draw();
    else if (src && (changed.has("result") || changed.has("meanMetrics"))) draw();
  });
}

/**
 * Recall at a fixed sparsity against length (`sparsescope pareto --lengths`): one line per method
 * through its best recall at sparsity ≥ `level` at each length (a gap where no point of the method
 * reaches the level), lengths evenly spaced (they double), the gold sparsity under each length.
 */
export function lengthsChart(lb, level, colour, label) {
  const W = 760;
  const H = 330;
  const m = { l: 56, r: 250, t: 14, b: 58 };
  const n = lb.lengths.length;
  const sx = (k) => m.l + (n === 1 ? 0.5 : k / (n - 1)) * (W - m.l - m.r);
  const sy = (y) => H - m.b - y * (H - m.t - m.b);
  const root = svg("svg", {
    class: "results-chart results-lengths-chart",
    attrs: { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `recall at sparsity ≥ ${level} against length, per method` },
  });
  for (const t of [0, 0.2, 0.4, 0.6, 0.8, 1])
    root.append(
      svg("line", { class: "grid", attrs: { x1: sx(0), x2: sx(n - 1), y1: sy(t), y2: sy(t) } }),
      svg("text", { text: t.toFixed(1), attrs: { x: m.l - 6, y: sy(t) + 4, "text-anchor": "end" } }),
    );
  lb.lengths.forEach((len, k) => {
    root.append(
      svg("line", { class: "grid", attrs: { x1: sx(k), x2: sx(k), y1: sy(0), y2: sy(1) } }),
      svg("text", { text: String(len), attrs: { x: sx(k), y: H - m.b + 15, "text-anchor": "middle" } }),
      svg("text", {
        class: "gold-note",
        text: `gold ${lb.gold_sparsity[k].toFixed(3)}`,
        attrs: { x: sx(k), y: H - m.b + 29, "text-anchor": "middle" },
      }),
    );
  });
  root.append(
    svg("text", { class: "axis", text: "text length (tokens) →", attrs: { x: (sx(0) + sx(n - 1)) / 2, y: H - 8, "text-anchor": "middle" } }),
    svg("text", {
      class: "axis",
      text: `best recall at sparsity ≥ ${level}`,
      attrs: { x: 12, y: sy(0.5), "text-anchor": "middle", transform: `rotate(-90 12 ${sy(0.5)})` },
    }),
  );
  const rows = Object.entries(lb.recall_at_sparsity);
  rows.forEach(([name, byLevel], r) => {
    const values = byLevel[level] ?? [];
    let d = "";
    let pen = false;
    values.forEach((v, k) => {
      if (v === null || v === undefined) return void (pen = false);
      d += `${pen ? "L" : "M"}${sx(k).toFixed(1)},${sy(v).toFixed(1)}`;
      pen = true;
    });
    if (d) root.append(svg("path", { class: "front-corpus", attrs: { d, stroke: colour(name), "data-method": name } }));
    values.forEach((v, k) => {
      if (v === null || v === undefined) return;
      const dot = svg("circle", {
        class: "dot-length",
        attrs: { cx: sx(k), cy: sy(v), r: 3.5, fill: colour(name), "data-method": name, "data-length": lb.lengths[k], "data-recall": v },
      });
      dot.append(svg("title", { text: `${label(name)} at ${lb.lengths[k]} tokens: recall ${v.toFixed(3)} at sparsity ≥ ${level}` }));
      root.append(dot);
    });
    const y = m.t + 6 + r * 16;
    const name_ = label(name);
    const shown = name_.length > 34 ? `${name_.slice(0, 33)}…` : name_;
    root.append(
      svg("line", { attrs: { x1: W - m.r + 12, x2: W - m.r + 30, y1: y, y2: y, stroke: colour(name), "stroke-width": 2.5 } }),
      svg("text", {
        class: "legend",
        text: values.some((v) => v !== null && v !== undefined) ? shown : `${shown} (never ≥ ${level})`,
        attrs: { x: W - m.r + 35, y: y + 4 },
      }),
    );
  });
  const key = el("p", { class: "results-key muted" }, [
    `the same texts cut to each length · each method's best recall among its sweep points at sparsity ≥ ${level}`,
  ]);
  return el("div", {}, [root, key]);
}

/** The SVG chart: corpus frontiers solid, this text's dashed, gold lines, the current star. */
function chart(cl, tl, cGold, tGold, current, colour, what) {
  const W = 520;
  const H = 330;
  const m = { l: 48, r: 12, t: 12, b: 40 };
  const sx = (x) => m.l + x * (W - m.l - m.r);
  const sy = (y) => H - m.b - y * (H - m.t - m.b);
  const root = svg("svg", {
    class: "results-chart",
    attrs: { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `corpus and this text's frontiers, ${what}` },
  });
  for (const t of [0, 0.2, 0.4, 0.6, 0.8, 1]) {
    root.append(
      svg("line", { class: "grid", attrs: { x1: sx(t), x2: sx(t), y1: sy(0), y2: sy(1) } }),
      svg("line", { class: "grid", attrs: { x1: sx(0), x2: sx(1), y1: sy(t), y2: sy(t) } }),
      svg("text", { text: t.toFixed(1), attrs: { x: sx(t), y: H - m.b + 15, "text-anchor": "middle" } }),
      svg("text", { text: t.toFixed(1), attrs: { x: m.l - 6, y: sy(t) + 4, "text-anchor": "end" } }),
    );
  }
  root.append(
    svg("text", { class: "axis", text: "sparsity →", attrs: { x: sx(0.5), y: H - 6, "text-anchor": "middle" } }),
    svg("text", {
      class: "axis",
      text: "recall →",
      attrs: { x: 12, y: sy(0.5), "text-anchor": "middle", transform: `rotate(-90 12 ${sy(0.5)})` },
    }),
  );
  const gold = (g, cls, title) => {
    if (!Number.isFinite(g)) return;
    const line = svg("line", { class: cls, attrs: { x1: sx(g), x2: sx(g), y1: sy(0), y2: sy(1) } });
    line.append(svg("title", { text: `${title} ${g.toFixed(3)}` }));
    root.append(line);
  };
  gold(cGold, "gold-corpus", "corpus gold sparsity");
  gold(tGold, "gold-text", "this text's gold sparsity");
  const path = (pts) => pts.map((p, k) => `${k ? "L" : "M"}${sx(p.sparsity).toFixed(1)},${sy(p.recall).toFixed(1)}`).join("");
  for (const [name, pts] of cl) {
    root.append(svg("path", { class: "front-corpus", attrs: { d: path(pts), stroke: colour(name), "data-method": name } }));
    for (const p of pts)
      root.append(svg("circle", { class: "dot-corpus", attrs: { cx: sx(p.sparsity), cy: sy(p.recall), r: 3, fill: colour(name) } }));
  }
  for (const [name, pts] of tl)
    root.append(svg("path", { class: "front-text", attrs: { d: path(pts), stroke: colour(name), "data-method": name } }));
  if (current && isShare(current.sparsity) && isShare(current.recall)) {
    const star = svg("text", {
      class: "current-star",
      text: "★",
      attrs: { x: sx(current.sparsity), y: sy(current.recall) + 6, "text-anchor": "middle" },
    });
    star.append(svg("title", { text: `current setting on this text: recall ${current.recall.toFixed(3)}, sparsity ${current.sparsity.toFixed(3)}` }));
    root.append(star);
  }
  const key = el("p", { class: "results-key muted" }, [
    "solid: corpus frontier · dashed: this text · grey line: corpus gold sparsity, dotted: this text's · ★ current setting",
  ]);
  return el("div", {}, [root, key]);
}

/**
 * The task-axis chart (the paper's Fig. 2 / 4, right): sparsity against the task loss of the
 * model with every head restricted to each method's predicted graph, one line per method through
 * its frontier points, and the unrestricted loss as a dashed reference line.
 */
function taskChart(lines, task, colour) {
  const W = 520;
  const H = 330;
  const m = { l: 56, r: 12, t: 12, b: 40 };
  const losses = [...lines.values()].flatMap((pts) => pts.map((p) => p.task_loss)).concat(task.loss_full);
  let lo = Math.min(...losses);
  let hi = Math.max(...losses);
  const pad = Math.max(1e-3, 0.06 * (hi - lo));
  lo -= pad;
  hi += pad;
  const sx = (x) => m.l + x * (W - m.l - m.r);
  const sy = (y) => H - m.b - ((y - lo) / (hi - lo)) * (H - m.t - m.b);
  const metric = task.metric ?? "task loss";
  const root = svg("svg", {
    class: "results-chart results-task",
    attrs: { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `corpus sparsity against ${metric}, per method` },
  });
  for (const t of [0, 0.2, 0.4, 0.6, 0.8, 1]) {
    const v = lo + t * (hi - lo);
    root.append(
      svg("line", { class: "grid", attrs: { x1: sx(t), x2: sx(t), y1: sy(lo), y2: sy(hi) } }),
      svg("line", { class: "grid", attrs: { x1: sx(0), x2: sx(1), y1: sy(v), y2: sy(v) } }),
      svg("text", { text: t.toFixed(1), attrs: { x: sx(t), y: H - m.b + 15, "text-anchor": "middle" } }),
      svg("text", { text: v.toFixed(2), attrs: { x: m.l - 6, y: sy(v) + 4, "text-anchor": "end" } }),
    );
  }
  root.append(
    svg("text", { class: "axis", text: "sparsity →", attrs: { x: sx(0.5), y: H - 6, "text-anchor": "middle" } }),
    svg("text", {
      class: "axis",
      text: `${metric} (lower is better)`,
      attrs: { x: 12, y: sy((lo + hi) / 2), "text-anchor": "middle", transform: `rotate(-90 12 ${sy((lo + hi) / 2)})` },
    }),
  );
  const ref = svg("line", {
    class: "task-full",
    attrs: { x1: sx(0), x2: sx(1), y1: sy(task.loss_full), y2: sy(task.loss_full), "data-loss": task.loss_full },
  });
  ref.append(svg("title", { text: `no restriction: ${task.loss_full.toFixed(4)}` }));
  root.append(
    ref,
    svg("text", {
      class: "task-full-label",
      text: `no restriction ${task.loss_full.toFixed(3)}`,
      attrs: { x: sx(0) + 4, y: sy(task.loss_full) - 5 },
    }),
  );
  for (const [name, pts] of lines) {
    const d = pts.map((p, k) => `${k ? "L" : "M"}${sx(p.sparsity).toFixed(1)},${sy(p.task_loss).toFixed(1)}`).join("");
    root.append(svg("path", { class: "front-corpus", attrs: { d, stroke: colour(name), "data-method": name } }));
    for (const p of pts) {
      const dot = svg("circle", {
        class: "dot-task",
        attrs: { cx: sx(p.sparsity), cy: sy(p.task_loss), r: 3.5, fill: colour(name), "data-method": name, "data-loss": p.task_loss },
      });
      dot.append(svg("title", { text: `${name}: sparsity ${p.sparsity.toFixed(3)}, ${metric} ${p.task_loss.toFixed(4)}` }));
      root.append(dot);
    }
  }
  const key = el("p", { class: "results-key muted" }, [
    `corpus frontiers, every head restricted to the method's graph · dashed: the model unrestricted · ${task.texts ?? "?"} texts`,
  ]);
  return el("div", {}, [root, key]);
}
