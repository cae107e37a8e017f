"""Baselines the paper compares Sparsefinder with (definitions §3): Reformer and Routing, plus
batched draws of BigBird's random keys and Longformer's random globals for every head at once.

Both work in the same projected space as Sparsefinder (q̃_i, k̃_i ∈ R^r, from the artefact) so
that the comparison is on the same footing (paper §5, App. C.2). Inputs are batched over any
leading dims, typically ``qp, kp: (L, H, n, r)``; outputs are unfinished ``(L, H, n, n)`` bool
masks (the caller ORs window / global add-ons in and ANDs the valid region, ``patterns.finish``).
The intermediate assignments are exposed too, because the web page receives them and recomputes
the masks in the browser (``sparse_core.methods.hashing`` memoises them per text and sends them).

**Reformer** (Kitaev et al. 2020, LSH attention with shared query/key). Token i is hashed as the
single vector ``x_i = [q̃_i; k̃_i] ∈ R^{2r}`` (concatenation), so its query and its key always share a
bucket and the diagonal is always predicted. Per (layer l, head h, round u) one random rotation
``R ∈ R^{2r × B/2}`` with i.i.d. N(0, 1) entries, and ``bucket(x) = argmax([x R ; −x R])`` (B
buckets, B even; ties go to the lower index). Edge ``(i, j)`` iff ``bucket_u(i) = bucket_u(j)`` in
at least one round u.
Project choice: the entries of R come from the shared hash PRNG (:mod:`sparse_core.rng`), by
Box–Muller, ``R[a, c] = sqrt(−2 ln(1 − u₁)) · cos(2π u₂)`` with
``u₁ = hash_uniform(seed, REFORMER_STREAM, l, h, u, a, c, 0)`` and ``u₂ = … , 1)``; column c does
not depend on B, so the rotation for B buckets is the first B/2 columns of any larger one.

**Routing Transformer** (Roy et al. 2021), balanced variant of the paper's App. C.2. Per head and
per text, spherical k-means with C centroids on the 2n unit vectors
``{q̃_i / ‖q̃_i‖} ∪ {k̃_j / ‖k̃_j‖}``; then each centroid c takes its top ``m = ⌊n / C⌋ + 1``
queries and, separately, its top m keys by cosine (ties to the lower position).
Edge ``(i, j)`` iff some centroid took query i and key j. A token no centroid took gets no edges
(that is what costs Routing recall, paper §2). Project choices (deterministic, no RNG):

- initialisation by farthest-point seeding: centroid 0 is the normalised mean of the points
  (point 0 if the mean is ~0), centroid c + 1 the point whose largest cosine to the chosen
  centroids is smallest (ties to the lower point index: queries 0..n−1, then keys);
- ``ROUTING_ITERS`` = 10 Lloyd iterations: assign each point to its highest-cosine centroid (ties
  to the lower centroid), centroid = normalised sum of its points; an empty cluster keeps its
  centroid;
- m is clamped to n (C = 1 takes every token).

**BigBird / Longformer** (``patterns.bigbird``, ``patterns.longformer``): :func:`bigbird_draws`
is ``patterns``' per-row partial Fisher–Yates for S seeds at once (the draws in order, so a prefix
is the draw for fewer keys) and :func:`longformer_positions` the random global tokens of every
head; the seed of head (l, h) is ``methods.head_seed(l, h)`` = ``l * 1000 + h``.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from . import patterns
from .errors import SparsescopeError
from .rng import BIGBIRD_STREAM, hash_uniform_t

#: Stream constant (second hashed integer) of the Reformer rotations (BigBird 1, Longformer 2).
REFORMER_STREAM = 3
#: Spherical k-means iterations of the Routing baseline.
ROUTING_ITERS = 10
_EPS = 1e-12


def _check_pair(qp: Tensor, kp: Tensor) -> None:
    if qp.shape != kp.shape or qp.dim() < 2:
        raise SparsescopeError(
            f"projected queries and keys must have the same shape (..., n, r), "
            f"got {tuple(qp.shape)} and {tuple(kp.shape)}"
        )


def reformer_rotations(
    layers: int, heads: int, dim: int, n_buckets: int, rounds: int = 1, seed: int = 0,
    layer_ids: Tensor | None = None, head_ids: Tensor | None = None,
) -> Tensor:  # fmt: skip
    """The Gaussian rotations ``(L, H, rounds, dim, B/2)`` float64 (module docstring).
    ``layer_ids`` / ``head_ids`` (default 0..L−1, 0..H−1): the model's layer and head of each
    row and column (some heads alone, or several texts stacked)."""
    n_buckets = _even_buckets(n_buckets)
    rounds = _positive("rounds", rounds)
    half = n_buckets // 2
    li = torch.arange(layers) if layer_ids is None else layer_ids
    hi = torch.arange(heads) if head_ids is None else head_ids
    # elementwise in the ids: each distinct (layer, head) once (stacked texts repeat them)
    lu, linv = torch.unique(li, return_inverse=True)
    hu, hinv = torch.unique(hi, return_inverse=True)
    idx = (
        lu.view(-1, 1, 1, 1, 1),
        hu.view(1, -1, 1, 1, 1),
        torch.arange(rounds).view(1, 1, -1, 1, 1),
        torch.arange(dim).view(1, 1, 1, -1, 1),
        torch.arange(half).view(1, 1, 1, 1, -1),
    )
    u1 = hash_uniform_t(seed, REFORMER_STREAM, *idx, 0)
    u2 = hash_uniform_t(seed, REFORMER_STREAM, *idx, 1)
    rot = torch.sqrt(-2.0 * torch.log1p(-u1)) * torch.cos(2.0 * math.pi * u2)
    return rot[linv][:, hinv]


def reformer_buckets(
    qp: Tensor, kp: Tensor, n_buckets: int, rounds: int = 1, seed: int = 0,
    layer_ids: Tensor | None = None, head_ids: Tensor | None = None,
) -> Tensor:  # fmt: skip
    """LSH bucket of every token: ``(L, H, n, r)`` x 2 -> ``(L, H, rounds, n)`` int64 in [0, B).

    ``bucket_u(i) = argmax([x_i R_u ; −x_i R_u])`` with ``x_i = [q̃_i; k̃_i]`` (module docstring).
    """
    _check_pair(qp, kp)
    if qp.dim() != 4:
        raise SparsescopeError(f"reformer needs (L, H, n, r) inputs, got {tuple(qp.shape)}")
    x = torch.cat([qp, kp], dim=-1).double()  # (L, H, n, 2r)
    rot = reformer_rotations(
        qp.shape[0], qp.shape[1], x.shape[-1], n_buckets, rounds, seed, layer_ids, head_ids
    )
    proj = torch.einsum("lhna,lhuac->lhunc", x, rot)  # (L, H, rounds, n, B/2)
    return torch.cat([proj, -proj], dim=-1).argmax(dim=-1)  # (L, H, rounds, n)


def buckets_mask(buckets: Tensor) -> Tensor:
    """``(..., rounds, n)`` bucket ids -> ``(..., n, n)`` bool: same bucket in some round."""
    same = buckets[..., :, None] == buckets[..., None, :]  # (..., rounds, n, n)
    return same.any(dim=-3)


def reformer(qp: Tensor, kp: Tensor, n_buckets: int, rounds: int = 1, seed: int = 0) -> Tensor:
    """Reformer's shared-QK LSH pattern (definitions §3): ``(L, H, n, r)`` x 2 -> ``(L, H, n, n)``
    bool, ``(i, j) ∈ M`` iff i and j share a bucket in some round (diagonal always in)."""
    return buckets_mask(reformer_buckets(qp, kp, n_buckets, rounds, seed))


def _unit(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (rows of norm < 1e-12 divided by 1e-12)."""
    r = x.shape[-1]
    if not 1 <= r < 8:
        return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), _EPS)
    # numpy's norm is sqrt(Σ x²) with the < 8 terms of a row added left to right: the same
    # sum, one pass per column instead of a reduction call per row (~3x faster)
    s = x[..., 0] * x[..., 0]
    for c in range(1, r):
        s += x[..., c] * x[..., c]
    return x / np.maximum(np.sqrt(s), _EPS)[..., None]


