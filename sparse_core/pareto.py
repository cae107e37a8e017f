"""Sparsity–recall sweeps and Pareto frontiers (SPEC §4; paper §5–§6, Figures 2 and 4).

For one text (:func:`sweep_text`, the page's live plot) or a corpus (:func:`sweep_corpus`, the
``sparsescope pareto`` command) every method of the registry is evaluated at every point of its
grid (``Method.grid``): sparsity, recall, exact and precision per (layer, head), aggregated as
SPEC §4 says (per head: the mean over texts, each text weighted equally; overall: the plain mean
over heads); each method's frontier is ``metrics.pareto_front`` of its (sparsity, recall) points.

No (L, H, n, n) mask is built per grid point: each method's *base* masks (its own parameters,
every window width at once) are built straight as row bitsets and measured by
:mod:`sparse_core.bitsets`. Bases come from each method's assignments (buckets, clusters, members,
global sets; text-independent patterns are packed once per text); sf-distance from one float32
distance matrix binned at the grid's thresholds, entries within rounding of a threshold recomputed
exactly as ``sparsefinder.sq_distances``; BigBird, whose random keys depend on the window, from
its draws (:func:`_bigbird_points`). Every figure equals ``methods.evaluate`` on the explicit mask
(tests/core/test_pareto.py).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from . import baselines
from . import methods as M
from .bitsets import METRICS, Gold, count_bits, pack, row_bits, to_metrics, words
from .metrics import pareto_front
from .patterns import finish
from .rng import BIGBIRD_STREAM, hash_uniform_t

log = logging.getLogger(__name__)

_ONE = np.uint64(1)
BATCH = 1  # base masks per count_bits call (larger batches were slower: cache)


# ----------------------------------------------------------------------------- base bitsets


def _assign_bits(n: int, q_ids: np.ndarray, k_ids: np.ndarray, n_ids: int) -> np.ndarray:
    """Bucket masks as bitsets: q_ids, k_ids (A, S, n) ids in [0, n_ids), one assignment per slot
    s (a dimension, a top-k rank, a round); edge iff some query slot id equals some key slot id.
    -> (A, n, W) uint64: row i = OR over its slots of the bitset of keys holding that id."""
    A, S = q_ids.shape[:2]
    ids = np.arange(n_ids)
    kmem = np.zeros((A, n_ids, n), dtype=bool)  # keys holding each id in any slot
    for s in range(k_ids.shape[1]):
        kmem |= k_ids[:, s, None, :] == ids[:, None]
    kbits = pack(kmem).reshape(A * n_ids, -1)  # (A·n_ids, W)
    off = (np.arange(A) * n_ids)[:, None]
    out = kbits[q_ids[:, 0] + off]  # (A, n, W): a row gather per slot
    for s in range(1, S):
        out |= kbits[q_ids[:, s] + off]
    return out


def _ranks(x: Tensor) -> np.ndarray:
    """Per dimension, the stable ascending rank of every token: (A, n, r) -> (A, r, n) int64;
    ``rank // b`` is ``sparsefinder.balanced_buckets(x, b)`` (all tokens valid)."""
    v = np.swapaxes(x.numpy(), -1, -2)  # (A, r, n)
    order = np.argsort(v, axis=-1, kind="stable")
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(v.shape[-1])[None, None, :], axis=-1)
    return ranks


