"""Information flow (sparse_core/flow.py): boolean reachability and attention rollout over the
sparse graphs agree exactly; the per-token backward pass equals the reference-style forward
rollout; softmax reaches everything."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sparse_core.errors import SparsescopeError
from sparse_core.flow import reachability, rollout, token_flow


def random_probs(seed: int, layers: int, heads: int, n: int, density: float) -> torch.Tensor:
    """Row-stochastic P (L, H, n, n) with exact zeros: each row keeps a random subset of keys
    (at least one), like an entmax head."""
    g = torch.Generator().manual_seed(seed)
    keep = torch.rand(layers, heads, n, n, generator=g) < density
    pick = torch.randint(0, n, (layers, heads, n), generator=g)
    keep.scatter_(-1, pick.unsqueeze(-1), True)  # no empty row
    w = torch.rand(layers, heads, n, n, generator=g) * keep
    return (w / w.sum(-1, keepdim=True)).to(torch.float32)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    layers=st.integers(1, 4),
    heads=st.integers(1, 3),
    n=st.integers(1, 12),
    density=st.floats(0.0, 0.5),
)
def test_rollout_support_is_reachability_and_the_row_pass_equals_the_rollout(
    seed, layers, heads, n, density
):
    p = random_probs(seed, layers, heads, n, density)
    roll = rollout(p)  # (L, n, n)
    reach = reachability(p > 0)
    assert torch.equal(roll > 0, reach)
    assert torch.allclose(roll.sum(-1), torch.ones(layers, n, dtype=torch.float64))
    t = seed % n
    for layer in range(layers):
        f = token_flow(p, t, layer)
        assert torch.allclose(f.mass, roll[layer, t], rtol=1e-12, atol=1e-15)
        assert torch.equal(f.reachable, reach[layer, t])
        assert torch.equal(f.mass > 0, f.reachable)
        assert f.counts[-1] == 1 and f.counts[0] == int(f.reachable.sum())
        assert len(f.counts) == layer + 2
        assert all(a >= b for a, b in zip(f.counts, f.counts[1:], strict=False))
        for k in range(layer + 1):  # level k: reachability through layers k … layer alone
            upper = reachability((p > 0)[k : layer + 1])[-1, t]
            assert torch.equal(f.levels[k], upper)


def test_a_shift_graph_reaches_exactly_the_previous_layers_tokens():
    """Every head attends only to the previous token (token 0 to itself): through l + 1 layers,
    token t is reached by t - l - 1 … t (the residual keeps t itself), nothing else."""
    n, layers = 10, 3
    p = torch.zeros(layers, 2, n, n)
    for i in range(n):
        p[:, :, i, max(i - 1, 0)] = 1.0
    for layer in range(layers):
        f = token_flow(p, 7, layer)
        assert f.reachable.nonzero().flatten().tolist() == list(range(7 - layer - 1, 8))
        assert f.counts == list(range(layer + 2, 0, -1))
    # one layer: Â = (P + I) / 2, so 7 keeps half its mass and 6 gets half
    f = token_flow(p, 7, 0)
    assert f.mass[7].item() == 0.5 and f.mass[6].item() == 0.5


def test_heads_are_united_and_averaged():
    """Two heads of one layer: head 0 reads token 1, head 1 reads token 2; token 0 is reached by
    both, each with (1/2)(1/2) of the mass."""
    p = torch.zeros(1, 2, 3, 3)
    p[0, 0, :, 1] = 1.0
    p[0, 1, :, 2] = 1.0
    f = token_flow(p, 0, 0)
    assert f.reachable.tolist() == [True, True, True]
    assert f.mass.tolist() == [0.5, 0.25, 0.25]


def test_per_head_sparse_layers_give_the_same_flow():
    p = random_probs(3, 3, 2, 9, 0.2)
    streamed = [[p[k, h].to_sparse() for h in range(2)] for k in range(3)]
    a, b = token_flow(p, 4), token_flow(streamed, 4)
    assert torch.equal(a.reachable, b.reachable) and torch.allclose(a.mass, b.mass)
    assert a.layer == b.layer == 2


def test_bad_token_and_layer_name_their_field():
    p = random_probs(0, 2, 1, 5, 0.3)
    with pytest.raises(SparsescopeError) as e:
        token_flow(p, 5)
    assert e.value.field == "token" and "[0, 4]" in str(e.value)
    with pytest.raises(SparsescopeError) as e:
        token_flow(p, 0, 2)
    assert e.value.field == "layer" and "[0, 1]" in str(e.value)
    with pytest.raises(SparsescopeError) as e:
        token_flow(p, -1)
    assert e.value.field == "token"


def test_entmax_on_the_tiny_model_is_sparse_and_exact(tiny_model, sentence):
    out = tiny_model.run(sentence, alpha=1.5)
    roll = rollout(out.probs)
    reach = reachability(out.graph)
    assert torch.equal(roll > 0, reach)
    f = token_flow(out.probs, 3, 0)
    assert torch.equal(f.reachable, reach[0, 3])
    assert f.counts[0] < out.n  # one entmax layer does not reach every token


@pytest.mark.parametrize("causal", [False, True])
def test_softmax_reaches_every_token(tiny_model, sentence, causal):
    out = tiny_model.run(sentence, alpha=1.0, causal=causal)
    n = out.n
    for t in (0, n // 2, n - 1):
        f = token_flow(out.probs, t, 0)
        want = torch.arange(n) <= t if causal else torch.ones(n, dtype=torch.bool)
        assert torch.equal(f.reachable, want)
        assert torch.equal(f.mass > 0, want)
