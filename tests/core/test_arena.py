"""The arena methods (definitions §8, docs/methods.md) against literal, slow references written here
from the definitions: plain loops over queries and keys, numbers in float64 unless the definition
fixes another precision (H2O's float32 masses; the float32 rounding of XAttention's and
SpargeAttn's estimates). Then hand cases whose answer is known, the causal guarantee, and the
fast sweep engines against the explicit masks on texts with many ties.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from sparse_core import methods as M
from sparse_core import metrics
from sparse_core import pareto as PA
from sparse_core.bitsets import METRICS, Gold
from sparse_core.methods import selection as S
from sparse_core.methods.selection import first_k_mask, threshold_bits, threshold_counts

TEXT = (
    "The chef who ran to the store was out of food, so he went back home again. Later that "
    "evening the neighbours came over with bread and soup."
)
ARENA = ["streaming", "topk", "topp", "h2o", "moba", "quest", "xattention", "vertical-slash",
         "sparge"]  # fmt: skip


@pytest.fixture(scope="module", params=[False, True], ids=["bidirectional", "causal"])
def ctx(request, tiny_model):
    return M.PredictContext.from_run(tiny_model.run(TEXT, causal=request.param), None)


def stable_desc(values) -> list[int]:
    """Indices by value descending, ties by index (definitions §8: ties go to the lower index)."""
    return sorted(range(len(values)), key=lambda j: (-values[j], j))


def head_arrays(ctx, layer, head):
    out = ctx.out
    q = out.queries[layer, head].double().numpy()
    k = out.keys[layer, head].double().numpy()
    p = out.probs[layer, head].numpy()  # float32
    return q, k, p


# ----------------------------------------------------------------------------- references


def ref_streaming(n, causal, sinks, recent):
    return [[j < sinks or abs(i - j) <= recent for j in range(n)] for i in range(n)]


def ref_topk(q, k, causal, kk):
    n = len(q)
    out = []
    for i in range(n):
        keys = [j for j in range(n) if not causal or j <= i]
        s = {j: float(q[i] @ k[j]) for j in keys}
        keep = set(sorted(keys, key=lambda j: (-s[j], j))[:kk])
        out.append([j in keep for j in range(n)])
    return out


def ref_topp(p, pmass):
    n = len(p)
    out = []
    for i in range(n):
        keys = sorted((j for j in range(n) if p[i, j] > 0), key=lambda j: (-float(p[i, j]), j))
        keep, mass = set(), 0.0
        for j in keys:
            if keep and not mass < pmass:  # the fewest keys whose mass reaches p
                break
            keep.add(j)
            mass += float(p[i, j])
        out.append([j in keep for j in range(n)])
    return out


def ref_h2o(p, causal, recent, kk):
    n = len(p)
    total = np.zeros(n, dtype=np.float32)  # float32, one query at a time (docs/methods.md)
    for r in range(n):
        total += p[r]
    out = []
    for i in range(n):
        if causal:  # the mass from the queries before i
            acc = np.zeros(n, dtype=np.float32)
            for r in range(i):
                acc += p[r]
        else:  # from every other query: all of them, then i's own row taken out
            acc = total - p[i]
        keys = [j for j in range(n) if not causal or j <= i]
        hh = set(sorted(keys, key=lambda j: (-float(acc[j]), j))[:kk])
        out.append([j in hh or abs(i - j) <= recent for j in range(n)])
    return out


def ref_blocks(n, causal, B, scores_of, kk, own_first):
    """Per query: blocks ranked by score (own block first for MoBA, future blocks last when
    causal), the first k kept."""
    T = -(-n // B)
    out = []
    for i in range(n):
        own = i // B
        s = []
        for b in range(T):
            if own_first and b == own:
                s.append(np.inf)
            elif causal and b > own:
                s.append(-np.inf)
            else:
                s.append(scores_of(i, b))
        keep = set(stable_desc(s)[: min(kk, T)])
        out.append([j // B in keep for j in range(n)])
    return out


def ref_moba(q, k, causal, B, kk):
    n = len(q)
    means = [k[b * B : (b + 1) * B].mean(axis=0) for b in range(-(-n // B))]
    return ref_blocks(n, causal, B, lambda i, b: float(q[i] @ means[b]), kk, True)


def ref_quest(q, k, causal, B, kk):
    n = len(q)
    pages = [k[b * B : (b + 1) * B] for b in range(-(-n // B))]

    def bound(i, b):
        return sum(max(q[i, d] * pages[b][:, d].min(), q[i, d] * pages[b][:, d].max())
                   for d in range(q.shape[1]))  # fmt: skip

    return ref_blocks(n, causal, B, bound, kk, False)


def ref_xattention(q, k, scale, causal, B, S, tau):
    n = len(q)
    G, T, per = -(-n // S), -(-n // B), B // S

    def score(i, j):
        return scale * float(q[i] @ k[j]) if i < n and j < n else 0.0  # zero padding past n

    w = np.zeros((G, G))
    for g in range(G):
        v = []
        for h in range(G):
            if causal and h > g:
                v.append(-np.inf)
                continue
            v.append(sum(score(g * S + S - 1 - r, h * S + r) for r in range(S)) / S)
        v = np.array(v)
        e = np.exp(v - v.max())
        w[g] = e / e.sum()
    E = np.zeros((T, T))
    for g in range(G):
        for h in range(G):
            E[g // per, h // per] += w[g, h]
    E = E.astype(np.float32).astype(np.float64)  # the estimates the page receives
    sel = np.zeros((T, T), dtype=bool)
    for a in range(T):
        valid = [b for b in range(T) if not causal or b <= a]
        forced = [b for b in valid if b == a or (causal and b == 0)]
        total = 0.0
        for b in valid:
            total += E[a, b]
        cum = 0.0
        for b in forced:
            cum += E[a, b]
            sel[a, b] = True
        for b in sorted((b for b in valid if b not in forced), key=lambda b: (-E[a, b], b)):
            if not cum < tau * total:
                break
            sel[a, b] = True
            cum += E[a, b]
    return [[bool(sel[i // B, j // B]) for j in range(n)] for i in range(n)]


def ref_vertical_slash(p, causal, last, nv, ns):
    n = len(p)
    cols = np.zeros(n)
    diag = {}
    for i in range(n - last, n):
        for j in range(n):
            cols[j] += float(p[i, j])
            diag[i - j] = diag.get(i - j, 0.0) + float(p[i, j])
    offs = range(0, n) if causal else range(-(n - 1), n)
    ds = sorted(offs, key=lambda d: (-diag.get(d, 0.0), d))[:ns]
    cs = set(stable_desc(list(cols))[:nv])
    return [[j in cs or (i - j) in ds for j in range(n)] for i in range(n)]


def ref_sparge(q, k, scale, causal, B, theta, tau):
    n = len(q)
    T = -(-n // B)

    def blocks(x):
        return [x[b * B : (b + 1) * B] for b in range(T)]

    def sim(block):
        m = len(block)
        total = 0.0
        for s in block:
            for t in block:
                ns, nt = np.linalg.norm(s), np.linalg.norm(t)
                total += 0.0 if ns == 0 or nt == 0 else float(s @ t) / (ns * nt)
        return total / (m * m)

    qb, kb = blocks(q), blocks(k)
    qs = [sim(b) >= theta for b in qb]
    ks = [sim(b) >= theta for b in kb]
    sel = np.zeros((T, T), dtype=bool)
    for a in range(T):
        valid = [b for b in range(T) if not causal or b <= a]
        z = {b: scale * float(qb[a].mean(axis=0) @ kb[b].mean(axis=0)) for b in valid}
        zmax = max(z.values())
        u = {b: float(np.float32(np.exp(z[b] - zmax))) for b in valid}
        for b in range(T):
            if not ks[b] or not qs[a]:
                sel[a, b] = True
        if not qs[a]:
            continue
        elig = [b for b in valid if ks[b]]
        total = 0.0
        for b in elig:
            total += u[b]
        cum = 0.0
        for t, b in enumerate(sorted(elig, key=lambda b: (-u[b], b))):
            if t and not cum < tau * total:
                break
            sel[a, b] = True
            cum += u[b]
    return [[bool(sel[i // B, j // B]) for j in range(n)] for i in range(n)]


def reference(ctx, name, p, layer, head):
    q, k, pr = head_arrays(ctx, layer, head)
    n, causal, scale = ctx.n, ctx.causal, ctx.head_scale(layer)
    if name == "streaming":
        return ref_streaming(n, causal, p["sinks"], p["recent"])
    if name == "topk":
        return ref_topk(q, k, causal, p["k"])
    if name == "topp":
        return ref_topp(pr, p["p"])
    if name == "h2o":
        return ref_h2o(pr, causal, p["recent"], p["k"])
    if name == "moba":
        return ref_moba(q, k, causal, p["block"], p["topk"])
    if name == "quest":
        return ref_quest(q, k, causal, p["page"], p["topk"])
    if name == "xattention":
        return ref_xattention(q, k, scale, causal, p["block"], p["stride"], p["tau"])
    if name == "vertical-slash":
        return ref_vertical_slash(pr, causal, p["last"], p["verticals"], p["slashes"])
    return ref_sparge(q, k, scale, causal, p["block"], p["theta"], p["tau"])


SETTINGS = {
    "streaming": [{"sinks": 0, "recent": 0}, {"sinks": 4, "recent": 3}, {"sinks": 1, "recent": 9}],
    "topk": [{"k": 1}, {"k": 3}, {"k": 9}],
    "topp": [{"p": 0.3}, {"p": 0.8}, {"p": 1.0}],
    "h2o": [{"recent": 0, "k": 2}, {"recent": 2, "k": 5}, {"recent": 1, "k": 0}],
    "moba": [{"block": 16, "topk": 1}, {"block": 16, "topk": 2}, {"block": 32, "topk": 2}],
    "quest": [{"page": 16, "topk": 1}, {"page": 16, "topk": 2}, {"page": 32, "topk": 1}],
    "xattention": [
        {"block": 16, "stride": 4, "tau": 0.5},
        {"block": 16, "stride": 8, "tau": 0.2},
        {"block": 32, "stride": 2, "tau": 0.9},
    ],  # fmt: skip
    "vertical-slash": [
        {"last": 4, "verticals": 3, "slashes": 2},
        {"last": 10, "verticals": 0, "slashes": 5},
        {"last": 1, "verticals": 6, "slashes": 0},
    ],  # fmt: skip
    "sparge": [
        {"block": 16, "theta": 0.3, "tau": 0.5},
        {"block": 16, "theta": 0.0, "tau": 0.9},
        {"block": 32, "theta": 0.6, "tau": 0.3},
    ],  # fmt: skip
}


@pytest.mark.parametrize("name", ARENA)
def test_predict_equals_the_literal_reference(name, ctx):
    """Every arena method's own mask (add-ons off) equals a loop over queries and keys that
    follows definitions §8 / docs/methods.md to the letter, on every head, causal and not."""
    method = M.METHODS[name]
    v = torch.from_numpy(np.tri(ctx.n, dtype=bool) if ctx.causal else np.ones((ctx.n,) * 2, bool))
    for p in SETTINGS[name]:
        pred = method.predict(ctx, **p, window=0, globals=False)
        for layer in range(ctx.layers):
            for head in range(ctx.heads):
                want = torch.tensor(reference(ctx, name, p, layer, head)) & v
                got = pred[layer, head]
                assert torch.equal(got, want), (name, p, layer, head, (got ^ want).nonzero()[:5])


@pytest.mark.real_model
@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
def test_predict_equals_the_reference_on_the_real_model(real_model, causal):
    ctx = M.PredictContext.from_run(real_model.run(TEXT, causal=causal), None)
    v = torch.from_numpy(np.tri(ctx.n, dtype=bool) if ctx.causal else np.ones((ctx.n,) * 2, bool))
    for name in ARENA:
        p = SETTINGS[name][1]
        pred = M.METHODS[name].predict(ctx, **p)
        for layer, head in ((0, 3), (2, 7), (5, 11)):
            want = torch.tensor(reference(ctx, name, p, layer, head)) & v
            assert torch.equal(pred[layer, head], want), (name, layer, head)


# ----------------------------------------------------------------------------- hand cases


def crafted(tiny_model, n_tokens_text, q, k, causal=False):
    """A context whose head (0, 0) has the given queries and keys (the rest as run)."""
    out = tiny_model.run(n_tokens_text, causal=causal)
    qs, ks = out.queries.clone(), out.keys.clone()
    qs[0, 0], ks[0, 0] = (
        torch.as_tensor(q, dtype=torch.float32),
        torch.as_tensor(k, dtype=torch.float32),
    )
    return M.PredictContext.from_run(dataclasses.replace(out, queries=qs, keys=ks), None)


def test_moba_picks_the_block_its_query_points_at(tiny_model):
    """Three 16-token blocks: block 0's keys point along e0, block 2's along e1. A query in
    block 1 pointing along e1 keeps its own block and block 2 (top-2), never block 0; one
    pointing along e0 keeps block 0."""
    text = " ".join(["word"] * 60)
    out = tiny_model.run(text)
    n, d = out.n, out.queries.shape[-1]
    assert n >= 48
    k = np.zeros((n, d))
    k[:16, 0] = 1.0
    k[32:48, 1] = 1.0
    q = np.zeros((n, d))
    q[20, 1] = 1.0
    q[21, 0] = 1.0
    c = crafted(tiny_model, text, q, k)
    m = M.METHODS["moba"].predict(c, block=16, topk=2)[0, 0]
    blocks = lambda row: sorted({j // 16 for j in row.nonzero().flatten().tolist()})  # noqa: E731
    assert blocks(m[20]) == [1, 2]
    assert blocks(m[21]) == [0, 1]
    # top-1: only its own block, whatever it points at
    assert blocks(M.METHODS["moba"].predict(c, block=16, topk=1)[0, 0][20]) == [1]


def test_quest_bounds_take_the_page_extremes(tiny_model):
    """q = (1, −1): a page with k_0 up to 5 beats one whose k_1 goes down to −3 (bound 5 vs 3)."""
    text = " ".join(["word"] * 40)
    out = tiny_model.run(text)
    n, d = out.n, out.queries.shape[-1]
    k = np.zeros((n, d))
    k[3, 0] = 5.0  # page 0
    k[20, 1] = -3.0  # page 1
    q = np.zeros((n, d))
    q[:, 0], q[:, 1] = 1.0, -1.0
    c = crafted(tiny_model, text, q, k)
    m = M.METHODS["quest"].predict(c, page=16, topk=1)[0, 0]
    assert m[:, :16].all() and not m[:, 16:].any()
    m2 = M.METHODS["quest"].predict(c, page=16, topk=2)[0, 0]
    assert m2[:, :32].all()


def test_streaming_by_hand(tiny_model):
    out = tiny_model.run("a b c d", causal=True)  # n = 6 with [CLS] and [SEP]
    c = M.PredictContext.from_run(out, None)
    got = M.METHODS["streaming"].predict(c, sinks=1, recent=1)[0, 0].int().tolist()
    assert got == [[1, 0, 0, 0, 0, 0],
                   [1, 1, 0, 0, 0, 0],
                   [1, 1, 1, 0, 0, 0],
                   [1, 0, 1, 1, 0, 0],
                   [1, 0, 0, 1, 1, 0],
                   [1, 0, 0, 0, 1, 1]]  # fmt: skip


def test_topp_by_hand():
    """Row 0: P = (0.5, 0.3, 0.2): p = 0.6 keeps two keys, 0.5 one (its mass reaches 0.5),
    0.81 all three; ties in P go to the lower key."""
    a = np.zeros(5, dtype=np.int64)
    i = np.array([0, 0, 0, 1, 1])
    j = np.array([0, 1, 2, 0, 1])
    p = np.array([0.2, 0.5, 0.3, 0.5, 0.5], dtype=np.float32)
    from sparse_core.methods.oracle import topp_keep

    k06, k05, k081 = topp_keep(a, i, j, p, [0.6, 0.5, 0.81], n=3)
    assert k06.tolist() == [False, True, True, True, True]
    assert k05.tolist() == [False, True, False, True, False]  # row 1: the tie keeps key 0
    assert k081.tolist() == [True, True, True, True, True]


def _numpy_topp_keep(a, i, j, p, ps, n):
    """The vectorised ``topp_keep`` that ``_method_kernels.topp_rows`` replaced (a stable sort
    of (row, P descending) keys, then the masses added rank by rank)."""
    row = a * n + i
    pp = np.asarray(p, dtype=np.float64)
    desc = np.uint64(0xFFFFFFFF) - pp.astype(np.float32).view(np.uint32).astype(np.uint64)
    order = np.argsort((row.astype(np.uint64) << np.uint64(32)) | desc, kind="stable")
    srow, sp = row[order], pp[order]
    starts = np.flatnonzero(np.diff(srow, prepend=-1))
    rank = np.arange(len(srow)) - np.repeat(starts, np.diff(np.append(starts, len(srow))))
    before = np.zeros(len(sp))
    cum = sp.copy()
    by_rank = np.argsort(rank, kind="stable")
    bounds = np.cumsum(np.bincount(rank)) if len(sp) else []
    for t in range(1, len(bounds)):
        at = by_rank[bounds[t - 1] : bounds[t]]
        before[at] = cum[at - 1]
        cum[at] = before[at] + sp[at]
    inv = np.empty_like(order)
    inv[order] = np.arange(len(order))
    return [((rank == 0) | (before < float(q)))[inv] for q in ps]


@pytest.mark.parametrize("seed", range(6))
def test_compiled_topp_equals_the_numpy_passes(seed):
    """``topp_keep`` (one compiled pass over the rows) equals the numpy code it replaced, bit for
    bit: rows of 1 to 120 edges (the insertion sort and the merge sort), many P tied (a few
    distinct float32 values), tiny and large masses, p from 0 to past 1."""
    from sparse_core.methods.oracle import topp_keep

    rng = np.random.default_rng(seed)
    n, A = 130, 3
    a, i, j = [], [], []
    for h in range(A):
        for r in range(n):
            m = int(rng.choice([0, 1, 2, 5, 31, 32, 33, 120]))
            cols = np.sort(rng.choice(n, m, replace=False))
            a += [h] * m
            i += [r] * m
            j += cols.tolist()
    a, i, j = (np.array(x, dtype=np.int64) for x in (a, i, j))
    levels = np.array([1e-7, 0.003, 0.01, 0.25, 0.5], dtype=np.float32)
    p = np.where(rng.random(a.size) < 0.5, rng.choice(levels, a.size),
                 rng.random(a.size).astype(np.float32) / 8)  # fmt: skip
    ps = [0.0, 0.05, 0.5, 0.8, 0.9, 0.95, 0.99, 1.0, 2.0]
    got = topp_keep(a, i, j, p.astype(np.float32), ps, n)
    want = _numpy_topp_keep(a, i, j, p.astype(np.float32), ps, n)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype == bool and np.array_equal(g, w)
    assert topp_keep(a[:0], i[:0], j[:0], p[:0], ps, n)[0].shape == (0,)


@pytest.mark.parametrize("causal", [False, True])
def test_column_mass_adds_the_rows_in_order(tiny_model, causal):
    """``PredictContext.column_mass`` (one compiled loop) is numpy's row-by-row float32 ``+=``
    bit for bit: C_j and the prefix masses A_ij, every head of a layer and one head."""
    out = tiny_model.run("The cat sat on the mat while the dog slept by the door.", causal=causal)
    ctx = M.PredictContext.from_run(out)
    for layer, head in [(0, None), (ctx.layers - 1, None), (1, 2)]:
        p = ctx.head_probs(layer, head)
        rows = np.moveaxis(p, -2, 0)
        acc = np.zeros(rows.shape[1:], dtype=np.float32)
        pre = np.zeros(rows.shape, dtype=np.float32)
        for i in range(rows.shape[0]):
            if i:
                np.add(pre[i - 1], rows[i - 1], out=pre[i])
            acc += rows[i]
        got, got_pre = ctx.column_mass(layer, head), ctx.column_mass(layer, head, prefix=True)
        assert got.dtype == got_pre.dtype == np.float32
        assert np.array_equal(got, acc)
        assert np.array_equal(got_pre, np.moveaxis(pre, 0, -2))


@pytest.mark.parametrize("causal", [False, True])
def test_block_gold_equals_the_bincounts(tiny_model, causal):
    """``bitsets.block_gold`` (one compiled pass over the edges) equals the ``bincount``s it
    replaced bit for bit: counts (their dtype), float64 masses in edge order, gold keys per row;
    per row and per query block, every block size, with P and without."""
    from sparse_core.bitsets import block_gold

    text = "The cat sat on the mat while the dog slept by the door of the old house."
    out = tiny_model.run(text * 3, causal=causal)
    ctx = M.PredictContext.from_run(out)
    for with_p in (True, False):
        gold = Gold.of(ctx)
        if not with_p:
            gold.e_p = None
        LH, n = gold.L * gold.H, gold.n
        for block in (16, 32, 64, 5):
            for rows in (True, False):
                T = -(-n // block)
                R = n if rows else T
                a = gold.e_i if rows else gold.e_i // block
                at = (gold.e_lh * R + a) * T + gold.e_j // block
                cnt = np.bincount(at, minlength=LH * R * T).reshape(LH, R, T).astype(np.uint8)
                got = block_gold(gold, block, rows)
                assert got["count"].dtype == np.uint8 and np.array_equal(got["count"], cnt)
                if with_p:
                    mass = np.bincount(at, weights=gold.e_p, minlength=LH * R * T)
                    assert np.array_equal(got["mass"], mass.reshape(LH, R, T))
                else:
                    assert got["mass"] is None
                per_row = np.bincount(gold.e_lh * n + gold.e_i, minlength=LH * n)
                assert np.array_equal(got["per_row"], per_row.reshape(LH, n))


@pytest.mark.parametrize(
    ("shape", "tile"), [((3, 37, 5), 16), ((2, 2, 48, 3), 16), ((16, 7), 16), ((4, 33, 9), 5)]
)
def test_row_tiles_equal_the_padded_any(shape, tile):
    """``bitsets.row_tiles`` (one compiled pass) equals the padded reshape and ``any`` it
    replaced: every group of ``tile`` rows OR'd, the last group ragged, any leading axes."""
    from sparse_core.bitsets import row_tiles

    rng = np.random.default_rng(sum(shape) + tile)
    rows = rng.random(shape) < 0.1
    n = shape[-2]
    T = -(-n // tile)
    pad = [(0, 0)] * (rows.ndim - 2) + [(0, T * tile - n), (0, 0)]
    want = np.pad(rows, pad).reshape(*shape[:-2], T, tile, shape[-1]).any(axis=-2)
    got = row_tiles(rows, n, tile)
    assert got.dtype == bool and got.shape == want.shape and np.array_equal(got, want)
    assert np.array_equal(row_tiles(rows[..., ::2], n, tile), want[..., ::2])  # a strided view


def test_ties_go_to_the_lower_index():
    v = np.array([[1.0, 3.0, 3.0, 3.0, 0.0]], dtype=np.float32)
    assert first_k_mask(v, 2).tolist() == [[False, True, True, False, False]]
    bits = next(threshold_bits(v, [2]))
    assert bits[0, 0] == 0b00110


# ----------------------------------------------------------------------------- guarantees


@pytest.mark.parametrize("name", ARENA)
def test_causal_masks_never_reach_forward(name, tiny_model):
    """Causal: no predicted pair j > i, whatever the parameters (every grid point, and the
    add-ons on), and the sweep's figures equal the explicit masks'."""
    c = M.PredictContext.from_run(tiny_model.run(TEXT, causal=True), None)
    m = M.METHODS[name]
    pts = [*m.grid(c.n), {**m.defaults(c.n), "window": 5, "globals": True}]
    upper = torch.ones(c.n, c.n, dtype=torch.bool).triu(1)
    for p in pts:
        pred = m.predict(c, **p)
        assert not (pred & upper).any(), (name, p)


def tie_context(tiny_model, causal):
    """A text of one repeated word: many equal scores, masses and estimates."""
    out = tiny_model.run(" ".join(["the"] * 70), causal=causal)
    q = out.queries.clone()
    q[:, :, ::3] = q[:, :, :1]  # rows with equal queries: equal score rows
    k = out.keys.clone()
    k[:, :, 1::2] = k[:, :, 1:2]  # many equal keys: ties within a row
    return M.PredictContext.from_run(dataclasses.replace(out, queries=q, keys=k), None)


@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
@pytest.mark.parametrize("name", ARENA)
def test_sweep_equals_explicit_masks_with_ties(name, causal, tiny_model):
    """The fast engines (thresholds, block choices, gold edges) give exactly the metrics of the
    explicit masks even where many keys tie."""
    c = tie_context(tiny_model, causal)
    m = M.METHODS[name]
    pts = [*m.grid(c.n), *({**p, "window": 0, "globals": False} for p in SETTINGS[name])]
    fast = PA.sweep_points(c, m, pts)
    for k, p in enumerate(pts):
        slow = M.evaluate(c, m, p)
        for metric in METRICS:
            assert torch.allclose(fast[metric][k], slow[metric], rtol=0, atol=1e-12), (p, metric)


def test_threshold_counts_with_bands_and_ties():
    """selection.threshold_counts (top-k by threshold ∪ band) equals counting explicit masks."""
    rng = np.random.default_rng(3)
    L, H, n = 2, 3, 37
    vals = rng.integers(0, 4, size=(L, H, n, n)).astype(np.float32)  # heavy ties
    graph = torch.from_numpy(rng.random((L, H, n, n)) < 0.2) | torch.eye(n, dtype=torch.bool)
    probs = graph.float() * torch.from_numpy(rng.random((L, H, n, n)).astype(np.float32))
    for causal in (False, True):
        v = np.where(np.tri(n, dtype=bool), vals, -np.inf) if causal else vals
        g = graph & torch.from_numpy(np.tri(n, dtype=bool)) if causal else graph
        gold = Gold(g, causal, probs * g)
        pairs = [(0, -1), (1, 2), (5, -1), (5, 0), (9, 3), (n, 1)]
        got = threshold_counts(gold, lambda li, v=v: v[li].astype(np.float32), pairs)
        from sparse_core.bitsets import to_metrics

        mets = to_metrics(gold, got)
        for q, (k, r) in enumerate(pairs):
            mask = first_k_mask(v.reshape(-1, n), k).view(L, H, n, n)
            if r >= 0:
                idx = torch.arange(n)
                mask = mask | ((idx[:, None] - idx[None, :]).abs() <= r)
            mask = mask & (torch.from_numpy(np.tri(n, dtype=bool)) if causal else True)
            want = {
                "recall": metrics.recall(mask, g),
                "sparsity": metrics.sparsity(mask, causal=causal),
                "exact": metrics.exact(mask, g),
                "precision": metrics.precision(mask, g, causal=causal),
                "mass_recall": metrics.mass_recall(mask, probs * g),
                **{
                    f"block_{b}": x
                    for b, x in metrics.block_sparsities(mask, causal=causal).items()
                },
            }
            for key, w in want.items():
                assert np.allclose(mets[key][q], w.reshape(-1).numpy(), atol=1e-12), (k, r, key)


@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
def test_prefix_block_counts_equal_the_block_choices(causal):
    """selection.prefix_row_block_counts (nested top-k prefixes of one block order, counted
    rank by rank) gives bit for bit the counts of row_block_counts on the explicit choices,
    for ks in any order (a k below the last one starts again) and a ragged last block."""
    rng = np.random.default_rng(5)
    L, H, n = 2, 3, 83
    graph = torch.from_numpy(rng.random((L, H, n, n)) < 0.15) | torch.eye(n, dtype=torch.bool)
    if causal:
        graph &= torch.from_numpy(np.tri(n, dtype=bool))
    probs = graph.float() * torch.from_numpy(rng.random((L, H, n, n)).astype(np.float32))
    gold = Gold(graph, causal, probs)
    for block in (16, 32, 64):
        T = S.block_count(n, block)
        first = np.argsort(rng.random((L * H, n, T)), axis=-1)[..., : min(T, 4)]  # distinct
        ks = [k for k in (1, 2, 4, 3, 1, 2) if k <= first.shape[-1]]
        sels = []
        for k in ks:
            sel = np.zeros((L * H, n, T), dtype=bool)
            np.put_along_axis(sel, first[..., :k], True, axis=-1)
            sels.append(sel)
        want = S.row_block_counts(gold, sels, block)
        got = S.prefix_row_block_counts(gold, first, ks, block)
        assert set(got) == set(want)
        for key, w in want.items():
            assert got[key].dtype == w.dtype, (block, key)
            assert np.array_equal(got[key], w, equal_nan=True), (block, key)


# ----------------------------------------------------------------------------- mass recall


def test_mass_recall_by_hand():
    """P rows (0.5, 0.5, 0), (0.2, 0.3, 0.5), (0, 0, 1); M keeps (0, 0), (1, 1), (1, 2):
    kept mass 0.5 + 0.8 + 0 over 3 queries = 1.3 / 3, in metrics and in the bitset engine."""
    P = torch.tensor([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5], [0.0, 0.0, 1.0]], dtype=torch.float64)
    M_ = torch.tensor([[1, 0, 0], [0, 1, 1], [0, 1, 0]], dtype=torch.bool)
    assert float(metrics.mass_recall(M_, P)) == pytest.approx(1.3 / 3, abs=1e-12)
    from sparse_core.bitsets import evaluate_bits, pack

    gold = Gold((P > 0)[None, None], False, P[None, None])
    got = evaluate_bits(gold, pack(M_)[None, None], [0, 3])
    # the bitset engine keeps P on the gold edges as float32 (the model's P; sparse_probs), summed
    # in float64: exact to float32's precision
    assert got["mass_recall"][0, 0, 0] == pytest.approx(1.3 / 3, abs=1e-7)
    # window 3 adds |i − j| <= 1: every row's whole support
    assert got["mass_recall"][0, 1, 0] == pytest.approx(1.0, abs=1e-7)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_stable_top_is_the_stable_orders_prefix(seed):
    """stable_top (partition, then sort the candidates) = stable_order's first k, with heavy
    ties (few distinct values), ±inf and −0.0 among the values, k from 1 to the whole row."""
    from sparse_core.methods.selection import stable_order, stable_top

    rng = np.random.default_rng(seed)
    v = rng.integers(0, 5, size=(40, 33)).astype(np.float32)  # many ties
    v[rng.random(v.shape) < 0.2] = -np.inf  # masked keys
    v[0] = -np.inf  # a row of nothing but -inf
    v[1, ::3] = -0.0
    v[2, 5] = np.inf
    full = stable_order(v)
    for k in (1, 2, 5, 17, 32, 33, 40):
        assert np.array_equal(stable_top(v, k), full[:, :k]), k
    w = rng.standard_normal((7, 300)).astype(np.float32)
    assert np.array_equal(stable_top(torch.from_numpy(w), 128), stable_order(w)[:, :128])


