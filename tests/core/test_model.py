"""The entmax transformer on the tiny BERT and the real default model: parity, the graph, causal
mode, sparse-consistency; where models come from and the errors; tokens as a person reads them.

Every other architecture: tests/core/test_architectures.py."""

from __future__ import annotations

import json
import math
import shutil

import pytest
import torch

from sparse_core import (
    EmptyTextError,
    ModelLoadError,
    ModelNotFoundError,
    ModelTooLargeError,
    SparsescopeError,
    TextTooLongError,
    UnsupportedModelError,
)
from sparse_core.entmax import entmax
from sparse_core.errors import UnknownTokensError
from sparse_core.model import DEFAULT_MODEL_ID, SUPPORTED_MODEL_TYPES, load_model
from sparse_core.tokens import TokenReader

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
    """definitions §1 / Prop. 1: entmax over scores restricted to any superset of G reproduces P."""
    out = tiny_model.run(sentence, alpha=alpha)
    d = out.queries.shape[-1]
    scores = out.queries @ out.keys.transpose(-1, -2) / math.sqrt(d)  # (L, H, n, n)
    torch.testing.assert_close(out.scores(), scores)  # BERT's scaling is 1/√d
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


@pytest.mark.parametrize("text", ["\U0001f642 \U0001f680", "x" * 101, "\U0001f642\u200b"])
def test_a_text_of_unknown_tokens_only_says_so(tiny_model, text):
    """Not "empty": every token is [UNK]."""
    with pytest.raises(UnknownTokensError, match="none of this text's tokens is in the model"):
        tiny_model.run(text)
    assert tiny_model.run("\U0001f642 hello").n == 4  # one unknown token among known ones is fine


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


@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
@pytest.mark.parametrize("alpha", [1.5, "per-head"])
def test_batch_equals_single(tiny_model, one_thread, causal, alpha):
    """A right-padded batch of texts of different lengths: every text's probabilities,
    queries, keys and hidden states are bit for bit its single run's (one torch thread)."""
    if alpha == "per-head":
        c = tiny_model.config
        alpha = torch.linspace(1.0, 2.0, c.num_layers * c.num_heads).view(c.num_layers, -1)
    texts = ["A short one.", "A somewhat longer sentence with more words in it.", "Hi", "Ok then."]
    outs = tiny_model.run_batch(texts, alpha=alpha, causal=causal)
    for t, o in zip(texts, outs, strict=True):
        single = tiny_model.run(t, alpha=alpha, causal=causal)
        assert o.tokens == single.tokens
        for name in ("probs", "queries", "keys", "hidden", "graph"):
            assert torch.equal(getattr(o, name), getattr(single, name)), (t, name)


def test_real_model_batch_of_different_lengths_equals_single_runs(real_model, one_thread):
    """The same with the real MiniLM, bidirectional and causal: 12 texts of 4 to 40 tokens."""
    words = "the chef who ran to the store was out of food so he went back home at last".split()
    texts = [" ".join(words[i % 5 : i % 5 + 2 + i]) + "." for i in range(12)]
    assert len({len(real_model.encode(t).ids) for t in texts}) >= 10
    for causal in (False, True):
        outs = real_model.run_batch(texts, alpha=1.5, causal=causal)
        for t, o in zip(texts, outs, strict=True):
            single = real_model.run(t, alpha=1.5, causal=causal)
            for name in ("probs", "queries", "keys", "hidden"):
                assert torch.equal(getattr(o, name), getattr(single, name)), (causal, t, name)


def test_batch_longer_in_all_than_the_model_positions(one_thread):
    """Packed texts keep their own positions: 8 texts of ~90 tokens (over 512 together) on a
    model of 128 positions, each equal to its single run."""
    from sparse_core.testing import tiny_model as make

    m = make(seed=2, max_positions=128)
    texts = [" ".join(f"w{i}x{j}" for j in range(30)) for i in range(8)]
    assert sum(len(m.encode(t).ids) for t in texts) > 4 * 128
    for t, o in zip(texts, m.run_batch(texts), strict=True):
        single = m.run(t)
        assert torch.equal(o.probs, single.probs) and torch.equal(o.hidden, single.hidden)


