/**
 * The information-flow panel (sparse_core/flow.py, docs/api.md "Information
 * flow"): pick a target token (a chip, the arrow keys, or a locked heatmap row) and the layer whose
 * output it is; the panel shows which input tokens have a path to it through every layer's
 * entmax graph (union of heads, residual as a self-edge) and with how much attention-rollout
 * mass (Abnar & Zuidema 2020), from GET /api/analyses/{id}/flow. Entmax's zeros are exact, so an
 * unreached token is truly cut off; with softmax every token reaches every token.
 *
 * Below the chips, one strip per level (the stream entering each layer, from the target down to
 * the inputs) marks the positions with a path to the target: the receptive field widening layer
 * by layer. Plain DOM and small canvases; token text only through textContent.
 */

import { getFlow } from "./api.js";
import { el } from "./dom.js";
import { LOD_MIN } from "./heatmap-lod.js";
import * as store from "./state.js";
import { tokenLabel } from "./tokens.js";

/**
 * A chip's shade for a rollout mass: 0 for none, else in [0.08, 1], the square root of the mass
 * over the largest mass (so that small but real inputs stay visible).
 * @param {number} mass
 * @param {number} max the largest mass of the row
 */
export function shade(mass, max) {
  if (!(mass > 0) || !(max > 0)) return 0;
  return 0.08 + 0.92 * Math.sqrt(Math.min(1, mass / max));
}

/**
 * The default target of a text: the locked query row if any, else the first non-special token.
 * @param {{tokens: {special: boolean}[]}} analysis
 * @param {number|null} lockedRow
 */
export function defaultTarget(analysis, lockedRow) {
  const n = analysis.tokens.length;
  if (Number.isInteger(lockedRow) && lockedRow >= 0 && lockedRow < n) return lockedRow;
  const k = analysis.tokens.findIndex((t) => !t.special);
  return k < 0 ? 0 : k;
}

/** The name of level k (the stream entering layer k) for a target after layer `layer`. */
export function levelName(k, layer) {
  if (k === 0) return "inputs";
  if (k === layer + 1) return `layer ${layer} out`;
  return `into layer ${k}`;
}

/**
 * Mount the panel: `select` picks the layer, `root` gets the caption, chips and level strips.
 * @param {HTMLElement} root
 * @param {HTMLSelectElement} select
 */
