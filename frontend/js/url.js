/**
 * The page state <-> the address bar, so the URL is always a shareable link.
 *
 *     ?text=...&model=gpt2&alpha=1.5&causal=1&layer=2&head=3&method=sf-kmeans&p.clusters=4&p.top_k=1
 *      &p.window=3&p.globals=1&row=5&cluster=2&scope=mean&grid=recall&hide=1
 *
 * `p.<name>` are the current method's slider values (add-ons included), `row` the locked query
 * row and `cluster` the selected k-means cluster (the selection). A text longer than
 * `MAX_TEXT_IN_URL` characters is left out and the analysis id is written instead (`id=`): the
 * link then works while the server still caches that analysis.
 */

export const MAX_TEXT_IN_URL = 1500;

/**
 * The query string of a state.
 * @param {import("./state.js").State} s
 * @returns {string} without the leading "?"
 */
export function encodeState(s) {
  const q = new URLSearchParams();
  if (s.text && s.text.length <= MAX_TEXT_IN_URL) q.set("text", s.text);
  else if (s.analysis) q.set("id", s.analysis.id);
  if (s.model) q.set("model", s.model);
  q.set("alpha", String(s.alpha));
  if (s.causal) q.set("causal", "1");
  if (s.analysis) {
    q.set("layer", String(s.layer));
    q.set("head", String(s.head));
  }
  q.set("method", s.method);
  for (const [k, v] of Object.entries(s.params)) {
    q.set(`p.${k}`, typeof v === "boolean" ? (v ? "1" : "0") : String(v));
  }
  if (s.lockedRow !== null) q.set("row", String(s.lockedRow));
  if (s.cluster !== null) q.set("cluster", String(s.cluster));
  if (s.scope !== "head") q.set("scope", s.scope);
  if (s.gridColour !== "gold") q.set("grid", s.gridColour);
  if (s.hideSpecial) q.set("hide", "1");
  return q.toString();
}

/** A non-negative integer from a query value, else null. */
function index(v) {
  return v !== null && /^\d{1,6}$/.test(v) ? Number(v) : null;
}

/**
 * Parse a query string into a partial state (raw params as strings; controls.js coerces them
 * against the method's ParamSpecs once the analysis is known).
 * @param {string} search e.g. `location.search`
 */
export function decodeState(search) {
  const q = new URLSearchParams(search);
  const out = { params: {} };
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
  out.lockedRow = index(q.get("row"));
  out.cluster = index(q.get("cluster"));
  if (q.get("scope") === "mean") out.scope = "mean";
  if (q.get("grid") === "recall") out.gridColour = "recall";
  if (q.get("hide") === "1") out.hideSpecial = true;
  return out;
}
