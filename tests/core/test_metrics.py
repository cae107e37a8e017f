"""Metrics against hand-computed figures and their set definitions (definitions §4)."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sparse_core import metrics as M
from sparse_core import patterns as P

FAST = settings(max_examples=60, deadline=None)


def mask_of(rows: list[set[int]], n: int = 4) -> torch.Tensor:
    m = torch.zeros(n, n, dtype=torch.bool)
    for i, keys in enumerate(rows):
        m[i, sorted(keys)] = True
    return m


# n = 4 by hand: |G| = 7, |M| = 8, |M ∩ G| = 5 (row 0: {0}, row 1: {1}, row 2: {0, 2, 3})
GOLD = mask_of([{0, 1}, {1}, {0, 2, 3}, {3}])
PRED = mask_of([{0}, {0, 1, 2}, {0, 2, 3}, {2}])


def test_hand_case_bidirectional():
    assert M.sparsity(PRED).item() == pytest.approx(1 - 8 / 16)
    assert M.sparsity(GOLD).item() == pytest.approx(1 - 7 / 16)
    assert M.recall(PRED, GOLD).item() == pytest.approx(5 / 7)
    assert M.precision(PRED, GOLD).item() == pytest.approx(5 / 8)
    assert M.exact(PRED, GOLD).item() == pytest.approx(2 / 4)  # rows 1 and 2 fully covered


def test_hand_case_causal():
    # V = {j <= i}: 10 pairs; M ∩ V = {00, 10, 11, 20, 22, 32}: 6 pairs, 4 of them gold
    assert M.sparsity(PRED, causal=True).item() == pytest.approx(1 - 6 / 10)
    assert M.precision(PRED, GOLD, causal=True).item() == pytest.approx(4 / 6)
    valid = P.valid_region(4, True)
    assert M.sparsity(PRED, valid=valid).item() == pytest.approx(0.4)  # valid overrides causal
    assert M.sparsity(torch.zeros(4, 4, dtype=torch.bool), causal=True).item() == 1.0
    assert M.sparsity(valid, causal=True).item() == 0.0


def test_hand_case_exact_valid_rows():
    assert M.exact(PRED, GOLD, torch.tensor([True, True, False, False])).item() == 0.5
    assert M.exact(PRED, GOLD, torch.tensor([False, True, True, False])).item() == 1.0
    assert M.exact(PRED, GOLD, torch.tensor([True, False, False, True])).item() == 0.0


def test_degenerate_ratios():
    empty = torch.zeros(4, 4, dtype=torch.bool)
    assert M.recall(PRED, empty).item() == 1.0  # |G| = 0
    assert M.recall(empty, GOLD).item() == 0.0
    assert M.precision(empty, GOLD).item() == 1.0  # |M ∩ V| = 0
    assert M.precision(PRED, empty).item() == 0.0
    assert M.exact(PRED, GOLD, torch.zeros(4, dtype=torch.bool)).item() == 1.0  # no valid row
    assert M.sparsity(PRED, valid=empty).item() == 1.0  # |V| = 0


def test_metrics_are_batched_over_leading_dims():
    pred = torch.stack([PRED, GOLD, ~PRED]).reshape(3, 1, 4, 4).expand(3, 2, 4, 4)  # (L, H, n, n)
    for f in (M.recall, M.precision, M.exact):
        out = f(pred, GOLD)
        assert out.shape == (3, 2) and out.dtype == torch.float64
    rec = M.recall(pred, GOLD)
    assert rec[:, 0].tolist() == pytest.approx([5 / 7, 1.0, 2 / 7])
    assert M.sparsity(pred).shape == (3, 2)
    assert M.sparsity(PRED).shape == ()


def test_counts_are_exact_in_either_lanes(monkeypatch):
    """Pair counts are summed in int32 lanes while a slice's n² fits them, else in int64: the
    same integers either way (broadcast masks included), and the switch lies where int32 ends."""
    gen = torch.Generator().manual_seed(3)
    masks = [torch.rand(3, 5, 37, 37, generator=gen) < p for p in (0.0, 0.3, 1.0)]
    masks.append(torch.ones(1, 1, dtype=torch.bool).expand(2, 3, 50, 50))
    want = [m.to(torch.int64).sum(dim=(-2, -1)) for m in masks]
    for m, w in zip(masks, want, strict=True):
        got = M._count(m)
        assert got.dtype == torch.int64 and torch.equal(got, w)
    lanes = M._count_dtype
    assert lanes(46340**2) == torch.int32 and 46340**2 < 2**31  # n = 46,340 fits
    assert lanes(46341**2) == torch.int64 and 46341**2 > 2**31 - 1  # n = 46,341 does not
    monkeypatch.setattr(M, "_count_dtype", lambda area: torch.int64)
    assert all(torch.equal(M._count(m), w) for m, w in zip(masks, want, strict=True))


@pytest.mark.parametrize("n", [1, 7, 16, 17, 100, 129, 257])
def test_block_sparsities_are_block_sparsity_at_every_size(n):
    """The one-pass figures of every tile size (tiles of 2B from those of B) are, to the bit,
    what block_sparsity gives size by size: ragged last tiles, causal and a valid region."""
    gen = torch.Generator().manual_seed(n)
    mask = torch.rand(2, 3, n, n, generator=gen) < 0.05
    valid = torch.rand(n, n, generator=gen) < 0.7
    for kw in ({}, {"causal": True}, {"valid": valid}):
        got = M.block_sparsities(mask, **kw)
        assert list(got) == [str(b) for b in M.BLOCKS]
        for b in M.BLOCKS:
            assert torch.equal(got[str(b)], M.block_sparsity(mask, b, **kw)), (n, kw, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_mass_recall_in_place_is_the_where_sum_and_leaves_probs_alone(dtype):
    """Contiguous inputs are summed from a float64 copy zeroed in place: the same sums, to the
    bit, as torch.where's (the path of broadcast or strided inputs), and the caller's P (float64
    too) is not touched."""
    gen = torch.Generator().manual_seed(7)
    probs = torch.softmax(torch.randn(3, 4, 29, 29, generator=gen, dtype=dtype), dim=-1)
    pred = torch.rand(3, 4, 29, 29, generator=gen) < 0.4
    before = probs.clone()
    want = torch.where(pred, probs.to(torch.float64), 0.0).sum(dim=(-2, -1)) / 29
    assert torch.equal(M.mass_recall(pred, probs), want)
    assert torch.equal(probs, before)
    strided = probs.transpose(-2, -1).contiguous().transpose(-2, -1)  # same values, not contiguous
    assert torch.equal(M.mass_recall(pred, strided), want)
    shared = pred[:1, :1]  # broadcast over the leading dims
    assert torch.equal(
        M.mass_recall(shared, probs),
        torch.where(shared, probs.to(torch.float64), 0.0).sum(dim=(-2, -1)) / 29,
    )


def test_masks_must_be_bool():
    with pytest.raises(ValueError, match="pred must be a torch.bool mask"):
        M.recall(PRED.float(), GOLD)
    with pytest.raises(ValueError, match="mask must have shape"):
        M.sparsity(torch.zeros(3, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="valid_rows must be a torch.bool"):
        M.exact(PRED, GOLD, torch.ones(4))


def random_masks(seed: int, n: int, p: float = 0.3, shape=(2, 3)):
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(*shape, n, n, generator=gen) < p


@FAST
@given(seed=st.integers(0, 10_000), n=st.integers(1, 12), causal=st.booleans())
def test_metrics_match_set_definitions(seed, n, causal):
    pred, gold = random_masks(seed, n), random_masks(seed + 1, n, 0.2)
    vs = {(i, j) for i in range(n) for j in range(n) if j <= i or not causal}
    sp, rc = M.sparsity(pred, causal), M.recall(pred, gold)
    pr, ex = M.precision(pred, gold, causal), M.exact(pred, gold)
    for a in range(2):
        for h in range(3):
            ms = {(i, j) for i, j in pred[a, h].nonzero().tolist()}
            gs = {(i, j) for i, j in gold[a, h].nonzero().tolist()}
            assert sp[a, h].item() == pytest.approx(1 - len(ms & vs) / len(vs))
            assert rc[a, h].item() == pytest.approx(len(ms & gs) / len(gs) if gs else 1.0)
            kept = ms & vs
            assert pr[a, h].item() == pytest.approx(len(kept & gs) / len(kept) if kept else 1.0)
            covered = [all((i, j) in ms for (gi, j) in gs if gi == i) for i in range(n)]
            assert ex[a, h].item() == pytest.approx(sum(covered) / n)


@FAST
@given(seed=st.integers(0, 10_000), n=st.integers(1, 12))
def test_supersets_of_gold_have_recall_and_exact_one(seed, n):
    gold = random_masks(seed, n, 0.2)
    pred = gold | random_masks(seed + 7, n, 0.2)
    assert (M.recall(pred, gold) == 1).all() and (M.exact(pred, gold) == 1).all()
    assert (M.sparsity(pred) <= M.sparsity(gold)).all()


# ----------------------------------------------------------------------------- aggregation


def test_aggregate_hand_case():
    texts = [
        torch.tensor([[0.0, 1.0], [1.0, 1.0]]),
        torch.tensor([[1.0, 1.0], [0.0, 0.0]]),
        torch.tensor([[1.0, 0.0], [0.0, 1.0]]),
    ]
    per_head, overall = M.aggregate(texts)
    assert per_head.shape == (2, 2)
    assert per_head.flatten().tolist() == pytest.approx([2 / 3, 2 / 3, 1 / 3, 2 / 3])
    assert overall == pytest.approx(7 / 12)


def test_aggregate_weights_texts_equally_not_by_size():
    # a short text (|G| = 2, recall 1/2) and a long one (|G| = 100, recall 1): mean 0.75, not the
    # pooled 101 / 102
    short_g = torch.zeros(1, 1, 10, 10, dtype=torch.bool)
    short_g[..., 0, :2] = True
    short_p = torch.zeros_like(short_g)
    short_p[..., 0, 0] = True
    long_g = torch.ones(1, 1, 10, 10, dtype=torch.bool)
    per_text = [M.recall(short_p, short_g), M.recall(long_g, long_g)]  # each (1, 1)
    per_head, overall = M.aggregate(per_text)
    assert per_head.item() == pytest.approx(0.75) and overall == pytest.approx(0.75)


def test_aggregate_rejects_bad_input():
    with pytest.raises(ValueError, match="at least one"):
        M.aggregate([])
    with pytest.raises(ValueError, match="same"):
        M.aggregate([torch.zeros(2, 2), torch.zeros(2, 3)])


# ----------------------------------------------------------------------------- Pareto frontier


def test_pareto_hand_case():
    pts = [(0.9, 0.5), (0.95, 0.4), (0.8, 0.9), (0.85, 0.3), (0.9, 0.6), (0.7, 0.9), (0.6, 1.0)]
    # order: 1 (0.95) keep; 4 (0.9, 0.6) keep; 0 (0.9, 0.5) drop; 3 drop; 2 keep;
    # 5 (0.7, 0.9) drop (not strictly higher); 6 keep
    assert M.pareto_front(pts) == [1, 4, 2, 6]


def test_pareto_ties_and_edge_cases():
    assert M.pareto_front([]) == []
    assert M.pareto_front([(0.5, 0.5), (0.5, 0.5)]) == [0]  # duplicate: lowest index
    assert M.pareto_front([(0.5, 0.2), (0.5, 0.7)]) == [1]  # equal sparsity: higher recall
    assert M.pareto_front([(0.9, 0.0), (0.1, 0.0)]) == [0]
    assert M.pareto_front([(0.9, math.nan), (0.5, 0.5), (math.nan, 1.0)]) == [1]


@FAST
@given(st.lists(st.tuples(st.sampled_from([0.1, 0.3, 0.5, 0.9]), st.floats(0, 1)), max_size=12))
def test_pareto_keeps_exactly_the_undominated_points(pts):
    kept = M.pareto_front(pts)

    def dominated(k):  # weakly dominated by another point, or a later duplicate
        sk, rk = pts[k]
        return any(
            s >= sk and r >= rk and ((s, r) != (sk, rk) or p < k)
            for p, (s, r) in enumerate(pts)
            if p != k
        )

    assert sorted(kept) == [k for k in range(len(pts)) if not dominated(k)]
    assert [pts[k][0] for k in kept] == sorted((pts[k][0] for k in kept), reverse=True)
    recalls = [pts[k][1] for k in kept]
    assert all(a < b for a, b in zip(recalls, recalls[1:], strict=False))


# ----------------------------------------------------------------------------- output fidelity


@pytest.fixture(scope="module")
def runs(tiny_model, sentence):
    return {c: tiny_model.run(sentence, alpha=1.5, causal=c) for c in (False, True)}


@pytest.mark.parametrize("causal", [False, True])
def test_fidelity_is_one_when_recall_is_one(tiny_model, runs, causal):
    out = runs[causal]
    assert M.output_fidelity(tiny_model, out, out.graph) == pytest.approx(1.0, abs=1e-5)
    extra = random_masks(3, out.n, 0.3, shape=(out.layers, out.heads))
    assert M.output_fidelity(tiny_model, out, out.graph | extra) == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_fidelity_drops_for_a_window_only_mask(tiny_model, runs, causal):
    out = runs[causal]
    win = P.window(out.n, 3, causal=causal)  # (n, n), broadcast to every head
    assert (M.recall(win, out.graph) < 1).any()
    fid = M.output_fidelity(tiny_model, out, win)
    assert fid < 0.999
    full = win.expand(out.layers, out.heads, out.n, out.n)
    assert M.output_fidelity(tiny_model, out, full) == pytest.approx(fid, abs=1e-6)


def test_fidelity_accepts_text(tiny_model, runs, sentence):
    out = runs[False]
    win = P.window(out.n, 5)
    got = M.output_fidelity(tiny_model, sentence, win, alpha=1.5, causal=False)
    assert got == pytest.approx(M.output_fidelity(tiny_model, out, win), abs=1e-6)


def test_fidelity_rejects_bad_masks(tiny_model, runs):
    out = runs[False]
    with pytest.raises(ValueError, match="broadcastable to"):
        M.output_fidelity(tiny_model, out, torch.ones(5, out.n, out.n, dtype=torch.bool))
    with pytest.raises(ValueError, match="masks must be a torch.bool mask"):
        M.output_fidelity(tiny_model, out, out.probs)


# ----------------------------------------------------------------------------- block sparsity


def brute_block_sparsity(mask, block: int, valid) -> float:
    """The docstring's definition, tile by tile with plain Python loops."""
    n = len(mask)
    counted = empty = 0
    for a in range(0, n, block):
        for b in range(0, n, block):
            rows, cols = range(a, min(a + block, n)), range(b, min(b + block, n))
            cells = [(i, j) for i in rows for j in cols]
            if not any(valid[i][j] for i, j in cells):
                continue
            counted += 1
            empty += not any(mask[i][j] and valid[i][j] for i, j in cells)
    return 1.0 if counted == 0 else empty / counted