def _base_bits(ctx: M.PredictContext, method: M.Method, own: dict) -> np.ndarray:
    """The method's own mask as bitsets (A, n, W), A = 1 or L·H (not yet ∩ V, no add-ons)."""
    n, L, H = ctx.n, ctx.layers, ctx.heads
    name = method.name
    if name == "window":
        return np.zeros((1, n, words(n)), dtype=np.uint64)
    if name == "reformer":
        b = M.reformer_buckets(ctx, own["n_buckets"], own["rounds"]).numpy()  # (L, H, R, n)
        b = b.reshape(L * H, -1, n)
        return _assign_bits(n, b, b, own["n_buckets"])
    if name == "routing":
        q, k = (x.numpy() for x in M.routing_members(ctx, own["n_clusters"]))  # (L, H, C, n)
        kbits = pack(k).reshape(L * H, -1, words(n))  # (LH, C, W)
        qm = q.reshape(L * H, q.shape[-2], n)
        out = np.zeros((L * H, n, words(n)), dtype=np.uint64)
        for c in range(qm.shape[1]):  # the rows centroid c took get its keys
            a, i = np.nonzero(qm[:, c])
            out[a, i] |= kbits[a, c]
        return out
    if name == "sf-quantization":
        b = max(1, math.ceil(n / own["n_buckets"]))
        rq, rk = ctx.memo(  # (LH, r, n) ranks, shared by every B
            ("ranks",),
            lambda: tuple(_ranks(x.reshape(L * H, n, -1)) for x in (ctx.proj_q, ctx.proj_k)),
        )
        bq, bk = rq // b, rk // b  # balanced bins
        nid = (n + b - 1) // b
        # one slot per dimension, ids offset per dimension so that only equal dims can match
        off = (np.arange(bq.shape[1]) * nid)[None, :, None]
        return _assign_bits(n, bq + off, bk + off, bq.shape[1] * nid)
    if name == "sf-kmeans":
        aq, ak = (x.numpy() for x in M.kmeans_assignments(ctx, own["n_clusters"], own["top_k"]))
        qs = np.swapaxes(aq, -1, -2).reshape(L * H, -1, n)  # (LH, k, n)
        ks = np.swapaxes(ak, -1, -2).reshape(L * H, -1, n)
        return _assign_bits(n, qs, ks, own["n_clusters"])
    if name == "longformer":
        pos = (
            baselines.longformer_positions(n, own["n_globals"], ctx.seeds())
            .numpy()
            .reshape(L * H, n)
        )
        cols = row_bits(n, pos)  # (LH, W)
        full = np.full(words(n), np.uint64(0xFFFFFFFFFFFFFFFF))
        return np.where(pos[..., None], full, cols[:, None, :])
    if name in ("fixed", "strided"):
        key = ("bits", name, *sorted(own.items()))  # text-independent: packed once per text
        bits = ctx.memo(key, lambda: pack(method.base(ctx, own)))  # (n, W) or (1, H, n, W)
        return bits.reshape(-1, n, words(n)) if bits.ndim > 2 else bits[None]
    m = method.base(ctx, own)  # generic: pack the dense mask
    m = m.expand(L, H, n, n) if m.dim() == 4 else m
    return pack(m).reshape(-1, n, words(n))


