/**
 * The page state <-> the address bar, so the URL is always a shareable link.
 *
 *     ?text=...&model=gpt2&alpha=1.5&causal=1&layer=2&head=3&method=sf-kmeans&p.clusters=4&p.top_k=1
 *      &p.window=3&p.globals=1&row=5&cluster=2&scope=mean&grid=recall&hide=1&block=64&px=block
 *
 * `p.<name>` are the current method's slider values (add-ons included), `row` the locked query
 * row and `cluster` the selected k-means cluster (the selection), `start` the first token of the
 * analysed window of a text over the model's positions, `block` the tile size of the block
 * sparsity shown (16, 32, 64, 128; default 128) and `px=block` the Pareto plot over block
 * sparsity. A text longer than `MAX_TEXT_IN_URL` characters is saved as a permanent link
 * (`/s/{id}?…`, session.js); until that answers, the analysis id is written instead (`id=`).
 *
 * On a page opened on a saved view (`/s/{id}`, `/gallery/{slug}`) the query holds the view
 * without the text (`withText: false`), every flag written out, and overrides the saved view on
 * reload (main.js): the address bar is always what is on screen.
 */

export const MAX_TEXT_IN_URL = 1500;

/** Tile sizes of block sparsity (sparse_core.metrics.BLOCKS) as the store keeps them. */
export const BLOCK_SIZES = ["16", "32", "64", "128"];
/** The tile size shown unless the view says otherwise (FlashAttention / FlexAttention tiles). */
export const DEFAULT_BLOCK = "128";

/**
 * The query string of a state.
 * @param {import("./state.js").State} s
 * @returns {string} without the leading "?"
 */
export function encodeState(s, { withText = true } = {}) {
  const q = new URLSearchParams();
  if (!withText);
  else if (s.text && s.text.length <= MAX_TEXT_IN_URL) q.set("text", s.text);
  else if (s.analysis) q.set("id", s.analysis.id);
  if (s.model) q.set("model", s.model);
  q.set("alpha", String(s.alpha));
  if (s.causal || !withText) q.set("causal", s.causal ? "1" : "0");
  if (s.truncate) q.set("start", String(s.start ?? 0));
  if (s.analysis) {
    q.set("layer", String(s.layer));
    q.set("head", String(s.head));
  }
  q.set("method", s.method);
  for (const [k, v] of Object.entries(s.params)) {
    q.set(`p.${k}`, typeof v === "boolean" ? (v ? "1" : "0") : String(v));
  }
  const all = !withText; // overriding a saved view: say every flag
  if (s.lockedRow !== null) q.set("row", String(s.lockedRow));
  else if (all) q.set("row", "");
  if (s.cluster !== null) q.set("cluster", String(s.cluster));
  else if (all) q.set("cluster", "");
  if (s.scope !== "head" || all) q.set("scope", s.scope);
  if (s.gridColour !== "gold" || all) q.set("grid", s.gridColour);
  if (s.hideSpecial || all) q.set("hide", s.hideSpecial ? "1" : "0");
  if (s.block !== DEFAULT_BLOCK || all) q.set("block", s.block);
  if (s.paretoX === "block" || all) q.set("px", s.paretoX);
  return q.toString();
}

/** A non-negative integer from a query value, else null. */
function index(v) {
  return v !== null && /^\d{1,6}$/.test(v) ? Number(v) : null;
}

/**
 * Parse a query string into a partial state (raw params as strings; controls.js coerces them
 * against the method's ParamSpecs once the analysis is known). Only the keys the query names
 * (`params` only with `method` or a `p.` key), so that it can override a saved view.
 * @param {string} search e.g. `location.search`
 */
export function decodeState(search) {
  const q = new URLSearchParams(search);
  const out = {};
  if (q.has("method") || [...q.keys()].some((k) => k.startsWith("p."))) out.params = {};
  if (q.has("text")) out.text = q.get("text");
  if (q.has("id")) out.id = q.get("id");
  const alpha = Number(q.get("alpha"));
  if (q.has("alpha") && Number.isFinite(alpha)) out.alpha = alpha;
  if (q.has("causal")) out.causal = q.get("causal") === "1";
  if (q.get("model")) out.model = q.get("model");
  for (const key of ["layer", "head"]) {
    const v = index(q.get(key));
    if (v !== null) out[key] = v;
  }
  if (q.has("method")) out.method = q.get("method");
  for (const [k, v] of q) if (k.startsWith("p.")) out.params[k.slice(2)] = v;
  if (q.has("row")) out.lockedRow = index(q.get("row"));
  if (q.has("cluster")) out.cluster = index(q.get("cluster"));
  if (q.has("scope")) out.scope = q.get("scope") === "mean" ? "mean" : "head";
  if (q.has("grid")) out.gridColour = q.get("grid") === "recall" ? "recall" : "gold";
  if (q.has("hide")) out.hideSpecial = q.get("hide") === "1";
  if (BLOCK_SIZES.includes(q.get("block"))) out.block = q.get("block");
  if (q.has("px")) out.paretoX = q.get("px") === "block" ? "block" : "sparsity";
  const start = index(q.get("start"));
  if (start !== null) Object.assign(out, { truncate: true, start });
  return out;
}
