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
 * float64 results exactly (tests/js/check_twins.mjs compares every key `computeMetrics` returns
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
