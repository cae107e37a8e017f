/**
 * Side by side's pane B: which head it shows, fetched through the page's own session and API code
 * (docs/compare.md). B differs from the open head A in one thing (`store.compare`):
 *
 * - `head`: another head (cmpLayer, cmpHead) of the same analysis (session.js `loadHead`, its LRU);
 * - `method`: the same head, another method (cmpMethod) at its default parameters;
 * - `alpha` / `model`: the same layer and head of a second analysis of the same text at α = cmpAlpha
 *   or with the model cmpModel (POST /api/analyze, then GET …/heads/{layer}/{head}); analyses and
 *   prepared heads are cached here, so going back and forth asks the server once.
 *
 * `paneB(s)` resolves to `{head, analysis, layer, headIndex, available, method, params, note}`: B's
 * prepared head, B's analysis (A's own for head / method), the methods B's analysis offers, B's
 * own method and parameters (compare=method; else B's mask follows A's setting), and a note when
 * B's head had to be moved (a model with fewer layers or heads).
 */

import * as api from "./api.js";
import { availableMethods } from "./controls.js";
import { prepareHead } from "./head.js";
import { lacksData } from "./methods.js";
import { resolveParams } from "./params.js";
import { loadHead, requestOf } from "./session.js";

const analyses = new Map(); // request JSON -> Promise<analysis>
const heads = new Map(); // "id/layer/head" -> Promise<HeadData>
const KEEP = 6; // second analyses and their heads kept (most recent last)

function remember(map, key, make) {
  if (map.has(key)) {
    const hit = map.get(key);
    map.delete(key);
    map.set(key, hit);
    return hit;
  }
  const p = make();
  p.catch(() => map.delete(key));
  map.set(key, p);
  while (map.size > KEEP) map.delete(map.keys().next().value);
  return p;
}

/** The POST /api/analyze body of pane B for α / model (the rest as A's request). */
export function requestOfB(s) {
  const req = requestOf(s);
  if (s.compare === "alpha") req.alpha = s.cmpAlpha;
  if (s.compare === "model") {
    if (s.cmpModel) req.model = s.cmpModel;
    else delete req.model;
  }
  if (s.analysis?.truncated) req.truncate = true;
  return req;
}

/** The names of the methods an analysis offers. */
function names(analysis) {
  return new Set(availableMethods(analysis).map((m) => m.name));
}

/** A method's spec in an analysis, or a clear error. */
function methodSpec(analysis, name) {
  const spec = availableMethods(analysis).find((m) => m.name === name);
  if (!spec) throw new Error(`pane B's method "${name}" is not available for this text`);
  return spec;
}

/**
 * Pane B of the state `s` (A's analysis and head open).
 * @param {import("./state.js").State} s
 */
export async function paneB(s) {
  const a = s.analysis;
  if (s.compare === "head") {
    if (s.cmpLayer >= a.layers || s.cmpHead >= a.heads) {
      throw new Error(`pane B's head L${s.cmpLayer} H${s.cmpHead} is not in this model ` +
        `(${a.layers} layers × ${a.heads} heads)`);
    }
    const head = await loadHead(s.cmpLayer, s.cmpHead, null); // whole: B follows A's method
    return { head, analysis: a, layer: s.cmpLayer, headIndex: s.cmpHead, available: names(a), note: "" };
  }
  if (s.compare === "method") {
    const spec = methodSpec(a, s.cmpMethod);
    // the open head drawn with A's method's data alone: B's method's data first (session.js)
    const head = s.headData && lacksData(s.headData, spec.name)
      ? await loadHead(s.layer, s.head, spec.name) : s.headData;
    return { head, analysis: a, layer: s.layer, headIndex: s.head, available: names(a),
      method: spec.name, params: resolveParams(spec, {}), note: "" };
  }
  const req = requestOfB(s);
  const b = await remember(analyses, JSON.stringify(req), () => api.analyze(req));
  const layer = Math.min(s.layer, b.layers - 1);
  const headIndex = Math.min(s.head, b.heads - 1);
  const note = layer !== s.layer || headIndex !== s.head
    ? `${b.model} has ${b.layers} layers × ${b.heads} heads: B shows L${layer} H${headIndex}` : "";
  const head = await remember(heads, `${b.id}/${layer}/${headIndex}`,
    () => api.getHead(b.id, layer, headIndex).then((p) => prepareHead(p, b.causal)));
  // B's mask: A's method where B's analysis offers it (sf-* need an artefact at B's α)
  return { head, analysis: b, layer, headIndex, available: names(b), note };
}
