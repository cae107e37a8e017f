"""ModernBERT and SparseModernBERT as entmax transformers, on tiny random checkpoints.

The checkpoints are written by sparse_core.testing_modernbert with a ModernBERT-style byte-level
BPE tokenizer ([CLS] … [SEP]) and ModernBertForMaskedLM weights, and loaded with load_model from
a directory or from a Hugging Face cache layout, as a user's download would be. Layers 0 and 3
are global, 1 and 2 local with |i − j| ≤ 4 (local_attention 8).
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from sparse_core.entmax import entmax
from sparse_core.errors import ModelLoadError, UnsupportedModelError
from sparse_core.model import load_model
from sparse_core.modernbert import trained_alpha
from sparse_core.testing_modernbert import put_in_hub_cache, write_modernbert_checkpoint

TEXT = (
    "The chef who ran to the store was out of food, so he went back to the village and "
    "asked the merchant for salt, cloth and news from the capital."
)
W = 4  # half window of the tiny local layers
LOCAL, GLOBAL = [1, 2], [0, 3]
SPARSE_REPO = "sardinelab/SparseModernBERT-alpha1.5"


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("modernbert")
    plain = write_modernbert_checkpoint(root / "tiny-modernbert", seed=5)
    # as train_modernbert.py saves it: initial_alpha is the annealing schedule's start
    sparse = write_modernbert_checkpoint(
        root / "SparseModernBERT-alpha1.5", seed=6, sparse={"initial_alpha": 1.01}
    )
    return {"plain": plain, "sparse": sparse, "root": root}


@pytest.fixture(scope="module")
def mb(dirs):
    return load_model(dirs["plain"], device="cpu")


@pytest.fixture(scope="module")
def smb(dirs, tmp_path_factory):
    """SparseModernBERT-alpha1.5 loaded by name from a hub cache (HF_HUB_CACHE), offline."""
    cache = tmp_path_factory.mktemp("hub")
    put_in_hub_cache(cache, SPARSE_REPO, dirs["sparse"])
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_CACHE", str(cache))
        return load_model(SPARSE_REPO, device="cpu")


def _distance(n: int) -> torch.Tensor:
    i = torch.arange(n)
    return (i[:, None] - i[None, :]).abs()  # (n, n)


def test_local_layers_graphs_never_leave_their_window_global_layers_do(mb):
    assert mb.config.model_type == "modernbert" and not mb.config.is_decoder
    kinds = ["full_attention", "sliding_attention", "sliding_attention", "full_attention"]
    assert mb.net.config.layer_types == kinds
    for alpha in (1.0, 1.5, 2.0):
        out = mb.run(TEXT, alpha=alpha)
        far = _distance(out.n) > W
        assert out.n > 3 * W
        assert not out.graph[LOCAL][..., far].any(), alpha
        assert not out.probs[LOCAL][..., far].any()
        assert out.graph[GLOBAL][..., far].any(), alpha
    # the window is in the mask before entmax: P of a local layer is entmax over the window's
    # scores (renormalised there), not entmax over all scores with the far ones zeroed after
    out = mb.run(TEXT, alpha=1.5)
    far = _distance(out.n) > W
    for layer in LOCAL:
        s = out.scores(layer)  # (H, n, n), the layer's own scores, unmasked
        windowed = entmax(s.masked_fill(far, -math.inf), 1.5)
        torch.testing.assert_close(windowed, out.probs[layer], atol=1e-6, rtol=0)
        assert not torch.allclose(entmax(s, 1.5), out.probs[layer], atol=1e-3)


def _rotary(x: torch.Tensor, theta: float) -> torch.Tensor:
    """RoPE (rotate-half form) of x (H, n, d) at positions 0..n-1 with base theta."""
    d, n = x.shape[-1], x.shape[-2]
    inv = 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d)
    f = torch.arange(n, dtype=torch.float32)[:, None] * inv  # (n, d/2)
    cos, sin = torch.cat([f, f], -1).cos(), torch.cat([f, f], -1).sin()
    half = torch.cat([-x[..., d // 2 :], x[..., : d // 2]], -1)
    return x * cos + half * sin


def test_queries_and_keys_are_recorded_after_each_layers_own_rotary(mb):
    """Global layers rotate with θ = 160,000, local ones with θ = 10,000 (definitions §1: q, k as
    they enter the scores)."""
    seen: dict[int, torch.Tensor] = {}

    def keep(li):
        def hook(module, args, kwargs):
            x = args[0] if args else kwargs["hidden_states"]  # the layer's normed input
            seen[li] = x.detach().clone()

        return hook

    hooks = [
        layer.attn.register_forward_pre_hook(keep(li), with_kwargs=True)
        for li, layer in enumerate(mb.net.layers)
    ]
    try:
        out = mb.run(TEXT, alpha=1.5)
    finally:
        for h in hooks:
            h.remove()
    H, d = mb.config.num_heads, mb.config.head_dim
    for li, theta, other in ((0, 160000.0, 10000.0), (1, 10000.0, 160000.0)):
        with torch.no_grad():
            qkv = mb.net.layers[li].attn.Wqkv(seen[li][0]).view(out.n, 3, H, d)  # (n, 3, H, d)
        q, k = qkv[:, 0].transpose(0, 1), qkv[:, 1].transpose(0, 1)  # (H, n, d)
        torch.testing.assert_close(out.queries[li], _rotary(q, theta), atol=1e-5, rtol=0)
        torch.testing.assert_close(out.keys[li], _rotary(k, theta), atol=1e-5, rtol=0)
        assert (out.queries[li] - _rotary(q, other)).abs().max() > 1e-3


@pytest.mark.parametrize("which", ["plain", "sparse"])
def test_softmax_reproduces_transformers_eager_and_sdpa_forward(which, dirs, mb, smb):
    from transformers import AutoModel

    m = mb if which == "plain" else smb
    out = m.run(TEXT, alpha=1.0)
    ids = torch.tensor([out.input_ids])
    for impl in ("eager", "sdpa"):
        ref = AutoModel.from_pretrained(str(dirs[which]), attn_implementation=impl).eval()
        with torch.no_grad():
            h = ref(input_ids=ids).last_hidden_state[0]
        torch.testing.assert_close(out.hidden, h, atol=1e-4, rtol=0)
    assert (m.run(TEXT, alpha=1.5).hidden - out.hidden).abs().max() > 1e-3


@pytest.mark.parametrize("causal", [False, True])
def test_packed_batch_equals_single_runs(mb, causal, one_thread):
    texts = [TEXT, "A short one, here.", "In winter the wheel froze.", TEXT[:60]]
    outs = mb.run_batch(texts, alpha=1.5, causal=causal)
    assert len({o.n for o in outs}) == len(texts)
    for t, o in zip(texts, outs, strict=True):
        single = mb.run(t, alpha=1.5, causal=causal)
        assert o.tokens == single.tokens and o.causal == causal
        for name in ("probs", "queries", "keys", "hidden", "graph"):
            assert torch.equal(getattr(o, name), getattr(single, name)), (t, name)


def test_causal_option_for_the_encoder(mb):
    out = mb.run(TEXT, alpha=1.5, causal=True)
    n = out.n
    future = torch.ones(n, n, dtype=torch.bool).triu(1)
    assert out.causal and not out.graph[..., future].any()
    i = torch.arange(n)
    behind = (i[:, None] - i[None, :]) > W  # j < i - w: outside a local layer's window
    assert not out.graph[LOCAL][..., behind].any() and out.graph[GLOBAL][..., behind].any()
    torch.testing.assert_close(out.probs.sum(-1), torch.ones(out.probs.shape[:-1]))
    assert mb.run(TEXT, alpha=1.5).graph[..., future].any()  # bidirectional by default


def test_forward_masked_restricts_inside_the_window(mb):
    out = mb.run(TEXT, alpha=1.5)
    torch.testing.assert_close(mb.forward_masked(out, out.graph), out.hidden, atol=1e-5, rtol=0)
    full = torch.ones_like(out.graph)  # the model's own window still applies
    torch.testing.assert_close(mb.forward_masked(out, full), out.hidden, atol=1e-5, rtol=0)
    diag = torch.eye(out.n, dtype=torch.bool).expand_as(out.graph)
    assert (mb.forward_masked(out, diag) - out.hidden).abs().max() > 1e-3


def test_8192_positions_and_long_texts(dirs):
    m = load_model(dirs["plain"], device="cpu", max_tokens=8192, memory_limit=64 << 30)
    assert m.max_positions == 8192 and m.net.config.max_position_embeddings == 8192
    assert load_model(dirs["plain"], device="cpu").max_positions == 512  # the default cap
    long = " ".join([TEXT] * 20)
    out = m.run(long, alpha=1.5, hidden=False)
    assert out.n > 600  # past BERT's 512 positions
    assert not out.graph[LOCAL][..., _distance(out.n) > W].any()


def test_modernbert_tokens_as_read(mb):
    text = "The chef  ran\nto the [MASK] store. <|endoftext|> Café!"
    out = mb.run(text)
    assert out.display[0] == "[CLS]" and out.display[-1] == "[SEP]"
    assert out.special[0] and out.special[-1] and out.offsets[0] == out.offsets[-1] == (0, 0)
    assert mb.tokens.kind == "bytelevel" and any(t.startswith("Ġ") for t in out.tokens)
    assert not any("Ġ" in d or "Ċ" in d for d in out.display)
    typed = [d.strip() for d, s in zip(out.display, out.special, strict=True) if s]
    assert typed == ["[CLS]", "[MASK]", "<|endoftext|>", "[SEP]"]
    words = [
        d.strip()
        for d, c, s in zip(out.display, out.continuation, out.special, strict=True)
        if not c and not s and d.strip()
    ]
    spaces, newline = out.display.index("  "), out.display.index("\n")  # tokens of their own
    assert not out.continuation[spaces + 1] and out.display[spaces + 1] == "ran"
    assert not out.continuation[newline + 1]  # after a newline: a new word
    assert words[0] == "The" and words[-1] == "C"  # "Café!" in pieces: C|af|é|!
    plain = [d for d, sp in zip(out.display, out.special, strict=True) if not sp]
    assert "".join(plain) == text.replace(" [MASK]", "").replace("<|endoftext|>", "")
    for d, (s, e), sp in zip(out.display, out.offsets, out.special, strict=True):
        if not sp and d.strip():
            assert text[s:e] == d.strip()


# ------------------------------------------------------------------------- SparseModernBERT


def test_sparse_modernbert_loads_from_the_hub_cache_with_its_trained_alpha(smb):
    assert smb.model_id == SPARSE_REPO and smb.config.model_type == "modernbert"
    table = smb.default_alpha
    assert isinstance(table, torch.Tensor) and table.shape == (4, smb.config.num_heads)
    # the name's α (1.5) on the global layers, not initial_alpha (the schedule's start, 1.01);
    # softmax on the local layers, as the reference runs them
    assert (table[GLOBAL] == 1.5).all() and (table[LOCAL] == 1.0).all()
    out = smb.run(TEXT)
    assert torch.equal(out.alpha, table)
    assert torch.equal(out.probs, smb.run(TEXT, alpha=table).probs)
    window = _distance(out.n) <= W
    assert out.graph[LOCAL][..., window].all(), "softmax: dense inside the window"
    assert not out.graph[GLOBAL].all(), "entmax at 1.5: exact zeros"
    batch = smb.run_batch([TEXT, "In winter the wheel froze."])
    assert torch.equal(batch[0].alpha, table)


def test_an_explicit_alpha_overrides_the_trained_one(smb):
    out = smb.run(TEXT, alpha=2.0)
    assert out.alpha == 2.0
    window = _distance(out.n) <= W
    assert not out.graph[LOCAL][..., window].all(), "sparsemax in the local layers too"
    soft = smb.run(TEXT, alpha=1.0)
    assert soft.graph[GLOBAL].all() and soft.alpha == 1.0


def test_where_the_trained_alpha_is_read():
    mb = {"model_type": "modernbert"}
    assert trained_alpha(mb, "answerdotai/ModernBERT-base") is None
    assert trained_alpha({"model_type": "bert", "alpha": 1.5}, "x") is None
    got = trained_alpha({**mb, "alpha": 1.7, "initial_alpha": 1.01}, "o/SparseModernBERT-alpha2.0")
    assert got.alpha == 1.7 and "'alpha'" in got.source
    got = trained_alpha({**mb, "initial_alpha": 1.01}, "sardinelab/SparseModernBERT-alpha2.0")
    assert got.alpha == 2.0 and "name" in got.source
    got = trained_alpha({**mb, "initial_alpha": 1.25, "use_triton_entmax": True}, "my-run")
    assert got.alpha == 1.25 and "initial_alpha" in got.source
    got = trained_alpha({**mb, "architectures": ["CustomModernBertForMaskedLM"]}, "my-run")
    assert got.alpha == 2.0 and "default" in got.source
    assert trained_alpha(mb, "/data/SparseModernBERT-alpha1.5").alpha == 1.5
    for bad in (3.0, "high", True, float("nan")):
        with pytest.raises(ModelLoadError, match=r"must be a number in \[1, 2\]") as e:
            trained_alpha({**mb, "initial_alpha": bad}, "my-run")
        assert e.value.field == "model"


def test_a_bad_trained_alpha_is_refused_at_load(dirs, tmp_path):
    d = write_modernbert_checkpoint(tmp_path / "broken", sparse={"initial_alpha": 2.5})
    with pytest.raises(ModelLoadError, match="initial_alpha.*2.5.*must be a number in") as e:
        load_model(d, device="cpu")
    assert e.value.field == "model"


def test_remote_code_only_classes_are_refused_clearly(dirs, tmp_path):
    """A checkpoint whose model class exists only in its own code (auto_map) is refused; a
    ModernBERT that also ships code runs transformers' own class, never the shipped code."""
    import shutil

    d = tmp_path / "custom"
    shutil.copytree(dirs["plain"], d)
    cfg = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(
        json.dumps({**cfg, "model_type": "sparse_modernbert", "auto_map": {"AutoModel": "m.X"}})
    )
    with pytest.raises(UnsupportedModelError, match="auto_map.*never runs.*supported:.*modernbert"):
        load_model(d, device="cpu")

    marker = tmp_path / "code-ran"
    (d / "m.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\nX = None\n")
    (d / "config.json").write_text(json.dumps({**cfg, "auto_map": {"AutoModel": "m.X"}}))
    m = load_model(d, device="cpu")
    assert type(m.net).__name__ == "ModernBertModel" and not marker.exists()
    assert m.run(TEXT, alpha=1.5).n > 3 * W
