"""Sparsefinder's learned predictors (Treviso et al. 2022; definitions §3): sf-distance,
sf-quantization, sf-kmeans, all in the artefact's r-dimensional projected space
(``sparse_core.sparsefinder``).

Defaults and own sweep grids (n tokens):

- sf-distance: threshold t = 2.0 (``sparsefinder.REFERENCE_THRESHOLD``), in [0, 10]; grid
  t ∈ ``grids.SWEEP_THRESHOLDS`` = {0.5, 1, 2, 3, 5};
- sf-quantization: n_buckets B = min(8, n) balanced bins per dimension, in [1, n]; grid
  B ∈ ``grids.SWEEP_BUCKETS`` = {2, 8, 20} with B ≤ n;
- sf-kmeans: n_clusters B = 8 (a choice of the artefact's centroid counts), top_k 1; grid
  B ∈ ``grids.kmeans_sweep`` (the fitted ones of {4, 12, 20}) × k ∈
  ``sparsefinder.KMEANS_TOP_K`` = {1, 2, 3} with k < B.

Window and globals are off by default. The page recomputes all three from the projected
queries and keys (and the k-means centroids), which ``head_payload`` sends at full float32
precision so that its masks equal Python's bit for bit.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from ..bitsets import assign_bits
from ..errors import SparsescopeError
from ..sparsefinder import (
    KMEANS_TOP_K,
    REFERENCE_THRESHOLD,
    balanced_buckets,
    sf_distance,
    sf_kmeans,
    sf_quantization,
)
from .base import Method
from .context import PredictContext
from .distance_bits import distance_bits
from .grids import SF_DISTANCE_MAX, SWEEP_BUCKETS, SWEEP_THRESHOLDS, kmeans_choices, kmeans_sweep
from .spec import ParamSpec


def quantization_buckets(ctx: PredictContext, n_buckets: int) -> tuple[Tensor, Tensor]:
    """(bq, bk) (L, H, n, r) balanced-bin ids, b = ⌈n / B⌉ (``sparsefinder.balanced_buckets``)."""
    b = max(1, math.ceil(ctx.n / n_buckets))
    return balanced_buckets(ctx.proj_q, b), balanced_buckets(ctx.proj_k, b)


def centroids(ctx: PredictContext, n_clusters: int) -> Tensor:
    """The artefact's (L, H, B, r) k-means centroids for B = ``n_clusters``."""
    cents = ctx.artefact.centroids
    if n_clusters not in cents:
        raise SparsescopeError(
            f"n_clusters must be one of {', '.join(map(str, cents))} "
            f"(the artefact's k-means fits), got {n_clusters}",
            field="n_clusters",
        )
    return cents[n_clusters]


def kmeans_assignments(ctx: PredictContext, n_clusters: int, top_k: int) -> tuple[Tensor, Tensor]:
    """(aq, ak) (L, H, n, k): each token's top-k nearest centroids, exactly
    ``sparsefinder.nearest_centroids`` (float64 squared distances with the dims added in order,
    stable order, so ties go to the lower centroid) computed in numpy. The first
    min(B, ``_FEW``) of the order (the sweep's top-k) or the whole order over the B centroids
    is memoised per B (uint8); its first k is the top-k."""
    cent = centroids(ctx, n_clusters)
    if not 1 <= top_k <= n_clusters:
        raise SparsescopeError(
            f"top_k must be in [1, n_clusters = {n_clusters}], got {top_k}", field="top_k"
        )
    first = min(n_clusters, _FEW) if top_k <= _FEW else n_clusters
    cv = cent.numpy().astype(np.float64)

    def order(x: Tensor) -> Tensor:
        return torch.from_numpy(nearest_order(x.numpy().astype(np.float64), cv, first))

    aq, ak = ctx.memo(("kmeans", n_clusters, first), lambda: (order(ctx.proj_q), order(ctx.proj_k)))
    return aq[..., :top_k].long(), ak[..., :top_k].long()


#: Ranks of the nearest-centroid order memoised for the sweep's top-k (<= 3); more: the whole order.
_FEW = max(KMEANS_TOP_K)


def nearest_order(x: np.ndarray, cent: np.ndarray, first: int) -> np.ndarray:
    """The first ``first`` centroids of each token by squared distance ascending, ties to the
    lower index (a stable sort): x (..., n, r), cent (..., B, r) float64 -> (..., n, first)
    uint8. The distances are ``Σ_c (x_c − cent_c)²`` added in dimension order, as
    ``sparsefinder.sq_distances``; found per token in one compiled pass over the B centroids
    (``_method_kernels.nearest_first``: running minima, the taken ones skipped), B <= 255."""
    B = cent.shape[-2]
    if B > 255:
        raise SparsescopeError(f"at most 255 centroids are supported, got {B}")
    lead = np.broadcast_shapes(x.shape[:-2], cent.shape[:-2])
    xs = np.broadcast_to(x, (*lead, *x.shape[-2:])).reshape(-1, *x.shape[-2:])  # (A, n, r)
    cs = np.broadcast_to(cent, (*lead, *cent.shape[-2:])).reshape(-1, *cent.shape[-2:])
    from .._method_kernels import nearest_first  # numba: imported when first needed

    out = nearest_first(np.ascontiguousarray(xs), np.ascontiguousarray(cs), int(first))
    return out.reshape(*lead, x.shape[-2], int(first))


def _ranks(x: Tensor) -> np.ndarray:
    """Per dimension, the stable ascending rank of every token: (A, n, r) -> (A, r, n) int64;
    ``rank // b`` is ``sparsefinder.balanced_buckets(x, b)`` (all tokens valid)."""
    v = np.swapaxes(x.numpy(), -1, -2)  # (A, r, n)
    order = np.argsort(v, axis=-1, kind="stable")
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(v.shape[-1])[None, None, :], axis=-1)
    return ranks


