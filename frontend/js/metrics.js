/**
 * Metrics of a predicted mask against the ground-truth entmax graph: the JS twin of
 * sparse_core/metrics.py (SPEC §4). M the predicted mask, G = {(i, j) : P_ij > 0}, V the valid
 * region (all n² pairs, or j ≤ i when causal, diagonal in):
 *
 *     sparsity(M)  = 1 − |M ∩ V| / |V|
 *     recall(M)    = |M ∩ G| / |G|           (1 when |G| = 0)
 *     precision(M) = |M ∩ G ∩ V| / |M ∩ V|   (1 when |M ∩ V| = 0)
 *     exact(M)     = |{i : G_i ⊆ M_i}| / n   (share of queries whose entmax row is unchanged)
 *
 * All counts are integers and every ratio is one IEEE division, so the numbers equal Python's
 * float64 results exactly.
 */

/**
 * @typedef {object} Metrics
 * @property {number} recall
 * @property {number} sparsity
 * @property {number} exact
 * @property {number} precision
 */

/**
 * All four metrics in one pass over the n × n cells.
 * @param {Uint8Array} mask predicted mask (n × n, 0/1)
 * @param {Uint8Array} gold ground-truth graph (n × n, 0/1)
 * @param {number} n
 * @param {boolean} causal
 * @returns {Metrics}
 */
export function computeMetrics(mask, gold, n, causal) {
  let kept = 0; // |M ∩ V|
  let hit = 0; // |M ∩ G|
  let hitValid = 0; // |M ∩ G ∩ V| (equal to hit for finished masks; counted apart as in Python)
  let goldCount = 0; // |G|
  let exactRows = 0;
  for (let i = 0; i < n; i++) {
    const row = i * n;
    const end = causal ? i + 1 : n; // V_i
    let covered = true;
    for (let j = 0; j < n; j++) {
      const m = mask[row + j];
      const g = gold[row + j];
      if (g) {
        goldCount++;
        if (m) {
          hit++;
          if (j < end) hitValid++;
        } else covered = false;
      }
      if (m && j < end) kept++;
    }
    if (covered) exactRows++;
  }
  const validCount = causal ? (n * (n + 1)) / 2 : n * n;
  return {
    recall: goldCount > 0 ? hit / goldCount : 1.0,
    sparsity: 1.0 - (validCount > 0 ? kept / validCount : 0.0),
    exact: n > 0 ? exactRows / n : 1.0,
    precision: kept > 0 ? hitValid / kept : 1.0,
  };
}

/**
 * Gold sparsity of a head: sparsity(G) = 1 − |G| / |V|.
 * @param {number} goldCount |G|
 */
export function goldSparsity(goldCount, n, causal) {
  const validCount = causal ? (n * (n + 1)) / 2 : n * n;
  return 1.0 - goldCount / validCount;
}

/**
 * Indices of the sparsity–recall Pareto frontier (SPEC §4, metrics.pareto_front): sort by
 * sparsity descending (ties: higher recall first, then lower index), keep a point iff its recall
 * is strictly above every recall kept before it. NaN points are never kept.
 * @param {Array<[number, number]>} points [sparsity, recall] pairs
 * @returns {number[]} kept indices, in order of descending sparsity
 */
export function paretoFront(points) {
  const order = points
    .map((_, k) => k)
    .filter((k) => !Number.isNaN(points[k][0]) && !Number.isNaN(points[k][1]))
    .sort((a, b) => points[b][0] - points[a][0] || points[b][1] - points[a][1] || a - b);
  const kept = [];
  let best = -Infinity;
  for (const k of order) {
    if (points[k][1] > best) {
      kept.push(k);
      best = points[k][1];
    }
  }
  return kept;
}
