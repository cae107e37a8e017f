"""``sparsescope fit --corpus PATH``: fit the Sparsefinder projections and k-means centroids, or
(``--method indexer|seer``) one of today's learned selectors (definitions §12).

Reads the corpora (CoNLL-U, WikiText or plain text, detected), packs them into model inputs of at
most ``--max-tokens`` tokens in corpus order, keeps the first ``--limit`` inputs (the rest of the
corpus stays unseen by the fit, for evaluation), extracts the entmax graphs, trains, clusters and
writes ``<out>/sparsefinder-<model>-a<alpha>.safetensors`` + ``.json`` (definitions §3). With
``--method indexer`` or ``seer`` it trains that selector instead (``sparse_core.selectors_fit``:
KL against the exact entmax attention, CPU, tqdm progress) and writes
``<out>/<method>-<model>-a<alpha>.safetensors`` + ``.json``, which the server uses when they lie
beside the model's Sparsefinder artefact. Deterministic under ``--seed`` on a given machine; set
``SOURCE_DATE_EPOCH`` to also fix the recorded date.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from .common import (
    add_alpha,
    add_corpus,
    add_device,
    add_engine,
    add_limit,
    add_lr,
    add_max_tokens,
    add_method,
    add_model,
    add_out,
    add_seed,
    alpha_of,
    check_limit,
    check_out,
    load_for,
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "fit",
        help="fit Sparsefinder projections and k-means centroids on a corpus",
        description="Extract the entmax attention graphs of every head on a corpus, train the "
        "per-head projections (hinge loss, definitions §3), fit k-means centroids and write the "
        "artefact "
        "(<out>/sparsefinder-<model>-a<alpha>.safetensors + .json). Prints the validation loss "
        "and sf-distance recall/sparsity at the reference threshold. With --method indexer or "
        "seer: "
        "train DeepSeek's lightning indexer or SeerAttention's AttnGate against the exact entmax "
        "attention (KL, definitions §12) and write <out>/<method>-<model>-a<alpha>.*.",
    )
    add_corpus(p, what=" (fitted in order)")
    add_alpha(p)
    add_max_tokens(p)
    add_limit(p)
    add_method(
        p, choices=FIT_METHODS,
        help="what to fit: the Sparsefinder projections (default), DeepSeek's lightning indexer "
        "or SeerAttention's AttnGate (definitions §12)",
    )  # fmt: skip
    p.add_argument("--rank", type=int, default=4, help="projected dimensions r (default 4)")
    p.add_argument(
        "--epochs", type=int, default=None,
        help="training epochs (default 3 for sparsefinder, 6 for indexer and seer)",
    )  # fmt: skip
    p.add_argument("--index-heads", type=int, default=2, help="indexer heads H_I (default 2)")
    p.add_argument("--index-dim", type=int, default=16, help="indexer head width d_I (default 16)")
    p.add_argument("--gate-dim", type=int, default=16, help="AttnGate width h (default 16)")
    add_lr(p, help=f"Adam's learning rate, indexer and seer (default {LR:g})")
    p.add_argument("--batch-size", type=int, default=1, help="inputs per Adam step (default 1)")
    p.add_argument(
        "--valid-fraction", type=float, default=0.2, help="inputs held out for validation (0.2)"
    )
    add_out(
        p, default=".", why="default: the current directory; the artefact's two files are named "
        "by model and alpha, so serve --artefact-dir finds them in any folder",
    )  # fmt: skip
    add_seed(p)
    add_model(p)
    add_device(p)  # the model's forwards; the training runs on the CPU
    add_engine(p, what="where the graphs are extracted: local (this process)")
    p.set_defaults(run=run)


FIT_METHODS = ("sparsefinder", "indexer", "seer")
#: Adam's learning rate for indexer and seer when no --lr is given.
LR = 1e-3


def _check(args: argparse.Namespace) -> None:
    from sparse_core.errors import SparsescopeError

    if args.method is None:
        args.method = FIT_METHODS[0]
    if args.lr is None:
        args.lr = LR
    if args.epochs is None:
        args.epochs = 3 if args.method == "sparsefinder" else 6
    for flag, value in (("--index-heads", args.index_heads), ("--index-dim", args.index_dim),
                        ("--gate-dim", args.gate_dim)):  # fmt: skip
        if not 1 <= value <= 64:
            raise SparsescopeError(f"{flag} must be in [1, 64], got {value}")
    if not 0 < args.lr <= 1:
        raise SparsescopeError(f"--lr must be in (0, 1], got {args.lr}")
    if args.method != "sparsefinder" and args.engine != "local":
        raise SparsescopeError(
            f"--method {args.method} runs on the local engine only; drop --engine {args.engine}"
        )

    if not 1 <= args.rank <= 64:
        raise SparsescopeError(f"--rank must be in [1, 64], got {args.rank}")
    check_limit(args)
    if args.epochs < 1:
        raise SparsescopeError(f"--epochs must be >= 1, got {args.epochs}")
    if args.batch_size < 1:
        raise SparsescopeError(f"--batch-size must be >= 1, got {args.batch_size}")
    if not 0.0 <= args.valid_fraction < 1.0:
        raise SparsescopeError(f"--valid-fraction must be in [0, 1), got {args.valid_fraction}")
    check_out(args)


def read_inputs(paths: list[str], fmt: str, tokenizer, max_tokens: int, limit: int | None):
    """Pack every corpus, keep the first ``limit`` inputs overall; returns (texts, corpus meta)."""
    from sparse_core.corpus import detect_format, file_digest, pack, read_corpus, token_counter

    count = token_counter(tokenizer)
    texts: list[str] = []
    described = []
    for path in paths:
        p = Path(path)
        docs = read_corpus(p, fmt)  # raises a one-line error for a missing / unreadable file
        kind = fmt if fmt != "auto" else detect_format(p.read_text().splitlines()[:200])
        inputs = pack(docs, count, max_tokens)
        room = len(inputs) if limit is None else max(0, limit - len(texts))
        used = inputs[:room]
        texts.extend(i.text for i in used)
        seen = used[-1].docs[1] + 1 if used else 0  # documents 0 .. seen-1 were (partly) read
        described.append(
            {
                "name": f"{p.parent.name}/{p.name}",
                "format": kind,
                "sha256": file_digest(p),
                "documents": len(docs),
                "inputs_total": len(inputs),
                "inputs_used": len(used),
                "inputs_rule": f"the first {len(used)} packed inputs of {max_tokens} tokens",
                "documents_seen": seen,
                "first_unseen_document": (
                    {"index": seen, "title": docs[seen].title} if seen < len(docs) else None
                ),
            }
        )
    return texts, described


def run(args: argparse.Namespace) -> int:
    from sparse_core.errors import SparsescopeError
    from sparse_core.sparsefinder import save_artefact
    from sparse_core.sparsefinder_fit import FitConfig, fit_artefact

    _check(args)
    alpha_of(args)  # before any loading
    if args.engine == "ray":
        from sparse_core.ray_engine import require_ray

        require_ray()  # the one-line error before any work
    model = load_for(args)
    texts, corpora = read_inputs(
        args.corpus, args.format, model.tokenizer, args.max_tokens, args.limit
    )
    if len(texts) < 2 and args.valid_fraction > 0:
        raise SparsescopeError(
            f"the corpus gave {len(texts)} input(s); need at least 2 (or --valid-fraction 0)"
        )
    if args.method != "sparsefinder":
        return _fit_selector(args, model, texts, corpora)
    cfg = FitConfig(
        rank=args.rank,
        epochs=args.epochs,
        batch_size=args.batch_size,
        valid_fraction=args.valid_fraction,
        seed=args.seed,
    )
    meta = {"corpus": corpora, "max_tokens": args.max_tokens, "limit": args.limit}
    t0 = time.perf_counter()
    data = None
    if args.engine == "ray":  # the extraction on Ray actors; the training as below, here
        from sparse_core.ray_engine import extract_ray

        data = extract_ray(model.model_id, texts, args.alpha, model_path=args.model,
                           batch_size=cfg.extract_batch, checkpoint_dir=Path(args.out))  # fmt: skip
    art = fit_artefact(model, texts, alpha=args.alpha, config=cfg, meta=meta, progress=True,
                       data=data)  # fmt: skip
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    st, js = save_artefact(art, out)
    m = art.meta
    sz = m["sizes"]
    print(
        f"fitted {m['model_id']} at alpha {m['alpha']:g}: {sz['inputs']} inputs "
        f"({sz['train_inputs']} train, {sz['valid_inputs']} valid), {sz['tokens']} tokens, "
        f"{sz['positive_pairs']} positive pairs, in {time.perf_counter() - t0:.0f} s"
    )
    losses = ", ".join(f"{x:.4f}" for x in m["training"]["loss_per_epoch"])
    print(f"training loss per epoch: {losses}")
    v = m["validation"]
    if v is None:
        print("no validation inputs (--valid-fraction 0): no validation figures")
    else:
        ref = v["reference"]
        print(f"validation loss: {v['loss']:.4f} (before training {v['loss_initial']:.4f})")
        print(
            f"sf-distance t={ref['threshold']:g} (no window, no globals) on validation: "
            f"recall {ref['recall']:.4f}, sparsity {ref['sparsity']:.4f} "
            f"(gold sparsity {v['gold_sparsity']:.4f})"
        )
    print(f"wrote {st} and {js}")
    print(
        f"the web app uses it for {m['model_id']} at alpha {m['alpha']:g} when served with "
        f"--artefact-dir {out} (or when it lies in <data dir>/artefacts)"
    )
    return 0


def _fit_selector(args: argparse.Namespace, model, texts: list[str], corpora: list[dict]) -> int:
    """``--method indexer|seer``: train the selector, write it, print its held-out figures."""
    from sparse_core.selectors import save_selector
    from sparse_core.selectors_fit import SelectorConfig, fit_selector

    cfg = SelectorConfig(
        kind=args.method,
        index_heads=args.index_heads,
        index_dim=args.index_dim,
        gate_dim=args.gate_dim,
        epochs=args.epochs,
        lr=args.lr,
        valid_fraction=args.valid_fraction,
        seed=args.seed,
    )
    meta = {"corpus": corpora, "max_tokens": args.max_tokens, "limit": args.limit}
    t0 = time.perf_counter()
    sel = fit_selector(model, texts, alpha=args.alpha, config=cfg, meta=meta, progress=True)
    st, js = save_selector(sel, Path(args.out))
    m, sz = sel.meta, sel.meta["sizes"]
    print(
        f"fitted the {sel.kind} for {sel.model_id} at alpha {sel.alpha:g}: {sz['inputs']} inputs "
        f"({sz['train_inputs']} train, {sz['valid_inputs']} held out), {sz['tokens']} tokens, "
        f"{sz['parameters']} parameters, {m['training']['steps']} steps, "
        f"in {time.perf_counter() - t0:.0f} s"
    )
    print("training KL per epoch: " + ", ".join(f"{x:.4f}" for x in m["training"]["kl_per_epoch"]))
    v = m["validation"]
    if v is None:
        print("no held-out inputs (--valid-fraction 0): no held-out figures")
    else:
        print(f"held-out KL: {v['kl']:.4f} (before training {v['kl_initial']:.4f})")
        for row in v["masks"]:
            setting = ", ".join(f"{k}={row[k]}" for k in row if k not in ("recall", "sparsity"))
            print(f"  {setting}: recall {row['recall']:.4f}, sparsity {row['sparsity']:.4f}")
    print(f"wrote {st} and {js}")
    print(
        f"the web app uses it for {sel.model_id} at alpha {sel.alpha:g} when it lies beside that "
        "model's Sparsefinder artefact (serve --artefact-dir, or sparse_core/data for the shipped)"
    )
    return 0
