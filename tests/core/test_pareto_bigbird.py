"""BigBird's sweep engine (sparse_core.methods.bigbird): the batched partial Fisher–Yates equals
``baselines.bigbird_draws``, and the sweep equals explicit masks on texts long enough that the
draws collide, rows run out of free keys and every tile size has many tiles."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sparse_core import baselines, patterns
from sparse_core import bitsets as B
from sparse_core import methods as M
from sparse_core import pareto as PA
from sparse_core.methods import bigbird as BB

SENTENCE = (
    "The river, which had flooded twice that spring, was calm again by the end of May, and "
    "the ferry ran on time for the first time in weeks; nobody in the village believed it."
)
LONG = " ".join([SENTENCE] * 6)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 90), w=st.integers(0, 9), glob=st.booleans(), causal=st.booleans(),
    k=st.integers(0, 90), seed=st.integers(0, 5000),
)  # fmt: skip
def test_fisher_yates_equals_bigbird_draws(n, w, glob, causal, k, seed):
    base = patterns.finish(torch.zeros(n, n, dtype=torch.bool), window=w, globals_=glob,
                           causal=causal)  # fmt: skip
    seeds = torch.tensor([seed, seed + 1, 7 * seed + 3])
    k = min(k, n)
    want = baselines.bigbird_draws(base, causal, seeds, k).numpy()
    cand, m = BB.free_ranks(base.numpy(), causal)
    u = BB.draw_uniforms(seeds, n, k)
    got = BB.fisher_yates(cand, m, BB.draw_positions(u, m, n))
    assert got.shape == want.shape
    assert np.array_equal(got, want)


@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
def test_bigbird_sweep_equals_explicit_masks_on_a_long_text(tiny_model, causal):
    out = tiny_model.run(LONG, causal=causal)
    assert out.n > 150  # several 128-tiles, rows with fewer free keys than draws at wide windows
    ctx = M.PredictContext.from_run(out, None)
    method = M.METHODS["bigbird"]
    pts = [{"random_keys": r, "window": w, "globals": g}
           for r in (0, 1, 5, 20) for w in (0, 4, 75, 251) for g in (False, True)]  # fmt: skip
    fast = PA.sweep_points(ctx, method, pts)
    for k, p in enumerate(pts):
        slow = M.evaluate(ctx, method, p)
        for metric in B.METRICS:
            assert torch.allclose(fast[metric][k], slow[metric], rtol=0, atol=1e-12), (p, metric)


def test_draws_kept_per_length_serve_another_text_of_that_length(tiny_model):
    """The draws of a length are made once and reused for another text of the same length (a
    different gold graph): the figures still equal explicit masks."""
    from sparse_core.testing import tiny_model as make

    other = make(seed=3)
    pts = [{"random_keys": r, "window": w, "globals": True} for r in (2, 9) for w in (0, 5, 41)]
    BB._DRAWS.clear()
    first = M.PredictContext.from_run(tiny_model.run(LONG), None)
    PA.sweep_points(first, "bigbird", pts)
    kept = dict(BB._DRAWS)
    assert kept and {key[0] for key in kept} == {first.n}
    ctx = M.PredictContext.from_run(other.run(LONG), None)
    assert ctx.n == first.n and not torch.equal(ctx.out.graph, first.out.graph)
    fast = PA.sweep_points(ctx, "bigbird", pts)
    assert all(BB._DRAWS[key] is got for key, got in kept.items())  # reused, not redrawn
    for k, p in enumerate(pts):
        slow = M.evaluate(ctx, "bigbird", p)
        for metric in B.METRICS:
            assert torch.allclose(fast[metric][k], slow[metric], rtol=0, atol=1e-12), (p, metric)


def _numpy_draw_counts(g, at, bit, need):
    """The numpy passes ``draw_counts`` replaced (bigbird_metrics before the kernel)."""
    k = at.shape[0]
    LH, n = need.shape
    is_gold = np.take(g, at)
    is_gold >>= bit
    is_gold &= np.uint8(1)
    hits = np.cumsum(is_gold.sum(axis=2), axis=0).T
    small = np.uint8 if k < 255 else np.int64
    cap = np.minimum(need, k + 1).astype(small)
    got = np.zeros((LH, n), dtype=small)
    short = np.zeros((LH, n), dtype=small)
    for t in range(k):
        got += is_gold[t]
        short += got < cap
    last = np.where(need == 0, -1, short.astype(np.int64))
    rkey = (np.arange(LH) * (k + 2))[:, None] + last + 1
    rhist = np.bincount(rkey.ravel(), minlength=LH * (k + 2)).reshape(LH, k + 2)
    return is_gold, hits, np.cumsum(rhist, axis=1)


@pytest.mark.parametrize("k", [1, 5, 20, 260])
def test_draw_counts_equal_the_numpy_passes(k):
    """The compiled pass over a width's draws (``_method_kernels.draw_counts``) gives the numpy
    passes' is_gold, hits and covered exactly, dtypes included (k ≥ 255: the int64 branch)."""
    from sparse_core._method_kernels import draw_counts

    rng = np.random.default_rng(k)
    LH, n = 5, 23
    g = rng.integers(0, 256, 40, dtype=np.uint8)
    g[-1] = 0
    at = rng.integers(0, 40, (k, LH, n)).astype(np.int32)
    bit = rng.integers(0, 8, (k, LH, n)).astype(np.uint8)
    need = rng.integers(0, k + 3, (LH, n)).astype(np.int64)
    need[0, :5] = 0
    for got, want in zip(draw_counts(g, at, bit, need), _numpy_draw_counts(g, at, bit, need),
                         strict=True):  # fmt: skip
        assert got.dtype == want.dtype
        assert np.array_equal(got, want)


