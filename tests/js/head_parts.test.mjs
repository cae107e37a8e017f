/**
 * head.js / methods.js under node:test: a long text's head drawn from its graph part (packed
 * CSR, `?part=graph`) is the very head the full payload gives (P to the bit, edges in order),
 * its `edges` rows are made on demand, the methods' part completes it, and a method that needs
 * that part says it is loading instead of drawing a wrong mask.
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import { prepareHead, withMethods } from "../../frontend/js/head.js";
import {
  PAYLOAD_METHODS, PendingError, lacksData, learnMethods, predict,
} from "../../frontend/js/methods.js";

// the payload flags as GET /api/methods gives them (tests/app/test_method_seam.py checks the
// server's side; the page learns them from every analysis)
learnMethods([
  ...["reformer", "routing", "sf-distance", "sf-quantization", "sf-kmeans", "topk", "moba",
    "quest", "xattention", "sparge"].map((name) => ({ name, payload: true })),
  ...["window", "fixed", "bigbird"].map((name) => ({ name, payload: false })),
]);

/** A deterministic PRNG (mulberry32). */
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const b64 = (typed) => Buffer.from(typed.buffer, typed.byteOffset, typed.byteLength).toString("base64");

/** A random head: the full payload's edges and the same graph packed as the server packs it. */
function payloads(n, seed, density = 0.05) {
  const r = rng(seed);
  const edges = [];
  const counts = new Uint16Array(n);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < n; j++) {
      if (r() < density || j === i) {
        edges.push([i, j, Math.fround(r() + 1e-6)]);
        counts[i]++;
      }
    }
  }
  const cols = Uint16Array.from(edges, (e) => e[1]);
  const p = Float32Array.from(edges, (e) => e[2]);
  const common = { layer: 1, head: 2, n, gold_sparsity: 0.9, seed: 7, pos: Array(n).fill("NOUN") };
  const full = { ...common, edges, proj: null, centroids: {}, reformer: {}, routing: {} };
  const graph = {
    ...common, edges: [], lod: { tile: 256 },
    csr: {
      counts: { dtype: "u16", shape: [n], data: b64(counts) },
      cols: { dtype: "u16", shape: [cols.length], data: b64(cols) },
      p: { dtype: "f32", shape: [p.length], data: b64(p) },
    },
  };
  return { full, graph };
}

test("the graph part makes the same head as the full payload", () => {
  for (const [n, seed] of [[1, 0], [37, 1], [300, 2]]) {
    const { full, graph } = payloads(n, seed);
    const a = prepareHead(full, false);
    const b = prepareHead(graph, false);
    assert.deepEqual(b.probs, a.probs);
    assert.deepEqual(b.gold, a.gold);
    assert.deepEqual(b.edgeI, a.edgeI);
    assert.deepEqual(b.edgeJ, a.edgeJ);
    assert.equal(b.goldCount, a.goldCount);
    assert.equal(b.seed, 7);
    assert.equal(b.methodsPending, true);
    assert.equal(a.methodsPending, undefined);
    assert.deepEqual(b.payload.edges, full.edges); // made on first read
    assert.equal(b.payload.edges, b.payload.edges); // ... once
  }
});

test("the methods' part completes the head", () => {
  const n = 40;
  const { graph } = payloads(n, 3);
  const g = prepareHead(graph, false);
  const queries = Array.from({ length: n }, (_, t) => [t, 0.5]);
  const part = {
    layer: 1, head: 2, n, seed: 7, proj: { queries, keys: queries },
    centroids: { 2: [[0, 0], [20, 0.5]] }, reformer: {}, routing: {},
    topk: { k_max: 20, order: { dtype: "u8", shape: [0], data: "" } },
  };
  const whole = withMethods(g, part);
  assert.equal(whole.methodsPending, false);
  assert.equal(whole.rank, 2);
  assert.equal(whole.probs, g.probs); // the graph's arrays are shared
  assert.equal(whole.payload.topk.k_max, 20);
  assert.deepEqual(whole.payload.edges, g.payload.edges);
  assert.equal(whole.payload.csr, graph.csr);
  assert.ok(whole.memo !== g.memo);
  // sf-distance draws the same mask on the whole head as on a full payload with the same parts
  const m = predict(whole, "sf-distance", { t: 4, window: 0, globals: false });
  assert.equal(m.length, n * n);
  assert.equal(m[0], 1); // q̃_0 = k̃_0
  assert.equal(m[5], 0); // ‖q̃_0 − k̃_5‖² = 25 ≥ 4
});

test("the payload methods are the API's flagged ones", () => {
  assert.equal(PAYLOAD_METHODS.size, 10);
  assert.ok(PAYLOAD_METHODS.has("topk") && !PAYLOAD_METHODS.has("bigbird"));
});

test("a method that needs the methods' part waits for it; the others draw at once", () => {
  const { graph } = payloads(30, 4);
  const g = prepareHead(graph, false);
  for (const name of PAYLOAD_METHODS) {
    assert.throws(() => predict(g, name, {}), PendingError, name);
  }
  const w = predict(g, "window", { window: 3, globals: false });
  assert.equal(w[0 * 30 + 1], 1);
  assert.equal(w[0 * 30 + 2], 0);
});

test("a graph sent with one method's data draws that method at once, the others wait", () => {
  const n = 30;
  const { graph } = payloads(n, 5);
  const queries = Array.from({ length: n }, (_, t) => [t, 0.5]);
  // `?part=graph&method=sf-distance`: the graph and sf-distance's data (its projections) only
  const g = prepareHead({ ...graph, proj: { queries, keys: queries } }, false, ["sf-distance"]);
  assert.equal(g.methodsPending, true);
  assert.ok(!lacksData(g, "sf-distance") && !lacksData(g, "window"));
  const m = predict(g, "sf-distance", { t: 4, window: 0, globals: false });
  assert.equal(m[0], 1);
  assert.equal(m[5], 0);
  for (const name of PAYLOAD_METHODS) {
    if (name === "sf-distance") continue;
    assert.ok(lacksData(g, name), name);
    assert.throws(() => predict(g, name, {}), PendingError, name);
  }
  // the rest arrives: every method draws, sf-distance the same mask
  const whole = withMethods(g, {
    layer: 1, head: 2, n, seed: 7, proj: { queries, keys: queries }, centroids: {},
    reformer: {}, routing: {},
  });
  assert.ok(![...PAYLOAD_METHODS].some((name) => lacksData(whole, name)));
  assert.deepEqual(predict(whole, "sf-distance", { t: 4, window: 0, globals: false }), m);
  // no method named: the graph alone waits for every method that needs data
  const bare = prepareHead(payloads(n, 5).graph, false, []);
  assert.ok([...PAYLOAD_METHODS].every((name) => lacksData(bare, name)));
});
