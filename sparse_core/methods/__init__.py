"""THE registry of sparse-attention methods (docs/architecture.md, definitions §2–§4).

Every consumer (CLI, JSON, web API, the Pareto sweeps, the page's JS twin) reads methods from
:data:`METHODS`, in this order: ``window``, ``fixed``, ``strided``, ``bigbird``, ``longformer``,
``reformer``, ``routing``, ``sf-distance``, ``sf-quantization``, ``sf-kmeans``, today's
learned selectors ``indexer`` and ``seer`` (definitions §12; they need selectors fitted for the
model and α), then today's arena (definitions §8, docs/methods.md): ``streaming``, ``topk``,
``topp``, ``h2o``, ``moba``, ``quest``, ``xattention``, ``vertical-slash``, ``sparge``. A
:class:`Method` (``methods.base``, where its hooks are listed) gives slider specs, defaults,
validation, the Pareto sweep grid, the engine's fast path, the page's per-head data and
``predict(ctx, **params) -> (L, H, n, n) bool``, always *finished* (definitions §3):
``M' = (M ∪ W_w ∪ Glob) ∩ V`` — the method's own mask M, OR the common add-ons ``window`` (width w,
|i − j| ≤ ⌊w/2⌋; 0 = off; an even w acts as w + 1, as in ``patterns.window``) and ``globals``
(full rows and columns for the first and last token), then AND the valid region (causal: j ≤ i).

Adding a method: write its class (in the module of its family, or a new one; its class
attributes, ``methods.base``, carry its label, its ``family`` (one of :data:`FAMILIES`), payload
keys and cost rank), add an instance to :data:`METHODS`, and write its JS twin in ``frontend/js``
(docs/architecture.md, "Adding a method"). Nothing else tests method names.

Modules: ``spec`` (ParamSpec, coercion), ``grids`` (the paper's grids, default strides, seeds),
``context`` (PredictContext and its per-head accessors of P, G and the scores), ``base`` (Method
and its hooks, ArenaMethod), ``selection`` (the arena's stable orders, thresholds, block
bitsets, payload encodings), ``structured`` (window, fixed, strided, longformer), ``bigbird``,
``hashing`` (reformer, routing), ``learned`` (sf-*), ``trained`` (indexer, seer),
``distance_bits`` (sf-distance's bitset fast path), ``streaming`` (streaming, h2o,
vertical-slash), ``oracle`` (topk, topp), ``blocks`` (moba, quest), ``block_scores`` (xattention,
sparge). Defaults and own grids are tabled in each
family's module docstring; every grid point of the paper's methods has ``globals = True`` and is
crossed with the window widths ``grids.sweep_windows(n)``; the arena's are swept as published
(window 0, globals off).

Seeds: BigBird's random keys and Longformer's random globals use :func:`head_seed` (``layer *
1000 + head``), Reformer's rotations seed 0 hashed with (layer, head, round) — all from the shared
hash PRNG (``sparse_core.rng``), so the page recomputes the same masks.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

from torch import Tensor

from .. import metrics
from ..errors import SparsescopeError
from .base import ADDONS, ArenaMethod, Method, own_params
from .bigbird import BigBirdMethod
from .block_scores import SpargeMethod, XAttentionMethod
from .blocks import MoBAMethod, QuestMethod
from .context import PredictContext
from .grids import (
    BUCKET_COUNTS,
    RANDOM_COUNTS,
    REFORMER_MAX_ROUNDS,
    SF_DISTANCE_MAX,
    WINDOWS_MLM,
    WINDOWS_MT,
    cluster_choices,
    head_seed,
    kmeans_choices,
    stride_default,
    sweep_windows,
)
from .hashing import ReformerMethod, RoutingMethod, reformer_buckets, routing_members
from .learned import (
    DistanceMethod,
    KMeansMethod,
    QuantizationMethod,
    kmeans_assignments,
    quantization_buckets,
)
from .oracle import TopKMethod, TopPMethod
from .spec import ParamSpec
from .streaming import H2OMethod, StreamingMethod, VerticalSlashMethod
from .structured import FixedMethod, LongformerMethod, StridedMethod, WindowMethod
from .trained import IndexerMethod, SeerMethod

if TYPE_CHECKING:
    from ..sparsefinder import Artefact

__all__ = [
    "ADDONS",
    "ArenaMethod",
    "BUCKET_COUNTS",
    "FAMILIES",
    "METHODS",
    "RANDOM_COUNTS",
    "REFORMER_MAX_ROUNDS",
    "SF_DISTANCE_MAX",
    "WINDOWS_MLM",
    "WINDOWS_MT",
    "Method",
    "ParamSpec",
    "PredictContext",
    "available",
    "cluster_choices",
    "evaluate",
    "evaluate_head",
    "get_method",
    "head_data",
    "head_seed",
    "kmeans_assignments",
    "kmeans_choices",
    "own_params",
    "quantization_buckets",
    "reformer_buckets",
    "routing_members",
    "stride_default",
    "sweep_windows",
]

#: The method families, in the page's order (its picker's groups, its plots' hues): key -> label.
FAMILIES: dict[str, str] = {
    "sparse-transformer": "Sparse Transformer",
    "learned": "Sparsefinder and today's learned predictors",
    "baselines": "the paper's baselines",
    "predictors": "today's predictors",
    "oracles": "oracles",
}

METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        WindowMethod(),
        FixedMethod(),
        StridedMethod(),
        BigBirdMethod(),
        LongformerMethod(),
        ReformerMethod(),
        RoutingMethod(),
        DistanceMethod(),
        QuantizationMethod(),
        KMeansMethod(),
        IndexerMethod(),
        SeerMethod(),
        StreamingMethod(),
        TopKMethod(),
        TopPMethod(),
        H2OMethod(),
        MoBAMethod(),
        QuestMethod(),
        XAttentionMethod(),
        VerticalSlashMethod(),
        SpargeMethod(),
    )
}


def get_method(name: str) -> Method:
    """``METHODS[name]`` or a SparsescopeError (``field`` "method") listing the names."""
    if name not in METHODS:
        raise SparsescopeError(
            f"unknown method {name!r}; methods are {', '.join(METHODS)}", field="method"
        )
    return METHODS[name]


def available(artefact: Artefact | None, names: Sequence[str] | None = None) -> list[str]:
    """The method names (in registry order) that can run with this artefact (or without one)."""
    chosen = list(METHODS) if names is None else [get_method(nm).name for nm in names]
    return [nm for nm in METHODS if nm in chosen and METHODS[nm].usable(artefact)]


def evaluate(ctx: PredictContext, method: Method | str, params: dict) -> dict[str, Tensor]:
    """Per-head metrics of one setting (definitions §4, §8): recall, sparsity, exact, precision,
    mass recall and the block sparsity ``block_B`` of each tile size B of ``metrics.BLOCKS``, each
    (L, H) float64, for the finished mask ``method.predict(ctx, **params)`` against the gold
    graph. A run whose P is held sparse (a long text) is measured one head at a time
    (:func:`evaluate_head`): no (L, H, n, n) mask or P is built."""
    m = get_method(method) if isinstance(method, str) else method
    if not ctx.out.attn.is_dense:
        import torch

        per = [[evaluate_head(ctx, li, h, m, params) for h in range(ctx.heads)]
               for li in range(ctx.layers)]  # fmt: skip
        return {
            k: torch.tensor([[d[k] for d in row] for row in per], dtype=torch.float64)
            for k in per[0][0]
        }
    pred = m.predict(ctx, **params)
    gold, causal = ctx.out.graph, ctx.causal
    return {
        "recall": metrics.recall(pred, gold),
        "sparsity": metrics.sparsity(pred, causal=causal),
        "exact": metrics.exact(pred, gold),
        "precision": metrics.precision(pred, gold, causal=causal),
        "mass_recall": metrics.mass_recall(pred, ctx.out.probs),
        **{f"block_{b}": v for b, v in metrics.block_sparsities(pred, causal=causal).items()},
    }


def evaluate_head(
    ctx: PredictContext, layer: int, head: int, method: Method | str, params: dict
) -> dict[str, float]:
    """The metrics of :func:`evaluate` for head (``layer``, ``head``) alone, computed on its
    :meth:`PredictContext.view` by the method's ``measure`` hook (the Pareto engine's row
    bitsets, or an arena method's own counts, against the head's gold edges read from the
    sparse store): memory O(|G| + n²/8) for the head, never a dense (L, H, n, n) mask or P.
    Equal to ``evaluate(ctx, method, params)[metric][layer, head]`` to 1e-12 (summation order;
    tests/core/test_sparse_metrics.py). ``params`` are cleaned by ``Method.validate`` here."""
    from ..bitsets import METRICS, Gold

    m = get_method(method) if isinstance(method, str) else method
    m.require(ctx)
    v = ctx.view(layer, head)
    p = m.validate(v.n, params, v.artefact)
    got = m.measure(v, Gold.of(v), [p])  # metric -> (1, 1)
    return {k: float(got[k][0, 0]) for k in METRICS}


def head_data(
    ctx: PredictContext, layer: int, head: int, names: Collection[str] | None = None
) -> dict[str, Any]:
    """What the page needs to recompute every method's mask of head (layer, head) for any slider
    value: the registry's ``head_payload`` hooks merged (``payload_empty`` for a method that
    cannot run on ``ctx``); with ``names``, only those methods' (in the registry's order).
    Methods that give the same key give the same value (tested); the first one's is kept.
    Keys today (docs/architecture.md, GET …/heads/{layer}/{head}): ``seed`` (bigbird,
    longformer), ``reformer``, ``routing``, ``proj`` (sf-*), ``centroids`` (sf-kmeans),
    ``indexer`` and ``seer`` (``methods.trained``); without an artefact ``proj`` and ``indexer``
    are None and the others ``{}``."""
    out: dict[str, Any] = {}
    for name, m in METHODS.items():
        if names is not None and name not in names:
            continue
        part = m.head_payload(ctx, layer, head) if m.runs_on(ctx) else m.payload_empty
        for key, value in part.items():
            out.setdefault(key, value)
    return out
