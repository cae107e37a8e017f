"""Training data for adapting a model: the held-out split, token sequences, BERT masking.

**Split by article** (:func:`split_corpus`): the corpus's documents (WikiText: articles, from a
`` = Title = `` line to the next; plain text: paragraphs; CoNLL-U: sentences) are numbered from 0
in file order and document k is held out for evaluation iff ``k mod every == every − 1``
(``every = 5``: the 5th, 10th, … article, a fifth of the text spread over the file). Deterministic,
no randomness; the two parts are also written as files (WikiText lines verbatim) so that ``fit``
and ``pareto`` read exactly the same text.

**Sequences** (:func:`token_sequences`): each part's documents are tokenised without special
tokens, concatenated in order, and cut into pieces of ``seq_len − specials`` tokens, each wrapped
in the tokenizer's own specials (``[CLS] … [SEP]`` for BERT, nothing for GPT-2); the last partial
piece is dropped. Rows (N, seq_len), no padding.

**Order** (:func:`batch_indices`): the training stream is epoch after epoch of a permutation of
the N sequences seeded by (seed, epoch); step s takes stream items s·B … s·B + B − 1. The data
position of a run is therefore its step: a resumed run reads exactly what an uninterrupted one
would, with no reader state to save.

**Masking** (:func:`mask_tokens`, BERT; Devlin et al. 2019 §3.1 and Appendix A.1, as transformers'
``DataCollatorForLanguageModeling`` does it): each non-special token is chosen with probability
0.15; of the chosen, 80 % become the mask token, 10 % a uniformly random token of the vocabulary,
10 % stay; the loss is on the chosen ones. A row with no chosen token gets one (uniform among its
non-special positions), so every row contributes. The draws come from a generator seeded by
(seed, step): masking too is a function of the step. Decoders need no masking (next-token loss).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from ..corpus import _WIKI_TITLE, Document, detect_format, read_corpus
from ..errors import SparsescopeError
from .lm import IGNORE, Batch

MASK_PROB, MASK_TOKEN, RANDOM_TOKEN = 0.15, 0.8, 0.1
MASK_NAMES = ("[MASK]", "<mask>", "<MASK>")


def mix_seed(*parts: int) -> int:
    """A 63-bit seed from integers (stable across platforms and Python runs)."""
    h = hashlib.sha256(",".join(str(int(p)) for p in parts).encode()).digest()
    return int.from_bytes(h[:8], "little") >> 1


@dataclass
class Split:
    """A corpus split by document: the parts' documents and where they were written."""

    train: list[Document]
    eval: list[Document]
    every: int
    eval_indices: list[int]
    fmt: str


def split_corpus(path: str | Path, every: int = 5, out_dir: str | Path | None = None) -> Split:
    """Split a corpus by document (module docstring); ``every = 0``: nothing held out.

    With ``out_dir``, writes ``train.txt`` and ``eval.txt`` there (WikiText: the articles'
    lines verbatim; other formats: documents separated by blank lines).
    """
    if every < 0 or every == 1:
        raise SparsescopeError(
            f"--eval-every must be 0 (hold nothing out) or >= 2, got {every}", field="eval_every"
        )
    p = Path(path)
    docs = read_corpus(p)  # one-line errors: missing, not UTF-8, no text
    lines = p.read_text(encoding="utf-8").splitlines()
    fmt = detect_format(lines[:200])
    held = [k for k in range(len(docs)) if every and k % every == every - 1]
    chosen = set(held)
    split = Split(
        train=[d for k, d in enumerate(docs) if k not in chosen],
        eval=[docs[k] for k in held],
        every=every,
        eval_indices=held,
        fmt=fmt,
    )
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        if fmt == "wikitext":
            blocks = _wiki_blocks(lines)
            if len(blocks) != len(docs):  # an article without text: fall back to documents
                blocks = None
        else:
            blocks = None
        parts = (("train.txt", lambda k: k not in chosen), ("eval.txt", chosen.__contains__))
        for name, keep in parts:
            if blocks is not None:
                text = "".join("\n".join(b) + "\n" for k, b in enumerate(blocks) if keep(k))
            else:
                text = "\n\n".join(d.text for k, d in enumerate(docs) if keep(k)) + "\n"
            (out / name).write_text(text, encoding="utf-8")
    return split


def _wiki_blocks(lines: list[str]) -> list[list[str]]:
    """The raw lines of each WikiText article (from its title line to the next title)."""
    blocks: list[list[str]] = []
    for line in lines:
        if _WIKI_TITLE.match(line):
            blocks.append([line])
        elif blocks:
            blocks[-1].append(line)
    return [b for b in blocks if any(x.strip() for x in b[1:] if not re.match(r"^ ?(= ){2,}", x))]


def special_frame(tokenizer) -> tuple[list[int], list[int]]:
    """The special ids the tokenizer puts before and after a text (e.g. [CLS] / [SEP])."""
    enc = tokenizer.encode("a")
    ids, special = enc.ids, enc.special_tokens_mask
    first = next((i for i, s in enumerate(special) if not s), len(ids))
    last = max((i for i, s in enumerate(special) if not s), default=len(ids) - 1)
    return list(ids[:first]), list(ids[last + 1 :])


