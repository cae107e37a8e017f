"""Level of detail for long texts: one head's attention as a pyramid of max-pooled tiles.

At n = 4,096 a head is 16.8 M cells; no screen shows them at once, and the nearest-neighbour
scaling of a canvas drops the cells it skips (a gold edge on a skipped row vanishes). The page
therefore draws a *max-pooled* picture, and this module is the server's side of it: the pyramid
that ``GET /api/analyses/{id}/heads/{layer}/{head}/tiles/{level}/{ti}/{tj}`` serves
(docs/api.md, "Tiles").

Levels. At level ℓ a cell pools the f × f pairs of f = 2^ℓ consecutive queries and keys: cell
(a, b) covers rows ``a·f … a·f + f − 1`` and columns ``b·f … b·f + f − 1`` (the last cell of a row
or column is cut at n). Its value is the block's largest probability

    P^ℓ_ab = max { P_ij : (i, j) in the block },

so a pooled cell is > 0 exactly when some (i, j) of its block is a gold edge (G = {P > 0}):
pooling never drops a gold edge, at any level (tests/app/test_lod.py checks it against the dense
graph). ``count`` is the number of gold edges in the block. Level 0 is the head itself (f = 1);
the top level ``top(n)`` is the first whose side ⌈n / f⌉ fits in one tile of ``TILE`` cells: the
*overview* (≤ 256 × 256 cells), tile (top, 0, 0).

Tiles. Level ℓ is cut into ⌈⌈n / f⌉ / TILE⌉² tiles of TILE × TILE cells; tile (ti, tj) holds cells
``ti·TILE …`` (rows) and ``tj·TILE …`` (columns). A tile is sent sparse and columnar: the local
row ``i``, column ``j``, value ``p`` and ``count`` of each non-zero cell,
row-major; p exactly (the float32 value, ``payloads.f32_exact``). At level 0 that is exactly
the head's edges inside the tile (tested).

One head is read at a time, through ``head_probs`` (the per-head accessor of
``sparse_core.methods.PredictContext`` when the context has one, else a slice of the run's
probabilities), never the whole (L, H, n, n) tensor.
"""

from __future__ import annotations

import numpy as np
import torch

from .errors import NotInAnalysis
from .payloads import f32_exact

#: Cells a side of one tile, and of the overview at most.
TILE = 256


