"""The :class:`Method` base class: everything the rest of sparsescope needs from one method.

A method is one class (registered in ``sparse_core.methods.METHODS``) plus its JS twin in
``frontend/js``. It defines its mask and parameters; slider specs, validation, the sweep grid,
the finished prediction, the Pareto engine's fast path and the page's per-head data all go
through the hooks below, so no other module tests a method's name.

Definition hooks (what a method must or may define):

- ``own_params(n, artefact) -> [ParamSpec]``: its own sliders (the add-ons ``window`` and
  ``globals`` are appended by :meth:`Method.params`);
- ``own_grid(n, artefact) -> [dict]``: its own sweep grid (crossed with the window widths);
- ``check(n, p)``: cross-parameter checks after each value was range-checked;
- ``base(ctx, own) -> Tensor``: its own mask M, unfinished, broadcastable to (L, H, n, n).

Engine hooks (the Pareto sweep, definitions §4; defaults work for any method, override for speed):

- ``base_bits(ctx, own) -> (A, n, W) uint64``: M as row bitsets (:mod:`sparse_core.bitsets`),
  A = 1 (every head alike) or L·H; the default packs ``base()`` (memoised per text when
  ``text_independent``);
- ``bases_bits(ctx, owns)``: the bitsets of several own settings in order (default: one
  ``base_bits`` at a time; sf-distance bins one distance matrix for all thresholds);
- ``measure(ctx, gold, points) -> {metric: (P, L·H)}``: the metrics of cleaned points. The
  default groups points by own parameters and globals and crosses every window width into each
  base at once (``bitsets.count_bits``); BigBird overrides it, since its random keys are drawn
  outside the window and so depend on it;
- ``band(own)`` / ``base_params(own)``: a band |i − j| ≤ h that is part of the own mask is
  crossed in like the window (StreamingLLM's and H2O's recent keys), so one base serves every
  band.

Page hook: ``head_payload(ctx, layer, head) -> dict``: what the page needs to recompute the mask
for any slider value (merged over the registry by ``methods.head_data``); ``payload_empty`` is
the same keys' value when the method cannot run (no artefact).

Class attributes (plain values; everything outside sparse_core reads them from here or from
``GET /api/methods``, never from a list of names of its own):

- ``name`` (the registry key, the API's and the page's name) and ``label`` (the page's);
- ``needs_artefact``: runs only with a Sparsefinder artefact (projected queries and keys);
- ``window_default`` / ``globals_default``: the add-ons' slider defaults;
- ``text_independent``: the own mask depends only on n, causality and the parameters;
- ``payload_empty``: the keys ``head_payload`` gives (empty values); non-empty means the page
  needs the head's methods' part (``?part=methods``) before it can draw this method, served as
  ``payload`` in ``/api/methods``; the API's head schema accepts these keys;
- ``cost_rank``: how costly one head's Pareto sweep of the method is on the CPU (larger =
  costlier; measured at n = 512 on the real model with its artefact). The engine's
  two-core sweep of one head starts with the costliest so that the last left is cheap; None
  (a new, unmeasured method) is swept first. Any number orders: 6.5 goes between 6 and 7.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor

from .. import patterns
from ..bitsets import METRICS, Gold, count_bits, finish_bits, pack, to_metrics, words
from ..cancel import checkpoint
from ..errors import SparsescopeError
from .context import PredictContext
from .grids import sweep_windows
from .spec import ParamSpec, check_n, globals_spec, window_spec

if TYPE_CHECKING:
    from ..sparsefinder import Artefact

#: The add-on parameters every method has (definitions §3), after its own ones.
ADDONS = ("window", "globals")


def own_params(p: dict) -> dict:
    """The method's own parameters of a cleaned setting (the add-ons dropped)."""
    return {k: v for k, v in p.items() if k not in ADDONS}