def test_rows_kernel_floor_is_where_row_results_stop_depending_on_the_row_count(one_thread):
    from sparse_core.model import rows_kernel_floor

    floor = rows_kernel_floor(48)
    assert 1 <= floor <= 33
    g = torch.Generator().manual_seed(1)
    w, x = torch.randn(48, 48, generator=g), torch.randn(70, 48, generator=g)
    full = torch.nn.functional.linear(x, w)
    for k in range(floor, 40):
        assert torch.equal(torch.nn.functional.linear(x[:k], w), full[:k])


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


def test_concurrent_runs_keep_their_own_settings(tiny_model, sentence):
    """α, causality and recordings travel per run (a context variable), not through the model:
    threads running at once with different settings get what they asked for."""
    from concurrent.futures import ThreadPoolExecutor

    settings = [(1.0, False), (2.0, True), (1.5, False), (1.25, True)] * 3
    want = {s: tiny_model.run(sentence, alpha=s[0], causal=s[1]) for s in settings[:4]}
    with ThreadPoolExecutor(max_workers=4) as pool:
        got = list(pool.map(lambda s: tiny_model.run(sentence, alpha=s[0], causal=s[1]), settings))
    for s, out in zip(settings, got, strict=True):
        assert out.causal == s[1] and out.alpha == s[0]
        assert torch.equal(out.graph, want[s].graph)
        torch.testing.assert_close(out.probs, want[s].probs, atol=1e-6, rtol=0)


def test_local_directory_of_each_kind_of_tokenizer_file(tmp_path, tiny_model):
    """vocab.txt alone (no tokenizer.json) is converted through transformers."""
    from sparse_core.testing import write_tiny_checkpoint

    d = write_tiny_checkpoint(tmp_path / "bert", "bert")
    (d / "tokenizer.json").unlink()
    m = load_model(d, device="cpu")
    assert m.model_id == "bert"
    a, b = m.run("Hello, unbelievable world!"), tiny_model.run("Hello, unbelievable world!")
    assert a.tokens == b.tokens and a.special == b.special and a.offsets == b.offsets


# ------------------------------------------------------------------------------ errors


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
    from sparse_core.testing import write_tiny_checkpoint

    return write_tiny_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny-bert", "bert")


_TOKENIZER_NAMES = (
    "tokenizer.json",
    "vocab.txt",
    "tokenizer_config.json",
    "special_tokens_map.json",
)


def _copy(src, dst, *, without=()):
    dst.mkdir(parents=True)
    for f in src.iterdir():
        if f.name not in without:
            shutil.copy(f, dst / f.name)
    return dst


def test_missing_directory_and_config(tmp_path):
    with pytest.raises(ModelLoadError, match="does not exist") as err:
        load_model(tmp_path / "nope")
    assert err.value.field == "model"
    with pytest.raises(ModelLoadError, match="does not exist"):
        load_model("./relative/nope")
    with pytest.raises(ModelLoadError, match="no config.json"):
        load_model(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ModelLoadError, match="not valid JSON"):
        load_model(tmp_path)


def test_unsupported_architecture_lists_the_supported_ones(tmp_path, bert_dir):
    d = _copy(bert_dir, tmp_path / "t5")
    (d / "config.json").write_text(json.dumps({"model_type": "t5", "d_model": 32}))
    with pytest.raises(UnsupportedModelError) as err:
        load_model(d)
    msg = str(err.value)
    assert err.value.field == "model" and "'t5' is not supported" in msg
    for name in SUPPORTED_MODEL_TYPES:
        assert name in msg


def test_directory_without_tokenizer_files(tmp_path, bert_dir):
    d = _copy(bert_dir, tmp_path / "m", without=_TOKENIZER_NAMES)
    with pytest.raises(ModelLoadError, match="no tokenizer files: expected tokenizer.json"):
        load_model(d)


