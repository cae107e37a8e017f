"""Per-query block routing (definitions §8): MoBA and Quest choose, for every query, the top-k key
blocks of size B by a cheap estimate of the block's scores, and attend to those blocks only.

Keys are cut into T = ⌈n / B⌉ blocks (the last one ragged); B is one of ``metrics.BLOCKS``, so
each method's own block size has its block sparsity reported. Every query ranks the blocks by
its estimate (ties to the lower block) and keeps the first min(k, T); the mask is those blocks'
columns ∩ V. Estimates in float32 (as the references compute them):

- ``moba`` (Lu et al. 2025; MoonshotAI/MoBA, moba/moba_naive.py ``moba_attn_varlen_naive``):
  gate_ib = q_i · mean(K_b). Query i's own block scores +∞ (always kept, counts toward k);
  causal: blocks after i's own score −∞ (the reference's gate), and inside its own block only
  j ≤ i remain (∩ V). Bidirectional (no reference): every block competes, own block first.
- ``quest`` (Tang et al. 2024; mit-han-lab/Quest, evaluation/quest_attention.py, the page
  bound before ``local_heavy_hitter_mask``): U_ib = Σ_d max(q_id · min_{j∈b} k_jd, q_id ·
  max_{j∈b} k_jd), per-dimension min / max over the page's keys; causal: pages after i's own
  score −∞; no page is forced (the reference keeps at least 3 pages: here k is the slider).

The page receives, per block size, every query's block order (``head_payload``), so top-k is
the first k of a row there as here. Defaults: moba B = 32, top-k 3; quest B = 16, top-k 4. Grid
(window 0, globals off): B ∈ {16, 32, 64} × top-k ∈ {1, 2, 4, 8} (k ≤ T).
"""

from __future__ import annotations

import numpy as np
import torch

from .._method_kernels import first_maxima
from .base import ArenaMethod
from .context import PredictContext, products
from .selection import (
    BLOCK_CHOICES,
    b64_ints,
    block_count,
    block_means,
    prefix_row_block_counts,
    regroup,
    row_block_bits,
    stable_order,
)
from .spec import ParamSpec

GRID_BLOCKS = (16, 32, 64)
GRID_TOPK = (1, 2, 4)