@pytest.mark.parametrize("m", [1, 3, 4, 9])
@pytest.mark.parametrize("T", [8, 31])
def test_first_blocks_equal_the_argmax_passes(m, T):
    """``blocks.first_blocks`` (one compiled pass a row) equals the m numpy argmax passes it
    replaced, on ties, −∞ (causal future blocks) and +∞ (MoBA's own block) estimates, the
    least finite double itself, and m > T (every block taken)."""
    from sparse_core.methods.blocks import first_blocks

    rng = np.random.default_rng(m + T)
    for dtype in (np.float32, np.float64):
        v = rng.integers(0, 4, (3, 17, T)).astype(dtype)
        v[:, :, 5:] = np.where(rng.random((3, 17, T - 5)) < 0.5, -np.inf, v[:, :, 5:])
        v[:, ::4, 2] = np.inf
        v[0, 0] = -np.inf  # a row of −∞ only
        if dtype == np.float64:
            v[1, 1, ::3] = np.finfo(np.float64).min  # ties with the −∞ ones
        w = v.astype(np.float64)
        w[w == -np.inf] = np.finfo(np.float64).min
        want = np.empty((3, 17, m), dtype=np.int64)
        for s in range(m):
            idx = w.argmax(axis=-1)[..., None]
            want[..., s : s + 1] = idx
            np.put_along_axis(w, idx, -np.inf, axis=-1)
        got = first_blocks(v, m)
        assert got.dtype == np.int64 and np.array_equal(got, want)