def test_draw_counts_on_a_texts_draws(tiny_model):
    """The same on the draws of a real text (the tiny model's gold graph and BigBird's draws)."""
    from sparse_core._method_kernels import draw_counts

    ctx = M.PredictContext.from_run(tiny_model.run(LONG), None)
    gold = B.Gold.of(ctx)
    n, LH = ctx.n, ctx.layers * ctx.heads
    g = np.concatenate([gold.bits().reshape(-1).view(np.uint8), np.zeros(1, dtype=np.uint8)])
    row_gold = np.bincount(gold.e_lh * n + gold.e_i, minlength=LH * n).reshape(LH, n)
    for w, k in ((0, 20), (3, 7)):
        _, at, bit, _ = BB.width_draws(ctx, gold, w, True, k)
        need = np.maximum(row_gold - w, 0).astype(np.int64)
        got = draw_counts(g, at, bit, need)
        want = _numpy_draw_counts(g, at, bit, need)
        for x, y in zip(got, want, strict=True):
            assert x.dtype == y.dtype and np.array_equal(x, y)


PAIRWISE_K = 32


def _numpy_fisher_yates(cand, m, p):
    """The vectorised numpy draws ``fisher_yates`` was before the compiled pass (reference)."""
    S, n, k = p.shape
    R = S * n
    if k == 0 or n == 0:
        return np.full((S, n, k), -1, dtype=np.int32)
    bits = max(1, int(k - 1).bit_length())
    # positions < n and (position, step) keys in the narrowest type that holds them
    small = np.int16 if n << bits < 1 << 15 else np.int32 if n << bits < 1 << 31 else np.int64
    pf = p.reshape(R, k).astype(small, copy=False)
    flat = cand.reshape(-1)
    crow = np.tile((np.arange(n, dtype=np.int32 if n * n < 1 << 31 else np.int64) * n), S)[:, None]
    steps = np.arange(k, dtype=small)
    # V(t): cand[t], or V(s) for the latest s < t with p_s = t (such chains are rare and short)
    V = np.tile(cand[:, :k], (S, 1))  # (R, k)
    r, s = np.divmod(np.flatnonzero((pf < k) & (pf > steps)), k)  # flat: faster than 2-d
    if r.size:
        # per (target t = p_s, row): the latest s; (r, s) come in row, then step order, so a
        # stable sort by (t, row) puts it last among equal keys
        key = pf[r, s].astype(np.int64) * R + r
        order = np.argsort(key, kind="stable")
        key, src = key[order], s[order]
        last = np.append(key[1:] != key[:-1], True)
        key, src = key[last], src[last]
        t, r = np.divmod(key, R)
        cut = np.searchsorted(t, np.arange(k + 1))
        for tt in range(1, k):  # V(src) is final before V(t): src < t
            a, b = cut[tt], cut[tt + 1]
            if b > a:
                V[r[a:b], tt] = V[r[a:b], src[a:b]]
    # the draws: cand[p_t], or V(s) for the latest s < t with p_s = p_t
    D = flat[crow + pf]  # (R, k) int32
    if k <= PAIRWISE_K:  # step t against every earlier step: k − 1 contiguous passes
        pt = np.ascontiguousarray(pf.T)  # (k, R): the positions of one step per row
        for t in range(1, k):
            same = pt[:t] == pt[t]  # (t, R): p_s = p_t
            r = np.flatnonzero(same.any(axis=0))
            if r.size:  # the latest such s: the first True of the steps in reverse
                s = t - 1 - np.argmax(same[::-1, r], axis=0)
                D[r, t] = V[r, s]
    else:  # a sort of each row's (position, step) keys: equal positions side by side
        key = np.sort((pf << small(bits)) | steps, axis=1)  # by position, then step
        pos = key >> small(bits)
        r, c = np.divmod(np.flatnonzero(pos[:, 1:] == pos[:, :-1]), max(k - 1, 1))
        if r.size:
            lo = small((1 << bits) - 1)
            t_now, t_prev = key[r, c + 1] & lo, key[r, c] & lo
            D[r, t_now] = V[r, t_prev]
    short = np.flatnonzero(m < k)  # rows whose supply ends before step k
    if short.size:
        Dv = D.reshape(S, n, k)
        for i in short:
            Dv[:, i, m[i] :] = -1
    return D.reshape(S, n, k)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 70), w=st.integers(0, 9), glob=st.booleans(), causal=st.booleans(),
    k=st.integers(0, 70), seed=st.integers(0, 5000),
)  # fmt: skip
def test_compiled_draws_equal_the_numpy_passes(n, w, glob, causal, k, seed):
    """``fisher_yates`` (the compiled pass) equals the vectorised numpy code it replaced, both
    of its branches (pairwise for k ≤ 32, a sort above), −1 past a row's supply included."""
    base = patterns.finish(torch.zeros(n, n, dtype=torch.bool), window=w, globals_=glob,
                           causal=causal)  # fmt: skip
    cand, m = BB.free_ranks(base.numpy(), causal)
    k = min(k, n)
    p = BB.draw_positions(BB.draw_uniforms(torch.tensor([seed, seed + 9]), n, k), m, n)
    got = BB.fisher_yates(cand, m, p)
    want = _numpy_fisher_yates(cand, m, p)
    assert got.dtype == want.dtype == np.int32
    assert np.array_equal(got, want)


