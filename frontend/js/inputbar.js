/**
 * The input bar: text, α (softmax 1 / entmax 1.5 / sparsemax 2 / a free value in [1, 2]), the
 * causal toggle and Analyze. API errors (`{"detail", "field"}`) are shown next to the control
 * named by `field` (text, alpha, causal), other ones under the bar.
 */

import { byId } from "./dom.js";
import * as store from "./state.js";

const PRESETS = ["1", "1.5", "2"];

/**
 * Wire the input bar's elements (from the template) to the store.
 * @param {() => void} onAnalyze called after the inputs were written to the store
 */
export function initInputBar(onAnalyze) {
  const text = byId("text");
  const free = byId("alpha-free");
  const causal = byId("causal");
  const form = byId("input-bar");
  const radios = [...form.querySelectorAll("input[name=alpha]")];
  const slots = [...form.querySelectorAll("[data-error-for]")];

  /** The α the controls show. */
  function alpha() {
    const picked = radios.find((r) => r.checked);
    return picked && picked.value !== "free" ? Number(picked.value) : Number(free.value);
  }

  function show(s) {
    if (document.activeElement !== text) text.value = s.text;
    const preset = PRESETS.find((v) => Number(v) === s.alpha);
    for (const r of radios) r.checked = preset ? r.value === preset : r.value === "free";
    if (!preset) free.value = String(s.alpha);
    free.disabled = !!preset;
    causal.checked = s.causal;
  }

  function showErrors(errors) {
    for (const slot of slots) {
      const msg = errors[slot.dataset.errorFor] ?? "";
      slot.textContent = msg;
      slot.hidden = !msg;
      const control = form.querySelector(`[data-field="${slot.dataset.errorFor}"]`);
      if (control) control.toggleAttribute("aria-invalid", !!msg);
    }
  }

  form.addEventListener("change", (ev) => {
    if (ev.target.name === "alpha") {
      free.disabled = ev.target.value !== "free";
      if (!free.disabled) free.focus();
    }
  });
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const fresh = text.value !== store.get().text; // a new text starts at its first window
    store.set({ text: text.value, alpha: alpha(), causal: causal.checked,
      ...(fresh ? { start: 0, truncate: false } : {}) });
    onAnalyze();
  });
  text.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) form.requestSubmit();
  });

  store.subscribe((s, changed) => {
    if (changed.has("text") || changed.has("alpha") || changed.has("causal")) show(s);
    if (changed.has("errors")) showErrors(s.errors);
    if (changed.has("status")) {
      form.classList.toggle("busy", s.status === "loading");
      byId("analyze").disabled = s.status === "loading";
    }
  });
  show(store.get());
}