def _proj_payload(ctx: PredictContext, layer: int, head: int) -> dict:
    # full float32 precision: the page recomputes the sf-* masks bit for bit from these
    return {"queries": ctx.proj_q[layer, head].tolist(), "keys": ctx.proj_k[layer, head].tolist()}


class DistanceMethod(Method):
    """sf-distance: edge iff ``‖q̃_i − k̃_j‖² < t`` (``sparsefinder.sf_distance``)."""

    name, label, needs_artefact = "sf-distance", "Sparsefinder distance", True
    cost_rank = 15
    family = "learned"
    payload_empty = {"proj": None}

    def own_params(self, n, artefact=None):
        return [
            ParamSpec("t", "threshold t", "float", REFERENCE_THRESHOLD, 0.0, SF_DISTANCE_MAX, 0.05,
                      help="edge iff the squared projected distance ‖q̃_i − k̃_j‖² < t"),
        ]  # fmt: skip

    def own_grid(self, n, artefact=None):
        return [{"t": t} for t in SWEEP_THRESHOLDS]

    def base(self, ctx, p):
        return sf_distance(ctx.proj_q, ctx.proj_k, p["t"])

    def bases_bits(self, ctx, owns):
        # one float32 distance matrix binned at every threshold (methods.distance_bits)
        return iter(distance_bits(ctx.proj_q, ctx.proj_k, [own["t"] for own in owns]))

    def head_payload(self, ctx, layer, head):
        return {"proj": _proj_payload(ctx, layer, head)}


class QuantizationMethod(Method):
    """sf-quantization: per projected dimension, tokens in B balanced bins; edge iff query i
    and key j share a bin in some dimension (``sparsefinder.sf_quantization``)."""

    name, label, needs_artefact = "sf-quantization", "Sparsefinder quantization", True
    cost_rank = 13
    family = "learned"
    payload_empty = {"proj": None}

    def own_params(self, n, artefact=None):
        return [
            ParamSpec("n_buckets", "buckets B", "int", min(8, n), 1, n, 1,
                      help="balanced bins per projected dimension (b = ⌈n / B⌉ tokens each)"),
        ]  # fmt: skip

    def own_grid(self, n, artefact=None):
        return [{"n_buckets": b} for b in SWEEP_BUCKETS if b <= n]

    def base(self, ctx, p):
        return sf_quantization(ctx.proj_q, ctx.proj_k, n_buckets=p["n_buckets"])

    def base_bits(self, ctx, own):
        n, LH = ctx.n, ctx.layers * ctx.heads
        b = max(1, math.ceil(n / own["n_buckets"]))  # tokens per bin
        rq, rk = ctx.memo(  # (L·H, r, n) ranks, shared by every B
            ("ranks",),
            lambda: tuple(_ranks(x.reshape(LH, n, -1)) for x in (ctx.proj_q, ctx.proj_k)),
        )
        bq, bk = rq // b, rk // b  # balanced bins
        nid = (n + b - 1) // b
        # one slot per dimension, ids offset per dimension so that only equal dims can match
        off = (np.arange(bq.shape[1]) * nid)[None, :, None]
        return assign_bits(n, bq + off, bk + off, bq.shape[1] * nid)

    def head_payload(self, ctx, layer, head):
        return {"proj": _proj_payload(ctx, layer, head)}


class KMeansMethod(Method):
    """sf-kmeans: each token's top-k nearest of the artefact's B centroids; edge iff the query's
    and the key's sets intersect (``sparsefinder.sf_kmeans``)."""

    name, label, needs_artefact = "sf-kmeans", "Sparsefinder k-means", True
    cost_rank = 19
    family = "learned"
    payload_empty = {"proj": None, "centroids": {}}

    def own_params(self, n, artefact=None):
        ch = kmeans_choices(artefact)
        return [
            ParamSpec("n_clusters", "clusters B", "choice", 8 if 8 in ch else ch[0], choices=ch,
                      help="k-means centroids fitted offline (the artefact's cluster counts)"),
            ParamSpec("top_k", "top-k", "int", 1, 1, max(ch), 1,
                      help="clusters per token; edge iff the query's and key's sets intersect"),
        ]  # fmt: skip

    def check(self, n, p):
        if p["top_k"] > p["n_clusters"]:
            raise SparsescopeError(
                f"top_k must be in [1, n_clusters = {p['n_clusters']}], got {p['top_k']}",
                field="top_k",
            )

    def own_grid(self, n, artefact=None):
        return [
            {"n_clusters": b, "top_k": k}
            for b in kmeans_sweep(artefact)
            for k in KMEANS_TOP_K
            if k < b
        ]

    def base(self, ctx, p):
        return sf_kmeans(ctx.proj_q, ctx.proj_k, centroids(ctx, p["n_clusters"]), p["top_k"])

    def base_bits(self, ctx, own):
        n, LH = ctx.n, ctx.layers * ctx.heads
        aq, ak = (x.numpy() for x in kmeans_assignments(ctx, own["n_clusters"], own["top_k"]))
        qs = np.swapaxes(aq, -1, -2).reshape(LH, -1, n)  # (L·H, k, n): one slot per rank
        ks = np.swapaxes(ak, -1, -2).reshape(LH, -1, n)
        return assign_bits(n, qs, ks, own["n_clusters"])

    def head_payload(self, ctx, layer, head):
        cents = ctx.artefact.centroids
        return {
            "proj": _proj_payload(ctx, layer, head),
            "centroids": {str(b): c[layer, head].tolist() for b, c in cents.items()},
        }
