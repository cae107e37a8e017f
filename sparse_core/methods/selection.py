"""Shared machinery of the arena methods (definitions §8): stable per-row orders, top-k by threshold
as row bitsets, block selections as row bitsets, and the compact payload encodings the page reads.

Every arena method chooses keys (or B × B blocks) by a score and breaks ties toward the lower
index (definitions §8). Two equivalent forms of "the first k of a stable descending order" are used:

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
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import torch
from torch import Tensor

from .._method_kernels import prefix_block_counts
from ..bitsets import (
    Gold,
    block_gold,
    empty_counts,
    pack,
    row_tiles,
    selection_counts,
    valid_tiles16,
    words,
)
from ..metrics import BLOCKS

#: The block sizes a block method's slider offers: the tile sizes of block sparsity, so a
#: method's own B always has its block sparsity reported (definitions §4, §8).
BLOCK_CHOICES = list(BLOCKS)


def stable_order(values: Tensor | np.ndarray) -> np.ndarray:
    """Per row (last axis), the indices by value descending, equal values by index ascending:
    (…, m) -> (…, m) int64. NaN never occurs (scores and masses are finite or ±inf)."""
    v = values.numpy() if isinstance(values, Tensor) else np.asarray(values)
    return np.argsort(-v, axis=-1, kind="stable")


def stable_top(values: Tensor | np.ndarray, k: int) -> np.ndarray:
    """The first ``k`` columns of :func:`stable_order` (values by descending value, ties by
    index), without sorting whole rows: (R, m) -> (R, min(k, m)) int64.

    Each row's k-th largest value t (one ``np.partition``) bounds the candidates {j : v_j ≥ t}
    (at least k of them, all ties at t included); only they are sorted, by (−v, j), and the
    first k of each row kept. That is :func:`stable_order`'s prefix exactly (tested), for
    O(m + c log c) a row instead of O(m log m) (c candidates, k + ties)."""
    v = values.numpy() if isinstance(values, Tensor) else np.asarray(values)
    R, m = v.shape
    k = max(0, min(int(k), m))
    if k == 0 or k == m:
        return stable_order(v)[:, :k]
    t = -np.partition(-v, k - 1, axis=1)[:, k - 1]  # (R,) each row's k-th largest
    r, c = np.nonzero(v >= t[:, None])  # candidates, row-major (c ascending in a row)
    order = np.lexsort((c, -v[r, c], r))  # by row, value descending, index
    starts = np.concatenate([[0], np.cumsum(np.bincount(r, minlength=R))[:-1]])  # (R,)
    pick = starts[:, None] + np.arange(k)  # (R, k): the first k of each row's candidates
    return c[order][pick].astype(np.int64)


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


def threshold_counts(
    gold: Gold,
    layer_values: Callable[[int], np.ndarray],
    pairs: Sequence[tuple[int, int]],
    layer_top: Callable[[int, np.ndarray, int], np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """``bitsets.selection_counts`` of per-row top-k masks, optionally with a band: for each
    (k, r) of ``pairs`` the mask M_i = first_k(v_i) ∪ {j : |i − j| ≤ r} (r = −1: no band), ∩ V.

    ``layer_values(layer)`` gives (H, n, n) float32 with −∞ outside V: the whole-row top-k
    then ∩ V and the top-k among the valid keys keep the same valid keys (a valid key never
    ranks after an invalid one), so |first_k ∩ V_i| = min(k, |V_i|). Per layer one partition
    and a sort of the K = max k + 1 largest values give every row's k-th largest value t; a
    gold edge is kept iff its value is ≥ t, a 16-tile is filled iff its largest valid value is
    ≥ t, the band's kept keys are counted on the band itself (2r + 1 values a row). Rows whose
    ties at t are not all kept are redone exactly (a running count of the ties). Equal to the
    bitset path on explicit masks (tested). ``layer_top(layer, values, K)``, when given, makes
    the (H·n, K) K largest values ascending instead of the partition (the same values: H2O's
    :func:`streaming.h2o_top`)."""
    L, H, n = gold.L, gold.H, gold.n
    P, LH, T = len(pairs), L * H, -(-n // 16)
    held = np.zeros((P, len(gold.e_lh)), dtype=bool)
    size = np.zeros((P, LH), dtype=np.int64)
    occ = np.zeros((P, LH, T, T), dtype=bool)
    counted16, dist16 = gold.tiles[16]
    nvalid = np.arange(1, n + 1) if gold.causal else np.full(n, n)  # |V_i|
    bounds = np.searchsorted(gold.e_lh, np.arange(L + 1) * H)
    K = min(n, max(int(k) for k, _ in pairs) + 1)  # the largest values any k needs
    for li in range(L):
        vals = layer_values(li).reshape(H * n, n)
        if layer_top is not None:
            top = layer_top(li, vals, K)
        elif K < n:  # the K largest of each row, ascending: top[:, K − k] is the k-th largest
            top = np.sort(np.partition(vals, n - K, axis=1)[:, n - K :], axis=1)
        else:
            top = np.sort(vals, axis=1)
        pad = T * 16 - n
        tm = tile_max16(vals)  # (H·n, T) each tile's max
        tm_fin = np.isfinite(tm)
        hh0 = np.tile(nvalid, H)  # |V_i| of every row
        e0, e1 = bounds[li], bounds[li + 1]
        erow = (gold.e_lh[e0:e1] - li * H) * n + gold.e_i[e0:e1]
        ecol = gold.e_j[e0:e1]
        ev = vals[erow, ecol]
        heads = slice(li * H, (li + 1) * H)
        bands: dict[int, tuple] = {}
        widest, rmax = None, max(rr for _, rr in pairs)
        for q, (k, r) in enumerate(pairs):
            k = max(0, min(int(k), n))
            at = top.shape[1] - k  # the k-th largest
            t = top[:, at] if k else np.full(H * n, np.inf, dtype=vals.dtype)
            partial = np.zeros(H * n, dtype=bool)
            if 0 < k < n:
                partial = (top[:, at - 1] == t) & np.isfinite(t)
            exact = None
            rows = np.flatnonzero(partial)
            if rows.size:  # ties straddle the k-th place: the lowest-index ones are kept
                sub, tr = vals[rows], t[rows, None]
                eq = sub == tr
                need = k - (sub > tr).sum(axis=1, keepdims=True)
                exact = (sub > tr) | (eq & (np.cumsum(eq, axis=1) <= need))
                where = np.full(H * n, -1)
                where[rows] = np.arange(rows.size)
            sel = ev >= t[erow]
            filled = (tm >= t[:, None]) & tm_fin
            if exact is not None:
                pe = partial[erow]
                sel[pe] = exact[where[erow[pe]], ecol[pe]]
                ex = exact if not pad else np.pad(exact, ((0, 0), (0, pad)))
                filled[rows] = ex.reshape(rows.size, T, 16).any(axis=-1)
            hh = np.minimum(k, hh0)  # (H·n,) kept valid keys
            o = row_tiles(filled.reshape(H, n, T), n)  # (H, T, T)
            if r >= 0:
                if r not in bands:
                    offs = np.arange(-r, r + 1)
                    cols = np.arange(n)[:, None] + offs[None, :]  # (n, 2r + 1)
                    ok = (cols >= 0) & (cols < n) & ((offs <= 0) if gold.causal else True)
                    if widest is None:  # one gather per layer serves every band
                        widest = _band(vals, H, n, rmax)
                    bv = widest[:, :, rmax - r : rmax + r + 1]
                    bands[r] = (bv, np.tile(ok.sum(axis=1), H), cols, ok)
                bv, nband, cols, ok = bands[r]
                tt = t.reshape(H, n, 1)
                inter = ((bv >= tt) & (bv > -np.inf)).sum(axis=2).reshape(H * n)
                if exact is not None:
                    rr = rows % n
                    inter[rows] = (exact[np.arange(rows.size)[:, None], np.clip(cols[rr], 0, n - 1)]
                                   & ok[rr]).sum(axis=1)  # fmt: skip
                hh = hh + nband - inter
                sel = sel | (np.abs(gold.e_i[e0:e1] - ecol) <= r)
                o = o | (counted16 & (dist16 <= r))
            held[q, e0:e1] = sel
            size[q, heads] = hh.reshape(H, n).sum(axis=1)
            occ[q, heads] = o
    return selection_counts(gold, held, size, occ)


def tile_max16(vals: np.ndarray) -> np.ndarray:
    """(R, n) float32 -> (R, ⌈n / 16⌉): each row's largest value in every 16-column tile (the
    last tile ragged). torch's ``max_pool1d`` (stride 16, the last window cut short) reads each
    value once in vectorised passes; numpy's ``maximum.reduceat`` makes one short reduction per
    tile and takes about twice as long. A maximum is exact whichever way it is taken (no NaN
    occurs: values are finite or −∞), so the tiles are ``maximum.reduceat``'s (tested)."""
    t = torch.from_numpy(np.ascontiguousarray(vals))[None]  # (1, R, n)
    return torch.nn.functional.max_pool1d(t, 16, 16, ceil_mode=True)[0].numpy()


