"""``sparsescope adapt``: fine-tune a model with entmax attention in every head (definitions §7).

Masked LM for encoders (BERT's recipe; a head tied to the input embeddings is added where the
checkpoint has none), next-token LM for decoders; α fixed (``--alpha 1.5``) or learned per head
(``--alpha learned``). The corpus is split by article (every ``--eval-every``-th held out);
the out-dir receives a Hugging Face model directory that ``load_model``, ``analyze --model``,
``serve --model`` and ``fit --model`` accept, with its α in its config (docs/models.md).
``--evaluate`` measures a model instead: held-out loss and gold sparsity, as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys

from .common import (
    add_alpha,
    add_batch,
    add_corpus,
    add_device,
    add_engine,
    add_eval_every,
    add_lr,
    add_model,
    add_out,
    add_seed,
    add_threads,
    add_workers,
)

#: Sequences per step and peak learning rate when no --batch / --lr is given.
BATCH = 16
LR = 1e-4


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "adapt",
        help="fine-tune a model with entmax attention (masked LM / next-token LM)",
        description="Fine-tune a model with alpha-entmax attention in every head (definitions §7) "
        "and "
        "write it as a Hugging Face model directory with its alpha recorded. With --evaluate: "
        "print a model's held-out loss and gold sparsity instead.",
    )
    add_model(p)
    add_corpus(
        p, several=False, formats=False,
        what=": WikiText, plain text or CoNLL-U (split by article, every --eval-every-th held out)",
    )  # fmt: skip
    add_alpha(
        p, words=("learned", "own"), default=None,
        help="entmax alpha in (1, 2], or 'learned' (per head, 1 + sigmoid(a), from --alpha-start); "
        "1 only with --train head (the softmax model's head); default 1.5. --evaluate: a number in "
        "[1, 2] or 'own' (the model's recorded alpha; default)",
    )  # fmt: skip
    p.add_argument("--alpha-start", type=float, default=1.5, help="learned alpha's start (1.5)")
    p.add_argument("--steps", type=int, default=None, help="optimizer steps (required to train)")
    add_out(p, default=None, why="new or empty; no default: required to train")
    p.add_argument("--seq-len", type=int, default=128, help="tokens per sequence (128)")
    add_batch(p, help=f"sequences per step ({BATCH})")
    add_lr(p, help=f"peak learning rate ({LR:g})")
    p.add_argument("--alpha-lr", type=float, default=1e-2, help="learned alpha's rate (1e-2)")
    p.add_argument("--warmup", type=float, default=0.06, help="warm-up share of steps (0.06)")
    p.add_argument("--schedule", default="linear", choices=("linear", "cosine"),
                   help="decay after warm-up (linear)")  # fmt: skip
    p.add_argument("--weight-decay", type=float, default=0.01, help="AdamW weight decay (0.01)")
    p.add_argument("--clip", type=float, default=1.0, help="gradient norm clip (1.0)")
    p.add_argument(
        "--train", default="all", choices=("all", "body", "attention", "head"),
        help="what is trained: all, body (not the embeddings), attention (attention blocks, "
        "norms and the head: the smallest delta) or head (frozen body)",
    )  # fmt: skip
    add_eval_every(p, help="hold out every K-th document (article) for evaluation (5; 0: none)")
    add_seed(p)
    p.add_argument("--resume", action="store_true", help="continue the run in --out exactly")
    p.add_argument("--checkpoint-every", type=int, default=100, metavar="K",
                   help="write a checkpoint every K steps (100; 0: only on Ctrl-C)")  # fmt: skip
    add_device(p)
    add_threads(p, default=0, help="torch CPU threads (default 0: torch's own)")
    add_engine(p, what="where training runs: local (this process) or data-parallel on Ray Train")
    add_workers(p, default=2, help="Ray Train workers with --engine ray (default 2)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--evaluate", action="store_true",
        help="measure --model on the whole --corpus: loss at --alpha (seeded masking) and "
        "gold sparsity at n = 128 and 512; prints JSON",
    )  # fmt: skip
    p.add_argument("--gold-texts", type=int, default=40, help="--evaluate: texts per length (40)")
    p.set_defaults(run=run)


def _alpha(raw: str, *, evaluate: bool):
    from sparse_core.errors import SparsescopeError

    r = raw.strip().lower()
    if r == "learned" and not evaluate:
        return None
    if r == "own" and evaluate:
        return "own"
    try:
        return float(r)
    except ValueError:
        allowed = "a number in [1, 2] or 'own'" if evaluate else "a number in (1, 2] or 'learned'"
        raise SparsescopeError(f"--alpha must be {allowed}, got {raw!r}", field="alpha") from None


def run(args: argparse.Namespace) -> int:
    import torch

    from sparse_core.errors import SparsescopeError

    if args.batch is None:
        args.batch = BATCH
    if args.lr is None:
        args.lr = LR
    if args.threads < 0:
        raise SparsescopeError(f"--threads must be >= 1 (0: torch's own), got {args.threads}")
    if args.threads:  # 0: torch's own count
        torch.set_num_threads(args.threads)
    if args.evaluate:
        return _evaluate(args)
    from sparse_core.adapt import AdaptConfig, Interrupted, adapt

    if args.steps is None:
        raise SparsescopeError("--steps is required to train (or pass --evaluate)")
    if args.out is None:
        raise SparsescopeError("--out is required to train: a new or empty directory")
    if args.engine == "ray":
        from sparse_core.ray_engine import require_ray

        require_ray()
    alpha = _alpha(args.alpha or "1.5", evaluate=False)
    cfg = AdaptConfig(
        alpha=alpha, steps=args.steps, alpha_start=args.alpha_start, seq_len=args.seq_len,
        batch=args.batch, lr=args.lr, alpha_lr=args.alpha_lr, warmup=args.warmup,
        schedule=args.schedule, weight_decay=args.weight_decay, clip=args.clip, seed=args.seed,
        train=args.train, eval_every=args.eval_every,
    )  # fmt: skip
    try:
        meta = adapt(args.model, args.corpus, args.out, cfg, resume=args.resume,
                     device=args.device, checkpoint_every=args.checkpoint_every,
                     progress=not args.quiet, engine=args.engine, workers=args.workers)  # fmt: skip
    except Interrupted as exc:
        print(
            f"sparsescope adapt: interrupted after step {exc.step}; the checkpoint is in "
            f"{exc.checkpoint} (continue with the same command and --resume)",
            file=sys.stderr,
        )
        return 130
    held = meta.get("held_out")
    kind = "learned per head" if alpha is None else f"{alpha:g}"
    print(f"adapted {meta['base']['model_id']} at alpha {kind} for {args.steps} steps "
          f"({meta['objective']}) into {args.out}")  # fmt: skip
    if held:
        print(f"held-out loss {held['loss']:.4f} over {held['tokens']} tokens "
              f"({held['sequences']} sequences of {args.seq_len})")  # fmt: skip
    print(f"log: {args.out}/adapt-log.jsonl, figure: {args.out}/loss.html")
    return 0


def _evaluate(args) -> int:
    from sparse_core.adapt.evaluate import evaluate_corpus

    alpha = _alpha(args.alpha or "own", evaluate=True)
    if args.gold_texts < 1:
        from sparse_core.errors import SparsescopeError

        raise SparsescopeError(f"--gold-texts must be >= 1, got {args.gold_texts}")
    res = evaluate_corpus(
        args.model, args.corpus, alpha, seq_len=args.seq_len, batch=args.batch,
        gold_texts=args.gold_texts, device=args.device,
    )  # fmt: skip
    print(json.dumps(res, indent=1))
    return 0