export function initFlow(root, select) {
  const caption = el("p", { class: "flow-caption", attrs: { id: "flow-caption", "aria-live": "polite" } });
  const chips = el("div", {
    class: "flow-chips",
    attrs: { id: "flow-chips", role: "group", "aria-label": "target token (arrow keys move it)" },
  });
  const levels = el("div", { class: "flow-levels", attrs: { id: "flow-levels" } });
  const note = el("p", {
    class: "muted flow-note",
    text:
      "Shade: attention-rollout mass (mean over heads + residual, multiplied through the layers). " +
      "Struck-out tokens have no path to the target: every route passes an exact entmax zero.",
  });
  root.append(caption, chips, levels, note);
  let target = null;
  let layer = null;
  let analysisId = null;
  let seq = 0;
  // a long text (n > LOD_MIN): the flow is asked for once the open head's graph is in, so its
  // request never competes with the first paint's (the graph part comes first, session.js)
  let afterGraph = false;

  const fill = (a) => {
    select.replaceChildren(
      ...Array.from({ length: a.layers }, (_, l) =>
        el("option", { text: `after layer ${l}`, attrs: { value: String(l) } }),
      ),
    );
    layer = a.layers - 1;
    select.value = String(layer);
  };

  const load = async () => {
    const s = store.get();
    const a = s.analysis;
    if (!a || target === null) return;
    const mine = ++seq;
    root.setAttribute("aria-busy", "true");
    try {
      const body = await getFlow(a.id, target, layer);
      if (mine !== seq) return;
      render(a, body);
    } catch (err) {
      if (mine !== seq) return;
      caption.textContent = `The information flow is not available: ${err.message}`;
      caption.classList.add("flow-error");
      chips.replaceChildren();
      levels.replaceChildren();
    } finally {
      if (mine === seq) root.removeAttribute("aria-busy");
    }
  };

  const render = (a, body) => {
    caption.classList.remove("flow-error");
    root.dataset.analysis = a.id; // which analysis the chips are of (tests wait on it)
    const labels = a.tokens.map((t) => tokenLabel(t.text));
    const max = Math.max(...body.mass);
    const top = body.mass
      .map((m, j) => [m, j])
      .filter(([, j]) => j !== body.token)
      .sort((x, y) => y[0] - x[0])
      .slice(0, 3)
      .filter(([m]) => m > 0)
      .map(([m, j]) => `“${labels[j]}” ${(100 * m).toFixed(1)} %`);
    caption.textContent =
      `“${labels[body.token]}” (token ${body.token}) after layer ${body.layer} is reached by ` +
      `${body.reached} of ${body.n} input tokens` +
      (top.length ? `; most mass from ${top.join(", ")}` : "") +
      ` (itself ${(100 * body.mass[body.token]).toFixed(1)} %).` +
      saturation(body.levels.map((idx) => idx.length), body.n);
    chips.replaceChildren(
      ...labels.map((label, j) => {
        const m = body.mass[j];
        const on = body.reachable[j];
        const b = el("button", {
          class: `flow-chip${on ? "" : " flow-unreached"}${a.tokens[j].special ? " special" : ""}`,
          text: label,
          title: on ? `${label}: mass ${m.toPrecision(3)} (${(100 * m).toFixed(2)} %)` : `${label}: no path`,
          attrs: {
            type: "button",
            "data-index": String(j),
            "aria-pressed": String(j === body.token),
            tabindex: j === body.token ? "0" : "-1",
          },
        });
        // the chip's blue at opacity `sh`; between 0.7 and 0.85 neither dark nor white text
        // reaches WCAG's 4.5:1, so the shade is snapped out of that band (white text above it)
        const sh = shade(m, max);
        const dark = sh > 0.775;
        b.style.setProperty("--mass", String(dark ? Math.max(sh, 0.85) : Math.min(sh, 0.7)));
        if (dark) b.style.color = "#fff";
        return b;
      }),
    );
    levels.replaceChildren(
      ...body.levels
        .map((idx, k) => levelRow(levelName(k, body.layer), idx, body.n, k))
        .reverse(),
    );
  };

  chips.addEventListener("click", (e) => {
    const b = /** @type {HTMLElement} */ (e.target).closest(".flow-chip");
    if (!b) return;
    target = Number(b.dataset.index);
    load();
  });
  chips.addEventListener("keydown", (e) => {
    const a = store.get().analysis;
    if (!a || target === null) return;
    const step = { ArrowLeft: -1, ArrowRight: 1, Home: -target, End: a.n - 1 - target }[e.key];
    if (step === undefined) return;
    e.preventDefault();
    target = Math.min(a.n - 1, Math.max(0, target + step));
    load().then(() => chips.querySelector(`[data-index="${target}"]`)?.focus());
  });
  select.addEventListener("change", () => {
    layer = Number(select.value);
    load();
  });
  store.subscribe((s, changed) => {
    const a = s.analysis;
    if (changed.has("analysis")) {
      if (!a) return;
      if (a.id === analysisId) return;
      analysisId = a.id;
      fill(a);
      target = defaultTarget(a, s.lockedRow);
      afterGraph = a.n > LOD_MIN && !s.headData;
      if (!afterGraph) load();
    } else if (afterGraph && changed.has("headData") && s.headData) {
      afterGraph = false;
      load();
    } else if (changed.has("lockedRow") && a && Number.isInteger(s.lockedRow)) {
      target = s.lockedRow;
      load();
    }
  });
}

/** One level's strip: a canvas of n cells, reached ones filled, and its count. */
function levelRow(name, indices, n, k) {
  const canvas = el("canvas", { class: "flow-strip", attrs: { width: 600, height: 10 } });
  const ctx = canvas.getContext("2d");
  if (ctx) {
    ctx.fillStyle = "#e5e7eb";
    ctx.fillRect(0, 0, 600, 10);
    ctx.fillStyle = "#2563eb";
    const w = 600 / n;
    for (const j of indices) ctx.fillRect(j * w, 0, Math.max(1, w - (w > 3 ? 1 : 0)), 10);
  }
  const full = indices.length === n;
  return el("div", { class: `flow-level${full ? " flow-full" : ""}`, attrs: { "data-level": String(k) } }, [
    el("span", { class: "flow-level-name", text: name }),
    canvas,
    el("span", { class: "flow-level-count", text: `${indices.length} / ${n}`, title: full ? "every input token" : "" }),
  ]);
}

/**
 * What the full strips say (a short text reaches every token within a layer or two): how many of
 * the levels are full, so that a column of "n / n" reads as saturation, not as a fault.
 * @param {number[]} counts reached tokens per level
 * @param {number} n
 */
export function saturation(counts, n) {
  const full = counts.filter((c) => c === n).length;
  if (!full) return "";
  if (full === counts.length) return ` Every level reaches all ${n} tokens: on a text this short the graph saturates at once.`;
  return ` ${full} of the ${counts.length} levels reach all ${n} tokens (greyed): a short text saturates within a few layers.`;
}
