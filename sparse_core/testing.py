"""Tiny random models for tests and benchmarks: nothing is downloaded.

- :func:`tiny_model` builds a small random BERT in memory, wrapped as a
  :class:`~sparse_core.model.SparseModel` with the default model's tokenizer (what the
  ``tiny_model`` test fixture, the app tests and the page benchmarks use).
- :func:`write_tiny_checkpoint` writes a tiny random checkpoint directory in the Hugging Face
  layout for any architecture in :data:`TINY_ARCHITECTURES` (transformers config →
  ``save_pretrained``, with the default model's tokenizer files copied in), so that tests load it
  with :func:`~sparse_core.model.load_model` exactly as a user's model.
- :func:`entmax_reference` is the ``entmax`` package's α-entmax with its pitfalls fixed: the
  baseline the exactness tests and the entmax benchmark compare against.

Weights are drawn with a seeded generator, std 0.2 for matrices and 0.02 for vectors (norm
layers keep their initial values), so attention scores have a realistic spread and α = 1.5 gives
sparse graphs. ``transformers`` is imported inside the functions that need it.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import torch
from torch import Tensor

from .entmax import _as_compute_dtype, _check_alpha
from .sources import ARCHITECTURES, default_model_path

#: architectures with a tiny builder (every supported one)
TINY_ARCHITECTURES = (
    "bert",
    "roberta",
    "xlm-roberta",
    "distilbert",
    "electra",
    "modernbert",
    "gpt2",
    "llama",
    "qwen2",
    "qwen3",
    "mistral",
    "gemma",
    "gemma2",
)
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
)


def tiny_config(
    arch: str,
    *,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int | None = None,
    hidden: int = 32,
    max_positions: int = 512,
    vocab_size: int | None = None,
):
    """A transformers config of a tiny model of ``arch`` (a ``model_type``).

    Decoders with key/value heads (Llama, Qwen, Mistral, Gemma) get ``kv_heads`` of them
    (default ``heads // 2``: grouped-query attention); GPT-2 scales its scores by the inverse
    layer index too; Mistral and Gemma-2 get an 8-token sliding window, Gemma-2 a logit cap;
    ModernBERT alternates global and local layers (every 2nd global; local ones see
    |i − j| ≤ 4: ``local_attention`` 8) with its two rotary bases.
    """
    import transformers as T

    if arch not in TINY_ARCHITECTURES:
        raise ValueError(f"no tiny builder for {arch!r}; choose one of {TINY_ARCHITECTURES}")
    V = vocab_size or _tokenizer_vocab_size()
    L, H, D, P = layers, heads, hidden, max_positions
    kv = kv_heads if kv_heads is not None else max(1, heads // 2)
    enc = dict(
        vocab_size=V,
        hidden_size=D,
        num_hidden_layers=L,
        num_attention_heads=H,
        intermediate_size=2 * D,
    )
    dec = dict(enc, num_key_value_heads=kv, max_position_embeddings=P)
    if arch == "bert":
        return T.BertConfig(**enc, max_position_embeddings=P)
    if arch in ("roberta", "xlm-roberta"):
        cls = T.RobertaConfig if arch == "roberta" else T.XLMRobertaConfig
        return cls(**enc, max_position_embeddings=P + 2, type_vocab_size=1, pad_token_id=1)
    if arch == "distilbert":
        return T.DistilBertConfig(
            vocab_size=V, dim=D, n_layers=L, n_heads=H, hidden_dim=2 * D, max_position_embeddings=P
        )
    if arch == "electra":
        return T.ElectraConfig(**enc, embedding_size=D // 2, max_position_embeddings=P)
    if arch == "modernbert":
        cls, sep = min(101, V - 1), min(102, V - 1)  # the tokenizer's [CLS] / [SEP]
        return T.ModernBertConfig(
            **enc, max_position_embeddings=P, global_attn_every_n_layers=2, local_attention=8,
            pad_token_id=0, cls_token_id=cls, bos_token_id=cls, sep_token_id=sep,
            eos_token_id=sep,
        )  # fmt: skip
    if arch == "gpt2":
        return T.GPT2Config(
            vocab_size=V, n_embd=D, n_layer=L, n_head=H, n_positions=P,
            scale_attn_by_inverse_layer_idx=True,
            bos_token_id=min(101, V - 1), eos_token_id=min(102, V - 1),
        )  # fmt: skip
    if arch == "llama":
        return T.LlamaConfig(**dec)
    if arch == "qwen2":
        return T.Qwen2Config(**dec)
    if arch == "qwen3":
        return T.Qwen3Config(**dec, head_dim=D // H)
    if arch == "mistral":
        return T.MistralConfig(**dec, sliding_window=8)
    if arch == "gemma":
        return T.GemmaConfig(**dec, head_dim=D // H)
    return T.Gemma2Config(
        **dec, head_dim=D // H, query_pre_attn_scalar=D // H, sliding_window=8,
        attn_logit_softcapping=5.0,
    )  # fmt: skip


def randomize_(net: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Seeded random weights: std 0.2 for matrices, 0.02 for vectors; norm layers untouched."""
    gen = torch.Generator().manual_seed(seed)
    skip = {
        id(p)
        for m in net.modules()
        if "norm" in type(m).__name__.lower()
        for p in m.parameters(recurse=False)
    }
    with torch.no_grad():
        for _, prm in sorted(net.named_parameters(), key=lambda kv: kv[0]):
            if id(prm) in skip:
                continue
            std = 0.2 if prm.dim() > 1 else 0.02
            prm.copy_(torch.randn(prm.shape, generator=gen) * std)
    return net


def write_tiny_checkpoint(
    directory: str | Path,
    arch: str,
    *,
    seed: int = 0,
    tokenizer_dir: str | Path | None = None,
    **shape,
) -> Path:
    """Write a tiny random ``arch`` model to ``directory`` (created) in the Hugging Face layout.

    ``shape``: :func:`tiny_config`'s keywords. The tokenizer files come from ``tokenizer_dir``
    (default: the shipped all-MiniLM-L6-v2, a WordPiece tokenizer). Returns the directory.
    """
    from transformers import AutoModel

    from .model import quiet_progress

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    cfg = tiny_config(arch, **shape)
    net = randomize_(AutoModel.from_config(cfg), seed)
    with quiet_progress():
        net.save_pretrained(str(out))
    src = Path(tokenizer_dir) if tokenizer_dir is not None else default_model_path()
    for name in TOKENIZER_FILES:
        if (src / name).is_file():
            shutil.copy(src / name, out / name)
    return out


def tiny_model(
    seed: int = 0, *, layers: int = 2, heads: int = 4, hidden: int = 32, max_positions: int = 512
):
    """A small random-initialised entmax BERT with the default model's tokenizer (fast tests).

    Built in memory (no directory); model id ``tiny-random-<layers>x<heads>-seed<seed>``.
    """
    from transformers import AutoModel

    from . import attention as A
    from .model import SparseModel
    from .tokens import load_tokenizer

    A.register()
    tok = load_tokenizer(default_model_path())
    cfg = tiny_config(
        "bert", layers=layers, heads=heads, hidden=hidden, max_positions=max_positions
    )
    net = AutoModel.from_config(cfg, attn_implementation=A.IMPLEMENTATION, add_pooling_layer=False)
    randomize_(net, seed)
    return SparseModel(
        net,
        tok,
        f"tiny-random-{layers}x{heads}-seed{seed}",
        torch.device("cpu"),
        ARCHITECTURES["bert"],
        max_tokens=max_positions,
    )


def _tokenizer_vocab_size() -> int:
    from .tokens import load_tokenizer

    return load_tokenizer(default_model_path()).get_vocab_size(with_added_tokens=True)


def entmax_reference(scores: Tensor, alpha: float | Tensor = 1.5, dim: int = -1) -> Tensor:
    """α-entmax computed by the ``entmax`` package (1.3), its pitfalls fixed: the test baseline.

    α = 1: ``torch.softmax``; α = 1.5: ``entmax15`` (sort); α = 2: ``sparsemax`` (sort); any
    other α, or a per-head α tensor: ``entmax_bisect`` (60 halvings). Fully ``-inf`` rows are
    filled with zeros before the call and zeroed after (the package raises or returns NaN on
    them); a per-head α is expanded to the batch shape with size 1 along ``dim``, which the
    package requires; rows whose α is 1 use softmax. Computes in the dtype of ``scores``.
    """
    from entmax import entmax15, entmax_bisect, sparsemax

    a = _check_alpha(alpha, scores, dim)
    with torch.no_grad():
        z = _as_compute_dtype(scores)
        dead = torch.isneginf(z).all(dim=dim, keepdim=True)
        zf = z.masked_fill(dead, 0.0)
        if isinstance(a, float):
            if a == 1.0:
                p = torch.softmax(zf, dim=dim)
            elif a == 1.5:
                p = entmax15(zf, dim=dim)
            elif a == 2.0:
                p = sparsemax(zf, dim=dim)
            else:
                p = entmax_bisect(zf, a, dim=dim, n_iter=60)
        else:
            shape = list(z.shape)
            shape[dim] = 1
            a_full = a.expand(*shape).to(z.dtype)
            p = entmax_bisect(zf, a_full.where(a_full > 1.0, 2.0), dim=dim, n_iter=60)
            soft = (a_full == 1.0).expand_as(z)
            if bool(soft.any()):
                p = torch.where(soft, torch.softmax(zf, dim=dim), p)
        return p.masked_fill(dead, 0.0)


def tiled_positions(model, positions: int):
    """``model`` (a BERT-family :class:`~sparse_core.model.SparseModel`, e.g. the shipped
    MiniLM) with its learned position embeddings tiled to ``positions`` (row p takes row
    p mod P of the P trained ones) and the token limit raised to match: the real weights and
    attention at lengths the checkpoint never saw (the long-text benchmarks; the
    graphs are real entmax graphs of real scores, the positions beyond P repeat).

    Returns a new SparseModel sharing every other weight with ``model``."""
    import copy

    from .model import SparseModel

    net = copy.copy(model.net)  # shallow: the encoder's weights are shared
    emb = copy.copy(net.embeddings)
    old = emb.position_embeddings.weight.detach()  # (P, D)
    reps = -(-positions // old.shape[0])
    tiled = old.repeat(reps, 1)[:positions].clone()  # (positions, D)
    emb.position_embeddings = torch.nn.Embedding.from_pretrained(tiled, freeze=True)
    emb.register_buffer(
        "position_ids", torch.arange(positions, device=old.device)[None], persistent=False
    )
    emb.register_buffer(
        "token_type_ids",
        torch.zeros(1, positions, dtype=torch.long, device=old.device),
        persistent=False,
    )
    net.embeddings = emb
    cfg = copy.deepcopy(net.config)
    cfg.max_position_embeddings = positions
    net.config = cfg
    return SparseModel(
        net,
        model.tokenizer,
        f"{model.model_id}@tiled{positions}",
        model._device,
        model.arch,
        max_tokens=positions,
        default_alpha=model.default_alpha,
    )


def write_tiled_checkpoint(path: str | os.PathLike, positions: int) -> Path:
    """The shipped MiniLM as a local checkpoint directory with its positions tiled to
    ``positions`` (:func:`tiled_positions`): a model the server and the commands load by path
    (``--model DIR``), for the long-text benchmarks (bench/bench_long.py). Returns the path."""

    from safetensors.torch import load_file, save_file

    src = default_model_path()
    dst = Path(path)
    dst.mkdir(parents=True, exist_ok=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        if (src / name).exists():
            shutil.copy(src / name, dst / name)
    cfg = json.loads((src / "config.json").read_text())
    cfg["max_position_embeddings"] = positions
    (dst / "config.json").write_text(json.dumps(cfg, indent=2))
    weights = load_file(str(src / "model.safetensors"))
    for key in [k for k in weights if k.endswith("position_embeddings.weight")]:
        old = weights[key]  # (P, D)
        weights[key] = old.repeat(-(-positions // old.shape[0]), 1)[:positions].contiguous()
    for key in [k for k in weights if k.endswith("embeddings.position_ids")]:
        weights[key] = torch.arange(positions)[None]
    save_file(weights, str(dst / "model.safetensors"), metadata={"format": "pt"})
    return dst


def random_selectors(
    layers: int, heads: int, head_dim: int, model_id: str, alpha: float = 1.5, seed: int = 0
) -> dict:
    """An untrained lightning indexer and AttnGate (definitions §12) for a model of this shape:
    the fit's own initial weights (``selectors.init_indexer`` / ``init_seer``), so the
    masks are real, if unlearned; to attach as ``Artefact.learned`` in tests."""
    from .selectors import Selector, init_indexer, init_seer

    ix = init_indexer(layers, heads * head_dim, seed=seed)
    gen = torch.Generator().manual_seed(seed + 1)  # biases too, so that ReLU keeps some pairs
    ix["bq"] = torch.randn(ix["bq"].shape, generator=gen) * 0.1
    return {
        "indexer": Selector("indexer", model_id, alpha, ix, {"name": "random-test-selector"}),
        "seer": Selector("seer", model_id, alpha, init_seer(layers, heads, head_dim, seed=seed),
                         {"name": "random-test-selector"}),
    }  # fmt: skip
