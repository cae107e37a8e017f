"""Row bitsets: the metrics of many predicted masks against one gold graph, every window at once.

The Pareto sweeps (:mod:`sparse_core.pareto`, definitions §4) evaluate thousands of masks per text;
none is built as an (L, H, n, n) bool tensor. A mask is held as row bitsets ``(…, n, W)`` uint64
(W = ⌈n / 64⌉; column j is bit j mod 64 of word ⌊j / 64⌋, numpy ``packbits`` little bit order),
and every window width is derived from one *base* mask M (the method's own mask, globals OR'd
in, ∩ V). With ``B_h = {(i, j) : |i − j| ≤ h}`` (h = ⌊w/2⌋; w = 0 is no band) and
``M_w = M ∪ (B_h ∩ V)``:

- ``|M_w ∩ V| = |M| + |B_h ∩ V| − |B_h ∩ M|``; the last term comes from each row's diagonal span
  [i − hmax, i + hmax], shifted out of the row into a few words and popcounted under one mask per
  h (:func:`band_counts`);
- ``|M_w ∩ G| = |M ∩ G| + #{(i, j) ∈ G ∖ M : |i − j| ≤ h}``: each gold edge is looked up once
  and the missed ones are counted by the first window that covers them (a cumulative histogram);
- exact: row i is whole in M_w iff every gold key it misses in M lies within distance h, i.e. the
  latest-covered of its gold keys is covered (a per-row maximum, then a histogram).

So one pass per base mask gives every window width; the result equals ``metrics`` on explicit
masks exactly (tests/core/test_pareto.py).

Block sparsity (``metrics.block_sparsity``, one metric ``block_B`` per tile size B of
``metrics.BLOCKS``): the base's tiles are OR-reduced from the bitsets (rows in groups of B, then
16/32-bit chunks, words or word pairs; :func:`tile_occupancy`). A tile of M_w is full iff it is
full in M or the band reaches it, i.e. the least |i − j| over its valid pairs is ≤ h; so the
empty tiles of every width are one product of the base's empty counted tiles with the (tiles ×
widths) table ``distance > h``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from .metrics import BLOCKS

#: Block sparsity per tile size, as the engines key it (the JSON bodies fold them into
#: ``"block_sparsity": {"16": …}``: :func:`fold_blocks`).
BLOCK_METRICS = tuple(f"block_{b}" for b in BLOCKS)
METRICS = ("sparsity", "recall", "exact", "precision", "mass_recall", *BLOCK_METRICS)
_ONE = np.uint64(1)


def fold_blocks(figures: dict) -> dict:
    """``{"sparsity": …, "block_16": …, …}`` -> ``{"sparsity": …, "block_sparsity": {"16": …}}``
    (other keys kept in order; the block figures last)."""
    out = {k: v for k, v in figures.items() if k not in BLOCK_METRICS}
    out["block_sparsity"] = {str(b): figures[f"block_{b}"] for b in BLOCKS}
    return out


def words(n: int) -> int:
    return (n + 63) // 64


def pack(mask: Tensor | np.ndarray) -> np.ndarray:
    """(…, n, n) bool -> (…, n, W) uint64 row bitsets (column j = bit j % 64 of word j // 64)."""
    a = mask.numpy() if isinstance(mask, Tensor) else np.asarray(mask)
    n = a.shape[-1]
    packed = np.packbits(a, axis=-1, bitorder="little")  # (…, n, ⌈n/8⌉)
    out = np.zeros((*a.shape[:-1], words(n) * 8), dtype=np.uint8)
    out[..., : packed.shape[-1]] = packed
    return out.view(np.uint64)


def unpack(bits: np.ndarray, n: int) -> np.ndarray:
    """Inverse of :func:`pack`: (…, n, W) uint64 -> (…, n, n) bool."""
    return np.unpackbits(bits.view(np.uint8), axis=-1, count=n, bitorder="little").astype(bool)


def popcount(bits: np.ndarray) -> np.ndarray:
    return np.bitwise_count(bits)


def row_bits(n: int, rows: np.ndarray) -> np.ndarray:
    """(…, n) bool column sets -> (…, W) uint64 (one bitset per leading index)."""
    return pack(rows[..., None, :])[..., 0, :]


def assign_bits(n: int, q_ids: np.ndarray, k_ids: np.ndarray, n_ids: int) -> np.ndarray:
    """Bucket masks as bitsets: q_ids, k_ids (A, S, n) ids in [0, n_ids), one assignment per slot
    s (a dimension, a top-k rank, a round); edge (i, j) iff some query slot id of i equals some
    key slot id of j. -> (A, n, W) uint64: row i = OR over its slots of the bitset of the keys
    holding that id (Reformer, sf-quantization, sf-kmeans)."""
    A, S = q_ids.shape[:2]
    kmem = np.zeros((A * n_ids, n), dtype=bool)  # keys holding each id in any slot
    a = (np.arange(A) * n_ids)[:, None, None]
    kmem[(k_ids + a).reshape(-1), np.tile(np.arange(n), A * k_ids.shape[1])] = True
    kbits = pack(kmem)  # (A·n_ids, W)
    off = (np.arange(A) * n_ids)[:, None]
    out = np.take(kbits, q_ids[:, 0] + off, axis=0)  # (A, n, W): a row gather per slot
    if S > 1:
        got = np.empty_like(out)
        for s in range(1, S):
            out |= np.take(kbits, q_ids[:, s] + off, axis=0, out=got)
    return out


def tile_occupancy(bits: np.ndarray, n: int) -> dict[int, np.ndarray]:
    """Which B × B tiles hold a set bit, for every B of :data:`BLOCKS` (ascending, each a
    multiple of the last): (…, n, W) uint64 -> {B: (…, T, T) bool}, T = ⌈n / B⌉ (ragged last
    tiles; the padding bits past column n are zero)."""
    lead, W = bits.shape[:-2], bits.shape[-1]
    rows, prev, out = bits, 1, {}
    for b in BLOCKS:
        T = -(-n // b)
        f = b // prev
        R = rows.shape[-2]
        if R % f:
            rows = np.concatenate([rows, np.zeros((*lead, f - R % f, W), np.uint64)], axis=-2)
        rows = _or_groups(rows.reshape(*lead, -1, f, W))  # (…, T, W)
        prev = b
        if b < 64:
            cols = rows.view(np.uint16 if b == 16 else np.uint32) != 0  # (…, T, W·64/b)
        else:
            g = b // 64
            w = rows
            if W % g:
                w = np.concatenate([w, np.zeros((*lead, T, g - W % g), np.uint64)], axis=-1)
            cols = np.bitwise_or.reduce(w.reshape(*lead, T, -1, g), axis=-1) != 0
        out[b] = cols[..., :T]
    return out


def _or_groups(x: np.ndarray) -> np.ndarray:
    """OR over axis −2 (…, G, f, W) -> (…, G, W): halving (one half of each group into the
    other, whole blocks of words) while f is even, faster than ``bitwise_or.reduce``."""
    while x.shape[-2] > 1 and x.shape[-2] % 2 == 0:
        h = x.shape[-2] // 2
        x = x[..., :h, :] | x[..., h:, :]
    return np.bitwise_or.reduce(x, axis=-2)


def tile_geometry(n: int, block: int, causal: bool) -> tuple[np.ndarray, np.ndarray]:
    """(counted (T, T) bool, dist (T, T) int64): whether a tile holds a valid pair, and the
    least |i − j| over its valid pairs (``metrics.block_sparsity``'s tiles)."""
    T = -(-n // block)
    lo = np.arange(T) * block
    hi = np.minimum(lo + block, n) - 1
    r0, r1 = lo[:, None], hi[:, None]
    c0, c1 = lo[None, :], hi[None, :]
    if causal:  # pairs j <= i: the tile holds one iff c0 <= r1; least i − j = r0 − c1
        return np.broadcast_to(c0 <= r1, (T, T)).copy(), np.maximum(0, r0 - c1)
    return np.ones((T, T), dtype=bool), np.maximum(0, np.maximum(c0 - r1, r0 - c1))


# ----------------------------------------------------------------------------- per-text gold

_GEOMETRY: dict[tuple[int, bool], dict] = {}
_GEOMETRY_LOCK = threading.Lock()
#: Lengths whose geometry is kept (each costs about 3 n² / 8 bytes: 6 MB at n = 4,096).
_GEOMETRY_KEEP = 4


def _text_geometry(n: int, causal: bool) -> dict:
    """What a :class:`Gold` of length n needs that depends on n and causality alone: the valid
    region V (n, n) bool, |V|, V and the globals ∩ V as row bitsets, the tiles of every block
    size; made once per (n, causal) and shared (read-only) by every head and text of that
    length (a long text's summary builds one ``Gold`` per head view)."""
    key = (int(n), bool(causal))
    with _GEOMETRY_LOCK:
        got = _GEOMETRY.get(key)
    if got is not None:
        return got
    v = np.ones((n, n), dtype=bool)
    valid = np.tril(v) if causal else v
    g = np.zeros((n, n), dtype=bool)
    g[[0, -1], :] = True
    g[:, [0, -1]] = True
    tiles = {b: tile_geometry(n, b, causal) for b in BLOCKS}
    got = {
        "valid": valid,
        "n_valid": int(valid.sum()),
        "vbits": pack(valid),  # (n, W)
        "gbits": pack(g & valid),  # (n, W) globals ∩ V
        "tiles": tiles,
        "n_tiles": {b: int(c.sum()) for b, (c, _) in tiles.items()},
        "tile_order": {},  # filled by Gold.tile_order (the same for every Gold of this key)
    }
    for a in (got["valid"], got["vbits"], got["gbits"]):
        a.flags.writeable = False
    with _GEOMETRY_LOCK:
        while len(_GEOMETRY) >= _GEOMETRY_KEEP:
            _GEOMETRY.pop(next(iter(_GEOMETRY)))
        return _GEOMETRY.setdefault(key, got)


class Gold:
    """Per text: the gold edges, the valid region and window geometry, shared by all methods."""

    def __init__(self, graph: Tensor, causal: bool, probs: Tensor | None = None) -> None:
        L, H, n, _ = graph.shape
        g = graph.numpy() if isinstance(graph, Tensor) else np.asarray(graph)
        # sorted (lh, i, j); ``flatnonzero`` then a divmod is ~8x faster than a 3-d ``nonzero``
        flat = np.flatnonzero(g)
        e_lh, rest = np.divmod(flat, n * n)
        e_i, e_j = np.divmod(rest, n)
        e_p = None
        if probs is not None:
            pr = probs.numpy() if isinstance(probs, Tensor) else np.asarray(probs)
            e_p = pr.reshape(-1)[flat]
        self._setup(L, H, n, causal, e_lh, e_i, e_j, e_p)

    @classmethod
    def of(cls, ctx) -> Gold:
        """The gold edges of a ``methods.PredictContext`` (its ``gold_edges`` accessor), with P
        on every edge (mass recall)."""
        obj = cls.__new__(cls)
        obj._setup(ctx.layers, ctx.heads, ctx.n, ctx.causal, *ctx.gold_edges())
        return obj

    def _setup(self, L, H, n, causal, e_lh, e_i, e_j, e_p) -> None:
        self.L, self.H, self.n, self.causal, self.W = L, H, n, bool(causal), words(n)
        self.e_lh, self.e_i, self.e_j = e_lh, e_i, e_j
        #: P of every edge (float64), None when the probabilities were not given (mass recall
        #: is then NaN)
        self.e_p = None if e_p is None else np.asarray(e_p, dtype=np.float64)
        self.e_d = np.abs(self.e_i - self.e_j)
        self.gold = np.bincount(self.e_lh, minlength=L * H).astype(np.int64)  # |G| per head
        geo = _text_geometry(n, self.causal)  # the same for every text and head of length n
        self.valid, self.n_valid, self.vbits, self.gbits = geo["valid"], geo["n_valid"], \
            geo["vbits"], geo["gbits"]  # fmt: skip
        self.v_whole = not causal and n % 64 == 0  # every bit of vbits set: ∩ V changes nothing
        self.shift = (self.e_j & 7).astype(np.uint8)  # the edge's bit in its byte
        self._pos: dict[int, np.ndarray] = {}
        self._geo: dict[tuple, dict] = {}
        self._plans: dict[tuple, dict] = {}
        self._orders: dict[tuple, dict] = {}
        self._row: np.ndarray | None = None
        self.tiles = geo["tiles"]
        self.n_tiles = geo["n_tiles"]
        self._tile_order: dict[int, tuple[np.ndarray, np.ndarray]] = geo["tile_order"]
        self._bits: np.ndarray | None = None
        self._runs: dict | None = None
        self._edge_idx: dict = {}
        self._block_gold: dict = {}

    def runs(self) -> dict[str, np.ndarray]:
        """The edges' runs (made once): ``row_starts`` / ``row_len`` of each row that has edges,
        ``head_starts`` of each head that has edges (``heads``), ``row_head_starts`` (where each
        such head's rows start among the rows), ``rows_per_head`` (L·H,) rows with edges."""
        if self._runs is None:
            LH = self.L * self.H
            row = self.row_index()
            row_starts = np.flatnonzero(np.diff(row, prepend=-1))
            row_head = self.e_lh[row_starts]
            head_starts = np.flatnonzero(np.diff(self.e_lh, prepend=-1))
            heads = self.e_lh[head_starts]
            self._runs = {
                "row_starts": row_starts,
                "row_len": np.diff(np.append(row_starts, len(row))),
                "head_starts": head_starts,
                "heads": heads,
                "row_head_starts": np.searchsorted(row_head, heads),
                "rows_per_head": np.bincount(row_head, minlength=LH),
            }
        return self._runs

    def edge_index(self, key: tuple, make) -> np.ndarray:
        """A per-edge array memoised on this Gold under ``key`` (e.g. each edge's flat index
        into a method's (L·H, n, T) block choices)."""
        if key not in self._edge_idx:
            self._edge_idx[key] = make()
        return self._edge_idx[key]

    def bits(self) -> np.ndarray:
        """The gold graph as row bitsets (L·H, n, W) uint64, built from the edge list (made
        once): a method that needs the whole graph's bits reads them here."""
        LH = self.L * self.H
        return self.bit_bytes()[:-1].view(np.uint64).reshape(LH, self.n, self.W)

    def bit_bytes(self) -> np.ndarray:
        """:meth:`bits` viewed as bytes, one zero byte after them (LH·n·8W + 1,) uint8 (a byte
        lookup's "no draw"): one compiled pass over the edges (``_method_kernels.set_bits``)."""
        if self._bits is None:
            from ._method_kernels import set_bits  # numba: imported when first needed

            size = self.L * self.H * self.n * 8 * self.W
            self._bits = set_bits(self.flat_pos(self.L * self.H), self.shift, size)
        return self._bits

    def tile_order(self, block: int) -> tuple[np.ndarray, np.ndarray]:
        """(flat indices of the counted B × B tiles by ascending least |i − j|, those distances)."""
        if block not in self._tile_order:
            counted, dist = self.tiles[block]
            idx = np.flatnonzero(counted.reshape(-1))
            d = dist.reshape(-1)[idx]
            order = np.argsort(d, kind="stable")
            self._tile_order[block] = (idx[order], d[order])
        return self._tile_order[block]

    def sparsity(self) -> np.ndarray:
        """(L, H) float64 gold sparsity ``1 − |G ∩ V| / |V|`` (= ``metrics.sparsity(graph)``)."""
        inside = self.e_j <= self.e_i if self.causal else np.ones(self.e_j.shape, dtype=bool)
        g = np.bincount(self.e_lh[inside], minlength=self.L * self.H)
        return (1.0 - g / self.n_valid).reshape(self.L, self.H)

    def flat_pos(self, A: int) -> np.ndarray:
        """Flat byte index of every gold edge in a (A, n, W) bitset (A = 1 or L·H) viewed as
        bytes (little-endian words: column j is bit j % 8 of byte j // 8 of the row)."""
        if A not in self._pos:
            a = self.e_lh if A > 1 else np.zeros_like(self.e_lh)
            self._pos[A] = (a * self.n + self.e_i) * (8 * self.W) + (self.e_j >> 3)
        return self._pos[A]

    def geometry(self, hs: np.ndarray) -> dict:
        """Per window set: |B_h ∩ V|, each edge's first covering window (sorted by h), keys."""
        tag = tuple(int(h) for h in hs)
        if tag not in self._geo:
            nq, n, LH = len(hs), self.n, self.L * self.H
            order = np.argsort(hs, kind="stable")
            inv = np.empty_like(order)
            inv[order] = np.arange(nq)
            # each edge's first covering window, looked up by its distance |i − j| < n in a
            # table (one gather rather than a binary search per edge)
            lut = np.searchsorted(hs[order], np.arange(n), side="left").astype(np.uint8)
            first = lut[self.e_d]
            self._geo[tag] = {
                "band_v": np.array([self.band_valid(int(h)) for h in hs], dtype=np.int64),
                "first": first,  # (E,) in [0, nq]; nq: no window reaches it
                "head_key": self.e_lh * (nq + 1),
                "row_key": np.repeat(np.arange(LH) * (nq + 1), n)[None, :],
                "inv": inv,
            }
        return self._geo[tag]

    def edge_plan(self, hs: np.ndarray, A: int) -> dict:
        """The gold edges in order of (head, first covering window) for :func:`count_bits`:
        their byte positions in a (A, n, W) bitset (``flat_pos``), bits, first windows and rows
        (a torch index), the runs of equal (head, first) (starts, their bin in the (L·H, nq + 1)
        table, sizes) and the first run of each head that has edges. All but the positions
        depend only on the window set (made once for A = 1 and A = L·H)."""
        tag = (tuple(int(h) for h in hs), A)
        plan = self._plans.get(tag)
        if plan is None:
            part = self._edge_order(hs)
            plan = self._plans[tag] = {**part, "pos": self.flat_pos(A)[part["order"]]}
        return plan

    def _edge_order(self, hs: np.ndarray) -> dict:
        """:meth:`edge_plan` without the positions, per window set."""
        tag = tuple(int(h) for h in hs)
        got = self._orders.get(tag)
        if got is None:
            nq, LH = len(hs), self.L * self.H
            geo = self.geometry(hs)
            key = geo["head_key"] + geo["first"]  # (E,) bin in the (L·H, nq + 1) table
            # a stable sort is one permutation whatever the algorithm: numpy sorts 16-bit keys
            # by radix (linear), wider ones by timsort
            small = LH * (nq + 1) <= 1 << 16
            order = np.argsort(key.astype(np.uint16) if small else key, kind="stable")
            key = key[order]
            starts = np.flatnonzero(np.diff(key, prepend=-1))  # runs of one (head, first)
            heads = key[starts] // (nq + 1)
            head_starts = np.flatnonzero(np.diff(heads, prepend=-1))
            p = self.e_p[order] if self.e_p is not None else None
            got = self._orders[tag] = {
                "order": order,
                "p": p,  # P of each edge, in plan order (None: no probabilities)
                "p32": None if p is None else p.astype(np.float32),  # the same (float32 values)
                "run_p": None if p is None else np.add.reduceat(p, starts) if len(p) else p,
                "shift": self.shift[order],
                "first": geo["first"][order],
                "row": torch.from_numpy(self.row_index()[order]),
                "starts": starts,
                "bin": key[starts],
                "size": np.diff(np.append(starts, len(key))),
                "head_starts": head_starts,
                "heads": heads[head_starts],
                "held_bins": heads[head_starts] * (nq + 1),  # bin (head, 0)
                "bins": LH * (nq + 1),
            }
        return got

    def row_index(self) -> np.ndarray:
        """(E,) int64: each gold edge's row of the (L·H·n) rows, ``a · n + i`` (made once)."""
        if self._row is None:
            self._row = self.e_lh * self.n + self.e_i
        return self._row

    def band_valid(self, h: int) -> int:
        """|B_h ∩ V|."""
        n = self.n
        if h < 0:
            return 0
        h = min(h, n - 1)
        one_side = h * n - h * (h + 1) // 2  # Σ_{d=1..h} (n − d)
        return n + one_side if self.causal else n + 2 * one_side


def half_widths(windows: Sequence[int]) -> np.ndarray:
    """Window widths -> half widths h = ⌊w/2⌋ (−1 for w = 0: no band)."""
    return np.array([(w // 2) if w > 0 else -1 for w in windows], dtype=np.int64)


def band_counts(bits: np.ndarray, n: int, hs: Sequence[int]) -> np.ndarray:
    """Σ_i |{j : |i − j| ≤ h} ∩ M_i| for each h: bits (…, n, W) -> (…, len(hs)) int64.

    Each row's diagonal span [i − hmax, i + hmax] is shifted out of the row bitset into
    ⌈(2 hmax + 1) / 64⌉ words (:func:`skew`), so that bit b of every row is the offset
    j − i = b − hmax. Those words are then summed over the rows bit by bit
    (:func:`column_counts`), and the count for h is the sum over offsets |d| ≤ h.
    """
    hs = [int(h) for h in hs]
    lead, W = bits.shape[:-2], bits.shape[-1]
    A = int(np.prod(lead, dtype=np.int64)) if lead else 1
    out = np.zeros((A, len(hs)), dtype=np.int64)
    pos = [k for k, h in enumerate(hs) if h >= 0]
    if pos and A:
        hmax = min(max(hs[k] for k in pos), n - 1)
        span = 2 * hmax + 1
        ext = skew(bits.reshape(A, n, W), n, hmax)  # (R, A, ⌈span / 64⌉), rows outermost
        per_offset = column_counts(ext)[:, :span]  # (A, span): rows with bit set at offset b
        cum = np.zeros((A, span + 1), dtype=np.int64)
        np.cumsum(per_offset, axis=-1, out=cum[:, 1:])
        for k in pos:
            h = min(hs[k], hmax)
            out[:, k] = cum[:, hmax + h + 1] - cum[:, hmax - h]
    return out.reshape(*lead, len(hs))


#: bit offsets 0..63 as shift amounts along the row axis of a (64 rows, …) block
_SHIFTS = np.arange(64, dtype=np.uint64)[:, None, None]


def skew(x: np.ndarray, n: int, hmax: int) -> np.ndarray:
    """Row i's columns [i − hmax, i + hmax] (zeros outside [0, n)) as ⌈(2 hmax + 1) / 64⌉ words,
    rows outermost: (A, n, W) uint64 -> (R, A, nwx) with R = 64·K >= n + c; row i is at
    R-index i + c (c = 64·⌈hmax / 64⌉ − hmax), the other rows are zero, and bit b of its
    span is column i − hmax + b.

    With the rows moved down by c and the words right by ⌈hmax / 64⌉, row 64 k + r (of the
    moved rows) starts its span at bit r of word k, so word q of it is
    ``(x[k + q] >> r) | (x[k + q + 1] << (64 − r))`` (no shift by 64: ``<< 1 << 63 − r``).
    The words k + q and k + q + 1 of every row of block k are copied out (one slice per block)
    into two arrays laid out (K, 64, A, nwx), so that each shift is one operation over whole
    contiguous (A, nwx) planes with one shift amount per row r."""
    A, _, W = x.shape
    nwx = (2 * hmax + 1 + 63) // 64
    padw = (hmax + 63) // 64
    c = 64 * padw - hmax
    K = -(-(n + c) // 64)  # row blocks of 64
    lo = np.zeros((K, 64, A, nwx), dtype=np.uint64)  # word k + q of each row of block k
    hi = np.zeros((K, 64, A, nwx), dtype=np.uint64)  # word k + q + 1
    for k in range(K):
        r0 = 64 * k - c  # the first row of block k
        a, b = max(r0, 0), min(r0 + 64, n)
        for dst, w0 in ((lo, k - padw), (hi, k - padw + 1)):
            c0, c1 = max(w0, 0), min(w0 + nwx, W)
            if a < b and c0 < c1:
                dst[k, a - r0 : b - r0, :, c0 - w0 : c1 - w0] = x[:, a:b, c0:c1].transpose(1, 0, 2)
    lo >>= _SHIFTS
    hi <<= _ONE
    hi <<= np.uint64(63) - _SHIFTS
    lo |= hi
    return lo.reshape(64 * K, A, nwx)


def column_counts(x: np.ndarray) -> np.ndarray:
    """Set bits per bit position summed over the rows: (R, A, Q) uint64 (rows outermost) ->
    (A, 64·Q) int64.

    Bit-sliced addition (a carry-save tree): rows are added pairwise as binary numbers held in
    bit planes (plane j holds bit j of every position's partial count), halving the rows and
    adding one plane per level (the first half of the rows to the second: contiguous blocks),
    about 10 word operations per row instead of 64 bit extractions; the last row's planes are
    unpacked and weighted by their bit. ``x`` is used as scratch space (overwritten).
    """
    planes = [x]
    while planes[0].shape[0] > 1:
        if planes[0].shape[0] % 2:  # pad to an even number of rows
            planes = [np.concatenate([p, np.zeros_like(p[:1])]) for p in planes]
        h = planes[0].shape[0] // 2
        out, carry = [], None
        for p in planes:  # ripple-carry add of two k-plane numbers, in place in p
            aj, bj = p[:h], p[h:]
            both = aj & bj
            aj ^= bj  # t = a ^ b
            if carry is not None:
                np.bitwise_and(carry, aj, out=bj)  # carry & t
                aj ^= carry  # the sum bit
                both |= bj
            out.append(aj)
            carry = both
        planes = [*out, carry]
    stack = np.stack([p[0] for p in planes], axis=1)  # (A, K, Q)
    bits = np.unpackbits(stack.view(np.uint8), axis=-1, bitorder="little")  # (A, K, 64·Q)
    weights = np.int64(1) << np.arange(len(planes), dtype=np.int64)
    return np.einsum("akb,k->ab", bits, weights)


def finish_bits(gold: Gold, base: np.ndarray, with_globals: bool) -> np.ndarray:
    """``(M ∪ Glob) ∩ V`` of base bitsets (…, n, W): the finish of definitions §3 but for the window,
    which :func:`count_bits` crosses in for every width at once."""
    if not with_globals:
        return base if gold.v_whole else base & gold.vbits  # (not copied when nothing changes)
    b = base | gold.gbits
    if not gold.v_whole:
        b &= gold.vbits
    return b


def evaluate_bits(gold: Gold, bits: np.ndarray, windows: Sequence[int]) -> dict[str, np.ndarray]:
    """Metrics of ``M_w = M ∪ (B_w ∩ V)`` for P base masks and every window width.

    ``bits`` (P, A, n, W) uint64 with A = 1 (same mask for every head) or L·H, already ∩ V
    (globals OR'd in where wanted). Returns metric -> (P, len(windows), L·H) float64.
    """
    return to_metrics(gold, count_bits(gold, bits, windows))


def to_metrics(gold: Gold, c: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Counts (``size`` = |M ∩ V|, ``hit`` = |M ∩ G|, ``covered`` rows, ``mass`` = Σ P over
    M ∩ G) -> definitions §4 / §8 metrics (degenerate ratios as in :mod:`sparse_core.metrics`)."""
    size, t, g = c["size"], c["hit"], gold.gold
    out = {
        "sparsity": 1.0 - size / gold.n_valid,
        "recall": np.where(g > 0, t / np.maximum(g, 1), 1.0),
        "exact": c["covered"] / gold.n,
        "precision": np.where(size > 0, t / np.maximum(size, 1), 1.0),
        "mass_recall": c["mass"] / gold.n,
    }
    for b in BLOCKS:  # ``empty_B``: empty counted tiles (n >= 1: at least one tile counts)
        out[f"block_{b}"] = c[f"empty_{b}"] / gold.n_tiles[b]
    return out


def empty_tiles(gold: Gold, bits: np.ndarray, hs: np.ndarray) -> dict[str, np.ndarray]:
    """Empty counted tiles of ``M_h = M ∪ (B_h ∩ V)`` for every half width: bits (P, A, n, W)
    already ∩ V -> {"empty_B": (P, len(hs), A) int64}. The counted tiles are sorted by their
    least |i − j| once per text (``Gold.tile_order``), so the tiles that stay empty at h are a
    suffix: a prefix sum over the base's empty tiles, read at one position per h."""
    P, A = bits.shape[:2]
    occ = tile_occupancy(bits, gold.n)
    res = {}
    for b in BLOCKS:
        order, dsorted = gold.tile_order(b)
        free = ~occ[b].reshape(P * A, -1)[:, order]  # (P·A, C) counted tiles, nearest first
        cum = np.zeros((P * A, free.shape[1] + 1), dtype=np.int64)
        np.cumsum(free, axis=1, out=cum[:, 1:])
        pos = np.searchsorted(dsorted, hs, side="right")  # (nq,) first tile with dist > h
        e = cum[:, -1:] - cum[:, pos]  # (P·A, nq)
        res[f"empty_{b}"] = e.reshape(P, A, -1).transpose(0, 2, 1)
    return res


def count_bits(gold: Gold, bits: np.ndarray, windows: Sequence[int]) -> dict[str, np.ndarray]:
    """The counts behind :func:`evaluate_bits`: size, hit, covered, mass (Σ P over M_w ∩ G,
    float64) and the empty tiles ``empty_B`` of each block size, each (P, nW, L·H)."""
    P, A, n, W = bits.shape
    LH = gold.L * gold.H
    hs = half_widths(windows)
    nq = len(hs)
    geo = gold.geometry(hs)
    # ---- valid side: |M|, |B_h ∩ M|
    s0 = popcount(bits).sum(axis=(-2, -1), dtype=np.int64)  # (P, A)
    band_m = band_counts(bits, n, hs)  # (P, A, nq)
    size = (s0[..., None] + geo["band_v"] - band_m).transpose(0, 2, 1)  # (P, nq, A)
    size = np.broadcast_to(size, (P, nq, LH)) if A == 1 else size
    # ---- gold side: one bit lookup per gold edge (in order of head, then first covering
    # window: ``Gold.edge_plan``); cov = the first (sorted) window covering a missed edge
    plan = gold.edge_plan(hs, A)
    flat = np.ascontiguousarray(bits).reshape(P, -1).view(np.uint8)
    held = np.take(flat, plan["pos"], axis=1)  # (P, E) the edges' bytes
    held >>= plan["shift"]
    held &= np.uint8(1)  # 1 where M holds the edge
    hist = np.zeros((P, plan["bins"]), dtype=np.int64)  # (P, L·H·(nq + 1)): edges per cov
    if held.shape[1]:
        got = np.add.reduceat(held, plan["starts"], axis=1, dtype=np.int64)  # held per run
        hist[:, plan["bin"]] = plan["size"] - got  # missed edges, at their first window
        hist[:, plan["held_bins"]] += np.add.reduceat(got, plan["head_starts"], axis=1)
    hits = np.cumsum(hist.reshape(P, LH, nq + 1), axis=-1)[..., :nq]  # (P, LH, nq), sorted h
    # mass recall's numerator, the same way with each edge weighted by its P
    if plan["p"] is None:
        mass = np.full((P, LH, nq), np.nan)
    else:
        mhist = np.zeros((P, plan["bins"]))
        if held.shape[1]:
            # held is 0 / 1: the float32 products are exact, their sums are made in float64
            got_p = np.add.reduceat(held * plan["p32"], plan["starts"], axis=1, dtype=np.float64)
            mhist[:, plan["bin"]] = plan["run_p"] - got_p
            mhist[:, plan["held_bins"]] += np.add.reduceat(got_p, plan["head_starts"], axis=1)
        mass = np.cumsum(mhist.reshape(P, LH, nq + 1), axis=-1)[..., :nq]
    # exact: a row is whole in M_w iff its latest-covered gold key is covered at w
    held -= np.uint8(1)  # 0 where M holds the edge, else 0xFF
    cov = torch.from_numpy(plan["first"] & held)  # (P, E) in [0, nq]: 0 where M holds it
    last = torch.zeros((P, LH * n), dtype=torch.uint8)
    last.scatter_reduce_(1, plan["row"].expand(P, -1), cov, "amax")
    rkey = geo["row_key"] + last.numpy()
    if P > 1:
        rkey += (np.arange(P) * (LH * (nq + 1)))[:, None]
    rhist = np.bincount(rkey.ravel(), minlength=P * LH * (nq + 1)).reshape(P, LH, nq + 1)
    covered = np.cumsum(rhist, axis=-1)[..., :nq]
    inv = geo["inv"]
    out = {
        "size": np.ascontiguousarray(size),
        "hit": hits[..., inv].transpose(0, 2, 1),
        "covered": covered[..., inv].transpose(0, 2, 1),
        "mass": mass[..., inv].transpose(0, 2, 1),
    }
    for k, e in empty_tiles(gold, bits, hs).items():  # (P, nq, A)
        out[k] = np.broadcast_to(e, (P, nq, LH)) if A == 1 else e
    return out


# ----------------------------------------------------------------------------- masks by selection


def pool_tiles(occ: np.ndarray, n: int, f: int) -> np.ndarray:
    """OR-pool tile flags (…, T, T) of side b into tiles of side f·b: (…, ⌈n / (f b)⌉, …)."""
    T = occ.shape[-1]
    Tb = -(-T // f)
    if Tb * f != T:
        pad = [(0, 0)] * (occ.ndim - 2) + [(0, Tb * f - T)] * 2
        occ = np.pad(occ, pad)
    # the f rows of a group, then the f columns, OR'd slice by slice: ``any`` over two strided
    # axes of length f reduces element by element (about 20× slower at f = 2, 4)
    grp = occ.reshape(*occ.shape[:-2], Tb, f, Tb * f)
    rows = grp[..., 0, :].copy()  # (…, Tb, Tb·f)
    for i in range(1, f):
        np.logical_or(rows, grp[..., i, :], out=rows)
    cols = rows.reshape(*rows.shape[:-1], Tb, f)
    out = cols[..., 0].copy()  # (…, Tb, Tb)
    for i in range(1, f):
        np.logical_or(out, cols[..., i], out=out)
    return out


def selection_counts(
    gold: Gold, held: np.ndarray, size: np.ndarray, occ16: np.ndarray
) -> dict[str, np.ndarray]:
    """The counts of :func:`to_metrics` for P masks given without bitsets — a method that knows
    which keys it keeps (a threshold per row, a set of blocks) says, per mask:

    - ``held`` (P, E) bool: whether it keeps each gold edge (``Gold``'s edge order);
    - ``size`` (P, L·H) int: |M ∩ V| per head;
    - ``occ16`` (P, L·H, T, T) bool, T = ⌈n / 16⌉: which 16 × 16 tiles hold a pair of M ∩ V
      (the larger tiles of ``metrics.BLOCKS`` are OR-pooled from them).

    Returns size, hit, covered, mass and ``empty_B`` (P, L·H), equal to :func:`count_bits` of
    the same masks without a window (tested through every arena method's measure). The edges
    are sorted by (head, row): one ``reduceat`` per count over all P masks at once."""
    P = held.shape[0]
    LH, n = gold.L * gold.H, gold.n
    g = gold.runs()
    out = {"size": np.asarray(size, dtype=np.int64)}
    hit = np.zeros((P, LH), dtype=np.int64)
    cov = np.broadcast_to(n - g["rows_per_head"], (P, LH)).copy()  # rows without gold edges
    mass = np.full((P, LH), np.nan)
    if held.shape[1]:
        h8 = held.view(np.uint8)
        kept = np.add.reduceat(h8, g["row_starts"], axis=1, dtype=np.int64)  # (P, R)
        whole = (kept == g["row_len"]).view(np.uint8)
        cov[:, g["heads"]] += np.add.reduceat(whole, g["row_head_starts"], axis=1, dtype=np.int64)
        hit[:, g["heads"]] = np.add.reduceat(kept, g["row_head_starts"], axis=1)
        if gold.e_p is not None:
            mass[:] = 0.0
            mass[:, g["heads"]] = np.add.reduceat(h8 * gold.e_p, g["head_starts"], axis=1)
    elif gold.e_p is not None:
        mass[:] = 0.0
    out.update(hit=hit, covered=cov, mass=mass)
    out.update(empty_counts(gold, occ16))
    return out


def empty_counts(gold: Gold, occ16: np.ndarray) -> dict[str, np.ndarray]:
    """``empty_B`` of every tile size from the 16 × 16 tiles that hold a pair of M ∩ V."""
    out, base = {}, BLOCKS[0]
    for b in BLOCKS:
        occ = occ16 if b == base else pool_tiles(occ16, gold.n, b // base)
        counted = gold.tiles[b][0]
        out[f"empty_{b}"] = (counted & ~occ).sum(axis=(-2, -1))
    return out


def block_gold(gold: Gold, block: int, rows: bool) -> dict[str, np.ndarray]:
    """Per text and block size (made once): the gold edges counted per (head, query row, key
    block) when ``rows`` (L·H, n, T), else per (head, query block, key block) (L·H, T, T), with
    their mass (float64, the edges added in order), and the gold keys per row (L·H, n)."""
    key = ("rows" if rows else "blocks", block)
    got = gold._block_gold.get(key)
    if got is None:
        from ._method_kernels import block_cells  # numba: imported when first needed

        LH, n = gold.L * gold.H, gold.n
        T = -(-n // block)
        R = n if rows else T
        # one pass over the edges (``bincount``'s counts and float64 sums, in edge order)
        cnt = np.zeros(LH * R * T, dtype=np.uint8 if block < 256 else np.int32)  # ≤ B a cell
        with_p = gold.e_p is not None
        mass = np.zeros(LH * R * T if with_p else 0)
        e = [np.ascontiguousarray(x, dtype=np.int64) for x in (gold.e_lh, gold.e_i, gold.e_j)]
        p = gold.e_p if with_p else np.zeros(0)
        block_cells(*e, p, bool(rows), R, T, block, cnt, mass)
        per_row = gold._block_gold.get("per_row")
        if per_row is None:  # the same for every block size
            per_row = np.bincount(gold.e_lh * n + gold.e_i, minlength=LH * n).reshape(LH, n)
            gold._block_gold["per_row"] = per_row
        got = gold._block_gold[key] = {
            "count": cnt.reshape(LH, R, T),
            "mass": mass.reshape(LH, R, T) if with_p else None,
            "per_row": per_row,
        }
    return got


def row_tiles(rows: np.ndarray, n: int, tile: int = 16) -> np.ndarray:
    """OR rows in groups of ``tile``: (…, n, C) bool -> (…, ⌈n / tile⌉, C) (one compiled pass,
    ``_method_kernels.or_rows``)."""
    from ._method_kernels import or_rows  # numba: imported when first needed

    lead, C = rows.shape[:-2], rows.shape[-1]
    if rows.size == 0:
        return np.zeros((*lead, -(-n // tile), C), dtype=bool)
    x = np.ascontiguousarray(rows, dtype=bool).reshape(-1, n, C)
    return or_rows(x, tile).reshape(*lead, -(-n // tile), C)


def valid_tiles16(n: int, causal: bool) -> np.ndarray:
    """(n, T) bool, T = ⌈n / 16⌉: whether row i has a valid key in column tile c."""
    T = -(-n // 16)
    if not causal:
        return np.ones((n, T), dtype=bool)
    return (np.arange(T)[None, :] * 16) <= np.arange(n)[:, None]
