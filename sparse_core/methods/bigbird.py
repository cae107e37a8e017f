"""BigBird (Zaheer et al. 2020; definitions §2): window + globals + r random keys per row, and its
sweep.

Row i holds ``B_i = (W_w ∪ Glob) ∩ V`` plus r keys drawn without replacement among the valid keys
outside B_i (``patterns.bigbird``; the draws hash the per-head seed ``grids.head_seed``, so the
page draws the same keys). Defaults: r = 3, window 3, globals on; own grid r ∈
``grids.RANDOM_COUNTS`` (≤ n).

Because the random keys are drawn outside the window and the globals, the add-ons are part of
the draw: the Pareto engine's window crossing (one base mask, every width at once) does not
apply, so BigBird measures its sweep points itself (:func:`bigbird_metrics`, the ``measure``
hook of ``Method``): per width, every head's draws at once (:func:`fisher_yates`, a batched
partial Fisher–Yates equal to ``baselines.bigbird_draws``), then prefix counts for every r.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from .. import baselines, patterns
from .._method_kernels import (
    band_base_bits,
    band_free_runs,
    draw_counts,
    first_fill,
    free_candidates,
    partial_fisher_yates,
    runs_fisher_yates,
)
from ..bitsets import (
    BLOCKS,
    METRICS,
    Gold,
    count_bits,
    half_widths,
    pack,
    tile_occupancy,
    to_metrics,
    words,
)
from ..rng import BIGBIRD_STREAM, hash_uniform_t
from .base import Method
from .context import PredictContext
from .grids import random_counts
from .spec import ParamSpec


class BigBirdMethod(Method):
    """BigBird: window w + globals + r random keys per row drawn among the valid keys outside
    the window and globals (``patterns.bigbird``; seed ``grids.head_seed``)."""

    name, label = "bigbird", "BigBird"
    cost_rank = 16
    family = "baselines"
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

    Per window width (and globals) the draws of every head's rows are made once with the
    largest r (:func:`fisher_yates`, O(L·H·n·r)); draws are prefixes of each other, so a
    running count of the gold keys drawn gives |R ∩ G| and the whole rows of every r, and each
    tile's first filling step gives the block sparsity of every r (:func:`draw_tiles`).
    Returns metric -> (P, L·H) float64, equal to ``metrics`` on the explicit masks (tested).
    """
    n, L, H = ctx.n, ctx.layers, ctx.heads
    LH = L * H
    res = {metric: np.zeros((len(pts), LH)) for metric in METRICS}
    k = max(min(max(p["random_keys"] for p in pts), n), 1)
    # flat (LH·n·n + 1,) bool, the last entry False for "no draw": byte lookups beat bit tests
    # the gold graph as row bitsets viewed as bytes, one zero byte last for "no draw": a draw
    # is one byte lookup and a shift (the bytes fit in cache, the bool graph does not)
    g = gold.bit_bytes()
    row_bytes = 8 * words(n)
    e_row = gold.e_lh * n + gold.e_i  # sorted: edges are in row order
    row_gold = np.bincount(e_row, minlength=LH * n)  # gold keys per row
    e_valid = gold.e_j <= gold.e_i if ctx.causal else np.ones(gold.e_j.shape, dtype=bool)
    glob_e = np.isin(gold.e_i, (0, n - 1)) | np.isin(gold.e_j, (0, n - 1))
    for glob in sorted({p["globals"] for p in pts}):
        sub = [i for i, p in enumerate(pts) if p["globals"] == glob]
        windows = sorted({pts[i]["window"] for i in sub})
        # the window + globals masks themselves, every width in one pass
        base_bits = (gold.gbits if glob else np.zeros_like(gold.vbits)) & gold.vbits
        c0 = count_bits(gold, base_bits[None, None], windows)
        # gold keys of each row inside B, for every width: each edge's first covering width
        hs = half_widths(windows)
        first = np.searchsorted(np.sort(hs), gold.e_d, side="left")  # windows ascend: hs too
        if glob:
            first = np.where(glob_e, 0, first)
        first = np.where(e_valid, first, len(windows))
        inside = np.cumsum(
            np.bincount(e_row * (len(windows) + 1) + first,
                        minlength=LH * n * (len(windows) + 1)).reshape(LH * n, -1),
            axis=1,
        )  # fmt: skip  # (LH·n, nW + 1): [:, q] gold keys inside B at width q
        for q, w in enumerate(windows):
            idxs = [i for i in sub if pts[i]["window"] == w]
            m, at, bit, tiles = width_draws(ctx, gold, w, glob, k)
            # (k, LH, n): whether step t's draw of each row is a gold key (gathered row by row:
            # a row's draws lie in one row of the graph)
            need = (row_gold - inside[:, q]).reshape(LH, n)  # gold keys outside B per row
            # one compiled pass over the draws: is_gold (k, LH, n) 0 / 1, hits (LH, k) with
            # [:, r − 1] the gold keys among r draws, covered (LH, k + 2) with [:, r] the rows
            # whole with r draws (the step of each row's last missing gold key, as a histogram)
            is_gold, hits, covered = draw_counts(g, at, bit, need.astype(np.int64))
            mhits = draw_mass(ctx, is_gold, at, bit, row_bytes)  # (LH, k) the same, Σ P
            size0, hit0, mass0 = c0["size"][0, q], c0["hit"][0, q], c0["mass"][0, q]  # (LH,)
            for i in idxs:
                r = min(pts[i]["random_keys"], n)
                c = {
                    "size": size0 + int(np.minimum(m, r).sum()),
                    "hit": hit0 + (hits[:, r - 1] if r else 0),
                    "covered": covered[:, r],
                    "mass": mass0 + (mhits[:, r - 1] if r else 0.0),
                    **{f"empty_{b}": free - (filled[:, r - 1] if r else 0)
                       for b, (free, filled) in tiles.items()},
                }  # fmt: skip
                for metric, v in to_metrics(gold, c).items():
                    res[metric][i] = v
    return res


