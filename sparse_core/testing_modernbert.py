"""Tiny ModernBERT-style tokenizers and SparseModernBERT-style checkpoints for tests.

Nothing is downloaded. :func:`modernbert_tokenizer` trains a small byte-level BPE tokenizer laid
out like ModernBERT's (answerdotai/ModernBERT-base: the GPT-NeoX/OLMo byte-level BPE with NFC,
``[CLS] $A [SEP]`` post-processing, special tokens ``[UNK] [CLS] [SEP] [PAD] [MASK]`` — ``[MASK]``
strips the space before it — ``<|endoftext|>`` and ``<|padding|>``, and non-special added tokens
for runs of spaces and ``|||IP_ADDRESS|||``). :func:`write_sparse_modernbert_checkpoint` writes
a checkpoint as deep-spin/SparseModernBERT's training script saves one (``train_modernbert.py``:
``CustomModernBertForMaskedLM``, a ModernBertForMaskedLM with the α keys of
``sparse_modern_bert.get_custom_model`` in config.json, transformers-4.48-style keys
``global_attn_every_n_layers`` / ``global_rope_theta`` / ``local_rope_theta``), and
:func:`put_in_hub_cache` files a directory into a Hugging Face cache the way ``hf download``
does (``models--org--name/blobs``, ``snapshots/<commit>/`` links, ``refs/main``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

#: special tokens of ModernBERT's tokenizer (special_tokens_map.json of ModernBERT checkpoints)
MODERNBERT_SPECIALS = ("[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]")
_CORPUS = (
    "The chef who ran to the store was out of food, so he went back.",
    "ModernBERT alternates global and local attention layers over long documents.",
    "def entmax(scores, alpha):\n    return sparse(scores)  # café, naïve, crème brûlée",
    "Children played near the water while their parents talked about the harvest.",
    "In winter the wheel froze, so the village ground its grain by hand.",
    "A merchant brought salt, cloth and news from the capital; nobody believed him.",
)


def modernbert_tokenizer(vocab_size: int = 700):
    """A small ModernBERT-style byte-level BPE ``tokenizers.Tokenizer`` (module docstring)."""
    from tokenizers import (
        AddedToken,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
        trainers,
    )

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|padding|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(_CORPUS) * 4, trainer)
    tok.add_tokens(
        [AddedToken("|||IP_ADDRESS|||", normalized=True)]
        + [AddedToken(" " * k, normalized=True) for k in (4, 3, 2)]
    )
    tok.add_special_tokens(
        [AddedToken("<|endoftext|>", normalized=False, special=True)]
        + [
            AddedToken(t, lstrip=t == "[MASK]", normalized=False, special=True)
            for t in MODERNBERT_SPECIALS
        ]
    )
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
    )
    return tok


def save_modernbert_tokenizer(tok, directory: Path) -> None:
    """tokenizer.json, special_tokens_map.json and tokenizer_config.json as ModernBERT ships."""
    tok.save(str(directory / "tokenizer.json"))
    names = dict(zip(("unk", "cls", "sep", "pad", "mask"), MODERNBERT_SPECIALS, strict=True))
    specials = {
        f"{k}_token": {"content": v, "lstrip": v == "[MASK]", "normalized": False,
                       "rstrip": False, "single_word": False}
        for k, v in names.items()
    }  # fmt: skip
    (directory / "special_tokens_map.json").write_text(json.dumps(specials, indent=2))
    cfg = {f"{k}_token": v for k, v in names.items()}
    cfg.update(model_max_length=8192, tokenizer_class="PreTrainedTokenizerFast")
    (directory / "tokenizer_config.json").write_text(json.dumps(cfg, indent=2))


def write_modernbert_checkpoint(
    directory: str | Path,
    *,
    layers: int = 4,
    heads: int = 4,
    hidden: int = 32,
    every: int = 3,
    local_attention: int = 8,
    max_positions: int = 8192,
    intermediate: int | None = None,
    vocab_size: int | None = None,
    seed: int = 0,
    sparse: dict | None = None,
) -> Path:
    """A tiny random ModernBERT (ModernBertForMaskedLM weights) with a ModernBERT-style tokenizer.

    Layer l is global when l % ``every`` == 0, else local with ``local_attention`` tokens
    (|i − j| ≤ local_attention // 2); the GLU width is ``intermediate`` (default 2 × hidden),
    the embeddings ``vocab_size`` (default: the tokenizer's). ``sparse``: config.json keys of a
    SparseModernBERT checkpoint (e.g. ``{"initial_alpha": 1.5}``); the config is then written
    as the reference's training script saves it (module docstring).
    """
    import transformers as T

    from .model import quiet_progress
    from .testing import randomize_

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    tok = modernbert_tokenizer()
    ids = {t: tok.token_to_id(t) for t in MODERNBERT_SPECIALS}
    cfg = T.ModernBertConfig(
        vocab_size=vocab_size or tok.get_vocab_size(with_added_tokens=True), hidden_size=hidden,
        num_hidden_layers=layers, num_attention_heads=heads,
        intermediate_size=intermediate or 2 * hidden,
        max_position_embeddings=max_positions, global_attn_every_n_layers=every,
        local_attention=local_attention, pad_token_id=ids["[PAD]"], cls_token_id=ids["[CLS]"],
        bos_token_id=ids["[CLS]"], sep_token_id=ids["[SEP]"], eos_token_id=ids["[SEP]"],
    )  # fmt: skip
    net = randomize_(T.ModernBertForMaskedLM(cfg), seed)
    with quiet_progress():
        net.save_pretrained(str(out))
    save_modernbert_tokenizer(tok, out)
    if sparse is not None:
        saved = json.loads((out / "config.json").read_text())
        for key in ("layer_types", "rope_parameters", "dtype"):
            saved.pop(key, None)
        saved.update(
            architectures=["CustomModernBertForMaskedLM"],
            global_attn_every_n_layers=every,
            global_rope_theta=160000.0,
            local_rope_theta=10000.0,
            torch_dtype="float32",
            transformers_version="4.48.0",
            use_triton_entmax=True,
            pre_iter=5,
            post_iter=5,
            **sparse,
        )
        (out / "config.json").write_text(json.dumps(saved, indent=2))
    return out


def put_in_hub_cache(
    cache: str | Path, repo_id: str, model_dir: str | Path, commit: str = "a" * 40
) -> Path:
    """File ``model_dir``'s files into the hub cache ``cache`` as ``repo_id`` at ``commit``:
    content-addressed blobs, a snapshot of relative links, ``refs/main``. Returns the snapshot."""
    repo = Path(cache) / f"models--{repo_id.replace('/', '--')}"
    blobs, snap = repo / "blobs", repo / "snapshots" / commit
    blobs.mkdir(parents=True, exist_ok=True)
    snap.mkdir(parents=True, exist_ok=True)
    for f in sorted(Path(model_dir).iterdir()):
        if not f.is_file():
            continue
        digest = hashlib.sha256(f.read_bytes()).hexdigest()
        shutil.copy(f, blobs / digest)
        link = snap / f.name
        if link.exists() or link.is_symlink():
            link.unlink()
        os.symlink(os.path.join("..", "..", "blobs", digest), link)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(commit)
    return snap
