"""Every head's graph as a small thumbnail for the page's head grid: the analysis body's ``thumbs``.

At n = 512 the page cannot hold every head's payload (72 heads × n² cells), so until now only the
heads it had fetched had a thumbnail. The analysis body carries instead each head's probabilities
max-pooled into k × k blocks (k = min(n, 24)), so the grid shows the shape of every head at once.

Blocks are those of the page's own pooling (``thumbImage``, frontend/js/grid.js): row block ``a``
covers rows ``⌊a·n/k⌋ … ⌊(a+1)·n/k⌋ − 1`` (at least one row), columns likewise, so a thumbnail
drawn from the body and one drawn from a fetched head payload put the same blocks in the same
pixels. When k does not divide n the blocks differ in size by one row (e.g. 21 or 22 rows at
n = 512); the last block ends exactly at row n − 1.

Each thumbnail is one string, row-major, two cells per character. A cell is a state 0–7: 0 when
every probability of the block is exactly 0, else ``1 + round(6·√p)`` of the block's largest p,
i.e. the seven stops of the page's √p blue ramp (frontend/js/colours.js, BLUES: state s is drawn
as √p = (s − 1) / 6; any p > 0 is at least the lightest tint, never white). Cells ``2c`` and
``2c + 1`` are the character ``ALPHABET[8·s₂c + s₂c₊₁]`` (base64url's alphabet; an odd k·k is
padded with a 0). 72 heads at n = 512 add 72 × 288 characters (21 KB) to a body of 83 KB.
"""

from __future__ import annotations

import torch

#: Thumbnail side in pooled cells, at most (THUMB of frontend/js/grid.js).
THUMB = 24
#: States of a cell: exact zero, then the seven stops of the √p ramp.
STATES = 8
#: One character per pair of cells (base64url's alphabet).
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def bounds(n: int, k: int) -> list[tuple[int, int]]:
    """The k blocks ``[lo, hi)`` that split ``range(n)`` (each non-empty when k ≤ n)."""
    out = []
    for a in range(k):
        lo = (a * n) // k
        out.append((lo, max(lo + 1, ((a + 1) * n) // k)))
    return out


@torch.inference_mode()
def pool_max(probs: torch.Tensor, k: int) -> torch.Tensor:
    """Max of ``probs`` (..., n, n) over the k × k blocks of :func:`bounds` -> (..., k, k)."""
    n = probs.shape[-1]
    if probs.shape[-2] != n:
        raise ValueError(f"expected square attention maps, got {tuple(probs.shape[-2:])}")
    if not 1 <= k <= n:
        raise ValueError(f"k must be in [1, {n}], got {k}")
    b = bounds(n, k)
    if k == n:
        return probs.clone()
    rows = torch.stack([probs[..., lo:hi, :].amax(-2) for lo, hi in b], -2)  # (..., k, n)
    return torch.stack([rows[..., lo:hi].amax(-1) for lo, hi in b], -1)  # (..., k, k)


def states(pooled: torch.Tensor) -> torch.Tensor:
    """0 where the block is exactly 0, else ``1 + round(6·√p)`` (uint8, same shape)."""
    q = torch.round(pooled.float().clamp(0, 1).sqrt() * (STATES - 2)) + 1
    return torch.where(pooled > 0, q, torch.zeros_like(q)).to(torch.uint8)


def encode(cells: torch.Tensor) -> str:
    """States (a 1-D uint8 tensor) -> the string of :data:`ALPHABET` characters, two per char."""
    if cells.numel() % 2:
        cells = torch.cat([cells, cells.new_zeros(1)])
    pairs = cells.view(-1, 2).to(torch.int64)
    codes = (pairs[:, 0] * STATES + pairs[:, 1]).to(torch.uint8)
    return codes.numpy().tobytes().translate(_TABLE).decode("ascii")


def decode(text: str, count: int) -> list[int]:
    """The first ``count`` states of an :func:`encode`d string (the page's reading of it)."""
    out = []
    for ch in text:
        c = ALPHABET.index(ch)
        out += [c // STATES, c % STATES]
    return out[:count]


_TABLE = bytes.maketrans(bytes(range(len(ALPHABET))), ALPHABET.encode("ascii"))


@torch.inference_mode()
def head_thumbs(out, k_max: int = THUMB) -> dict:
    """``{"k": k, "cells": [one string of ⌈k²/2⌉ characters per head, layer-major]}`` of a
    run's probabilities ``out.attn`` (L, H, n, n), read sparse for a long text."""
    attn = out.attn
    n = attn.n
    k = min(n, k_max)
    if attn.is_dense:
        pooled = pool_max(attn.dense(), k)  # (L, H, k, k)
    else:
        pooled = torch.stack([pool_max_csr(attn, li, k) for li in range(attn.L)])
    st = states(pooled).flatten(2).flatten(0, 1)  # (L·H, k·k)
    return {"k": k, "cells": encode_rows(st)}


def pool_max_csr(attn, layer: int, k: int) -> torch.Tensor:
    """:func:`pool_max` of one layer of a sparse store (``sparse_core.sparse_probs``), from its
    edges alone -> (H, k, k) (P >= 0: the max over a block's edges, 0 for a block with none)."""
    n, H = attn.n, attn.H
    cell = torch.empty(n, dtype=torch.int64)
    for a, (lo, hi) in enumerate(bounds(n, k)):
        cell[lo:hi] = a
    crow = attn.crow[layer].cpu()
    rows = torch.repeat_interleave(torch.arange(H * n), crow[1:] - crow[:-1])  # (E,)
    h, i = rows // n, rows % n
    idx = (h * k + cell[i]) * k + cell[attn.col[layer].cpu().long()]
    out = torch.zeros(H * k * k, dtype=torch.float32)
    out.scatter_reduce_(0, idx, attn.val[layer].cpu(), "amax")
    return out.view(H, k, k)


def encode_rows(cells: torch.Tensor) -> list[str]:
    """:func:`encode` of every row of ``cells`` (R, c) uint8, at once (one string of
    ⌈c/2⌉ characters per row)."""
    rows, c = cells.shape
    if rows == 0:
        return []
    if c % 2:
        cells = torch.cat([cells, cells.new_zeros(rows, 1)], 1)
    pairs = cells.reshape(rows, -1, 2).to(torch.int64)
    codes = (pairs[..., 0] * STATES + pairs[..., 1]).to(torch.uint8)  # (R, ⌈c/2⌉)
    text = codes.numpy().tobytes().translate(_TABLE).decode("ascii")
    w = codes.shape[1]
    return [text[r * w : (r + 1) * w] for r in range(rows)]
