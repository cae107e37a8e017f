"""``sparsescope analyze "TEXT"``: per-head gold sparsity and how each method covers it."""

from __future__ import annotations

import argparse
import json
import sys

from sparse_core.methods import METHODS

from .common import (
    add_alpha,
    add_artefact,
    add_block,
    add_causal,
    add_device,
    add_json,
    add_max_tokens,
    add_method,
    add_model,
    alpha_of,
    load_for,
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "analyze",
        help="analyse one text: gold sparsity per head, pattern recall/sparsity",
        description="Run the entmax model on TEXT and report, per layer and head, the gold "
        "sparsity of the attention graph and the recall / sparsity / exactness of every method "
        "of the registry at its default settings (the sf-* methods when a Sparsefinder "
        "artefact fits the model at this alpha).",
    )
    p.add_argument("text", help="the text to analyse (use - to read standard input)")
    add_alpha(p)
    add_causal(p)
    p.add_argument(
        "--truncate", action="store_true", help="keep the first tokens (the model's positions)"
    )
    add_model(p)
    add_artefact(p)
    add_device(p)
    add_max_tokens(p, text=True)
    add_method(
        p, choices=tuple(METHODS), several=True,
        help=f"report only this method (repeatable; default all: {', '.join(METHODS)})",
    )  # fmt: skip
    add_block(p)
    add_json(
        p, "with the oracle budgets: the least top-k and top-p mass recovering 90 %% / 99 %% "
        "of each query's support, per head and pooled",
    )  # fmt: skip
    p.set_defaults(run=run)


def analyze(
    model,
    text: str,
    *,
    alpha: float,
    causal: bool,
    truncate: bool,
    artefact,
    methods: list[str] | None = None,
    budgets: bool = True,
) -> dict:
    """The JSON report: model, device, tokens and, per head, gold sparsity + the metrics of each
    method (``methods``, default every one of the registry) that can run with ``artefact``:
    recall, sparsity, exact, precision, mass recall and ``block_sparsity`` ({"16": …, "128":
    …}, the share of B × B tiles with no predicted pair, ``metrics.block_sparsity``); and the
    oracle budgets (``sparse_core.budgets.budgets_json``: per head and pooled, the least top-k
    and top-p mass recovering 90 % / 99 % of each query's support)."""
    from sparse_core.bitsets import fold_blocks
    from sparse_core.methods import PredictContext, available, evaluate
    from sparse_core.metrics import sparsity

    out = model.run(text, alpha=alpha, causal=causal, truncate=truncate)
    ctx = PredictContext.from_run(out, artefact)
    causal = bool(out.causal)  # a decoder is causal whatever was asked
    if out.attn.is_dense:
        gold = sparsity(out.graph, causal=causal)  # (L, H)
    else:  # a long text: from the sparse store's edges
        import torch

        from sparse_core.bitsets import Gold

        gold = torch.from_numpy(Gold.of(ctx).sparsity())
    per_method = {}
    for name in available(artefact, methods):
        method = METHODS[name]
        params = method.defaults(out.n, artefact)
        per_method[name] = (params, evaluate(ctx, method, params))
    heads = []
    for li in range(out.layers):
        for hi in range(out.heads):
            pats = {
                name: {
                    "params": params,
                    **fold_blocks({k: round(float(v[li, hi]), 6) for k, v in m.items()}),
                }
                for name, (params, m) in per_method.items()
            }
            heads.append(
                {
                    "layer": li,
                    "head": hi,
                    "gold_sparsity": round(float(gold[li, hi]), 6),
                    "patterns": pats,
                }
            )
    report = {
        "model": model.model_id,
        "device": model.device,
        "alpha": alpha,
        "causal": causal,
        "decoder": bool(model.config.is_decoder),
        "truncated": out.truncated,
        "n": out.n,
        "tokens": out.tokens,
        "heads": heads,
    }
    if budgets:
        from sparse_core.budgets import budgets_json

        report["budgets"] = budgets_json(ctx)
    return report


def _table(report: dict, block: int = 64) -> str:
    """Per head: gold sparsity, and per method recall / mass recall / sparsity / block
    sparsity at ``block``."""
    names = list(report["heads"][0]["patterns"]) if report["heads"] else []
    b = str(block)
    lines = [
        f"{report['model']} on {report['device']}, alpha={report['alpha']}, "
        f"{'causal' if report['causal'] else 'bidirectional'}, n={report['n']} tokens"
        + (" (truncated)" if report["truncated"] else ""),
        "",
    ]
    head = f"{'layer':>5} {'head':>4} {'gold':>6}"
    for nm in names:
        head += f" | {nm[:25]:>25}"
    lines.append(head)
    lines.append(" " * 17 + f" | {'recall/mass/spars/blk' + b:>25}" * len(names))
    for h in report["heads"]:
        row = f"{h['layer']:>5} {h['head']:>4} {h['gold_sparsity']:>6.3f}"
        for nm in names:
            p = h["patterns"][nm]
            row += (f" | {p['recall']:>7.3f}/{p['mass_recall']:.3f}/{p['sparsity']:.3f}/"
                    f"{p['block_sparsity'][b]:.3f}")  # fmt: skip
        lines.append(row)
    if report["heads"]:
        lines.append("")
        mean_gold = sum(h["gold_sparsity"] for h in report["heads"]) / len(report["heads"])
        summary = f"{'mean':>10} {mean_gold:>6.3f}"
        for nm in names:
            k = len(report["heads"])
            r = sum(h["patterns"][nm]["recall"] for h in report["heads"]) / k
            m = sum(h["patterns"][nm]["mass_recall"] for h in report["heads"]) / k
            s = sum(h["patterns"][nm]["sparsity"] for h in report["heads"]) / k
            bs = sum(h["patterns"][nm]["block_sparsity"][b] for h in report["heads"]) / k
            summary += f" | {r:>7.3f}/{m:.3f}/{s:.3f}/{bs:.3f}"
        lines.append(summary)
        params = "; ".join(
            f"{nm}: "
            + ", ".join(f"{k}={v}" for k, v in report["heads"][0]["patterns"][nm]["params"].items())
            for nm in names
        )
        lines.append(f"defaults: {params}")
        lines.append("mass: mass recall, the share of the attention mass kept (per query)")
        lines.append(f"blk{b}: block sparsity, the share of {b} x {b} tiles with no predicted pair")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from sparse_core.errors import ArtefactError
    from sparse_core.sparsefinder import load_artefact

    text = sys.stdin.read() if args.text == "-" else args.text
    alpha_of(args)  # a bad alpha is the user's first error, before any loading
    model = load_for(args)
    try:
        artefact = load_artefact(args.artefact, model_id=model.model_id, alpha=args.alpha)
    except ArtefactError as exc:  # the sf-* columns need a matching artefact; the rest do not
        if args.artefact is not None:
            raise
        print(
            f"note: no Sparsefinder artefact for this model/alpha ({exc}); sf-* methods left out",
            file=sys.stderr,
        )
        artefact = None
    report = analyze(
        model,
        text,
        alpha=args.alpha,
        causal=args.causal,
        truncate=args.truncate,
        artefact=artefact,
        methods=args.method,
        budgets=args.json,
    )
    print(json.dumps(report) if args.json else _table(report, args.block))
    return 0
