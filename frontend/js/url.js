/**
 * The page state <-> the address bar, so the URL is always a shareable link.
 *
 *     ?text=...&model=gpt2&alpha=1.5&causal=1&layer=2&head=3&method=sf-kmeans&p.clusters=4&p.top_k=1
 *      &p.window=3&p.globals=1&row=5&cluster=2&scope=mean&grid=recall&hide=1&block=64&px=block
 *
 * The keys, their values and when each is written are the view's one definition
 * (sparse_core/view_schema.py VIEW_FIELDS, read through view-state.js): `p.<name>` are the
 * current method's slider values (add-ons included), `row` the locked query row and `cluster`
 * the selected k-means cluster (the selection), `start` the first token of the analysed window
 * of a text over the model's positions, `block` the tile size of the block sparsity shown
 * (16, 32, 64, 128; default 128) and `px=block` the Pareto plot over block sparsity. A text
 * longer than `MAX_TEXT_IN_URL` characters is saved as a permanent link (`/s/{id}?…`,
 * session.js); until that answers, the analysis id is written instead (`id=`).
 *
 * On a page opened on a saved view (`/s/{id}`, `/gallery/{slug}`) the query holds the view
 * without the text (`withText: false`), every flag written out, and overrides the saved view on
 * reload (main.js): the address bar is always what is on screen. The server reads it the same
 * way for the `preload` island (app/web/preload.py, sparse_core.view_schema.decode_query).
 */

import { MAX_TEXT_IN_URL, decodeQuery, encodeQuery, field } from "./view-state.js";

export { MAX_TEXT_IN_URL };

/** Tile sizes of block sparsity (sparse_core.metrics.BLOCKS) as the store keeps them. */
export const BLOCK_SIZES = field("block").values;
/** The tile size shown unless the view says otherwise (FlashAttention / FlexAttention tiles). */
export const DEFAULT_BLOCK = field("block").default;

/**
 * The query string of a state.
 * @param {import("./state.js").State} s
 * @returns {string} without the leading "?"
 */
export function encodeState(s, { withText = true } = {}) {
  return encodeQuery(s, { withText });
}

/**
 * Parse a query string into a partial state (raw params as strings; controls.js coerces them
 * against the method's ParamSpecs once the analysis is known). Only the keys the query names
 * (`params` only with `method` or a `p.` key), so that it can override a saved view; values the
 * view does not allow are left out (`decodeQuery` says why).
 * @param {string} search e.g. `location.search`
 */
export function decodeState(search) {
  return decodeQuery(search).state;
}