def draw_mass(
    ctx: PredictContext, is_gold: np.ndarray, at: np.ndarray, bit: np.ndarray, row_bytes: int
) -> np.ndarray:
    """(L·H, k): Σ P of the gold keys among the first r draws of every row, r = 1..k (mass
    recall's share of the random keys). Only the draws that hit a gold key (about 2 %) are
    looked up (``PredictContext.prob_values``); a draw's key is its byte in the row bitsets
    times 8 plus its bit."""
    k, LH, n = is_gold.shape
    # 0 / 1 bytes viewed as bool: numpy's nonzero of a bool array is ~5x faster than of uint8
    t, a, i = np.unravel_index(np.flatnonzero(is_gold.view(bool)), is_gold.shape)
    col = (at[t, a, i].astype(np.int64) - (a * n + i) * row_bytes) * 8 + bit[t, a, i]
    p = ctx.prob_values(a, i, col).astype(np.float64)
    per_step = np.bincount(t * LH + a, weights=p, minlength=k * LH).reshape(k, LH)
    return np.cumsum(per_step, axis=0).T


def width_draws(
    ctx: PredictContext, gold: Gold, w: int, glob: bool, k: int
) -> tuple[np.ndarray, np.ndarray, dict]:
    """The text-independent part of one width: (m (n,) free keys per row, ``at`` (k, L·H, n)
    int32 the byte of each step's draw in the gold graph's row bitsets viewed as bytes (one
    past them where a row has no draw left) and ``bit`` (k, L·H, n) uint8 its bit there,
    :func:`draw_tiles`). It depends only on (n, causality, w, globals, k, the seeds), so the
    widths of the last length are kept per process (about 3.7 MB a width at
    n = 512 with 72 heads): a corpus sweep that takes its inputs by length
    (``pareto.sweep_corpus``) draws once per length rather than once per input."""
    n = ctx.n
    seeds = ctx.seeds().reshape(-1)
    key = (n, ctx.causal, w, glob, k, tuple(int(x) for x in seeds.tolist()))
    got = _DRAWS.get(key)
    if got is None:
        m, draws, tiles = _seed_draws(ctx, gold, w, glob, k, seeds)
        S = draws.shape[0]
        row_bytes = 8 * words(n)
        dtype = np.int32 if S * n * row_bytes < 1 << 31 else np.int64
        d = np.ascontiguousarray(draws.transpose(2, 0, 1))  # (k, S, n) step-major
        bit = (d & 7).astype(np.uint8)  # −1 & 7: any bit of the zero byte
        at = (d >> 3).astype(dtype, copy=False)
        at += (np.arange(S * n, dtype=dtype) * dtype(row_bytes)).reshape(S, n)  # its row
        np.copyto(at, dtype(S * n * row_bytes), where=d < 0)  # no draw: the zero byte
        got = (m, at, bit, tiles)  # at, bit step-major: (k, L·H, n)
        # list(): a snapshot (C-level, atomic under the GIL); another thread may add to it
        if len(_DRAWS) >= _DRAWS_MAX or any(kk[0] != n for kk in list(_DRAWS)):
            _DRAWS.clear()  # one length at a time: bounded memory in a long-lived server
        _DRAWS[key] = got
    return got


