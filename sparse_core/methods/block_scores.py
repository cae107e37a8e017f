"""Per-query-block selection by estimated block mass (definitions §8): XAttention and SpargeAttn.

Queries and keys are cut into T = ⌈n / B⌉ blocks (B one of ``metrics.BLOCKS``); every query
block a keeps a set of key blocks, the smallest that carries a share τ of an estimate of its
attention, and the mask is those B × B blocks ∩ V. Both estimates come from the scores without
computing them all; the selection is a cumulative sum in float64 over blocks sorted by estimate
(ties to the lower block), done identically by the page from the estimates of the head payload.

- ``xattention`` (Xu et al. 2025; mit-han-lab/x-attention, xattn/src/Xattention.py
  ``xattn_estimate`` with select_mode "inverse", and xattn/src/utils.py
  ``find_blocks_chunked``): queries and keys in groups of S (the stride). The antidiagonal
  score of groups (g, h) is v_gh = (1/S) Σ_{r=0}^{S−1} s_{gS+S−1−r, hS+r} (positions past n
  score 0, as the reference's zero padding); causal: v_gh = −∞ for h > g. Each group row is
  softmax-normalised over h; E_ab sums the softmax over the groups of query block a and key
  block b. Query block a always keeps its diagonal block (and, causal, block 0, as the
  reference), counted first; then the other valid blocks by E descending while the cumulative
  share before them is < τ · Σ_b E_ab.
- ``sparge`` (Zhang et al. 2025; thu-ml/SpargeAttn, spas_sage_attn/utils.py
  ``get_block_map_meansim``): a block's self-similarity is the mean cosine of all its pairs
  (self-pairs included), sim = ‖Σ_t x̂_t‖² / |block|²; a query (key) block is similar iff
  sim ≥ θ. Pooled scores z_ab = scaling · mean(Q_a) · mean(K_b); for a similar query block a
  the eligible key blocks are the similar ones (causal: b ≤ a), weighted u_ab = exp(z_ab −
  max_b' z_ab') (the max over all valid b'), and the TopCdf keeps the fewest of them, by u
  descending, whose sum reaches τ · Σ_eligible u (at least one). Dissimilar key blocks are kept
  for every query block, dissimilar query blocks keep every block. (Project choices against
  the reference, docs/methods.md: one block size for queries and keys; sim ≥ θ where the
  reference has >; the TopCdf set includes the block that reaches τ, as definitions §8 says, where
  the reference stops before it.)

Defaults: xattention B = 32, S = 8, τ = 0.9 (the reference's); sparge B = 32, θ = 0.3, τ = 0.9.
Grids (window 0, globals off): xattention B ∈ {16, 32, 64} × S = 8 × τ ∈ {0.1, 0.3, 0.6, 0.9};
sparge B ∈ {16, 32, 64} × θ = 0.2 × τ ∈ {0.3, 0.6, 0.9} (at n = 512 the estimates are flat:
τ ≥ 0.5 keeps most blocks, and θ ≥ 0.5 leaves half the blocks dense).
"""

from __future__ import annotations

import numpy as np
import torch

from .base import ArenaMethod
from .context import PredictContext, products
from .selection import (
    BLOCK_CHOICES,
    b64_floats,
    block_bits,
    block_count,
    block_counts,
    block_means,
    regroup,
    stable_order,
)
from .spec import ParamSpec

GRID_BLOCKS = (16, 32, 64)
STRIDES = [2, 4, 8, 16]
XATTN_TAUS = (0.1, 0.3, 0.6, 0.9)
SPARGE_THETA = 0.2
SPARGE_TAUS = (0.3, 0.6, 0.9)


def _pad_to(x: np.ndarray, size: int, axes: tuple[int, ...]) -> np.ndarray:
    pad = [(0, 0)] * x.ndim
    for ax in axes:
        pad[ax] = (0, size - x.shape[ax])
    return np.pad(x, pad)


