"""A model's card: what it is (from its checkpoint's metadata) and what it is competent at.

**What it is** (:func:`describe`): read from the model's own config, where ``sparsescope adapt``
records how it was made (``sparsescope_adapt``: base, objective, corpus digest, steps, what was
trained; ``entmax_alpha``: the α it was trained with, one value or one per layer and head;
definitions §7). A checkpoint without that record was trained with softmax attention (entmax is
then applied at inference only) unless it carries a trained α of its own (a SparseModernBERT).

**What it is competent at** (measured by ``sparsescope card``, shipped as JSON in
``sparse_core/data/cards/`` so a server needs no corpus at run time):

- STS (:func:`sts_spearman`): semantic textual similarity, the native task of a sentence
  embedder such as all-MiniLM-L6-v2. Each sentence's embedding is the mean of its final hidden
  states over all its tokens (specials included, as sentence-transformers pools), the pair's
  score the cosine of the two, and the figure Spearman's rank correlation (:func:`spearman`:
  Pearson's correlation of the average ranks, ties sharing their mean rank) with the gold
  scores, per STS set; the card's figure is the plain mean over the sets.
- Masked-LM loss (:func:`mlm_loss`), for a model with a trained LM head: the mean loss over the
  scored tokens of one fixed seeded masking of the held-out articles (definitions §7), beside a
  context-free unigram model's loss on the very same tokens (:func:`unigram_loss`: token
  frequencies of the training articles, add-one smoothed over the vocabulary). A loss near the
  unigram one means the model predicts masked tokens no better than their frequency does.
"""

from __future__ import annotations

import csv
import json
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from .errors import SparsescopeError

log = logging.getLogger(__name__)

CARDS = Path(__file__).resolve().parent / "data" / "cards"
CARD_FORMAT = "sparsescope-card-1"


# -- STS data ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StsSet:
    """One STS set: sentence pairs and their gold similarity scores."""

    name: str
    a: list[str]
    b: list[str]
    gold: list[float]
    sha256: str = ""

    def __len__(self) -> int:
        return len(self.gold)

    def head(self, k: int | None) -> StsSet:
        """The first ``k`` pairs (None: all)."""
        if k is None or k >= len(self):
            return self
        return StsSet(self.name, self.a[:k], self.b[:k], self.gold[:k], self.sha256)


def read_sts(path: str | Path) -> StsSet:
    """An STS file: SemEval's ``score<TAB>sentence A<TAB>sentence B`` rows, or SICK's with a
    header row (``pair_ID, sentence_A, sentence_B, relatedness_score, …``). Rows without a
    numeric score are skipped; a file with no pair is an error."""
    from .corpus import file_digest

    p = Path(path)
    if not p.is_file():
        raise SparsescopeError(f"STS file {p} does not exist", field="sts")
    a, b, gold = [], [], []
    with open(p, encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))
    sick = bool(rows) and "relatedness_score" in rows[0]
    if sick:
        head = rows[0]
        ia, ib, ig = (head.index(k) for k in ("sentence_A", "sentence_B", "relatedness_score"))
        rows = rows[1:]
    else:
        ig, ia, ib = 0, 1, 2
    for r in rows:
        if len(r) <= max(ia, ib, ig):
            continue
        try:
            g = float(r[ig])
        except ValueError:
            continue
        if not math.isfinite(g) or not r[ia].strip() or not r[ib].strip():
            continue
        a.append(r[ia].strip())
        b.append(r[ib].strip())
        gold.append(g)
    if not gold:
        raise SparsescopeError(
            f"{p} has no STS pair (expected score<TAB>sentence A<TAB>sentence B rows, or SICK's "
            "columns with a header row)",
            field="sts",
        )
    return StsSet(p.stem, a, b, gold, file_digest(p))


# -- Spearman ------------------------------------------------------------------------------------


