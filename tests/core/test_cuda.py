"""The CUDA path: copies back to the host, chunk sizes, and a run on a GPU
equal to the same run on the CPU. The GPU tests skip where torch sees no CUDA device (CI); they
ran on an H100 through bench/bench_gpu.py (docs/benchmarks.md, "GPU")."""

from __future__ import annotations

import pytest
import torch

import sparse_core.entmax as E
import sparse_core.model as M
from sparse_core import load_model
from sparse_core.testing import entmax_reference, tiny_model, write_tiny_checkpoint

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")


def test_to_host_keeps_cpu_tensors_and_makes_them_contiguous() -> None:
    a = torch.randn(4, 6)
    b = torch.randn(6, 4).t()  # not contiguous
    out = M._to_host(a, b)
    assert out[0] is a  # a contiguous CPU tensor is not copied
    assert out[1].is_contiguous() and torch.equal(out[1], b)
    assert all(t.device.type == "cpu" for t in out)


def test_cpu_run_output_is_contiguous_and_graph_is_support() -> None:
    out = tiny_model().run("The cat sat on the mat because it was warm.", alpha=1.5)
    for t in (out.probs, out.queries, out.keys, out.hidden, out.graph):
        assert t.device.type == "cpu" and t.is_contiguous()
    assert torch.equal(out.graph, out.probs > 0)


def test_cuda_chunk_is_larger_and_does_not_change_the_result() -> None:
    """The GPU's chunk is one (12, 512, 512) layer; any chunk gives the same bits (on the CPU
    here, which runs the same code)."""
    assert E.CUDA_CHUNK_ELEMENTS >= 12 * 512 * 512 > E.CHUNK_ELEMENTS
    z = torch.randn(96, 512) * 3
    for a in (1.1, 1.5, 2.0):
        small = E._entmax_rows(z, a)
        big = E._entmax_rows(z, a, chunk_elements=E.CUDA_CHUNK_ELEMENTS)
        assert torch.equal(small, big)


@needs_cuda
@pytest.mark.parametrize("alpha", [1.1, 1.25, 1.5, 1.75, 2.0])
def test_cuda_entmax_has_the_reference_support(alpha: float) -> None:
    gen = torch.Generator().manual_seed(int(alpha * 100))
    z = (torch.randn(12, 256, 256, generator=gen) * 4).cuda()
    p = E.entmax(z, alpha)
    ref = entmax_reference(z.double(), alpha)
    diff = (p > 0) != (ref > 0)
    diff &= torch.maximum(p.double(), ref) >= torch.finfo(torch.float32).tiny
    assert int(diff.sum()) == 0
    assert float((p.double() - ref).abs().max()) < 1e-5


@needs_cuda
def test_cuda_run_matches_the_cpu_run_and_lands_in_pinned_memory(monkeypatch, tmp_path) -> None:
    text = "Attention is a graph; entmax makes most of its edges exactly zero."
    path = write_tiny_checkpoint(tmp_path / "tiny", "bert", heads=4, hidden=32)
    cpu = load_model(path, device="cpu")
    gpu = load_model(path, device="cuda")
    a = cpu.run(text, alpha=1.5)
    b = gpu.run(text, alpha=1.5)
    assert b.probs.device.type == "cpu" and b.probs.is_pinned()
    assert torch.equal(b.graph, b.probs > 0)
    assert float((a.probs - b.probs).abs().max()) < 1e-4
    assert int((a.graph != b.graph).sum()) <= 2  # float32 sums differ by a few ulps
    monkeypatch.setattr(M, "PINNED_MAX_BYTES", 0)  # a long text: plain copies, same values
    c = gpu.run(text, alpha=1.5)
    assert not c.probs.is_pinned()
    assert torch.equal(c.probs, b.probs) and torch.equal(c.hidden, b.hidden)


needs_triton = pytest.mark.skipif(
    not (torch.cuda.is_available() and E._triton.available(torch.zeros(1, device="cuda"))),
    reason="no CUDA device or no triton here",
)


