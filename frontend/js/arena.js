/**
 * Today's sparse-attention methods (the "arena", definitions §8, docs/methods.md), recomputed in the
 * browser from one head's payload: the JS twin of sparse_core/methods/streaming.py, oracle.py,
 * blocks.py and block_scores.py. Each function returns the method's own mask (n × n, 0/1)
 * before `patterns.finish` (window / globals add-ons, then ∩ V).
 *
 * What comes from where, so that every mask equals Python's cell for cell:
 * - streaming: positions only;
 * - topp, h2o, vertical-slash: the exact probabilities P (the payload's edges carry each
 *   float32 exactly); sums are repeated in Python's order and precision (H2O's masses in
 *   float32, one query at a time, with Math.fround; top-p's and vertical-slash's in doubles);
 * - topk, moba, quest, and the learned indexer and seer (definitions §12): each row's order
 *   (keys, blocks) computed by Python (payload, base64 bytes), so k only cuts it;
 * - xattention, sparge: the block estimates computed by Python (float32, bit-exact); the
 *   selection — a sort and a cumulative sum — is repeated here in the same order.
 * Ties always go to the lower index (stable orders).
 */

import { memo } from "./head.js";

const ARRAYS = { u8: Uint8Array, u16: Uint16Array, f32: Float32Array, f64: Float64Array };

/** A base64 array of the payload ({dtype, shape, data}, little-endian) as a typed array. */
export function decode(enc) {
  const bin = atob(enc.data);
  const bytes = new Uint8Array(bin.length);
  for (let x = 0; x < bin.length; x++) bytes[x] = bin.charCodeAt(x);
  const Type = ARRAYS[enc.dtype];
  if (!Type) throw new Error(`unknown array type ${enc.dtype} in the head payload`);
  return new Type(bytes.buffer);
}

/** A part of the payload, decoded once per head. */
function part(head, key, get) {
  return memo(head, `arena:${key}`, () => {
    const enc = get(head.payload ?? {});
    if (!enc) throw new Error(`this head's payload has no ${key} (reload the analysis)`);
    return decode(enc);
  });
}

/** Indices 0..m−1 sorted by value descending, equal values by index (Python's stable argsort). */
function descOrder(values, m) {
  const idx = Array.from({ length: m }, (_, t) => t);
  idx.sort((a, b) => (values[a] > values[b] ? -1 : values[a] < values[b] ? 1 : a - b));
  return idx;
}

/** OR the columns of block `b` (size B, ragged last) into row i. */
function fillBlock(m, n, i, b, B) {
  const lo = b * B;
  m.fill(1, i * n + lo, i * n + Math.min(n, lo + B));
}

// ----------------------------------------------------------------------------- token methods

/** StreamingLLM: j < sinks, or |i − j| ≤ recent. */
export function streaming(head, sinks, recent) {
  const n = head.n;
  const m = new Uint8Array(n * n);
  for (let i = 0; i < n; i++) {
    m.fill(1, i * n, i * n + Math.min(sinks, n));
    m.fill(1, i * n + Math.max(0, i - recent), i * n + Math.min(n - 1, i + recent) + 1);
  }
  return m;
}

/** Oracle top-k: the first k keys of each row's order (the payload's, by true score). */
export function topk(head, k) {
  const { n } = head;
  const kmax = head.payload?.topk?.k_max;
  if (!kmax) throw new Error("this head's payload has no top-k orders");
  if (k > kmax) throw new RangeError(`k must be at most ${kmax}, got ${k}`);
  const order = part(head, "topk", (p) => p.topk?.order);
  const m = new Uint8Array(n * n);
  for (let i = 0; i < n; i++) for (let t = 0; t < k; t++) m[i * n + order[i * kmax + t]] = 1;
  return m;
}

/**
 * Lightning indexer (methods/trained.py, definitions §12): the first k keys of each row's order
 * by the learned index score (the payload's; one order per layer, every head alike).
 */
export function indexer(head, k) {
  const { n } = head;
  const ix = head.payload?.indexer;
  if (!ix) throw new Error("this method needs a trained indexer (none for this model and α)");
  if (k > ix.k_max) throw new RangeError(`k must be at most ${ix.k_max}, got ${k}`);
  const order = part(head, "indexer", (p) => p.indexer?.order);
  const m = new Uint8Array(n * n);
  for (let i = 0; i < n; i++) for (let t = 0; t < k; t++) m[i * n + order[i * ix.k_max + t]] = 1;
  return m;
}

/**
 * SeerAttention's AttnGate (methods/trained.py): each query block keeps the first k key blocks
 * of its order by the learned gate score (the payload's, T × T for block size B).
 */
