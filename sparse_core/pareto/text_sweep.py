"""The per-text sweep (the page's live Pareto plot) and the analyze summary (definitions §4).

:func:`sweep_text` evaluates every available method at every point of its grid
(``Method.grid(n)``) on one text, per head; :meth:`TextSweep.points` gives one head's points or
the mean over heads (the plain mean of the per-head figures) with each method's frontier.
:func:`summary` is every method at its defaults, one point each, fast enough to run on every
analysed text (the web API's analyze body).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from torch import Tensor

from ..bitsets import METRICS, Gold
from ..methods import METHODS, PredictContext, available
from .points import points_json, rounded, sweep_points

if TYPE_CHECKING:
    from ..model import RunOutput
    from ..sparsefinder import Artefact


@dataclass
class TextSweep:
    """Every method's sweep points for one text: per head and for the mean over heads."""

    gold_sparsity: np.ndarray  # (L, H)
    grids: dict[str, list[dict]]  # method -> params of each point
    values: dict[str, dict[str, np.ndarray]]  # method -> metric -> (P, L, H)

    def points(
        self, layer: int | None = None, head: int | None = None, x: str = "sparsity",
        block: int | None = None,
    ) -> dict:  # fmt: skip
        """``{"scope", "gold_sparsity", "x", "block", "points", "frontiers"}`` for one head, or
        (both None) for the mean over heads (definitions §4: the plain mean of the per-head figures).
        Frontier entries index ``points``; they are computed on the rounded figures that are
        returned, over (x, recall): token sparsity, or block sparsity at ``block``
        (``points.check_axis``)."""
        if layer is None:
            gold = float(self.gold_sparsity.mean())
            pick: Callable[[np.ndarray], np.ndarray] = lambda a: a.mean(axis=(1, 2))  # noqa: E731
        else:
            gold = float(self.gold_sparsity[layer, head])
            pick = lambda a: a[:, layer, head]  # noqa: E731
        pts = points_json(self.grids, {nm: {m: pick(v[m]) for m in METRICS}
                                       for nm, v in self.values.items()}, x, block)  # fmt: skip
        return {"scope": "mean" if layer is None else "head", "gold_sparsity": rounded(gold), **pts}


def sweep_text(
    ctx: PredictContext, methods: Iterable[str] | None = None, per_head: bool = True
) -> TextSweep:
    """Sweep every available method's grid (``Method.grid(n)``) on one text.

    ``per_head`` keeps the (P, L, H) figures (the page asks for single heads); otherwise only the
    mean over heads is kept (arrays of shape (P, 1, 1)).
    """
    names = available(ctx.artefact, None if methods is None else list(methods))
    if not ctx.out.attn.is_dense and ctx.layers * ctx.heads > 1:
        return _per_head_sweep(ctx, names, per_head)
    gold = Gold.of(ctx)
    grids, values = {}, {}
    for name in names:
        grid = METHODS[name].grid(ctx.n, ctx.artefact)
        got = {k: v.numpy() for k, v in sweep_points(ctx, name, grid, gold).items()}
        if not per_head:
            got = {k: v.mean(axis=(1, 2), keepdims=True) for k, v in got.items()}
        grids[name], values[name] = grid, got
    gs = gold.sparsity()
    return TextSweep(gs if per_head else gs.mean(keepdims=True).reshape(1, 1), grids, values)


def _per_head_sweep(ctx: PredictContext, names: list[str], per_head: bool) -> TextSweep:
    """:func:`sweep_text` of a long text (P held sparse), one head at a time on its
    ``PredictContext.view`` (each head's figures are exactly its own there), so that what a
    method builds per layer is built for one head only (memory bounded per head)."""
    L, H = ctx.layers, ctx.heads
    parts = [[sweep_text(ctx.view(li, h), names) for h in range(H)] for li in range(L)]
    first = parts[0][0]
    gold = np.array([[p.gold_sparsity[0, 0] for p in row] for row in parts])
    values = {
        nm: {
            k: np.stack(
                [np.stack([p.values[nm][k][:, 0, 0] for p in row], axis=1) for row in parts], axis=1
            )  # fmt: skip
            for k in METRICS
        }
        for nm in first.values
    }  # (P, L, H)
    if not per_head:
        values = {nm: {k: v.mean(axis=(1, 2), keepdims=True) for k, v in d.items()}
                  for nm, d in values.items()}  # fmt: skip
        gold = gold.mean(keepdims=True).reshape(1, 1)
    return TextSweep(gold, first.grids, values)