@pytest.mark.parametrize(
    ("n", "k", "b0"),
    [(5, 3, 16), (37, 20, 16), (130, 33, 16), (512, 20, 16), (130, 20, 8), (99, 7, 3), (64, 5, 1)],
)
def test_first_fill_equals_minimum_at(n, k, b0):
    """``_method_kernels.first_fill`` (each b0-tile's first filling step) equals the
    ``np.minimum.at`` scatter ``draw_tiles`` made before, draws of −1 (none) included; tile
    sides that are powers of two (a shift) and others (a division)."""
    from sparse_core._method_kernels import first_fill

    rng = np.random.default_rng(n + k)
    S, T = 3, -(-n // b0)
    draws = rng.integers(-1, n, (S, n, k)).astype(np.int32)
    want = np.full(S * (T * T + 1), k, dtype=np.int16)
    row_t = ((np.arange(n, dtype=np.int32) // b0) * T)[None, :, None]
    tile = np.where(draws >= 0, row_t + draws // b0, T * T)
    tile += (np.arange(S, dtype=np.int32) * (T * T + 1))[:, None, None]
    steps = np.broadcast_to(np.arange(k, dtype=np.int16), draws.shape)
    np.minimum.at(want, tile.reshape(-1), steps.reshape(-1))
    got = first_fill(draws, b0, T)
    assert got.dtype == np.int16
    assert np.array_equal(got, want.reshape(S, -1)[:, :-1].reshape(S, T, T))


def _numpy_free_ranks(base, causal):
    """The vectorised ``free_ranks`` that ``_method_kernels.free_candidates`` replaced."""
    n = base.shape[-1]
    free = ~base
    if causal:
        free &= np.tri(n, dtype=bool)
    m = free.sum(1)
    fi, fj = np.divmod(np.flatnonzero(free), n)
    start = np.concatenate([[0], np.cumsum(m)[:-1]])
    cand = np.full(n * n, n - 1, dtype=np.int32)
    cand[fi * n + np.arange(fi.size) - start[fi]] = fj
    return cand.reshape(n, n), m


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 90), w=st.integers(0, 200), glob=st.booleans(), causal=st.booleans(),
    noise=st.floats(0.0, 0.9), seed=st.integers(0, 5000),
)  # fmt: skip
def test_free_ranks_equal_the_numpy_pass(n, w, glob, causal, noise, seed):
    """``free_ranks`` (one compiled pass over the rows) equals the numpy code it replaced on
    BigBird's bases and on random ones (rows with no free key included)."""
    base = patterns.finish(torch.zeros(n, n, dtype=torch.bool), window=w, globals_=glob,
                           causal=causal).numpy()  # fmt: skip
    base = base | (np.random.default_rng(seed).random((n, n)) < noise)
    cand, m = BB.free_ranks(base, causal)
    want_c, want_m = _numpy_free_ranks(base, causal)
    assert cand.dtype == want_c.dtype == np.int32 and m.dtype == want_m.dtype
    assert np.array_equal(cand, want_c) and np.array_equal(m, want_m)


@pytest.mark.parametrize("causal", [False, True])
def test_gold_bits_equal_the_bincount(tiny_model, causal):
    """``Gold.bits`` (the edges' bits set in one compiled pass) equals the weighted
    ``bincount`` it replaced and ``pack`` of the graph; ``bit_bytes`` ends in one zero byte."""
    from sparse_core.bitsets import Gold, pack

    out = tiny_model.run("The cat sat on the mat while the dog slept by the door.", causal=causal)
    ctx = M.PredictContext.from_run(out)
    gold = Gold.of(ctx)
    LH, n, W = gold.L * gold.H, gold.n, gold.W
    weights = (np.uint8(1) << gold.shift).astype(np.float64)
    byte = np.bincount(gold.flat_pos(LH), weights=weights, minlength=LH * n * 8 * W)
    want = byte.astype(np.uint8).view(np.uint64).reshape(LH, n, W)
    assert np.array_equal(gold.bits(), want)
    assert np.array_equal(gold.bits(), pack(out.graph.reshape(LH, n, n)))
    assert gold.bit_bytes().shape == (LH * n * 8 * W + 1,) and gold.bit_bytes()[-1] == 0


@settings(max_examples=80, deadline=None)
@given(
    n=st.integers(1, 200), w=st.integers(0, 300), glob=st.booleans(), causal=st.booleans(),
    k=st.integers(0, 60), seed=st.integers(0, 5000),
)  # fmt: skip
def test_band_runs_equal_the_explicit_base(n, w, glob, causal, k, seed):
    """BigBird's base without an (n, n) table: the free-column runs list ``free_ranks`` of the
    explicit ``patterns.finish`` mask (m and every candidate), the draws over them equal
    ``fisher_yates`` over its candidate table (and so ``baselines.bigbird_draws``), and the
    base's row bitsets equal ``pack`` of the mask (word-crossing bands, windows wider than n,
    rows with no free key, the global rows)."""
    from sparse_core._method_kernels import band_base_bits, band_free_runs, runs_fisher_yates

    base = patterns.finish(torch.zeros(n, n, dtype=torch.bool), window=w, globals_=glob,
                           causal=causal).numpy()  # fmt: skip
    h = w // 2 if w > 0 else -1
    cand, m = BB.free_ranks(base, causal)
    a0, la, b0, mr = band_free_runs(n, h, glob, causal)
    assert np.array_equal(mr, m)
    for i in range(n):
        runs = np.r_[np.arange(a0[i], a0[i] + la[i]), np.arange(b0[i], b0[i] + m[i] - la[i])]
        assert np.array_equal(runs, cand[i, : m[i]]), i
    assert np.array_equal(band_base_bits(n, h, glob, causal), B.pack(base))
    k = min(k, n)
    p = BB.draw_positions(BB.draw_uniforms(torch.tensor([seed, seed + 3]), n, k), m, n)
    want = BB.fisher_yates(cand, m, p)
    if k:
        assert np.array_equal(runs_fisher_yates(a0, la, b0, mr, p), want)