def test_directory_without_weights(tmp_path, bert_dir):
    d = _copy(bert_dir, tmp_path / "m", without=("model.safetensors",))
    with pytest.raises(ModelLoadError, match="no weights: expected model.safetensors"):
        load_model(d)


def test_weights_that_lack_layers_are_refused(tmp_path, bert_dir):
    from safetensors.torch import load_file, save_file

    d = _copy(bert_dir, tmp_path / "m")
    sd = load_file(str(d / "model.safetensors"))
    save_file({k: v for k, v in sd.items() if ".layer.1." not in k}, str(d / "model.safetensors"))
    with pytest.raises(ModelLoadError, match="lacks .* weights the model needs, e.g. encoder"):
        load_model(d)


def test_tokenizer_larger_than_the_embeddings_is_refused(tmp_path):
    from sparse_core.testing import write_tiny_checkpoint

    d = write_tiny_checkpoint(tmp_path / "m", "gpt2", vocab_size=1000)
    with pytest.raises(ModelLoadError, match="tokenizer has 30522 tokens but the model only 1000"):
        load_model(d)


def test_a_name_not_in_the_cache_says_where_the_cache_is(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(ModelNotFoundError) as err:
        load_model("someone/not-here")
    msg = str(err.value)
    assert "'someone/not-here' is neither a local directory nor in the Hugging Face cache" in msg
    assert (
        str(tmp_path / "hub") in msg and "HF_HOME" in msg and "hf download someone/not-here" in msg
    )


def test_a_model_too_large_for_memory_is_refused_before_loading(bert_dir):
    with pytest.raises(ModelTooLargeError) as err:
        load_model(bert_dir, device="cpu", memory_limit=1 << 20)
    msg = str(err.value)
    assert err.value.free == 1 << 20 and err.value.need > err.value.free
    assert "needs about" in msg and "of weights in float32" in msg and "512 tokens" in msg
    assert "0.00 GiB is the memory limit" in msg
    # the estimate: 4 bytes per stored parameter plus the attention of 512 tokens
    from sparse_core.sources import estimate_bytes, weight_elements

    numel = weight_elements(bert_dir, {})
    weights, attention = estimate_bytes(numel, 4, 2, 4, 8, 512)
    assert weights == 4 * numel and attention > 2 * 4 * 512 * 512 * 4
    assert load_model(bert_dir, device="cpu", memory_limit=weights + attention).config.num_layers


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"device": "tpu"}, "device must be 'auto', 'cpu' or 'cuda'"),
        ({"dtype": "int8"}, "dtype must be one of float32, bfloat16, float16"),
        ({"max_tokens": 1}, "max_tokens must be an integer >= 2"),
    ],
)
def test_bad_load_arguments(bert_dir, kwargs, match):
    with pytest.raises(SparsescopeError, match=match):
        load_model(bert_dir, **kwargs)


def test_max_tokens_caps_the_models_positions(bert_dir):
    m = load_model(bert_dir, device="cpu", max_tokens=12)
    assert m.max_positions == m.config.max_positions == 12
    text = "one two three four five six seven eight nine ten eleven twelve"
    with pytest.raises(TextTooLongError, match="at most 12 positions"):
        m.run(text)
    out = m.run(text, truncate=True)
    assert out.n == 12 and out.truncated and out.tokens[-1] == "[SEP]" and out.special[-1]


def test_bfloat16_weights_keep_float32_attention(bert_dir):
    m = load_model(bert_dir, device="cpu", dtype="bfloat16")
    assert next(m.net.parameters()).dtype == torch.bfloat16
    out = m.run("The chef went back to the store.", alpha=1.5)
    assert out.probs.dtype == out.queries.dtype == out.hidden.dtype == torch.float32
    torch.testing.assert_close(out.probs.sum(-1), torch.ones(out.probs.shape[:-1]))
    ref = load_model(bert_dir, device="cpu").run("The chef went back to the store.", alpha=1.5)
    assert (out.probs - ref.probs).abs().max() < 0.1  # bf16 weights, same model


# ------------------------------------------------------------------------------ tokens