def summary(out: RunOutput, artefact: Artefact | None = None) -> dict[str, dict[str, Tensor]]:
    """Every available method at its defaults: ``{name: {"recall": (L, H), "sparsity": (L, H)}}``
    (float64 tensors), the per-head figures of the web API's analyze summary (the gold sparsity
    per head, the summary's other column, is ``metrics.sparsity(out.graph, causal=out.causal)``).

    Computed with the Pareto engine (one point per method, one shared gold-edge list), so it is
    fast enough to run on every analysed text. :func:`summary_tables` does the same from
    contexts already built, several texts at once.
    """
    return summary_tables([PredictContext.from_run(out, artefact)])[0][1]


def summary_tables(
    ctxs: Sequence[PredictContext], names: Sequence[str] | None = None
) -> list[tuple[np.ndarray, dict[str, dict[str, Tensor]]]]:
    """:func:`summary` of each context, with its (L, H) gold sparsity first: ``[(gold,
    {name: {"recall", "sparsity"}})]``; ``names``: only those methods (the available ones among
    them, in the registry's order; None: every available one; each method's figures are the
    same whatever others are computed beside it). Texts of one length (and causality, artefact)
    are computed together (``PredictContext.stack``: each method runs once for all their heads;
    the figures are exactly each text's own), others one by one."""
    groups: dict[tuple, list[int]] = {}
    for k, c in enumerate(ctxs):
        groups.setdefault((c.n, c.causal, id(c.artefact)), []).append(k)
    res: list = [None] * len(ctxs)
    for idxs in groups.values():
        part = [ctxs[k] for k in idxs]
        if not part[0].out.attn.is_dense:  # a long text: head by head, memory bounded
            for k in idxs:
                res[k] = _per_head_summary(ctxs[k], names)
            continue
        ctx = PredictContext.stack(part)
        L, H, m = part[0].layers, part[0].heads, len(part)
        gold = Gold.of(ctx)
        tables: dict[str, dict[str, Tensor]] = {}
        for nm in _chosen(ctx.artefact, names):
            method = METHODS[nm]
            got = sweep_points(ctx, method, [method.defaults(ctx.n, ctx.artefact)], gold)
            tables[nm] = {k: got[k][0].reshape(m, L, H) for k in ("recall", "sparsity")}
        gs = gold.sparsity().reshape(m, L, H)
        for j, k in enumerate(idxs):
            res[k] = (gs[j], {nm: {key: v[j] for key, v in t.items()} for nm, t in tables.items()})
    return res


def _chosen(artefact, names: Sequence[str] | None) -> list[str]:
    """The available methods (registry order), only those of ``names`` unless it is None."""
    got = available(artefact)
    return got if names is None else [nm for nm in got if nm in names]


def _per_head_summary(
    ctx: PredictContext, names: Sequence[str] | None = None
) -> tuple[np.ndarray, dict[str, dict[str, Tensor]]]:
    """:func:`summary_tables` of one long text (P held sparse), one head at a time on its
    ``PredictContext.view`` (each method gives exactly that head's figures on a view), so that
    what a method builds per layer ((H, n, n) masses or masks) is built for one head only."""
    import torch

    L, H = ctx.layers, ctx.heads
    gold = np.zeros((L, H))
    tables: dict[str, dict[str, Tensor]] = {}
    names = _chosen(ctx.artefact, names)
    for nm in names:
        tables[nm] = {k: torch.zeros(L, H, dtype=torch.float64) for k in ("recall", "sparsity")}
    for li in range(L):
        for h in range(H):
            v = ctx.view(li, h)
            g = Gold.of(v)
            gold[li, h] = g.sparsity()[0, 0]
            for nm in names:
                method = METHODS[nm]
                got = sweep_points(v, method, [method.defaults(v.n, v.artefact)], g)
                for k in ("recall", "sparsity"):
                    tables[nm][k][li, h] = float(got[k][0].reshape(-1)[0])
    return gold, tables
