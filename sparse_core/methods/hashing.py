"""Content-based baselines (definitions §3; paper §5, App. C.2): Reformer's LSH buckets and the
Routing Transformer's balanced clusters, in Sparsefinder's projected space
(``sparse_core.baselines``) when an artefact fits the model and alpha, else in the space of the
model's own queries and keys (``PredictContext.hash_space``): neither needs training, so both work
for every model.

Both assign tokens to groups and predict an edge where a query and a key share a group, so the
assignments are what the engine and the page work from: :func:`reformer_buckets` and
:func:`routing_members` compute them once per text and setting (memoised in the context), the
Pareto engine builds the bitsets straight from them, and the page receives them for every
bucket / cluster count of its sliders (``head_payload``).

Defaults: reformer B = 8 buckets (choice of ``grids.BUCKET_COUNTS``), 1 round (up to
``grids.REFORMER_MAX_ROUNDS``), rotations seed 0 hashed with (layer, head, round); routing
C = 8 clusters (choice of ``grids.cluster_choices(n)``). Window and globals off. Own grids:
B ∈ ``grids.SWEEP_BUCKETS`` with 1 round; C ∈ ``cluster_choices(n, SWEEP_BUCKETS)``.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from .. import baselines
from ..bitsets import assign_bits, pack, words
from .base import Method
from .context import PredictContext
from .grids import BUCKET_COUNTS, REFORMER_MAX_ROUNDS, SWEEP_BUCKETS, cluster_choices
from .spec import ParamSpec


def reformer_buckets(ctx: PredictContext, n_buckets: int, rounds: int = 1) -> Tensor:
    """(L, H, rounds, n) LSH buckets of the text (seed 0), memoised per (B, rounds)."""
    b = ctx.memo(
        ("reformer", n_buckets, rounds),
        lambda: baselines.reformer_buckets(
            *ctx.hash_space(), n_buckets, rounds, 0, ctx.layer_ids, ctx.head_ids
        ).to(torch.uint8),
    )
    return b.long()


def routing_members(ctx: PredictContext, n_clusters: int) -> tuple[Tensor, Tensor]:
    """(queries, keys) (L, H, C, n) bool of the balanced Routing clusters, memoised per C."""

    def members():
        q, k = ctx.hash_space()
        pts = ctx.memo(("routing-points",), lambda: baselines._routing_points(q, k))
        most = max(cluster_choices(ctx.n))  # one farthest-point init serves every C <= most
        init = None
        if n_clusters <= most:
            init = ctx.memo(
                ("routing-init", most), lambda: baselines.farthest_points(q, k, most, pts)
            )
        return baselines.routing_members(q, k, n_clusters, init=init, points=pts)

    return ctx.memo(("routing", n_clusters), members)


class ReformerMethod(Method):
    """Reformer (Kitaev et al. 2020): edge iff i and j share an LSH bucket in some round."""

    name, label = "reformer", "Reformer (LSH)"
    cost_rank = 17
    family = "baselines"
    payload_empty = {"reformer": {}}

    def own_params(self, n, artefact=None):
        return [
            ParamSpec("n_buckets", "buckets B", "choice", 8, choices=list(BUCKET_COUNTS),
                      help="LSH buckets (argmax over [xR; −xR], R of 2r × B/2)"),
            ParamSpec("rounds", "hash rounds", "int", 1, 1, REFORMER_MAX_ROUNDS, 1,
                      help="independent rotations; an edge if the bucket is shared in any round"),
        ]  # fmt: skip

    def own_grid(self, n, artefact=None):
        return [{"n_buckets": b, "rounds": 1} for b in SWEEP_BUCKETS]

    def base(self, ctx, p):
        return baselines.buckets_mask(reformer_buckets(ctx, p["n_buckets"], p["rounds"]))

    def base_bits(self, ctx, own):
        n = ctx.n
        b = reformer_buckets(ctx, own["n_buckets"], own["rounds"]).numpy()  # (L, H, R, n)
        b = b.reshape(-1, b.shape[-2], n)  # (L·H, R, n): one slot per round
        return assign_bits(n, b, b, own["n_buckets"])

    def head_payload(self, ctx, layer, head):
        """``{"reformer": {"<B>": [[bucket of token i] x rounds]}}`` for every B of the slider,
        with the most rounds (a prefix of them is the assignment for fewer rounds)."""
        return {
            "reformer": {
                str(b): reformer_buckets(ctx, b, REFORMER_MAX_ROUNDS)[layer, head].tolist()
                for b in BUCKET_COUNTS
            }
        }


class RoutingMethod(Method):
    """Routing Transformer (Roy et al. 2021), balanced: each of C spherical k-means centroids
    takes its top ⌊n/C⌋ + 1 queries and keys; edge iff one centroid took query i and key j."""

    name, label = "routing", "Routing Transformer"
    cost_rank = 18
    family = "baselines"
    payload_empty = {"routing": {}}

    def own_params(self, n, artefact=None):
        ch = cluster_choices(n)
        return [
            ParamSpec("n_clusters", "clusters C", "choice", 8 if 8 in ch else ch[-1], choices=ch,
                      help="spherical k-means; each cluster takes its top ⌊n/C⌋+1 queries, keys"),
        ]  # fmt: skip

    def own_grid(self, n, artefact=None):
        return [{"n_clusters": c} for c in cluster_choices(n, SWEEP_BUCKETS)]

    def base(self, ctx, p):
        return baselines.members_mask(*routing_members(ctx, p["n_clusters"]))

    def base_bits(self, ctx, own):
        n, LH = ctx.n, ctx.layers * ctx.heads
        q, k = (x.numpy() for x in routing_members(ctx, own["n_clusters"]))  # (L, H, C, n)
        kbits = pack(k).reshape(LH, -1, words(n))  # (L·H, C, W) the keys of each centroid
        qm = q.reshape(LH, q.shape[-2], n)  # (L·H, C, n)
        out = np.zeros((LH, n, words(n)), dtype=np.uint64)
        for c in range(qm.shape[1]):  # the rows centroid c took get its keys
            a, i = np.nonzero(qm[:, c])
            out[a, i] |= kbits[a, c]
        return out

    def head_payload(self, ctx, layer, head):
        """``{"routing": {"<C>": {"queries": [[token indices centroid c took] x C], "keys":
        [...]}}}`` for every C of the slider."""
        out = {}
        for c in cluster_choices(ctx.n):
            q, k = routing_members(ctx, c)
            out[str(c)] = {
                "queries": [row.nonzero().flatten().tolist() for row in q[layer, head]],
                "keys": [row.nonzero().flatten().tolist() for row in k[layer, head]],
            }
        return {"routing": out}