@pytest.mark.parametrize("K", [1, 3, 9, 33])
def test_h2o_top_equals_the_partition(K, tiny_model):
    """``streaming.h2o_top`` (each row's K largest bidirectional H2O masses from one order of
    the column masses) equals numpy's partition and sort of the masses, on the tiny model's
    attention and on masses with heavy ties and rows whose support is most of the row."""
    from sparse_core.methods.streaming import h2o_mass, h2o_top

    ctx = M.PredictContext.from_run(tiny_model.run(TEXT * 2), None)
    cases = []
    for li in range(ctx.layers):
        cases.append((ctx.column_mass(li, None), h2o_mass(ctx, li)))
    rng = np.random.default_rng(K)
    p = (rng.integers(0, 3, (2, 40, 40)) / 4).astype(np.float32)  # ties, zeros
    p[:, :5] = (rng.integers(1, 3, (2, 5, 40)) / 4).astype(np.float32)  # dense rows
    col = np.zeros((2, 40), dtype=np.float32)
    for i in range(40):
        col += p[:, i]
    cases.append((col, col[:, None, :] - p))
    for col, mass in cases:
        m = mass.shape[-1]
        k = min(K, m)
        vals = np.ascontiguousarray(mass.reshape(-1, m))
        want = np.sort(np.partition(vals, m - k, axis=1)[:, m - k :], axis=1)
        got = h2o_top(col, vals, k)
        assert got.dtype == np.float32 and np.array_equal(got, want)
