"""A lone analysis on both cores: the forward's second worker (half of every linear
layer's rows and of every layer's heads), the summary's and the whole sweep's (half of the
layers), one head's sweep (the methods shared out), each bit for bit (byte for byte) what one
thread computes; numpy's BLAS on one thread in the server."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from fastapi.testclient import TestClient

import sparsescope.engine.derived as D
import sparsescope.engine.summaries as S
import sparsescope.engine.two_cores as T
from sparse_core import attention as A
from sparse_core import pareto
from sparse_core.methods import PredictContext
from sparse_core.runtime import SPLIT_MIN_ROWS
from sparsescope.engine.batching import Job, ModelWorker
from sparsescope.engine.limits import JobContext
from sparsescope.engine.payloads import summary_texts
from sparsescope.engine.request import AnalysisRequest
from sparsescope.engine.service import AnalysisService, one_blas_thread
from sparsescope.web.main import create_app
from tests.app.conftest import make_settings

TEXT = "The chef who ran to the store was out of food, so he went back home at once. " * 8
RECORDED = ("probs", "queries", "keys", "hidden", "graph")


@pytest.fixture
def side():
    with ThreadPoolExecutor(1) as pool:
        yield pool


def lone_run(model, text: str, alpha: float):
    """``text`` run alone by a model worker with a second core (``split=2``), and the worker."""
    worker = ModelWorker(model, window_s=0, split=2)
    job = Job(AnalysisRequest(text, alpha=alpha), len(model.encode(text).ids), JobContext())
    worker._run_round([job])
    return job.future.result(timeout=60), worker


@pytest.mark.parametrize("with_artefact", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_a_lone_summary_on_two_cores_is_the_one_thread_summary_byte_for_byte(
    tiny_model, tiny_artefact, side, with_artefact, causal
):
    art = tiny_artefact if with_artefact else None
    out = tiny_model.run(TEXT, alpha=1.5, causal=causal)
    assert T.splits(PredictContext.from_run(out, art))  # long enough, two layers
    one = summary_texts([PredictContext.from_run(out, art)])[0]
    ctx = PredictContext.from_run(out, art)
    two = T.summary_on_two_cores(ctx, side)
    assert two == one
    # what every head shares (packed patterns) is kept for the later routes
    assert any(k[0] == "bits" for k in ctx.cache)


def test_a_layer_part_is_its_layers_of_the_whole(tiny_model, tiny_artefact):
    out = tiny_model.run(TEXT, alpha=1.5)
    ctx = PredictContext.from_run(out, tiny_artefact)
    part = T.layer_part(ctx, 1, 2)
    assert part.layers == 1 and part.heads == ctx.heads
    assert part.layer_index().tolist() == [1]
    assert torch.equal(part.out.probs, out.probs[1:2])
    assert torch.equal(part.out.graph, out.graph[1:2])
    assert torch.equal(part.proj_q, ctx.proj_q[1:2])
    assert torch.equal(part.artefact.W, tiny_artefact.W[1:2])


def test_a_short_text_is_summarised_in_one_piece(tiny_model):
    out = tiny_model.run("A short text.", alpha=1.5)
    assert not T.splits(PredictContext.from_run(out, None))


def test_api_bodies_are_the_same_with_the_summary_split_or_not(
    tmp_path, tiny_model, tiny_artefact, one_thread, monkeypatch
):
    """The whole analyze body, a head's payload and its Pareto data through the app, with a lone
    text's summary on two workers and with it on one (the side worker taken away)."""
    calls = []
    real = S.summary_tables_on_two_cores
    monkeypatch.setattr(
        S, "summary_tables_on_two_cores", lambda c, s: calls.append(1) or real(c, s)
    )
    bodies = []
    for split in (True, False):
        if not split:
            monkeypatch.setattr(S, "side_worker", lambda: None)
            monkeypatch.setattr(D, "side_worker", lambda: None)
        settings = make_settings(tmp_path / str(split))
        svc = AnalysisService(settings, model=tiny_model, artefact=tiny_artefact)
        with TestClient(create_app(settings, svc)) as c:
            r = c.post("/api/analyze", json={"text": TEXT})
            assert r.status_code == 200, r.text
            aid = r.json()["id"]
            head = c.get(f"/api/analyses/{aid}/heads/1/2")
            one = c.get(f"/api/analyses/{aid}/pareto?layer=1&head=2")
            mean = c.get(f"/api/analyses/{aid}/pareto")
            bodies.append((r.content, head.content, one.content, mean.content))
        assert len(calls) == 1  # the first service split it, the second did not
    assert bodies[0] == bodies[1]


def points(sweep, layer=None, head=None) -> list:
    return [sweep.points(layer, head, x, b) for x, b in (("sparsity", None), ("block", 16))]


@pytest.mark.parametrize("with_artefact", [False, True])
def test_sweeps_on_two_cores_are_the_one_thread_sweeps(
    tiny_model, tiny_artefact, side, with_artefact
):
    """One head's sweep with the methods shared out, and every head's with the layers split:
    the points and frontiers of one head and of the mean over heads, exactly."""
    art = tiny_artefact if with_artefact else None
    ctx = PredictContext.from_run(tiny_model.run(TEXT, alpha=1.5), art)
    whole = pareto.sweep_text(ctx, per_head=True)
    split = T.sweep_on_two_cores(ctx, side)
    assert list(split.grids) == list(whole.grids)
    assert points(split) == points(whole)
    for layer, head in ((0, 0), (1, 3)):
        assert points(split, layer, head) == points(whole, layer, head)
        one = pareto.sweep_text(ctx.view(layer, head), per_head=True)
        shared = T.sweep_head_on_two_cores(ctx, layer, head, side)
        assert list(shared.grids) == list(one.grids)
        assert points(shared, 0, 0) == points(one, 0, 0) == points(whole, layer, head)


