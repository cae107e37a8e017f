"""sf-distance for many thresholds at once, as row bitsets (the Pareto engine's fast path).

Sparsefinder's distance predictor (definitions §3, paper §3.2) keeps edge (i, j) iff the squared
projected distance ``D_ij = ‖q̃_i − k̃_j‖²`` is below t. A sweep asks for ten thresholds: rather
than ten float64 distance tensors, :func:`distance_bits` computes D once in float32 and bins it,
and recomputes exactly (float64, dims added in order, as ``sparsefinder.sq_distances``) only the
entries close enough to a threshold for float32 rounding to matter, so every mask equals
``sparsefinder.sf_distance`` bit for bit (tests/core/test_pareto.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import contextmanager

import numpy as np
from torch import Tensor

from ..bitsets import pack, words

#: Distance entries computed at once (``chunk`` heads of n × n): 2 heads at n = 512, more for
#: shorter texts, whose per-chunk overhead would otherwise dominate (an analyze summary).
CHUNK_CELLS = 2 * 512 * 512


def distance_bits(
    qp: Tensor, kp: Tensor, ts: Sequence[float], chunk: int | None = None
) -> np.ndarray:
    """sf-distance masks ``D < t`` for thresholds ``ts`` as bitsets: (…, n, r) x 2 projected
    queries and keys -> (len(ts), A, n, W) uint64, A the product of the leading dims.

    ``D`` is first computed in float32 (:func:`twice_sq`, a few heads at a time so the
    temporaries stay in cache); entries within a safe rounding margin of a threshold are
    recomputed exactly as ``sparsefinder.sq_distances`` does (float64, dims added in order), so
    the result equals ``sq_distances(q̃, k̃) < t`` bit for bit (tested). When every 2t is an
    integer (the paper's grid) D is binned once as ⌊2D⌋ and each mask is ``bin < 2t``.
    """
    n = qp.shape[-2]
    q = qp.reshape(-1, n, qp.shape[-1]).numpy()  # (LH, n, r) float32
    k = kp.reshape(-1, n, kp.shape[-1]).numpy()
    LH, n, r = q.shape
    chunk = chunk or max(2, CHUNK_CELLS // (n * n))
    W = words(n)
    ts = [float(t) for t in ts]
    binned = all((2 * t).is_integer() and 0 <= 2 * t <= 254 for t in ts)
    top = max(int(2 * t) for t in ts) if binned else 0
    out = np.zeros((len(ts), LH, n, W * 8), dtype=np.uint8)  # bitsets, viewed as bytes
    nb = (n + 7) // 8
    with one_blas_thread():  # the products are small: threads would only wait on each other
        for a in range(0, LH, chunk):
            _chunk(q[a : a + chunk], k[a : a + chunk], ts, binned, top, out[:, a : a + chunk], nb)
    return out.view(np.uint64)


def _chunk(qa, ka, ts, binned, top, out, nb) -> None:
    """:func:`distance_bits` of a few heads (h, n, r), written into ``out`` (len(ts), h, n, 8W)."""
    r = qa.shape[-1]
    # |d − D| <= margin (generous: more than twice the bound of ``twice_sq``)
    big = float(np.abs(qa).max() + np.abs(ka).max()) ** 2 * r
    margin = (4 * r + 16) * 2.0**-24 * big + 1e-30
    if binned and len(ts) < max(top, 1).bit_length():
        # fewer masks than the bins' bit planes (an analyze summary's one): each mask is its
        # own comparison 2D < 2t, recomputed exactly near 2t only
        d = twice_sq(qa, ka)  # ≈ 2D
        for b, t in enumerate(ts):
            m = d < 2 * t
            flat = np.flatnonzero(np.abs(d - 2 * t) <= 2 * margin)
            if flat.size:
                hh, ii, jj = np.unravel_index(flat, m.shape)
                m[hh, ii, jj] = exact_sq(qa[hh, ii], ka[hh, jj]) < t
            out[b] = pack(m).view(np.uint8)
    elif binned:
        d = twice_sq(qa, ka)  # ≈ 2D
        near = np.abs(d - np.rint(d)) <= 2 * margin
        bins = np.clip(d, 0, top).astype(np.uint8)  # ⌊2D⌋ for D >= 0, capped
        flat = np.flatnonzero(near)
        hh, ii, jj = np.unravel_index(flat, near.shape)
        if flat.size:
            exact = exact_sq(qa[hh, ii], ka[hh, jj])
            bins[hh, ii, jj] = np.minimum(np.floor(2.0 * exact), top).astype(np.uint8)
        # bit planes of the bins, then ``bin < m`` as a comparator on whole words
        planes = [pack(bins & np.uint8(1 << j)) for j in range(max(top, 1).bit_length())]
        for b, t in enumerate(ts):
            out[b] = less_than(planes, int(2 * t)).view(np.uint8)
    else:
        d = twice_sq(qa, ka)
        d *= 0.5  # ≈ D (halving is exact)
        for b, t in enumerate(ts):
            m = d < t
            hh, ii, jj = np.nonzero(np.abs(d - t) <= margin)
            if hh.size:
                m[hh, ii, jj] = exact_sq(qa[hh, ii], ka[hh, jj]) < t
            out[b, :, :, :nb] = np.packbits(m, axis=-1, bitorder="little")


@contextmanager
def one_blas_thread():
    """numpy's BLAS limited to one thread inside the block (threadpoolctl, when installed)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - BLAS then keeps its own threads
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def twice_sq(qa: np.ndarray, ka: np.ndarray) -> np.ndarray:
    """≈ 2D = 2‖q̃_i − k̃_j‖² in float32 as ``2‖q̃‖² + 2‖k̃‖² − 4 q̃·k̃``, all three terms in one
    matrix product of r + 2 columns, ``[q̃, 1, ‖q̃‖²] · [−4k̃, 2‖k̃‖², 2]`` (the factors 2 and −4
    are exact): (h, n, r) x 2 -> (h, n, n). With u = 2⁻²⁴, ‖q̃‖² and ‖k̃‖² (r products) are within
    γ_r ≈ r u of their values, and the product's r + 2 terms (any order, fused or not) add
    γ_{r+2} relative to the sum of their magnitudes, 2 Σ_c (|q̃_c| + |k̃_c|)² at most; so the
    error of 2D is below about 2 (2r + 2) u · big (``big`` of :func:`distance_bits`), within
    the margin there, (4 r + 16) u · big per D: entries within it of a threshold are recomputed
    exactly. One product instead of a product and three passes over the (h, n, n) result."""
    h, n, r = qa.shape
    m = ka.shape[1]
    a = np.empty((h, n, r + 2), dtype=np.float32)
    a[..., :r] = qa
    a[..., r] = 1.0
    a[..., r + 1] = np.einsum("hnr,hnr->hn", qa, qa)
    b = np.empty((h, r + 2, m), dtype=np.float32)  # laid out for a BLAS product per head
    b[:, :r] = ka.transpose(0, 2, 1)
    b[:, :r] *= np.float32(-4.0)
    b[:, r] = np.einsum("hnr,hnr->hn", ka, ka)
    b[:, r] *= np.float32(2.0)
    b[:, r + 1] = 2.0
    return a @ b


def less_than(planes: list[np.ndarray], m: int) -> np.ndarray:
    """Bitset of ``x < m`` from the bit planes of unsigned x (planes[j] = bit j), MSB first:
    x < m iff at the first differing bit x has 0 and m has 1."""
    lt = np.zeros_like(planes[0])
    eq = ~lt
    for j in reversed(range(len(planes))):
        if m >> j & 1:
            lt |= eq & ~planes[j]
            eq &= planes[j]
        else:
            eq &= ~planes[j]
    if m >> len(planes):  # m beyond every representable x
        lt |= eq
    return lt


def exact_sq(qv: np.ndarray, kv: np.ndarray) -> np.ndarray:
    """``sparsefinder.sq_distances`` for paired rows: float64, dims added in order."""
    d = np.zeros(qv.shape[0], dtype=np.float64)
    for c in range(qv.shape[1]):
        d += (qv[:, c].astype(np.float64) - kv[:, c].astype(np.float64)) ** 2
    return d