def _seed_draws(
    ctx: PredictContext, gold: Gold, w: int, glob: bool, k: int, seeds: Tensor
) -> tuple[np.ndarray, np.ndarray, dict]:
    """(m, draws (S, n, k), :func:`draw_tiles`) of :func:`width_draws`. Each distinct seed is
    drawn once (texts stacked by ``PredictContext.stack`` repeat their heads' seeds), and the
    draws of distinct seeds are kept per process for every length, within ``_SEED_BYTES``
    (a server analysing short texts of many lengths draws each length once)."""
    n = ctx.n
    uniq, inv = np.unique(seeds.numpy(), return_inverse=True)
    key = (n, ctx.causal, w, glob, k, tuple(uniq.tolist()))
    got = _SEED_DRAWS.get(key)
    if got is None:
        (a0, la, b0), m, occ = _free_keys(n, ctx.causal, w, glob)
        u = draw_uniforms(torch.from_numpy(uniq), n, k)
        draws = runs_fisher_yates(a0, la, b0, m, draw_positions(u, m, n))
        got = (m, draws, draw_tiles(gold, None, draws, occ))
        size = draws.nbytes
        # list(): a snapshot (C-level, atomic under the GIL); another thread may add to it
        if sum(g[1].nbytes for g in list(_SEED_DRAWS.values())) + size > _SEED_BYTES:
            _SEED_DRAWS.clear()
        if size <= _SEED_BYTES:
            _SEED_DRAWS[key] = got
    m, draws, tiles = got
    if len(inv) == len(uniq) and (inv == np.arange(len(inv))).all():
        return got  # every seed once, in order (a whole run)
    return m, draws[inv], {b: (free, filled[inv]) for b, (free, filled) in tiles.items()}


def _free_keys(n: int, causal: bool, w: int, glob: bool) -> tuple:
    """(the free-column runs (a0, la, b0) of every row, m, B's tile occupancy) of one width:
    the seed-independent part of the draws, made from the band's ends row by row
    (``_method_kernels.band_free_runs``, ``band_base_bits``: O(n) and B's row bitsets, no
    (n, n) mask or candidate table), kept per process for the widths of one length so that
    the heads of a long text, each on a view of its own (one seed each), share it."""
    key = (n, bool(causal), w, bool(glob))
    got = _FREE.get(key)
    if got is None:
        h = w // 2 if w > 0 else -1
        a0, la, b0, m = band_free_runs(n, h, bool(glob), bool(causal))
        occ = tile_occupancy(band_base_bits(n, h, bool(glob), bool(causal))[None], n)
        got = ((a0, la, b0), m, occ)
        if len(_FREE) >= _FREE_MAX or any(kk[0] != n for kk in list(_FREE)):
            _FREE.clear()  # one length at a time (4 · n int64 and the tiles a width)
        _FREE[key] = got
    return got


_FREE_MAX = 64
_FREE: dict[tuple, tuple] = {}

#: (n, causal, w, globals, k, seeds) -> width_draws(), for one length n at a time and at most
#: _DRAWS_MAX widths (one-head views of a context have seeds of their own)
_DRAWS: dict[tuple, tuple] = {}
_DRAWS_MAX = 128
#: (n, causal, w, globals, k, distinct seeds) -> _seed_draws() of those seeds, any lengths,
#: at most _SEED_BYTES of draws
_SEED_DRAWS: dict[tuple, tuple] = {}
_SEED_BYTES = 32 << 20


def draw_uniforms(seeds: Tensor, n: int, k: int) -> np.ndarray:
    """``hash_uniform(seed, BIGBIRD_STREAM, i, t)`` for every seed, row i < n and step t < k:
    (S, n, k) float64. They do not depend on n beyond the rows, so the largest block made so
    far is kept (per process) and sliced."""
    key = tuple(int(s) for s in seeds.tolist())
    got = _UNIFORMS.get(key)
    if got is None or got.shape[1] < n or got.shape[2] < k:
        old = (0, 0, 0) if got is None else got.shape
        rows, steps = max(n, old[1]), max(k, old[2])
        got = hash_uniform_t(
            seeds.view(-1, 1, 1), BIGBIRD_STREAM, torch.arange(rows).view(1, rows, 1),
            torch.arange(steps).view(1, 1, steps),
        ).numpy()  # fmt: skip
        if len(_UNIFORMS) >= 4:
            _UNIFORMS.clear()
        _UNIFORMS[key] = got
    return got[:, :n, :k]


