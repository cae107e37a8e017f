/**
 * Every method's predicted mask, recomputed in the browser from one head's payload: the JS twin
 * of sparse_core/methods.py (registry), sparse_core/sparsefinder.py (the three Sparsefinder
 * predictors) and sparse_core/baselines.py (Reformer, Routing), built on patterns.js; the
 * arena's methods (definitions §8) are in arena.js.
 *
 * `predict(head, method, params)` returns the finished mask (docs/architecture.md):
 * M' = (M ∪ W_w ∪ Glob) ∩ V, with the add-ons `window` (odd width, 0 = off) and `globals`
 * (first and last token global) that every method has.
 *
 * Exactness: distances are summed in doubles over the r dimensions in order c = 0 .. r − 1 from
 * the float32 values the server sends (as sparsefinder.sq_distances does in float64); sorts break
 * ties by index (Python's stable sorts); random draws use the shared hash (rng.js). Reformer
 * buckets, Routing memberships and k-means centroids come precomputed in the payload.
 */

import { ARENA, indexer, seer } from "./arena.js";
import { memo } from "./head.js";
import * as patterns from "./patterns.js";

// ----------------------------------------------------------------------------- Sparsefinder

/**
 * Squared distances D_ij = Σ_c (x_ic − y_jc)² between the rows of two n × r / m × r arrays.
 * @returns {Float64Array} n × m
 */
function sqDistances(x, y, n, m, r) {
  const d = new Float64Array(n * m);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < m; j++) {
      let s = 0;
      for (let c = 0; c < r; c++) {
        const t = x[i * r + c] - y[j * r + c];
        s += t * t;
      }
      d[i * m + j] = s;
    }
  }
  return d;
}

/**
 * The head's projected squared distances D_ij = ‖q̃_i − k̃_j‖², n × n, computed once per head.
 * @returns {Float64Array}
 */
export function projectedDistances(head) {
  const { n, rank } = head;
  return memo(head, "sqdist", () => sqDistances(head.qp, head.kp, n, n, rank));
}

/**
 * Sparsefinder distance (paper §4.3, definitions §3): Ĝ = {(i, j) : ‖q̃_i − k̃_j‖² < t} (strict).
 * @returns {Uint8Array}
 */
export function sfDistance(head, t) {
  const n = head.n;
  const d = projectedDistances(head);
  const m = new Uint8Array(n * n);
  for (let x = 0; x < n * n; x++) m[x] = d[x] < t ? 1 : 0;
  return m;
}

/**
 * Rank of every token in every dimension: for each c, the tokens sorted by x[·, c] ascending,
 * equal values by position (a stable sort, as sparsefinder.balanced_buckets).
 * @returns {Int32Array} n × r
 */
function dimensionRanks(x, n, r) {
  const ranks = new Int32Array(n * r);
  const order = Array.from({ length: n }, (_, t) => t);
  for (let c = 0; c < r; c++) {
    order.sort((a, b) => x[a * r + c] - x[b * r + c] || a - b);
    order.forEach((t, k) => (ranks[t * r + c] = k));
  }
  return ranks;
}

/**
 * Sparsefinder quantization with balanced bins (paper §4.4, definitions §3): per dimension, queries and
 * keys are ranked separately and bucket = rank // b; (i, j) ∈ Ĝ iff they share a bucket in at
 * least one dimension, with b = ⌈n / B⌉ tokens per bin for B = `nBuckets`
 * (methods.quantization_buckets).
 * @returns {Uint8Array}
 */
export function sfQuantization(head, nBuckets) {
  const { n, rank: r } = head;
  const b = Math.max(1, Math.ceil(n / nBuckets));
  const rq = memo(head, "ranks-q", () => dimensionRanks(head.qp, n, r));
  const rk = memo(head, "ranks-k", () => dimensionRanks(head.kp, n, r));
  const bq = rq.map((k) => Math.floor(k / b));
  const bk = rk.map((k) => Math.floor(k / b));
  const m = new Uint8Array(n * n);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < n; j++) {
      for (let c = 0; c < r; c++) {
        if (bq[i * r + c] === bk[j * r + c]) {
          m[i * n + j] = 1;
          break;
        }
      }
    }
  }
  return m;
}

/**
 * Centroid order of every token: the B centroids sorted by squared distance ascending, equal
 * distances by centroid index (sparsefinder.nearest_centroids).
 * @returns {Int32Array} n × B
 */
