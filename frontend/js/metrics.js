/**
 * Metrics of a predicted mask against the ground-truth entmax graph: the JS twin of
 * sparse_core/metrics.py (definitions §4). M the predicted mask, G = {(i, j) : P_ij > 0}, V the valid
 * region (all n² pairs, or j ≤ i when causal, diagonal in):
 *
 *     sparsity(M)  = 1 − |M ∩ V| / |V|
 *     recall(M)    = |M ∩ G| / |G|           (1 when |G| = 0)
 *     precision(M) = |M ∩ G ∩ V| / |M ∩ V|   (1 when |M ∩ V| = 0)
 *     exact(M)     = |{i : G_i ⊆ M_i}| / n   (share of queries whose entmax row is unchanged)
 *     mass_recall(M) = Σ_{(i,j) ∈ M} P_ij / n (definitions §8: the attention mass kept, per query)
 *     block_sparsity[B] = |{counted B × B tiles with no pair of M ∩ V}| / |{counted tiles}|
 *
 * Block sparsity: the n × n grid cut into T × T tiles, T = ⌈n / B⌉, the last row and
 * column of tiles ragged when B does not divide n; a tile is counted iff it holds a pair of V
 * (all T² tiles, or the T(T+1)/2 tiles on and below the diagonal when causal). It is what a
 * block-sparse kernel (FlashAttention / FlexAttention tiles: 128) can skip.
 *
 * All counts are integers and every ratio is one IEEE division, so the numbers equal Python's
 * float64 results exactly (mass recall is a float sum, added here in row-major order: it agrees
 * with Python to ~1e-15, not to the bit) (tests/js/check_twins.mjs compares every key `computeMetrics` returns
 * with golden figures from sparse_core.metrics; a new metric is a new key on both sides). The
 * Pareto frontiers the pages draw are the server's (sparse_core.pareto); no frontier is computed
 * in the browser.
 */

/**
 * @typedef {object} Metrics
 * @property {number} recall
 * @property {number} sparsity
 * @property {number} exact
 * @property {number} precision
 * @property {number} [mass_recall] when the probabilities are given
 * @property {Object<string, number>} block_sparsity tile size ("16" … "128") -> block sparsity
 */

/** The tile sizes of block sparsity (sparse_core.metrics.BLOCKS). */
export const BLOCKS = [16, 32, 64, 128];

/**
 * Every metric in one pass over the n × n cells.
 * @param {Uint8Array} mask predicted mask (n × n, 0/1)
 * @param {Uint8Array} gold ground-truth graph (n × n, 0/1)
 * @param {number} n
 * @param {boolean} causal
 * @param {number[]} [blocks] tile sizes of block_sparsity (default BLOCKS)
 * @param {Float32Array|null} [probs] P (n × n): mass recall is computed when given
 * @returns {Metrics}
 */
export function computeMetrics(mask, gold, n, causal, blocks = BLOCKS, probs = null) {
  // one pass marks the filled tiles of the finest grid, side = gcd of the sizes (16 for BLOCKS):
  // one flag per kept cell whatever the number of sizes; each size is read off it at the end
  const side = blocks.reduce(gcd, 0) || 1;
  const tg = Math.ceil(n / side);
  const fine = new Uint8Array(tg * tg);
  let kept = 0; // |M ∩ V|
  let hit = 0; // |M ∩ G|
  let hitValid = 0; // |M ∩ G ∩ V| (equal to hit for finished masks; counted apart as in Python)
  let goldCount = 0; // |G|
  let exactRows = 0;
  let mass = 0; // Σ P over M ∩ G
  for (let i = 0; i < n; i++) {
    const row = i * n;
    const end = causal ? i + 1 : n; // V_i
    let covered = true;
    const base = Math.floor(i / side) * tg; // this row's first fine tile
    for (let j = 0; j < n; j++) {
      const m = mask[row + j];
      const g = gold[row + j];
      if (g) {
        goldCount++;
        if (m) {
          hit++;
          if (j < end) hitValid++;
          if (probs) mass += probs[row + j];
        } else covered = false;
      }
      if (m && j < end) {
        kept++;
        fine[base + Math.floor(j / side)] = 1;
      }
    }
    if (covered) exactRows++;
  }
  const validCount = causal ? (n * (n + 1)) / 2 : n * n;
  const out = {
    recall: goldCount > 0 ? hit / goldCount : 1.0,
    sparsity: 1.0 - (validCount > 0 ? kept / validCount : 0.0),
    exact: n > 0 ? exactRows / n : 1.0,
    precision: kept > 0 ? hitValid / kept : 1.0,
  };
  if (probs) out.mass_recall = n > 0 ? mass / n : 1.0;
  out.block_sparsity = blockSparsity(fine, tg, side, n, blocks, causal);
  return out;
}

const gcd = (a, b) => (b === 0 ? a : gcd(b, a % b));

/**
 * Block sparsity per tile size from the filled tiles of the finest grid (side g, tg × tg tiles;
 * only tiles with a pair of M ∩ V are flagged, so every flagged tile is counted). A size b is a
 * multiple of g, so fine tile (p, q) lies inside tile (⌊p·g/b⌋, ⌊q·g/b⌋) of size b, ragged
 * last tiles included.
 * @param {Uint8Array} fine filled flags of the fine tiles, row-major
 * @param {number} tg fine tiles per side
 * @param {number} g fine tile side
 * @param {number} n
 * @param {number[]} blocks
 * @param {boolean} causal
 * @returns {Object<string, number>}
 */
function blockSparsity(fine, tg, g, n, blocks, causal) {
  const out = {};
  for (const b of blocks) {
    const t = Math.ceil(n / b);
    const r = b / g;
    const full = new Uint8Array(t * t);
    for (let p = 0; p < tg; p++) {
      const row = Math.floor(p / r) * t;
      for (let q = 0; q < tg; q++) if (fine[p * tg + q]) full[row + Math.floor(q / r)] = 1;
    }
    const counted = causal ? (t * (t + 1)) / 2 : t * t;
    let filled = 0;
    for (let k = 0; k < full.length; k++) filled += full[k];
    out[String(b)] = counted > 0 ? (counted - filled) / counted : 1.0;
  }
  return out;
}
