"""BigBird (Zaheer et al. 2020; SPEC §2): window + globals + r random keys per row, and its sweep.

Row i holds ``B_i = (W_w ∪ Glob) ∩ V`` plus r keys drawn without replacement among the valid keys
outside B_i (``patterns.bigbird``; the draws hash the per-head seed ``grids.head_seed``, so the
page draws the same keys). Defaults: r = 3, window 3, globals on; own grid r ∈
``grids.RANDOM_COUNTS`` (≤ n).

Because the random keys are drawn outside the window and the globals, the add-ons are part of
the draw: the Pareto engine's window crossing (one base mask, every width at once) does not
apply, so BigBird measures its sweep points itself (:func:`bigbird_metrics`, the ``measure``
hook of ``Method``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from .. import baselines, patterns
from ..bitsets import BLOCKS, METRICS, Gold, count_bits, pack, tile_occupancy, to_metrics
from ..rng import BIGBIRD_STREAM, hash_uniform_t
from .base import Method
from .context import PredictContext
from .grids import random_counts
from .spec import ParamSpec


class BigBirdMethod(Method):
    """BigBird: window w + globals + r random keys per row drawn among the valid keys outside
    the window and globals (``patterns.bigbird``; seed ``grids.head_seed``)."""

    name, label = "bigbird", "BigBird"
    window_default, globals_default = 3, True

    def own_params(self, n, artefact=None):
        return [
            ParamSpec("random_keys", "random keys r", "int", min(3, n), 0, n, 1,
                      help="random keys per row, drawn outside the window and globals"),
        ]  # fmt: skip

    def own_grid(self, n, artefact=None):
        return [{"random_keys": r} for r in random_counts(n)]

    def predict(self, ctx, **params):
        p = self.validate(ctx.n, params)
        n, L, H = ctx.n, ctx.layers, ctx.heads
        base = patterns.finish(
            torch.zeros(n, n, dtype=torch.bool),
            window=p["window"], globals_=p["globals"], causal=ctx.causal,
        )  # fmt: skip  # (n, n) B, the same for every head
        draws = baselines.bigbird_draws(base, ctx.causal, ctx.seeds().flatten(), p["random_keys"])
        return (base | baselines.draws_mask(draws, n)).view(L, H, n, n)

    def measure(self, ctx, gold, points):
        return bigbird_metrics(ctx, gold, points)

    def head_payload(self, ctx, layer, head):
        return {"seed": int(ctx.seeds()[layer, head])}  # the head's own (also in a view)


def bigbird_metrics(ctx: PredictContext, gold: Gold, pts: Sequence[dict]) -> dict[str, np.ndarray]:
    """BigBird: ``B = (W_w ∪ Glob) ∩ V`` through the window path, plus the random keys R drawn
    outside B (so disjoint from it): |M| = |B| + Σ_i min(r, m_i), |M ∩ G| = |B ∩ G| + |R ∩ G|,
    and row i is whole iff every gold key it misses in B is among its first r draws.

    Which draw picks a gold key follows from tracking that one key through the partial
    Fisher–Yates of ``baselines.bigbird_draws``: it starts at its rank x among the row's free
    columns; at step t it is picked if p_t = x, and moves to p_t if x = t. A key that starts at a
    rank ≥ k that no p_t hits is never touched, so only the keys at ranks {0..k−1} ∪ {p_t} are
    tracked. Draws are prefixes of each other, so one pass with the largest r gives every r.
    Block sparsity: the draws of every row (``baselines.bigbird_draws``, largest r) give each
    tile the first step that fills it (:func:`_draw_tiles`); with r draws a tile empty in B is
    filled iff that step is < r.
    Returns metric -> (P, L·H) float64, equal to ``metrics`` on the explicit masks (tested).
    """
    n, L, H = ctx.n, ctx.layers, ctx.heads
    LH = L * H
    res = {metric: np.zeros((len(pts), LH)) for metric in METRICS}
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
            empty = torch.zeros(n, n, dtype=torch.bool)
            base = patterns.finish(empty, window=w, globals_=glob, causal=ctx.causal).numpy()
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
            tiles = _draw_tiles(ctx, gold, base, k)
            for i in idxs:
                r = min(pts[i]["random_keys"], n)
                c = {
                    "size": size0 + int(np.minimum(m, r).sum()),
                    "hit": hit0 + (hits[:, r - 1] if r else 0),
                    "covered": covered[:, r],
                    **{f"empty_{b}": free - (drawn[:, r - 1] if r else 0)
                       for b, (free, drawn) in tiles.items()},
                }  # fmt: skip
                for metric, v in to_metrics(gold, c).items():
                    res[metric][i] = v
    return res


def _draw_tiles(ctx: PredictContext, gold: Gold, base: np.ndarray, k: int) -> dict:
    """Per tile size B: (empty counted tiles of ``base``, (LH, k) cumulative count of those the
    first t + 1 random draws fill), for the draws of every head's rows with ``base`` (n, n)."""
    n, LH = ctx.n, ctx.layers * ctx.heads
    draws = baselines.bigbird_draws(
        torch.from_numpy(base), ctx.causal, ctx.seeds().flatten(), k
    ).numpy()  # (LH, n, k), −1 past a row's supply
    occ = tile_occupancy(pack(base)[None], n)
    out = {}
    for b in BLOCKS:
        counted, _ = gold.tiles[b]
        T = counted.shape[0]
        free = (counted & ~occ[b][0]).reshape(-1)  # (T²,)
        first = np.full((LH, T * T + 1), k, dtype=np.int64)  # last column: no draw
        row_t = ((np.arange(n) // b) * T)[None, :]  # (1, n)
        heads = np.arange(LH)[:, None]
        for t in range(k - 1, -1, -1):  # smaller steps overwrite: the first step that fills
            d = draws[:, :, t]
            first[heads, np.where(d >= 0, row_t + d // b, T * T)] = t
        f = first[:, :-1][:, free]  # (LH, F) the step that fills each empty tile (k: none)
        key = (np.arange(LH)[:, None] * (k + 1) + f).ravel()
        hist = np.bincount(key, minlength=LH * (k + 1)).reshape(LH, k + 1)
        out[b] = (int(free.sum()), np.cumsum(hist, axis=1)[:, :k])
    return out