function centroidOrder(x, centroids, n, nb, r) {
  const d = sqDistances(x, centroids, n, nb, r);
  const out = new Int32Array(n * nb);
  const idx = Array.from({ length: nb }, (_, c) => c);
  for (let t = 0; t < n; t++) {
    idx.sort((a, b) => d[t * nb + a] - d[t * nb + b] || a - b);
    out.set(idx, t * nb);
  }
  return out;
}

/**
 * k-means cluster membership of the head's queries and keys: member[c][t] = 1 iff centroid c is
 * among token t's `topK` nearest of the B centroids. Memoised per (B, k) on the head (the POS
 * panel and the predictor share it).
 * @returns {{queries: Uint8Array[], keys: Uint8Array[]}}
 */
export function kmeansMembership(head, nb, topK) {
  const { n, rank: r } = head;
  const cents = head.centroids.get(nb);
  if (!cents) throw new Error(`no k-means centroids for B = ${nb} in this head's payload`);
  if (topK < 1 || topK > nb) throw new RangeError(`top_k must be in [1, ${nb}], got ${topK}`);
  const side = (name, x) => {
    const order = memo(head, `corder-${name}-${nb}`, () => centroidOrder(x, cents, n, nb, r));
    const member = Array.from({ length: nb }, () => new Uint8Array(n));
    for (let t = 0; t < n; t++) for (let k = 0; k < topK; k++) member[order[t * nb + k]][t] = 1;
    return member;
  };
  return memo(head, `kmeans-${nb}-${topK}`, () => ({
    queries: side("q", head.qp),
    keys: side("k", head.kp),
  }));
}

/** OR into `m` every (i, j) with i ∈ rows[c] and j ∈ cols[c] for some group c. */
function orGroups(m, n, rows, cols) {
  rows.forEach((qs, c) => {
    const ks = cols[c];
    for (const i of qs) for (const j of ks) m[i * n + j] = 1;
  });
  return m;
}

/** Each token's clusters as a bitset: `words` 32-bit words per token, bit c set iff member[c][t]. */
function memberBits(member, n, words) {
  const bits = new Uint32Array(n * words);
  member.forEach((row, c) => {
    const w = c >>> 5;
    const bit = 1 << (c & 31);
    for (let t = 0; t < n; t++) if (row[t]) bits[t * words + w] |= bit;
  });
  return bits;
}

/**
 * Sparsefinder k-means (paper §4.5, definitions §3): each query and key goes to its top-k nearest
 * centroids; (i, j) ∈ Ĝ iff the two top-k sets intersect (a bitwise AND of their cluster sets,
 * so a step costs n² whatever B and k).
 * @returns {Uint8Array}
 */
export function sfKmeans(head, nb, topK) {
  const n = head.n;
  const mem = kmeansMembership(head, nb, topK);
  const words = Math.ceil(nb / 32);
  const bq = memberBits(mem.queries, n, words);
  const bk = memberBits(mem.keys, n, words);
  const m = new Uint8Array(n * n);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < n; j++) {
      for (let w = 0; w < words; w++) {
        if (bq[i * words + w] & bk[j * words + w]) {
          m[i * n + j] = 1;
          break;
        }
      }
    }
  }
  return m;
}

// ----------------------------------------------------------------------------- baselines

/**
 * Reformer (LSH): edge iff query i and key j fall in the same bucket in at least one of the
 * first `rounds` rounds (buckets precomputed by the server for B buckets).
 * @returns {Uint8Array}
 */
export function reformer(head, nb, rounds) {
  const all = head.reformer.get(nb);
  if (!all) throw new Error(`no Reformer buckets for B = ${nb} in this head's payload`);
  const n = head.n;
  const m = new Uint8Array(n * n);
  for (const bucket of all.slice(0, rounds)) {
    const groups = new Map();
    bucket.forEach((g, t) => {
      if (!groups.has(g)) groups.set(g, []);
      groups.get(g).push(t);
    });
    for (const toks of groups.values()) orGroups(m, n, [toks], [toks]);
  }
  return m;
}

/**
 * Routing Transformer (balanced spherical k-means): edge iff some centroid c chose both query i
 * and key j (memberships precomputed by the server for C centroids).
 * @returns {Uint8Array}
 */
export function routing(head, nc) {
  const mem = head.routing.get(nc);
  if (!mem) throw new Error(`no Routing memberships for C = ${nc} in this head's payload`);
  return orGroups(new Uint8Array(head.n * head.n), head.n, mem.queries, mem.keys);
}

// ----------------------------------------------------------------------------- registry

