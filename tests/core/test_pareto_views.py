"""Views of a text's context (``PredictContext.view``: one head alone; ``PredictContext.stack``:
several texts of one length at once) give every method exactly the figures, bases and page
payload of the whole context: the page's one-head Pareto data and the batched analyze summary
rely on it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sparse_core import bitsets as B
from sparse_core import methods as M
from sparse_core import pareto as PA

from .test_pareto import TEXT, TEXTS, fake_artefact

#: Extra off-grid points: per-head own masks (fixed with spread heads), several rounds.
EXTRA = {
    "fixed": [{"stride": 4, "c": 1, "spread": True, "window": 3, "globals": True}],
    "reformer": [{"n_buckets": 4, "rounds": 3, "window": 0, "globals": False}],
}


@pytest.fixture(scope="module", params=[(False, True), (True, True), (False, False)],
                ids=["bidirectional", "causal", "no-artefact"])  # fmt: skip
def ctx(request, tiny_model):
    causal, with_art = request.param
    out = tiny_model.run(TEXT, causal=causal)
    return M.PredictContext.from_run(out, fake_artefact() if with_art else None)


def points(name: str, ctx) -> list[dict]:
    method = M.METHODS[name]
    return [*method.grid(ctx.n, ctx.artefact), method.defaults(ctx.n, ctx.artefact),
            *EXTRA.get(name, [])]  # fmt: skip


@pytest.mark.parametrize("name", list(M.METHODS))
def test_one_head_view_equals_the_whole(name, ctx):
    if not M.METHODS[name].runs_on(ctx):
        pytest.skip("needs an artefact")
    pts = points(name, ctx)
    whole = PA.sweep_points(ctx, name, pts)
    for layer, head in [(0, 0), (ctx.layers - 1, ctx.heads - 1), (1, 2)]:
        view = ctx.view(layer, head)
        assert (view.layers, view.heads, view.n) == (1, 1, ctx.n)
        assert view.seeds().tolist() == [[M.head_seed(layer, head)]]
        one = PA.sweep_points(view, name, pts)
        for metric in B.METRICS:
            assert torch.equal(one[metric][:, 0, 0], whole[metric][:, layer, head]), metric


def test_one_head_view_gives_the_same_page_payload(ctx):
    for layer, head in [(0, 0), (1, 3)]:
        assert M.head_data(ctx.view(layer, head), 0, 0) == M.head_data(ctx, layer, head)


def test_one_head_view_sweep_text_points(ctx):
    whole = PA.sweep_text(ctx)
    one = PA.sweep_text(ctx.view(1, 2))
    got, want = one.points(0, 0), whole.points(1, 2)
    assert got == want


def test_view_shares_only_what_every_head_shares(ctx):
    PA.sweep_points(ctx, "strided", M.METHODS["strided"].grid(ctx.n))
    PA.sweep_points(ctx, "fixed", EXTRA["fixed"])  # spread: (H, n, W), per head
    shared = ctx.view(0, 1).cache
    assert shared and all(k[0] == "bits" and v.shape[0] == 1 for k, v in shared.items())


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("with_art", [True, False])
def test_stacked_texts_equal_each_text(tiny_model, causal, with_art):
    art = fake_artefact() if with_art else None
    words = TEXTS[0].split()
    texts = [" ".join(words[k:] + words[:k]) for k in (0, 3, 7)]  # same words: same count
    outs = [tiny_model.run(t, causal=causal) for t in texts]
    assert len({o.n for o in outs}) == 1
    ctxs = [M.PredictContext.from_run(o, art) for o in outs]
    stacked = M.PredictContext.stack(ctxs)
    L, H = ctxs[0].layers, ctxs[0].heads
    assert stacked.layers == len(ctxs) * L
    for name in M.available(art):
        pts = points(name, ctxs[0])
        together = PA.sweep_points(stacked, name, pts)
        for k, c in enumerate(ctxs):
            alone = PA.sweep_points(c, name, pts)
            for metric in B.METRICS:
                got = together[metric].reshape(len(pts), len(ctxs), L, H)[:, k]
                assert torch.equal(got, alone[metric]), (name, metric)


def test_stack_refuses_other_lengths(tiny_model):
    a = M.PredictContext.from_run(tiny_model.run("one two three"))
    b = M.PredictContext.from_run(tiny_model.run("one two three four five six"))
    with pytest.raises(ValueError):
        M.PredictContext.stack([a, b])
    assert M.PredictContext.stack([a]) is a
    assert np.array_equal(a.seeds().numpy(), M.PredictContext.stack([a]).seeds().numpy())
