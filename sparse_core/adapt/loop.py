"""The training loop of an adaptation: steps under a tqdm bar, the log, checkpoints, Ctrl-C.

:func:`train_loop` runs a :class:`~.trainer.Trainer`'s remaining steps, showing the running loss;
the writing process (rank 0 of a data-parallel run) appends each step's record to the log and
writes a checkpoint every ``checkpoint_every`` steps and on Ctrl-C (SIGINT: the step under way
finishes, the checkpoint is written, then :class:`Interrupted` is raised). Used by
:func:`.run.adapt` and by each Ray Train worker (:mod:`.ray_train`).
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

from . import store
from .alpha import LearnedAlpha, alpha_record
from .trainer import Trainer

log = logging.getLogger(__name__)


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during an adaptation; the checkpoint of the last finished step is on disk."""

    def __init__(self, step: int, checkpoint: Path | None) -> None:
        super().__init__(f"interrupted after step {step}; checkpoint: {checkpoint}")
        self.step = step
        self.checkpoint = checkpoint


def train_loop(
    trainer: Trainer,
    out: Path,
    source_dir: Path,
    meta: dict,
    *,
    checkpoint_every: int = 0,
    progress: bool = True,
    on_step: Callable[[dict], None] | None = None,
    write: bool = True,
) -> None:
    """Run the remaining steps; ``write``: this process writes the log and the checkpoints
    (rank 0 of a data-parallel run)."""
    from tqdm.auto import tqdm

    cfg = trainer.cfg
    stop = {"asked": False}

    def on_sigint(signum, frame):  # the first Ctrl-C: finish the step, then checkpoint
        if stop["asked"]:
            raise KeyboardInterrupt
        stop["asked"] = True

    main = threading.current_thread() is threading.main_thread()
    old = signal.signal(signal.SIGINT, on_sigint) if main else None
    bar = tqdm(total=cfg.steps, initial=trainer.done, desc="adapt", unit="step",
               disable=not progress, dynamic_ncols=True)  # fmt: skip
    recent: list[float] = []
    t0 = time.perf_counter()
    try:
        while trainer.done < cfg.steps:
            rec = trainer.step()
            rec["elapsed_s"] = round(time.perf_counter() - t0, 3)
            recent = (recent + [rec["loss"]])[-50:]
            bar.update(1)
            bar.set_postfix(loss=f"{sum(recent) / len(recent):.4f}", lr=f"{rec['lr']:.2e}")
            last = trainer.done == cfg.steps
            due = checkpoint_every and trainer.done % checkpoint_every == 0 and not last
            if write:
                if due and isinstance(trainer.alpha, LearnedAlpha):
                    rec["alpha_table"] = alpha_record(trainer.alpha)
                store.append_log(out, [rec])
            if on_step is not None:
                on_step(rec)
            if write and (due or (stop["asked"] and not last)):
                checkpoint(trainer, out, source_dir, meta)
            if stop["asked"] and not last:
                ck = store.checkpoint_dir(out)
                raise Interrupted(trainer.done, ck)
    finally:
        bar.close()
        if old is not None:
            signal.signal(signal.SIGINT, old)


def checkpoint(trainer: Trainer, out: Path, source_dir: Path, meta: dict) -> Path:
    extra = config_extra(trainer.alpha, meta, trainer.done)
    path = store.save_checkpoint(out, trainer.lm, trainer.state_dict(), source_dir, extra)
    log.info("checkpoint at step %d: %s", trainer.done, path)
    return path


def config_extra(alpha, meta: dict, steps: int) -> dict:
    return {
        "entmax_alpha": alpha_record(alpha),
        "sparsescope_adapt": {
            "base": meta["base"]["model_id"],
            "objective": meta["objective"],
            "steps": steps,
            "train": meta["config"]["train"],
            "corpus_sha256": meta["corpus"]["sha256"],
        },
    }
