/**
 * The page's one state store: every view reads from it and subscribes to it; every control writes
 * to it. Derived data (the open head's arrays, the current mask and metrics) live here too, so
 * that linked views (heatmap, grid, Pareto, POS panel, token strip) stay in step.
 *
 * `set(patch)` shallow-merges the patch and calls each subscriber with `(state, changed)` where
 * `changed` is the Set of keys whose value changed (by `!==`). A `set` made by a subscriber while
 * subscribers are being notified is queued and dispatched afterwards, in order, so every
 * subscriber sees every change exactly once.
 *
 * The view's fields (what the address and a share link hold: text, alpha, causal, model,
 * truncate, start, layer, head, method, params, lockedRow, cluster, scope, gridColour,
 * hideSpecial, block, paretoX) and their defaults come from the view's one definition
 * (view-state.js).
 */

import { viewDefaults } from "./view-state.js";

/**
 * @typedef {object} State
 * @property {string} text
 * @property {number} alpha entmax α in [1, 2]
 * @property {boolean} causal
 * @property {string|null} model the served model's id (null: the server's default)
 * @property {boolean} truncate analyse a window of a text over the model's positions
 * @property {number} start the window's first token (of the text's tokens, specials excluded)
 * @property {{path: string, text: string, start?: number}|null} base the saved view the page was
 *   opened on (a share, a gallery example, a long text's permanent link): while its text is
 *   shown, the address is that page plus the view's query (session.js `addressOf`)
 * @property {object|null} analysis the POST /api/analyze body
 * @property {"idle"|"loading"|"ready"|"error"} status
 * @property {Object<string, string>} errors API error messages keyed by the control's field
 * @property {number} layer
 * @property {number} head
 * @property {object|null} headData the open head's precomputed arrays (see head.js)
 * @property {string} method
 * @property {Object<string, number|boolean|string>} params current slider values (add-ons included)
 * @property {{mask: Uint8Array, metrics: object}|null} result the current method's mask and metrics
 * @property {"head"|"mean"} scope Pareto plot scope
 * @property {"16"|"32"|"64"|"128"} block tile size B of the block sparsity shown (metrics panel,
 *   Pareto x-axis, exports): a key of `metrics.block_sparsity`
 * @property {"sparsity"|"block"} paretoX the Pareto plot's x: token sparsity or block sparsity at `block`
 * @property {boolean} paretoPoints show every sweep point, not only the frontiers (a view field)
 * @property {"gold"|"recall"|"role"} gridColour head grid colouring
 * @property {{id: string, roles: object[][]|null, error: string|null}|null} roles every head's
 *   role on the analysis `id` (GET /api/analyses/{id}/roles, roles.js; null roles: loading)
 * @property {boolean} hideSpecial hide [CLS]/[SEP] rows and columns
 * @property {number|null} lockedRow the query row locked by a click (the selection)
 * @property {number|null} cluster the k-means cluster selected in the POS panel
 * @property {number|null} hoverToken the token under the pointer (heatmap label or chip)
 * @property {{queries: Uint8Array, keys: Uint8Array}|null} clusterMembers tokens of the selected
 *   cluster (pos.js), highlighted by the heatmap and the token strip
 * @property {number|null} posClusters B of the POS panel when sf-kmeans is not the method
 * @property {object|null} pareto the Pareto body of the current scope
 * @property {string|null} paretoStatus "loading", "ready", or why the sweep is not shown
 * @property {string|null} paretoKey which scope the Pareto request in flight is for
 * @property {Float64Array|null} headRecall the current setting's recall on every head (sweep.js)
 * @property {object|null} meanMetrics the current setting's metrics, mean over heads (sweep.js)
 * @property {number} summaryAt counts the methods' summaries merged into `analysis` (summary.js)
 */

/**
 * The view's fields (text … paretoX: sparse_core/view_schema.py VIEW_FIELDS, their defaults
 * there) and the page's working data.
 * @type {State}
 */
const initial = {
  ...viewDefaults(),
  base: null,
  analysis: null,
  status: "idle",
  errors: {},
  headData: null,
  result: null,
  paretoY: "recall",
  outputError: null,
  hoverToken: null,
  clusterMembers: null,
  posClusters: null,
  pareto: null,
  paretoStatus: null,
  paretoKey: null,
  headRecall: null,
  meanMetrics: null,
  summaryAt: 0,
  roles: null,
};

let state = { ...initial };
const subscribers = new Set();
const queue = [];
let dispatching = false;

/** The current state (treat as read-only; change it with `set`). */
export function get() {
  return state;
}

/**
 * Merge `patch` into the state and notify subscribers of the keys that changed.
 * @param {Partial<State>} patch
 */
export function set(patch) {
  queue.push(patch);
  if (dispatching) return;
  dispatching = true;
  try {
    while (queue.length) {
      const next = queue.shift();
      const changed = new Set();
      for (const key of Object.keys(next)) {
        if (state[key] !== next[key]) changed.add(key);
      }
      if (changed.size === 0) continue;
      state = { ...state, ...next };
      for (const fn of subscribers) fn(state, changed);
    }
  } finally {
    dispatching = false;
  }
}

/**
 * Call `fn(state, changed)` after every change. Returns the function that unsubscribes.
 * @param {(state: State, changed: Set<string>) => void} fn
 */
export function subscribe(fn) {
  subscribers.add(fn);
  return () => subscribers.delete(fn);
}