def test_a_busy_side_worker_is_not_waited_for(tiny_model, tiny_artefact, side):
    """With the side worker held by another request's work, the summary and one head's sweep
    are done on the asking thread alone, the same bytes and points."""
    import threading

    ctx = PredictContext.from_run(tiny_model.run(TEXT, alpha=1.5), tiny_artefact)
    one = summary_texts([PredictContext.from_run(ctx.out, tiny_artefact)])[0]
    head = pareto.sweep_text(ctx.view(1, 2), per_head=True)
    release = threading.Event()
    held = side.submit(release.wait, 60)
    try:
        assert T.summary_on_two_cores(ctx, side) == one
        assert points(T.sweep_head_on_two_cores(ctx, 1, 2, side), 0, 0) == points(head, 0, 0)
        assert not held.done()  # both finished while the side worker was still held
    finally:
        release.set()


def test_the_cost_order_ranks_every_method():
    """Every registered method has its measured rank; the order is costliest first, an
    unranked (new) method first of all."""
    from sparse_core.methods import METHODS

    assert all(m.cost_rank is not None for m in METHODS.values())
    order = T.cost_order(list(METHODS))
    assert sorted(order) == sorted(METHODS) and order[0] == "sf-kmeans" and order[-1] == "window"
    ranks = [METHODS[nm].cost_rank for nm in order]
    assert ranks == sorted(ranks, reverse=True)


def test_a_large_p_buffer_is_its_own_huge_page_mapping():
    from sparse_core.runtime import HUGE_PAGES_MIN_BYTES, KeptBuffers

    cpu = torch.device("cpu")
    host_buffer = KeptBuffers()
    big = host_buffer((2, 1, 3, 1024, 1024), cpu)  # 24 MiB
    assert big.shape == (2, 1, 3, 1024, 1024) and big.dtype == torch.float32
    assert big.is_contiguous() and 2 * 3 * 1024 * 1024 * 4 >= HUGE_PAGES_MIN_BYTES
    big[1, 0, 2].fill_(0.5)
    view = big[1, 0, 2, :4, :4]  # a view, no copy
    del big  # the mapping lives as long as a tensor views it
    assert torch.equal(view, torch.full((4, 4), 0.5))
    small = host_buffer((1, 1, 2, 8, 8), cpu)
    assert small.shape == (1, 1, 2, 8, 8) and small.untyped_storage().resizable()


def test_one_blas_thread_limits_numpy_s_blas():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        one_blas_thread()
        blas = [p for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]
        assert blas and all(p["num_threads"] == 1 for p in blas)


@pytest.mark.parametrize("alpha", [1.0, 1.1, 1.25, 1.4, 1.5, 1.75, 2.0])
def test_a_lone_forward_splits_the_heads_at_every_alpha_bit_for_bit(
    tiny_model, one_thread, side, monkeypatch, alpha
):
    """The forward of a text alone with a second worker takes half of every layer's heads
    there at every α, the dense path's (α 1.1-1.4) included, and its recordings are those of
    the one-thread run and of the batched run bit for bit."""
    calls = []
    real = A._split_heads

    def spy(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(A, "_split_heads", spy)
    out = tiny_model.run(TEXT, alpha=alpha, side=side)
    assert len(calls) == tiny_model.config.num_layers  # every layer split its heads
    alone = tiny_model.run(TEXT, alpha=alpha)
    batched = tiny_model.run_batch([TEXT, TEXT[:150]], alpha)[0]
    assert len(calls) == tiny_model.config.num_layers
    for name in RECORDED:
        assert torch.equal(getattr(out, name), getattr(alone, name)), name
        assert torch.equal(getattr(out, name), getattr(batched, name)), name


@pytest.mark.real_model
def test_a_lone_512_token_analysis_on_two_cores_equals_its_one_thread_run(
    real_model, one_thread, side
):
    """The real model at n = 512: the lone run with its second worker equals the one-thread run
    and the batched run bit for bit (P, queries, keys, hidden states), and the summary split over
    two workers is the one-thread summary byte for byte."""
    from sparse_core.sparsefinder import load_artefact

    words = (TEXT + " the model reads every token of it and attends to some of them") * 40
    enc = real_model.encode(words, truncate=True)
    text = words[: enc.offsets[-2][1]]  # 512 tokens with the specials
    n = len(real_model.encode(text).ids)
    assert 500 <= n <= 512 and n >= 2 * SPLIT_MIN_ROWS
    out, worker = lone_run(real_model, text, 1.5)
    assert worker._lone is not None  # the second worker took its half
    alone = real_model.run(text, alpha=1.5)
    batched = real_model.run_batch([text, "Another text to batch with."], 1.5)[0]
    for name in RECORDED:
        assert torch.equal(getattr(out, name), getattr(alone, name)), name
        assert torch.equal(getattr(out, name), getattr(batched, name)), name
    # the dense path (α 1.25) with the heads split too
    dense = real_model.run(text, alpha=1.25, side=side)
    assert torch.equal(dense.probs, real_model.run(text, alpha=1.25).probs)
    assert torch.equal(dense.hidden, real_model.run_batch([text, "Short."], 1.25)[0].hidden)
    art = load_artefact(None, model_id=real_model.model_id, alpha=1.5)
    one = summary_texts([PredictContext.from_run(alone, art)])[0]
    assert T.summary_on_two_cores(PredictContext.from_run(out, art), side) == one
