"""One method at many settings on one text, and the JSON of sweep points with their frontiers.

:func:`sweep_points` is the engine's per-text entry point: the (L, H) metrics of definitions §4 for
every point, computed by the method's ``measure`` hook (``sparse_core.methods.base``: every
window width crossed into one bitset base, ``sparse_core.bitsets``) and equal to
``methods.evaluate`` on the explicit masks (tests/core/test_pareto.py). Each method's frontier
is ``metrics.pareto_front`` of its (sparsity, recall) points (paper Figures 2 and 4).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from ..bitsets import BLOCK_METRICS, METRICS, Gold, fold_blocks
from ..cancel import checkpoint
from ..errors import SparsescopeError
from ..methods import Method, PredictContext, get_method
from ..metrics import BLOCKS, pareto_front

#: The x-axes of a Pareto plot: token sparsity, or block sparsity at one tile size.
X_AXES = ("sparsity", "block")
#: The tile size of ``x="block"`` when none is given (FlashAttention's tiles are 128, many
#: CPU / Triton kernels use 64).
DEFAULT_BLOCK = 64


def sweep_points(
    ctx: PredictContext,
    method: Method | str,
    points: Sequence[dict],
    gold: Gold | None = None,
    *,
    clean: bool = False,
) -> dict[str, Tensor]:
    """Metrics of ``method`` at each of ``points`` (param dicts, cleaned by
    ``Method.validate``): metric -> (P, L, H) float64, equal to ``methods.evaluate`` at each point
    (tested). ``gold`` (the text's ``bitsets.Gold``) is shared when sweeping several methods;
    ``clean``: the points are ``Method.validate``'s output for this n and artefact already."""
    method = get_method(method) if isinstance(method, str) else method
    method.require(ctx)
    checkpoint()  # between methods: a cancelled sweep stops here (sparse_core.cancel)
    gold = gold or Gold.of(ctx)
    pts = list(points) if clean else [method.validate(ctx.n, p, ctx.artefact) for p in points]
    L, H = ctx.layers, ctx.heads
    if not pts:
        return {k: torch.zeros(0, L, H, dtype=torch.float64) for k in METRICS}
    got = method.measure(ctx, gold, pts)  # metric -> (P, L·H)
    return {k: torch.from_numpy(got[k]).view(len(pts), L, H) for k in METRICS}


def rounded(x: float) -> float:
    """A figure as the JSON bodies carry it: 6 decimals."""
    return round(float(x), 6)


def check_axis(x: str = "sparsity", block: int | None = None) -> tuple[str, int | None]:
    """Clean a Pareto x-axis: ``("sparsity", None)`` or ``("block", B)`` with B in ``BLOCKS``
    (``DEFAULT_BLOCK`` when omitted). SparsescopeError naming ``x`` or ``block`` otherwise."""
    if x not in X_AXES:
        raise SparsescopeError(
            f"x must be one of {', '.join(X_AXES)} (token or block sparsity), got {x!r}", field="x"
        )
    if block is not None and (isinstance(block, bool) or block not in BLOCKS):
        raise SparsescopeError(
            f"block must be one of {', '.join(map(str, BLOCKS))} (the tile side), got {block!r}",
            field="block",
        )
    if x == "sparsity":
        return x, None
    return x, DEFAULT_BLOCK if block is None else int(block)


def points_json(
    grids: dict[str, list[dict]],
    values: dict[str, dict[str, np.ndarray]],
    x: str = "sparsity",
    block: int | None = None,
) -> dict:
    """``{"x", "block", "points": [...], "frontiers": {method: [indices]}}`` from per-point
    figures (P,). Each point carries sparsity, recall, exact, precision and ``block_sparsity``
    (``{"16": …, "128": …}``); the frontiers are over (x, recall) with x the token sparsity or,
    for ``x="block"``, the block sparsity at ``block`` (:func:`check_axis`)."""
    x, block = check_axis(x, block)
    points: list[dict] = []
    fronts: dict[str, list[int]] = {}
    for name, grid in grids.items():
        first = len(points)
        for k, p in enumerate(grid):
            figs = {m: rounded(values[name][m][k]) for m in METRICS if m in values[name]}
            if not all(m in figs for m in BLOCK_METRICS):  # sums saved before block sparsity
                figs.update({m: None for m in BLOCK_METRICS})
            points.append({"method": name, "params": p, **fold_blocks(figs)})
        fronts[name] = [first + k for k in frontier(points[first:], x, block)]
    return {"x": x, "block": block, "points": points, "frontiers": fronts}


def x_value(point: dict, x: str = "sparsity", block: int | None = None) -> float:
    """A point's x coordinate: its token sparsity, or its block sparsity at ``block``."""
    if x == "sparsity":
        return point["sparsity"]
    v = point["block_sparsity"][str(block or DEFAULT_BLOCK)]
    return math.nan if v is None else v


def frontier(points: Sequence[dict], x: str = "sparsity", block: int | None = None) -> list[int]:
    """``metrics.pareto_front`` over the (x, recall) of point dicts (indices into them)."""
    return pareto_front([(x_value(p, x, block), p["recall"]) for p in points])
