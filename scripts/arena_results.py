"""The arena results (docs/results.md "The arena"): every method of the registry, old and
new, on held-out WikiText-2, ranked by the best recall and mass recall it reaches at a budget.

    python scripts/arena_results.py --out results-arena            # 200 inputs, 2 workers
    python scripts/arena_results.py --texts 20 --out /tmp/arena    # a quick look

Held-out split, by article (``split_articles``; change it there): WikiText-2's ``valid.txt`` is
read as articles (``corpus.read_corpus``); the shipped Sparsefinder artefact records how many
articles its fit read (``documents_seen``, 25 of 60), and the evaluation articles are those from
that one on (``--first-article`` overrides it; without an artefact, 25). They are packed into
inputs of at most ``--max-tokens`` (512) tokens (``corpus.pack``), inputs shorter than half of
that are dropped, and the first ``--texts`` (200) are swept with every method's grid
(``pareto.sweep_corpus``, the ``sparsescope pareto`` engine) on the default model at α = 1.5.

Budgets (definitions §4, §8): token sparsity ≥ 0.9; block sparsity ≥ 0.5 and ≥ 0.75 at B = 32 and
64. For each budget and method: the best recall and the best mass recall among its grid points
that meet the budget (mean over heads of the per-head means over texts), the setting of each,
and a ranking. Per head: how many of the L·H heads each method wins at the token budget (best
recall among all methods meeting it in that head), and learned (sf-*) against the best
heuristic per head. Writes ``OUT/arena.json`` (everything), ``OUT/arena.md`` (the tables of
docs/results.md) and the pareto outputs (``OUT/pareto.json``, ``pareto.html``,
``pareto-heads.npz``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's sparse_core and tests.checkout

from tests.checkout import use_the_checkout  # noqa: E402

use_the_checkout()  # ``import sparsescope``: this checkout's app/, not an installed copy
CORPUS = next(
    (p / "shared/data/wikitext-2/valid.txt" for p in ROOT.parents
     if (p / "shared/data/wikitext-2/valid.txt").is_file()),
    ROOT.parent / "shared/data/wikitext-2/valid.txt",
)  # fmt: skip
#: (x, block, level): token sparsity ≥ 0.9, block sparsity ≥ 0.5 / 0.75 at B = 32 and 64
BUDGETS = [("sparsity", None, 0.9), ("block", 32, 0.5), ("block", 32, 0.75),
           ("block", 64, 0.5), ("block", 64, 0.75)]  # fmt: skip
LEARNED = ("sf-distance", "sf-quantization", "sf-kmeans")
ORACLES = ("topk", "topp")
DEFAULT_FIRST = 25


def split_articles(docs: list, first: int) -> list:
    """The evaluation articles: those from ``first`` on (the earlier ones may have been read by
    the artefact's fit). The one place that defines the split."""
    return docs[first:]


def budget_name(x: str, block: int | None, level: float) -> str:
    return f"sparsity>={level:g}" if x == "sparsity" else f"block{block}>={level:g}"


def x_of(figs: dict, x: str, block: int | None) -> np.ndarray:
    return figs["sparsity"] if x == "sparsity" else figs[f"block_{block}"]


def rank_budget(grids: dict, values: dict, x: str, block: int | None, level: float) -> dict:
    """Per method: the best recall and mass recall among points meeting the budget."""
    out = {}
    for name, grid in grids.items():
        v = values[name]
        ok = x_of(v, x, block) >= level
        row: dict = {"points": int(ok.sum())}
        for metric in ("recall", "mass_recall"):
            if ok.any():
                k = int(np.flatnonzero(ok)[np.argmax(v[metric][ok])])
                row[metric] = round(float(v[metric][k]), 4)
                row[f"{metric}_at"] = {"params": grid[k],
                                       "sparsity": round(float(v["sparsity"][k]), 4),
                                       "x": round(float(x_of(v, x, block)[k]), 4)}  # fmt: skip
            else:
                row[metric] = None
        out[name] = row
    return out


def per_head_wins(sweep, level: float = 0.9) -> dict:
    """At token sparsity ≥ level, per head (L·H): each method's best recall among its points
    meeting the budget in that head; how many heads each method wins, and learned vs the best
    heuristic (oracles left out of both)."""
    tot = sweep.per_head
    best = {}
    for name, acc in tot.sums.items():
        spa = acc["sparsity"] / tot.texts  # (P, L, H)
        rec = np.where(spa >= level, acc["recall"] / tot.texts, -np.inf)
        best[name] = rec.max(axis=0).reshape(-1)  # (L·H,)
    names = [n for n in best if n not in ORACLES]
    stack = np.stack([best[n] for n in names])  # (M, L·H)
    winners = np.argmax(stack, axis=0)
    wins = {n: int((winners == k).sum()) for k, n in enumerate(names)}
    learned = [k for k, n in enumerate(names) if n in LEARNED]
    heur = [k for k, n in enumerate(names) if n not in LEARNED]
    out = {"level": level, "heads": int(stack.shape[1]), "wins": wins}
    if learned and heur:
        lb, hb = stack[learned].max(axis=0), stack[heur].max(axis=0)
        has = np.isfinite(lb) | np.isfinite(hb)
        out["learned_beats_heuristics"] = int(((lb > hb) & has).sum())
        out["heuristics_beat_learned"] = int(((hb > lb) & has).sum())
        out["margin_median"] = round(
            float(np.median((lb - hb)[np.isfinite(lb) & np.isfinite(hb)])), 4
        )
    return out


def _cell(row: dict, metric: str) -> tuple[str, str]:
    """(value, setting) of a method's best point for ``metric`` at a budget."""
    if row[metric] is None:
        return "-", "no point meets the budget"
    at = row[f"{metric}_at"]
    ps = ", ".join(f"{k}={v}" for k, v in at["params"].items()
                   if k not in ("window", "globals") or v)  # fmt: skip
    return f"{row[metric]:.3f}", f"{ps} (x {at['x']:.3f})"


def markdown(report: dict) -> str:
    """The ranking tables of docs/results.md."""
    lines = []
    for b in report["budgets"]:
        rows = sorted(b["methods"].items(), key=lambda kv: -(kv[1]["recall"] or -1))
        lines += [f"### {b['name']}", "",
                  "| rank | method | best recall | setting | best mass recall | setting |",
                  "|---:|---|---:|---|---:|---|"]  # fmt: skip
        for r, (name, row) in enumerate(rows, 1):
            rv, rs = _cell(row, "recall")
            mv, ms = _cell(row, "mass_recall")
            lines.append(f"| {r} | {name} | {rv} | {rs} | {mv} | {ms} |")
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpus", type=Path, default=CORPUS)
    p.add_argument("--texts", type=int, default=200)
    p.add_argument("--max-tokens", type=int, default=512)
    p.add_argument(
        "--first-article",
        type=int,
        default=None,
        help="first evaluation article (default: the artefact's documents_seen)",
    )
    p.add_argument("--alpha", type=float, default=1.5)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--model", default=None, help="a model (default: the default model)")
    p.add_argument("--out", type=Path, default=Path("results-arena"))
    args = p.parse_args()

    import torch

    from sparse_core import load_model
    from sparse_core.corpus import pack, read_corpus, token_counter
    from sparse_core.errors import ArtefactError
    from sparse_core.pareto import sweep_corpus
    from sparse_core.sparsefinder import load_artefact
    from sparsescope.commands.pareto import write_outputs

    torch.set_num_threads(1)
    model = load_model(args.model, device="cpu")
    try:
        art = load_artefact(model_id=model.model_id, alpha=args.alpha)
    except ArtefactError as exc:
        print(f"note: no Sparsefinder artefact ({exc}); sf-* left out", file=sys.stderr)
        art = None
    first = args.first_article
    if first is None:
        seen = (
            [c.get("documents_seen") for c in ((art.meta or {}).get("corpus") or [])] if art else []
        )
        first = int(seen[0]) if seen and seen[0] is not None else DEFAULT_FIRST
    docs = split_articles(read_corpus(args.corpus), first)
    inputs = [i for i in pack(docs, token_counter(model.tokenizer), args.max_tokens)
              if i.n_tokens >= args.max_tokens // 2][: args.texts]  # fmt: skip
    texts = [i.text for i in inputs]
    t0 = time.perf_counter()
    sweep = sweep_corpus(model, texts, art, alpha=args.alpha, workers=args.workers,
                         model_path=args.model, artefact_path=None if art else False)  # fmt: skip
    seconds = time.perf_counter() - t0
    budgets = []
    for x, block, level in BUDGETS:
        ranked = rank_budget(sweep.grids, sweep.values, x, block, level)
        budgets.append({"name": budget_name(x, block, level), "x": x, "block": block,
                        "level": level, "methods": ranked})  # fmt: skip
    report = {
        "model": model.model_id,
        "alpha": args.alpha,
        "artefact": None if art is None else (art.meta or {}).get("created"),
        "split": {
            "corpus": str(args.corpus),
            "first_article": first,
            "articles": len(docs),
            "inputs": len(texts),
            "tokens": int(sum(i.n_tokens for i in inputs)),
            "max_tokens": args.max_tokens,
        },  # fmt: skip
        "gold_sparsity": round(sweep.gold_sparsity, 4),
        "points": {name: len(g) for name, g in sweep.grids.items()},
        "seconds": round(seconds, 1),
        "load": os.getloadavg(),
        "budgets": budgets,
        "per_head": per_head_wins(sweep),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "arena.json").write_text(json.dumps(report, indent=1) + "\n")
    (args.out / "arena.md").write_text(markdown(report))
    write_outputs(sweep, args.out, {"script": "scripts/arena_results.py", **report["split"]})
    print(markdown(report))
    print(json.dumps(report["per_head"], indent=1))
    print(
        f"{len(texts)} inputs in {seconds:.0f} s; wrote {args.out}/arena.json, arena.md, "
        "pareto.json, pareto.html"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