def test_block_sparsity_hand_case():
    # n = 5, B = 2: tiles rows/cols {0,1}, {2,3}, {4} (ragged); 9 tiles, 6 of them causal
    m = torch.zeros(5, 5, dtype=torch.bool)
    m[0, 0] = m[4, 4] = True  # two tiles filled
    m[1, 3] = True  # above the diagonal: fills a tile without a causal mask only
    assert M.block_sparsity(m, 2).item() == pytest.approx(6 / 9)
    assert M.block_sparsity(m, 2, causal=True).item() == pytest.approx(4 / 6)
    assert M.block_sparsity(m, 8).item() == 0.0  # one ragged tile, filled
    assert M.block_sparsity(torch.zeros(3, 3, dtype=torch.bool), 2).item() == 1.0
    assert list(M.block_sparsities(m)) == ["16", "32", "64", "128"]
    with pytest.raises(ValueError, match="block must be an integer >= 1"):
        M.block_sparsity(m, 0)


@settings(max_examples=80, deadline=None)
@given(
    n=st.integers(1, 70), block=st.sampled_from([1, 2, 3, 5, 16, 32, 64]),
    seed=st.integers(0, 10**6), density=st.floats(0.0, 0.2), causal=st.booleans(),
    padded=st.booleans(),
)  # fmt: skip
def test_block_sparsity_equals_brute_force(n, block, seed, density, causal, padded):
    g = torch.Generator().manual_seed(seed)
    m = torch.rand(2, n, n, generator=g) < density
    valid = P.valid_region(n, causal)
    if padded:  # a length mask: the last keys and queries are padding
        k = int(torch.randint(0, n, (1,), generator=g))
        valid = valid.clone()
        valid[k:, :] = False
        valid[:, k:] = False
        got = M.block_sparsity(m, block, valid=valid)
    else:
        got = M.block_sparsity(m, block, causal=causal)
    assert got.shape == (2,) and got.dtype == torch.float64
    for t in range(2):
        want = brute_block_sparsity(m[t].tolist(), block, valid.tolist())
        assert got[t].item() == pytest.approx(want, abs=1e-15)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 300), seed=st.integers(0, 10**6), causal=st.booleans())
def test_tile_occupancy_of_bitsets_equals_tiles(n, seed, causal):
    from sparse_core import bitsets as B

    g = torch.Generator().manual_seed(seed)
    m = (torch.rand(3, n, n, generator=g) < 0.002) & P.valid_region(n, causal)
    occ = B.tile_occupancy(B.pack(m), n)
    for b in M.BLOCKS:
        assert (occ[b] == M._tiles(m, b).numpy()).all(), b
        counted, dist = B.tile_geometry(n, b, causal)
        assert (counted == M._tiles(P.valid_region(n, causal), b).numpy()).all()
        d = (torch.arange(n)[:, None] - torch.arange(n)[None, :]).abs()
        for h in (0, 1, b - 1, b, 3 * b + 2):  # tiles the band |i − j| <= h reaches
            band = (d <= h) & P.valid_region(n, causal)
            assert ((dist <= h) & counted == M._tiles(band, b).numpy()).all(), (b, h)