class Method:
    """A sparse-attention method: slider specs, defaults, validation, sweep grid, predict."""

    name = ""
    label = ""
    #: the family the page groups and colours it by (a key of ``methods.FAMILIES``)
    family = ""
    needs_artefact = False
    window_default = 0
    globals_default = False
    #: the own mask depends only on n, causality and the parameters (not on the text)
    text_independent = False
    #: ``head_payload``'s keys with their value when the method cannot run (no artefact)
    payload_empty: dict[str, Any] = {}
    #: one head's sweep's CPU cost rank (larger = costlier; None: unmeasured, swept first)
    cost_rank: float | None = None

    @property
    def payload(self) -> bool:
        """Whether the page needs the head's methods' part to draw this method."""
        return bool(self.payload_empty)

    # -- definition hooks
    def own_params(self, n: int, artefact: Artefact | None = None) -> list[ParamSpec]:
        return []

    def own_grid(self, n: int, artefact: Artefact | None = None) -> list[dict]:
        return [{}]

    def base(self, ctx: PredictContext, p: dict) -> Tensor:
        """The method's own mask, unfinished: broadcastable to (L, H, n, n) bool."""
        return torch.zeros(ctx.n, ctx.n, dtype=torch.bool)

    def check(self, n: int, p: dict) -> None:
        """Cross-parameter checks (after each value was range-checked)."""

    # -- engine hooks
    def base_bits(self, ctx: PredictContext, own: dict) -> np.ndarray:
        """The own mask as row bitsets (A, n, W), A = 1 or L·H (not yet ∩ V, no add-ons)."""
        if self.text_independent:  # packed once per text for every setting
            key = ("bits", self.name, *sorted(own.items()))
            return ctx.memo(key, lambda: self._pack_base(ctx, own))
        return self._pack_base(ctx, own)

    def _pack_base(self, ctx: PredictContext, own: dict) -> np.ndarray:
        n, L, H = ctx.n, ctx.layers, ctx.heads
        m = self.base(ctx, own)  # (n, n) or (1 | L, 1 | H, n, n)
        if m.dim() == 4:
            m = m.expand(L, H, n, n)
        return pack(m).reshape(-1, n, words(n))  # (1 | L·H, n, W)

    def bases_bits(self, ctx: PredictContext, owns: Sequence[dict]) -> Iterator[np.ndarray]:
        """:meth:`base_bits` of each own setting, in order (one at a time: bounded memory)."""
        return (self.base_bits(ctx, own) for own in owns)

    def measure(self, ctx: PredictContext, gold: Gold, points: Sequence[dict]) -> dict:
        """Metrics of cleaned ``points``: metric -> (P, L·H) float64 (module docstring).

        Per (own parameters, globals) group one base ``(M ∪ Glob) ∩ V`` is built as bitsets and
        every window width of the group is crossed into it by ``bitsets.count_bits``."""
        groups: dict[tuple, list[int]] = {}
        for idx, p in enumerate(points):
            own = self.base_params(own_params(p))
            groups.setdefault((tuple(sorted(own.items())), p["globals"]), []).append(idx)
        res = {k: np.zeros((len(points), ctx.layers * ctx.heads)) for k in METRICS}
        owns = [dict(own) for own, _ in groups]
        for (key, idxs), base in zip(groups.items(), self.bases_bits(ctx, owns), strict=True):
            checkpoint()  # between base masks: a cancelled sweep stops here (sparse_core.cancel)
            bits = finish_bits(gold, base, key[1])[None]  # (1, A, n, W)
            widths = [self.crossed_width(points[i]) for i in idxs]
            got = to_metrics(gold, count_bits(gold, bits, widths))
            for metric in METRICS:
                res[metric][idxs] = got[metric][0]  # (nW, L·H)
        return res

    def band(self, own: dict) -> int:
        """Half width h of a band |i − j| ≤ h that is part of the own mask (−1: none). A method
        whose mask is ``base ∪ band`` (StreamingLLM's and H2O's recent keys) gives the band
        here and leaves it out of :meth:`base_params`: the engine then crosses it in like the
        window add-on (the union of two bands is the wider one), one base for every band."""
        return -1

    def base_params(self, own: dict) -> dict:
        """The own parameters the base bitsets depend on (default: all of them)."""
        return own

    def crossed_width(self, p: dict) -> int:
        """The band the engine crosses into the base of point ``p``: the window add-on and
        :meth:`band` together, as a window width (0: none)."""
        h = max(p["window"] // 2 if p["window"] > 0 else -1, self.band(own_params(p)))
        return 2 * h + 1 if h >= 0 else 0

    # -- page hook
    def head_payload(self, ctx: PredictContext, layer: int, head: int) -> dict[str, Any]:
        """What the page needs to recompute this method's mask of one head (JSON-ready)."""
        return {}

    # -- the common interface
    def params(self, n: int, artefact: Artefact | None = None) -> list[ParamSpec]:
        """Slider specs, defaults resolved for length n: own parameters, then window, globals."""
        n = check_n(n)
        return [
            *self.own_params(n, artefact),
            window_spec(n, self.window_default),
            globals_spec(self.globals_default),
        ]

    def defaults(self, n: int, artefact: Artefact | None = None) -> dict:
        return {p.name: p.default for p in self.params(n, artefact)}

    def validate(self, n: int, params: dict, artefact: Artefact | None = None) -> dict:
        """Clean ``params`` (missing ones take their default); SparsescopeError naming the
        parameter (``field``), its value and what is allowed for anything unknown or out of
        range."""
        specs = {s.name: s for s in self.params(n, artefact)}
        unknown = sorted(set(params) - set(specs))
        if unknown:
            raise SparsescopeError(
                f"{self.name} has no parameter {unknown[0]!r}; its parameters are "
                f"{', '.join(specs)}",
                field=unknown[0],
            )
        out = {k: (s.clean(params[k]) if k in params else s.default) for k, s in specs.items()}
        self.check(n, out)
        return out

    def grid(self, n: int, artefact: Artefact | None = None) -> list[dict]:
        """The Pareto sweep grid: own grid × ``grids.sweep_windows``, globals on (the paper adds
        global patterns to all methods, §5)."""
        return [
            {**g, "window": w, "globals": True}
            for g in self.own_grid(check_n(n), artefact)
            for w in sweep_windows(n)
        ]

    def usable(self, artefact: Artefact | None) -> bool:
        """Whether this method can run with ``artefact`` (or without one: None)."""
        return artefact is not None or not self.needs_artefact

    def needs(self) -> str:
        """What this method needs that an analysis may lack, for error messages."""
        return "a Sparsefinder artefact"

    def runs_on(self, ctx: PredictContext) -> bool:
        """Whether this method can run on ``ctx`` (projections exist or are not needed)."""
        return ctx.projected or not self.needs_artefact

    def require(self, ctx: PredictContext) -> None:
        """A SparsescopeError (``field`` "method") if this method cannot run on ``ctx``."""
        if not self.runs_on(ctx):
            raise SparsescopeError(
                f"{self.name} needs a Sparsefinder artefact (projected queries and keys); "
                "none is loaded for this model and alpha",
                field="method",
            )

    def predict(self, ctx: PredictContext, **params) -> Tensor:
        """The finished mask ``(M ∪ W_w ∪ Glob) ∩ V``: (L, H, n, n) bool."""
        self.require(ctx)
        p = self.validate(ctx.n, params, ctx.artefact)
        m = self.base(ctx, own_params(p)).expand(ctx.layers, ctx.heads, ctx.n, ctx.n)
        return patterns.finish(m, window=p["window"], globals_=p["globals"], causal=ctx.causal)

    def __repr__(self) -> str:
        return f"<Method {self.name}>"


class ArenaMethod(Method):
    """A method of today's sparse-attention arena (definitions §8, docs/methods.md): swept as its
    authors publish it, without the add-ons (every grid point has window 0 and globals off;
    both stay sliders). Its own grid is ``own_grid``.

    Engine hook ``plain_counts(ctx, gold, owns) -> counts (P, L·H)`` (optional): the counts of
    ``bitsets.selection_counts`` for points without add-ons, from what the method knows it keeps
    (gold edges, sizes, 16-tiles) instead of bitsets; points with a window or globals take the
    generic bitset path."""

    def grid(self, n: int, artefact: Artefact | None = None) -> list[dict]:
        return [{**g, "window": 0, "globals": False} for g in self.own_grid(check_n(n), artefact)]

    def plain_counts(self, ctx: PredictContext, gold: Gold, owns: Sequence[dict]) -> dict | None:
        return None

    def measure(self, ctx: PredictContext, gold: Gold, points: Sequence[dict]) -> dict:
        plain = [k for k, p in enumerate(points) if p["window"] == 0 and not p["globals"]]
        got = (
            self.plain_counts(ctx, gold, [own_params(points[k]) for k in plain]) if plain else None
        )
        if got is None:
            return super().measure(ctx, gold, points)
        res = {m: np.zeros((len(points), ctx.layers * ctx.heads)) for m in METRICS}
        for m, v in to_metrics(gold, got).items():
            res[m][plain] = v
        rest = [k for k in range(len(points)) if k not in set(plain)]
        if rest:
            other = super().measure(ctx, gold, [points[k] for k in rest])
            for m in METRICS:
                res[m][rest] = other[m]
        return res
