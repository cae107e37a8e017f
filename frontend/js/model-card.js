/**
 * The model card beside the picker: what the current model is (base, objective, data, steps, α:
 * its checkpoint's own record) and what it is competent at on held-out data (STS Spearman beside
 * the softmax original's; masked-LM loss beside a unigram baseline where it has an LM head), as
 * `GET /api/models` gives it (`card`, measured by `sparsescope card`). Text only through
 * `textContent`.
 */

import { el, fmt } from "./dom.js";
import * as store from "./state.js";

/** The picker's friendly name of a model ("MiniLM, adapted with 1.5-entmax"). */
export function modelLabel(m) {
  return m?.card?.label ?? m?.id ?? "";
}

function alphaWords(c) {
  const a = c.alpha;
  if (!a) return "none of its own: trained with softmax; entmax is applied at inference (α = 1.5 unless you pick another)";
  if (a.per_head) return `learned per head, ${fmt(a.min, 2)}–${fmt(a.max, 2)} (mean ${fmt(a.mean, 3)})`;
  return `${fmt(a.value, 2)} in every head`;
}

function dataWords(d) {
  if (!d) return null;
  if (d.corpus) return `${d.corpus}${d.split ? `, ${d.split}` : ""}`;
  if (d.datasets) return `${d.datasets.length} datasets (${d.datasets.slice(0, 4).join(", ")}, …)`;
  if (d.corpus_sha256) return `a corpus with sha256 ${d.corpus_sha256.slice(0, 12)}…`;
  return null;
}

function row(term, value) {
  if (value === null || value === undefined || value === "") return null;
  return el("div", {}, [el("dt", { text: term }), el("dd", {}, [value])]);
}

/** One line: the STS figure beside the softmax original's. */
export function competence(c) {
  if (!c?.measured || c.sts_spearman == null) return "competence not measured (sparsescope card)";
  const soft = c.sts_spearman_softmax;
  const beside = soft == null || c.attention_training === "softmax" && c.sts_spearman === soft
    ? "" : ` (softmax original ${fmt(soft, 3)})`;
  return `STS Spearman ${fmt(c.sts_spearman, 3)}${beside}`;
}

/** The card's body for model info `m` (an entry of `GET /api/models`). */
export function cardBody(m) {
  const c = m.card ?? {};
  const sets = (c.sts_sets ?? []).map((s) => `${s.name} (${s.pairs})`).join(", ");
  const mlm = c.mlm_loss != null
    ? `${fmt(c.mlm_loss, 3)} nats per masked token (perplexity ${fmt(Math.exp(c.mlm_loss), 0)}); ` +
      `a context-free unigram model: ${fmt(c.mlm_unigram_loss, 3)}`
    : c.mlm_note;
  const sts = c.sts_spearman != null
    ? `${fmt(c.sts_spearman, 3)} at ${c.alpha_trained ? "its own α" : "α = 1.5"}; the softmax original ` +
      `(α = 1): ${fmt(c.sts_spearman_softmax, 3)}`
    : null;
  return el("dl", { class: "card-facts" }, [
    row("id", el("code", { text: m.id })),
    row("what", c.description),
    row("base", c.base),
    row("objective", c.objective),
    row("data", dataWords(c.data)),
    row("steps", c.steps != null ? String(c.steps) : null),
    row("α", alphaWords(c)),
    row("STS Spearman", sts),
    row("held-out STS sets", sets ? `mean over ${c.sts_sets.length}: ${sets}` : null),
    row("masked-LM loss", mlm),
    c.mlm_loss != null
      ? row("against unigram", c.mlm_loss < c.mlm_unigram_loss
        ? `${fmt(c.mlm_unigram_loss - c.mlm_loss, 2)} nats better than predicting each masked word by its frequency alone`
        : `no better than predicting each masked word by its frequency alone`)
      : null,
    row("measured by", c.command ? el("code", { text: c.command }) : null),
  ]);
}

/**
 * Keep `node` (a `<details>`) showing the card of the store's model.
 * @param {HTMLDetailsElement} node
 * @param {Array<object>} models the served models (config island; the default first)
 */
export function initModelCard(node, models = []) {
  const byId = new Map(models.map((m) => [m.id, m]));
  const summary = node.querySelector("summary");
  const body = node.querySelector(".card-body");
  let shown = null;
  function show(s) {
    const m = byId.get(s.model) ?? models[0];
    if (!m || m === shown) return;
    shown = m;
    node.hidden = false;
    summary.replaceChildren(
      el("span", { class: "card-label", text: modelLabel(m) }),
      el("span", { class: "muted", text: ` · ${competence(m.card)}` }),
    );
    body.replaceChildren(cardBody(m));
  }
  store.subscribe((s, changed) => { if (changed.has("model")) show(s); });
  show(store.get());
}
