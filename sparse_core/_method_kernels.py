"""Compiled loops (numba) of the methods' hottest numpy passes, each the exact computation of
the numpy code it replaces (same integers, float64 sums added in the same order, no fastmath):

- :func:`nearest_first`: sf-kmeans' nearest centroids (``learned.nearest_order``): each token's
  first centroids by squared distance ``Σ_c (x_c − cent_c)²`` added in dimension order (as
  ``sparsefinder.sq_distances``), ascending, ties to the lower index (a stable sort). One pass
  per token over the B centroids, in cache, instead of B · r numpy passes over every token.
- :func:`spherical_kmeans`: Routing's Lloyd loop (``baselines.routing_centroids``), head by
  head in cache: the first maximum of each point's C scores (``argmax``, first on ties), a
  head leaving when no assignment moved, the clusters' counts and coordinate sums adding the
  points in order (exactly ``np.bincount(idx, weights)``), the unit centroids as
  ``baselines._unit``. One difference from the numpy loop: each score ``Σ_d cent_cd x_pd`` is
  added left to right here, where BLAS' product may fuse a multiply-add (the scores differ by
  at most a few ulps, ~1e-15); an assignment can only differ where two centroids' scores of a
  point are that close (never seen: ``bench/sweep_exact.py`` and the tests find the
  centroids, hence the masks, equal bit for bit).

Compiled on first call (``cache=True``: cached under ``__pycache__``), ``nogil``.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def nearest_first(x, cent, first):  # pragma: no cover - compiled
    """x (A, n, r), cent (A, B, r) float64 -> (A, n, first) uint8: each token's ``first``
    nearest centroids, ascending squared distance, ties to the lower index."""
    A, n, r = x.shape
    B = cent.shape[1]
    out = np.empty((A, n, first), dtype=np.uint8)
    d = np.empty(B)
    taken = np.zeros(B, dtype=np.bool_)
    for a in range(A):
        for i in range(n):
            for b in range(B):
                t = x[a, i, 0] - cent[a, b, 0]
                s = t * t
                for c in range(1, r):
                    t = x[a, i, c] - cent[a, b, c]
                    s += t * t
                d[b] = s
                taken[b] = False
            for s_ in range(first):
                best = -1
                for b in range(B):
                    if taken[b]:
                        continue
                    if best < 0 or d[b] < d[best]:  # strictly: equal distances keep the lower
                        best = b
                taken[best] = True
                out[a, i, s_] = best
    return out


@njit(cache=True, nogil=True)
def spherical_kmeans(x, init, iters, eps):  # pragma: no cover - compiled
    """Routing's Lloyd loop, head by head: x (A, m, r) unit points, init (A, C, r) float64
    centroids -> (A, C, r). Each step assigns every point to its first highest score
    ``Σ_d cent_cd x_pd`` (d in order), stops the head when no assignment moved, else sets each
    non-empty cluster's centroid to its points' sum (points in order) over
    ``max(sqrt(Σ_d sum_d²), eps)``; at most ``iters`` steps."""
    A, m, r = x.shape
    C = init.shape[1]
    out = init.copy()
    ids = np.empty(m, dtype=np.int64)
    count = np.empty(C, dtype=np.int64)
    sums = np.empty((C, r))
    for a in range(A):
        cent = out[a]
        for it in range(iters):
            moved = it == 0
            for p in range(m):
                best = 0.0
                k = 0
                for c in range(C):
                    v = cent[c, 0] * x[a, p, 0]
                    for d in range(1, r):
                        v += cent[c, d] * x[a, p, d]
                    if c == 0 or v > best:  # strictly: the first of equal maxima
                        best = v
                        k = c
                if ids[p] != k:
                    moved = True
                ids[p] = k
            if not moved:
                break  # a fixed point: later steps would change nothing
            count[:] = 0
            sums[:] = 0.0
            for p in range(m):
                k = ids[p]
                count[k] += 1
                for d in range(r):
                    sums[k, d] += x[a, p, d]
            for c in range(C):
                if count[c] > 0:
                    s = sums[c, 0] * sums[c, 0]
                    for d in range(1, r):
                        s += sums[c, d] * sums[c, d]
                    nrm = max(np.sqrt(s), eps)
                    for d in range(r):
                        cent[c, d] = sums[c, d] / nrm
    return out


def warm() -> bool:
    """Compile (or load from numba's cache) every kernel here on tiny inputs, so that a fresh
    image or process does not compile on its first analysis; True when both ran."""
    x = np.zeros((1, 2, 4))
    x[..., 0] = 1.0
    cent = np.ones((1, 2, 4))
    near = nearest_first(x, cent, 1)
    km = spherical_kmeans(x, cent, 1, 1e-12)
    return near.shape == (1, 2, 1) and km.shape == (1, 2, 4)