export function seer(head, B, k) {
  const n = head.n;
  const T = Math.ceil(n / B);
  if (!head.payload?.seer?.[String(B)]) {
    throw new Error("this method needs a trained AttnGate (none for this model and α)");
  }
  const order = part(head, `seer-${B}`, (p) => p.seer?.[String(B)]);
  const kk = Math.min(k, T);
  const sel = new Uint8Array(T * T);
  for (let a = 0; a < T; a++) for (let t = 0; t < kk; t++) sel[a * T + order[a * T + t]] = 1;
  return blockMask(sel, n, B);
}

/** Per row: the gold keys by P descending (ties by key) and the mass before each, from 0. */
function toppRows(head) {
  return memo(head, "arena:topp", () => {
    const { n, probs, gold } = head;
    const rows = [];
    for (let i = 0; i < n; i++) {
      const keys = [];
      for (let j = 0; j < n; j++) if (gold[i * n + j]) keys.push(j);
      keys.sort((a, b) => probs[i * n + b] - probs[i * n + a] || a - b);
      const before = new Float64Array(keys.length);
      let cum = 0;
      keys.forEach((j, t) => {
        before[t] = cum;
        cum = cum + probs[i * n + j];
      });
      rows.push({ keys, before });
    }
    return rows;
  });
}

/** Oracle top-p: the t-th key of a row is kept iff t = 0 or the mass before it is < p. */
export function topp(head, p) {
  const n = head.n;
  const m = new Uint8Array(n * n);
  toppRows(head).forEach(({ keys, before }, i) => {
    keys.forEach((j, t) => {
      if (t === 0 || before[t] < p) m[i * n + j] = 1;
    });
  });
  return m;
}

/** H2O's accumulated masses A (n × n, float32 sums one query at a time) and each row's order. */
function h2oOrders(head) {
  return memo(head, "arena:h2o", () => {
    const { n, probs, causal } = head;
    const f = Math.fround;
    const A = new Float32Array(n * n);
    if (causal) {
      for (let i = 1; i < n; i++) {
        for (let j = 0; j < n; j++) A[i * n + j] = f(A[(i - 1) * n + j] + probs[(i - 1) * n + j]);
      }
    } else {
      const total = new Float32Array(n);
      for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) total[j] = f(total[j] + probs[i * n + j]);
      for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) A[i * n + j] = f(total[j] - probs[i * n + j]);
    }
    const orders = new Int32Array(n * n);
    for (let i = 0; i < n; i++) orders.set(descOrder(A.subarray(i * n, (i + 1) * n), n), i * n);
    return orders;
  });
}

/** H2O: each row's k heavy hitters (most accumulated mass) and the keys with |i − j| ≤ recent. */
export function h2o(head, recent, k) {
  const n = head.n;
  const orders = h2oOrders(head);
  const m = streaming(head, 0, recent);
  const kk = Math.min(k, n);
  for (let i = 0; i < n; i++) for (let t = 0; t < kk; t++) m[i * n + orders[i * n + t]] = 1;
  return m;
}

/** Vertical-slash: column and diagonal masses of the last queries' rows (doubles, in order). */
function vsScores(head, last) {
  return memo(head, `arena:vs-${last}`, () => {
    const { n, probs } = head;
    const cols = new Float64Array(n);
    const diag = new Float64Array(2 * n - 1);
    for (let i = n - last; i < n; i++) {
      for (let j = 0; j < n; j++) {
        const p = probs[i * n + j];
        cols[j] += p;
        diag[i - j + n - 1] += p;
      }
    }
    return { cols, diag };
  });
}

/** MInference vertical-slash: the top columns and the top diagonals i − j (causal: d ≥ 0). */
export function verticalSlash(head, last, verticals, slashes) {
  const { n, causal } = head;
  const { cols, diag } = vsScores(head, last);
  const colKeep = descOrder(cols, n).slice(0, Math.min(verticals, n));
  const first = causal ? n - 1 : 0; // candidate offsets: index d + n − 1 >= first
  const cand = diag.slice(first);
  const diagKeep = descOrder(cand, cand.length).slice(0, Math.min(slashes, cand.length));
  const m = new Uint8Array(n * n);
  for (let i = 0; i < n; i++) {
    for (const j of colKeep) m[i * n + j] = 1;
    for (const x of diagKeep) {
      const j = i - (x + first - (n - 1));
      if (j >= 0 && j < n) m[i * n + j] = 1;
    }
  }
  return m;
}

// ----------------------------------------------------------------------------- block methods

