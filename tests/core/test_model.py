"""The entmax transformer: reference-BERT parity, the graph, causal mode, sparse-consistency."""

from __future__ import annotations

import json
import math

import pytest
import torch

from sparse_core import EmptyTextError, ModelLoadError, SparsescopeError, TextTooLongError
from sparse_core.entmax import entmax
from sparse_core.model import load_model

ALPHAS = [1.0, 1.25, 1.5, 2.0]


def _hf_bert_from(model):
    """The same weights in transformers' reference BertModel (eager attention)."""
    from transformers import BertConfig, BertModel

    c = model.config
    cfg = BertConfig(
        vocab_size=c.vocab_size,
        hidden_size=c.hidden_size,
        num_hidden_layers=c.num_layers,
        num_attention_heads=c.num_heads,
        intermediate_size=c.intermediate_size,
        max_position_embeddings=c.max_positions,
        layer_norm_eps=c.layer_norm_eps,
        hidden_act=c.hidden_act,
        attn_implementation="eager",
    )
    ref = BertModel(cfg, add_pooling_layer=False).eval()
    missing, _ = ref.load_state_dict(model.net.state_dict(), strict=False)
    assert all("position_ids" in m or "token_type_ids" in m for m in missing), missing
    return ref


def test_softmax_mode_matches_reference_bert_tiny(tiny_model, sentence):
    out = tiny_model.run(sentence, alpha=1.0)
    ref = _hf_bert_from(tiny_model)
    with torch.no_grad():
        h = ref(torch.tensor([out.input_ids])).last_hidden_state[0]
    torch.testing.assert_close(out.hidden, h, atol=1e-5, rtol=0)


@pytest.mark.parametrize("alpha", ALPHAS)
def test_probabilities_are_distributions_and_graph_is_support(tiny_model, sentence, alpha):
    out = tiny_model.run(sentence, alpha=alpha)
    L, H, n = out.layers, out.heads, out.n
    assert out.probs.shape == (L, H, n, n) and out.queries.shape[:3] == (L, H, n)
    assert (out.probs >= 0).all()
    torch.testing.assert_close(out.probs.sum(-1), torch.ones(L, H, n), atol=1e-5, rtol=0)
    assert torch.equal(out.graph, out.probs > 0)
    if alpha == 1.0:
        assert out.graph.all(), "softmax is dense"
    else:
        assert not out.graph.all(), f"alpha={alpha} should give exact zeros"


def test_larger_alpha_is_sparser(tiny_model, sentence):
    dens = [tiny_model.run(sentence, alpha=a).graph.float().mean().item() for a in ALPHAS]
    assert dens == sorted(dens, reverse=True)


@pytest.mark.parametrize("alpha", [1.0, 1.5, 2.0])
def test_causal_never_attends_forward(tiny_model, sentence, alpha):
    out = tiny_model.run(sentence, alpha=alpha, causal=True)
    future = torch.ones(out.n, out.n, dtype=torch.bool).triu(1)
    assert not out.graph[..., future].any()
    assert torch.equal(out.valid, ~future)
    # the first query can only see itself
    assert torch.equal(out.probs[..., 0, 0], torch.ones(out.layers, out.heads))


@pytest.mark.parametrize("alpha", [1.25, 1.5, 2.0])
def test_sparse_consistency(tiny_model, sentence, alpha):
    """SPEC §1 / Prop. 1: entmax over scores restricted to any superset of G reproduces P."""
    out = tiny_model.run(sentence, alpha=alpha)
    d = out.queries.shape[-1]
    scores = out.queries @ out.keys.transpose(-1, -2) / math.sqrt(d)  # (L, H, n, n)
    gen = torch.Generator().manual_seed(0)
    extra = torch.rand(out.graph.shape, generator=gen) < 0.3
    for superset in (out.graph, out.graph | extra):
        restricted = entmax(scores.masked_fill(~superset, float("-inf")), alpha)
        assert torch.equal(restricted > 0, out.graph)
        torch.testing.assert_close(restricted, out.probs, atol=1e-6, rtol=0)
    # and the whole network, restricted to G in every head, gives the same hidden states
    torch.testing.assert_close(
        tiny_model.forward_masked(out, out.graph), out.hidden, atol=1e-5, rtol=0
    )


def test_restricting_below_the_graph_changes_the_output(tiny_model, sentence):
    out = tiny_model.run(sentence, alpha=1.5)
    diag = torch.eye(out.n, dtype=torch.bool).expand_as(out.graph)
    h = tiny_model.forward_masked(out, diag)
    assert (h - out.hidden).abs().max() > 1e-3


def test_per_head_alpha(tiny_model, sentence):
    L, H = tiny_model.config.num_layers, tiny_model.config.num_heads
    per_head = [1.0] + [2.0] * (H - 1)
    out = tiny_model.run(sentence, alpha=per_head)
    assert out.graph[0, 0].all()  # softmax head: dense
    assert not out.graph[0, 1:].all()
    table = torch.full((L, H), 1.5)
    table[1, 2] = 1.0
    out2 = tiny_model.run(sentence, alpha=table)
    assert out2.graph[1, 2].all()
    # a uniform table is the same as the scalar
    same = tiny_model.run(sentence, alpha=torch.full((L, H), 1.5))
    torch.testing.assert_close(same.probs, tiny_model.run(sentence, alpha=1.5).probs)