_UNIFORMS: dict[tuple, np.ndarray] = {}


def free_ranks(base: np.ndarray, causal: bool) -> tuple[np.ndarray, np.ndarray]:
    """(cand (n, n) int32, m (n,) int64): row i's free columns ``V ∧ ¬base`` ascending in
    ``cand[i, :m_i]`` (the candidate list of ``patterns._sample_rows``; the rest is filler)."""
    # one compiled pass over the rows (``_method_kernels.free_candidates``)
    return free_candidates(np.ascontiguousarray(base, dtype=bool), bool(causal))


def draw_positions(u: np.ndarray, m: np.ndarray, n: int) -> np.ndarray:
    """The swap positions ``p_t = min(t + ⌊u_t · max(m_i − t, 1)⌋, n − 1)`` of the partial
    Fisher–Yates: u (S, n, k) float64 -> (S, n, k) int64 (as ``baselines.bigbird_draws``)."""
    steps = np.arange(u.shape[-1])
    span = np.maximum(m[:, None] - steps[None, :], 1).astype(np.float64)  # (n, k)
    small = np.int32 if n + u.shape[-1] < 1 << 31 else np.int64  # ⌊u · span⌋ < span <= n
    got = (u * span).astype(small)
    got += steps.astype(small)
    return np.minimum(got, small(n - 1), out=got)


def fisher_yates(cand: np.ndarray, m: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Every row's partial Fisher–Yates draws: cand (n, n) row i's candidate list, m (n,) its
    length (:func:`free_ranks`), p (S, n, k) the swap positions (:func:`draw_positions`) ->
    (S, n, k) int32 column ids in draw order, −1 past a row's supply; equal to
    ``baselines.bigbird_draws`` (tested).

    Step t swaps positions t and p_t ≥ t and draws the value at p_t (a position holds its
    ``cand`` value unless an earlier step wrote to it). One compiled pass, row by row and step
    by step (``_method_kernels.partial_fisher_yates``): O(S·n·k), integers only."""
    S, n, k = p.shape
    if k == 0 or n == 0:
        return np.full((S, n, k), -1, dtype=np.int32)
    return partial_fisher_yates(np.ascontiguousarray(cand, dtype=np.int32), m, p)


def draw_tiles(gold: Gold, base: np.ndarray, draws: np.ndarray, occ: dict | None = None) -> dict:
    """Per tile size B: (empty counted tiles of ``base``, (S, k) cumulative count of those the
    first t + 1 draws fill), for draws (S, n, k) (−1: none) added to ``base`` (n, n).

    The first step that fills each tile of the smallest size is the least step drawing into
    it (``_method_kernels.first_fill``, a running minimum per tile); a larger tile's is the
    least over its sub-tiles."""
    S, n, k = draws.shape
    occ = tile_occupancy(pack(base)[None], n) if occ is None else occ
    b0 = BLOCKS[0]
    T = -(-n // b0)
    grid = first_fill(np.ascontiguousarray(draws, dtype=np.int32), b0, T)  # (S, T, T) int16
    out, prev = {}, b0
    for b in BLOCKS:
        if b != b0:  # pool the previous size's tiles f × f
            f = b // prev
            Tb = -(-n // b)
            pad = np.full((S, Tb * f, Tb * f), k, dtype=np.int16)
            pad[:, : grid.shape[1], : grid.shape[2]] = grid
            grid = pad.reshape(S, Tb, f, Tb, f).min(axis=(2, 4))
        prev = b
        counted, _ = gold.tiles[b]
        free = (counted & ~occ[b][0]).reshape(-1)  # (T²,)
        fb = grid.reshape(S, -1)[:, free]  # (S, F) the step that fills each empty tile (k: none)
        key = (np.arange(S)[:, None] * (k + 1) + fb).ravel()
        hist = np.bincount(key, minlength=S * (k + 1)).reshape(S, k + 1)
        out[b] = (int(free.sum()), np.cumsum(hist, axis=1)[:, :k])
    return out
