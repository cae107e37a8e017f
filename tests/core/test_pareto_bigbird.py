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