def _future(n: int, block: int) -> np.ndarray:
    """(n, T) bool: block b lies after query i's own block."""
    T = block_count(n, block)
    return np.arange(T)[None, :] > (np.arange(n) // block)[:, None]


def moba_gate(ctx: PredictContext, layer: int, block: int, head: int | None = None) -> np.ndarray:
    """(H, n, T) (or (n, T)) float32: MoBA's gate, own block +∞, causal future blocks −∞."""
    q, k = ctx.head_qk(layer, head)
    gate = products(q, block_means(k, block))  # (…, n, T) float32
    n = ctx.n
    own = (np.arange(n) // block)[:, None] == np.arange(gate.shape[-1])[None, :]
    if ctx.causal:
        gate = np.where(_future(n, block), np.float32(-np.inf), gate)
    return np.where(own, np.float32(np.inf), gate)


def quest_bound(ctx: PredictContext, layer: int, block: int, head: int | None = None) -> np.ndarray:
    """(H, n, T) (or (n, T)) float32: Quest's page bound U_ib, causal future pages −∞."""
    q, k = ctx.head_qk(layer, head)
    n = ctx.n
    T = block_count(n, block)
    pad = T * block - n
    kp = np.pad(k, [(0, 0)] * (k.ndim - 2) + [(0, pad), (0, 0)], constant_values=np.nan)
    pages = kp.reshape(*k.shape[:-2], T, block, k.shape[-1])  # ragged last page: NaN padding
    kmax = np.nanmax(pages, axis=-2)  # (…, T, d)
    kmin = np.nanmin(pages, axis=-2)
    u = products(np.maximum(q, 0), kmax) + products(np.minimum(q, 0), kmin)
    if ctx.causal:
        u = np.where(_future(n, block), np.float32(-np.inf), u)
    return u


def first_blocks(values: np.ndarray, m: int) -> np.ndarray:
    """The first ``m`` of :func:`selection.stable_order` along the last axis, by m argmax passes
    (the first of equal values) instead of a sort: (…, T) -> (…, m) int64. −∞ estimates
    (causal future blocks) become the least finite double, so they still tie with each other
    and lose to every real estimate; a block taken is set to −∞. One compiled loop per row
    (``_method_kernels.first_maxima``; the estimates compared exactly, as doubles)."""
    v = np.asarray(values)
    flat = np.ascontiguousarray(v.reshape(-1, v.shape[-1]))
    return first_maxima(flat, m).reshape(*v.shape[:-1], m)


class BlockRouting(ArenaMethod):
    """Shared by MoBA and Quest: per query, the first top-k blocks of a stable order."""

    block_param, block_default, topk_default = "block", 32, 3
    #: (ctx, layer, block, head=None) -> (…, n, T) float32 estimate
    estimate = staticmethod(moba_gate)

    def own_params(self, n, artefact=None):
        most = max(1, block_count(n, BLOCK_CHOICES[0]))
        return [
            ParamSpec(self.block_param, f"{self.block_param} size B", "choice",
                      self.block_default, choices=BLOCK_CHOICES,
                      help="keys in blocks of B tokens (a block kernel's tile)"),
            ParamSpec("topk", "blocks per query k", "int", min(self.topk_default, most), 1, most,
                      1, help="the k blocks with the highest estimate (at most ⌈n / B⌉)"),
        ]  # fmt: skip

    def own_grid(self, n, artefact=None):
        return [
            {self.block_param: b, "topk": k}
            for b in GRID_BLOCKS
            for k in GRID_TOPK
            if k <= block_count(n, b)
        ]

    def order(self, ctx: PredictContext, block: int) -> np.ndarray:
        """(L·H, n, T) int: every query's blocks, best first (memoised per text and B)."""

        def make():
            got = [stable_order(self.estimate(ctx, li, block)) for li in range(ctx.layers)]
            return np.concatenate(got).astype(np.int16)

        return ctx.memo((self.name, "order", block), make)

    def first(self, ctx: PredictContext, block: int, m: int) -> np.ndarray:
        """(L·H, n, m): every query's first m blocks (:func:`first_blocks`; memoised)."""

        def make():
            got = [first_blocks(self.estimate(ctx, li, block), m) for li in range(ctx.layers)]
            return np.concatenate(got)

        return ctx.memo((self.name, "first", block, m), make)

    def selected(self, ctx: PredictContext, p: dict) -> np.ndarray:
        """(L·H, n, T) bool: the blocks each query keeps."""
        b = p[self.block_param]
        order = self.order(ctx, b)
        k = min(p["topk"], order.shape[-1])
        sel = np.zeros(order.shape, dtype=bool)
        np.put_along_axis(sel, order[..., :k].astype(np.int64), True, axis=-1)
        return sel

    def base(self, ctx, p):
        n = ctx.n
        sel = self.selected(ctx, p)
        cols = np.repeat(sel, p[self.block_param], axis=-1)[..., :n]
        return torch.from_numpy(cols).view(ctx.layers, ctx.heads, n, n)

    def base_bits(self, ctx, own):
        return row_block_bits(self.selected(ctx, own), ctx.n, own[self.block_param])

    def plain_counts(self, ctx, gold, owns):
        groups: dict[int, list[int]] = {}
        for k, own in enumerate(owns):
            groups.setdefault(own[self.block_param], []).append(k)
        parts = {}
        for b, ks in groups.items():
            T = block_count(ctx.n, b)
            first = self.first(ctx, b, min(T, max(owns[k]["topk"] for k in ks)))
            # the grid's k are nested prefixes of one order: each rank counted once
            tops = [min(owns[k]["topk"], T) for k in ks]
            parts[b] = prefix_row_block_counts(gold, first, tops, b)
        return regroup(parts, groups, len(owns))

    def head_payload(self, ctx, layer, head):
        """``{name: {"<B>": order}}``: every query's block order for each B of the slider
        (n × ⌈n / B⌉, ``selection.b64_ints``); the mask is the first k blocks of a row."""
        return {
            self.name: {
                str(b): b64_ints(stable_order(self.estimate(ctx, layer, b, head)))
                for b in BLOCK_CHOICES
            }
        }


class MoBAMethod(BlockRouting):
    """MoBA: per query its own block plus the top-(k − 1) blocks by q · mean(K_b)."""

    name, label = "moba", "MoBA (block routing)"
    cost_rank = 6
    family = "predictors"
    payload_empty = {"moba": {}}


class QuestMethod(BlockRouting):
    """Quest: per query the top-k pages by the upper bound of q · k over each page."""

    name, label = "quest", "Quest (page bounds)"
    cost_rank = 9
    family = "predictors"
    block_param, block_default, topk_default = "page", 16, 4
    estimate = staticmethod(quest_bound)
    payload_empty = {"quest": {}}