def _routing_points(qp: Tensor, kp: Tensor) -> np.ndarray:
    """The 2n unit vectors of each head, queries then keys: (..., 2n, r) float64."""
    return _unit(np.concatenate([qp.numpy(), kp.numpy()], axis=-2).astype(np.float64))


def farthest_points(
    qp: Tensor, kp: Tensor, n_clusters: int, points: np.ndarray | None = None
) -> np.ndarray:
    """Routing's farthest-point initial centroids ``(A, C, r)`` float64 (module docstring), A
    the product of the leading dims. Each centroid depends only on the earlier ones, so the
    first C' of them are the initial centroids for C' <= C (``routing_centroids``'s ``init``).
    ``points``: ``_routing_points(qp, kp)`` when made already."""
    _check_pair(qp, kp)
    C = _positive("n_clusters", n_clusters)
    pts = _routing_points(qp, kp) if points is None else points
    m, r = pts.shape[-2:]
    if C > m:
        raise SparsescopeError(f"n_clusters must be <= 2n = {m} for this text, got {C}")
    x = pts.reshape(-1, m, r)  # (A, 2n, r)
    A = x.shape[0]
    mean = x.mean(axis=1)
    norm = np.linalg.norm(mean, axis=-1, keepdims=True)
    cent = np.empty((A, C, r))
    cent[:, 0] = np.where(norm > 1e-9, mean / np.maximum(norm, _EPS), x[:, 0])
    best = np.einsum("amr,ar->am", x, cent[:, 0])  # highest cosine to the chosen centroids
    for c in range(1, C):
        cent[:, c] = x[np.arange(A), best.argmin(axis=1)]  # the farthest point (first on ties)
        best = np.maximum(best, np.einsum("amr,ar->am", x, cent[:, c]))
    return cent


