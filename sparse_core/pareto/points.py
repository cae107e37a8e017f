"""One method at many settings on one text, and the JSON of sweep points with their frontiers.

:func:`sweep_points` is the engine's per-text entry point: the (L, H) metrics of SPEC §4 for
every point, computed by the method's ``measure`` hook (``sparse_core.methods.base``: every
window width crossed into one bitset base, ``sparse_core.bitsets``) and equal to
``methods.evaluate`` on the explicit masks (tests/core/test_pareto.py). Each method's frontier
is ``metrics.pareto_front`` of its (sparsity, recall) points (paper Figures 2 and 4).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from ..bitsets import METRICS, Gold
from ..methods import Method, PredictContext, get_method
from ..metrics import pareto_front


def sweep_points(
    ctx: PredictContext,
    method: Method | str,
    points: Sequence[dict],
    gold: Gold | None = None,
) -> dict[str, Tensor]:
    """Metrics of ``method`` at each of ``points`` (param dicts, cleaned by
    ``Method.validate``): metric -> (P, L, H) float64, equal to ``methods.evaluate`` at each point
    (tested). ``gold`` (the text's ``bitsets.Gold``) is shared when sweeping several methods."""
    method = get_method(method) if isinstance(method, str) else method
    method.require(ctx)
    gold = gold or Gold(ctx.out.graph, ctx.causal)
    pts = [method.validate(ctx.n, p, ctx.artefact) for p in points]
    L, H = ctx.layers, ctx.heads
    if not pts:
        return {k: torch.zeros(0, L, H, dtype=torch.float64) for k in METRICS}
    got = method.measure(ctx, gold, pts)  # metric -> (P, L·H)
    return {k: torch.from_numpy(got[k]).view(len(pts), L, H) for k in METRICS}


def rounded(x: float) -> float:
    """A figure as the JSON bodies carry it: 6 decimals."""
    return round(float(x), 6)


def points_json(grids: dict[str, list[dict]], values: dict[str, dict[str, np.ndarray]]) -> dict:
    """``{"points": [...], "frontiers": {method: [indices]}}`` from per-point figures (P,)."""
    points: list[dict] = []
    fronts: dict[str, list[int]] = {}
    for name, grid in grids.items():
        first = len(points)
        for k, p in enumerate(grid):
            points.append(
                {"method": name, "params": p, **{m: rounded(values[name][m][k]) for m in METRICS}}
            )
        fronts[name] = [first + k for k in frontier(points[first:])]
    return {"points": points, "frontiers": fronts}


def frontier(points: Sequence[dict]) -> list[int]:
    """``metrics.pareto_front`` over the (sparsity, recall) of point dicts (indices into them)."""
    return pareto_front([(p["sparsity"], p["recall"]) for p in points])
