/**
 * Long texts: the model reads at most its positions (512 for MiniLM), so a longer text is
 * analysed one window at a time (`POST /api/analyze` with `truncate` and `start`; the response
 * says `total_tokens`, `window_start`, `window_end`, tokens of the text without specials). When
 * the text is longer than its window, a notice says which tokens are shown and offers every
 * window of the text as one click (consecutive windows; the last one ends with the text), plus
 * a field for any start.
 */

import { el } from "./dom.js";
import * as store from "./state.js";

/** Window buttons shown at most (then ◀ ▶ and the start field cover the rest). */
const MAX_BUTTONS = 10;

/**
 * The windows of a text of `total` tokens read `size` at a time: starts 0, size, 2·size, … with
 * the last one moved back so that it ends with the text (the server does the same).
 * @returns {number[]} window starts
 */
export function windowStarts(total, size) {
  if (size <= 0 || total <= size) return [0];
  const out = [];
  for (let s = 0; s < total; s += size) out.push(Math.min(s, total - size));
  return [...new Set(out)];
}

/**
 * Mount the notice and picker in `root`; `onPick(start)` analyses that window.
 * @param {HTMLElement} root
 * @param {(start: number) => void} onPick
 */
export function initWindowPicker(root, onPick) {
  root.setAttribute("role", "group");
  root.setAttribute("aria-label", "window of a long text");

  function render(a) {
    root.replaceChildren();
    const total = a?.total_tokens ?? 0;
    const from = a?.window_start ?? 0;
    const to = a?.window_end ?? 0;
    const size = to - from;
    if (!a || !a.truncated || size <= 0 || total <= size) {
      root.hidden = !(a && a.truncated); // an older server: a truncated text, window unknown
      if (a && a.truncated) {
        root.append(el("span", { class: "wp-note", text: "Long text: only its first tokens are analysed (the model's positions)." }));
      }
      return;
    }
    root.hidden = false;
    root.append(el("span", {
      class: "wp-note",
      text: `Long text: ${total} tokens; the model reads ${size} at a time. Showing tokens ${from}–${to}.`,
    }));
    const starts = windowStarts(total, size);
    // the server moves a start back to the beginning of its word: the nearest window is "this"
    const at = starts.reduce((best, s, k) => (Math.abs(s - from) < Math.abs(starts[best] - from) ? k : best), 0);
    let shown = starts;
    if (starts.length > MAX_BUTTONS) {
      const k = Math.max(0, Math.min(starts.length - MAX_BUTTONS, (at < 0 ? 0 : at) - MAX_BUTTONS / 2));
      shown = starts.slice(k, k + MAX_BUTTONS);
    }
    const pick = (s) => () => onPick(s);
    if (from > 0) {
      root.append(el("button", { class: "tool tool-small", text: "◀", title: "the previous window", attrs: { type: "button", "aria-label": "previous window" } }));
      root.lastChild.addEventListener("click", pick(Math.max(0, from - size)));
    }
    for (const s of shown) {
      const on = s === starts[at];
      const b = el("button", {
        class: "tool tool-small", text: `${s}–${Math.min(total, s + size)}`,
        title: `analyse tokens ${s} to ${Math.min(total, s + size)}`,
        attrs: { type: "button", "data-window-start": String(s), "aria-pressed": String(on) },
      });
      b.addEventListener("click", pick(s));
      root.append(b);
    }
    if (to < total) {
      root.append(el("button", { class: "tool tool-small", text: "▶", title: "the next window", attrs: { type: "button", "aria-label": "next window" } }));
      root.lastChild.addEventListener("click", pick(Math.min(total - size, to)));
    }
    const field = el("input", {
      class: "wp-start",
      attrs: { type: "number", min: "0", max: String(Math.max(0, total - size)), step: "1",
        value: String(from), "aria-label": "first token of the window", title: "start at token…" },
    });
    field.addEventListener("change", () => {
      const v = Math.round(Number(field.value));
      if (Number.isFinite(v) && v >= 0) onPick(Math.min(v, Math.max(0, total - size)));
    });
    root.append(el("label", { class: "wp-field", text: "start at " }, [field]));
  }

  store.subscribe((s, changed) => {
    if (changed.has("analysis")) render(s.analysis);
  });
  render(store.get().analysis);
}
