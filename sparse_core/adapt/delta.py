"""Writing a shipped adapted model's delta over its base weights (the format and the loading:
:mod:`sparse_core.shipped`).

:func:`save_delta` loads the adapted model and its base with their LM heads (:func:`.lm.load_lm`)
and stores, per parameter (tied ones once), the float16 difference of what training changed and
the float32 value of what the base lacks (the new head); unchanged parameters are not stored.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from ..errors import ModelLoadError
from ..shipped import FORMAT, file_sha256


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
        "base_weights_sha256": file_sha256(weights),
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
