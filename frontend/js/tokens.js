/**
 * Tokens: display labels, the visible subset (special tokens hidden or not) and the token strip —
 * the text's tokens as chips, linked to every other view through the store's `hoverToken`,
 * `lockedRow` and `clusterMembers`. Token text is only ever set with `textContent`.
 */

import { el } from "./dom.js";
import { rove, setStop } from "./roving.js";
import * as store from "./state.js";

const MAX_LABEL_CHARS = 14;

/** A token's label for axes: at most 14 characters, with an ellipsis when cut. */
export function tokenLabel(text) {
  return text.length > MAX_LABEL_CHARS ? `${text.slice(0, MAX_LABEL_CHARS - 1)}…` : text;
}

/**
 * Indices of the tokens shown in the heatmap: all of them, or all but the special ones
 * ([CLS], [SEP]) when `hideSpecial` (never none: a text of special tokens only keeps them).
 * @param {Array<{special: boolean}>} tokens
 * @param {boolean} hideSpecial
 * @returns {Int32Array}
 */
export function visibleTokens(tokens, hideSpecial) {
  const keep = tokens.flatMap((t, k) => (hideSpecial && t.special ? [] : [k]));
  return Int32Array.from(keep.length ? keep : tokens.map((_, k) => k));
}

/**
 * Mount the token strip in `root`.
 * @param {HTMLElement} root
 */
export function initTokenStrip(root) {
  let chips = [];

  function build(s) {
    const toks = s.analysis ? s.analysis.tokens : [];
    chips = toks.map((t, k) => {
      const chip = el("button", {
        class: `chip${t.special ? " special" : ""}`,
        text: t.text,
        title: `token ${k}${t.pos ? ` · ${t.pos}` : ""}`,
        attrs: { type: "button", "data-token": String(k) },
      });
      return chip;
    });
    root.replaceChildren(...chips);
    mark(s);
    // one tab stop (the locked token's chip, else the first shown); arrows move between chips
    const first = chips.findIndex((c) => !c.hidden);
    setStop(chips, s.lockedRow !== null && chips[s.lockedRow] ? s.lockedRow : Math.max(0, first));
  }

  // a focused chip is hovered for the other views (its edges in the heatmap), as the mouse does
  rove(root, () => chips, {
    cols: () => chips.length,
    onMove: (k) => store.set({ hoverToken: k }),
  });
  root.addEventListener("focusout", (ev) => {
    if (!root.contains(/** @type {Node} */ (ev.relatedTarget))) store.set({ hoverToken: null });
  });

  function mark(s) {
    const members = s.clusterMembers;
    // a hovered token's edges (as BertViz draws lines): the keys it attends to, shaded by p
    const t = s.hoverToken;
    const head = s.headData;
    const probs = t !== null && head && t < head.n ? head.probs.subarray(t * head.n, (t + 1) * head.n) : null;
    chips.forEach((chip, k) => {
      const p = probs ? probs[k] : 0;
      chip.style.boxShadow = p > 0 && k !== t ? `inset 0 -${Math.max(2, Math.round(3 + 9 * Math.sqrt(p)))}px 0 rgb(29 78 216 / ${(0.25 + 0.75 * Math.sqrt(p)).toFixed(2)})` : "";
      chip.classList.toggle("attended", p > 0 && k !== t);
      chip.classList.toggle("hover", s.hoverToken === k);
      chip.classList.toggle("locked", s.lockedRow === k);
      chip.setAttribute("aria-pressed", String(s.lockedRow === k)); // the locked query row
      chip.classList.toggle("in-cluster", !!members && (members.queries[k] || members.keys[k]) === 1);
      chip.hidden = s.hideSpecial && s.analysis.tokens[k].special;
    });
  }

  root.addEventListener("mouseover", (ev) => {
    const chip = ev.target.closest(".chip");
    if (chip) store.set({ hoverToken: Number(chip.dataset.token) });
  });
  root.addEventListener("mouseleave", () => store.set({ hoverToken: null }));
  root.addEventListener("click", (ev) => {
    const chip = ev.target.closest(".chip");
    if (!chip) return;
    const k = Number(chip.dataset.token);
    store.set({ lockedRow: store.get().lockedRow === k ? null : k });
  });

  store.subscribe((s, changed) => {
    if (changed.has("analysis")) build(s);
    else if (["hoverToken", "lockedRow", "clusterMembers", "hideSpecial", "headData"].some((k) => changed.has(k))) {
      mark(s);
    }
  });
}
