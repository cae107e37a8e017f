"""The dense recorded path in chunks of heads (sparse_core/attention.py, ``_dense_in_chunks``): a
layer whose scores exceed ``DENSE_CHUNK_SCORES`` is computed a few heads at a time, and the run's
every recording (P, queries, keys, hidden states) is the whole layer's bit for bit."""

from __future__ import annotations

import pytest
import torch

from sparse_core import attention as A

TEXT = "The chef who ran to the store was out of food, so he went back home at once. " * 3
RECORDED = ("probs", "queries", "keys", "hidden")


@pytest.fixture
def chunk_calls(monkeypatch):
    """Counts the layers computed in chunks (the spy forwards to the real function)."""
    calls: list[int] = []
    real = A._dense_in_chunks

    def spy(call):
        calls.append(call.li)
        return real(call)

    monkeypatch.setattr(A, "_dense_in_chunks", spy)
    return calls


@pytest.mark.parametrize("heads_a_chunk", [1, 3])
@pytest.mark.parametrize(("alpha", "causal"), [(1.15, False), (1.5, True), (2.0, False)])
def test_a_layer_in_chunks_of_heads_is_the_whole_layer_bit_for_bit(
    tiny_model, monkeypatch, chunk_calls, heads_a_chunk, alpha, causal
):
    whole = tiny_model.run(TEXT, alpha=alpha, causal=causal)
    assert not chunk_calls  # the tiny model's layers are under the budget: one piece
    n = whole.n
    monkeypatch.setattr(A, "DENSE_CHUNK_SCORES", heads_a_chunk * n * n)
    chunked = tiny_model.run(TEXT, alpha=alpha, causal=causal)
    assert chunk_calls == list(range(tiny_model.config.num_layers))
    if heads_a_chunk > 1:  # the tiny model's 4 heads: chunks of 3 and 1 (a short last one)
        assert tiny_model.config.num_heads % heads_a_chunk != 0
    for name in RECORDED:
        assert torch.equal(getattr(chunked, name), getattr(whole, name)), name
    assert torch.equal(chunked.graph, whole.graph)


def test_the_stop_after_the_last_layer_is_kept(tiny_model, monkeypatch, chunk_calls):
    """``hidden=False`` stops the forward once the last layer is recorded, in chunks too."""
    monkeypatch.setattr(A, "DENSE_CHUNK_SCORES", 1)
    whole = tiny_model.run(TEXT, alpha=1.5)
    out = tiny_model.run(TEXT, alpha=1.5, hidden=False)
    assert out.hidden.shape[0] == 0
    assert torch.equal(out.probs, whole.probs)


def test_per_head_alpha_and_batches_take_the_whole_layer(tiny_model, monkeypatch, chunk_calls):
    """A per-head α is grouped by its values (two chunks would group them differently), and a
    batch of texts runs per text as before: neither is chunked."""
    monkeypatch.setattr(A, "DENSE_CHUNK_SCORES", 1)
    h = tiny_model.config.num_heads
    tiny_model.run(TEXT, alpha=[1.2] + [1.6] * (h - 1))
    tiny_model.run_batch([TEXT, TEXT[:40]], alpha=1.5)
    assert not chunk_calls
