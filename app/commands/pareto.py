"""``sparsescope pareto --corpus PATH``: the sparsity–recall Pareto sweep of every method.

Reads the corpus (CoNLL-U, WikiText or plain text, detected), packs it into model inputs of at
most ``--max-tokens`` tokens in corpus order (``corpus.pack``), drops inputs shorter than
``--min-tokens``, optionally skips the inputs a Sparsefinder artefact was fitted on
(``--held-out``) or the first ``--skip N``, keeps ``--limit N``, and sweeps every method's grid
(``sparse_core.pareto.sweep_corpus``; grids in ``sparse_core.methods``). Writes

- ``DIR/pareto.json``: ``{"model", "alpha", "causal", "texts", "gold_sparsity", "x", "block",
  "points": [{"method", "params", "sparsity", "recall", "exact", "precision", "mass_recall",
  "block_sparsity": {"16", "32", "64", "128"}}], "frontiers": {method: [indices into points]}}``
  (figures: per
  head the mean over texts, then the mean over heads, definitions §4; the frontiers are over (x,
  recall): token sparsity, or with ``--x block`` the block sparsity at ``--block`` (64); with
  ``--fidelity`` every point of the token-sparsity frontiers gets ``"fidelity"``, others null);
- ``DIR/pareto.html``: a self-contained Plotly figure (plotly.js inlined, no CDN) of sparsity
  (or block sparsity) against recall per method with its frontier and the gold sparsity as a
  dashed vertical line (the paper's Figures 2 and 4); two buttons switch the y-axis between
  recall and mass recall (each with its own frontiers);
- ``DIR/pareto-run.json``: provenance (corpus digest, inputs used, grids, timings);
- ``DIR/pareto-heads.npz``: per (layer, head) the mean over texts of every point's figures
  (arrays ``"<method>/<metric>"`` of shape (points, L, H), float32) and ``"gold_sparsity"``.

``--lengths 512,1024,2048,4096`` (``sparse_core.pareto.lengths``): sparsity against length. The
corpus is packed into inputs of at most twice the longest length and those shorter than the
longest are dropped; each input is then cut to its first n tokens for every length n and
every method's grid is swept at each length on the same inputs. Writes
``DIR/pareto-lengths.json`` (``lengths``, ``gold_sparsity`` per length,
``recall_at_sparsity`` and ``sparsity_at_recall``: method -> level -> one value per length, and
``per_length``: each length's pareto.json body) and ``DIR/pareto-lengths.csv`` (``method, length,
measure, level, value``), besides the four files above for the longest length (so ``serve
--results DIR`` shows them, with a panel of recall at fixed sparsity against length). One
process; not with ``--task``, ``--fidelity``, ``--x block`` or the ray engine.

``--task`` / ``--task mlm`` (definitions §9, ``sparse_core.pareto.task``): for a model with an
LM/MLM head, the loss with every head restricted to each frontier point's graph on the first
``--task-texts`` inputs: ``"task_loss"`` per point (null off the frontiers), a ``"task"`` block
(objective, unrestricted loss, inputs, seed) and a second panel in pareto.html (sparsity against
the loss).

``--task sts --sts FILE …``: the model's own task for a sentence embedder. The inputs are the
sentences of the first ``--task-texts`` pairs (default 100) of each STS set whose two sentences
have at least ``--min-tokens`` tokens (default 8), so the sweep's sparsity is that of the masks
imposed on them (no ``--corpus``); each frontier point's masks restrict every head and the
figure is the STS Spearman of the restricted model, mean over the sets: ``"task_spearman"`` per
point, a ``"task"`` block (unrestricted Spearman, sets, sentences) and the second panel.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from .common import (
    add_alpha,
    add_artefact,
    add_block,
    add_causal,
    add_corpus,
    add_engine,
    add_limit,
    add_max_tokens,
    add_model,
    add_out,
    add_sts,
    add_threads,
    add_workers,
    alpha_of,
    check_limit,
    check_out,
    load_for,
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "pareto",
        help="sweep every method's grid on a corpus: sparsity-recall points and frontiers",
        description="Run the entmax model on a corpus and measure every method (window, Sparse "
        "Transformer, BigBird, Longformer, Reformer, Routing, Sparsefinder, and the arena: "
        "StreamingLLM, top-k, top-p, H2O, MoBA, Quest, XAttention, vertical-slash, SpargeAttn) "
        "at every point of its sweep grid: sparsity, recall, mass recall, exact, precision, the "
        "gold sparsity and each method's Pareto frontier. Writes DIR/pareto.json and "
        "DIR/pareto.html.",
    )
    add_corpus(
        p,
        required=False,
        what=" (required, except with --task sts: the sweep then runs "
        "on the STS sentences themselves)",
    )
    add_limit(p)
    p.add_argument("--skip", type=int, default=0, metavar="N", help="skip the first N inputs")
    p.add_argument(
        "--held-out", action="store_true",
        help="skip the inputs the artefact was fitted on (read from its metadata)",
    )  # fmt: skip
    add_causal(p)
    p.add_argument(
        "--methods", nargs="+", default=None, metavar="NAME",
        help="methods to sweep (default: all available); names or one comma-separated list",
    )  # fmt: skip
    add_alpha(p)
    add_max_tokens(p)
    p.add_argument(
        "--min-tokens", type=int, default=None, metavar="N",
        help="drop shorter inputs (default: max-tokens / 2; the sweep grid is that of the "
        "longest input restricted to points valid for the shortest)",
    )  # fmt: skip
    p.add_argument(
        "--fidelity", action="store_true",
        help="also measure output fidelity (cosine of final hidden states) of frontier points",
    )  # fmt: skip
    p.add_argument(
        "--fidelity-texts", type=int, default=4, metavar="N",
        help="inputs used for --fidelity (default 4: one masked forward pass per point and input)",
    )  # fmt: skip
    p.add_argument(
        "--task", nargs="?", const="mlm", default=None, choices=("mlm", "sts"),
        help="also measure the model's task with every head restricted to each frontier "
        "point's graph (definitions §9): mlm (the default; the masked-LM or next-token loss on a "
        "seeded masking; needs an LM/MLM head) or sts (STS Spearman of mean-pooled states; give "
        "--sts; the sweep then runs on the STS sentences)",
    )  # fmt: skip
    add_sts(p, what=" for --task sts")
    p.add_argument(
        "--task-sparsity", type=float, default=0.0, metavar="S",
        help="--task sts: measure only the frontier points with sparsity >= S (default 0: all)",
    )  # fmt: skip
    p.add_argument(
        "--task-texts", type=int, default=None, metavar="N",
        help="inputs used for --task: mlm, the first N texts (default 4); sts, the first N "
        "pairs of each set whose sentences both have --min-tokens tokens (default 100)",
    )  # fmt: skip
    p.add_argument(
        "--x", default="sparsity", choices=("sparsity", "block"),
        help="x-axis of the frontiers and the figure: token sparsity (default) or block "
        "sparsity (the share of B x B tiles with no predicted pair; what a kernel can skip)",
    )  # fmt: skip
    add_block(p, axis=True)
    p.add_argument(
        "--lengths", default=None, metavar="N,N,...",
        help="sweep at each of these lengths (tokens, specials included, e.g. 512,1024,2048,4096) "
        "on the same inputs cut to each length: every method's frontier against length, written "
        "to DIR/pareto-lengths.json and .csv (--max-tokens defaults to the longest)",
    )  # fmt: skip
    add_out(
        p, default="pareto-out", why="default: pareto-out; it gets four files of fixed names, "
        "pareto.json, pareto.html, pareto-run.json and pareto-heads.npz, so a folder of its own",
    )  # fmt: skip
    add_artefact(p)
    add_model(p)
    add_workers(
        p, default=None, help="processes (default: 2 when there are 2+ CPUs and 8+ inputs, else 1)"
    )
    add_threads(p, default=None, help="torch threads per process (default 1)")
    add_engine(
        p, what="where the sweep runs: local (--workers processes here) or ray (--workers actors, "
        "default one per GPU or CPU)",
    )  # fmt: skip
    p.set_defaults(run=run)


def select_inputs(args, tokenizer, artefact) -> tuple[list[str], list[dict]]:
    """Pack the corpora and choose the inputs (skip / held-out / min-tokens / limit)."""
    from sparse_core.corpus import file_digest, pack, read_corpus, token_counter

    count = token_counter(tokenizer)
    fitted = {}
    if args.held_out:
        if artefact is None:
            from sparse_core.errors import SparsescopeError

            raise SparsescopeError("--held-out needs a Sparsefinder artefact (none is loaded)")
        meta = artefact.meta or {}
        for c in meta.get("corpus") or []:
            fitted[c.get("sha256")] = (c, meta.get("max_tokens"))
    texts: list[str] = []
    described = []
    min_tokens = args.min_tokens if args.min_tokens is not None else args.max_tokens // 2
    for path in args.corpus:
        p = Path(path)
        docs = read_corpus(p, args.format)
        inputs = pack(docs, count, args.max_tokens)
        digest = file_digest(p)
        start, rule = 0, "all inputs"
        if digest in fitted:
            c, mt = fitted[digest]
            if mt == args.max_tokens:
                start = int(c.get("inputs_used") or 0)
                rule = f"after the {start} inputs the artefact was fitted on"
            else:  # another packing: keep inputs made only of documents the fit never read
                seen = int(c.get("documents_seen") or 0)
                start = next((k for k, i in enumerate(inputs) if i.docs[0] >= seen), len(inputs))
                rule = f"inputs from documents >= {seen} (the fit read documents 0..{seen - 1})"
        chosen = [i for i in inputs[start:] if i.n_tokens >= min_tokens]
        texts.extend(i.text for i in chosen)
        described.append({"name": str(p), "sha256": digest, "inputs_total": len(inputs),
                          "held_out_rule": rule, "first_input": start,
                          "inputs_kept": len(chosen)})  # fmt: skip
    texts = texts[args.skip :]
    if args.limit is not None:
        texts = texts[: args.limit]
    return texts, described


def sts_inputs(args, model, sets) -> tuple[list, list[str], list[dict]]:
    """--task sts: the first --task-texts pairs (default 100) of each set whose two sentences
    have at least --min-tokens tokens (default 8), and their unique sentences (the sweep's
    inputs)."""
    from sparse_core.card import StsSet
    from sparse_core.errors import SparsescopeError

    want = args.task_texts or 100
    floor = args.min_tokens if args.min_tokens is not None else 8
    tok = model.tokenizer
    kept, described = [], []
    for s in sets:
        idx = []
        for i, (a, b) in enumerate(zip(s.a, s.b, strict=True)):
            if min(len(tok.encode(a).ids), len(tok.encode(b).ids)) >= floor:
                idx.append(i)
            if len(idx) == want:
                break
        if len(idx) < 3:
            raise SparsescopeError(
                f"{s.name} has {len(idx)} pairs whose sentences both have >= {floor} tokens; "
                "lower --min-tokens"
            )
        kept.append(StsSet(s.name, [s.a[i] for i in idx], [s.b[i] for i in idx],
                           [s.gold[i] for i in idx], s.sha256))  # fmt: skip
        described.append({"name": s.name, "sha256": s.sha256, "pairs_total": len(s),
                          "pairs_kept": len(idx),
                          "rule": f"the first {want} pairs with both sentences >= {floor} "
                                  "tokens"})  # fmt: skip
    texts = list(dict.fromkeys(t for s in kept for t in (*s.a, *s.b)))
    return kept, texts, described


def _check(args) -> None:
    from sparse_core.errors import SparsescopeError

    check_limit(args)
    if args.skip < 0:
        raise SparsescopeError(f"--skip must be >= 0, got {args.skip}")
    if args.workers is not None and not 1 <= args.workers <= 64:
        raise SparsescopeError(f"--workers must be in [1, 64], got {args.workers}")
    if args.threads is None:
        args.threads = 1
    if not 1 <= args.threads <= 64:
        raise SparsescopeError(f"--threads must be in [1, 64], got {args.threads}")
    if args.task_texts is not None and args.task_texts < 1:
        raise SparsescopeError(f"--task-texts must be >= 1, got {args.task_texts}")
    if not 0 <= args.task_sparsity < 1:
        raise SparsescopeError(f"--task-sparsity must be in [0, 1), got {args.task_sparsity}")
    if args.task == "sts":
        if not args.sts:
            raise SparsescopeError(
                "--task sts needs --sts FILE [FILE ...] (STS pairs with gold scores)"
            )
        if args.corpus:
            raise SparsescopeError(
                "--task sts sweeps the STS sentences themselves (the x-axis is the sparsity of "
                "the masks imposed on them); drop --corpus"
            )
        if args.x != "sparsity":
            raise SparsescopeError("--task sts takes the token-sparsity axis (drop --x block)")
    else:
        if args.sts:
            raise SparsescopeError("--sts goes with --task sts")
        if not args.corpus:
            raise SparsescopeError("--corpus PATH [PATH ...] is required (except with --task sts)")
    if args.fidelity_texts < 1:
        raise SparsescopeError(f"--fidelity-texts must be >= 1, got {args.fidelity_texts}")
    from sparse_core.pareto import check_axis

    if args.block is not None and args.x != "block":
        raise SparsescopeError("--block needs --x block (the tile size of the block sparsity axis)")
    try:
        check_axis(args.x, args.block)
    except SparsescopeError as exc:
        raise SparsescopeError(f"--{exc.field}: {exc}") from None
    if args.lengths is not None:
        from sparse_core.pareto.lengths import parse_lengths

        try:
            lengths = parse_lengths(args.lengths, 1 << 16)
        except SparsescopeError as exc:
            raise SparsescopeError(f"--lengths: {exc}") from None
        flags = (
            ("--task", args.task),
            ("--fidelity", args.fidelity),
            ("--x block", args.x != "sparsity"),
            ("--engine ray", args.engine == "ray"),
            ("--workers > 1", (args.workers or 1) > 1),
        )
        clash = [flag for flag, on in flags if on]
        if clash:
            raise SparsescopeError(
                f"--lengths runs one sweep per length in one process, with token sparsity; "
                f"leave out {', '.join(clash)}"
            )
        args.lengths = lengths
        if args.max_tokens is None or args.max_tokens < lengths[-1]:
            args.max_tokens = lengths[-1]
        if args.min_tokens is None:
            args.min_tokens = lengths[-1]
        elif args.min_tokens < lengths[-1]:
            raise SparsescopeError(
                f"--min-tokens must be at least the longest length ({lengths[-1]}) with "
                f"--lengths: every length sees the same inputs, got {args.min_tokens}"
            )
    check_out(args)


def method_names(raw: list[str] | None, artefact) -> list[str]:
    from sparse_core.errors import SparsescopeError
    from sparse_core.methods import METHODS, available

    if raw is None:
        return available(artefact)
    names = [x.strip() for item in raw for x in item.split(",") if x.strip()]
    for nm in names:
        if nm not in METHODS:
            raise SparsescopeError(f"unknown method {nm!r}; methods are {', '.join(METHODS)}")
        if METHODS[nm].needs_artefact and artefact is None:
            raise SparsescopeError(f"method {nm} needs a Sparsefinder artefact; none is loaded")
    return names


def figure(body: dict):
    """The Plotly figure of a pareto.json body (``viz.pareto_figure``, gold line dashed)."""
    from sparse_core.viz import pareto_figure

    fig = pareto_figure(body)
    fig.update_shapes(line_dash="dash")
    fig.update_layout(
        title={
            "text": f"{body['model']}, α = {body['alpha']:g}, "
            f"{'causal' if body['causal'] else 'bidirectional'}, {body['texts']} texts: "
            f"gold sparsity {body['gold_sparsity']:.4f}",
            "font": {"size": 14},
        },
        margin={"t": 60},
    )
    return fig


def write_outputs(
    sweep, out: Path, extra: dict, x: str = "sparsity", block: int | None = None, task=None
) -> tuple[Path, Path]:
    import plotly.io as pio

    out.mkdir(parents=True, exist_ok=True)
    body = sweep.to_json(x, block)
    fig = None
    if task is not None:  # the task axis (definitions §9): loss per frontier point, a second panel
        from sparse_core.pareto.task import attach, with_task_panel

        attach(body, task)
        fig = with_task_panel(figure(body), body)
    js = out / "pareto.json"
    js.write_text(json.dumps(body, indent=1, ensure_ascii=False) + "\n")
    html = out / "pareto.html"
    fig = fig if fig is not None else figure(body)
    html.write_text(pio.to_html(fig, include_plotlyjs=True, full_html=True))
    run_meta = {**extra, **sweep.meta, "grids": sweep.grids}
    (out / "pareto-run.json").write_text(json.dumps(run_meta, indent=1, default=str) + "\n")
    tot = sweep.per_head  # per head: the mean over texts of every point (float32)
    arrays = {"gold_sparsity": (tot.gold / tot.texts).astype(np.float32)}
    for name, acc in tot.sums.items():
        for m, v in acc.items():
            arrays[f"{name}/{m}"] = (v / tot.texts).astype(np.float32)
    np.savez_compressed(out / "pareto-heads.npz", **arrays)
    return js, html


LEVELS = (0.98, 0.95, 0.9, 0.85, 0.8, 0.75, 0.7)


def frontier_table(body: dict, levels=LEVELS, y: str = "recall") -> str:
    """Best ``y`` (recall or mass_recall) of each method among its points with x (sparsity, or
    block sparsity with ``"x": "block"``) >= each level (the best at a level is a point of
    the method's (x, y) frontier)."""
    from sparse_core.pareto.points import x_value

    pts = body["points"]
    x, block = body.get("x", "sparsity"), body.get("block")
    lines = ["method           " + " ".join(f"{'>=' + format(lv, 'g'):>7}" for lv in levels)]
    for name in body["frontiers"]:
        mine = [p for p in pts if p["method"] == name and p.get(y) is not None]
        row = []
        for lv in levels:
            best = [p[y] for p in mine if x_value(p, x, block) >= lv]
            row.append(f"{max(best):7.3f}" if best else f"{'-':>7}")
        lines.append(f"{name:16s} " + " ".join(row))
    return "\n".join(lines)


def task_table(body: dict, levels=LEVELS) -> str:
    """The best task figure (lowest loss, or highest STS Spearman) among each method's frontier
    points with sparsity >= each level."""
    t = body["task"]
    pts = body["points"]
    sts = t.get("key") == "task_spearman"
    key, best = ("task_spearman", max) if sts else ("task_loss", min)
    head = (
        f"(unrestricted: {t['spearman_full']:.4f}, mean over {len(t['sets'])} STS sets, "
        f"{t['sentences']} sentences)" if sts else
        f"(unrestricted: {t['loss_full']:.4f}, {t['texts']} inputs, {t['tokens']} scored tokens)"
    )  # fmt: skip
    lines = [
        f"{t['metric']} with every head restricted {head}:",
        "method           " + " ".join(f"{'>=' + format(lv, 'g'):>7}" for lv in levels),
    ]
    for name, front in body["frontiers"].items():
        row = []
        for lv in levels:
            got = [pts[k][key] for k in front
                   if pts[k]["sparsity"] >= lv and pts[k].get(key) is not None]  # fmt: skip
            row.append(f"{best(got):7.3f}" if got else f"{'-':>7}")
        lines.append(f"{name:16s} " + " ".join(row))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    import torch

    _check(args)
    alpha_of(args)  # before any loading
    if args.engine == "ray":
        from sparse_core.ray_engine import require_ray

        require_ray()  # the one-line error before any work
    torch.set_num_threads(args.threads)
    pool = None
    if args.engine == "local" and args.workers is not None and args.workers > 1:
        # the spawned workers load their model while this process loads its own (they would
        # otherwise start only with the sweep, a few seconds of one core idle)
        from sparse_core.pareto.corpus_sweep import Workers

        pool = Workers(args.workers, args.threads, args.model, args.artefact, args.alpha)
    try:
        return _run(args, pool)
    finally:
        if pool is not None:
            pool.shutdown()


def length_table(body: dict, level: float = 0.9) -> str:
    """Best recall at sparsity >= ``level`` of each method, one column per length."""
    key = f"{level:g}"
    lines = [f"{'method':16s} " + " ".join(f"{n:>7d}" for n in body["lengths"])]
    lines.append(f"{'gold sparsity':16s} " + " ".join(f"{g:7.3f}" for g in body["gold_sparsity"]))
    for name, by_level in body["recall_at_sparsity"].items():
        row = [f"{v:7.3f}" if v is not None else f"{'-':>7}" for v in by_level[key]]
        lines.append(f"{name:16s} " + " ".join(row))
    return "\n".join(lines)


def _run_lengths(args, model, artefact, names, texts, corpora) -> int:
    """``--lengths``: one sweep per length on the same inputs (sparse_core.pareto.lengths)."""
    import csv

    from sparse_core.pareto.lengths import sweep_lengths

    t0 = time.perf_counter()
    sweep = sweep_lengths(model, texts, artefact, args.lengths, alpha=args.alpha,
                          causal=args.causal, methods=names)  # fmt: skip
    elapsed = time.perf_counter() - t0
    out = Path(args.out)
    extra = {
        "corpus": corpora,
        "max_tokens": args.max_tokens,
        "lengths": args.lengths,
        "workers": 1,
        "threads": args.threads,
        "engine": "local",
        "seconds": round(elapsed, 1),
        "seconds_per_length": sweep.meta["seconds"],
        "artefact": None if artefact is None else (artefact.meta or {}).get("created"),
    }
    write_outputs(sweep.sweeps[-1], out, extra)  # the longest length: `serve --results DIR`
    body = sweep.to_json()
    js = out / "pareto-lengths.json"
    js.write_text(json.dumps(body, indent=1, ensure_ascii=False) + "\n")
    with open(out / "pareto-lengths.csv", "w", newline="") as fh:
        csv.writer(fh).writerows(sweep.csv_rows())
    print(
        f"{body['texts']} inputs at lengths {', '.join(map(str, body['lengths']))} in "
        f"{elapsed:.0f} s"
    )
    print("best frontier recall at sparsity >= 0.9, per length:")
    print(length_table(body))
    print(f"wrote {js}, {out / 'pareto-lengths.csv'} (and the longest length's pareto.json, "
          "pareto.html, pareto-run.json, pareto-heads.npz)")  # fmt: skip
    return 0


def _run(args: argparse.Namespace, pool) -> int:
    from sparse_core.errors import ArtefactError, SparsescopeError
    from sparse_core.pareto import sweep_corpus
    from sparse_core.sparsefinder import load_artefact

    lm = None
    if args.task == "mlm":  # the model with its LM head (a one-line error when it has none)
        from sparse_core.pareto.task import check_lm

        lm = check_lm(args.model)
    sts_sets = None
    if args.task == "sts":  # read before the model: a bad file is a one-line error at once
        from sparse_core.card import read_sts

        sts_sets = [read_sts(f) for f in args.sts]
    model = load_for(args, device="cpu")
    try:
        artefact = load_artefact(args.artefact, model_id=model.model_id, alpha=args.alpha)
    except ArtefactError as exc:
        if args.artefact is not None:
            raise
        print(
            f"note: no Sparsefinder artefact ({exc}); reformer, routing and sf-* left out",
            file=sys.stderr,
        )
        artefact = None
    names = method_names(args.methods, artefact)
    if args.lengths is not None:  # inputs of at least the longest length, each cut per length
        packing = argparse.Namespace(**{**vars(args), "max_tokens": 2 * args.lengths[-1]})
        texts, corpora = select_inputs(packing, model.tokenizer, artefact)
    elif sts_sets is not None:
        sts_sets, texts, corpora = sts_inputs(args, model, sts_sets)
    else:
        texts, corpora = select_inputs(args, model.tokenizer, artefact)
    if not texts:
        raise SparsescopeError(
            "no inputs left to sweep (check --skip / --held-out / --limit / --min-tokens)"
        )
    if args.lengths is not None:
        return _run_lengths(args, model, artefact, names, texts, corpora)
    workers = args.workers or (2 if (os.cpu_count() or 1) >= 2 and len(texts) >= 8 else 1)
    if args.engine == "ray":  # the same sweep on Ray actors (None: one per GPU or CPU)
        from functools import partial

        from sparse_core.ray_engine import sweep_corpus_ray

        sweep_corpus, workers = partial(sweep_corpus_ray, checkpoint_dir=args.out), args.workers
    t0 = time.perf_counter()
    sweep = sweep_corpus(
        model, texts, artefact, alpha=args.alpha, causal=args.causal, methods=names,
        workers=workers, threads=args.threads, model_path=args.model,
        artefact_path=args.artefact, fidelity_texts=args.fidelity_texts if args.fidelity else 0,
        **({"pool": pool} if args.engine == "local" else {}),
    )  # fmt: skip
    task = None
    if lm is not None:
        from sparse_core.pareto.task import task_losses

        t1 = time.perf_counter()
        task = task_losses(lm, texts[: args.task_texts or 4], artefact, sweep.grids,
                           sweep.to_json(), alpha=args.alpha)  # fmt: skip
        sweep.meta["task_seconds"] = time.perf_counter() - t1
    if sts_sets is not None:
        from sparse_core.pareto.task import sts_task

        t1 = time.perf_counter()
        task = sts_task(model, sts_sets, artefact, sweep.grids, sweep.to_json(), alpha=args.alpha,
                        min_sparsity=args.task_sparsity)  # fmt: skip
        sweep.meta["task_seconds"] = time.perf_counter() - t1
    elapsed = time.perf_counter() - t0
    extra = {
        "corpus": corpora,
        "max_tokens": args.max_tokens,
        "workers": workers,
        "threads": args.threads,
        "engine": args.engine,
        "seconds": round(elapsed, 1),
        "artefact": None if artefact is None else (artefact.meta or {}).get("created"),
    }
    js, html = write_outputs(sweep, Path(args.out), extra, args.x, args.block, task)
    body = sweep.to_json(args.x, args.block)
    print(
        f"{body['texts']} inputs, {len(body['points'])} points, gold sparsity "
        f"{body['gold_sparsity']:.4f}, in {elapsed:.0f} s "
        f"({args.engine} engine, {workers or 'auto'} worker(s))"
    )
    axis = "sparsity" if body["x"] == "sparsity" else f"block sparsity (B = {body['block']})"
    print(f"best frontier recall at {axis} >= level:")
    print(frontier_table(body))
    print(f"best mass recall (attention mass kept) at {axis} >= level:")
    print(frontier_table(body, y="mass_recall"))
    if task is not None:
        from sparse_core.pareto.task import attach

        print(task_table(attach(sweep.to_json(), task)))
    print(f"wrote {js}, {html} (and pareto-run.json, pareto-heads.npz)")
    return 0
