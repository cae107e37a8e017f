"""Oracle budgets (definitions §8; The Sparse Frontier, Nawrot et al. 2025): how many keys, and how
much attention mass, each query needs to recover a share ρ of its true support.

For query i with support G_i (P_ij > 0) and a level ρ (0.9, 0.99), let c_i = the least c with
c / |G_i| ≥ ρ (compared in float64 as recall is), the number of gold keys to recover:

- k budget: the least k whose top-k keys by score (``PredictContext.head_scores``; ties to the
  lower index, causal keys j > i last — the oracle ``topk``) hold c_i gold keys, i.e. the
  1-based score rank of the c_i-th best-ranked gold key. Entmax is monotone in the score, so
  this is c_i itself unless the recomputed scores reorder a near tie;
- p budget: the attention mass of the c_i gold keys with the largest P (ties to the lower
  index), added in that order in float64. The oracle ``topp`` keeps exactly those keys for
  every p in (mass of the first c_i − 1, this mass], so this is the least mass top-p must keep
  (any smaller p keeps fewer keys).

A budget is a distribution over queries: :func:`head_budgets` gives each query's values,
:func:`summarize` their quantiles and mean, :func:`budgets_json` every head's and the pooled
distribution over all heads' queries (``sparsescope analyze --json``, GET
/api/analyses/{id}/budgets). Quantiles are numpy's linear interpolation.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .methods.context import PredictContext

#: The recall levels of definitions §8.
LEVELS = (0.9, 0.99)
#: The quantiles reported per distribution.
QUANTILES = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)


def needed(g: np.ndarray, level: float) -> np.ndarray:
    """c = the least integer with c / g ≥ level (float64, as recall is compared), per row; 0
    where g = 0."""
    g = np.asarray(g, dtype=np.int64)
    c = np.ceil(level * g).astype(np.int64)
    gs = np.maximum(g, 1)
    c = np.where((c > 0) & ((c - 1) / gs >= level), c - 1, c)  # rounding put c one too high
    c = np.where(c / gs < level, c + 1, c)  # ... or one too low
    return np.where(g > 0, np.minimum(c, g), 0)


def gold_ranks(scores: np.ndarray, ei: np.ndarray, ej: np.ndarray) -> np.ndarray:
    """The 0-based score rank of every gold key (ei, ej) (row-major) in its row of ``scores``
    (n, n): the keys with a higher score, then the equal ones before it (``selection.
    stable_order``). Only keys scoring at least the row's lowest gold score can rank before a
    gold key, so those candidates alone are ordered (about |G| of them: entmax keeps the top
    scores) — O(n²) comparisons and O(|G| log |G|) sorting, no (|G|, n) array."""
    n = scores.shape[0]
    if not len(ei):
        return np.zeros(0, dtype=np.int64)
    low = np.full(n, np.inf, dtype=np.float32)
    np.minimum.at(low, ei, scores[ei, ej])
    ci, cj = np.nonzero(scores >= low[:, None])  # candidates, row-major (every gold key too)
    cs = scores[ci, cj]
    order = np.lexsort((cj, -cs, ci))  # per row: score descending, ties to the lower key
    ci, cj = ci[order], cj[order]
    starts = np.searchsorted(ci, np.arange(n))
    pos = np.arange(len(ci)) - starts[ci]  # rank within the row
    # each gold key's place among the candidates: candidates keyed by (row, key)
    key = ci * n + cj
    at = np.argsort(key, kind="stable")
    found = at[np.searchsorted(key[at], ei * n + ej)]
    return pos[found]


def head_budgets(ctx: PredictContext, layer: int, head: int,
                 levels: Sequence[float] = LEVELS) -> dict:  # fmt: skip
    """Per query of head (layer, head): ``support`` |G_i| (n,) and, for each level,
    ``k[level]`` (n,) int and ``p[level]`` (n,) float64 (module docstring). Reads the head's
    edges from the sparse store and one (n, n) score matrix (:func:`gold_ranks`)."""
    n = ctx.n
    ei, ej, pe32 = ctx.head_edges(layer, head)  # row-major
    scores = ctx.head_scores(layer, head)
    if ctx.causal:
        scores = np.where(np.tri(n, dtype=bool), scores, np.float32(-np.inf))
    support = np.bincount(ei, minlength=n)
    starts = np.concatenate([[0], np.cumsum(support)[:-1]])
    rank = gold_ranks(scores, ei, ej)
    del scores
    # per row: gold keys by rank, and by P descending (ties to the lower key) with the mass so far
    by_rank = np.lexsort((rank, ei))
    pe = pe32.astype(np.float64)
    by_p = np.lexsort((ej, -pe, ei))
    cum = np.zeros(len(ei))
    pos = np.arange(len(ei)) - np.repeat(starts, support)  # position within the row
    sp = pe[by_p]
    for t in range(int(support.max()) if len(ei) else 0):  # rank by rank, each row from 0
        at = np.flatnonzero(pos == t)
        cum[at] = sp[at] + (cum[at - 1] if t else 0.0)
    out: dict = {"support": support, "k": {}, "p": {}}
    for lv in levels:
        c = needed(support, lv)
        at = starts + np.maximum(c, 1) - 1  # the c-th of each row (rows have >= 1 gold key)
        has = support > 0
        k = np.zeros(n, dtype=np.int64)
        p = np.zeros(n)
        k[has] = rank[by_rank][at[has]] + 1
        p[has] = cum[at[has]]
        out["k"][lv], out["p"][lv] = k, p
    return out


def summarize(values: np.ndarray) -> dict:
    """``{"mean", "q": [quantiles of QUANTILES]}`` of a distribution (6 decimals)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return {"mean": None, "q": [None] * len(QUANTILES)}
    return {"mean": round(float(v.mean()), 6),
            "q": [round(float(x), 6) for x in np.quantile(v, QUANTILES)]}  # fmt: skip