LINES = [
    "The café served naïve crème brûlée to the chef.",
    "Unbelievably, the chef's soufflé rose again and again.",
    "Hello world, hello there, café café café.",
] * 5
TOKEN_TEXT = "The café's soufflé rose, unbelievably."


def _byte_level_bpe(template: bool):
    """A tiny GPT-2-style byte-level BPE tokenizer trained here (optionally <s> … </s>)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<s>", "</s>", "<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(LINES, trainer)
    if template:
        s, e = tok.token_to_id("<s>"), tok.token_to_id("</s>")
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A </s>", special_tokens=[("<s>", s), ("</s>", e)]
        )
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def _metaspace():
    """A tiny SentencePiece-style (Metaspace "▁") tokenizer with <s> … </s>."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"], show_progress=False
    )
    tok.train_from_iterator(LINES, trainer)
    s, e = tok.token_to_id("<s>"), tok.token_to_id("</s>")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", s), ("</s>", e)]
    )
    return tok


def _read(tok, text=TOKEN_TEXT):
    return TokenReader(tok).read(tok.encode(text), text)


def test_wordpiece_tokens_specials_offsets_and_continuations(tiny_model):
    text = "Unbelievably, the chef's soufflé rose. [SEP] again"
    enc = tiny_model.encode(text)
    assert tiny_model.tokens.kind == "wordpiece"
    assert enc.special[0] and enc.special[-1] and enc.tokens[0] == "[CLS]"
    typed_sep = enc.tokens.index("[SEP]")
    assert typed_sep < len(enc.tokens) - 1 and enc.special[typed_sep]  # typed: still special
    for tok, shown, cont, (s, e), sp in zip(
        enc.tokens, enc.display, enc.continuation, enc.offsets, enc.special, strict=True
    ):
        if sp:
            assert (s, e) == (0, 0) and shown == tok and not cont
            continue
        assert cont == tok.startswith("##") and shown == tok.removeprefix("##")
        assert text[s:e].lower() == shown or text[s:e].lower().startswith(shown[:1])
    word = enc.display[1:6]  # "unbelievably" in five WordPiece pieces
    assert "".join(word) == "unbelievably" and enc.continuation[1:7] == [False] + [True] * 4 + [
        False
    ]


def test_byte_level_bpe_display_is_the_text():
    enc = _read(_byte_level_bpe(template=False))
    assert TokenReader(_byte_level_bpe(template=False)).kind == "bytelevel"
    assert not any(enc.special) and "".join(enc.display) == TOKEN_TEXT
    assert any(t.startswith("Ġ") for t in enc.tokens) and " café" in enc.display
    for i, (shown, cont, (s, e)) in enumerate(
        zip(enc.display, enc.continuation, enc.offsets, strict=True)
    ):
        # the first token starts a word, and so does a piece after a lone space token ("Ġ")
        after_space = i > 0 and enc.display[i - 1][-1:].isspace()
        assert cont == (i > 0 and not shown[:1].isspace() and not after_space)
        if shown.strip():
            assert TOKEN_TEXT[s:e] == shown.strip()  # offsets trimmed to the visible characters


def test_byte_level_bpe_specials_and_truncation_keep_the_end_token():
    tok = _byte_level_bpe(template=True)
    enc = _read(tok)
    assert enc.tokens[0] == "<s>" and enc.tokens[-1] == "</s>"
    assert enc.special[0] and enc.special[-1] and not any(enc.special[1:-1])
    assert enc.offsets[0] == enc.offsets[-1] == (0, 0)
    assert "".join(enc.display[1:-1]) == TOKEN_TEXT
    from sparse_core.tokens import truncate_encoding

    cut = truncate_encoding(enc, 5)
    assert cut.tokens == enc.tokens[:4] + ["</s>"] and cut.truncated
    assert len(cut.display) == len(cut.continuation) == 5