@needs_triton
@pytest.mark.parametrize("alpha", [1.03, 1.1, 1.25, 1.5, 1.75, 2.0])
def test_cuda_entmax_runs_the_triton_kernel_with_the_torch_paths_support(
    alpha: float, monkeypatch
) -> None:
    """On CUDA, float32 scores go to the Triton kernel; its support equals the
    float64 reference and the torch path's, its values the reference's to float32 rounding, at
    n = 1,000 (masked tails included) and on 64 rows of n = 4,096."""
    calls = []
    real = E._triton.entmax_rows
    monkeypatch.setattr(E._triton, "entmax_rows", lambda *a: calls.append(1) or real(*a))
    gen = torch.Generator().manual_seed(int(alpha * 1000))
    z = (torch.randn(6, 200, 1000, generator=gen) * 4).cuda()
    z[:, :50, 700:] = float("-inf")
    p = E.entmax(z, alpha)
    assert calls, "the kernel was not used"
    ref = entmax_reference(z.double(), alpha)
    diff = ((p > 0) != (ref > 0)) & (
        torch.maximum(p.double(), ref) >= torch.finfo(torch.float32).tiny
    )
    assert int(diff.sum()) == 0
    assert float((p.double() - ref).abs().max()) < 1e-6
    monkeypatch.setenv("SPARSESCOPE_NO_TRITON", "1")
    n_calls = len(calls)
    pt = E.entmax(z, alpha)
    assert len(calls) == n_calls  # the torch path
    assert torch.equal(pt > 0, p > 0)
    assert float((pt - p).abs().max()) < 2e-6
    monkeypatch.delenv("SPARSESCOPE_NO_TRITON")
    long = (torch.randn(64, 4096, generator=gen) * 5).cuda()
    pl = E.entmax(long, alpha)
    rl = entmax_reference(long.double(), alpha)
    dl = ((pl > 0) != (rl > 0)) & (
        torch.maximum(pl.double(), rl) >= torch.finfo(torch.float32).tiny
    )
    assert int(dl.sum()) == 0 and float((pl.double() - rl).abs().max()) < 1e-6


@needs_triton
def test_cuda_run_with_the_kernel_matches_the_cpu_run(tmp_path) -> None:
    text = "Attention is a graph; entmax makes most of its edges exactly zero."
    path = write_tiny_checkpoint(tmp_path / "tiny", "bert", heads=4, hidden=32)
    a = load_model(path, device="cpu").run(text, alpha=1.25)
    b = load_model(path, device="cuda").run(text, alpha=1.25)
    assert float((a.probs - b.probs).abs().max()) < 1e-4
    assert int((a.graph != b.graph).sum()) <= 2  # float32 score sums differ by a few ulps