@pytest.mark.parametrize("bad", [0.5, 2.5, float("nan"), [1.5, 1.5]])
def test_bad_alpha_is_refused(tiny_model, bad):
    with pytest.raises(SparsescopeError, match="alpha"):
        tiny_model.run("hello", alpha=bad)


@pytest.mark.parametrize("text", ["", "   \n\t "])
def test_empty_text_is_refused(tiny_model, text):
    with pytest.raises(EmptyTextError, match="empty"):
        tiny_model.run(text)


def test_too_long_text_names_limit_and_length(tiny_model):
    text = "word " * 600
    with pytest.raises(TextTooLongError) as err:
        tiny_model.run(text)
    assert err.value.limit == 512 and err.value.length == 602
    assert "512" in str(err.value) and "602" in str(err.value)
    out = tiny_model.run(text, truncate=True)
    assert out.n == 512 and out.truncated and out.tokens[-1] == "[SEP]"


def test_offsets_point_into_the_text(tiny_model):
    text = "Unbelievably, the chef's soufflé rose."
    out = tiny_model.run(text)
    assert out.special[0] and out.special[-1] and out.offsets[0] == (0, 0)
    for tok, (s, e), sp in zip(out.tokens, out.offsets, out.special, strict=True):
        if not sp:
            assert text[s:e].lower().startswith(tok.removeprefix("##")[:1]) or e > s


def test_batch_equals_single(tiny_model):
    texts = ["A short one.", "A somewhat longer sentence with more words in it."]
    outs = tiny_model.run_batch(texts, alpha=1.5)
    for t, o in zip(texts, outs, strict=True):
        single = tiny_model.run(t, alpha=1.5)
        assert torch.equal(o.graph, single.graph)
        torch.testing.assert_close(o.probs, single.probs, atol=1e-6, rtol=0)
        torch.testing.assert_close(o.hidden, single.hidden, atol=1e-5, rtol=0)


def test_missing_model_directory_errors_name_what_is_missing(tmp_path):
    with pytest.raises(ModelLoadError, match="does not exist"):
        load_model(tmp_path / "nope")
    with pytest.raises(ModelLoadError, match="config.json"):
        load_model(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(ModelLoadError, match="gpt2"):
        load_model(tmp_path)


def test_local_checkpoint_directory_loads(tmp_path, tiny_model):
    """path= loads any BERT checkpoint in the Hugging Face layout."""
    from safetensors.torch import save_file

    from sparse_core.model import default_model_path

    c = tiny_model.config
    (tmp_path / "config.json").write_text(
        json.dumps(
            {
                "model_type": "bert",
                "vocab_size": c.vocab_size,
                "hidden_size": c.hidden_size,
                "num_hidden_layers": c.num_layers,
                "num_attention_heads": c.num_heads,
                "intermediate_size": c.intermediate_size,
                "max_position_embeddings": c.max_positions,
            }
        )
    )
    with pytest.raises(ModelLoadError, match="tokenizer"):
        load_model(tmp_path)
    (tmp_path / "vocab.txt").write_text((default_model_path() / "vocab.txt").read_text())
    with pytest.raises(ModelLoadError, match="model.safetensors"):
        load_model(tmp_path)
    save_file(
        {f"bert.{k}": v.contiguous() for k, v in tiny_model.net.state_dict().items()},
        str(tmp_path / "model.safetensors"),
    )
    m = load_model(tmp_path, device="cpu")
    a, b = m.run("hello world"), tiny_model.run("hello world")
    assert a.tokens == b.tokens
    torch.testing.assert_close(a.probs, b.probs)


@pytest.mark.real_model
def test_real_model_end_to_end(real_model, sentence):
    """The default all-MiniLM-L6-v2: softmax parity with transformers and sentence-transformers."""
    from sentence_transformers import SentenceTransformer
    from transformers import BertModel

    from sparse_core.model import default_model_path

    assert (real_model.config.num_layers, real_model.config.num_heads) == (6, 12)
    assert real_model.config.head_dim == 32
    soft = real_model.run(sentence, alpha=1.0)
    ref = BertModel.from_pretrained(str(default_model_path()), attn_implementation="eager").eval()
    with torch.no_grad():
        h = ref(torch.tensor([soft.input_ids])).last_hidden_state[0]
    torch.testing.assert_close(soft.hidden, h, atol=1e-5, rtol=0)

    st = SentenceTransformer(str(default_model_path()), device="cpu")
    emb = torch.as_tensor(st.encode([sentence], normalize_embeddings=True))[0]
    ours = torch.nn.functional.normalize(soft.hidden.mean(0), dim=0)
    torch.testing.assert_close(ours, emb, atol=1e-5, rtol=0)

    sparse = real_model.run(sentence, alpha=1.5)
    gold = 1 - sparse.graph.float().mean().item()
    assert 0.3 < gold < 1.0, gold  # entmax attention of a real model is sparse
    assert torch.equal(sparse.graph, sparse.probs > 0)
