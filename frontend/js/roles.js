/**
 * Head roles on the page (definitions §11; GET /api/analyses/{id}/roles, sparse_core/roles.py):
 * loads every head's role once per analysis into the store (`roles`, which the head grid paints
 * when coloured by role, grid.js) and says the open head's role in words in the head's panel
 * ("Attends to the previous token in 83 % of rows"). Text only through textContent.
 */

import { getRoles } from "./api.js";
import { roleSentence } from "./role-words.js";
import * as store from "./state.js";

/**
 * Mount the sentence in `line` and load the roles of each new analysis.
 * @param {HTMLElement} line
 */
export function initRoles(line) {
  function load(id) {
    store.set({ roles: { id, roles: null, error: null } });
    getRoles(id).then(
      (body) => {
        if (store.get().roles?.id === id) store.set({ roles: { id, roles: body.roles, error: null } });
      },
      (err) => {
        if (store.get().roles?.id === id) {
          store.set({ roles: { id, roles: null, error: err?.message || "roles not available" } });
        }
      },
    );
  }

  function render(s) {
    const r = s.roles;
    const item = r?.roles?.[s.layer]?.[s.head];
    line.hidden = !s.analysis;
    if (!s.analysis) return;
    if (r?.error) line.textContent = `Role: not available (${r.error}).`;
    else if (!item) line.textContent = "Role: …";
    else line.textContent = `Role of this head: ${roleSentence(item)}`;
  }

  store.subscribe((s, changed) => {
    if (changed.has("analysis") && s.analysis && s.roles?.id !== s.analysis.id) load(s.analysis.id);
    if (["analysis", "roles", "layer", "head"].some((k) => changed.has(k))) render(s);
  });
  render(store.get());
}
