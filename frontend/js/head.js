/**
 * Turn one head payload (GET /api/analyses/{id}/heads/{layer}/{head}) into the typed arrays every
 * slider step works on, once, when the head opens. Method-specific precomputations (pairwise
 * projected distances, per-dimension ranks, token–centroid distances) are made on first use and
 * memoised on the head, so a slider step only thresholds or compares precomputed numbers.
 */

/**
 * @typedef {object} HeadData
 * @property {number} layer
 * @property {number} head
 * @property {number} n
 * @property {boolean} causal
 * @property {Float32Array} probs entmax probabilities P, n × n row-major (0 off the graph)
 * @property {Uint8Array} gold the ground-truth graph G = {P_ij > 0}, n × n
 * @property {number} goldCount |G|
 * @property {Int32Array} edgeI query of every gold edge (row-major order)
 * @property {Int32Array} edgeJ key of every gold edge
 * @property {number} goldSparsity sparsity(G) as the server reports it
 * @property {number} rank r, the projection dimension (0 without an artefact)
 * @property {Float64Array|null} qp projected queries q̃, n × r (exact float32 values)
 * @property {Float64Array|null} kp projected keys k̃, n × r
 * @property {Map<number, Float64Array>} centroids B -> k-means centroids, B × r
 * @property {Map<number, Int32Array[]>} reformer B -> LSH bucket of every token, per round
 * @property {Map<number, {queries: Int32Array[], keys: Int32Array[]}>} routing C -> chosen tokens
 * @property {number} seed per-head seed of the BigBird / Longformer draws
 * @property {Array<string|null>} pos Universal POS tag of every token
 * @property {object} payload the payload itself (the arena methods decode their parts of it on
 *   first use: arena.js)
 * @property {Map<string, any>} memo method-specific precomputations (see `memo`)
 */

/** Rows of numbers -> one flat Float64Array (values are float32-exact, so no rounding). */
function flatten(rows, width) {
  const out = new Float64Array(rows.length * width);
  rows.forEach((row, a) => out.set(row, a * width));
  return out;
}

/**
 * Prepare a head payload for interactive use.
 * @param {object} payload the head payload
 * @param {boolean} causal the analysis' causal flag
 * @param {string[]|null} [methodsIn] a `?part=graph&method=…` payload's methods (their data is
 *   in: `methods.lacksData`); the others wait for `withMethods`
 * @returns {HeadData}
 */
export function prepareHead(payload, causal, methodsIn = null) {
  if (payload.csr) {
    return { ...graphFromCsr(payload, causal), ...methodFields(payload),
      methodsIn: new Set(methodsIn ?? []) };
  }
  const n = payload.n;
  const probs = new Float32Array(n * n);
  const gold = new Uint8Array(n * n);
  // the gold edges in row-major order (the drawing order of the marks, heatmap-lod.js' rows):
  // the server sends them so (O(E)); any other order is sorted by one scan of the n² cells
  // (p is sent exactly, payloads.f32_exact: the float32 Python holds)
  const goldCount = payload.edges.length;
  const edgeI = new Int32Array(goldCount);
  const edgeJ = new Int32Array(goldCount);
  let e = 0, last = -1, ordered = true;
  for (const [i, j, p] of payload.edges) {
    const x = i * n + j;
    probs[x] = p;
    gold[x] = 1;
    if (x <= last) ordered = false;
    last = x;
    edgeI[e] = i;
    edgeJ[e++] = j;
  }
  if (!ordered) {
    e = 0;
    for (let x = 0; x < n * n; x++) {
      if (gold[x]) {
        edgeI[e] = Math.floor(x / n);
        edgeJ[e++] = x % n;
      }
    }
  }
  return { ...graphFields(payload, { n, causal, probs, gold, goldCount, edgeI, edgeJ }),
    ...methodFields(payload) };
}

/** The fields of a HeadData that come from its graph (a whole payload or `?part=graph`). */
function graphFields(payload, arrays) {
  return { layer: payload.layer, head: payload.head, ...arrays,
    goldSparsity: payload.gold_sparsity, pos: payload.pos };
}

