"""``sparsescope card --model ID … --sts FILE …``: measure the model card of each model.

For every ``--model``: what it is (``sparse_core.card.describe``: the adaptation record in its
config; for a checkpoint without one, the facts its own README states), its STS Spearman at its
own α on the ``--sts`` sets (mean over the sets; ``sparse_core.card.sts_spearman``) beside the
softmax original's (``--softmax-model`` at α = 1, measured once), and, when it has a trained LM
head and ``--mlm-corpus`` is given, its held-out masked-LM loss with the unigram baseline on the
same tokens. Writes one JSON card per model into ``--out`` (default: the shipped
``sparse_core/data/cards/``, which ``GET /api/models`` reads) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
import time
from pathlib import Path

import sparse_core

from .common import (
    add_batch,
    add_device,
    add_eval_every,
    add_model,
    add_out,
    add_sts,
    add_threads,
)

#: Where the shipped cards are (``sparse_core.card.CARDS``, which ``GET /api/models`` reads).
CARDS = Path(sparse_core.__file__).resolve().parent / "data" / "cards"
#: Sentences per forward when no --batch is given.
BATCH = 64


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "card",
        help="measure model cards: STS Spearman (held out) and masked-LM loss vs unigram",
        description="Measure what each model is competent at on held-out data and write its "
        "card (JSON) for the server: STS Spearman of mean-pooled final hidden states (cosine) "
        "at the model's own alpha beside the softmax original's, and the masked-LM loss with "
        "a unigram baseline where the model has a trained LM head.",
    )
    add_model(p, several=True, required=True, what="a model to measure, repeatable: ")
    add_sts(p, required=True, what="; the card's figure is the mean of their Spearman correlations")
    p.add_argument(
        "--softmax-model", default="sentence-transformers/all-MiniLM-L6-v2", metavar="NAME_OR_DIR",
        help="the softmax original whose figure (at alpha 1) is shown beside each model's",
    )  # fmt: skip
    p.add_argument(
        "--mlm-corpus", default=None, metavar="PATH",
        help="the corpus adaptation split by article (its held-out articles give the masked-LM "
        "loss, its training articles the unigram baseline)",
    )  # fmt: skip
    add_eval_every(
        p, help="the split: article k is held out iff k mod K = K - 1 (default 5, as adapt's)"
    )
    p.add_argument(
        "--pairs",
        type=int,
        default=None,
        metavar="N",
        help="use the first N pairs of each STS set (default: all)",
    )
    add_batch(p, help=f"sentences per forward (default {BATCH})")
    add_out(p, default=str(CARDS), why="default: sparse_core/data/cards, the shipped ones")
    add_device(p)
    add_threads(p, default=None, help="torch threads (default: torch's own)")
    p.set_defaults(run=run)


def _check(args) -> None:
    from sparse_core.errors import SparsescopeError

    if args.batch is None:
        args.batch = BATCH
    if args.pairs is not None and args.pairs < 3:
        raise SparsescopeError(f"--pairs must be >= 3, got {args.pairs}")
    if not 1 <= args.batch <= 4096:
        raise SparsescopeError(f"--batch must be in [1, 4096], got {args.batch}")
    if args.eval_every < 2:
        raise SparsescopeError(f"--eval-every must be >= 2, got {args.eval_every}")
    if args.mlm_corpus is not None and not Path(args.mlm_corpus).is_file():
        raise SparsescopeError(f"--mlm-corpus {args.mlm_corpus} does not exist")
    if args.out is not None and Path(args.out).exists() and not Path(args.out).is_dir():
        raise SparsescopeError(f"--out must be a directory, but {args.out!r} is a file")


def readme_facts(path: Path) -> dict:
    """What a checkpoint's own README (a Hugging Face model card) states: its base model, its
    objective, its training steps and data (the front matter's ``datasets``)."""
    p = Path(path) / "README.md"
    if not p.is_file():
        return {}
    text = p.read_text(encoding="utf-8", errors="replace")
    out: dict = {}
    front = re.match(r"^---\n(.*?)\n---", text, re.S)
    if front:
        data = re.search(r"^datasets:\n((?:- .*\n?)+)", front.group(1) + "\n", re.M)
        if data:
            out["data"] = {"datasets": [x[2:].strip() for x in data.group(1).splitlines()]}
    base = re.search(r"pretrained \[`([^`]+)`\]", text)
    if base:
        out["base"] = base.group(1)
    if re.search(r"contrastive (learning )?objective", text):
        pairs = re.search(r"([0-9.]+[BM]) sentence pairs", text)
        out["objective"] = "contrastive sentence embedding" + (
            f" ({pairs.group(1)} sentence pairs)" if pairs else ""
        )
    steps = re.search(r"during (\d+)k steps", text)
    if steps:
        out["steps"] = int(steps.group(1)) * 1000
    return out


def _what(model, source, corpus: Path | None, every: int) -> dict:
    from sparse_core import shipped
    from sparse_core.card import describe
    from sparse_core.corpus import file_digest

    d = describe(model)
    what = {k: d[k] for k in ("base", "objective", "data", "steps", "trained") if d[k] is not None}
    if d["attention_training"] == "softmax":
        what.update(readme_facts(source.path))
        what["description"] = (
            "trained with softmax attention; sparsescope applies α-entmax at inference only"
        )
        return what
    if model.model_id in shipped.SHIPPED:
        base = shipped.base_of(model.model_id)
        what["base"] = f"{base} (+ a masked-LM head trained on its frozen softmax body)"
    data = dict(what.get("data") or {})
    if corpus is not None and data.get("corpus_sha256") == file_digest(corpus):
        data["corpus"] = corpus.name
        data["split"] = f"training articles (k mod {every} != {every - 1})"
    what["data"] = data
    what["description"] = "fine-tuned with α-entmax in every head (sparsescope adapt)"
    return what


def _load(name: str, device: str):
    """(SparseModel, LanguageModel with a trained head or None, the source)."""
    from sparse_core.errors import ModelLoadError
    from sparse_core.model import load_model
    from sparse_core.sources import resolve

    src = resolve(name)
    try:
        from sparse_core.adapt.lm import load_lm

        lm = load_lm(name, device)
    except ModelLoadError:
        return load_model(name, device=device), None, src
    if lm.new_head:
        return lm.sparse, None, src
    return lm.sparse, lm, src


def run(args: argparse.Namespace) -> int:
    import torch

    from sparse_core.card import CARD_FORMAT, card_path, mlm_loss, read_sts, sts_spearman

    _check(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    sets = [read_sts(f).head(args.pairs) for f in args.sts]
    device = args.device or "cpu"
    corpus = Path(args.mlm_corpus) if args.mlm_corpus else None
    out_dir = Path(args.out) if args.out else None
    command = "sparsescope " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    t0 = time.perf_counter()
    soft_model, _, _ = _load(args.softmax_model, device)
    softmax = sts_spearman(soft_model, sets, 1.0, batch=args.batch)
    soft_id = soft_model.model_id
    del soft_model
    rows = []
    for name in args.model:
        model, lm, src = _load(name, device)
        alpha = model.default_alpha
        got = sts_spearman(model, sets, alpha, batch=args.batch)
        mlm, note = None, None
        if lm is not None and corpus is not None:
            mlm = mlm_loss(lm, corpus, every=args.eval_every, seed=0)
        elif lm is None:
            note = (
                "no trained masked-LM head: the checkpoint was not trained as a language model, "
                "so it has no masked-LM loss"
            )
        a = alpha.tolist() if isinstance(alpha, torch.Tensor) else float(alpha)
        card = {
            "format": CARD_FORMAT,
            "model": model.model_id,
            "what": _what(model, src, corpus, args.eval_every),
            "sts": {
                "metric": "Spearman of cosine(mean-pooled final hidden states) with gold",
                "alpha": a,
                "spearman": got["spearman"],
                "per_set": got["per_set"],
                "sets": [{"name": s.name, "pairs": len(s), "sha256": s.sha256} for s in sets],
                "softmax": {"model": soft_id, "alpha": 1.0, **softmax},
            },
            "mlm": mlm,
            "mlm_note": note,
            "command": command,
        }
        path = card_path(model.model_id, out_dir)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(card, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        rows.append((model.model_id, got["spearman"], mlm, path))
        del model, lm
    print(f"STS Spearman, mean over {len(sets)} sets ({', '.join(s.name for s in sets)}):")
    print(f"  {soft_id} at alpha 1 (softmax): {softmax['spearman']:.4f}")
    for mid, sp, mlm, path in rows:
        extra = ""
        if mlm:
            extra = f"; masked-LM loss {mlm['loss']:.3f} (unigram {mlm['unigram_loss']:.3f})"
        print(f"  {mid} at its own alpha: {sp:.4f}{extra}  -> {path}")
    print(f"in {time.perf_counter() - t0:.0f} s")
    return 0
