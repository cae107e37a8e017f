"""Every supported architecture as an entmax transformer, on tiny random checkpoints.

Each checkpoint is written by sparse_core.testing (transformers config -> save_pretrained, the
default model's tokenizer files copied in) and loaded with load_model like a user's model.
"""

from __future__ import annotations

import pytest
import torch

from sparse_core.entmax import entmax
from sparse_core.model import load_model
from sparse_core.sources import ARCHITECTURES
from sparse_core.testing import TINY_ARCHITECTURES, write_tiny_checkpoint

TEXT = "The chef who ran to the store was out of food, so he went back."
DECODERS = [a for a in TINY_ARCHITECTURES if ARCHITECTURES[a].decoder]
GQA = [a for a in DECODERS if a != "gpt2"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-checkpoints")
    made: dict[str, object] = {}

    def get(arch: str):
        if arch not in made:
            made[arch] = write_tiny_checkpoint(root / arch, arch, seed=3)
        return made[arch]

    return get


@pytest.fixture(scope="module")
def model(checkpoint):
    loaded: dict[str, object] = {}

    def get(arch: str):
        if arch not in loaded:
            loaded[arch] = load_model(checkpoint(arch), device="cpu")
        return loaded[arch]

    return get


def _eager(path):
    """transformers' own model class of the checkpoint, eager softmax attention."""
    from transformers import AutoModel

    return AutoModel.from_pretrained(str(path), attn_implementation="eager").eval()


@pytest.mark.parametrize("arch", TINY_ARCHITECTURES)
def test_softmax_reproduces_transformers_eager_forward(arch, model, checkpoint):
    m = model(arch)
    assert m.config.model_type == arch and m.config.is_decoder == ARCHITECTURES[arch].decoder
    out = m.run(TEXT, alpha=1.0)
    with torch.no_grad():
        ref = _eager(checkpoint(arch))(input_ids=torch.tensor([out.input_ids]))
    torch.testing.assert_close(out.hidden, ref.last_hidden_state[0], atol=1e-4, rtol=0)
    # and entmax is not softmax: α = 1.5 changes the hidden states
    assert (m.run(TEXT, alpha=1.5).hidden - out.hidden).abs().max() > 1e-3


@pytest.mark.parametrize("arch", TINY_ARCHITECTURES)
@pytest.mark.parametrize("alpha", [1.5, 2.0])
def test_rows_are_distributions_graph_is_support_decoders_causal(arch, alpha, model):
    m = model(arch)
    out = m.run(TEXT, alpha=alpha, causal=False)
    L, H, n = m.config.num_layers, m.config.num_heads, out.n
    assert out.probs.shape == (L, H, n, n) and out.probs.dtype == torch.float32
    assert out.queries.shape == out.keys.shape == (L, H, n, m.config.head_dim)
    torch.testing.assert_close(out.probs.sum(-1), torch.ones(L, H, n), atol=1e-5, rtol=0)
    assert (out.probs >= 0).all() and torch.equal(out.graph, out.probs > 0)
    assert not out.graph[..., out.valid].all(), "entmax at alpha > 1 gives exact zeros"
    future = torch.ones(n, n, dtype=torch.bool).triu(1)
    if m.config.is_decoder:  # always causal, whatever was asked
        assert out.causal and not out.graph[..., future].any()
        assert torch.equal(out.probs[..., 0, 0], torch.ones(L, H))
    else:
        assert not out.causal and out.graph[..., future].any()
        assert not m.run(TEXT, alpha=alpha, causal=True).graph[..., future].any()


@pytest.mark.parametrize("arch", TINY_ARCHITECTURES)
def test_sparse_consistency(arch, model):
    """definitions §1 / Prop. 1 with the model's own scores: entmax over the scores restricted to
    any mask ⊇ G reproduces P, and the network restricted to G reproduces the hidden states."""
    m = model(arch)
    out = m.run(TEXT, alpha=1.5)
    scores = out.scores()  # (L, H, n, n), the model's scaling (and logit cap)
    n = out.n
    gen = torch.Generator().manual_seed(0)
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    near = (i - j).abs() < 4  # inside every tiny model's sliding window (8)
    extra = (torch.rand(out.graph.shape, generator=gen) < 0.3) & out.valid & near
    for superset in (out.graph, out.graph | extra):
        restricted = entmax(scores.masked_fill(~superset, float("-inf")), 1.5)
        assert torch.equal(restricted > 0, out.graph)
        torch.testing.assert_close(restricted, out.probs, atol=1e-5, rtol=0)
    torch.testing.assert_close(m.forward_masked(out, out.graph), out.hidden, atol=1e-5, rtol=0)
    full = torch.ones_like(out.graph)
    torch.testing.assert_close(m.forward_masked(out, full), out.hidden, atol=1e-5, rtol=0)
    diag = torch.eye(n, dtype=torch.bool).expand_as(out.graph)
    assert (m.forward_masked(out, diag) - out.hidden).abs().max() > 1e-3


def test_gpt2_scores_use_its_own_scaling_rules(model):
    """GPT-2 with scale_attn_by_inverse_layer_idx: layer l scales by 1 / (√d · (l + 1))."""
    m = model("gpt2")
    out = m.run(TEXT)
    d = m.config.head_dim
    want = torch.tensor([d**-0.5 / (layer + 1) for layer in range(m.config.num_layers)])
    torch.testing.assert_close(out.scaling, want)
    assert m.config.scale_attn_by_inverse_layer_idx  # read through to transformers' config


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_per_head_and_per_layer_alpha_on_a_decoder(arch, model):
    m = model(arch)
    L, H = m.config.num_layers, m.config.num_heads
    base = m.run(TEXT, alpha=1.5)
    per_head = [1.0, 1.5] + [2.0] * (H - 2)
    out = m.run(TEXT, alpha=per_head)
    lower = out.valid  # causal: j <= i
    assert out.graph[:, 0][..., lower].all(), "a softmax head is dense over the valid region"
    assert not out.graph[:, 2:][..., lower].all()
    # layer 0 sees the same input either way: its α = 1.5 head equals the uniform run's head
    torch.testing.assert_close(out.probs[0, 1], base.probs[0, 1], atol=1e-6, rtol=0)
    assert not torch.equal(out.graph[0, 2], base.graph[0, 2]) or not torch.equal(
        out.probs[0, 2], base.probs[0, 2]
    )
    table = torch.full((L, H), 1.5)
    table[L - 1, H - 1] = 1.0
    out2 = m.run(TEXT, alpha=table)
    assert out2.graph[L - 1, H - 1][lower].all()
    torch.testing.assert_close(out2.probs[: L - 1], base.probs[: L - 1], atol=1e-6, rtol=0)
    same = m.run(TEXT, alpha=torch.full((L, H), 1.5))
    torch.testing.assert_close(same.probs, base.probs)


@pytest.mark.parametrize("arch", GQA)
def test_grouped_query_keys_are_expanded_per_query_head(arch, model):
    m = model(arch)
    H, H_kv = m.config.num_heads, m.config.num_kv_heads
    assert H_kv < H and H % H_kv == 0
    out = m.run(TEXT)
    group = H // H_kv
    for h in range(H):
        first = (h // group) * group  # the first query head reading the same key/value head
        assert torch.equal(out.keys[:, h], out.keys[:, first])
    assert not torch.equal(out.keys[:, 0], out.keys[:, group]), "different kv heads differ"
    assert not torch.equal(out.queries[:, 0], out.queries[:, 1]), "queries are per query head"


@pytest.mark.parametrize("arch", TINY_ARCHITECTURES)
def test_batch_equals_single_runs(arch, model, one_thread):
    """Texts of different lengths share one right-padded forward and each result is bit for
    bit its single run (a 3-token text, below BLAS's row floor, runs alone)."""
    m = model(arch)
    texts = ["A short one.", TEXT, "Hi", "Somewhat longer, with a comma.", "A short two."]
    outs = m.run_batch(texts, alpha=1.5)
    assert len({len(o.tokens) for o in outs}) >= 3  # really different lengths
    for t, o in zip(texts, outs, strict=True):
        single = m.run(t, alpha=1.5)
        assert o.tokens == single.tokens and o.causal == single.causal
        for name in ("probs", "queries", "keys", "hidden", "graph"):
            assert torch.equal(getattr(o, name), getattr(single, name)), (arch, t, name)


def test_a_cached_model_name_loads_from_the_hub_cache(tmp_path, monkeypatch, checkpoint):
    """A name resolves through huggingface_hub's cache layout, offline."""
    import shutil

    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--someone--tiny-llama"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    shutil.copytree(checkpoint("llama"), repo / "snapshots" / commit)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    m = load_model("someone/tiny-llama", device="cpu")
    assert m.model_id == "someone/tiny-llama" and m.config.model_type == "llama"
    assert m.run(TEXT).model_id == "someone/tiny-llama"


def test_sparsefinder_fit_for_a_gqa_decoder(model):
    """Extraction, fit_artefact and check_model on a grouped-query decoder; lookup by (id, α)."""
    from sparse_core.sparsefinder import load_artefact, save_artefact
    from sparse_core.sparsefinder_fit import FitConfig, extract, fit_artefact

    m = model("llama")
    texts = [
        "The river ran past the old mill.",
        "Children played near the water while their parents talked.",
        "In winter the wheel froze, so the village ground its grain by hand.",
        "A merchant brought salt, cloth and news from the capital.",
        "He said the king would visit in spring.",
    ]
    data = extract(m, texts[:2], 1.5)
    assert data.causal
    n = data.lengths[0]
    assert not data.graph(0)[..., torch.ones(n, n, dtype=torch.bool).triu(1)].any()
    cfg = FitConfig(epochs=1, cluster_counts=(2, 4), kmeans_restarts=1, kmeans_points=256)
    art = fit_artefact(m, texts, alpha=1.5, config=cfg)
    c = m.config
    art.check_model(c.num_layers, c.num_heads, c.head_dim)
    assert art.meta["causal"] is True and art.meta["model_id"] == m.model_id
    assert 0 < art.meta["validation"]["gold_sparsity"] < 1
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        save_artefact(art, d)
        again = load_artefact(d, model_id=m.model_id, alpha=1.5)
        assert again.model_id == m.model_id and torch.equal(again.W, art.W)


def test_additive_float_masks_mean_the_same_as_boolean_ones():
    """Models that build their own additive mask (0 / dtype minimum) get exact zeros too."""
    from types import SimpleNamespace

    from sparse_core.attention import entmax_attention

    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 6, 8, generator=gen) for _ in range(3))
    k, v = k[:, :2], v[:, :2]  # two key/value heads for four query heads
    allowed = torch.ones(2, 1, 6, 6, dtype=torch.bool).tril()
    allowed[1, :, :, 4:] = False  # padding keys in the second text
    allowed[0, :, 0, :] = False  # a query that may attend nowhere: zeros, not uniform
    additive = torch.zeros(allowed.shape).masked_fill(~allowed, torch.finfo(torch.float32).min)
    module = SimpleNamespace()
    o1, p1 = entmax_attention(module, q, k, v, allowed, scaling=0.3)
    o2, p2 = entmax_attention(module, q, k, v, additive, scaling=0.3)
    assert torch.equal(p1 > 0, p2 > 0) and not (p1 > 0)[~allowed.expand_as(p1)].any()
    torch.testing.assert_close(p1, p2, atol=1e-7, rtol=0)
    torch.testing.assert_close(o1, o2)
    assert o1.shape == (2, 6, 4, 8)  # (B, n, H, d), as transformers expects
    assert not p2[0, :, 0].any()
