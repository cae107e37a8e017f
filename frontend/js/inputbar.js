/**
 * The input bar: text, the model (when the server serves several), α (the model's own, per head /
 * one α for every head: softmax 1 / entmax 1.5 / sparsemax 2 / a free value in [1, 2]), the causal toggle (locked on for a decoder) and Analyze. API errors (`{"detail", "field"}`) are shown next to the control
 * named by `field` (text, alpha, causal), other ones under the bar.
 */

import { byId } from "./dom.js";
import { modelLabel } from "./model-card.js";
import * as store from "./state.js";
import { field } from "./view-state.js";

/** α's range: the view's one definition (sparse_core/view_schema.py). */
const ALPHA = field("alpha");

const PRESETS = ["1", "1.5", "2"];
/** α "own": each head at the model's own α (what it was trained with); the others override it. */
export const OWN = "own";
/** Quiet time after an α / causal change before it is analysed (ms). */
const REANALYSE_MS = 250;

/**
 * Wire the input bar's elements (from the template) to the store.
 * @param {() => void} onAnalyze called after the inputs were written to the store
 * @param {Array<{id: string, architecture: string, decoder: boolean, max_tokens: number,
 *   artefacts: number[]}>} models the served models (config island; the default first)
 */
export function initInputBar(onAnalyze, models = []) {
  const text = byId("text");
  const picker = document.getElementById("model");
  const byModel = new Map(models.map((m) => [m.id, m]));
  if (picker) {
    picker.replaceChildren(
      ...models.map((m) => {
        const o = document.createElement("option");
        o.value = m.id;
        o.textContent = `${modelLabel(m)}${m.decoder ? " (decoder)" : ""}`;
        o.title = m.id;
        return o;
      }),
    );
    picker.closest(".field").hidden = models.length < 2;
    picker.addEventListener("change", () => {
      lockCausal(picker.value);
      offerOwn(picker.value);
      // "own" on a model without an α of its own would silently run 1.5: say 1.5
      const a = alpha() === OWN && !byModel.get(picker.value)?.own_alpha ? 1.5 : alpha();
      store.set({ model: picker.value, causal: causal.checked, alpha: a });
      form.requestSubmit();
    });
  }

  /**
   * A decoder is always causal: the switch shows it on, locked, with the reason. Back on an
   * encoder it shows the user's own choice again (a decoder's forced "on" does not stick).
   */
  let ownCausal = null; // the user's choice, kept while a decoder forces causal on
  function lockCausal(id) {
    const m = byModel.get(id ?? models[0]?.id);
    const locked = !!m?.decoder;
    if (locked && !causal.disabled) ownCausal = causal.checked;
    if (!locked && causal.disabled && ownCausal !== null) causal.checked = ownCausal;
    causal.disabled = locked;
    causal.closest("label").title = locked
      ? `${m.id} is a decoder: it never attends to later tokens, so its attention is always causal`
      : "";
    if (locked) causal.checked = true;
  }
  /** "model's own α" is offered only for a model that has one (trained with entmax). */
  function offerOwn(id) {
    const m = byModel.get(id ?? models[0]?.id);
    const own = form.querySelector("input[name=alpha][value=own]")?.closest("label");
    if (own) own.hidden = models.length > 0 && !m?.own_alpha;
  }
  const free = byId("alpha-free");
  free.min = String(ALPHA.lo);
  free.max = String(ALPHA.hi);
  free.setAttribute("aria-label", `α, a value in [${ALPHA.lo}, ${ALPHA.hi}]`);
  const causal = byId("causal");
  const form = byId("input-bar");
  const radios = [...form.querySelectorAll("input[name=alpha]")];
  const slots = [...form.querySelectorAll("[data-error-for]")];

  /** The α the controls show: "own" (the model's own, per head) or one α for every head. */
  function alpha() {
    const picked = radios.find((r) => r.checked);
    if (picked?.value === OWN) return OWN;
    return picked && picked.value !== "free" ? Number(picked.value) : Number(free.value);
  }

  /** The box grows with its text up to five lines and shows the text's start (a longer text
   * scrolls inside it). */
  function fit() {
    text.style.height = "auto";
    const line = parseFloat(getComputedStyle(text).lineHeight) || 21;
    text.style.height = `${Math.min(text.scrollHeight + 2, line * 5 + 16)}px`;
  }
  text.addEventListener("input", fit);

  function show(s) {
    if (document.activeElement !== text && text.value !== s.text) {
      text.value = s.text;
      fit();
      text.scrollTop = 0;
      text.setSelectionRange(0, 0);
    }
    if (document.activeElement !== free) { // typing "1.25" passes through 1: keep "other"
      const preset = s.alpha === OWN ? OWN : PRESETS.find((v) => Number(v) === s.alpha);
      for (const r of radios) r.checked = preset ? r.value === preset : r.value === "free";
      if (!preset) free.value = String(s.alpha);
      free.disabled = !!preset;
    }
    if (picker && models.length) picker.value = byModel.has(s.model) ? s.model : models[0].id;
    lockCausal(s.model);
    offerOwn(s.model);
    causal.checked = s.causal;
  }

  function showErrors(errors) {
    if (picker && errors.model) picker.closest(".field").hidden = false;
    for (const slot of slots) {
      const msg = errors[slot.dataset.errorFor] ?? "";
      slot.textContent = msg;
      slot.hidden = !msg;
      const control = form.querySelector(`[data-field="${slot.dataset.errorFor}"]`);
      if (control) control.toggleAttribute("aria-invalid", !!msg);
    }
  }

  /**
   * α and causal changes re-analyse at once (debounced: typing 1.35 in the free field or a
   * quick second click sends one request), as the lecture does; the text is the box's.
   */
  let timer = 0;
  function reanalyse() {
    clearTimeout(timer);
    timer = setTimeout(() => {
      const a = alpha();
      if (!text.value.trim() || (a !== OWN && !Number.isFinite(a))) return;
      const s = store.get();
      if (s.analysis && a === s.alpha && causal.checked === s.causal && text.value === s.text) return;
      form.requestSubmit();
    }, REANALYSE_MS);
  }

  form.addEventListener("change", (ev) => {
    if (ev.target.name === "alpha") {
      free.disabled = ev.target.value !== "free";
      if (!free.disabled) free.focus();
    }
    if (ev.target.name === "alpha" || ev.target === causal || ev.target === free) reanalyse();
  });
  free.addEventListener("input", () => {
    const a = Number(free.value);
    if (free.value !== "" && a >= ALPHA.lo && a <= ALPHA.hi) reanalyse(); // else: said on change
  });
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const fresh = text.value !== store.get().text; // a new text starts at its first window
    const model = picker && models.length > 1 ? picker.value : store.get().model;
    store.set({ text: text.value, alpha: alpha(), causal: causal.checked, model,
      ...(fresh ? { start: 0, truncate: false } : {}) });
    onAnalyze();
  });
  text.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) form.requestSubmit();
  });

  store.subscribe((s, changed) => {
    if (["text", "alpha", "causal", "model"].some((k) => changed.has(k))) show(s);
    if (changed.has("errors")) showErrors(s.errors);
    if (changed.has("status")) {
      form.classList.toggle("busy", s.status === "loading");
      byId("analyze").disabled = s.status === "loading";
    }
  });
  show(store.get());
}
