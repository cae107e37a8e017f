"""The sparse store of P (sparse_core.sparse_probs) and the chunked, sparse-recorded model run."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sparse_core import attention as A
from sparse_core import sparse_probs
from sparse_core.errors import SparsescopeError
from sparse_core.sparse_probs import SparseProbs, dense_fits
from sparse_core.testing import tiny_model

TEXT = "The chef who ran to the store was out of food, so he went back to buy more of it."


def _sparse_run(model, text, **kw):
    model.dense_max_bytes = 0
    try:
        return model.run(text, **kw)
    finally:
        model.dense_max_bytes = None


@pytest.fixture(scope="module")
def probs() -> torch.Tensor:
    g = torch.Generator().manual_seed(3)
    p = torch.rand(2, 3, 9, 9, generator=g)
    p[p < 0.7] = 0  # (L, H, n, n), rows with and without edges
    p[1, 2, 4] = 0
    return p


def test_csr_round_trip_and_accessors(probs):
    s = SparseProbs.csr_from_dense(probs)
    assert not s.is_dense and s.nbytes() > 0
    assert torch.equal(s.layer(1), probs[1])
    for li in range(2):
        for h in range(3):
            assert torch.equal(s.head(li, h), probs[li, h])
            assert torch.equal(s.head_graph(li, h), probs[li, h] > 0)
            assert torch.equal(s.rows(li, h, slice(2, 6)), probs[li, h, 2:6])
    assert torch.equal(s.nnz(), (probs > 0).sum((-1, -2)))
    dense = SparseProbs.from_dense(probs)
    for x, y in zip(s.edges(), dense.edges(), strict=True):
        assert np.array_equal(x, y)
    a, i, j, p = dense.edges()
    assert np.array_equal(s.values_at(a, i, j), p)
    # off the graph: zeros, from both forms
    a0, i0, j0 = np.array([1, 5]), np.array([4, 0]), np.array([0, 8])
    want = probs.reshape(6, 9, 9)[a0, i0, j0].numpy()
    assert np.array_equal(s.values_at(a0, i0, j0), want)
    assert np.array_equal(dense.values_at(a0, i0, j0), want)
    assert torch.equal(s.dense(), probs) and torch.equal(s.dense_graph(), probs > 0)


def test_select_and_cat(probs):
    for s in (SparseProbs.csr_from_dense(probs), SparseProbs.from_dense(probs)):
        one = s.select(1, 2)
        assert (one.L, one.H) == (1, 1) and torch.equal(one.head(0, 0), probs[1, 2])
        both = SparseProbs.cat([s, SparseProbs.csr_from_dense(probs)])
        assert torch.equal(both.dense(), torch.cat([probs, probs]))


def test_host_reads_copy_spans_and_keep_whole_heads(probs):
    """A store kept on its device (a CUDA run's) reads through host copies: rows copy only
    their span, a whole head is copied once and kept; every accessor gives the same numbers
    (on the CPU here the copies are the tensors themselves; tests/core/test_cuda.py runs it on
    a GPU)."""
    import pickle

    s = SparseProbs.csr_from_dense(probs)
    s.host_reads = True
    for lo, hi in ((0, 9), (2, 6), (4, 5), (5, 5), (8, 9)):
        assert torch.equal(s.rows(1, 2, slice(lo, hi)), probs[1, 2, lo:hi])
    assert not s._host  # row reads keep nothing
    assert torch.equal(s.head(0, 1), probs[0, 1]) and set(s._host) == {(0, 1)}
    crow, col, val = s._host[(0, 1)]
    assert int(crow[0]) == 0 and int(crow[-1]) == col.numel() == int((probs[0, 1] > 0).sum())
    for lo, hi in ((0, 9), (3, 7), (6, 6)):  # now from the kept head
        assert torch.equal(s.rows(0, 1, slice(lo, hi)), probs[0, 1, lo:hi])
    assert torch.equal(s.layer(1), probs[1]) and torch.equal(s.nnz(), (probs > 0).sum((-1, -2)))
    for li, h in ((0, 1), (1, 2)):  # a kept head and one read by spans
        for lo, hi in ((0, 9), (2, 6), (5, 5)):
            i, j, p = s.row_edges(li, h, slice(lo, hi))
            want = probs[li, h, lo:hi].nonzero(as_tuple=True)
            assert torch.equal(i, want[0]) and torch.equal(j, want[1])
            assert torch.equal(p, probs[li, h, lo:hi][want])
    one = s.select(0, 1)
    assert one.host_reads and (0, 0) in one._host and torch.equal(one.head(0, 0), probs[0, 1])
    top = s.select_layers(1, 2)
    assert top.host_reads and set(top._host) == {(0, h) for h in range(3)}
    assert torch.equal(top.layer(0), probs[1])
    back = pickle.loads(pickle.dumps(s))
    assert torch.equal(back.dense(), probs)
    assert torch.equal(SparseProbs.cat([s, s]).dense(), torch.cat([probs, probs]))
    assert SparseProbs.cat([s, s]).host_reads
    assert torch.equal(s.dense(), probs)


def test_a_cpu_run_hands_back_a_plain_host_store(tiny_model):
    out = _sparse_run(tiny_model, TEXT, alpha=1.5)
    assert not out.attn.is_dense and not out.attn.host_reads
    assert out.attn.device.type == "cpu"


def test_densify_refused_above_the_limit(probs, monkeypatch):
    monkeypatch.setattr(sparse_probs, "DENSIFY_MAX_BYTES", 100)
    s = SparseProbs.csr_from_dense(probs)
    with pytest.raises(SparsescopeError, match="read it per head"):
        s.dense()
    assert torch.equal(s.head(0, 1), probs[0, 1])  # per head still works


def test_dense_fits():
    assert dense_fits(6, 12, 512) and not dense_fits(6, 12, 4096)
    assert not dense_fits(1, 1, 2, limit=0)


@pytest.mark.parametrize(
    "kw",
    [
        {"alpha": 1.0},
        {"alpha": 1.25},
        {"alpha": 1.5},
        {"alpha": 2.0},
        {"alpha": [1.1, 1.5, 2.0, 1.7]},  # per head
        {"alpha": 1.5, "causal": True},
        {"alpha": 1.5, "hidden": False},
    ],
)
def test_sparse_run_equals_dense_run(tiny_model, kw):
    """The chunked, sparse-recorded run gives the dense run's P, graph, queries, keys and hidden
    states bit for bit (entmax is row by row exact; the chunks' matmuls are the same rows)."""
    dense = tiny_model.run(TEXT, **kw)
    sparse = _sparse_run(tiny_model, TEXT, **kw)
    assert dense.attn.is_dense and not sparse.attn.is_dense
    assert torch.equal(sparse.probs, dense.probs)
    assert torch.equal(sparse.graph, dense.graph)
    for name in ("queries", "keys", "hidden"):
        assert torch.equal(getattr(sparse, name), getattr(dense, name)), name


def test_row_chunks_equal_whole_heads(tiny_model, monkeypatch):
    """Chunks of some query rows of one head (what n = 16,384 takes) give the same numbers
    (from 4 rows on: BLAS takes another kernel for fewer, see ``model.rows_kernel_floor``)."""
    whole = _sparse_run(tiny_model, TEXT, alpha=1.5)
    monkeypatch.setattr(A, "CHUNK_SCORES", 8 * whole.n)  # 8 rows per chunk
    assert A._chunk_shape(4, whole.n, whole.n, A.CHUNK_SCORES) == (1, 8)
    rows = _sparse_run(tiny_model, TEXT, alpha=1.5)
    assert torch.equal(rows.probs, whole.probs) and torch.equal(rows.hidden, whole.hidden)


def test_run_batch_runs_long_texts_alone(monkeypatch):
    """A text whose dense P would not fit is run alone (sparse), the others packed as before."""
    model = tiny_model(seed=1)
    short, long_ = "A short one here.", TEXT + " " + TEXT
    n_long = len(model.encode(long_).ids)
    model.dense_max_bytes = 2 * 4 * (n_long - 1) ** 2 * 4
    outs = model.run_batch([short, long_, short])
    assert not outs[1].attn.is_dense and outs[0].attn.is_dense
    model.dense_max_bytes = None
    for text, out in zip([short, long_, short], outs, strict=True):
        alone = model.run(text)
        assert torch.equal(out.probs, alone.probs)


@pytest.fixture(scope="module")
def both(tiny_model):
    """The same run kept dense and recorded sparse, each as a PredictContext."""
    from sparse_core.methods import PredictContext

    dense = tiny_model.run(TEXT, alpha=1.5)
    sparse = _sparse_run(tiny_model, TEXT, alpha=1.5)
    return PredictContext.from_run(dense), PredictContext.from_run(sparse)


def test_context_accessors_read_the_sparse_store(both):
    d, s = both
    assert not s.out.attn.is_dense
    for li in range(d.layers):
        for h in (None, 0, 3):
            assert np.array_equal(s.head_probs(li, h), d.head_probs(li, h))
            assert np.array_equal(s.head_graph(li, h), d.head_graph(li, h))
            assert np.array_equal(
                s.probs_rows(li, h, slice(2, 9)), d.probs_rows(li, h, slice(2, 9))
            )
            assert np.array_equal(s.column_mass(li, h), d.column_mass(li, h))
    for x, y in zip(s.gold_edges(), d.gold_edges(), strict=True):
        assert np.array_equal(x, y)
    a, i, j, p = d.gold_edges()
    assert np.array_equal(s.prob_values(a, i, j), p)
    assert np.array_equal(s.view(1, 2).head_probs(0, 0), d.head_probs(1, 2))


def test_summary_and_sweep_equal_on_the_sparse_store(both):
    """Every method's figures (the analyze summary and the per-text sweep) are the same whether
    P is held dense or sparse."""
    from sparse_core.methods import PredictContext
    from sparse_core.pareto import summary_tables, sweep_text

    d, s = both
    (gd, td), (gs, ts) = summary_tables([d])[0], summary_tables([s])[0]
    assert np.array_equal(gd, gs)
    for nm in td:
        for key in td[nm]:
            assert torch.equal(torch.as_tensor(td[nm][key]), torch.as_tensor(ts[nm][key])), nm
    # two texts stacked (the batched summary), one dense and one sparse
    both_rows = summary_tables([d, s])
    assert np.array_equal(both_rows[0][0], both_rows[1][0])
    sw_d, sw_s = sweep_text(d), sweep_text(s)
    for nm, vals in sw_d.values.items():
        for metric, v in vals.items():
            assert np.array_equal(v, sw_s.values[nm][metric], equal_nan=True), (nm, metric)
    assert PredictContext.stack([d, d]).out.attn.is_dense


def test_a_cap_below_the_models_positions_says_how_to_raise_it():
    import dataclasses

    from sparse_core.errors import TextTooLongError

    model = tiny_model(seed=2)
    model.config = dataclasses.replace(model.config, max_positions=12)
    with pytest.raises(TextTooLongError, match="at most 12 positions") as err:
        model.encode(TEXT)
    assert "token cap" in str(err.value) and "--max-tokens" in str(err.value)
    assert "512 positions" in str(err.value)


@pytest.mark.parametrize("alpha", [1.1, 1.25, 1.5, 1.75, 2.0])
def test_a_long_run_s_support_is_the_float64_reference_s(alpha):
    """Exactness at n = 4,096: the chunked run's entmax, on rows of 4,096 real-shaped
    attention scores (a MiniLM-like spread, a few peaked keys), keeps exactly the support of the
    float64 reference computed on the same scores."""
    from sparse_core.entmax import entmax
    from sparse_core.testing import entmax_reference

    g = torch.Generator().manual_seed(int(alpha * 100))
    n = 4096
    s = torch.randn(1, 2, 16, n, generator=g) * 2.5  # (1, heads, rows, keys)
    s[..., :4] += 6.0  # a few dominant keys, as [CLS] / [SEP] get
    got = entmax(s, alpha)
    ref = entmax_reference(s.double(), alpha)
    tiny = torch.finfo(torch.float32).tiny  # float32 flushes smaller values (entmax's docstring)
    assert torch.equal(got > 0, ref >= tiny)
    assert torch.allclose(got.double(), ref, atol=5e-6)


def test_a_sparse_run_s_support_is_the_reference_s_on_its_own_scores(tiny_model):
    """The sparse-recorded run's graph is the float64 reference's support of the model's own
    scores, layer by layer (the scores recomputed from the recorded queries and keys)."""
    from sparse_core.testing import entmax_reference

    out = _sparse_run(tiny_model, TEXT + " " + TEXT, alpha=1.5)
    for li in range(out.layers):
        ref = entmax_reference(out.scores(li).double(), 1.5)  # (H, n, n)
        assert torch.equal(out.attn.layer(li) > 0, ref > 0), li