/**
 * The method-specific fields of a head (Sparsefinder projections, centroids, Reformer buckets,
 * Routing members, the draws' seed) from a payload, or from its `?part=methods` alone
 * (session.js merges them into a head drawn from its graph: `withMethods`).
 */
export function methodFields(payload) {
  const proj = payload.proj;
  const rank = proj && proj.queries.length ? proj.queries[0].length : 0;
  const mapEntries = (obj, fn) => new Map(Object.entries(obj ?? {}).map(([k, v]) => [Number(k), fn(v)]));
  return {
    rank,
    qp: rank ? flatten(proj.queries, rank) : null,
    kp: rank ? flatten(proj.keys, rank) : null,
    centroids: mapEntries(payload.centroids, (rows) => flatten(rows, rank)),
    reformer: mapEntries(payload.reformer, (rounds) => rounds.map((r) => Int32Array.from(r))),
    routing: mapEntries(payload.routing, (m) => ({
      queries: m.queries.map((t) => Int32Array.from(t)),
      keys: m.keys.map((t) => Int32Array.from(t)),
    })),
    seed: payload.seed,
    payload,
    memo: new Map(),
  };
}

const ARRAYS = { u8: Uint8Array, u16: Uint16Array, f32: Float32Array };

/** A packed array of the payload ({dtype, shape, data}: base64, little-endian) as a typed array. */
function unpack(enc) {
  const Type = ARRAYS[enc.dtype];
  if (!Type) throw new Error(`unknown array type ${enc.dtype} in the head payload`);
  const bin = atob(enc.data);
  const bytes = new Uint8Array(bin.length);
  for (let x = 0; x < bin.length; x++) bytes[x] = bin.charCodeAt(x);
  return new Type(bytes.buffer);
}

/**
 * The graph of a `?part=graph` payload (its edges as packed CSR: each query's count of edges,
 * then every edge's key and exact float32 P, row-major; app/engine/payloads.py
 * `head_graph_body`). `methodsPending` stays true until `withMethods` adds the methods' part.
 * The payload's `edges` ([i, j, p] rows, as the full payload has them) are made on first read.
 */
function graphFromCsr(payload, causal) {
  const n = payload.n;
  const counts = unpack(payload.csr.counts);
  const edgeJ = Int32Array.from(unpack(payload.csr.cols));
  const p = unpack(payload.csr.p);
  const goldCount = edgeJ.length;
  const edgeI = new Int32Array(goldCount);
  const probs = new Float32Array(n * n);
  const gold = new Uint8Array(n * n);
  for (let i = 0, e = 0; i < n; i++) {
    for (let c = 0; c < counts[i]; c++, e++) {
      const x = i * n + edgeJ[e];
      edgeI[e] = i;
      probs[x] = p[e];
      gold[x] = 1;
    }
  }
  delete payload.edges;
  Object.defineProperty(payload, "edges", {
    configurable: true,
    get() {
      const rows = Array.from(p, (v, e) => [edgeI[e], edgeJ[e], v]);
      Object.defineProperty(this, "edges", { value: rows });
      return rows;
    },
  });
  return { ...graphFields(payload, { n, causal, probs, gold, goldCount, edgeI, edgeJ }),
    methodsPending: true };
}

/**
 * A head drawn from its graph with its methods' part (`?part=methods`) added: a new HeadData
 * (fresh memo) sharing the graph's arrays.
 * @param {HeadData} head
 * @param {object} part the methods' payload
 * @returns {HeadData}
 */
export function withMethods(head, part) {
  const payload = Object.defineProperties(
    { ...part },
    Object.getOwnPropertyDescriptors(head.payload), // the graph's fields, its lazy edges
  );
  return { ...head, ...methodFields({ ...part, seed: head.seed }), payload, methodsPending: false };
}

/**
 * A per-head memoised value: `make()` runs once per head and key.
 * @template T
 * @param {HeadData} head
 * @param {string} key
 * @param {() => T} make
 * @returns {T}
 */
export function memo(head, key, make) {
  if (!head.memo.has(key)) head.memo.set(key, make());
  return head.memo.get(key);
}
