"""An adaptation's output directory: the model (Hugging Face layout), checkpoints, the log.

``OUT/`` after a run::

    config.json, model.safetensors, tokenizer files   the adapted model with its LM head; the
                                                      config records ``entmax_alpha`` (a number
                                                      or an (L, H) table) and ``sparsescope_adapt``
    adapt.json          the run: configuration, base model, corpus digest, split, status, results
    adapt-log.jsonl     one JSON line per step (step, loss, lr, gold_sparsity, alpha statistics)
    loss.html           the loss curve (self-contained Plotly, no CDN)
    split/train.txt, split/eval.txt    the corpus's two parts (:func:`data.split_corpus`)
    checkpoint/         while running or after an interruption: the model at the last saved
                        step (loadable by ``load_model`` like OUT itself) + trainer.pt

A checkpoint is written to ``checkpoint.tmp/`` and then swapped in (the previous one is renamed
``checkpoint.old/`` first and removed last), so an interruption at any moment leaves a complete
checkpoint: ``checkpoint/``, or ``checkpoint.old/`` when it struck between the two renames.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import torch

from ..errors import SparsescopeError
from ..model import quiet_progress
from ..sources import TOKENIZER_EXTRA_FILES, TOKENIZER_FILES

log = logging.getLogger(__name__)

MARKER = "adapt.json"
LOG = "adapt-log.jsonl"
CHECKPOINT = "checkpoint"
TRAINER_STATE = "trainer.pt"


class OutDirError(SparsescopeError):
    default_field = "out"


def check_out_dir(out: Path, *, resume: bool) -> None:
    """Refuse an out-dir that holds something else, or an adapt run without ``--resume``."""
    if out.exists() and not out.is_dir():
        raise OutDirError(f"--out {str(out)!r} is a file; give a directory")
    holds = out.is_dir() and any(out.iterdir())
    marker = out / MARKER
    if resume:
        if not marker.is_file():
            raise OutDirError(f"--resume: {str(out)!r} holds no adapt run to resume (no {MARKER})")
        if checkpoint_dir(out) is None:
            status = read_json(marker).get("status")
            if status == "done":
                raise OutDirError(f"--resume: the run in {str(out)!r} has already finished")
            raise OutDirError(f"--resume: {str(out)!r} has no checkpoint to resume from")
        return
    if marker.is_file():
        raise OutDirError(
            f"--out {str(out)!r} already holds an adapt run; pass --resume to continue it, or "
            "choose another directory (nothing was overwritten)"
        )
    if holds:
        raise OutDirError(
            f"--out {str(out)!r} is not empty and holds something else; choose an empty or new "
            "directory (nothing was overwritten)"
        )


def read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise OutDirError(f"{path} could not be read: {exc}") from None


def write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def checkpoint_dir(out: Path) -> Path | None:
    """The complete checkpoint of ``out`` (``checkpoint/``, else ``checkpoint.old/``)."""
    for name in (CHECKPOINT, CHECKPOINT + ".old"):
        d = out / name
        if (d / TRAINER_STATE).is_file() and (d / "config.json").is_file():
            return d
    return None


def save_model(lm, directory: Path, source_dir: Path, config_extra: dict) -> None:
    """Write the LM (weights, config with ``config_extra``) and the tokenizer files."""
    directory.mkdir(parents=True, exist_ok=True)
    cfg = lm.lm.config
    for k, v in config_extra.items():
        setattr(cfg, k, v)
    with quiet_progress():
        lm.lm.save_pretrained(str(directory), safe_serialization=True)
    names = {n for group in TOKENIZER_FILES for n in group} | set(TOKENIZER_EXTRA_FILES)
    for name in sorted(names):
        if (source_dir / name).is_file() and source_dir.resolve() != directory.resolve():
            shutil.copy(source_dir / name, directory / name)


def save_checkpoint(out: Path, lm, trainer_state: dict, source_dir: Path, extra: dict) -> Path:
    """Write a complete checkpoint and swap it in (module docstring)."""
    tmp, cur, old = out / (CHECKPOINT + ".tmp"), out / CHECKPOINT, out / (CHECKPOINT + ".old")
    if tmp.exists():
        shutil.rmtree(tmp)
    save_model(lm, tmp, source_dir, extra)
    torch.save(trainer_state, tmp / (TRAINER_STATE + ".tmp"))
    os.replace(tmp / (TRAINER_STATE + ".tmp"), tmp / TRAINER_STATE)
    if old.exists():
        shutil.rmtree(old)
    if cur.exists():
        os.replace(cur, old)
    os.replace(tmp, cur)
    if old.exists():
        shutil.rmtree(old)
    return cur


def load_trainer_state(checkpoint: Path) -> dict:
    return torch.load(checkpoint / TRAINER_STATE, map_location="cpu", weights_only=False)


def append_log(out: Path, records: list[dict]) -> None:
    with open(out / LOG, "a") as fh:
        for r in records:
            fh.write(json.dumps(r, sort_keys=True) + "\n")


def read_log(out: Path) -> list[dict]:
    p = out / LOG
    if not p.is_file():
        return []
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]


def truncate_log(out: Path, step: int) -> None:
    """Keep the log lines of steps <= ``step`` (a resumed run rewrites what came after)."""
    keep = [r for r in read_log(out) if int(r.get("step", 0)) <= step]
    (out / LOG).write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in keep))


def finish(out: Path) -> None:
    """Remove the checkpoints of a finished run (the model is in ``out`` itself)."""
    for name in (CHECKPOINT, CHECKPOINT + ".old", CHECKPOINT + ".tmp"):
        if (out / name).exists():
            shutil.rmtree(out / name)