def _distance_bits(ctx: M.PredictContext, ts: Sequence[float], chunk: int = 2) -> np.ndarray:
    """sf-distance masks ``D < t`` for thresholds ``ts`` as bitsets (len(ts), L·H, n, W).

    ``D`` is first computed in float32, ``Σ_c (q̃_c − k̃_c)²`` (numpy, a few heads at a time so the
    temporaries stay in cache); entries within a safe rounding margin of a threshold are
    recomputed exactly as ``sparsefinder.sq_distances`` does (float64, dims added in order), so
    the result equals ``sq_distances(q̃, k̃) < t`` bit for bit (tested). When every 2t is an
    integer (the paper's grid) D is binned once as ⌊2D⌋ and each mask is ``bin < 2t``.
    """
    q = ctx.proj_q.reshape(-1, ctx.n, ctx.proj_q.shape[-1]).numpy()  # (LH, n, r) float32
    k = ctx.proj_k.reshape(-1, ctx.n, ctx.proj_k.shape[-1]).numpy()
    LH, n, r = q.shape
    W = words(n)
    ts = [float(t) for t in ts]
    binned = all((2 * t).is_integer() and 0 <= 2 * t <= 254 for t in ts)
    top = max(int(2 * t) for t in ts) if binned else 0
    out = np.zeros((len(ts), LH, n, W * 8), dtype=np.uint8)  # bitsets, viewed as bytes
    nb = (n + 7) // 8
    for a in range(0, LH, chunk):
        qa, ka = q[a : a + chunk], k[a : a + chunk]
        d = np.subtract(qa[:, :, None, 0], ka[:, None, :, 0])
        d *= d
        tmp = np.empty_like(d)
        for c in range(1, r):
            np.subtract(qa[:, :, None, c], ka[:, None, :, c], out=tmp)
            tmp *= tmp
            d += tmp
        # |d − D| <= margin (generous: 16 ulps of the largest possible value in the chunk)
        big = float(np.abs(qa).max() + np.abs(ka).max()) ** 2 * r
        margin = 16 * 2.0**-24 * big + 1e-30
        if binned:
            d *= 2.0
            near = np.abs(d - np.rint(d)) <= 2 * margin
            bins = np.minimum(d, top).astype(np.uint8)  # ⌊2D⌋ for D >= 0, capped
            flat = np.flatnonzero(near)
            hh, ii, jj = np.unravel_index(flat, near.shape)
            if flat.size:
                exact = _exact_sq(qa[hh, ii], ka[hh, jj])
                bins[hh, ii, jj] = np.minimum(np.floor(2.0 * exact), top).astype(np.uint8)
            # bit planes of the bins, then ``bin < m`` as a comparator on whole words
            planes = [pack(bins & np.uint8(1 << j)) for j in range(max(top, 1).bit_length())]
            for b, t in enumerate(ts):
                out[b, a : a + chunk] = _less_than(planes, int(2 * t)).view(np.uint8)
        else:
            for b, t in enumerate(ts):
                m = d < t
                hh, ii, jj = np.nonzero(np.abs(d - t) <= margin)
                if hh.size:
                    m[hh, ii, jj] = _exact_sq(qa[hh, ii], ka[hh, jj]) < t
                out[b, a : a + chunk, :, :nb] = np.packbits(m, axis=-1, bitorder="little")
    return out.view(np.uint64)


def _less_than(planes: list[np.ndarray], m: int) -> np.ndarray:
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


def _exact_sq(qv: np.ndarray, kv: np.ndarray) -> np.ndarray:
    """``sparsefinder.sq_distances`` for paired rows: float64, dims added in order."""
    d = np.zeros(qv.shape[0], dtype=np.float64)
    for c in range(qv.shape[1]):
        d += (qv[:, c].astype(np.float64) - kv[:, c].astype(np.float64)) ** 2
    return d


# ----------------------------------------------------------------------------- sweeps


def _own(params: dict) -> tuple:
    return tuple(sorted((k, v) for k, v in params.items() if k not in ("window", "globals")))


def _finish_bits(gold: Gold, base: np.ndarray, with_globals: bool) -> np.ndarray:
    b = base | gold.gbits if with_globals else base
    return b & gold.vbits


