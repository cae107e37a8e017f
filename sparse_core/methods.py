"""THE registry of sparse-attention methods (docs/architecture.md, SPEC §2–§4).

Every consumer (CLI, JSON, web API, the page's JS twin) reads methods from :data:`METHODS`, in this
order: ``window``, ``fixed``, ``strided``, ``bigbird``, ``longformer``, ``reformer``, ``routing``,
``sf-distance``, ``sf-quantization``, ``sf-kmeans``. A :class:`Method` gives slider specs
(:meth:`Method.params`), defaults, validation, the Pareto sweep grid (:meth:`Method.grid`) and
``predict(ctx, **params) -> (L, H, n, n) bool``, always *finished* (SPEC §3):
``M' = (M ∪ W_w ∪ Glob) ∩ V`` — the method's own mask M, OR the common add-ons ``window`` (width w,
|i − j| ≤ ⌊w/2⌋; 0 = off; an even w acts as w + 1, as in ``patterns.window``) and ``globals``
(full rows and columns for the first and last token), then AND the valid region (causal: j ≤ i).

Defaults (n = sequence length; ``s(n) = max(2, round(√n))``):

=================  =======================================================  ==============
method             own parameters (default)                                 window/globals
=================  =======================================================  ==============
window             —                                                         min(11, 2n−1), on
fixed              stride l = s(n), c = max(1, l // 4), part union, spread off  0, off
strided            stride l = s(n), part union                               0, off
bigbird            random_keys r = 3 (per-head seed, see :func:`head_seed`)  3, on
longformer         n_globals g = 4 random global tokens (per-head seed)      min(11, 2n−1), on
reformer           n_buckets B = 8 (choice), rounds 1                        0, off
routing            n_clusters C = 8 (choice)                                 0, off
sf-distance        t = 2.0 (``sparsefinder.REFERENCE_THRESHOLD``)            0, off
sf-quantization    n_buckets B = 8                                           0, off
sf-kmeans          n_clusters B = 8 (choice), top_k 1                        0, off
=================  =======================================================  ==============

Sweep grids (:meth:`Method.grid`; every point has ``globals = True``, since the paper adds global
patterns to all methods, §5) cross each method's own grid with the window widths
:func:`sweep_windows` = {0, 1, 3, 5, 7, 9, 11, 15, 19, 23, 27} (paper §5), plus for n ≥ 256 the
paper's masked-LM widths {31, 41, 51, 75, 101, 125, 151, 175, 201, 251} (§6); widths above 2n − 1
are dropped. Own grids: window —; fixed l ∈ {s/2, s, 2s} (rounded, ≥ 2, ≤ n) × c ∈ {1, l // 4},
part union; strided l ∈ {s/2, s, 2s}, part union; bigbird r ∈ {2, 4, …, 20}; longformer
g ∈ {2, 4, …, 20}; reformer B ∈ {2, 4, 6, 8, 10, 12, 16, 20}, 1 round; routing C ∈ the same
(C ≤ n); sf-distance t ∈ {0.5, 1.0, …, 5.0}; sf-quantization B ∈ {2, 4, 6, 8, 10, 12, 16, 20}
(B ≤ n); sf-kmeans B ∈ the artefact's centroid counts × top_k ∈ {1, 2, 3} (k < B).

Seeds: BigBird's random keys and Longformer's random globals use :func:`head_seed` (``layer *
1000 + head``), Reformer's rotations seed 0 hashed with (layer, head, round) — all from the shared
hash PRNG, so the page recomputes the same masks.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor

from . import baselines, metrics, patterns
from .errors import SparsescopeError
from .sparsefinder import (
    CLUSTER_COUNTS,
    DISTANCE_THRESHOLDS,
    KMEANS_TOP_K,
    REFERENCE_THRESHOLD,
    balanced_buckets,
    sf_distance,
    sf_kmeans,
    sf_quantization,
)

if TYPE_CHECKING:
    from .model import RunOutput
    from .sparsefinder import Artefact

#: Window widths of the paper's MT sweep (§5) and, added for n >= 256, of its masked-LM sweep (§6).
WINDOWS_MT = (0, 1, 3, 5, 7, 9, 11, 15, 19, 23, 27)
WINDOWS_MLM = (31, 41, 51, 75, 101, 125, 151, 175, 201, 251)
#: Bucket / cluster counts of the paper's grids (Reformer, Routing, quantization, k-means).
BUCKET_COUNTS = (2, 4, 6, 8, 10, 12, 16, 20)
RANDOM_COUNTS = (2, 4, 6, 8, 10, 12, 14, 16, 18, 20)  # BigBird keys, Longformer globals
REFORMER_MAX_ROUNDS = 4
SF_DISTANCE_MAX = 10.0


def head_seed(layer: int, head: int) -> int:
    """The per-head seed of BigBird's random keys and Longformer's random globals."""
    return int(layer) * 1000 + int(head)


def stride_default(n: int) -> int:
    """``s(n) = max(2, round(√n))`` clamped to n: the default Sparse Transformer stride."""
    return max(1, min(n, max(2, round(math.sqrt(n)))))


def sweep_windows(n: int) -> list[int]:
    """Window widths swept for length n (module docstring)."""
    ws = list(WINDOWS_MT) + (list(WINDOWS_MLM) if n >= 256 else [])
    return [w for w in ws if w <= 2 * n - 1]


# ----------------------------------------------------------------------------- specs


@dataclass(frozen=True)
class ParamSpec:
    """One slider: ``kind`` is "int", "float", "choice" or "bool"; ``default`` resolved for n."""

    name: str
    label: str
    kind: str
    default: Any
    min: float | None = None
    max: float | None = None
    step: float | None = None
    choices: list | None = None
    help: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

    def clean(self, value: Any) -> Any:
        """``value`` coerced to this kind (query strings accepted) and range-checked."""
        v = _coerce(self, value)
        if self.kind == "choice":
            if v not in self.choices:
                raise SparsescopeError(
                    f"{self.name} must be one of {', '.join(map(str, self.choices))}, got {value!r}"
                )
        elif self.kind in ("int", "float"):
            lo, hi = self.min, self.max
            if (lo is not None and v < lo) or (hi is not None and v > hi):
                raise SparsescopeError(f"{self.name} must be in [{lo}, {hi}], got {value!r}")
        return v


def _coerce(spec: ParamSpec, value: Any) -> Any:
    bad = SparsescopeError(f"{spec.name} must be {_kind_words(spec)}, got {value!r}")
    kind = spec.kind
    if kind == "choice":
        if isinstance(value, str) and spec.choices and not isinstance(spec.choices[0], str):
            try:
                value = type(spec.choices[0])(float(value))
            except ValueError:
                raise bad from None
        if isinstance(value, float) and value.is_integer() and isinstance(spec.choices[0], int):
            value = int(value)
        return value
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "1", "yes", "on", "false", "0"):
            return value.lower() in ("true", "1", "yes", "on")
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise bad
    if isinstance(value, bool):
        raise bad
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise bad from None
    if not isinstance(value, int | float) or not math.isfinite(value):
        raise bad
    if kind == "int":
        if isinstance(value, float):
            if not value.is_integer():
                raise bad
            value = int(value)
        return int(value)
    return float(value)


def _kind_words(spec: ParamSpec) -> str:
    if spec.kind == "choice":
        return f"one of {', '.join(map(str, spec.choices or []))}"
    if spec.kind == "bool":
        return "true or false"
    return f"{'an integer' if spec.kind == 'int' else 'a number'} in [{spec.min}, {spec.max}]"


def _window_spec(n: int, default: int) -> ParamSpec:
    return ParamSpec(
        "window", "window width", "int", min(default, 2 * n - 1), 0, 2 * n - 1, 1,
        help="local window add-on: keys with |i − j| ≤ ⌊w/2⌋ (odd w; 0 = off)",
    )  # fmt: skip


def _globals_spec(default: bool) -> ParamSpec:
    return ParamSpec(
        "globals", "global first/last", "bool", default,
        help="global add-on: the first and last token attend to and are attended by all",
    )  # fmt: skip


# ----------------------------------------------------------------------------- context


@dataclass
class PredictContext:
    """One analysed text plus its projected queries / keys (computed once, SPEC §3)."""

    out: RunOutput
    artefact: Artefact | None
    proj_q: Tensor | None  # (L, H, n, r) float32
    proj_k: Tensor | None
    cache: dict = field(default_factory=dict, repr=False)  # small per-text intermediates

    @classmethod
    def from_run(cls, out: RunOutput, artefact: Artefact | None = None) -> PredictContext:
        if artefact is None:
            return cls(out, None, None, None)
        artefact.check_model(out.layers, out.heads, out.queries.shape[-1])
        with torch.inference_mode():
            return cls(out, artefact, artefact.project(out.queries), artefact.project(out.keys))

    @property
    def n(self) -> int:
        return self.out.n

    @property
    def layers(self) -> int:
        return self.out.layers

    @property
    def heads(self) -> int:
        return self.out.heads

    @property
    def causal(self) -> bool:
        return bool(self.out.causal)

    def seeds(self) -> Tensor:
        """(L, H) int64: :func:`head_seed` of every head."""
        li = torch.arange(self.layers)[:, None]
        return li * 1000 + torch.arange(self.heads)[None, :]

    def memo(self, key: tuple, make: Callable[[], Any]) -> Any:
        if key not in self.cache:
            self.cache[key] = make()
        return self.cache[key]


# ----------------------------------------------------------------------------- methods


class Method:
    """A sparse-attention method: slider specs, defaults, validation, sweep grid, predict."""

    name = ""
    label = ""
    needs_artefact = False
    window_default = 0
    globals_default = False

    # -- what subclasses define
    def own_params(self, n: int, artefact: Artefact | None = None) -> list[ParamSpec]:
        return []

    def own_grid(self, n: int, artefact: Artefact | None = None) -> list[dict]:
        return [{}]

    def base(self, ctx: PredictContext, p: dict) -> Tensor:
        """The method's own mask, unfinished: broadcastable to (L, H, n, n) bool."""
        return torch.zeros(ctx.n, ctx.n, dtype=torch.bool)

    def check(self, n: int, p: dict) -> None:
        """Cross-parameter checks (after each value was range-checked)."""

    # -- the common interface
    def params(self, n: int, artefact: Artefact | None = None) -> list[ParamSpec]:
        """Slider specs, defaults resolved for length n: own parameters, then window, globals."""
        n = _check_n(n)
        return [
            *self.own_params(n, artefact),
            _window_spec(n, self.window_default),
            _globals_spec(self.globals_default),
        ]

    def defaults(self, n: int, artefact: Artefact | None = None) -> dict:
        return {p.name: p.default for p in self.params(n, artefact)}

    def validate(self, n: int, params: dict, artefact: Artefact | None = None) -> dict:
        """Clean ``params`` (missing ones take their default); SparsescopeError naming the
        parameter, its value and what is allowed for anything unknown or out of range."""
        specs = {s.name: s for s in self.params(n, artefact)}
        unknown = sorted(set(params) - set(specs))
        if unknown:
            raise SparsescopeError(
                f"{self.name} has no parameter {unknown[0]!r}; its parameters are "
                f"{', '.join(specs)}"
            )
        out = {k: (s.clean(params[k]) if k in params else s.default) for k, s in specs.items()}
        self.check(n, out)
        return out

    def grid(self, n: int, artefact: Artefact | None = None) -> list[dict]:
        """The Pareto sweep grid: own grid × :func:`sweep_windows`, globals on (module doc)."""
        return [
            {**g, "window": w, "globals": True}
            for g in self.own_grid(_check_n(n), artefact)
            for w in sweep_windows(n)
        ]

    def predict(self, ctx: PredictContext, **params) -> Tensor:
        """The finished mask ``(M ∪ W_w ∪ Glob) ∩ V``: (L, H, n, n) bool."""
        if self.needs_artefact and ctx.proj_q is None:
            raise SparsescopeError(
                f"{self.name} needs a Sparsefinder artefact (projected queries and keys); "
                "none is loaded for this model and alpha"
            )
        p = self.validate(ctx.n, params, ctx.artefact)
        own = {k: v for k, v in p.items() if k not in ("window", "globals")}
        m = self.base(ctx, own).expand(ctx.layers, ctx.heads, ctx.n, ctx.n)
        return patterns.finish(m, window=p["window"], globals_=p["globals"], causal=ctx.causal)

    def __repr__(self) -> str:
        return f"<Method {self.name}>"


