"""``sparsescope heads --corpus FILE.conllu``: which heads track which dependency relation.

Clark et al. 2019 ("What Does BERT Look At?", Table 1; reference code clarkkev/attention-analysis,
``Syntax_Analysis.ipynb``) for an entmax model, against a gold Universal Dependencies treebank
(definitions §11, ``sparse_core.roles.SyntaxTally``): every sentence of the CoNLL-U file (the
first ``--limit``) is run through each model; each head's attention is made word-level (gold
words, sub-word tokens mapped to the word holding them); a word's predicted head is its
most-attended word (``dep->head``) or the word attending to it most (``head<-dep``). Per relation
(at least ``--min-words`` words; ``root`` and ``punct`` left out) the accuracy of the best
(layer, head, direction) beside the best fixed-offset baseline (always the word i + k).

Models: ``--model`` repeatable, each with its ``--alpha`` (one value for all, or one per model).
With no ``--model``: the shipped adapted default at 1.5 and the softmax-trained original run with
softmax (α = 1), side by side. ``--json`` prints ``{"corpus", "sentences", "min_words", "models":
[{"model", "alpha", "skipped_words", "table": [{"relation", "words", "accuracy", "layer",
"head", "direction", "baseline", "offset"}]}]}``; otherwise a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from .common import add_alpha, add_corpus, add_device, add_json, add_limit, add_model

log = logging.getLogger(__name__)

#: Relations with fewer words than this are left out of the table (the reference: 100 words on
#: the whole Penn Treebank dev set).
MIN_WORDS = 50


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "heads",
        help="per dependency relation, the best head's accuracy against fixed-offset baselines",
        description="Run each model on the sentences of a CoNLL-U treebank and report, per gold "
        "dependency relation, the accuracy of the attention head that tracks it best (a word's "
        "most-attended word is its predicted head, or the word attending to it most) against "
        "the best fixed-offset baseline (Clark et al. 2019, Table 1; definitions §11). --alpha "
        "is repeatable: one for every --model, or one per --model in order; with no --model, "
        "the default pair runs at its own alphas (1.5 and 1) and --alpha is refused.",
    )
    add_corpus(p, several=False, formats=False, metavar="FILE.conllu", what=": a CoNLL-U treebank")
    add_model(
        p, several=True,
        what="a model, repeatable (default: the shipped adapted model at alpha 1.5 and the "
        "original sentence-transformers/all-MiniLM-L6-v2 at alpha 1, softmax): ",
    )  # fmt: skip
    add_alpha(p, several=True)  # repeatable: one for every model, or one per --model in order
    add_limit(p, unit="sentences")
    p.add_argument(
        "--min-words", type=int, default=MIN_WORDS, metavar="N",
        help=f"leave out relations with fewer words (default {MIN_WORDS})",
    )  # fmt: skip
    add_json(p)
    add_device(p)
    p.set_defaults(run=run)


def models_of(args: argparse.Namespace) -> list[tuple[str | None, float]]:
    """(model, alpha) pairs from the flags, checked before anything loads."""
    from sparse_core.errors import SparsescopeError
    from sparse_core.sources import DEFAULT_MODEL_ID, ORIGINAL_MODEL_ID

    from ..engine.request import DEFAULT_ALPHA, check_alpha

    given = args.alpha if isinstance(args.alpha, list) else None  # not given: the default
    if args.model is None:
        if given is not None:
            raise SparsescopeError("--alpha needs --model (the default pair has its own alphas)")
        return [(DEFAULT_MODEL_ID, DEFAULT_ALPHA), (ORIGINAL_MODEL_ID, 1.0)]
    alphas = given or [DEFAULT_ALPHA]
    if len(alphas) == 1:
        alphas = alphas * len(args.model)
    if len(alphas) != len(args.model):
        raise SparsescopeError(
            f"--alpha must be given once or once per --model ({len(args.model)}), got {len(alphas)}"
        )
    return [(m, check_alpha(a)) for m, a in zip(args.model, alphas, strict=True)]


def tally(model, docs, alpha: float):
    """The :class:`~sparse_core.roles.SyntaxTally` of ``model`` at ``alpha`` over ``docs``
    (CoNLL-U documents with gold words and arcs)."""
    import numpy as np
    import torch
    from tqdm.auto import tqdm

    from sparse_core import pos
    from sparse_core.roles import SyntaxTally

    cfg = model.config
    out_tally = SyntaxTally(cfg.num_layers, cfg.num_heads)
    with torch.inference_mode():
        for doc in tqdm(docs, desc=f"heads {model.model_id} α={alpha:g}", unit="sentence"):
            out = model.run(doc.text, alpha=alpha, truncate=True, hidden=False)
            token_word = np.asarray(pos.token_words(out.offsets, out.special, doc.words))
            head = np.asarray([h for h, _ in doc.arcs], dtype=np.int64)
            out_tally.add(out.probs.numpy(), token_word, head, [r for _, r in doc.arcs])
    return out_tally


def markdown(results: list[dict], min_words: int) -> str:
    """One row per relation: its words, the best offset, and each model's best head."""
    first = results[0]["table"]
    by_model = [{r["relation"]: r for r in res["table"]} for res in results]
    head = ["relation", "words", "best offset"] + [
        f"{res['model']} (α = {res['alpha']:g})" for res in results
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in first:
        rel = row["relation"]
        cells = [rel, str(row["words"]), f"{100 * row['baseline']:.1f} (k = {row['offset']:+d})"]
        for table in by_model:
            r = table.get(rel)
            if r is None:
                cells.append("-")
                continue
            acc = f"{100 * r['accuracy']:.1f}"
            acc = f"**{acc}**" if r["accuracy"] > r["baseline"] else acc  # beats the offsets
            cells.append(f"{acc} ({r['layer']}-{r['head']} {r['direction']})")
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(
        f"accuracy in %, in bold where the head beats the best offset; relations with at least "
        f"{min_words} words; a head is layer-head "
        "(0-based) and its direction: dep->head (the word attends to its head) or head<-dep "
        "(the head attends to the word)"
    )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from sparse_core import load_model
    from sparse_core.corpus import read_corpus
    from sparse_core.errors import SparsescopeError

    if args.limit is not None and args.limit < 1:
        raise SparsescopeError(f"--limit must be >= 1, got {args.limit}")
    if args.min_words < 1:
        raise SparsescopeError(f"--min-words must be >= 1, got {args.min_words}")
    pairs = models_of(args)
    path = Path(args.corpus)
    docs = read_corpus(path, "conllu")
    parsed = [
        d
        for d in docs
        if d.words is not None and d.arcs is not None and any(r not in ("_", "") for _, r in d.arcs)
    ]
    if not parsed:
        raise SparsescopeError(
            f"{path} has no sentence with gold words and dependency arcs (a CoNLL-U file with "
            "HEAD and DEPREL columns is needed)"
        )
    if len(parsed) < len(docs):
        log.warning("%d sentences whose words were not found in their text left out",
                    len(docs) - len(parsed))  # fmt: skip
    parsed = parsed[: args.limit]
    results = []
    for name, alpha in pairs:
        model = load_model(name, device=args.device)
        t = tally(model, parsed, alpha)
        results.append(
            {
                "model": model.model_id,
                "alpha": alpha,
                "skipped_words": t.skipped_words,
                "table": t.table(args.min_words),
            }  # fmt: skip
        )
    body = {"corpus": path.name, "sentences": len(parsed), "min_words": args.min_words,
            "models": results}  # fmt: skip
    print(json.dumps(body) if args.json else markdown(results, args.min_words))
    return 0