def test_sentencepiece_display_and_byte_fallback_tokens():
    tok = _metaspace()
    assert TokenReader(tok).kind == "metaspace"
    enc = _read(tok)
    assert enc.special[0] and enc.special[-1] and enc.display[0] == "<s>"
    assert any(t.startswith("▁") for t in enc.tokens)
    assert "".join(enc.display[1:-1]) == " " + TOKEN_TEXT  # "▁" -> a leading space
    words = [d for d, c in zip(enc.display, enc.continuation, strict=True) if not c]
    assert " café" in words and "'s" not in words
    for shown, (s, e), sp in zip(enc.display, enc.offsets, enc.special, strict=True):
        if not sp and shown.strip():
            assert TOKEN_TEXT[s:e] == shown.strip()
    from sparse_core.tokens import _from_metaspace

    assert _from_metaspace("<0x0A>", "") == "\n" and _from_metaspace("<0xC3>", "é") == "é"


def test_a_decoder_with_a_byte_level_tokenizer_end_to_end(tmp_path):
    """A tiny GPT-2 checkpoint with its own byte-level BPE tokenizer: tokens as read."""
    from sparse_core.testing import write_tiny_checkpoint

    tok_dir = tmp_path / "tok"
    tok_dir.mkdir()
    tok = _byte_level_bpe(template=False)
    tok.save(str(tok_dir / "tokenizer.json"))
    d = write_tiny_checkpoint(
        tmp_path / "gpt2-bpe", "gpt2", tokenizer_dir=tok_dir, vocab_size=tok.get_vocab_size()
    )
    m = load_model(d, device="cpu")
    out = m.run(TOKEN_TEXT, causal=False)
    assert out.causal and m.config.is_decoder
    assert "".join(out.display) == TOKEN_TEXT and not any(out.special)
    assert len(out.display) == len(out.continuation) == out.n == out.probs.shape[-1]


@pytest.fixture(scope="module")
def original_model():
    from sparse_core.sources import ORIGINAL_MODEL_ID

    return load_model(ORIGINAL_MODEL_ID, device="cpu")


@pytest.mark.real_model
def test_default_is_the_adapted_minilm(real_model, original_model, sentence):
    """The default model is all-MiniLM-L6-v2 adapted with 1.5-entmax: trained α 1.5
    recorded in its config, the original's shape and tokenizer, other attention weights."""
    from sparse_core.sources import ADAPTED_MODEL_ID, ORIGINAL_MODEL_ID

    assert DEFAULT_MODEL_ID == ADAPTED_MODEL_ID == real_model.model_id
    c = real_model.config
    assert real_model.default_alpha == 1.5 and real_model.alpha_trained
    assert (c.num_layers, c.num_heads) == (6, 12)
    assert original_model.model_id == ORIGINAL_MODEL_ID and original_model.default_alpha == 1.5
    assert not original_model.alpha_trained
    a, b = real_model.run(sentence), original_model.run(sentence)
    assert a.input_ids == b.input_ids and a.alpha == 1.5
    assert not torch.equal(a.graph, b.graph)
    ea = real_model.net.embeddings.word_embeddings.weight
    assert torch.equal(ea, original_model.net.embeddings.word_embeddings.weight)  # not trained
    qa = real_model.net.encoder.layer[0].attention.self.query.weight
    assert not torch.equal(qa, original_model.net.encoder.layer[0].attention.self.query.weight)


@pytest.mark.real_model
def test_the_shipped_learned_alpha_model_runs_each_head_at_its_own_alpha(sentence):
    """sparsescope/all-MiniLM-L6-v2-entmax-learned: rebuilt offline from its delta,
    an (L, H) table of learned alphas as its default_alpha, used by run() unless overridden."""
    from sparse_core import load_model
    from sparse_core.entmax import entmax

    m = load_model("sparsescope/all-MiniLM-L6-v2-entmax-learned", device="cpu")
    table = m.default_alpha
    assert isinstance(table, torch.Tensor) and table.shape == (6, 12) and m.alpha_trained
    assert 1.3 < float(table.min()) < 1.5 < float(table.max()) < 1.6  # docs/results.md
    assert torch.equal(m.alpha_table(), table)
    run = m.run(sentence)
    assert torch.equal(run.alpha_table(), table)
    s = run.scores(5)  # (H, n, n)
    for h in (0, 8):  # alphas 1.450 and 1.331: each head at its own
        torch.testing.assert_close(
            run.probs[5, h], entmax(s[h], float(table[5, h])), atol=2e-6, rtol=0
        )
    fixed = m.run(sentence, alpha=1.5)
    assert fixed.alpha == 1.5 and not torch.equal(fixed.graph, run.graph)


