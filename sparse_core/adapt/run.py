"""``adapt``: fine-tune a model with entmax attention in every head (definitions §7), end to end.

:func:`adapt` checks everything it can before any work (α, steps, the out-dir, the corpus size,
memory), splits the corpus by article (:func:`data.split_corpus`), loads the model with its LM
head (:func:`lm.load_lm`; from the checkpoint when resuming), trains with :class:`Trainer` under a
tqdm bar showing the running loss, writes a checkpoint every ``checkpoint_every`` steps and on
Ctrl-C (SIGINT: the step under way finishes, the checkpoint is written, then
:class:`Interrupted` is raised), and at the end measures the held-out loss, writes the model to
the out-dir (:mod:`store`) and draws the loss curve (:mod:`report`).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from pathlib import Path

import torch

from ..corpus import file_digest
from ..errors import SparsescopeError
from ..sources import available_memory
from . import store
from .alpha import alpha_record
from .data import Batches, split_corpus, token_sequences
from .evaluate import evaluate_loss
from .lm import LanguageModel, check_alpha, load_lm
from .loop import config_extra, train_loop
from .trainer import SCHEDULES, TRAIN_CHOICES, AdaptConfig, Trainer, trainable

log = logging.getLogger(__name__)

#: keys of ``AdaptConfig`` a resumed run may not change
_RESUME_SAME = ("alpha", "alpha_start", "steps", "seq_len", "batch", "lr", "alpha_lr", "warmup",
                "schedule", "weight_decay", "clip", "seed", "train", "eval_every")  # fmt: skip


def check_config(cfg: AdaptConfig) -> None:
    """One-line errors for every bad setting (raised before anything is read or written)."""

    def bad(msg: str, field: str) -> None:
        raise SparsescopeError(msg, field=field)

    if isinstance(cfg.steps, bool) or not isinstance(cfg.steps, int) or cfg.steps < 1:
        bad(f"--steps must be an integer >= 1, got {cfg.steps}", "steps")
    if cfg.learned:
        if not 1.0 < cfg.alpha_start < 2.0:
            bad(f"a learned alpha starts in (1, 2), got {cfg.alpha_start}", "alpha")
    else:
        check_alpha(float(cfg.alpha), allow_softmax=cfg.train == "head")
    if cfg.train not in TRAIN_CHOICES:
        bad(f"--train must be one of {', '.join(TRAIN_CHOICES)}, got {cfg.train!r}", "train")
    if cfg.schedule not in SCHEDULES:
        bad(f"--schedule must be one of {', '.join(SCHEDULES)}, got {cfg.schedule!r}", "schedule")
    if cfg.batch < 1:
        bad(f"--batch must be >= 1, got {cfg.batch}", "batch")
    if cfg.seq_len < 8:
        bad(f"--seq-len must be >= 8, got {cfg.seq_len}", "seq_len")
    if not cfg.lr > 0 or not cfg.alpha_lr > 0:
        bad(f"--lr and --alpha-lr must be > 0, got {cfg.lr} and {cfg.alpha_lr}", "lr")
    if not 0.0 <= cfg.warmup < 1.0:
        bad(f"--warmup must be a fraction of the steps in [0, 1), got {cfg.warmup}", "warmup")
    if cfg.clip <= 0:
        bad(f"--clip must be > 0, got {cfg.clip}", "clip")


def estimate_bytes(lm: LanguageModel, cfg: AdaptConfig, per_worker_batch: int) -> int:
    """Memory one training step needs: weights, gradients and AdamW's two moments of the
    trained parameters, the activations autograd keeps (about 20 D + 4 H n floats per token
    and layer: projections, feed-forward, norms; scores, P, dropout masks) and the logits."""
    c = lm.sparse.config
    total = sum(p.numel() for p in lm.lm.parameters())
    trained = sum(p.numel() for _, p in trainable(lm, cfg.train))
    tokens = per_worker_batch * cfg.seq_len
    acts = tokens * c.num_layers * (20 * c.hidden_size + 4 * c.num_heads * cfg.seq_len)
    scored = tokens if lm.decoder else max(1, int(0.2 * tokens))
    logits = 3 * scored * c.vocab_size
    return 4 * (total + 3 * trained + acts + logits)


def adapt(
    model: str | None,
    corpus: str | Path,
    out: str | Path,
    cfg: AdaptConfig,
    *,
    resume: bool = False,
    device: str = "auto",
    checkpoint_every: int = 0,
    progress: bool = True,
    engine: str = "local",
    workers: int = 2,
    threads: int = 1,
    memory_limit: int | None = None,
    on_step: Callable[[dict], None] | None = None,
) -> dict:
    """Adapt ``model`` on ``corpus`` into ``out`` (module docstring); returns ``adapt.json``.

    ``engine="ray"``: data-parallel on Ray Train with ``workers`` workers of ``threads`` torch
    threads each (:mod:`.ray_train`).
    """
    check_config(cfg)
    if checkpoint_every < 0:
        raise SparsescopeError(f"--checkpoint-every must be >= 0, got {checkpoint_every}")
    out = Path(out)
    store.check_out_dir(out, resume=resume)
    ckpt = store.checkpoint_dir(out) if resume else None
    meta = store.read_json(out / store.MARKER) if resume else None
    if meta is not None:
        was = AdaptConfig.from_json(meta["config"]).to_json()
        now = cfg.to_json()
        diff = [k for k in _RESUME_SAME if was.get(k) != now.get(k)]
        if diff:
            k = diff[0]
            raise SparsescopeError(
                f"--resume: the run was started with {k} = {was[k]!r}, not {now[k]!r}; a "
                "resumed run keeps its settings (omit the flag or pass the same value)"
            )
    if meta is not None and file_digest(corpus) != meta["corpus"]["sha256"]:
        raise SparsescopeError(
            f"--resume: {corpus} is not the corpus the run was started with (sha256 "
            f"{meta['corpus']['sha256'][:12]}…); pass the same --corpus",
            field="corpus",
        )
    split = split_corpus(corpus, cfg.eval_every)
    with torch.random.fork_rng(devices=[]):  # a new head's initial weights follow the seed
        torch.manual_seed(cfg.seed)
        lm = load_lm(str(ckpt) if ckpt is not None else model, device)
    if lm.decoder is False and cfg.train == "head" and not lm.new_head and not resume:
        log.info("the checkpoint has an MLM head already; training it further")
    tok = lm.sparse.tokenizer
    V = lm.sparse.config.vocab_size
    seqs = token_sequences(split.train, tok, cfg.seq_len)
    if len(seqs) < cfg.batch:
        raise SparsescopeError(
            f"the corpus's training part gives {len(seqs)} sequence(s) of {cfg.seq_len} tokens; "
            f"at least --batch ({cfg.batch}) are needed: use a larger corpus, or a smaller "
            "--batch or --seq-len",
            field="corpus",
        )
    if cfg.seq_len > lm.sparse.config.max_positions:
        raise SparsescopeError(
            f"--seq-len {cfg.seq_len} exceeds the model's {lm.sparse.config.max_positions} "
            "positions", field="seq_len",
        )  # fmt: skip
    train_data = Batches(seqs, tok, decoder=lm.decoder, vocab_size=V)
    eval_seqs = token_sequences(split.eval, tok, cfg.seq_len) if split.eval else None
    eval_data = (
        Batches(eval_seqs, tok, decoder=lm.decoder, vocab_size=V)
        if eval_seqs is not None and len(eval_seqs)
        else None
    )
    world = workers if engine == "ray" else 1
    need = estimate_bytes(lm, cfg, -(-cfg.batch // world))
    free = memory_limit if memory_limit is not None else available_memory(str(lm.device))
    if free is not None and need > free:
        raise SparsescopeError(
            f"training needs about {need / 2**30:.2f} GiB (weights, gradients, AdamW state and "
            f"the activations of {cfg.batch} x {cfg.seq_len} tokens) but only "
            f"{free / 2**30:.2f} GiB is free; use a smaller --batch or --seq-len",
            field="batch",
        )
    base = meta["base"] if meta is not None else _describe_base(lm, model)
    if meta is None:
        out.mkdir(parents=True, exist_ok=True)
        split_corpus(corpus, cfg.eval_every, out / "split")
        meta = {
            "status": "running",
            "config": cfg.to_json(),
            "base": base,
            "objective": lm.objective,
            "corpus": {
                "name": Path(corpus).name,
                "sha256": file_digest(corpus),
                "split": f"document k held out iff k mod {cfg.eval_every} = {cfg.eval_every - 1}"
                if cfg.eval_every
                else "nothing held out",
                "train_documents": len(split.train),
                "eval_documents": len(split.eval),
                "train_sequences": len(train_data),
                "eval_sequences": len(eval_data) if eval_data is not None else 0,
            },
            "new_head": lm.new_head,
        }
        store.write_json(out / store.MARKER, meta)
    source_dir = Path(base["path"])
    if engine == "ray":
        from .ray_train import train_ray

        ck = train_ray(model, corpus, out, cfg, workers=workers, device=device,
                       checkpoint_every=checkpoint_every, threads=threads)  # fmt: skip
        lm = load_lm(str(ck), device)
        trainer = Trainer(lm, cfg, train_data)  # the final state, as the workers left it
        trainer.load_state_dict(store.load_trainer_state(ck))
        trainer_alpha = trainer.alpha
    else:
        trainer = Trainer(lm, cfg, train_data)
        if ckpt is not None:
            trainer.load_state_dict(store.load_trainer_state(ckpt))
            store.truncate_log(out, trainer.done)
        train_loop(trainer, out, source_dir, meta, checkpoint_every=checkpoint_every,
                   progress=progress, on_step=on_step)  # fmt: skip
        trainer_alpha = trainer.alpha
    return _finish(lm, trainer_alpha, cfg, out, source_dir, meta, eval_data)


def _finish(lm, alpha, cfg, out: Path, source_dir: Path, meta: dict, eval_data) -> dict:
    t0 = time.perf_counter()
    held = evaluate_loss(lm, eval_data, alpha, batch=cfg.batch) if eval_data is not None else None
    store.save_model(lm, out, source_dir, config_extra(alpha, meta, cfg.steps))
    records = store.read_log(out)
    from .report import write_loss_html

    kind = "learned α" if cfg.learned else f"α = {cfg.alpha:g}"
    write_loss_html(out / "loss.html", records,
                    title=f"adapt {meta['base']['model_id']} ({kind}, {lm.objective})",
                    held_out=held)  # fmt: skip
    meta.update(status="done", held_out=held, alpha=alpha_record(alpha),
                train_seconds_last_start=records[-1].get("elapsed_s") if records else None,
                eval_seconds=round(time.perf_counter() - t0, 1))  # fmt: skip
    store.write_json(out / store.MARKER, meta)
    store.finish(out)
    return meta


def _describe_base(lm: LanguageModel, model: str | None) -> dict:
    src = lm.source
    weights = sorted(src.path.glob("*.safetensors")) or sorted(src.path.glob("*.bin"))
    h = hashlib.sha256()
    for w in weights:
        h.update(file_digest(w).encode())
    return {"model_id": src.model_id, "path": str(src.path), "weights_sha256": h.hexdigest(),
            "new_head": lm.new_head}  # fmt: skip
