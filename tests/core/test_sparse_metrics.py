"""Every method's metrics, the flow and the oracle budgets of a long text read from the sparse
store (definitions §4, §8; docs/architecture.md, "Sparse metrics"): equal to a dense reference
computed here, with nothing densified to (L, H, n, n) (``SparseProbs.dense`` refuses)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sparse_core import budgets as BU
from sparse_core import flow as F
from sparse_core import methods as M
from sparse_core import metrics as MT
from sparse_core import sparse_probs
from sparse_core.testing import tiny_model

#: Above the dense store's usual limit for MiniLM (n ≈ 680).
N_LONG = 720


def long_text(model, n: int, seed: int = 0) -> str:
    """Words drawn from a small vocabulary until the text is n tokens (specials included)."""
    rng = np.random.default_rng(seed)
    vocab = ("the river city north old bank people went over bridge and music was played by "
             "many of them during long winter nights while rain fell on roofs").split()  # fmt: skip
    words = list(rng.choice(vocab, size=n))
    while len(model.encode(" ".join(words)).ids) > n:
        words.pop()
    return " ".join(words)


@pytest.fixture(scope="module")
def runs():
    """The same long text run kept dense (the reference) and recorded sparse (CSR)."""
    model = tiny_model(seed=2, layers=2, heads=2, hidden=32, max_positions=1024)
    text = long_text(model, N_LONG)
    dense = model.run(text, alpha=1.5)
    model.dense_max_bytes = 0
    try:
        sparse = model.run(text, alpha=1.5)
    finally:
        model.dense_max_bytes = None
    assert dense.attn.is_dense and not sparse.attn.is_dense and sparse.n > 680
    return M.PredictContext.from_run(dense), M.PredictContext.from_run(sparse)


@pytest.fixture
def no_densify(monkeypatch):
    """``SparseProbs.dense`` of a CSR store refuses, whatever its size."""
    monkeypatch.setattr(sparse_probs, "DENSIFY_MAX_BYTES", 0)


def _settings(name: str, n: int) -> list[dict]:
    m = M.METHODS[name]
    d = m.defaults(n)
    other = {**d, "window": 5, "globals": True}
    return [d, other]


@pytest.mark.parametrize("name", M.available(None))
def test_head_metrics_from_the_sparse_store_equal_the_dense_reference(runs, no_densify, name):
    dense, sparse = runs
    for p in _settings(name, sparse.n):
        mask = M.METHODS[name].predict(dense, **p)  # (L, H, n, n) explicit, on the dense run
        gold, probs = dense.out.graph, dense.out.probs
        want = {
            "recall": MT.recall(mask, gold),
            "sparsity": MT.sparsity(mask),
            "exact": MT.exact(mask, gold),
            "precision": MT.precision(mask, gold),
            "mass_recall": MT.mass_recall(mask, probs),
            **{f"block_{b}": v for b, v in MT.block_sparsities(mask).items()},
        }
        for layer in range(sparse.layers):
            for head in range(sparse.heads):
                got = M.evaluate_head(sparse, layer, head, name, p)
                for k, v in want.items():
                    assert got[k] == pytest.approx(float(v[layer, head]), rel=0, abs=1e-12), (
                        name, p, k, layer, head,
                    )  # fmt: skip


def test_flow_from_the_sparse_store_equals_the_dense_rollout(runs, no_densify):
    dense, sparse = runs
    n = sparse.n
    for token in (0, n // 2, n - 1):
        for layer in (0, sparse.layers - 1):
            want = F.token_flow(dense.out.probs, token, layer)
            got = F.token_flow_sparse(sparse.out.attn, token, layer)
            assert got.token == token and got.layer == layer
            assert torch.allclose(got.mass, want.mass, rtol=1e-12, atol=1e-15)
            assert got.counts == want.counts
            for a, b in zip(got.levels, want.levels, strict=True):
                assert torch.equal(a, b)


def test_flow_from_the_sparse_store_checks_its_range(runs):
    from sparse_core.errors import SparsescopeError

    _, sparse = runs
    with pytest.raises(SparsescopeError, match="token must be"):
        F.token_flow_sparse(sparse.out.attn, sparse.n, None)
    with pytest.raises(SparsescopeError, match="layer must be"):
        F.token_flow_sparse(sparse.out.attn, 0, sparse.layers)


def _brute_budgets(ctx, layer, head):
    """The definitions' budgets by a row-by-row search over the dense P and the scores."""
    from sparse_core.methods.oracle import topk_scores
    from sparse_core.methods.selection import stable_order

    p = ctx.head_probs(layer, head)
    s = topk_scores(ctx, layer, head)
    out = {"k": {}, "p": {}}
    for lv in BU.LEVELS:
        ks, ps = [], []
        for i in range(ctx.n):
            g = p[i] > 0
            c = int(BU.needed(np.array([g.sum()]), lv)[0])
            order = stable_order(s[i])
            ks.append(int(np.flatnonzero(np.cumsum(g[order]) >= c)[0]) + 1 if c else 0)
            gk = np.flatnonzero(g)
            by_p = gk[np.lexsort((gk, -p[i, gk].astype(np.float64)))]
            acc = 0.0
            for j in by_p[:c]:
                acc += float(p[i, j])
            ps.append(acc)
        out["k"][lv], out["p"][lv] = np.array(ks), np.array(ps)
    return out