function needProj(head) {
  if (!head.qp) {
    throw new Error("this method needs a Sparsefinder artefact (none for this model and α)");
  }
}

/**
 * The registry, the twin of sparse_core.methods.METHODS: method name -> (head, params) => the
 * method's own mask before `finish`. Parameter names are the ParamSpec names of methods.py. The
 * page's list of methods comes from the API (`analysis.methods`); this table only says how to
 * compute each, and it must name exactly the registry's methods, in its order (checked by
 * tests/js/check_twins.mjs against golden data from Python).
 * @type {Readonly<Object<string, (head: object, p: object) => Uint8Array>>}
 */
export const PREDICTORS = Object.freeze({
  window: (h) => patterns.emptyMask(h.n),
  fixed: (h, p) => patterns.fixed(h.n, p.stride, p.c, h.causal, p.part, p.spread ? h.head : null),
  strided: (h, p) => patterns.strided(h.n, p.stride, h.causal, p.part),
  // BigBird's window and globals are the add-ons; its r random keys per row are drawn among the
  // valid keys outside them (methods.BigBirdMethod.predict)
  bigbird: (h, p) =>
    patterns.bigbird(h.n, {
      randomKeys: p.random_keys,
      width: p.window,
      globals: p.globals ? [0, -1] : [],
      seed: h.seed,
      causal: h.causal,
    }),
  longformer: (h, p) =>
    patterns.longformer(h.n, { width: 0, nGlobals: p.n_globals, seed: h.seed, causal: h.causal }),
  // Reformer and Routing need no artefact: without one their groups come from the raw q, k
  reformer: (h, p) => reformer(h, p.n_buckets, p.rounds),
  routing: (h, p) => routing(h, p.n_clusters),
  "sf-distance": (h, p) => (needProj(h), sfDistance(h, p.t)),
  "sf-quantization": (h, p) => (needProj(h), sfQuantization(h, p.n_buckets)),
  "sf-kmeans": (h, p) => (needProj(h), sfKmeans(h, p.n_clusters, p.top_k)),
  // today's learned selectors (definitions §12): orders computed by the server, arena.js
  indexer: (h, p) => indexer(h, p.k),
  seer: (h, p) => seer(h, p.block, p.topk),
  // today's sparse-attention methods (definitions §8): arena.js
  ...ARENA,
});

/**
 * Methods whose mask needs the head's methods' part (projections, buckets, orders, estimates):
 * a long text's head is drawn from its graph first (session.js), these wait for the rest. Not a
 * list of its own: `learnMethods` fills it from the API's method list (each entry's `payload`,
 * from its Method class in sparse_core/methods), whenever an analysis arrives.
 * @type {Set<string>}
 */
export const PAYLOAD_METHODS = new Set();

/**
 * Take the payload flags of the API's method list (`analysis.methods`, GET /api/methods).
 * @param {{name: string, payload?: boolean}[]} specs
 */
export function learnMethods(specs) {
  PAYLOAD_METHODS.clear();
  for (const m of specs ?? []) if (m.payload) PAYLOAD_METHODS.add(m.name);
}

/**
 * Whether `head` lacks `method`'s data: drawn from its graph with only some methods' data
 * (`methodsIn`: the page's first request asks for the shown method's, session.js), the rest
 * not in yet.
 * @param {import("./head.js").HeadData} head
 * @param {string} method
 */
export function lacksData(head, method) {
  return !!head.methodsPending && PAYLOAD_METHODS.has(method) && !head.methodsIn?.has(method);
}

/** The mask cannot be computed yet: the head's methods' part is still on its way. */
export class PendingError extends Error {
  constructor() {
    super("loading this head's data for the method…");
    this.name = "PendingError";
  }
}

/**
 * The finished predicted mask of `method` with `params` on one head.
 * @param {import("./head.js").HeadData} head
 * @param {string} method a name of sparse_core.methods.METHODS
 * @param {Object<string, number|boolean|string>} params slider values, add-ons included
 * @returns {Uint8Array} n × n
 */
export function predict(head, method, params) {
  const f = Object.hasOwn(PREDICTORS, method) ? PREDICTORS[method] : null;
  if (!f) throw new Error(`unknown method ${JSON.stringify(method)}`);
  if (lacksData(head, method)) throw new PendingError();
  const mask = f(head, params);
  return patterns.finish(mask, head.n, {
    window: Number(params.window ?? 0),
    globals: !!params.globals,
    causal: head.causal,
  });
}