def routing_centroids(
    qp: Tensor, kp: Tensor, n_clusters: int, iters: int = ROUTING_ITERS,
    init: np.ndarray | None = None, points: np.ndarray | None = None,
) -> Tensor:  # fmt: skip
    """Spherical k-means centroids ``(..., C, r)`` (float64 unit vectors) of the 2n normalised
    projected queries and keys of each head (module docstring: farthest-point init, ``iters``
    Lloyd steps; numpy, single-threaded, so it is cheap and predictable on a busy machine).
    ``init``: :func:`farthest_points` of these inputs for at least C clusters (made here if
    None); ``points``: ``_routing_points(qp, kp)`` when made already.

    A head whose assignment did not change in a step is at a fixed point (its centroids are
    recomputed from the same points, so they stay the same), so later steps leave it out; the
    loop ends when every head is fixed or after ``iters`` steps."""
    from ._method_kernels import lloyd_step  # numba: imported when first needed

    _check_pair(qp, kp)
    C = _positive("n_clusters", n_clusters)
    pts = _routing_points(qp, kp) if points is None else points
    lead, (m, r) = pts.shape[:-2], pts.shape[-2:]
    if C > m:
        raise SparsescopeError(f"n_clusters must be <= 2n = {m} for this text, got {C}")
    x = pts.reshape(-1, m, r)  # (A, 2n, r)
    A = x.shape[0]
    if init is None or init.shape[-2] < C:
        init = farthest_points(qp, kp, C, pts)
    cent = init.reshape(A, -1, r)[:, :C].copy()
    cols = np.ascontiguousarray(np.moveaxis(x, -1, 0))  # (r, A, 2n): the product's operand
    act = np.arange(A)  # the heads not yet at a fixed point
    prev = None
    for _ in range(iters):
        if C <= _ROW_ARGMAX:  # compiled: first maxima, moved heads, counts and sums in one pass
            w = cols if act.size == A else cols[:, act]
            s = cent[act] @ w.transpose(1, 0, 2)  # (A', C, 2n)
            none = np.empty((0, m), dtype=np.uint8)
            ids, moved, count, sums = lloyd_step(s, none if prev is None else prev, x, act)
            if prev is not None:
                if not moved.any():
                    break  # a fixed point: the remaining iterations would change nothing
                act, ids, count, sums = act[moved], ids[moved], count[moved], sums[moved]
            prev = ids
            cent[act] = np.where(count[..., None] > 0, _unit(sums), cent[act])
            continue
        xa = x if act.size == A else x[act]
        ids = (xa @ cent[act].transpose(0, 2, 1)).argmax(axis=-1)  # (A', 2n)
        if prev is not None:
            moved = (ids != prev).any(axis=1)
            if not moved.any():
                break
            act, ids = act[moved], ids[moved]
        prev = ids
        Aa = act.size
        idx = (ids + (np.arange(Aa) * C)[:, None]).ravel()  # (A'·2n,) int64
        count = np.bincount(idx, minlength=Aa * C).reshape(Aa, C, 1)
        xs = x[act]
        sums = np.stack(
            [np.bincount(idx, weights=xs[..., d].ravel(), minlength=Aa * C) for d in range(r)], -1
        ).reshape(Aa, C, r)
        cent[act] = np.where(count > 0, _unit(sums), cent[act])  # an empty cluster keeps its
    return torch.from_numpy(cent.reshape(*lead, C, r))