def _key(level: float) -> str:
    return format(level, "g")


def head_json(ctx: PredictContext, layer: int, head: int, values: bool = True,
              levels: Sequence[float] = LEVELS) -> dict:  # fmt: skip
    """One head's budgets as JSON: the quantiles per level, and (``values``) every query's."""
    b = head_budgets(ctx, layer, head, levels)
    out: dict = {"layer": layer, "head": head, "support": summarize(b["support"])}
    for kind in ("k", "p"):
        out[kind] = {}
        for lv in levels:
            d = summarize(b[kind][lv])
            if values:
                vals = b[kind][lv]
                d["values"] = vals.tolist() if kind == "k" else [round(float(x), 6) for x in vals]
            out[kind][_key(lv)] = d
    if values:
        out["support"]["values"] = b["support"].tolist()
    return out


def budgets_json(ctx: PredictContext, levels: Sequence[float] = LEVELS) -> dict:
    """Every head's budget distributions (quantiles, mean) and the pooled distribution over all
    heads' queries: ``{"levels", "quantiles", "n", "causal", "heads": [...], "pooled": {…}}``."""
    heads, pooled = [], {"k": {lv: [] for lv in levels}, "p": {lv: [] for lv in levels}}
    support = []
    for li in range(ctx.layers):
        for hi in range(ctx.heads):
            b = head_budgets(ctx, li, hi, levels)
            entry: dict = {"layer": li, "head": hi, "support": summarize(b["support"])}
            support.append(b["support"])
            for kind in ("k", "p"):
                entry[kind] = {_key(lv): summarize(b[kind][lv]) for lv in levels}
                for lv in levels:
                    pooled[kind][lv].append(b[kind][lv])
            heads.append(entry)
    return {
        "levels": list(levels),
        "quantiles": list(QUANTILES),
        "n": ctx.n,
        "causal": ctx.causal,
        "heads": heads,
        "pooled": {
            "support": summarize(np.concatenate(support)),
            **{
                kind: {_key(lv): summarize(np.concatenate(pooled[kind][lv])) for lv in levels}
                for kind in ("k", "p")
            },
        },  # fmt: skip
    }