def token_sequences(docs: list[Document], tokenizer, seq_len: int) -> Tensor:
    """Rows (N, seq_len) of consecutive tokens, each framed by the tokenizer's specials."""
    head, tail = special_frame(tokenizer)
    body = seq_len - len(head) - len(tail)
    if body < 2:
        raise SparsescopeError(
            f"--seq-len {seq_len} leaves {body} tokens after the special tokens; use more",
            field="seq_len",
        )
    stream: list[int] = []
    for enc in tokenizer.encode_batch([d.text for d in docs], add_special_tokens=False):
        stream.extend(enc.ids)
    n = len(stream) // body
    if n == 0:
        return torch.empty(0, seq_len, dtype=torch.long)
    x = torch.tensor(stream[: n * body], dtype=torch.long).view(n, body)
    parts = [torch.tensor(head, dtype=torch.long).expand(n, -1), x]
    parts.append(torch.tensor(tail, dtype=torch.long).expand(n, -1))
    return torch.cat(parts, dim=1).contiguous()


def batch_indices(n: int, batch: int, step: int, seed: int) -> Tensor:
    """The sequence indices of the batch of ``step`` (0-based) in the seeded epoch stream."""
    out = []
    for k in range(step * batch, step * batch + batch):
        epoch, pos = divmod(k, n)
        out.append(int(_permutation(n, seed, epoch)[pos]))
    return torch.tensor(out, dtype=torch.long)


_PERMS: dict[tuple[int, int, int], Tensor] = {}


def _permutation(n: int, seed: int, epoch: int) -> Tensor:
    key = (n, seed, epoch)
    perm = _PERMS.get(key)
    if perm is None:
        if len(_PERMS) > 8:
            _PERMS.clear()
        g = torch.Generator().manual_seed(mix_seed(seed, epoch, 17))
        perm = _PERMS[key] = torch.randperm(n, generator=g)
    return perm


def mask_token_id(tokenizer) -> int:
    """The tokenizer's mask token ([MASK] or <mask>), or a one-line error."""
    for name in MASK_NAMES:
        i = tokenizer.token_to_id(name)
        if i is not None:
            return int(i)
    raise SparsescopeError(
        "the tokenizer has no mask token ([MASK] or <mask>); masked-LM adaptation needs one",
        field="model",
    )


def mask_tokens(
    ids: Tensor, special: Tensor, mask_id: int, vocab_size: int, generator: torch.Generator
) -> Batch:
    """BERT's masking of ``ids`` (B, n); ``special`` (n,) or (B, n) bool marks special tokens."""
    b, n = ids.shape
    special = special.expand(b, n)
    u = torch.rand(b, n, generator=generator)
    chosen = (u < MASK_PROB) & ~special
    empty = ~chosen.any(dim=1)
    if bool(empty.any()):  # every row gets at least one chosen token
        w = (~special).float()[empty]
        pick = torch.multinomial(w, 1, generator=generator).squeeze(1)
        chosen[empty.nonzero().squeeze(1), pick] = True
    v = torch.rand(b, n, generator=generator)
    rand_ids = torch.randint(vocab_size, (b, n), generator=generator)
    labels = torch.where(chosen, ids, torch.full_like(ids, IGNORE))
    out = ids.clone()
    out = torch.where(chosen & (v < MASK_TOKEN), torch.full_like(ids, mask_id), out)
    swap = chosen & (v >= MASK_TOKEN) & (v < MASK_TOKEN + RANDOM_TOKEN)
    out = torch.where(swap, rand_ids, out)
    return Batch(out, labels)


class Batches:
    """The batches of one corpus part for a model: training (by step) and evaluation."""

    def __init__(self, seqs: Tensor, tokenizer, *, decoder: bool, vocab_size: int) -> None:
        self.seqs = seqs  # (N, n)
        self.decoder = decoder
        self.vocab_size = vocab_size
        head, tail = special_frame(tokenizer)
        n = seqs.shape[1]
        self.special = torch.zeros(n, dtype=torch.bool)
        self.special[: len(head)] = True
        if tail:
            self.special[n - len(tail) :] = True
        self.mask_id = None if decoder else mask_token_id(tokenizer)

    def __len__(self) -> int:
        return int(self.seqs.shape[0])

    def make(self, idx: Tensor, seed: int, step: int) -> Batch:
        ids = self.seqs[idx]
        if self.decoder:
            return Batch(ids, ids.clone())
        g = torch.Generator().manual_seed(mix_seed(seed, step, 29))
        return mask_tokens(ids, self.special, self.mask_id, self.vocab_size, g)

    def train_batch(self, step: int, batch: int, seed: int) -> Batch:
        return self.make(batch_indices(len(self), batch, step, seed), seed, step)

    def eval_batches(self, batch: int, seed: int = 0, limit: int | None = None):
        """The evaluation batches in order, masked with a fixed seed (the same for every model)."""
        n = len(self) if limit is None else min(limit, len(self))
        for i, s in enumerate(range(0, n, batch)):
            yield self.make(torch.arange(s, min(s + batch, n)), seed, -1 - i)