@pytest.mark.real_model
def test_real_model_end_to_end(original_model, sentence):
    """all-MiniLM-L6-v2 (the original): softmax parity with transformers and
    sentence-transformers."""
    from sentence_transformers import SentenceTransformer
    from transformers import BertModel

    from sparse_core.model import default_model_path
    from sparse_core.sources import ORIGINAL_MODEL_ID

    real_model = original_model
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

    c = real_model.config
    assert (c.model_type, c.num_kv_heads, c.is_decoder, c.max_positions) == ("bert", 12, False, 512)
    assert real_model.model_id == ORIGINAL_MODEL_ID and soft.model_id == ORIGINAL_MODEL_ID
    assert soft.display[0] == "[CLS]" and soft.special[0] and soft.special[-1]

    sparse = real_model.run(sentence, alpha=1.5)
    gold = 1 - sparse.graph.float().mean().item()
    assert 0.3 < gold < 1.0, gold  # entmax attention of a real model is sparse
    assert torch.equal(sparse.graph, sparse.probs > 0)


# ------------------------------------------------------------------- what cannot work


def _wrap(cfg, model_type: str):
    """transformers' model for ``cfg`` with our attention, wrapped as a SparseModel."""
    from transformers import AutoModel

    from sparse_core import attention as A
    from sparse_core.model import SparseModel, default_model_path
    from sparse_core.sources import Architecture
    from sparse_core.tokens import load_tokenizer

    A.register()
    net = AutoModel.from_config(cfg, attn_implementation=A.IMPLEMENTATION)
    arch = Architecture(model_type, model_type, decoder=False)
    return SparseModel(
        net, load_tokenizer(default_model_path()), model_type, torch.device("cpu"), arch
    )


def test_attention_outside_the_interface_is_refused_with_the_reason():
    from transformers import DebertaV2Config

    cfg = DebertaV2Config(
        vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64,
    )  # fmt: skip
    with pytest.raises(
        ModelLoadError, match="does not go through transformers' AttentionInterface"
    ):
        _wrap(cfg, "deberta-v2")


def test_one_attention_module_shared_by_every_layer_is_refused():
    from transformers import AlbertConfig

    cfg = AlbertConfig(
        vocab_size=30522, embedding_size=16, hidden_size=32, num_hidden_layers=3,
        num_attention_heads=4, intermediate_size=64,
    )  # fmt: skip
    with pytest.raises(ModelLoadError, match="one attention module serves several layers"):
        _wrap(cfg, "albert")


@pytest.mark.parametrize("arch", ["bert", "gpt2", "llama"])
@pytest.mark.parametrize("causal", [False, True])
def test_run_without_hidden_states_records_the_same(tmp_path, sentence, arch, causal):
    """``hidden=False`` stops the forward after the last layer's attention: queries, keys,
    probabilities and graph are the full run's bit for bit, the hidden states are empty."""
    from sparse_core.testing import write_tiny_checkpoint

    model = load_model(write_tiny_checkpoint(tmp_path / arch, arch, seed=3), device="cpu")
    full = model.run(sentence, alpha=1.5, causal=causal)
    part = model.run(sentence, alpha=1.5, causal=causal, hidden=False)
    for name in ("queries", "keys", "probs", "graph"):
        assert torch.equal(getattr(full, name), getattr(part, name)), name
    assert full.hidden.shape[0] == full.n and part.hidden.numel() == 0
    assert part.causal == full.causal
    again = model.run(sentence, alpha=1.5, causal=causal)  # the state of a stopped run is gone
    assert torch.equal(again.hidden, full.hidden)