@needs_cuda
def test_a_gpu_run_keeps_sparse_p_on_the_device_and_every_consumer_reads_it(tmp_path) -> None:
    """A long (sparse-recorded) run on CUDA keeps its CSR store on the GPU:
    the accessors hand back host tensors, and every figure of the analysis (the summary tables
    and the per-text sweep of every method) equals the same run's store copied to the host."""
    import dataclasses

    import numpy as np

    from sparse_core.methods import PredictContext
    from sparse_core.pareto import summary_tables, sweep_text

    text = "Attention is a graph; entmax makes most of its edges exactly zero. " * 3
    path = write_tiny_checkpoint(tmp_path / "tiny", "bert", heads=4, hidden=32)
    gpu = load_model(path, device="cuda")
    gpu.dense_max_bytes = 0  # record sparse, as a long text is
    out = gpu.run(text, alpha=1.5)
    st = out.attn
    assert not st.is_dense and st.host_reads and st.device.type == "cuda"
    host = dataclasses.replace(out, attn=st.to("cpu"))
    assert host.attn.device.type == "cpu" and not host.attn.host_reads
    h = st.head(st.L - 1, 1)
    assert h.device.type == "cpu" and torch.equal(h, host.attn.head(st.L - 1, 1))
    r = st.rows(0, 3, slice(5, 17))
    assert r.device.type == "cpu" and torch.equal(r, host.attn.rows(0, 3, slice(5, 17)))
    assert st.nnz().device.type == "cpu" and torch.equal(st.nnz(), host.attn.nnz())
    rows = slice(3, 40)  # a tile's rows
    for got, want in zip(st.row_edges(0, 2, rows), host.attn.row_edges(0, 2, rows), strict=True):
        assert got.device.type == "cpu" and torch.equal(got, want)
    for x, y in zip(st.edges(), host.attn.edges(), strict=True):
        assert np.array_equal(x, y)
    d, s = PredictContext.from_run(host), PredictContext.from_run(out)
    (gd, td), (gs, ts) = summary_tables([d])[0], summary_tables([s])[0]
    assert np.array_equal(gd, gs)
    for nm in td:
        for key in td[nm]:
            assert torch.equal(torch.as_tensor(td[nm][key]), torch.as_tensor(ts[nm][key])), nm
    sw_d, sw_s = sweep_text(d), sweep_text(s)
    for nm, vals in sw_d.values.items():
        for metric, v in vals.items():
            assert np.array_equal(v, sw_s.values[nm][metric], equal_nan=True), (nm, metric)
    gpu.probs_on_device = False  # the old behaviour: the whole store to the host
    moved = gpu.run(text, alpha=1.5).attn
    assert moved.device.type == "cpu" and not moved.host_reads
    assert torch.equal(moved.dense(), host.attn.dense())


@needs_cuda
def test_gpu_chunks_of_any_size_give_the_same_graph(tmp_path, monkeypatch) -> None:
    """The chunked run's GPU budget (``CUDA_CHUNK_SCORES``) changes how many rows go at once,
    not the graph: 8-row chunks against one chunk per layer."""
    import sparse_core.sparse_probs as SP

    text = "Attention is a graph; entmax makes most of its edges exactly zero. " * 3
    path = write_tiny_checkpoint(tmp_path / "tiny", "bert", heads=4, hidden=32)
    gpu = load_model(path, device="cuda")
    gpu.dense_max_bytes = 0
    whole = gpu.run(text, alpha=1.5)
    monkeypatch.setattr(SP, "CUDA_CHUNK_SCORES", 8 * whole.n)
    rows = gpu.run(text, alpha=1.5)
    assert int((rows.graph != whole.graph).sum()) <= 2  # cuBLAS may round other shapes apart
    assert float((rows.probs - whole.probs).abs().max()) < 1e-5


@needs_cuda
def test_gpu_scores_scale_in_the_gemm_as_the_separate_product_does() -> None:
    """On CUDA the scores' scale rides in the GEMM (``baddbmm`` with alpha); the numbers are the
    separate product's (a float32 accumulator times the scale, rounded once)."""
    from sparse_core.attention import _scores

    gen = torch.Generator().manual_seed(5)
    q = torch.randn(1, 12, 700, 32, generator=gen).cuda()
    k = torch.randn(1, 12, 900, 32, generator=gen).cuda()
    s = _scores(q, k, 0.125**0.5, None, None, None)
    ref = torch.matmul(q, k.mT) * 0.125**0.5
    assert s.shape == ref.shape
    assert float((s - ref).abs().max()) <= 1e-6 * float(ref.abs().max())


def test_the_gpu_chunk_is_capped_by_the_device_s_memory(monkeypatch) -> None:
    """1 GiB of scores a chunk on an 80 GB card, less on a small one (1/64 of its memory)."""
    import types

    import sparse_core.sparse_probs as SP

    for total, want in ((80 << 30, 1 << 28), (8 << 30, 1 << 25), (2 << 30, 1 << 23)):
        props = types.SimpleNamespace(total_memory=total)
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d, p=props: p)
        got = SP.gpu_chunk_scores(torch.device("cuda"))
        assert got == want and got * 4 <= total // 64
