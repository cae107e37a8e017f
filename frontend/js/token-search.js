/**
 * Token search: type a word, see the matching tokens, jump to one — the heatmap zooms onto its
 * query row (cells big enough for ★ / ×, centred on the row's strongest key) and locks it. At
 * n = 4,096 that is the way to a word; at any n it works the same.
 *
 * `findTokens` is pure (tests/js/token_search.test.mjs): a token matches when its text, without
 * the sub-word markers "##", "Ġ" and "▁", contains the query (case-insensitive); exact matches
 * come first, then prefixes, then the rest, each in text order. The heatmap listens for the
 * `heatmap-focus` event (`detail.token`) on its element. Token text is set with textContent only.
 */

import { el } from "./dom.js";
import * as store from "./state.js";

/** At most this many matches are listed. */
export const MAX_HITS = 12;

/** A token's text as typed: sub-word markers off, lower case. */
export function bare(text) {
  return text.replace(/^(##|Ġ|▁)/, "").toLowerCase();
}

/**
 * The tokens matching `query`, best first.
 * @param {Array<{text: string}>} tokens
 * @param {string} query
 * @param {number} limit
 * @returns {{hits: number[], total: number}} token indices (at most `limit`) and all matches
 */
export function findTokens(tokens, query, limit = MAX_HITS) {
  const q = bare(query.trim());
  if (!q) return { hits: [], total: 0 };
  const ranked = [[], [], []];
  tokens.forEach((t, k) => {
    const b = bare(t.text);
    const at = b.indexOf(q);
    if (at < 0) return;
    ranked[b === q ? 0 : at === 0 ? 1 : 2].push(k);
  });
  const all = ranked.flat();
  return { hits: all.slice(0, limit), total: all.length };
}

/**
 * Mount the search box in `root`; a picked token is sent to the heatmap element `heatmap`.
 * @param {HTMLElement} root
 * @param {HTMLElement} heatmap
 */
export function initTokenSearch(root, heatmap) {
  const input = el("input", {
    class: "token-search-input",
    attrs: { type: "search", placeholder: "Find a token…", "aria-label": "find a token",
      autocomplete: "off", dir: "auto" },
  });
  const count = el("span", { class: "muted token-search-count", attrs: { "aria-live": "polite" } });
  const list = el("div", { class: "token-search-hits", attrs: { role: "list" } });
  root.replaceChildren(el("div", { class: "token-search-bar" }, [input, count]), list);

  function jump(k) {
    heatmap.dispatchEvent(new CustomEvent("heatmap-focus", { detail: { token: k } }));
  }

  function render() {
    const toks = store.get().analysis?.tokens ?? [];
    const { hits, total } = findTokens(toks, input.value);
    count.textContent = input.value.trim() ? `${total} match${total === 1 ? "" : "es"}` : "";
    list.replaceChildren(
      ...hits.map((k) => {
        const before = k > 0 ? toks[k - 1].text : "";
        const after = k + 1 < toks.length ? toks[k + 1].text : "";
        const b = el("button", {
          class: "token-hit",
          attrs: { type: "button", role: "listitem", "data-token": String(k) },
        }, [
          el("span", { class: "token-hit-ctx", text: before }),
          el("strong", { text: toks[k].text }),
          el("span", { class: "token-hit-ctx", text: after }),
          el("span", { class: "muted token-hit-at", text: `#${k}` }),
        ]);
        b.addEventListener("click", () => jump(k));
        return b;
      }),
    );
  }

  input.addEventListener("input", render);
  input.addEventListener("keydown", (ev) => {
    if (ev.key !== "Enter") return;
    const first = list.querySelector(".token-hit");
    if (first) jump(Number(first.dataset.token));
  });
  store.subscribe((_s, changed) => {
    if (changed.has("analysis")) render();
  });
}
