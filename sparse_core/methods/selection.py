"""Shared machinery of the arena methods (SPEC §8): stable per-row orders, top-k by threshold as
row bitsets, block selections as row bitsets, and the compact payload encodings the page reads.

Every arena method chooses keys (or B × B blocks) by a score and breaks ties toward the lower
index (SPEC §8). Two equivalent forms of "the first k of a stable descending order" are used:

- :func:`stable_order` / :func:`first_k_mask` (predict, the page's payload): a stable argsort of
  the negated values, so equal values keep index order;
- :func:`threshold_bits` (the Pareto engine): the k-th largest value t of each row from one sort
  of the values, then ``v > t`` plus the lowest-index keys with ``v == t`` until k are taken —
  the same set (tested), but one sort of values serves every k and no n × n index array is made.

Block selections become row bitsets without an n × n mask: :func:`row_block_bits` (a per-query
choice of key blocks: MoBA, Quest) and :func:`block_bits` (a per-query-block choice:
XAttention, SpargeAttn). Tile B of the selections is one of ``metrics.BLOCKS``.

Payload encodings (:func:`b64_ints`, :func:`b64_floats`): little-endian bytes in base64, so a
512-token head's orders cost one byte per entry; float64 values arrive bit-exact, so the page's
cumulative sums and comparisons are Python's to the last bit.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator, Sequence

import numpy as np
import torch
from torch import Tensor

from ..bitsets import pack, words
from ..metrics import BLOCKS

#: The block sizes a block method's slider offers: the tile sizes of block sparsity, so a
#: method's own B always has its block sparsity reported (SPEC §4, §8).
BLOCK_CHOICES = list(BLOCKS)


def stable_order(values: Tensor | np.ndarray) -> np.ndarray:
    """Per row (last axis), the indices by value descending, equal values by index ascending:
    (…, m) -> (…, m) int64. NaN never occurs (scores and masses are finite or ±inf)."""
    v = values.numpy() if isinstance(values, Tensor) else np.asarray(values)
    return np.argsort(-v, axis=-1, kind="stable")


def first_k_mask(values: Tensor | np.ndarray, k: int) -> Tensor:
    """(…, m) bool: the first ``k`` of each row's :func:`stable_order` (all of it when k ≥ m)."""
    v = values.numpy() if isinstance(values, Tensor) else np.asarray(values)
    out = np.zeros(v.shape, dtype=bool)
    k = max(0, min(int(k), v.shape[-1]))
    if k:
        np.put_along_axis(out, stable_order(v)[..., :k], True, axis=-1)
    return torch.from_numpy(out)


def threshold_bits(values: np.ndarray, ks: Sequence[int]) -> Iterator[np.ndarray]:
    """Row bitsets of :func:`first_k_mask` for each k: values (R, n) float32 -> (R, W) uint64
    each, in the order of ``ks``. One descending sort of the values gives every row's k-th
    largest value t; a row keeps ``v > t``, and of the keys with ``v == t`` the lowest-index
    ones up to k (rows whose ties are all kept — nearly all — need no index work)."""
    R, n = values.shape
    desc = np.sort(values, axis=1)[:, ::-1]  # (R, n)
    for k in ks:
        k = max(0, min(int(k), n))
        if k == 0:
            yield np.zeros((R, words(n)), dtype=np.uint64)
            continue
        if k == n:
            yield pack(np.ones((R, n), dtype=bool))
            continue
        t = desc[:, k - 1 : k]  # (R, 1) the k-th largest
        keep = values >= t
        # rows where the ties at t are not all needed: keep only the lowest-index ones
        over = np.flatnonzero(desc[:, k] == t[:, 0])
        if over.size:
            sub = values[over]
            eq = sub == t[over]
            need = k - (sub > t[over]).sum(axis=1)  # (r,) how many ties to take
            keep[over] = (sub > t[over]) | (eq & (np.cumsum(eq, axis=1) <= need[:, None]))
        yield pack(keep)


def block_count(n: int, block: int) -> int:
    """T = ⌈n / B⌉ blocks (the last one ragged when B does not divide n)."""
    return -(-n // block)


def row_block_bits(sel: np.ndarray, n: int, block: int) -> np.ndarray:
    """Per-row block choices as row bitsets: sel (A, n, T) bool, T = ⌈n / B⌉ (row i keeps the
    columns of every chosen block) -> (A, n, W) uint64."""
    cols = np.repeat(sel, block, axis=-1)[..., :n]  # (A, n, n) bool, one pass
    return pack(cols)


def block_bits(sel: np.ndarray, n: int, block: int) -> np.ndarray:
    """Per-query-block choices as row bitsets: sel (A, T, T) bool (query block a keeps key
    block b) -> (A, n, W) uint64 (every row of block a gets a's columns)."""
    cols = np.repeat(sel, block, axis=-1)[..., :n]  # (A, T, n)
    rows = pack(cols)  # (A, T, W)
    return np.repeat(rows, block, axis=1)[:, :n]


def block_means(x: Tensor, block: int) -> Tensor:
    """(…, n, d) -> (…, T, d): the mean of each block's rows (the last block's own rows)."""
    n = x.shape[-2]
    T = block_count(n, block)
    pad = T * block - n
    if pad:
        x = torch.cat([x, x.new_zeros(*x.shape[:-2], pad, x.shape[-1])], dim=-2)
    sums = x.reshape(*x.shape[:-2], T, block, x.shape[-1]).sum(dim=-2)
    sizes = torch.full((T,), float(block), dtype=x.dtype)
    sizes[-1] = n - (T - 1) * block
    return sums / sizes[:, None]


# ----------------------------------------------------------------------------- payload encodings


def b64_ints(a: np.ndarray) -> dict:
    """Non-negative ints as ``{"dtype": "u8" | "u16", "shape": […], "data": base64}`` (row-major,
    little-endian; one byte each when they fit)."""
    a = np.asarray(a)
    dt = np.dtype("<u1") if a.size == 0 or int(a.max()) < 256 else np.dtype("<u2")
    data = base64.b64encode(np.ascontiguousarray(a, dtype=dt).tobytes()).decode("ascii")
    return {"dtype": "u8" if dt.itemsize == 1 else "u16", "shape": list(a.shape), "data": data}


def b64_floats(a: np.ndarray) -> dict:
    """float64 values bit-exact: ``{"dtype": "f64", "shape": […], "data": base64}``."""
    a = np.ascontiguousarray(a, dtype="<f8")
    return {"dtype": "f64", "shape": list(a.shape), "data": base64.b64encode(a.tobytes()).decode()}


def from_b64(enc: dict) -> np.ndarray:
    """Inverse of :func:`b64_ints` / :func:`b64_floats` (tests read payloads with it)."""
    dt = {"u8": "<u1", "u16": "<u2", "f64": "<f8"}[enc["dtype"]]
    return np.frombuffer(base64.b64decode(enc["data"]), dtype=dt).reshape(enc["shape"])