def _band(vals: np.ndarray, H: int, n: int, r: int) -> np.ndarray:
    """(H, n, 2r + 1) float32: row i's values at keys i − r … i + r (−∞ past the ends), one
    gather of the (H·n, n) values (the band's 2r + 1 values a row, not a padded copy of all n)."""
    offs = np.arange(-r, r + 1)
    cols = np.arange(n)[:, None] + offs[None, :]  # (n, 2r + 1)
    inside = (cols >= 0) & (cols < n)
    at = np.arange(n)[:, None] * n + np.clip(cols, 0, n - 1)
    out = vals.reshape(H, n * n)[:, at]  # (H, n, 2r + 1)
    out[:, ~inside] = -np.inf
    return out


def block_count(n: int, block: int) -> int:
    """T = ⌈n / B⌉ blocks (the last one ragged when B does not divide n)."""
    return -(-n // block)


def valid_per_block(n: int, block: int, causal: bool) -> np.ndarray:
    """(n, T) int16: |block b ∩ V_i|, the valid keys of each key block for each query (causal:
    the blocks before the query's own whole, its own up to i)."""
    T = block_count(n, block)
    sizes = np.minimum(block, n - np.arange(T) * block)  # (T,) keys per block
    if not causal:
        return np.broadcast_to(sizes.astype(np.int16), (n, T))
    own = np.arange(n) // block
    b = np.arange(T)[None, :]
    part = np.arange(n)[:, None] - (np.arange(T) * block)[None, :] + 1
    return np.where(b < own[:, None], sizes[None, :], np.where(b == own[:, None], part, 0)).astype(
        np.int16
    )


def row_block_counts(gold: Gold, sels: Sequence[np.ndarray], block: int) -> dict:
    """``bitsets.to_metrics``' counts of per-query block choices ``sels`` (each (L·H, n, T)
    bool), at block level (``bitsets.block_gold``: the gold edges and mass per row and key
    block): a row keeps the gold edges of its chosen blocks, and is whole iff those are all of
    its gold edges; it keeps |block b ∩ V_i| keys of each chosen block; a 16-tile is filled iff
    a row of it chose the block holding the tile's columns and has a valid key there."""
    n, causal = gold.n, gold.causal
    vcnt = valid_per_block(n, block, causal)
    bg = block_gold(gold, block, rows=True)
    T16 = -(-n // 16)
    v16 = valid_tiles16(n, causal)
    out: dict[str, list] = {k: [] for k in ("size", "hit", "covered", "mass")}
    occ = []
    for sel in sels:
        kept = (sel * bg["count"]).sum(axis=-1, dtype=np.int64)  # (L·H, n) gold edges kept
        out["hit"].append(kept.sum(axis=-1))
        out["covered"].append((kept == bg["per_row"]).sum(axis=-1))
        out["size"].append((sel * vcnt).sum(axis=(1, 2), dtype=np.int64))
        mass = bg["mass"]
        out["mass"].append(np.nan if mass is None else _masked_sum(mass, sel))
        fine = np.repeat(sel, block // 16, axis=-1)[..., :T16] & v16
        occ.append(row_tiles(fine, n))
    res = {k: np.stack([np.broadcast_to(x, (gold.L * gold.H,)) for x in v])
           for k, v in out.items()}  # fmt: skip
    res.update(empty_counts(gold, np.stack(occ)))
    return res


def prefix_row_block_counts(
    gold: Gold, first: np.ndarray, ks: Sequence[int], block: int
) -> dict[str, np.ndarray]:
    """:func:`row_block_counts` of the nested choices ``first[..., :k]`` for each k of ``ks``
    (``first`` (L·H, n, m) int: every query's distinct blocks, best first; 1 <= k <= m): the
    counts of one more block are added to those of the last k (each rank's blocks looked up
    once: gold edges and valid keys per row by a gather, not a pass over every (row, block)).
    The mass is summed over the same masked (L·H, n, T) array as :func:`row_block_counts`
    (one float64 reduction in the same order: bit for bit the same sums), and the 16-tiles
    are the 16-row ORs of the block choices, widened to 16-columns (a row's valid 16-tiles,
    causal c <= i // 16, are constant over its 16-row tile)."""
    n, causal = gold.n, gold.causal
    LH, _, m = first.shape
    T = block_count(n, block)
    T16 = -(-n // 16)
    vcnt = valid_per_block(n, block, causal)
    bg = block_gold(gold, block, rows=True)
    # the gold edges of each row's first j blocks and the valid keys of every row's, one pass
    kept_c, size_c = prefix_block_counts(
        bg["count"], np.ascontiguousarray(vcnt), np.ascontiguousarray(first, dtype=np.int64)
    )
    tri = np.tri(T16, dtype=bool) if causal else None  # (T16, T16) tile c <= row tile a
    flat = np.zeros(LH * n * T, dtype=bool)
    sel = flat.reshape(LH, n, T)
    at = np.arange(LH * n, dtype=np.int64) * T  # each row's first cell
    done = 0
    mass = bg["mass"]
    buf = None if mass is None else np.empty_like(mass)
    out: dict[str, list] = {k: [] for k in ("size", "hit", "covered", "mass")}
    occ = []
    for k in ks:
        k = int(k)
        if k < done:  # not nested in the last: start again
            flat[:] = False
            done = 0
        for j in range(done, k):
            flat[at + first[..., j].reshape(-1)] = True
        done = k
        kept = kept_c[..., k - 1]  # (L·H, n) gold edges kept
        out["hit"].append(kept.sum(axis=-1))
        out["covered"].append((kept == bg["per_row"]).sum(axis=-1))
        out["size"].append(size_c[:, k - 1])
        out["mass"].append(np.nan if mass is None else _masked_sum(mass, sel, buf))
        tiles = row_tiles(sel, n)  # (L·H, T16, T) the blocks a 16-row tile chose
        fine = np.repeat(tiles, block // 16, axis=-1)[..., :T16]
        occ.append(fine if tri is None else fine & tri)
    res = {k: np.stack([np.broadcast_to(x, (gold.L * gold.H,)) for x in v])
           for k, v in out.items()}  # fmt: skip
    res.update(empty_counts(gold, np.stack(occ)))
    return res


def _masked_sum(values: np.ndarray, sel: np.ndarray, buf: np.ndarray | None = None) -> np.ndarray:
    """Σ values over ``sel`` per leading index: (A, …) float64 finite and >= 0 (masses), (A, …)
    bool -> (A,). ``values · sel`` is ``where(sel, values, +0.0)`` for such values, and is
    written into ``buf`` (values' shape) when given: one scratch array serves a method's
    points (fresh pages for each cost about as much as the sum)."""
    masked = np.multiply(values, sel, out=buf)
    return masked.reshape(values.shape[0], -1).sum(axis=1)


def block_counts(gold: Gold, sels: Sequence[np.ndarray], block: int) -> dict:
    """``bitsets.to_metrics``' counts of per-query-block choices ``sels`` (each (L·H, T, T)
    bool): B × B blocks ∩ V, at block level (``bitsets.block_gold``)."""
    n, causal = gold.n, gold.causal
    T = block_count(n, block)
    sizes = np.minimum(block, n - np.arange(T) * block)
    vblock = sizes[:, None] * sizes[None, :]  # valid pairs of each block pair
    if causal:
        a, b = np.arange(T)[:, None], np.arange(T)[None, :]
        diag = sizes[:, None] * (sizes[:, None] + 1) // 2  # a block with itself: j <= i
        vblock = np.where(b < a, vblock, np.where(b == a, diag, 0))
    bg = block_gold(gold, block, rows=True)  # per row and key block: whole rows
    T16 = -(-n // 16)
    counted16 = gold.tiles[16][0]
    f = block // 16
    LH = bg["count"].shape[0]
    # the gold edges per (row, key block) as float32 in query blocks: a row's kept edges are
    # one batched product with its query block's choices (integers < 2^24: exact)
    cnt = np.zeros((LH, T * block, T), dtype=np.float32)
    cnt[:, :n] = bg["count"]
    cnt = cnt.reshape(LH, T, block, T)
    mass = bg["mass"]
    buf = None if mass is None else np.empty_like(mass)
    out: dict[str, list] = {k: [] for k in ("size", "hit", "covered", "mass")}
    occ = []
    for sel in sels:
        kept = np.matmul(cnt, sel.astype(np.float32)[..., None])  # (L·H, T, B, 1)
        kept = kept.reshape(LH, T * block)[:, :n].astype(np.int64)  # (L·H, n)
        out["hit"].append(kept.sum(axis=-1))
        out["covered"].append((kept == bg["per_row"]).sum(axis=-1))
        out["size"].append((sel * vblock).sum(axis=(1, 2), dtype=np.int64))
        if mass is None:
            out["mass"].append(np.nan)
        else:
            rsel = np.repeat(sel, block, axis=1)[:, :n]  # (L·H, n, T) each row's query block's
            out["mass"].append(_masked_sum(mass, rsel, buf))
        fine = np.repeat(np.repeat(sel, f, axis=-1), f, axis=-2)[:, :T16, :T16]
        occ.append(fine & counted16)
    res = {k: np.stack([np.broadcast_to(x, (gold.L * gold.H,)) for x in v])
           for k, v in out.items()}  # fmt: skip
    res.update(empty_counts(gold, np.stack(occ)))
    return res


def regroup(parts: dict, groups: dict, total: int) -> dict:
    """Counts computed per group (``groups``: key -> point indices, ``parts``: key -> counts of
    those points in order) put back in point order: {count: (total, …)}."""
    first = next(iter(parts.values()))
    out = {k: np.zeros((total, *v.shape[1:]), dtype=v.dtype) for k, v in first.items()}
    for key, idxs in groups.items():
        for k, v in parts[key].items():
            out[k][idxs] = v
    return out


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


def block_means(x: np.ndarray, block: int) -> np.ndarray:
    """(…, n, d) -> (…, T, d): the mean of each block's rows (the last block's own rows). The
    rows are added one after another (numpy adds along a non-last axis in order), so a head's
    means do not depend on the heads computed with it."""
    n = x.shape[-2]
    T = block_count(n, block)
    pad = T * block - n
    if pad:
        x = np.concatenate([x, np.zeros((*x.shape[:-2], pad, x.shape[-1]), x.dtype)], axis=-2)
    sums = x.reshape(*x.shape[:-2], T, block, x.shape[-1]).sum(axis=-2)
    sizes = np.full(T, block, dtype=x.dtype)
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


def b64_floats(a: np.ndarray, dtype: str = "f32") -> dict:
    """Floats bit-exact: ``{"dtype": "f32" | "f64", "shape": […], "data": base64}``. "f32" only
    for values that are float32 already (the estimates are rounded to float32 before anyone
    selects from them, so the page's selection works on the very same numbers)."""
    dt = {"f32": "<f4", "f64": "<f8"}[dtype]
    b = np.ascontiguousarray(a, dtype=dt)
    if dtype == "f32" and not np.array_equal(b.astype(np.float64), np.asarray(a, dtype=np.float64)):
        raise ValueError("b64_floats(dtype='f32') needs values that are float32 already")
    return {"dtype": dtype, "shape": list(b.shape), "data": base64.b64encode(b.tobytes()).decode()}


def from_b64(enc: dict) -> np.ndarray:
    """Inverse of :func:`b64_ints` / :func:`b64_floats` (tests read payloads with it)."""
    dt = {"u8": "<u1", "u16": "<u2", "f32": "<f4", "f64": "<f8"}[enc["dtype"]]
    return np.frombuffer(base64.b64decode(enc["data"]), dtype=dt).reshape(enc["shape"])