def top(n: int) -> int:
    """The overview's level: the least ℓ with ⌈n / 2^ℓ⌉ ≤ TILE."""
    level = 0
    while -(-n // (1 << level)) > TILE:
        level += 1
    return level


def side(n: int, level: int) -> int:
    """Cells a side at ``level``: ⌈n / 2^level⌉."""
    return -(-n // (1 << level))


def tiles(n: int, level: int) -> int:
    """Tiles a side at ``level``."""
    return -(-side(n, level) // TILE)


def lod_info(n: int) -> dict:
    """The pyramid of a head of n tokens, as the head payload's ``lod`` field."""
    t = top(n)
    return {
        "tile": TILE,
        "top": t,
        "levels": [
            {"level": ell, "factor": 1 << ell, "side": side(n, ell), "tiles": tiles(n, ell)}
            for ell in range(t + 1)
        ],
    }


def check_tile(n: int, level: int, ti: int, tj: int) -> None:
    """:class:`NotInAnalysis` (a 404) naming the first of ``level``, ``ti``, ``tj`` out of range."""
    t = top(n)
    if not 0 <= level <= t:
        raise NotInAnalysis(
            f"level must be in [0, {t}] for this text of {n} tokens (0: every pair, {t}: the "
            f"overview), got {level}",
            field="level",
        )
    k = tiles(n, level)
    for name, v in (("ti", ti), ("tj", tj)):
        if not 0 <= v < k:
            raise NotInAnalysis(
                f"{name} must be in [0, {k - 1}] at level {level} ({k} tiles a side), got {v}",
                field=name,
            )


def head_probs(ctx, layer: int, head: int) -> torch.Tensor:
    """One head's probabilities (n, n) as a tensor, read through the context's per-head accessor
    (``PredictContext.head_probs``: a numpy view today, whatever storage backs it tomorrow)."""
    get = getattr(ctx, "head_probs", None)
    if get is None:
        return ctx.out.probs[layer, head]
    p = get(layer, head)
    if isinstance(p, torch.Tensor):
        return p.to_dense() if p.layout != torch.strided else p
    return torch.from_numpy(np.asarray(p))


@torch.inference_mode()
def pool(block: torch.Tensor, f: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Max and gold-edge count over f × f blocks of ``block`` (r, c) -> (⌈r/f⌉, ⌈c/f⌉) each."""
    r, c = block.shape
    if f == 1:
        return block, (block > 0).to(torch.int32)
    R, C = -(-r // f), -(-c // f)
    pad = torch.zeros(R * f, C * f, dtype=block.dtype)
    pad[:r, :c] = block  # probabilities are ≥ 0: zero padding never wins a max
    v = pad.view(R, f, C, f)
    return v.amax(dim=(1, 3)), (v > 0).sum(dim=(1, 3), dtype=torch.int32)


def tile_span(n: int, level: int, ti: int, tj: int) -> tuple[int, int, int, int]:
    """Rows ``r0 … r1`` and columns ``c0 … c1`` (ends excluded) that tile (ti, tj) covers."""
    span = TILE * (1 << level)  # tokens a side of a tile
    r0, c0 = ti * span, tj * span
    return r0, min(n, r0 + span), c0, min(n, c0 + span)


@torch.inference_mode()
def tile_from_edges(
    i: torch.Tensor, j: torch.Tensor, p: torch.Tensor, n: int, level: int, ti: int, tj: int
) -> dict:
    """:func:`tile_body` from the edges of the tile's rows (``i`` counted from its first row,
    ``j``, ``p``: ``SparseProbs.row_edges``), checked first: the same body, without a dense
    block (a long head's overview tile would otherwise take n² floats; 1 GiB at 16,384)."""
    check_tile(n, level, ti, tj)
    f = 1 << level
    r0, r1, c0, c1 = tile_span(n, level, ti, tj)
    R, C = -(-(r1 - r0) // f), -(-(c1 - c0) // f)
    keep = (j >= c0) & (j < c1)
    cell = (i[keep] // f) * C + (j[keep] - c0) // f
    pv = p[keep].float()
    mx = torch.zeros(R * C, dtype=torch.float32).scatter_reduce_(0, cell, pv, "amax")
    count = torch.bincount(cell, minlength=R * C).to(torch.int32)
    flat = mx.nonzero().squeeze(1)  # ascending: row-major, as tile_body's
    return _tile_dict(level, ti, tj, n, (r0, r1, c0, c1), (R, C), flat // C, flat % C,
                      mx[flat].numpy(), count[flat])  # fmt: skip


def _tile_dict(level, ti, tj, n, bounds, cells, ii, jj, vals, counts) -> dict:
    r0, r1, c0, c1 = bounds
    return {
        "level": level,
        "factor": 1 << level,
        "ti": ti,
        "tj": tj,
        "n": n,
        "rows": [r0, r1],
        "cols": [c0, c1],
        "cells": [int(cells[0]), int(cells[1])],
        "i": ii.tolist(),
        "j": jj.tolist(),
        "p": f32_exact(vals),
        "count": counts.tolist(),
    }


@torch.inference_mode()
def tile_body(p: torch.Tensor, level: int, ti: int, tj: int) -> dict:
    """Tile (ti, tj) of ``level`` of one head's probabilities ``p`` (n, n), checked first."""
    n = p.shape[-1]
    check_tile(n, level, ti, tj)
    f = 1 << level
    r0, r1, c0, c1 = tile_span(n, level, ti, tj)
    mx, count = pool(p[r0:r1, c0:c1].float(), f)  # (R, C)
    ij = mx.nonzero()  # (E, 2), row-major
    return _tile_dict(level, ti, tj, n, (r0, r1, c0, c1), mx.shape, ij[:, 0], ij[:, 1],
                      mx[ij[:, 0], ij[:, 1]].numpy(), count[ij[:, 0], ij[:, 1]])  # fmt: skip
