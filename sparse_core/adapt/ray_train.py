"""``sparsescope adapt --engine ray``: data-parallel training on Ray Train (``TorchTrainer``).

The cluster is the one at ``RAY_ADDRESS``, or a local one started here with one CPU per worker
(:func:`sparse_core.ray_engine.connect`). Each of the ``workers`` Ray Train workers (torch
``gloo`` process group, set up by Ray Train) builds the same model, data and :class:`Trainer`
(``rank``, ``world``): every step, each computes its share of the step's batch (rows
``B·r/W … B·(r+1)/W``), its loss is its share of the batch mean (the scored tokens of the whole
batch are known to every worker: the masking is a function of (seed, step)), the gradients are
summed over workers (one all-reduce of the flattened gradients) and every worker takes the same
AdamW step, so the weights stay identical. With one worker the run is the local one: the same
losses, bit for bit, on the same thread count (tests/core/test_adapt_ray.py). Dropout draws are
seeded per (seed, step, rank), so W > 1 workers draw other dropout masks than one.

Worker 0 writes the log and the checkpoints into the out-dir, which must be a path every worker
sees (a local cluster, or a shared filesystem); a run resumes from its last checkpoint like a local
one. At the end worker 0 writes a checkpoint of the final state, from which the driver measures
the held-out loss and writes the model (:func:`sparse_core.adapt.run.adapt`).
"""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger(__name__)


def _worker(config: dict) -> None:
    """Ray Train's per-worker loop."""
    import ray.train
    import torch

    from . import store
    from .data import Batches, split_corpus, token_sequences
    from .lm import load_lm
    from .loop import checkpoint, train_loop
    from .trainer import AdaptConfig, Trainer

    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    torch.set_num_threads(int(config["threads"]))
    cfg = AdaptConfig.from_json(config["cfg"])
    out = Path(config["out"])
    ckpt = store.checkpoint_dir(out)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        lm = load_lm(str(ckpt) if ckpt is not None else config["model"], config["device"])
    split = split_corpus(config["corpus"], cfg.eval_every)
    tok = lm.sparse.tokenizer
    seqs = token_sequences(split.train, tok, cfg.seq_len)
    data = Batches(seqs, tok, decoder=lm.decoder, vocab_size=lm.sparse.config.vocab_size)
    trainer = Trainer(lm, cfg, data, rank=rank, world=world)
    if ckpt is not None:
        trainer.load_state_dict(store.load_trainer_state(ckpt))
        if rank == 0:
            store.truncate_log(out, trainer.done)
    meta = store.read_json(out / store.MARKER)
    source = Path(meta["base"]["path"])
    train_loop(trainer, out, source, meta, checkpoint_every=int(config["checkpoint_every"]),
               progress=False, write=rank == 0)  # fmt: skip
    if rank == 0:
        checkpoint(trainer, out, source, meta)


def train_ray(
    model, corpus, out: Path, cfg, *, workers: int = 2, device: str = "cpu",
    checkpoint_every: int = 0, threads: int = 1,
) -> Path:  # fmt: skip
    """Run the training on Ray Train; returns the checkpoint of the final state."""
    from ..errors import SparsescopeError
    from ..ray_engine import connect, require_ray
    from . import store

    require_ray()
    try:
        from ray.train import RunConfig, ScalingConfig
        from ray.train.torch import TorchTrainer
    except ImportError as exc:
        raise SparsescopeError(
            f"--engine ray needs Ray Train ({exc.name or exc}); install it with: "
            "pip install 'sparsescope[ray]'",
            field="engine",
        ) from None
    if workers < 1:
        raise SparsescopeError(f"--workers must be >= 1, got {workers}", field="workers")
    import ray

    started = connect(num_cpus=None if _has_address() else workers * threads)
    try:
        use_gpu = str(device).startswith("cuda")
        trainer = TorchTrainer(
            _worker,
            train_loop_config={
                "model": None if model is None else str(model),
                "corpus": str(Path(corpus).resolve()),
                "out": str(out.resolve()),
                "cfg": cfg.to_json(),
                "device": "cuda" if use_gpu else "cpu",
                "threads": threads,
                "checkpoint_every": checkpoint_every,
            },
            scaling_config=ScalingConfig(
                num_workers=workers, use_gpu=use_gpu, resources_per_worker={"CPU": threads}
            ),
            run_config=RunConfig(storage_path=str((out / ".ray").resolve()), name="adapt"),
        )
        trainer.fit()
    finally:
        if started:
            ray.shutdown()
        import shutil

        shutil.rmtree(out / ".ray", ignore_errors=True)
    ck = store.checkpoint_dir(out)
    if ck is None:
        raise SparsescopeError("the Ray Train run ended without a checkpoint", field="engine")
    return ck


def _has_address() -> bool:
    import os

    return bool(os.environ.get("RAY_ADDRESS"))
