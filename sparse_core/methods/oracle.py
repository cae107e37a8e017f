"""The oracles of the arena (definitions §8): top-k by the true scores and top-p by the true
attention.

Neither is a practical method (each reads what a sparse kernel would have to compute first);
they bound what a per-query budget can achieve, and top-p is the budget Twilight targets.

- ``topk``: per query i the k keys with the largest score s_ij (the model's own scores,
  ``PredictContext.head_scores``; causal keys j > i score −∞), ties to the lower index. Since
  entmax is monotone in the score, the gold keys G_i are the first |G_i| of that order, so
  top-k with k ≥ |G_i| keeps all of G_i (oracle budgets, ``sparse_core.budgets``). The budget
  k is at most K_MAX(n) = min(⌈n / 2⌉, 128): the page receives each row's order up to it.
- ``topp`` (Twilight, Lin et al. 2025): per query the fewest keys whose mass reaches p: the
  keys of G_i by P descending (ties to the lower index), the t-th kept iff t = 0 or the mass of
  the keys before it (float64, added in that order) is < p. A top-p mask lies inside G, so its
  precision is 1 and its sparsity at least the gold sparsity.

Defaults / grids (window 0, globals off): topk k = min(16, K_MAX), grid k ∈ {2, 8, 32}
(≤ K_MAX: at n = 512, k = 32 keeps 98 % of the support already); topp p = 0.9, grid p ∈ {0.5,
0.8, 0.9, 0.95, 0.99}.
"""

from __future__ import annotations

import numpy as np
import torch

from ..bitsets import selection_counts, words
from .base import ArenaMethod
from .context import PredictContext
from .selection import b64_ints, first_k_mask, stable_top, threshold_bits, threshold_counts
from .spec import ParamSpec

TOPK_KS = (2, 8, 32)
TOPP_PS = (0.5, 0.8, 0.9, 0.95, 0.99)