def sweep_points(
    ctx: M.PredictContext,
    method: M.Method | str,
    points: Sequence[dict],
    gold: Gold | None = None,
) -> dict[str, Tensor]:
    """Metrics of ``method`` at each of ``points`` (param dicts): metric -> (P, L, H) float64,
    equal to ``methods.evaluate`` at each point (tested), computed with the window fast path."""
    method = M.get_method(method) if isinstance(method, str) else method
    gold = gold or Gold(ctx.out.graph, ctx.causal)
    pts = [method.validate(ctx.n, p, ctx.artefact) for p in points]
    L, H = ctx.layers, ctx.heads
    res = {k: np.zeros((len(pts), L * H)) for k in METRICS}
    if not pts:
        return {k: torch.from_numpy(v).view(0, L, H) for k, v in res.items()}
    if method.name == "bigbird":
        _bigbird_points(ctx, gold, pts, res)
    else:
        groups: dict[tuple, list[int]] = {}
        for idx, p in enumerate(pts):
            groups.setdefault((_own(p), p["globals"]), []).append(idx)
        keys = list(groups)
        if method.name == "sf-distance":
            ts = [dict(k[0])["t"] for k in keys]
            made = dict(zip(keys, _distance_bits(ctx, ts), strict=True))
        else:
            made = {}
        # bases that share their window widths are measured together (fewer, larger array ops)
        batches: dict[tuple, list[tuple]] = {}
        for key in keys:
            batches.setdefault(tuple(pts[i]["window"] for i in groups[key]), []).append(key)
        for windows, bkeys in batches.items():
            for c in range(0, len(bkeys), BATCH):
                chunk = bkeys[c : c + BATCH]
                bases = [
                    made.pop(k) if k in made else _base_bits(ctx, method, dict(k[0])) for k in chunk
                ]
                A = max(b.shape[0] for b in bases)
                bits = np.stack(
                    [np.broadcast_to(_finish_bits(gold, b, k[1]), (A, *b.shape[1:]))
                     for b, k in zip(bases, chunk, strict=True)]
                )  # fmt: skip  # (P, A, n, W)
                got = to_metrics(gold, count_bits(gold, bits, list(windows)))
                for q, key in enumerate(chunk):
                    for metric in METRICS:
                        res[metric][groups[key]] = got[metric][q]
    return {k: torch.from_numpy(v).view(len(pts), L, H) for k, v in res.items()}