/** MoBA / Quest: each query's first k blocks of the payload's order for block size B. */
export function blockRouting(head, name, B, k) {
  const n = head.n;
  const T = Math.ceil(n / B);
  const order = part(head, `${name}-${B}`, (p) => p[name]?.[String(B)]);
  const kk = Math.min(k, T);
  const m = new Uint8Array(n * n);
  for (let i = 0; i < n; i++) for (let t = 0; t < kk; t++) fillBlock(m, n, i, order[i * T + t], B);
  return m;
}

/** Expand per-query-block choices (T × T, 0/1) into an n × n mask. */
function blockMask(sel, n, B) {
  const T = Math.ceil(n / B);
  const m = new Uint8Array(n * n);
  for (let i = 0; i < n; i++) {
    const a = Math.floor(i / B);
    for (let b = 0; b < T; b++) if (sel[a * T + b]) fillBlock(m, n, i, b, B);
  }
  return m;
}

/**
 * XAttention's selection (block_scores.xattn_select): per query block the forced blocks (its
 * diagonal, and block 0 when causal) count first, then the other valid blocks by estimate
 * descending while the share before them is < τ · total.
 */
export function xattention(head, B, S, tau) {
  const { n, causal } = head;
  const T = Math.ceil(n / B);
  const E = part(head, `xattention-${B}-${S}`, (p) => p.xattention?.[String(B)]?.[String(S)]);
  const sel = new Uint8Array(T * T);
  for (let a = 0; a < T; a++) {
    const valid = (b) => !causal || b <= a;
    const forced = (b) => b === a || (causal && b === 0);
    let total = 0;
    let cum = 0;
    for (let b = 0; b < T; b++) if (valid(b)) total += E[a * T + b];
    for (let b = 0; b < T; b++) {
      if (valid(b) && forced(b)) {
        cum += E[a * T + b];
        sel[a * T + b] = 1;
      }
    }
    const rest = [];
    for (let b = 0; b < T; b++) if (valid(b) && !forced(b)) rest.push(b);
    rest.sort((x, y) => E[a * T + y] - E[a * T + x] || x - y);
    const need = tau * total;
    for (const b of rest) {
      if (!(cum < need)) break;
      sel[a * T + b] = 1;
      cum += E[a * T + b];
    }
  }
  return blockMask(sel, n, B);
}

/**
 * SpargeAttn (block_scores.sparge_select): similar query blocks (sim ≥ θ) keep the fewest
 * similar key blocks, by u descending, whose sum reaches τ · total (at least one); dissimilar
 * key blocks are kept for every query block, dissimilar query blocks keep every block.
 */
export function sparge(head, B, theta, tau) {
  const { n, causal } = head;
  const T = Math.ceil(n / B);
  const parts = head.payload?.sparge?.[String(B)];
  if (!parts) throw new Error(`this head's payload has no SpargeAttn estimates for B = ${B}`);
  const u = part(head, `sparge-${B}`, (p) => p.sparge?.[String(B)]?.u);
  const qs = parts.qsim.map((v) => v >= theta);
  const ks = parts.ksim.map((v) => v >= theta);
  const sel = new Uint8Array(T * T);
  for (let a = 0; a < T; a++) {
    for (let b = 0; b < T; b++) if (!ks[b] || !qs[a]) sel[a * T + b] = 1;
    if (!qs[a]) continue;
    const elig = [];
    let total = 0;
    for (let b = 0; b < T; b++) {
      if (ks[b] && (!causal || b <= a)) {
        elig.push(b);
        total += u[a * T + b];
      }
    }
    elig.sort((x, y) => u[a * T + y] - u[a * T + x] || x - y);
    const need = tau * total;
    let cum = 0;
    elig.forEach((b, t) => {
      if (t === 0 || cum < need) sel[a * T + b] = 1;
      cum += u[a * T + b];
    });
  }
  return blockMask(sel, n, B);
}

/**
 * The arena's predictors, in the registry's order (sparse_core.methods.METHODS): name ->
 * (head, params) => the method's own mask before `finish`.
 */
export const ARENA = Object.freeze({
  streaming: (h, p) => streaming(h, p.sinks, p.recent),
  topk: (h, p) => topk(h, p.k),
  topp: (h, p) => topp(h, p.p),
  h2o: (h, p) => h2o(h, p.recent, p.k),
  moba: (h, p) => blockRouting(h, "moba", p.block, p.topk),
  quest: (h, p) => blockRouting(h, "quest", p.page, p.topk),
  xattention: (h, p) => xattention(h, p.block, p.stride, p.tau),
  "vertical-slash": (h, p) => verticalSlash(h, p.last, p.verticals, p.slashes),
  sparge: (h, p) => sparge(h, p.block, p.theta, p.tau),
});