def average_ranks(x: Tensor) -> Tensor:
    """Ranks 1..n of ``x`` (1-D), ties sharing the mean of the ranks they span (float64)."""
    x = x.double().flatten()
    n = x.numel()
    order = torch.argsort(x, stable=True)
    xs = x[order]
    ranks = torch.empty(n, dtype=torch.float64)
    i = 0
    while i < n:
        j = i
        while j + 1 < n and xs[j + 1] == xs[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(x: Sequence[float] | Tensor, y: Sequence[float] | Tensor) -> float:
    """Spearman's rank correlation: Pearson's correlation of the average ranks (NaN when either
    side is constant)."""
    tx = torch.as_tensor(x, dtype=torch.float64).flatten()
    ty = torch.as_tensor(y, dtype=torch.float64).flatten()
    if tx.numel() != ty.numel() or tx.numel() < 2:
        raise SparsescopeError(
            f"spearman needs two equally long series of 2+ values, got {tx.numel()} and "
            f"{ty.numel()}"
        )
    rx, ry = average_ranks(tx), average_ranks(ty)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    den = math.sqrt(float((rx * rx).sum()) * float((ry * ry).sum()))
    return float((rx * ry).sum()) / den if den > 0 else math.nan


# -- sentence embeddings -------------------------------------------------------------------------


@torch.inference_mode()
def embed(model, texts: Sequence[str], alpha, *, batch: int = 64, masks=None) -> Tensor:
    """(len(texts), d_model) float64 L2-normalised mean-pooled final hidden states of ``model``
    (a SparseModel) at ``alpha``. Texts run in padded batches of similar length (padding keys
    are masked out of every query's entmax, so each text's states are its own). ``masks``: a
    function of a text's single run returning the (L, H, n, n) bool masks every head is
    restricted to (then each text runs alone: a run, the masks, a restricted forward)."""
    a = model._alpha(alpha)
    out = torch.empty(len(texts), model.config.hidden_size, dtype=torch.float64)
    if masks is not None:
        for i, t in enumerate(texts):
            run = model.run(t, alpha=a, truncate=True, hidden=False)
            h = model.forward_masked(run, masks(run))
            out[i] = h.double().mean(0)
        return torch.nn.functional.normalize(out, dim=-1)
    encs = [model.encode(t, truncate=True).ids for t in texts]
    order = sorted(range(len(texts)), key=lambda i: len(encs[i]))
    pad = int(model.config.pad_token_id or 0)
    for s in range(0, len(order), batch):
        idx = order[s : s + batch]
        n = max(len(encs[i]) for i in idx)
        ids = torch.full((len(idx), n), pad, dtype=torch.long)
        keep = torch.zeros(len(idx), n, dtype=torch.long)
        for r, i in enumerate(idx):
            ids[r, : len(encs[i])] = torch.tensor(encs[i])
            keep[r, : len(encs[i])] = 1
        dev = model._device
        res = model._forward(ids.to(dev), keep.to(dev), a, False, None, record=False)
        h = res["hidden"].double().cpu()  # (B, n, D)
        w = keep.double().unsqueeze(-1)
        out[idx] = (h * w).sum(1) / w.sum(1)
    return torch.nn.functional.normalize(out, dim=-1)


def sts_scores(model, s: StsSet, alpha, *, batch: int = 64, masks=None) -> Tensor:
    """The cosine similarity of each pair of ``s`` (float64), embedded by :func:`embed`."""
    uniq = list(dict.fromkeys([*s.a, *s.b]))
    pos = {t: k for k, t in enumerate(uniq)}
    e = embed(model, uniq, alpha, batch=batch, masks=masks)
    ia = torch.tensor([pos[t] for t in s.a])
    ib = torch.tensor([pos[t] for t in s.b])
    return (e[ia] * e[ib]).sum(-1)


def sts_spearman(model, sets: Sequence[StsSet], alpha, *, batch: int = 64, masks=None) -> dict:
    """Spearman of every set and their plain mean (the card's figure)."""
    per = {}
    for s in sets:
        per[s.name] = spearman(sts_scores(model, s, alpha, batch=batch, masks=masks), s.gold)
        log.info("STS %s (%d pairs): Spearman %.4f", s.name, len(s), per[s.name])
    return {"spearman": sum(per.values()) / len(per), "per_set": per}


# -- masked-LM loss and its unigram baseline -----------------------------------------------------


def unigram_loss(train_ids: Tensor, labels: Tensor, vocab_size: int, ignore: int = -100) -> float:
    """Mean −log p(token) over the scored ``labels`` (≠ ``ignore``) under the add-one smoothed
    unigram distribution of ``train_ids`` (every id in it counted, specials excluded by the
    caller)."""
    counts = torch.bincount(train_ids.flatten().long(), minlength=vocab_size).double() + 1.0
    logp = counts.log() - counts.sum().log()
    scored = labels[labels != ignore].long()
    if scored.numel() == 0:
        raise SparsescopeError("no scored token to measure the unigram loss on")
    return float(-logp[scored].mean())


def mlm_loss(lm, corpus: str | Path, *, every: int = 5, seq_len: int = 128, seed: int = 0,
             batch: int = 16, alpha=None) -> dict:  # fmt: skip
    """Held-out masked-LM loss of ``lm`` (a LanguageModel with a trained head) on the articles
    ``corpus``'s split holds out (:func:`sparse_core.adapt.data.split_corpus` with ``every``,
    the split adaptation used), with the unigram baseline on the same scored tokens."""
    from .adapt.data import Batches, special_frame, split_corpus, token_sequences
    from .adapt.evaluate import evaluate_loss

    tok = lm.sparse.tokenizer
    c = lm.sparse.config
    split = split_corpus(corpus, every)
    held = token_sequences(split.eval, tok, seq_len)
    train = token_sequences(split.train, tok, seq_len)
    head, tail = special_frame(tok)
    body = train[:, len(head) : train.shape[1] - len(tail)]
    data = Batches(held, tok, decoder=lm.decoder, vocab_size=c.vocab_size)
    a = lm.sparse.default_alpha if alpha is None else alpha
    got = evaluate_loss(lm, data, a, batch=batch, seed=seed)
    labels = torch.cat([b.labels.flatten() for b in data.eval_batches(batch, seed=seed)])
    uni = unigram_loss(body, labels, c.vocab_size)
    return {
        "loss": got["loss"],
        "perplexity": math.exp(got["loss"]),
        "unigram_loss": uni,
        "tokens": got["tokens"],
        "sequences": got["sequences"],
        "seq_len": seq_len,
        "seed": seed,
        "held_out": f"documents k with k mod {every} = {every - 1}",
    }


# -- what a model is -----------------------------------------------------------------------------


def _short(model_id: str) -> str:
    low = model_id.lower()
    if "minilm" in low:
        return "MiniLM"
    if "modernbert" in low:
        return "ModernBERT"
    return model_id.rstrip("/").split("/")[-1]


def alpha_summary(alpha) -> dict:
    """α as a card says it: ``{"value": 1.5}`` or ``{"per_head": true, "min", "max", "mean"}``."""
    if isinstance(alpha, Tensor):
        t = alpha.double()
        return {"per_head": True, "min": round(float(t.min()), 4),
                "max": round(float(t.max()), 4), "mean": round(float(t.mean()), 4)}  # fmt: skip
    return {"per_head": False, "value": float(alpha)}


def describe(model) -> dict:
    """What ``model`` (a SparseModel) is, from its config: label, base, objective, data, steps,
    the α it was trained with (or that it was trained with softmax)."""
    hf = getattr(getattr(model, "net", None), "config", None)
    adapt = getattr(hf, "sparsescope_adapt", None) if hf is not None else None
    if not isinstance(adapt, dict):
        adapt = None
    trained = bool(getattr(model, "alpha_trained", False))
    model_id = str(getattr(model, "model_id", "") or "")
    short = _short(model_id)
    a = alpha_summary(getattr(model, "default_alpha", 1.5))
    if adapt:
        how = ("learned α per head" if a["per_head"]
               else f"{a['value']:g}-entmax")  # fmt: skip
        label = f"{short}, adapted with {how}"
        training = "entmax"
    elif trained:
        label, training = f"{short}, trained with entmax", "entmax"
    else:
        label, training = f"{short}, softmax-trained; entmax applied", "softmax"
    out = {
        "id": model_id,
        "label": label,
        "attention_training": training,
        "alpha": a if training == "entmax" else None,
        "alpha_trained": trained,
        "base": None,
        "objective": None,
        "data": None,
        "steps": None,
        "trained": None,
    }
    if adapt:
        out.update(
            base=adapt.get("base"),
            objective=adapt.get("objective"),
            data={"corpus_sha256": adapt.get("corpus_sha256")},
            steps=adapt.get("steps"),
            trained=adapt.get("train"),
        )
    return out


# -- the shipped cards ---------------------------------------------------------------------------


def card_path(model_id: str, root: Path | None = None) -> Path:
    slug = "".join(c if c.isalnum() or c in "-._" else "_" for c in model_id)
    return (root or CARDS) / f"{slug}.json"


def load_card(model_id: str, root: Path | None = None) -> dict | None:
    """The measured card shipped for ``model_id`` (None: none measured)."""
    p = card_path(model_id, root)
    if not p.is_file():
        return None
    try:
        body = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        log.warning("card %s unreadable: %s", p, exc)
        return None
    if body.get("format") != CARD_FORMAT or body.get("model") != model_id:
        log.warning("card %s is not a %s card of %s", p, CARD_FORMAT, model_id)
        return None
    return body


def card_for(model, root: Path | None = None) -> dict:
    """``GET /api/models``' ``card`` of a loaded model: :func:`describe` plus the shipped
    measurements (null figures when none were measured for it)."""
    out = describe(model)
    shipped = load_card(out["id"], root)
    what = (shipped or {}).get("what") or {}
    for k in ("base", "objective", "data", "steps", "trained", "description"):
        if what.get(k) is not None:
            out[k] = what[k]
    sts = (shipped or {}).get("sts") or {}
    mlm = (shipped or {}).get("mlm")
    out.update(
        measured=shipped is not None,
        sts_spearman=sts.get("spearman"),
        sts_spearman_softmax=(sts.get("softmax") or {}).get("spearman"),
        sts_alpha=sts.get("alpha"),
        sts_sets=[{"name": s["name"], "pairs": s["pairs"]} for s in sts.get("sets", [])],
        sts_per_set=sts.get("per_set"),
        sts_per_set_softmax=(sts.get("softmax") or {}).get("per_set"),
        mlm_loss=None if not mlm else mlm.get("loss"),
        mlm_unigram_loss=None if not mlm else mlm.get("unigram_loss"),
        mlm_tokens=None if not mlm else mlm.get("tokens"),
        mlm_note=(shipped or {}).get("mlm_note"),
        command=(shipped or {}).get("command"),
    )
    return out
