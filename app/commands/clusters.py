"""``sparsescope clusters --corpus PATH --layer L --head H``: POS make-up of k-means clusters.

The paper's Figure 6 (definitions §5): run the entmax model on the corpus inputs (packed as by
``fit`` and ``pareto``, the first ``--limit`` of them), assign every query and key of one head to
its ``--top-k`` nearest of the artefact's ``--clusters`` k-means centroids (top-1 by default: each
token counts once per side), and report per cluster the share of every Universal POS tag among
its queries and, separately, its keys, with the counts and a few example tokens. CoNLL-U corpora
use their gold UPOS column; other text is tagged by spaCy (``sparse_core.pos``). Special tokens
are counted under their own tags "[CLS]" / "[SEP]".

``--json`` prints exactly ``{"layer", "head", "clusters": [{"id", "queries": {TAG: share},
"keys": {TAG: share}, "n_queries", "n_keys", "examples": [str]}]}``.
"""

from __future__ import annotations

import argparse
import json

from .common import (
    add_alpha,
    add_artefact,
    add_corpus,
    add_device,
    add_json,
    add_limit,
    add_max_tokens,
    add_model,
    alpha_of,
    check_limit,
    load_for,
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "clusters",
        help="POS tag shares of the queries and keys in one head's k-means clusters",
        description="Assign one head's queries and keys to the Sparsefinder k-means clusters on "
        "a corpus and report the share of each Universal POS tag per cluster (paper Figure 6).",
    )
    add_corpus(p, several=False, what=" (CoNLL-U: its gold POS; other text: tagged by spaCy)")
    add_limit(
        p, default=50, why="the tag shares of a head's clusters settle within a few thousand "
        "tokens, and every input is tagged by spaCy",
    )  # fmt: skip
    p.add_argument("--layer", type=int, required=True, help="layer (0-based)")
    p.add_argument("--head", type=int, required=True, help="head (0-based)")
    p.add_argument("--clusters", type=int, default=8, metavar="B", help="k-means centroids (8)")
    p.add_argument("--top-k", type=int, default=1, help="clusters per token (default 1)")
    add_alpha(p)
    add_max_tokens(p)
    add_json(p)
    add_artefact(p)
    add_model(p)
    add_device(p)
    p.set_defaults(run=run)


def breakdown(model, artefact, inputs, layer: int, head: int, n_clusters: int, top_k: int,
              alpha: float) -> dict:  # fmt: skip
    """Accumulate the cluster POS counts over packed ``inputs`` (``corpus.PackedInput``)."""
    import torch
    from tqdm.auto import tqdm

    from sparse_core import pos

    counts = pos.ClusterCounts(n_clusters)
    spacy_words = None
    if any(i.words is None for i in inputs):
        spacy_words = pos.word_tags_many([i.text for i in inputs if i.words is None])
    k = 0
    with torch.inference_mode():
        for inp in tqdm(inputs, desc="clusters", unit="input", leave=False):
            out = model.run(inp.text, alpha=alpha, truncate=True)
            if inp.words is not None:
                words = inp.words
            else:
                words, k = spacy_words[k], k + 1
            tags = pos.align(out.offsets, out.special, words)
            aq, ak = pos.head_assignments(out, artefact, layer, head, n_clusters, top_k)
            counts.add(aq, ak, tags, out.tokens, out.special)
    return counts.result(layer, head)


def _table(res: dict, texts: int, n_clusters: int, top_k: int) -> str:
    lines = [
        f"layer {res['layer']}, head {res['head']}: {n_clusters} k-means clusters, top-{top_k}, "
        f"{texts} inputs",
        "",
    ]
    for c in res["clusters"]:
        q = ", ".join(f"{t} {v:.0%}" for t, v in list(c["queries"].items())[:5]) or "-"
        k = ", ".join(f"{t} {v:.0%}" for t, v in list(c["keys"].items())[:5]) or "-"
        lines.append(f"cluster {c['id']:>2}: {c['n_queries']:>6} queries | {q}")
        lines.append(f"{'':>11} {c['n_keys']:>6} keys    | {k}")
        lines.append(f"{'':>11} e.g. {', '.join(c['examples']) or '-'}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from sparse_core.corpus import pack, read_corpus, token_counter
    from sparse_core.errors import SparsescopeError
    from sparse_core.sparsefinder import load_artefact

    check_limit(args)
    alpha_of(args)  # before any loading
    model = load_for(args)
    cfg = model.config
    if not 0 <= args.layer < cfg.num_layers:
        raise SparsescopeError(f"--layer must be in [0, {cfg.num_layers - 1}], got {args.layer}")
    if not 0 <= args.head < cfg.num_heads:
        raise SparsescopeError(f"--head must be in [0, {cfg.num_heads - 1}], got {args.head}")
    artefact = load_artefact(args.artefact, model_id=model.model_id, alpha=args.alpha)
    if args.clusters not in artefact.centroids:
        raise SparsescopeError(
            f"--clusters must be one of {', '.join(map(str, artefact.centroids))} (the "
            f"artefact's k-means fits), got {args.clusters}"
        )
    if not 1 <= args.top_k <= args.clusters:
        raise SparsescopeError(f"--top-k must be in [1, {args.clusters}], got {args.top_k}")
    docs = read_corpus(args.corpus, args.format)
    inputs = pack(docs, token_counter(model.tokenizer), args.max_tokens)[: args.limit]
    res = breakdown(model, artefact, inputs, args.layer, args.head, args.clusters, args.top_k,
                    args.alpha)  # fmt: skip
    print(json.dumps(res) if args.json else _table(res, len(inputs), args.clusters, args.top_k))
    return 0