def _bigbird_points(ctx: M.PredictContext, gold: Gold, pts: list[dict], res: dict) -> None:
    """BigBird: ``B = (W_w ∪ Glob) ∩ V`` through the window path, plus the random keys R drawn
    outside B (so disjoint from it): |M| = |B| + Σ_i min(r, m_i), |M ∩ G| = |B ∩ G| + |R ∩ G|,
    and row i is whole iff every gold key it misses in B is among its first r draws.

    Which draw picks a gold key follows from tracking that one key through the partial
    Fisher–Yates of ``baselines.bigbird_draws``: it starts at its rank x among the row's free
    columns; at step t it is picked if p_t = x, and moves to p_t if x = t. A key that starts at a
    rank ≥ k that no p_t hits is never touched, so only the keys at ranks {0..k−1} ∪ {p_t} are
    tracked. Draws are prefixes of each other, so one pass with the largest r gives every r.
    """
    n, L, H = ctx.n, ctx.layers, ctx.heads
    LH = L * H
    k = max(min(max(p["random_keys"] for p in pts), n), 1)
    steps = np.arange(k, dtype=np.int32)
    u = hash_uniform_t(  # (LH·n, k): the draws' uniforms, shared by every window
        ctx.seeds().reshape(LH, 1, 1), BIGBIRD_STREAM, torch.arange(n).view(1, n, 1),
        torch.arange(k).view(1, 1, -1),
    ).numpy().reshape(LH * n, k)  # fmt: skip
    g = ctx.out.graph.reshape(-1).numpy()  # flat (LH·n·n,) bool: byte lookups beat bit tests
    glob_e = np.isin(gold.e_i, (0, n - 1)) | np.isin(gold.e_j, (0, n - 1))
    e_row = gold.e_lh * n + gold.e_i
    e_cell = gold.e_i * n + gold.e_j
    for glob in sorted({p["globals"] for p in pts}):
        sub = [i for i, p in enumerate(pts) if p["globals"] == glob]
        windows = sorted({pts[i]["window"] for i in sub})
        # the window + globals masks themselves, every width in one pass
        base_bits = (gold.gbits if glob else np.zeros_like(gold.vbits)) & gold.vbits
        c0 = count_bits(gold, base_bits[None, None], windows)
        for q, w in enumerate(windows):
            idxs = [i for i in sub if pts[i]["window"] == w]
            base = finish(torch.zeros(n, n, dtype=torch.bool), window=w, globals_=glob,
                          causal=ctx.causal).numpy()  # fmt: skip  # (n, n)
            free = gold.valid & ~base
            m = free.sum(1)  # (n,) candidates per row
            cum = np.cumsum(free, axis=1, dtype=np.int32)  # rank of free column j of row i: cum − 1
            fi, fj = np.nonzero(free)
            first = np.concatenate([[0], np.cumsum(m)[:-1]])  # (n,) start of each row in fj
            cand = np.full((n, n), n - 1, dtype=np.int32)
            cand[fi, np.arange(fi.size) - first[fi]] = fj  # (n, n): the column of rank x in row i
            out_e = (gold.e_d > max(w // 2, -1) if w else np.ones_like(glob_e)) & ~(
                glob_e if glob else np.zeros_like(glob_e)
            )  # gold keys outside B: only their rows need the draws
            ej, er = gold.e_j[out_e], e_row[out_e]  # er is sorted (edges are in row order)
            rows = er[np.r_[True, er[1:] != er[:-1]]] if er.size else er  # (R,) flat rows
            ri = rows % n
            span = np.maximum(m[:, None] - steps[None, :], 1)  # (n, k)
            p = steps + (u[rows] * span[ri]).astype(np.int32)  # (R, k); floor: u * span >= 0
            live = steps[None, :] < m[ri, None]  # (R, k) the steps a row takes
            # the only gold keys a draw can pick: at a drawn position p_t, or at a rank t < k
            cols_p = cand.ravel()[(ri * n)[:, None] + p]  # (R, k)
            a = np.flatnonzero(g[(rows * n)[:, None] + cols_p] & live)
            early = cum.ravel()[e_cell[out_e]] <= k  # at a rank < k
            key = np.unique(np.concatenate([rows[a // k] * n + cols_p.ravel()[a],
                                            er[early] * n + ej[early]]))  # fmt: skip
            crow, ccol = key // n, key % n
            ci = crow % n
            pos = cum[ci, ccol].astype(np.int64) - 1  # starting rank of each tracked key
            pc = p[np.searchsorted(rows, crow)]  # (C, k) the draws of each key's row
            mc = m[ci]
            picked = np.full(pos.shape, k)  # the step that draws the key (k: never)
            for t in range(k):
                pt = pc[:, t]
                on = mc > t
                now = on & (pt == pos)
                picked[now] = t
                pos = np.where(now, -1, np.where(on & (pos == t), pt, pos))
            hist = np.bincount((crow // n) * (k + 1) + picked, minlength=LH * (k + 1))
            hits = np.cumsum(hist.reshape(LH, k + 1), axis=1)  # [:, r − 1]: keys in first r
            need = np.bincount(er, minlength=LH * n)
            tracked = np.bincount(crow, minlength=LH * n)
            last = np.full(LH * n, -1, dtype=np.int64)  # the row's last needed draw
            np.maximum.at(last, crow, picked)
            last = np.where(tracked < need, k, last)
            rkey = np.repeat(np.arange(LH) * (k + 2), n) + last + 1
            rhist = np.bincount(rkey, minlength=LH * (k + 2)).reshape(LH, k + 2)
            covered = np.cumsum(rhist, axis=1)  # [:, r]: rows whole with r draws
            size0, hit0 = c0["size"][0, q], c0["hit"][0, q]  # (LH,)
            for i in idxs:
                r = min(pts[i]["random_keys"], n)
                c = {
                    "size": size0 + int(np.minimum(m, r).sum()),
                    "hit": hit0 + (hits[:, r - 1] if r else 0),
                    "covered": covered[:, r],
                }
                for metric, v in to_metrics(gold, c).items():
                    res[metric][i] = v


# ----------------------------------------------------------------------------- text sweep


@dataclass
class TextSweep:
    """Every method's sweep points for one text: per head and for the mean over heads."""

    gold_sparsity: np.ndarray  # (L, H)
    grids: dict[str, list[dict]]  # method -> params of each point
    values: dict[str, dict[str, np.ndarray]]  # method -> metric -> (P, L, H)

    def points(self, layer: int | None = None, head: int | None = None) -> dict:
        """``{"scope", "gold_sparsity", "points", "frontiers"}`` for one head, or (both None) for
        the mean over heads (SPEC §4: the plain mean of the per-head figures). Frontier entries
        index ``points``; they are computed on the rounded figures that are returned."""
        if layer is None:
            gold = float(self.gold_sparsity.mean())
            pick: Callable[[np.ndarray], np.ndarray] = lambda a: a.mean(axis=(1, 2))  # noqa: E731
        else:
            gold = float(self.gold_sparsity[layer, head])
            pick = lambda a: a[:, layer, head]  # noqa: E731
        pts = points_json(self.grids, {nm: {m: pick(v[m]) for m in METRICS}
                                       for nm, v in self.values.items()})  # fmt: skip
        return {"scope": "mean" if layer is None else "head", "gold_sparsity": _r(gold), **pts}


def _r(x: float) -> float:
    return round(float(x), 6)


def points_json(grids: dict[str, list[dict]], values: dict[str, dict[str, np.ndarray]]) -> dict:
    """``{"points": [...], "frontiers": {method: [indices]}}`` from per-point figures (P,)."""
    points: list[dict] = []
    fronts: dict[str, list[int]] = {}
    for name, grid in grids.items():
        first = len(points)
        for k, p in enumerate(grid):
            points.append(
                {"method": name, "params": p, **{m: _r(values[name][m][k]) for m in METRICS}}
            )
        fronts[name] = [first + k for k in frontier(points[first:])]
    return {"points": points, "frontiers": fronts}


def frontier(points: Sequence[dict]) -> list[int]:
    """``metrics.pareto_front`` over the (sparsity, recall) of point dicts (indices into them)."""
    return pareto_front([(p["sparsity"], p["recall"]) for p in points])


def sweep_text(
    ctx: M.PredictContext, methods: Iterable[str] | None = None, per_head: bool = True
) -> TextSweep:
    """Sweep every available method's grid (``Method.grid(n)``) on one text.

    ``per_head`` keeps the (P, L, H) figures (the page asks for single heads); otherwise only the
    mean over heads is kept (arrays of shape (P, 1, 1)).
    """
    gold = Gold(ctx.out.graph, ctx.causal)
    names = M.available(ctx.artefact, None if methods is None else list(methods))
    grids, values = {}, {}
    for name in names:
        grid = M.METHODS[name].grid(ctx.n, ctx.artefact)
        got = {k: v.numpy() for k, v in sweep_points(ctx, name, grid, gold).items()}
        if not per_head:
            got = {k: v.mean(axis=(1, 2), keepdims=True) for k, v in got.items()}
        grids[name], values[name] = grid, got
    gs = gold.sparsity()
    return TextSweep(gs if per_head else gs.mean(keepdims=True).reshape(1, 1), grids, values)


# ----------------------------------------------------------------------------- corpus sweep


def corpus_grids(
    names: Sequence[str], n_ref: int, n_min: int, artefact=None
) -> dict[str, list[dict]]:
    """The grid of each method for a corpus: ``Method.grid(n_ref)`` (n_ref = the longest input)
    keeping the points valid for the shortest input n_min (every range grows with n, so they are
    valid for every input)."""
    out = {}
    for name in names:
        method = M.METHODS[name]
        keep = []
        for p in method.grid(n_ref, artefact):
            try:
                method.validate(n_min, p, artefact)
            except ValueError:
                continue
            keep.append(p)
        out[name] = keep
    return out


@dataclass
class Totals:
    """Per-head sums over texts of every point's figures (add texts, then divide: SPEC §4)."""

    grids: dict[str, list[dict]]
    sums: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)  # (P, L, H) float64
    gold: np.ndarray | None = None  # (L, H) sum of gold sparsity
    texts: int = 0
    tokens: int = 0

    def add_text(self, ctx: M.PredictContext) -> None:
        gold = Gold(ctx.out.graph, ctx.causal)
        for name, grid in self.grids.items():
            got = sweep_points(ctx, name, grid, gold)
            acc = self.sums.setdefault(name, {})
            for m in METRICS:
                v = got[m].numpy()
                acc[m] = v if m not in acc else acc[m] + v
        g = gold.sparsity()  # (L, H), from the edge list: cheaper than a pass over the graph
        self.gold = g if self.gold is None else self.gold + g
        self.texts += 1
        self.tokens += ctx.n

    def merge(self, other: Totals) -> None:
        for name, acc in other.sums.items():
            mine = self.sums.setdefault(name, {})
            for m, v in acc.items():
                mine[m] = v if m not in mine else mine[m] + v
        if other.gold is not None:
            self.gold = other.gold if self.gold is None else self.gold + other.gold
        self.texts += other.texts
        self.tokens += other.tokens

    def means(self) -> dict[str, dict[str, np.ndarray]]:
        """method -> metric -> (P,) the overall figure: mean over texts, then over heads."""
        return {
            nm: {m: (v / self.texts).mean(axis=(1, 2)) for m, v in acc.items()}
            for nm, acc in self.sums.items()
        }


def sweep_inputs(
    model, texts: Sequence[str], artefact, grids: dict, *, alpha: float = 1.5,
    causal: bool = False, progress: Callable[[int], None] | None = None,
) -> Totals:  # fmt: skip
    """Run the model on each text and add every grid point's figures (one process)."""
    tot = Totals(grids)
    with torch.inference_mode():
        for text in texts:
            out = model.run(text, alpha=alpha, causal=causal, truncate=True)
            tot.add_text(M.PredictContext.from_run(out, artefact))
            if progress is not None:
                progress(1)
    return tot


_WORKER: dict = {}


def _worker_init(model_path, artefact_path, alpha: float, threads: int) -> None:
    torch.set_num_threads(threads)
    from .model import load_model
    from .sparsefinder import load_artefact

    model = load_model(model_path, device="cpu")
    art = None
    if artefact_path is not False:
        art = load_artefact(artefact_path, model_id=model.model_id, alpha=alpha)
    _WORKER.update(model=model, artefact=art)


def _worker_run(texts: list[str], grids: dict, alpha: float, causal: bool) -> Totals:
    return sweep_inputs(
        _WORKER["model"], texts, _WORKER["artefact"], grids, alpha=alpha, causal=causal
    )


@dataclass
class CorpusSweep:
    """The corpus sweep: ``to_json()`` is the pareto.json body (app/commands/pareto.py)."""

    model: str
    alpha: float
    causal: bool
    texts: int
    gold_sparsity: float
    grids: dict[str, list[dict]]
    values: dict[str, dict[str, np.ndarray]]  # method -> metric -> (P,)
    per_head: Totals
    fidelity: dict[str, dict[int, float]] | None = None  # method -> point index -> fidelity
    meta: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        body = points_json(self.grids, self.values)
        if self.fidelity is not None:
            offset = 0
            for name, grid in self.grids.items():
                got = self.fidelity.get(name, {})
                for k in range(len(grid)):
                    f = got.get(k)
                    body["points"][offset + k]["fidelity"] = None if f is None else _r(f)
                offset += len(grid)
        return {
            "model": self.model,
            "alpha": self.alpha,
            "causal": self.causal,
            "texts": self.texts,
            "gold_sparsity": _r(self.gold_sparsity),
            **body,
        }


def sweep_corpus(
    model,
    texts: Sequence[str],
    artefact=None,
    *,
    alpha: float = 1.5,
    causal: bool = False,
    methods: Iterable[str] | None = None,
    workers: int = 1,
    threads: int = 1,
    model_path=None,
    artefact_path=None,
    fidelity_texts: int = 0,
    progress: bool = True,
) -> CorpusSweep:
    """Sweep every method's grid over ``texts`` (model inputs) and aggregate (SPEC §4).

    Grids: :func:`corpus_grids` with n_ref / n_min the longest / shortest input. ``workers`` > 1
    splits the texts over that many processes (``spawn``; each loads the model from
    ``model_path`` and the artefact from ``artefact_path`` — None: the shipped one, False: none —
    and runs torch with ``threads`` threads); sums are merged, so the figures do not depend on
    the split beyond float rounding. ``fidelity_texts`` > 0 adds the output fidelity
    (``metrics.output_fidelity``) of every *frontier* point on the first that many texts (one
    masked forward pass per point and text: costly, hence the subsample); other points get None.
    """
    from tqdm.auto import tqdm

    t0 = time.perf_counter()
    names = M.available(artefact, None if methods is None else list(methods))
    counts = [len(e.ids) for e in model.tokenizer.encode_batch(list(texts))]
    limit = model.config.max_positions
    counts = [min(c, limit) for c in counts]
    grids = corpus_grids(names, max(counts), min(counts), artefact)
    bar = tqdm(total=len(texts), desc="pareto", unit="text", disable=not progress)
    if workers <= 1:
        tot = sweep_inputs(model, texts, artefact, grids, alpha=alpha, causal=causal,
                           progress=bar.update)  # fmt: skip
    else:
        tot = _parallel(texts, grids, alpha, causal, workers, threads, model_path,
                        artefact_path if artefact is not None else False, bar)  # fmt: skip
    bar.close()
    values = tot.means()
    sweep = CorpusSweep(
        model=model.model_id,
        alpha=float(alpha),
        causal=bool(causal),
        texts=tot.texts,
        gold_sparsity=float((tot.gold / tot.texts).mean()),
        grids=grids,
        values=values,
        per_head=tot,
        meta={"tokens": tot.tokens, "sweep_seconds": time.perf_counter() - t0},
    )
    if fidelity_texts > 0:
        t1 = time.perf_counter()
        sweep.fidelity = _fidelity(model, texts[:fidelity_texts], artefact, sweep, alpha, causal,
                                   progress)  # fmt: skip
        sweep.meta["fidelity_seconds"] = time.perf_counter() - t1
        sweep.meta["fidelity_texts"] = min(fidelity_texts, len(texts))
    return sweep


def _parallel(texts, grids, alpha, causal, workers, threads, model_path, artefact_path, bar):
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    size = max(1, min(4, math.ceil(len(texts) / (4 * workers))))  # small: an even finish
    chunks = [list(texts[i : i + size]) for i in range(0, len(texts), size)]
    tot = Totals(grids)
    with ProcessPoolExecutor(
        max_workers=workers,
        mp_context=mp.get_context("spawn"),
        initializer=_worker_init,
        initargs=(model_path, artefact_path, alpha, threads),
    ) as pool:
        futures = {pool.submit(_worker_run, c, grids, alpha, causal): len(c) for c in chunks}
        for fut in as_completed(futures):
            tot.merge(fut.result())
            bar.update(futures[fut])
    return tot


def _fidelity(model, texts, artefact, sweep: CorpusSweep, alpha, causal, progress) -> dict:
    """Output fidelity (mean over ``texts``) of every frontier point of every method."""
    from tqdm.auto import tqdm

    from .metrics import output_fidelity

    body = points_json(sweep.grids, sweep.values)
    todo = []
    offset = 0
    for name, grid in sweep.grids.items():
        todo += [(name, k - offset) for k in body["frontiers"][name]]
        offset += len(grid)
    sums = {key: 0.0 for key in todo}
    bar = tqdm(total=len(todo) * len(texts), desc="fidelity", unit="pass", disable=not progress)
    with torch.inference_mode():
        for text in texts:
            out = model.run(text, alpha=alpha, causal=causal, truncate=True)
            ctx = M.PredictContext.from_run(out, artefact)
            for name, k in todo:
                mask = M.METHODS[name].predict(ctx, **sweep.grids[name][k])
                sums[(name, k)] += output_fidelity(model, out, mask)
                bar.update(1)
    bar.close()
    res: dict[str, dict[int, float]] = {}
    for (name, k), v in sums.items():
        res.setdefault(name, {})[k] = v / len(texts)
    return res