def k_max(n: int) -> int:
    """The largest top-k budget offered for n tokens: min(⌈n / 2⌉, 128) (at least 1)."""
    return max(1, min(-(-n // 2), 128))


def topk_scores(ctx: PredictContext, layer: int, head: int | None = None) -> np.ndarray:
    """(n, n) float32 (or (H, n, n)): the scores top-k ranks, −∞ where j > i when causal."""
    s = ctx.head_scores(layer, head)
    if ctx.causal:
        n = ctx.n
        s = np.where(np.tri(n, dtype=bool), s, np.float32(-np.inf))
    return s


class TopKMethod(ArenaMethod):
    """Oracle top-k: the k highest-scoring valid keys of every query."""

    name, label = "topk", "Oracle top-k (true scores)"
    cost_rank = 4
    family = "oracles"
    payload_empty = {"topk": None}

    def own_params(self, n, artefact=None):
        km = k_max(n)
        return [
            ParamSpec("k", "keys per query k", "int", min(16, km), 1, km, 1,
                      help="the k keys with the largest true score s_ij (an oracle)"),
        ]  # fmt: skip

    def own_grid(self, n, artefact=None):
        return [{"k": k} for k in TOPK_KS if k <= k_max(n)]

    def base(self, ctx, p):
        return torch.stack([first_k_mask(topk_scores(ctx, li), p["k"]) for li in range(ctx.layers)])

    def bases_bits(self, ctx, owns):
        n, H = ctx.n, ctx.heads
        ks = [own["k"] for own in owns]
        out = [np.empty((ctx.head_count(), n, words(n)), dtype=np.uint64) for _ in ks]
        for li in range(ctx.layers):
            rows = topk_scores(ctx, li).reshape(H * n, n)
            for o, bits in zip(out, threshold_bits(rows, ks), strict=True):
                o[li * H : (li + 1) * H] = bits.reshape(H, n, -1)
        return iter(out)

    def base_bits(self, ctx, own):
        return next(self.bases_bits(ctx, [own]))

    def plain_counts(self, ctx, gold, owns):
        pairs = [(own["k"], -1) for own in owns]
        return threshold_counts(gold, lambda li: topk_scores(ctx, li), pairs)

    def head_payload(self, ctx, layer, head):
        """``{"topk": {"k_max", "order"}}``: each row's keys by score, the first K_MAX(n)
        (``selection.b64_ints``, n × K_MAX row-major); top-k is the first k of a row."""
        km = k_max(ctx.n)
        order = stable_top(topk_scores(ctx, layer, head), km)  # (n, K_MAX)
        return {"topk": {"k_max": km, "order": b64_ints(order)}}


def topp_keep(a, i, j, p, ps, n: int) -> list[np.ndarray]:
    """Which gold edges top-p keeps, for each p of ``ps``: edges (a, i, j, p) (E,) sorted by
    (a, i, j) -> one (E,) bool per p (module docstring). Each row's cumulative mass is added
    from 0 in order of P descending (ties to the lower j), as the page adds it: one compiled
    pass over the rows (``_method_kernels.topp_rows``; a positive float32's bits order like its
    value)."""
    from .._method_kernels import topp_rows  # numba: imported when first needed

    a, i = (np.ascontiguousarray(x, dtype=np.int64) for x in (a, i))
    pp = np.ascontiguousarray(p, dtype=np.float64)
    pbits = pp.astype(np.float32).view(np.uint32)
    keep = topp_rows(a, i, pbits, pp, np.asarray([float(q) for q in ps], dtype=np.float64))
    return list(keep)


class TopPMethod(ArenaMethod):
    """Oracle top-p: per query the fewest gold keys (by P) whose mass reaches p."""

    name, label = "topp", "Oracle top-p (true attention mass)"
    cost_rank = 2
    family = "oracles"

    def own_params(self, n, artefact=None):
        return [
            ParamSpec("p", "mass p", "float", 0.9, 0.01, 1.0, 0.01,
                      help="the fewest keys (by true attention) whose mass reaches p"),
        ]  # fmt: skip

    def own_grid(self, n, artefact=None):
        return [{"p": p} for p in TOPP_PS]

    def _edge_bits(self, ctx, ps) -> list[np.ndarray]:
        a, i, j, pr = ctx.gold_edges()
        n, W = ctx.n, words(ctx.n)
        keeps = topp_keep(a, i, j, pr, ps, n)
        out = []
        LH = ctx.head_count()
        byte = (a * n + i) * (8 * W) + (j >> 3)
        weight = (np.uint8(1) << (j & 7).astype(np.uint8)).astype(np.float64)
        for keep in keeps:
            b = np.bincount(byte[keep], weights=weight[keep], minlength=LH * n * 8 * W)
            out.append(b.astype(np.uint8).view(np.uint64).reshape(LH, n, W))
        return out

    def base(self, ctx, p):
        bits = self._edge_bits(ctx, [p["p"]])[0]
        n = ctx.n
        m = np.unpackbits(bits.view(np.uint8), axis=-1, count=n, bitorder="little").astype(bool)
        return torch.from_numpy(m).view(ctx.layers, ctx.heads, n, n)

    def bases_bits(self, ctx, owns):
        return iter(self._edge_bits(ctx, [own["p"] for own in owns]))

    def plain_counts(self, ctx, gold, owns):
        # a top-p mask is a set of gold edges: every count comes from the edge list
        n, LH = ctx.n, ctx.head_count()
        from .._method_kernels import kept_edge_counts

        held = np.stack(topp_keep(gold.e_lh, gold.e_i, gold.e_j, gold.e_p,
                                  [o["p"] for o in owns], n))  # fmt: skip
        T = -(-n // 16)
        e = [np.ascontiguousarray(x, dtype=np.int64) for x in (gold.e_lh, gold.e_i, gold.e_j)]
        size, occ = kept_edge_counts(held, *e, LH, T, 16)  # per head, and the 16-tiles
        return selection_counts(gold, held, size, occ)
