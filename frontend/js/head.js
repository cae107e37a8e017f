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
 * @returns {HeadData}
 */
export function prepareHead(payload, causal) {
  const n = payload.n;
  const probs = new Float32Array(n * n);
  const gold = new Uint8Array(n * n);
  for (const [i, j, p] of payload.edges) {
    probs[i * n + j] = p; // p is sent exactly (payloads.f32_exact): the float32 Python holds
    gold[i * n + j] = 1;
  }
  // the gold edges in row-major order (the drawing order of the marks)
  const goldCount = payload.edges.length;
  const edgeI = new Int32Array(goldCount);
  const edgeJ = new Int32Array(goldCount);
  let e = 0;
  for (let x = 0; x < n * n; x++) {
    if (gold[x]) {
      edgeI[e] = Math.floor(x / n);
      edgeJ[e++] = x % n;
    }
  }
  const proj = payload.proj;
  const rank = proj && proj.queries.length ? proj.queries[0].length : 0;
  const mapEntries = (obj, fn) => new Map(Object.entries(obj ?? {}).map(([k, v]) => [Number(k), fn(v)]));
  return {
    layer: payload.layer,
    head: payload.head,
    n,
    causal,
    probs,
    gold,
    goldCount,
    edgeI,
    edgeJ,
    goldSparsity: payload.gold_sparsity,
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
    pos: payload.pos,
    payload,
    memo: new Map(),
  };
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