#: Most clusters for which the Lloyd assignment compares the C score rows one by one (each
#: a contiguous pass over the points) rather than ``argmax`` over the C scores of every point
#: (a call per point, ~15 ns each); both take the first of equal maxima.
_ROW_ARGMAX = 32


def top_members(score: Tensor, m: int) -> Tensor:
    """(..., n) scores -> (..., n) bool: the m highest, ties to the lower position (exactly the
    first m of a stable descending sort), via the m-th largest value instead of a full sort."""
    s = score.numpy() if isinstance(score, Tensor) else score
    k = s.shape[-1] - m  # the m-th largest is the (k+1)-th smallest
    v = np.partition(s, k, axis=-1)[..., k : k + 1]  # (..., 1) the m-th largest
    above, tie = s > v, s == v
    need = m - above.sum(axis=-1, keepdims=True)  # >= 1: v itself ties
    over = (tie.sum(axis=-1, keepdims=True) > need)[..., 0]  # rows with ties to cut
    out = above | tie  # every tie taken where they all fit (almost every row)
    if over.any():
        t = tie[over]
        out[over] = above[over] | (t & (np.cumsum(t, axis=-1) <= need[over]))
    return torch.from_numpy(out)


def routing_members(
    qp: Tensor, kp: Tensor, n_clusters: int, iters: int = ROUTING_ITERS,
    init: np.ndarray | None = None, points: np.ndarray | None = None,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    """Balanced routing: ``(queries, keys)``, each ``(..., C, n)`` bool, True where centroid c
    took that token among its top ``⌊n / C⌋ + 1`` by cosine (ties to the lower position).
    ``init``, ``points``: as :func:`routing_centroids`."""
    pts = _routing_points(qp, kp) if points is None else points
    cent = routing_centroids(qp, kp, n_clusters, iters, init, pts).numpy()  # (..., C, r)
    n = qp.shape[-2]
    top = min(n // int(n_clusters) + 1, n)
    # the unit queries and keys are the halves of the points (the scaling is row by row)
    uq, uk = np.ascontiguousarray(pts[..., :n, :]), np.ascontiguousarray(pts[..., n:, :])
    cq = cent @ np.swapaxes(uq, -1, -2)  # (..., C, n)
    ck = cent @ np.swapaxes(uk, -1, -2)
    return top_members(cq, top), top_members(ck, top)


def members_mask(queries: Tensor, keys: Tensor) -> Tensor:
    """``(..., C, n)`` query / key membership -> ``(..., n, n)``: ∃ c with query i and key j."""
    return (queries.transpose(-1, -2).float() @ keys.float()) > 0


def routing(qp: Tensor, kp: Tensor, n_clusters: int, iters: int = ROUTING_ITERS) -> Tensor:
    """Routing Transformer, balanced (definitions §3): ``(..., n, r)`` x 2 -> ``(..., n, n)``
    bool."""
    return members_mask(*routing_members(qp, kp, n_clusters, iters))


# ----------------------------------------------------------------------------- BigBird, Longformer


def longformer_positions(n: int, n_globals: int, seeds: Tensor) -> Tensor:
    """(…, n) bool: the random global tokens of every head (``patterns.longformer_globals``).

    The draw is a partial Fisher–Yates, so the first g of a larger draw are the draw for g; the
    positions of the largest g asked for so far are memoised per (n, seed)."""
    # several texts stacked repeat the same seeds: each distinct seed is drawn once
    uniq, inv = torch.unique(seeds.flatten(), return_inverse=True)
    g = min(n_globals, n)
    rows: list[int] = []
    cols: list[int] = []
    for k, s in enumerate(uniq.tolist()):
        pos = _longformer_draw(n, s, g)[:g]
        rows += [k] * len(pos)
        cols += pos
    out = np.zeros((len(uniq), n), dtype=bool)
    out[rows, cols] = True  # one assignment (a torch index per seed costs more than the draws)
    return torch.from_numpy(out)[inv].view(*seeds.shape, n)


_LF_CACHE: dict[tuple[int, int], list[int]] = {}
LONGFORMER_MAX = 20  # globals drawn at once (the largest of the sweep grid)


def _longformer_draw(n: int, seed: int, g: int) -> list[int]:
    got = _LF_CACHE.get((n, seed))
    if got is None or len(got) < g:
        got = patterns.longformer_globals(n, max(g, min(n, LONGFORMER_MAX)), seed)
        if len(_LF_CACHE) > 100_000:
            _LF_CACHE.clear()
        _LF_CACHE[(n, seed)] = got
    return got


def bigbird_draws(base: Tensor, causal: bool, seeds: Tensor, k: int) -> Tensor:
    """BigBird's random keys in draw order: (S, n, k) int64 column ids, −1 past a row's supply.

    Exactly ``patterns._sample_rows(V ∧ ¬base, k, seed, BIGBIRD_STREAM)`` for every seed, batched:
    per row the candidates are the free columns ascending, ``cand[:m_i]``; for t < min(k, m_i),
    ``p = t + ⌊hash_uniform(seed, 1, i, t) · (m_i − t)⌋`` and cand[t] ↔ cand[p] (partial
    Fisher–Yates). Rather than a per-seed copy of cand (S·n² ints), the swapped positions are kept
    in a small per-row overlay (positions, values) of at most k entries. A prefix of the draws is
    the draw for a smaller k (the hash does not depend on k).
    """
    n = base.shape[-1]
    free = patterns.valid_region(n, causal) & ~base  # (n, n)
    m = free.sum(1)  # (n,)
    cols = torch.arange(n)
    cand = torch.where(free, cols, cols + n).argsort(dim=1)  # (n, n): free columns first
    S, steps = seeds.numel(), min(int(k), n)
    out = torch.full((S, n, max(int(k), 0)), -1, dtype=torch.int64)
    if steps <= 0:
        return out
    rows = torch.arange(n)
    u = hash_uniform_t(seeds.view(S, 1, 1), BIGBIRD_STREAM, rows.view(1, n, 1),
                       torch.arange(steps).view(1, 1, steps))  # fmt: skip  # (S, n, steps)
    span = (m.view(1, n, 1) - torch.arange(steps).view(1, 1, steps)).clamp(min=1)
    p = torch.arange(steps).view(1, 1, steps) + torch.floor(u * span).to(torch.int64)
    p = p.clamp(max=n - 1)  # (S, n, steps)
    ov_pos = torch.full((S, n, steps), -1, dtype=torch.int64)  # overlay: written positions
    ov_val = torch.zeros((S, n, steps), dtype=torch.int64)

    def value_at(x: Tensor, t: int) -> Tensor:  # (S, n) current cand value at positions x
        v = cand.gather(1, x.view(S, n).t()).t()  # (S, n) base value; cand is (n, n)
        if t:
            hit = ov_pos[..., :t] == x[..., None]  # (S, n, t)
            last = torch.where(hit, torch.arange(t), -1).amax(dim=-1)  # latest write wins
            got = ov_val.gather(2, last.clamp(min=0)[..., None])[..., 0]
            v = torch.where(last >= 0, got, v)
        return v

    for t in range(steps):
        active = m.view(1, n) > t  # (1, n)
        pt = p[..., t]
        a = value_at(torch.full_like(pt, t), t)
        b = value_at(pt, t)
        out[..., t] = torch.where(active, b, -1)
        ov_pos[..., t] = torch.where(active, pt, -1)
        ov_val[..., t] = a
    return out


def draws_mask(draws: Tensor, n: int) -> Tensor:
    """(S, n, k) column ids (−1 = none) -> (S, n, n) bool."""
    mask = torch.zeros(*draws.shape[:-1], n + 1, dtype=torch.bool)
    mask.scatter_(-1, torch.where(draws >= 0, draws, n), True)
    return mask[..., :n]


# ----------------------------------------------------------------------------- validation


def _positive(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SparsescopeError(f"{name} must be an integer >= 1, got {value!r}")
    return value


def _even_buckets(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 2 or value % 2:
        raise SparsescopeError(f"n_buckets must be an even integer >= 2 (Reformer), got {value!r}")
    return value
