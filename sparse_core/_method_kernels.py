"""Compiled loops (numba) of the methods' hottest numpy passes, each the exact computation of
the numpy code it replaces (same integers, float64 sums added in the same order, no fastmath):

- :func:`nearest_first`: sf-kmeans' nearest centroids (``learned.nearest_order``): each token's
  first centroids by squared distance ``Σ_c (x_c − cent_c)²`` added in dimension order (as
  ``sparsefinder.sq_distances``), ascending, ties to the lower index (a stable sort). One pass
  per token over the B centroids, in cache, instead of B · r numpy passes over every token.
- :func:`lloyd_step`: one assignment + update pass of Routing's spherical k-means
  (``baselines.routing_centroids``): the first maximum over the C centroid scores of each point
  (``argmax``, first on ties), whether a head's assignment moved, and the per-cluster counts and
  coordinate sums of the moved heads, each sum adding the points in their order (exactly
  ``np.bincount(idx, weights)``). The scores themselves stay numpy's product.

- :func:`draw_counts`: BigBird's random draws of one window width looked up in the gold graph
  (``bigbird.bigbird_metrics``): each step's drawn byte and bit (whether the draw is a gold
  key), the gold keys drawn per head and step, and for each row the step of its last missing
  gold key, as a histogram per head; integers only, one pass over the (k, L·H, n) draws
  instead of a gather, two shifts and k running-count passes in numpy.

- :func:`partial_fisher_yates`: BigBird's random keys (``bigbird.fisher_yates``): every row's
  partial Fisher–Yates over its candidate list, step by step as the definition reads (step t
  swaps positions t and p_t and draws the value now at t), the positions written so far
  kept in a scratch row stamped per row; integers only, O(k) a row.

- :func:`first_fill`: the first step whose draw falls in each 16-tile (``bigbird.draw_tiles``),
  a running minimum per tile instead of ``np.minimum.at`` (an unbuffered scatter).

- :func:`free_candidates`: every row's free columns (``bigbird.free_ranks``) in one pass;
  :func:`band_free_runs`, :func:`runs_fisher_yates`, :func:`band_base_bits`: the same for
  BigBird's window + globals base without any (n, n) table (two runs of free columns a row,
  the draws over them, the base's row bitsets);
  :func:`set_bits`: the gold graph's row bitsets from its edge list (``bitsets.Gold.bits``).

- :func:`topp_rows`: top-p's kept gold edges (``oracle.topp_keep``), row by row: the row's
  edges by P descending (ties to the lower j) and the float64 mass before each, added from 0
  in that order; :func:`kept_edge_counts`: the kept edges per head and their 16-tiles.

- :func:`column_sums`: the attention mass each key received (``PredictContext.column_mass``,
  H2O's masses), the queries' float32 rows added one after another as numpy's ``+=`` did.

- :func:`block_cells`: the gold edges and their mass per (head, row, key block) cell of the
  block methods (``bitsets.block_gold``), one pass in edge order as ``np.bincount`` adds.

- :func:`or_rows`: the 16-row ORs of a per-row choice (``bitsets.row_tiles``: the block
  sparsity of the arena's selections), one pass.

- :func:`prefix_block_counts`: MoBA's / Quest's gold edges and valid keys of every row's
  first j blocks (``selection.prefix_row_block_counts``), one pass.

- :func:`first_maxima`: MoBA's / Quest's first m blocks per query (``blocks.first_blocks``):
  m argmax passes over each row's T estimates in one loop (the first of equal maxima).

- :func:`h2o_largest`: the K largest of H2O's bidirectional masses A_ij = C_j − P_ij per row
  (``streaming.h2o_top``), from one descending order of the column masses C per head: a row
  differs from C only on its own support (A_ij < C_j), so its K largest lie among the keys
  visited in C's order until K keys with A_ij = C_j have been seen.

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
def lloyd_step(s, prev, x, act):  # pragma: no cover - compiled
    """One k-means step of the active heads.

    s (A', C, m) float64 scores of the active heads' points against their centroids; prev
    (A', m) uint8 the previous assignment (ignored when its first dim is 0); x (A, m, r)
    float64 every head's points; act (A',) int64 the active heads' indices into x.
    Returns ``(ids (A', m) uint8, moved (A',) bool, count (A', C) int64, sums (A', C, r)
    float64)``; counts and sums are filled for the moved heads only (every head without prev).
    """
    Aa, C, m = s.shape
    r = x.shape[2]
    ids = np.empty((Aa, m), dtype=np.uint8)
    moved = np.empty(Aa, dtype=np.bool_)
    count = np.zeros((Aa, C), dtype=np.int64)
    sums = np.zeros((Aa, C, r))
    have_prev = prev.shape[0] > 0
    for a in range(Aa):
        mv = not have_prev
        for p in range(m):
            best = s[a, 0, p]
            k = 0
            for c in range(1, C):
                v = s[a, c, p]
                if v > best:  # strictly: the first of equal maxima
                    best = v
                    k = c
            ids[a, p] = k
            if have_prev and prev[a, p] != k:
                mv = True
        moved[a] = mv
        if mv:
            h = act[a]
            for p in range(m):
                k = ids[a, p]
                count[a, k] += 1
                for d in range(r):
                    sums[a, k, d] += x[h, p, d]
    return ids, moved, count, sums


@njit(cache=True, nogil=True)
def draw_counts(g, at, bit, need):  # pragma: no cover - compiled
    """g (N,) uint8 the gold graph's row bitsets as bytes (a zero byte last); at (k, A, n) int32
    each step's byte and bit (k, A, n) uint8 there; need (A, n) int64 each row's gold keys
    outside the base mask. Returns ``(is_gold (k, A, n) uint8, hits (A, k) uint64 the gold keys
    drawn by steps 0..t summed over the rows, covered (A, k + 2) int64: [:, r] the rows whose
    missing gold keys are all among their first r draws)``."""
    k, A, n = at.shape
    is_gold = np.empty((k, A, n), dtype=np.uint8)
    hits = np.zeros((A, k), dtype=np.uint64)
    got = np.zeros((A, n), dtype=np.int32)  # at most k: int32 keeps the rows' state small
    short = np.zeros((A, n), dtype=np.int32)
    cap = np.empty((A, n), dtype=np.int32)
    for a in range(A):
        for i in range(n):
            cap[a, i] = min(need[a, i], k + 1)
    for t in range(k):
        for a in range(A):
            s = np.uint64(0)
            for i in range(n):
                x = (g[at[t, a, i]] >> bit[t, a, i]) & np.uint8(1)
                is_gold[t, a, i] = x
                s += x
                got[a, i] += x
                if got[a, i] < cap[a, i]:
                    short[a, i] += 1
            hits[a, t] = s if t == 0 else hits[a, t - 1] + s
    covered = np.zeros((A, k + 2), dtype=np.int64)
    for a in range(A):
        for i in range(n):
            last = -1 if need[a, i] == 0 else short[a, i]
            covered[a, last + 1] += 1
        for b in range(1, k + 2):
            covered[a, b] += covered[a, b - 1]
    return is_gold, hits, covered


@njit(cache=True, nogil=True)
def partial_fisher_yates(cand, m, p):  # pragma: no cover - compiled
    """cand (n, n) int32 row i's candidate list, m (n,) its length, p (S, n, k) the swap
    positions (p_t ≥ t) -> (S, n, k) int32: row i's draws in step order (the value at p_t,
    after the earlier steps' swaps), −1 from step m_i on (the row's supply ran out)."""
    S, n, k = p.shape
    out = np.empty((S, n, k), dtype=np.int32)
    val = np.zeros(n, dtype=np.int32)  # the value written at a position, valid where
    stamp = np.zeros(n, dtype=np.int64)  # stamp == the current row's id
    row = 0
    for s in range(S):
        for i in range(n):
            row += 1
            for t in range(k):
                if t >= m[i]:
                    out[s, i, t] = -1
                    continue
                q = p[s, i, t]
                at_t = val[t] if stamp[t] == row else cand[i, t]
                at_q = val[q] if stamp[q] == row else cand[i, q]
                out[s, i, t] = at_q
                val[q] = at_t  # the swap: position t (never read again) gets at_q
                stamp[q] = row
    return out


@njit(cache=True, nogil=True)
def band_free_runs(n, h, glob, causal):  # pragma: no cover - compiled
    """The free columns (V ∧ ¬B) of every row of ``B = (W_h ∪ Glob) ∩ V`` (band |i − j| ≤ h,
    h < 0: none; Glob: the first and last token's rows and columns) as two ascending runs,
    without the (n, n) B: -> (a0, la, b0, m) (n,) int64, row i's candidates are
    ``a0_i, …, a0_i + la_i − 1`` then ``b0_i, …, b0_i + m_i − la_i − 1`` (left of the band,
    then right of it; ``free_candidates`` on the explicit B lists the same, tested)."""
    a0 = np.zeros(n, dtype=np.int64)
    la = np.zeros(n, dtype=np.int64)
    b0 = np.zeros(n, dtype=np.int64)
    m = np.zeros(n, dtype=np.int64)
    for i in range(n):
        end = i + 1 if causal else n
        if glob and (i == 0 or i == n - 1):
            continue  # a global row: B is the whole valid row
        start = 1 if glob else 0
        stop = n - 1 if (glob and end == n) else end
        if h >= 0:
            lo = max(i - h, 0)
            hi = min(i + h, end - 1)
        else:
            lo = i
            hi = i - 1
        left = max(min(lo, stop) - start, 0)
        right0 = max(hi + 1, start)
        right = max(stop - right0, 0)
        a0[i] = start
        la[i] = left
        b0[i] = right0
        m[i] = left + right
    return a0, la, b0, m


@njit(cache=True, nogil=True)
def band_base_bits(n, h, glob, causal):  # pragma: no cover - compiled
    """``B = (W_h ∪ Glob) ∩ V`` of :func:`band_free_runs` as (n, ⌈n/64⌉) uint64 row bitsets
    (``bitsets.pack`` of the explicit mask, tested), O(n · (h/64 + 1))."""
    W = (n + 63) // 64
    out = np.zeros((n, W), dtype=np.uint64)
    ones = np.uint64(0xFFFFFFFFFFFFFFFF)
    for i in range(n):
        end = i + 1 if causal else n
        if glob and (i == 0 or i == n - 1):
            lo, hi = 0, end - 1
        elif h >= 0:
            lo, hi = max(i - h, 0), min(i + h, end - 1)
        else:
            lo, hi = 0, -1
        for w in range(lo >> 6, (hi >> 6) + 1 if hi >= lo else lo >> 6):
            s = max(lo, w * 64) - w * 64
            e = min(hi, w * 64 + 63) - w * 64
            out[i, w] |= (ones >> np.uint64(63 - (e - s))) << np.uint64(s)
        if glob:
            out[i, 0] |= np.uint64(1)  # column 0: every row (0 <= i)
            if n - 1 < end:
                out[i, (n - 1) >> 6] |= np.uint64(1) << np.uint64((n - 1) & 63)
    return out


@njit(cache=True, nogil=True)
def runs_fisher_yates(a0, la, b0, m, p):  # pragma: no cover - compiled
    """:func:`partial_fisher_yates` over the candidate lists of :func:`band_free_runs`
    (position r of row i is ``a0_i + r`` if r < la_i, else ``b0_i + r − la_i``): the same
    draws, O(n) scratch instead of an (n, n) candidate table."""
    S, n, k = p.shape
    out = np.empty((S, n, k), dtype=np.int32)
    val = np.zeros(n, dtype=np.int32)
    stamp = np.zeros(n, dtype=np.int64)
    row = 0
    for s in range(S):
        for i in range(n):
            row += 1
            for t in range(k):
                if t >= m[i]:
                    out[s, i, t] = -1
                    continue
                q = p[s, i, t]
                if stamp[t] == row:
                    at_t = val[t]
                else:
                    at_t = a0[i] + t if t < la[i] else b0[i] + t - la[i]
                if stamp[q] == row:
                    at_q = val[q]
                else:
                    at_q = a0[i] + q if q < la[i] else b0[i] + q - la[i]
                out[s, i, t] = at_q
                val[q] = at_t
                stamp[q] = row
    return out


@njit(cache=True, nogil=True)
def first_fill(draws, b0, T):  # pragma: no cover - compiled
    """draws (S, n, k) int32 (−1: none) -> (S, T, T) int16: per head the least step t whose
    draw of some row i falls in tile (i // b0, draws[·, i, t] // b0); k where none does.
    A tile side that is a power of two (the sweep's 16) divides by a shift: a draw d ≥ 0, so
    ``d >> log2 b0`` is ``d // b0`` (a division a draw was most of the loop's time)."""
    S, n, k = draws.shape
    first = np.full((S, T, T), k, dtype=np.int16)
    sh = 0
    while (1 << (sh + 1)) <= b0:
        sh += 1
    if (1 << sh) == b0:
        for s in range(S):
            for i in range(n):
                r = i >> sh
                for t in range(k):
                    d = draws[s, i, t]
                    if d >= 0:
                        c = d >> sh
                        if t < first[s, r, c]:
                            first[s, r, c] = t
        return first
    for s in range(S):
        for i in range(n):
            r = i // b0
            for t in range(k):
                d = draws[s, i, t]
                if d >= 0:
                    c = d // b0
                    if t < first[s, r, c]:
                        first[s, r, c] = t
    return first


@njit(cache=True, nogil=True)
def set_bits(pos, shift, size):  # pragma: no cover - compiled
    """pos (E,) int64 byte indices, shift (E,) uint8 bit in the byte -> (size + 1,) uint8 with
    those bits set (the last byte stays zero): row bitsets viewed as bytes, from an edge list,
    one pass (a weighted ``bincount`` made a float64 per byte)."""
    out = np.zeros(size + 1, dtype=np.uint8)
    for e in range(pos.shape[0]):
        out[pos[e]] |= np.uint8(1) << shift[e]
    return out


@njit(cache=True, nogil=True)
def free_candidates(base, causal):  # pragma: no cover - compiled
    """base (n, n) bool -> (cand (n, n) int32, m (n,) int64): row i's free columns
    (V ∧ ¬base, causal V: j ≤ i) ascending in ``cand[i, :m_i]``, n − 1 after them
    (``bigbird.free_ranks``)."""
    n = base.shape[0]
    cand = np.empty((n, n), dtype=np.int32)
    m = np.zeros(n, dtype=np.int64)
    for i in range(n):
        c = 0
        end = i + 1 if causal else n
        for j in range(end):
            if not base[i, j]:
                cand[i, c] = j
                c += 1
        m[i] = c
        for j in range(c, n):
            cand[i, j] = n - 1
    return cand, m


@njit(cache=True, nogil=True)
def first_maxima(v, m):  # pragma: no cover - compiled
    """v (R, T) float32 (or float64) -> (R, m) int64: per row, m times the index of the first
    maximum, the block taken then ranked below every other (−∞ values rank above taken ones:
    as the least finite double)."""
    R, T = v.shape
    out = np.empty((R, m), dtype=np.int64)
    key = np.empty(T)
    lowest = np.finfo(np.float64).min
    for r in range(R):
        for b in range(T):
            x = np.float64(v[r, b])
            key[b] = lowest if x == -np.inf else x
        for s in range(m):
            best = 0
            for b in range(1, T):
                if key[b] > key[best]:
                    best = b
            out[r, s] = best
            key[best] = -np.inf
    return out


@njit(cache=True, nogil=True)
def h2o_largest(vals, col, order, K):  # pragma: no cover - compiled
    """vals (H·n, n) float32 the masses A_ij, col (H, n) float32 the column masses C_j (A_ij ≤
    C_j, equal off row i's support), order (H, n) each head's keys by C descending -> (H·n, K)
    float32 each row's K largest A_ij (with repeats) ascending, as ``np.sort(np.partition(…))``.

    Visiting keys by C descending, stopping after K keys with A_ij = C_j: every key not
    visited has A ≤ C ≤ the last visited C, and K visited values are ≥ it, so the visited
    values hold the row's K largest. They arrive nearly sorted (descending but for the
    support's), so an insertion sort into a descending list is short."""
    R, n = vals.shape
    out = np.empty((R, K), dtype=np.float32)
    buf = np.empty(n, dtype=np.float32)
    for row in range(R):
        h = row // n
        c = 0
        plain = 0
        for p in range(n):
            j = order[h, p]
            x = vals[row, j]
            if x == col[h, j]:
                plain += 1
            q = c  # insert x into buf[:c], descending
            while q > 0 and buf[q - 1] < x:
                buf[q] = buf[q - 1]
                q -= 1
            buf[q] = x
            c += 1
            if plain == K:
                break
        for x in range(K):
            out[row, x] = buf[K - 1 - x]
    return out


@njit(cache=True, nogil=True)
def topp_rows(a, i, pbits, p, ps):  # pragma: no cover - compiled
    """Top-p's kept gold edges (``oracle.topp_keep``): edges (a, i) (E,) sorted by (a, i, j),
    pbits (E,) uint32 the bits of each P as float32 (a positive float32's bits order like its
    value), p (E,) float64, ps (Q,) float64 -> keep (Q, E) bool. Row by row, the edges by P
    descending, ties to the lower j (a stable order: an insertion sort, numba's merge sort for
    rows of more than 32 edges); the t-th kept iff t = 0 or the float64 mass of the ones
    before it, added from 0 in that order, is < p."""
    E, Q = a.shape[0], ps.shape[0]
    keep = np.zeros((Q, E), dtype=np.bool_)
    order = np.empty(E, dtype=np.int64)
    s = 0
    while s < E:
        e = s + 1
        while e < E and a[e] == a[s] and i[e] == i[s]:
            e += 1
        m = e - s
        if m <= 32:
            for x in range(m):  # insertion: past strictly smaller keys only (stable)
                key = pbits[s + x]
                q = x
                while q > 0 and pbits[s + order[q - 1]] < key:
                    order[q] = order[q - 1]
                    q -= 1
                order[q] = x
        else:
            keys = np.empty(m, dtype=np.int64)
            for x in range(m):
                keys[x] = np.int64(0xFFFFFFFF) - np.int64(pbits[s + x])
            order[:m] = np.argsort(keys, kind="mergesort")
        acc = 0.0
        for t in range(m):
            x = s + order[t]
            for qi in range(Q):
                if t == 0 or acc < ps[qi]:
                    keep[qi, x] = True
            acc = acc + p[x]
        s = e
    return keep


@njit(cache=True, nogil=True)
def kept_edge_counts(keep, a, i, j, A, T, b0):  # pragma: no cover - compiled
    """keep (Q, E) bool over edges (a, i, j) -> (size (Q, A) int64 the kept edges per head,
    occ (Q, A, T, T) bool the b0-tiles holding a kept edge): a top-p mask is a set of gold
    edges (``oracle.TopPMethod.plain_counts``), one pass per p instead of two ``bincount``."""
    Q, E = keep.shape
    size = np.zeros((Q, A), dtype=np.int64)
    occ = np.zeros((Q, A, T, T), dtype=np.bool_)
    for q in range(Q):
        for e in range(E):
            if keep[q, e]:
                size[q, a[e]] += 1
                occ[q, a[e], i[e] // b0, j[e] // b0] = True
    return size, occ


@njit(cache=True, nogil=True)
def column_sums(p, prefix):  # pragma: no cover - compiled
    """p (H, n, n) float32 -> the mass each key received, added one query at a time in order
    i = 0, 1, … in float32 (``PredictContext.column_mass``): (H, n) C_j = Σ_i P_ij, or with
    ``prefix`` (H, n, n) A_ij = Σ_{i' < i} P_i'j (row 0 zero). The same float32 additions in
    the same order as numpy's row-by-row ``+=``, in one compiled loop (n numpy calls a layer
    before). Both forms (H, ·, n): the sums as (H, 1, n)."""
    H, n, m = p.shape
    if prefix:
        out = np.zeros((H, n, m), dtype=np.float32)
        for h in range(H):
            for i in range(1, n):
                for j in range(m):
                    out[h, i, j] = out[h, i - 1, j] + p[h, i - 1, j]
        return out
    acc = np.zeros((H, 1, m), dtype=np.float32)
    for h in range(H):
        for i in range(n):
            for j in range(m):
                acc[h, 0, j] += p[h, i, j]
    return acc


@njit(cache=True, nogil=True)
def block_cells(e_lh, e_i, e_j, p, rows, R, T, block, cnt, mass):  # pragma: no cover - compiled
    """The gold edges per (head, query row or block, key block) cell (``bitsets.block_gold``):
    for each edge in order, ``cnt[cell] += 1`` and ``mass[cell] += p`` (float64 from 0 in
    edge order, as ``np.bincount(weights=…)``), cell = (a · R + i or i // block) · T +
    j // block, into cnt / mass (A·R·T,) made by the caller (cnt's dtype chosen there; mass
    of length 0: no probabilities)."""
    with_mass = mass.shape[0] > 0
    for e in range(e_lh.shape[0]):
        q = e_i[e] if rows else e_i[e] // block
        c = (e_lh[e] * R + q) * T + e_j[e] // block
        cnt[c] += 1
        if with_mass:
            mass[c] += p[e]


@njit(cache=True, nogil=True)
def or_rows(x, tile):  # pragma: no cover - compiled
    """x (A, n, C) bool -> (A, ⌈n / tile⌉, C) bool: each group of ``tile`` rows OR'd
    (``bitsets.row_tiles``), one pass over x (a padded copy and a strided ``any`` before)."""
    A, n, C = x.shape
    out = np.zeros((A, (n + tile - 1) // tile, C), dtype=np.uint8)
    xv = x.view(np.uint8)
    for a in range(A):
        for i in range(n):
            r = i // tile
            for c in range(C):
                out[a, r, c] |= xv[a, i, c]
    return out.view(np.bool_)


@njit(cache=True, nogil=True)
def prefix_block_counts(count, vcnt, first):  # pragma: no cover - compiled
    """count (A, n, T) the gold edges per (row, key block), vcnt (n, T) the valid keys per
    (row, key block), first (A, n, m) each row's blocks best first -> (kept (A, n, m) int64:
    the gold edges of the row's first j + 1 blocks, size (A, m) int64: the valid keys of every
    row's first j + 1 blocks) (``selection.prefix_row_block_counts``: a gather and a running
    sum over the ranks; integers)."""
    A, n, m = first.shape
    kept = np.empty((A, n, m), dtype=np.int64)
    size = np.zeros((A, m), dtype=np.int64)
    for a in range(A):
        for i in range(n):
            run = np.int64(0)
            for j in range(m):
                b = first[a, i, j]
                run += count[a, i, b]
                kept[a, i, j] = run
                size[a, j] += vcnt[i, b]
        for j in range(1, m):
            size[a, j] += size[a, j - 1]
    return kept, size


def warm() -> bool:
    """Compile (or load from numba's cache) every kernel here on tiny inputs, so that a fresh
    image or process does not compile on its first analysis; True when all ran."""
    x = np.zeros((1, 2, 4))
    x[..., 0] = 1.0
    near = nearest_first(x, np.ones((1, 2, 4)), 1)
    frozen = [x.copy(), np.ones((1, 2, 4))]  # read-only views of torch tensors: a second build
    for a in frozen:
        a.flags.writeable = False
    near_ro = nearest_first(*frozen, 1)
    step = lloyd_step(np.zeros((1, 2, 2)), np.empty((0, 2), np.uint8), x, np.zeros(1, np.int64))
    at, bit = np.zeros((1, 1, 2), dtype=np.int32), np.zeros((1, 1, 2), dtype=np.uint8)
    draws = draw_counts(np.ones(1, np.uint8), at, bit, np.ones((1, 2), dtype=np.int64))
    fy = partial_fisher_yates(np.zeros((2, 2), np.int32), np.ones(2, np.int64), at)
    ok = (
        near.shape == near_ro.shape == (1, 2, 1)
        and step[0].shape == (1, 2)
        and draws[2].shape == (1, 3)
    )
    ok = ok and first_maxima(np.zeros((1, 2), np.float32), 1).shape == (1, 1)
    one = np.ones((1, 2), np.float32)
    ok = ok and h2o_largest(one, one, np.zeros((1, 2), np.int64), 1).shape == (1, 1)
    ok = ok and set_bits(np.zeros(1, np.int64), np.zeros(1, np.uint8), 1).shape == (2,)
    cand, m = free_candidates(np.zeros((2, 2), dtype=np.bool_), False)
    a0, la, b0, mr = band_free_runs(2, 1, True, False)
    ok = ok and runs_fisher_yates(a0, la, b0, mr, at).shape == (1, 1, 2)
    ok = ok and band_base_bits(2, 1, True, True).shape == (2, 1)
    ok = ok and cand.shape == (2, 2) and first_fill(fy, 3, 1).shape == (1, 1, 1)
    e = np.zeros(2, np.int64)
    keep = topp_rows(e, e, np.ones(2, np.uint32), np.ones(2), np.ones(1))
    ok = ok and kept_edge_counts(keep, e, e, e, 1, 1, 16)[1].shape == (1, 1, 1, 1)
    pp = np.ones((1, 2, 2), np.float32)
    ok = ok and column_sums(pp, False).shape == (1, 1, 2)
    ok = ok and column_sums(pp, True).shape == (1, 2, 2)
    ok = ok and or_rows(np.ones((1, 3, 2), np.bool_), 2).shape == (1, 2, 2)
    one3 = np.ones((1, 1, 1), np.uint8)
    kept, size = prefix_block_counts(one3, np.ones((1, 1), np.int16), np.zeros((1, 1, 1), np.int64))
    ok = ok and kept.shape == (1, 1, 1) and size.shape == (1, 1)
    for cnt in (np.zeros(1, np.uint8), np.zeros(1, np.int32)):
        block_cells(e, e, e, np.ones(2), True, 1, 1, 16, cnt, np.zeros(1))
        block_cells(e, e, e, np.ones(2), False, 1, 1, 16, cnt, np.zeros(0))
        ok = ok and cnt[0] == 4
    return ok and fy.shape == (1, 1, 2) and first_fill(fy, 16, 1).shape == (1, 1, 1)