def xattn_groups(ctx: PredictContext, layer: int, stride: int,
                 head: int | None = None) -> np.ndarray:  # fmt: skip
    """(H, G, G) (or (G, G)) float64, G = ⌈n / S⌉: XAttention's antidiagonal scores of every
    pair of S-groups, softmax-normalised per query group (module docstring). Without a softcap
    they are the reference's reshaped product: row g holds the queries of group g in reverse,
    column h the keys of group h, each S·d long (positions past n are zero vectors)."""
    n = ctx.n
    G = -(-n // stride)
    if ctx.out.softcap is None:
        q, k = (x.astype(np.float64) for x in ctx.head_qk(layer, head))
        pad = [(0, 0)] * (q.ndim - 2) + [(0, G * stride - n), (0, 0)]
        q, k = np.pad(q, pad), np.pad(k, pad)
        qr = q.reshape(*q.shape[:-2], G, stride, q.shape[-1])[..., ::-1, :]
        qr = qr.reshape(*q.shape[:-2], G, -1)
        kr = k.reshape(*k.shape[:-2], G, -1)
        v = products(qr, kr) * (ctx.head_scale(layer) / stride)
    else:  # capped scores: the antidiagonals of the scores themselves
        s = ctx.head_scores(layer, head).astype(np.float64)
        s = _pad_to(s, G * stride, (-2, -1)).reshape(*s.shape[:-2], G, stride, G, stride)
        v = sum(s[..., :, stride - 1 - r, :, r] for r in range(stride)) / stride
    if ctx.causal:
        v = np.where(np.tri(G, dtype=bool), v, -np.inf)
    v = np.exp(v - v.max(axis=-1, keepdims=True))
    return v / v.sum(axis=-1, keepdims=True)


def xattn_blocks(w: np.ndarray, n: int, block: int, stride: int) -> np.ndarray:
    """(…, G, G) group weights -> (…, T, T) block estimates E_ab (their sums per block pair)."""
    T, per = block_count(n, block), block // stride
    w = _pad_to(w, T * per, (-2, -1)).reshape(*w.shape[:-2], T, per, T, per)
    # rounded to float32: what the page receives, and so what both sides select from
    return w.sum(axis=(-3, -1)).astype(np.float32).astype(np.float64)


def xattn_mass(ctx: PredictContext, layer: int, block: int, stride: int,
               head: int | None = None) -> np.ndarray:  # fmt: skip
    """(H, T, T) (or (T, T)) float64: XAttention's block estimates E_ab (module docstring)."""
    return xattn_blocks(xattn_groups(ctx, layer, stride, head), ctx.n, block, stride)


def xattn_select(E: np.ndarray, tau: float, causal: bool) -> np.ndarray:
    """(…, T, T) bool: the key blocks each query block keeps (module docstring)."""
    return xattn_take(xattn_order(E, causal), tau)


def xattn_order(E: np.ndarray, causal: bool) -> tuple:
    """The part of :func:`xattn_select` that does not depend on τ (one sort serves every τ of
    a sweep): (forced blocks, order, candidates, running shares, totals)."""
    T = E.shape[-1]
    a = np.arange(T)[:, None]
    b = np.arange(T)[None, :]
    valid = (b <= a) if causal else np.ones((T, T), dtype=bool)
    forced = (b == a) | ((b == 0) if causal else False)
    E = np.where(valid, E, 0.0)
    total = np.cumsum(E, axis=-1)[..., -1]  # sequential, ascending b
    first = np.cumsum(np.where(forced, E, 0.0), axis=-1)[..., -1]  # the forced blocks' share
    rest = np.where(valid & ~forced, E, -np.inf)
    order = stable_order(rest)
    vals = np.take_along_axis(rest, order, axis=-1)
    cand = np.isfinite(vals)
    before = np.cumsum(np.concatenate([first[..., None], np.where(cand, vals, 0.0)], -1), -1)
    sel0 = forced & valid | np.zeros(E.shape, dtype=bool)
    return sel0, order, cand, before[..., :-1], total[..., None]


def xattn_take(prep: tuple, tau: float) -> np.ndarray:
    """:func:`xattn_select` from :func:`xattn_order`'s parts: the blocks while the share
    before them is below τ of the total."""
    sel0, order, cand, before, total = prep
    take = cand & (before < tau * total)
    sel = sel0.copy()
    np.put_along_axis(sel, order, take | np.take_along_axis(sel0, order, axis=-1), axis=-1)
    return sel


class XAttentionMethod(ArenaMethod):
    """XAttention: antidiagonal block estimates, the blocks that carry a share τ per query block."""

    name, label = "xattention", "XAttention (antidiagonal scoring)"
    cost_rank = 7
    family = "predictors"
    payload_empty = {"xattention": {}}

    def own_params(self, n, artefact=None):
        return [
            ParamSpec("block", "block size B", "choice", 32, choices=BLOCK_CHOICES,
                      help="B × B blocks (a block kernel's tile)"),
            ParamSpec("stride", "stride S", "choice", 8, choices=STRIDES,
                      help="antidiagonals every S positions score each block"),
            ParamSpec("tau", "threshold τ", "float", 0.9, 0.05, 1.0, 0.01,
                      help="keep blocks until their share of the estimate reaches τ"),
        ]  # fmt: skip

    def own_grid(self, n, artefact=None):
        return [{"block": b, "stride": 8, "tau": t} for b in GRID_BLOCKS for t in XATTN_TAUS]

    def masses(self, ctx: PredictContext, block: int, stride: int) -> np.ndarray:
        """(L·H, T, T) E of every head (the group weights memoised per text and S)."""
        w = ctx.memo(
            ("xattention", stride),
            lambda: np.concatenate([xattn_groups(ctx, li, stride) for li in range(ctx.layers)]),
        )
        return ctx.memo(
            ("xattention", stride, block), lambda: xattn_blocks(w, ctx.n, block, stride)
        )

    def selected(self, ctx, p) -> np.ndarray:
        b, s = p["block"], p["stride"]
        prep = ctx.memo(
            ("xattention", "order", s, b), lambda: xattn_order(self.masses(ctx, b, s), ctx.causal)
        )
        return xattn_take(prep, p["tau"])

    def base(self, ctx, p):
        return _dense(ctx, self.selected(ctx, p), p["block"])

    def base_bits(self, ctx, own):
        return block_bits(self.selected(ctx, own), ctx.n, own["block"])

    def plain_counts(self, ctx, gold, owns):
        groups: dict[int, list[int]] = {}
        for k, own in enumerate(owns):
            groups.setdefault(own["block"], []).append(k)
        parts = {b: block_counts(gold, [self.selected(ctx, owns[k]) for k in ks], b)
                 for b, ks in groups.items()}  # fmt: skip
        return regroup(parts, groups, len(owns))

    def head_payload(self, ctx, layer, head):
        """``{"xattention": {"<B>": {"<S>": E}}}``: the (T, T) estimates, float64 bit-exact,
        for every block size and stride of the sliders."""
        w = {s: xattn_groups(ctx, layer, s, head) for s in STRIDES}
        return {
            "xattention": {
                str(b): {str(s): b64_floats(xattn_blocks(w[s], ctx.n, b, s)) for s in STRIDES}
                for b in BLOCK_CHOICES
            }
        }


def sparge_stats(ctx: PredictContext, layer: int, block: int, head: int | None = None) -> tuple:
    """(qsim (…, T), ksim (…, T), u (…, T, T)) float64 of SpargeAttn (module docstring)."""
    q, k = (x.astype(np.float64) for x in ctx.head_qk(layer, head))
    n = ctx.n
    T = block_count(n, block)
    sizes = np.full(T, float(block))
    sizes[-1] = n - (T - 1) * block

    def sim(x: np.ndarray) -> np.ndarray:
        norm = np.sqrt((x * x).sum(axis=-1, keepdims=True))
        unit = np.divide(x, norm, out=np.zeros_like(x), where=norm > 0)
        sums = block_means(unit, block) * sizes[:, None]  # Σ_t x̂_t per block
        return (sums * sums).sum(axis=-1) / sizes**2

    z = products(block_means(q, block), block_means(k, block))
    z = z * ctx.head_scale(layer)
    if ctx.causal:
        z = np.where(np.tri(T, dtype=bool), z, -np.inf)
    u = np.exp(z - z.max(axis=-1, keepdims=True))
    u = u.astype(np.float32).astype(np.float64)  # what the page receives (float32)
    return sim(q), sim(k), u


def sparge_select(qsim, ksim, u, theta: float, tau: float, causal: bool) -> np.ndarray:
    """(…, T, T) bool: the key blocks each query block keeps (module docstring)."""
    return sparge_take(sparge_order(qsim, ksim, u, theta, causal), tau)


def sparge_order(qsim, ksim, u, theta: float, causal: bool) -> tuple:
    """The part of :func:`sparge_select` that does not depend on τ (one sort serves every τ)."""
    T = u.shape[-1]
    valid = np.tri(T, dtype=bool) if causal else np.ones((T, T), dtype=bool)
    qs, ks = qsim >= theta, ksim >= theta
    elig = valid & ks[..., None, :]
    total = np.cumsum(np.where(elig, u, 0.0), axis=-1)[..., -1]
    vals_all = np.where(elig, u, -np.inf)
    order = stable_order(vals_all)
    vals = np.take_along_axis(vals_all, order, axis=-1)
    cand = np.isfinite(vals)
    before = np.cumsum(np.concatenate([np.zeros((*vals.shape[:-1], 1)),
                                       np.where(cand, vals, 0.0)], -1), -1)[..., :-1]  # fmt: skip
    return qs, ks, order, cand, before, total[..., None]


def sparge_take(prep: tuple, tau: float) -> np.ndarray:
    """:func:`sparge_select` from :func:`sparge_order`'s parts."""
    qs, ks, order, cand, before, total = prep
    first = np.arange(order.shape[-1]) == 0
    take = cand & (first | (before < tau * total))
    sel = np.zeros(order.shape, dtype=bool)
    np.put_along_axis(sel, order, take, axis=-1)
    sel |= ~ks[..., None, :]  # dissimilar key blocks: always kept
    sel |= ~qs[..., :, None]  # dissimilar query blocks: dense
    return sel


class SpargeMethod(ArenaMethod):
    """SpargeAttn: similar blocks by pooled-score TopCdf, dissimilar blocks dense."""

    name, label = "sparge", "SpargeAttn (similarity + TopCdf)"
    cost_rank = 8
    family = "predictors"
    payload_empty = {"sparge": {}}

    def own_params(self, n, artefact=None):
        return [
            ParamSpec("block", "block size B", "choice", 32, choices=BLOCK_CHOICES,
                      help="B × B blocks (a block kernel's tile)"),
            ParamSpec("theta", "similarity θ", "float", 0.3, 0.0, 1.0, 0.01,
                      help="a block is similar iff its mean pairwise cosine is ≥ θ"),
            ParamSpec("tau", "TopCdf τ", "float", 0.9, 0.05, 1.0, 0.01,
                      help="similar query blocks keep the fewest blocks holding a share τ"),
        ]  # fmt: skip

    def own_grid(self, n, artefact=None):
        return [
            {"block": b, "theta": SPARGE_THETA, "tau": t} for b in GRID_BLOCKS for t in SPARGE_TAUS
        ]

    def stats(self, ctx: PredictContext, block: int) -> tuple:
        def make():
            got = [sparge_stats(ctx, li, block) for li in range(ctx.layers)]
            return tuple(np.concatenate([g[k] for g in got]) for k in range(3))

        return ctx.memo(("sparge", block), make)

    def selected(self, ctx, p) -> np.ndarray:
        b, theta = p["block"], p["theta"]

        def make():
            return sparge_order(*self.stats(ctx, b), theta, ctx.causal)

        return sparge_take(ctx.memo(("sparge", "order", b, theta), make), p["tau"])

    def base(self, ctx, p):
        return _dense(ctx, self.selected(ctx, p), p["block"])

    def base_bits(self, ctx, own):
        return block_bits(self.selected(ctx, own), ctx.n, own["block"])

    def plain_counts(self, ctx, gold, owns):
        groups: dict[int, list[int]] = {}
        for k, own in enumerate(owns):
            groups.setdefault(own["block"], []).append(k)
        parts = {b: block_counts(gold, [self.selected(ctx, owns[k]) for k in ks], b)
                 for b, ks in groups.items()}  # fmt: skip
        return regroup(parts, groups, len(owns))

    def head_payload(self, ctx, layer, head):
        """``{"sparge": {"<B>": {"qsim", "ksim", "u"}}}`` for every block size: the
        similarities (lists of floats) and the (T, T) weights u (float64 bit-exact)."""
        out = {}
        for b in BLOCK_CHOICES:
            qsim, ksim, u = sparge_stats(ctx, layer, b, head)
            out[str(b)] = {"qsim": qsim.tolist(), "ksim": ksim.tolist(), "u": b64_floats(u)}
        return {"sparge": out}


def _dense(ctx: PredictContext, sel: np.ndarray, block: int) -> torch.Tensor:
    """(L·H, T, T) block choices -> (L, H, n, n) bool (before ∩ V)."""
    n = ctx.n
    m = np.repeat(np.repeat(sel, block, axis=-1)[..., :n], block, axis=-2)[..., :n, :]
    return torch.from_numpy(np.ascontiguousarray(m)).view(ctx.layers, ctx.heads, n, n)