class WindowMethod(Method):
    name, label = "window", "Window (+ globals)"
    window_default, globals_default = 11, True


class FixedMethod(Method):
    name, label = "fixed", "Sparse Transformer: fixed"

    def own_params(self, n, artefact=None):
        s = stride_default(n)
        return [
            ParamSpec("stride", "block length l", "int", s, 1, n, 1, help="block length l"),
            ParamSpec(
                "c", "summary width c", "int", max(1, s // 4), 1, n, 1,
                help="A2: the last c positions of every block (c ≤ l)",
            ),
            ParamSpec("part", "part", "choice", "union", choices=list(patterns.PARTS),
                      help="A1 (own block), A2 (summary columns) or their union"),
            ParamSpec("spread", "spread heads", "bool", False,
                      help="head h takes the c-wide summary chunk h mod (l / c)"),
        ]  # fmt: skip

    def check(self, n, p):
        if p["c"] > p["stride"]:
            raise SparsescopeError(f"c must be in [1, stride = {p['stride']}], got {p['c']}")

    def own_grid(self, n, artefact=None):
        out = []
        for s in _strides(n):
            for c in sorted({1, max(1, s // 4)}):
                out.append({"stride": s, "c": c, "part": "union", "spread": False})
        return out

    def base(self, ctx, p):
        n, causal = ctx.n, ctx.causal
        if not p["spread"]:
            return patterns.fixed(n, p["stride"], p["c"], causal=causal, part=p["part"])
        per_head = [
            patterns.fixed(n, p["stride"], p["c"], causal=causal, part=p["part"], head=h)
            for h in range(ctx.heads)
        ]
        return torch.stack(per_head)[None]  # (1, H, n, n)


class StridedMethod(Method):
    name, label = "strided", "Sparse Transformer: strided"

    def own_params(self, n, artefact=None):
        return [
            ParamSpec("stride", "stride l", "int", stride_default(n), 1, n, 1, help="stride l"),
            ParamSpec("part", "part", "choice", "union", choices=list(patterns.PARTS),
                      help="A1 (the last l positions), A2 (every l-th) or their union"),
        ]  # fmt: skip

    def own_grid(self, n, artefact=None):
        return [{"stride": s, "part": "union"} for s in _strides(n)]

    def base(self, ctx, p):
        return patterns.strided(ctx.n, p["stride"], causal=ctx.causal, part=p["part"])


class BigBirdMethod(Method):
    """BigBird: window w + globals + r random keys per row drawn among the valid keys outside
    the window and globals (``patterns.bigbird``; seed :func:`head_seed`)."""

    name, label = "bigbird", "BigBird"
    window_default, globals_default = 3, True

    def own_params(self, n, artefact=None):
        return [
            ParamSpec("random_keys", "random keys r", "int", min(3, n), 0, n, 1,
                      help="random keys per row, drawn outside the window and globals"),
        ]  # fmt: skip

    def own_grid(self, n, artefact=None):
        # at most n random keys per row (the slider's range): short texts clamp the grid
        return [{"random_keys": r} for r in sorted({min(r, n) for r in RANDOM_COUNTS})]

    def predict(self, ctx, **params):
        p = self.validate(ctx.n, params)
        n, L, H = ctx.n, ctx.layers, ctx.heads
        base = patterns.finish(
            torch.zeros(n, n, dtype=torch.bool),
            window=p["window"], globals_=p["globals"], causal=ctx.causal,
        )  # fmt: skip
        draws = baselines.bigbird_draws(base, ctx.causal, ctx.seeds().flatten(), p["random_keys"])
        return (base | baselines.draws_mask(draws, n)).view(L, H, n, n)


class LongformerMethod(Method):
    """Longformer: window w + g random global tokens per text (``patterns.longformer_globals``,
    seed :func:`head_seed`): full rows and columns."""

    name, label = "longformer", "Longformer"
    window_default, globals_default = 11, True

    def own_params(self, n, artefact=None):
        return [
            ParamSpec("n_globals", "random globals g", "int", min(4, n), 0, n, 1,
                      help="random global tokens (full rows and columns) per text"),
        ]  # fmt: skip

    def own_grid(self, n, artefact=None):
        return [{"n_globals": g} for g in sorted({min(g, n) for g in RANDOM_COUNTS})]

    def base(self, ctx, p):
        pos = baselines.longformer_positions(ctx.n, p["n_globals"], ctx.seeds())  # (L, H, n)
        return pos[..., :, None] | pos[..., None, :]


class ReformerMethod(Method):
    name, label, needs_artefact = "reformer", "Reformer (LSH)", True

    def own_params(self, n, artefact=None):
        return [
            ParamSpec("n_buckets", "buckets B", "choice", 8, choices=list(BUCKET_COUNTS),
                      help="LSH buckets (argmax over [xR; −xR], R of 2r × B/2)"),
            ParamSpec("rounds", "hash rounds", "int", 1, 1, REFORMER_MAX_ROUNDS, 1,
                      help="independent rotations; an edge if the bucket is shared in any round"),
        ]  # fmt: skip

    def own_grid(self, n, artefact=None):
        return [{"n_buckets": b, "rounds": 1} for b in BUCKET_COUNTS]

    def base(self, ctx, p):
        return baselines.buckets_mask(reformer_buckets(ctx, p["n_buckets"], p["rounds"]))


class RoutingMethod(Method):
    name, label, needs_artefact = "routing", "Routing Transformer", True

    def own_params(self, n, artefact=None):
        ch = cluster_choices(n)
        return [
            ParamSpec("n_clusters", "clusters C", "choice", 8 if 8 in ch else ch[-1], choices=ch,
                      help="spherical k-means; each cluster takes its top ⌊n/C⌋+1 queries, keys"),
        ]  # fmt: skip

    def own_grid(self, n, artefact=None):
        return [{"n_clusters": c} for c in cluster_choices(n)]

    def base(self, ctx, p):
        return baselines.members_mask(*routing_members(ctx, p["n_clusters"]))


class DistanceMethod(Method):
    name, label, needs_artefact = "sf-distance", "Sparsefinder distance", True

    def own_params(self, n, artefact=None):
        return [
            ParamSpec("t", "threshold t", "float", REFERENCE_THRESHOLD, 0.0, SF_DISTANCE_MAX, 0.05,
                      help="edge iff the squared projected distance ‖q̃_i − k̃_j‖² < t"),
        ]  # fmt: skip

    def own_grid(self, n, artefact=None):
        return [{"t": t} for t in DISTANCE_THRESHOLDS]

    def base(self, ctx, p):
        return sf_distance(ctx.proj_q, ctx.proj_k, p["t"])


class QuantizationMethod(Method):
    name, label, needs_artefact = "sf-quantization", "Sparsefinder quantization", True

    def own_params(self, n, artefact=None):
        return [
            ParamSpec("n_buckets", "buckets B", "int", min(8, n), 1, n, 1,
                      help="balanced bins per projected dimension (b = ⌈n / B⌉ tokens each)"),
        ]  # fmt: skip

    def own_grid(self, n, artefact=None):
        return [{"n_buckets": b} for b in BUCKET_COUNTS if b <= n]

    def base(self, ctx, p):
        return sf_quantization(ctx.proj_q, ctx.proj_k, n_buckets=p["n_buckets"])


class KMeansMethod(Method):
    name, label, needs_artefact = "sf-kmeans", "Sparsefinder k-means", True

    def own_params(self, n, artefact=None):
        ch = _kmeans_choices(artefact)
        top = max(ch)
        return [
            ParamSpec("n_clusters", "clusters B", "choice", 8 if 8 in ch else ch[0], choices=ch,
                      help="k-means centroids fitted offline (the artefact's cluster counts)"),
            ParamSpec("top_k", "top-k", "int", 1, 1, top, 1,
                      help="clusters per token; edge iff the query's and key's sets intersect"),
        ]  # fmt: skip

    def check(self, n, p):
        if p["top_k"] > p["n_clusters"]:
            raise SparsescopeError(
                f"top_k must be in [1, n_clusters = {p['n_clusters']}], got {p['top_k']}"
            )

    def own_grid(self, n, artefact=None):
        return [
            {"n_clusters": b, "top_k": k}
            for b in _kmeans_choices(artefact)
            for k in KMEANS_TOP_K
            if k < b
        ]

    def base(self, ctx, p):
        cents = _centroids(ctx, p["n_clusters"])
        return sf_kmeans(ctx.proj_q, ctx.proj_k, cents, p["top_k"])


def _strides(n: int) -> list[int]:
    s = stride_default(n)
    return sorted({max(1, min(n, max(2, round(s * f)))) for f in (0.5, 1.0, 2.0)})


def cluster_choices(n: int) -> list[int]:
    ch = [c for c in BUCKET_COUNTS if c <= max(n, 2)]
    return ch or [BUCKET_COUNTS[0]]


def _kmeans_choices(artefact: Artefact | None) -> list[int]:
    if artefact is not None and artefact.centroids:
        return sorted(int(b) for b in artefact.centroids)
    return list(CLUSTER_COUNTS)


def _check_n(n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise SparsescopeError(f"n (the number of tokens) must be an integer >= 1, got {n!r}")
    return n


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
    )
}


def get_method(name: str) -> Method:
    """``METHODS[name]`` or a SparsescopeError listing the names."""
    if name not in METHODS:
        raise SparsescopeError(f"unknown method {name!r}; methods are {', '.join(METHODS)}")
    return METHODS[name]


# ----------------------------------------------------------------------------- assignments


def reformer_buckets(ctx: PredictContext, n_buckets: int, rounds: int = 1) -> Tensor:
    """(L, H, rounds, n) LSH buckets of the text (seed 0), memoised per (B, rounds)."""
    b = ctx.memo(
        ("reformer", n_buckets, rounds),
        lambda: baselines.reformer_buckets(ctx.proj_q, ctx.proj_k, n_buckets, rounds, 0).to(
            torch.uint8
        ),
    )
    return b.long()


def routing_members(ctx: PredictContext, n_clusters: int) -> tuple[Tensor, Tensor]:
    """(queries, keys) (L, H, C, n) bool of the balanced Routing clusters, memoised per C."""
    return ctx.memo(
        ("routing", n_clusters),
        lambda: baselines.routing_members(ctx.proj_q, ctx.proj_k, n_clusters),
    )


def quantization_buckets(ctx: PredictContext, n_buckets: int) -> tuple[Tensor, Tensor]:
    """(bq, bk) (L, H, n, r) balanced-bin ids, b = ⌈n / B⌉ (``sparsefinder.balanced_buckets``)."""
    b = max(1, math.ceil(ctx.n / n_buckets))
    return balanced_buckets(ctx.proj_q, b), balanced_buckets(ctx.proj_k, b)


def _centroids(ctx: PredictContext, n_clusters: int) -> Tensor:
    cents = ctx.artefact.centroids
    if n_clusters not in cents:
        raise SparsescopeError(
            f"n_clusters must be one of {', '.join(map(str, cents))} "
            f"(the artefact's k-means fits), got {n_clusters}"
        )
    return cents[n_clusters]


def kmeans_assignments(ctx: PredictContext, n_clusters: int, top_k: int) -> tuple[Tensor, Tensor]:
    """(aq, ak) (L, H, n, k): each token's top-k nearest centroids, exactly
    ``sparsefinder.nearest_centroids`` (float64 squared distances with the dims added in order,
    stable order, so ties go to the lower centroid) computed in numpy. The full order over the B
    centroids is memoised per B (uint8); its first k is the top-k."""
    cent = _centroids(ctx, n_clusters)
    if not 1 <= top_k <= n_clusters:
        raise SparsescopeError(f"top_k must be in [1, n_clusters = {n_clusters}], got {top_k}")

    def order(x: Tensor) -> Tensor:
        xv, cv = x.numpy().astype(np.float64), cent.numpy().astype(np.float64)
        d = np.zeros((*xv.shape[:-1], cv.shape[-2]))  # (L, H, n, B)
        for c in range(xv.shape[-1]):
            d += (xv[..., :, None, c] - cv[..., None, :, c]) ** 2
        return torch.from_numpy(np.argsort(d, axis=-1, kind="stable").astype(np.uint8))

    aq, ak = ctx.memo(("kmeans", n_clusters), lambda: (order(ctx.proj_q), order(ctx.proj_k)))
    return aq[..., :top_k].long(), ak[..., :top_k].long()


# ----------------------------------------------------------------------------- evaluation


def evaluate(ctx: PredictContext, method: Method | str, params: dict) -> dict[str, Tensor]:
    """Per-head metrics of one setting (SPEC §4): recall, sparsity, exact, precision, each (L, H)
    float64, for the finished mask ``method.predict(ctx, **params)`` against the gold graph."""
    m = get_method(method) if isinstance(method, str) else method
    pred = m.predict(ctx, **params)
    gold, causal = ctx.out.graph, ctx.causal
    return {
        "recall": metrics.recall(pred, gold),
        "sparsity": metrics.sparsity(pred, causal=causal),
        "exact": metrics.exact(pred, gold),
        "precision": metrics.precision(pred, gold, causal=causal),
    }


def available(artefact: Artefact | None, names: Sequence[str] | None = None) -> list[str]:
    """The method names (in registry order) that can run with this artefact (or without one)."""
    chosen = list(METHODS) if names is None else [get_method(nm).name for nm in names]
    return [nm for nm in METHODS if nm in chosen and (artefact or not METHODS[nm].needs_artefact)]


def summary(out: RunOutput, artefact: Artefact | None = None) -> dict[str, dict[str, Tensor]]:
    """Every available method at its defaults: ``{name: {"recall": (L, H), "sparsity": (L, H)}}``
    (float64 tensors), the per-head figures of the web API's analyze summary (the gold sparsity
    per head, the summary's other column, is ``metrics.sparsity(out.graph, causal=out.causal)``).

    Computed with the Pareto engine (one point per method, one shared gold-edge list), so it is
    fast enough to run on every analysed text.
    """
    from .bitsets import Gold
    from .pareto import sweep_points

    ctx = PredictContext.from_run(out, artefact)
    gold = Gold(out.graph, out.causal)
    res = {}
    for nm in available(artefact):
        method = METHODS[nm]
        got = sweep_points(ctx, method, [method.defaults(out.n, artefact)], gold)
        res[nm] = {"recall": got["recall"][0], "sparsity": got["sparsity"][0]}
    return res