def test_budgets_from_the_sparse_store_equal_a_dense_search(runs, no_densify):
    dense, sparse = runs
    for layer, head in ((0, 0), (1, 1)):
        got = BU.head_budgets(sparse.view(layer, head), 0, 0)
        want = _brute_budgets(dense, layer, head)
        same = BU.head_budgets(dense, layer, head)
        for lv in BU.LEVELS:
            assert np.array_equal(got["k"][lv], want["k"][lv]), (layer, head, lv)
            assert np.allclose(got["p"][lv], want["p"][lv], rtol=0, atol=1e-12)
            assert np.array_equal(got["k"][lv], same["k"][lv])
            assert np.array_equal(got["p"][lv], same["p"][lv])


def test_a_long_text_s_sweep_of_every_head_equals_the_dense_one(runs, no_densify):
    """``pareto.sweep_text`` of a run held sparse goes head by head; its points (one head and
    the mean over heads) are the dense run's."""
    from sparse_core.pareto import sweep_text

    dense, sparse = runs
    names = ["window", "strided", "bigbird", "topk", "h2o"]
    got, want = sweep_text(sparse, names), sweep_text(dense, names)
    for scope in ((None, None), (1, 0)):
        a, b = got.points(*scope), want.points(*scope)
        assert a["frontiers"] == b["frontiers"]
        for pa, pb in zip(a["points"], b["points"], strict=True):
            assert pa.keys() == pb.keys()
            for k, v in pa.items():
                if isinstance(v, float):
                    assert v == pytest.approx(pb[k], rel=0, abs=1e-6), (scope, k)
                else:
                    assert v == pb[k], (scope, k)


def test_views_of_a_split_context_share_the_patterns_of_every_head(runs, no_densify, monkeypatch):
    """The head views of a context whose memo writes through to a parent's (the summary's
    layers split over two cores) take the text-independent patterns already made for another
    head: Strided's (n, n) pattern is built once for all heads, and every head's figures
    equal those of a plain context."""
    import dataclasses

    from sparse_core import patterns

    _, sparse = runs
    p = M.METHODS["strided"].defaults(sparse.n)
    want = {(li, h): M.evaluate_head(sparse, li, h, "strided", p)
            for li in range(sparse.layers) for h in range(sparse.heads)}  # fmt: skip
    calls = []
    real = patterns.strided
    monkeypatch.setattr(patterns, "strided", lambda *a, **k: calls.append(1) or real(*a, **k))
    parent: dict = {}
    child = dataclasses.replace(sparse, cache={}, parent_cache=parent)
    for (li, h), w in want.items():
        assert M.evaluate_head(child, li, h, "strided", p) == w
    assert len(calls) == 1
    assert any(k[:2] == ("bits", "strided") for k in parent)
