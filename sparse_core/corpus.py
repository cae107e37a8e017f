"""Corpus readers (plain text, WikiText, CoNLL-U) and packing into model inputs.

The learned patterns (definitions §3) are fitted on the attention graphs the entmax model produces
on a corpus; :func:`read_corpus` turns a file into :class:`Document` s and :func:`pack` turns
documents into model inputs of at most ``max_tokens`` tokens (special tokens included).

Formats, detected from the file's first lines (:func:`detect_format`):

- **CoNLL-U** (Universal Dependencies): one document per sentence, its text from the
  ``# text =`` line (rebuilt from the word forms and ``SpaceAfter=No`` when the line is missing),
  its gold words kept as ``(start, end, upos)`` character spans and their dependency arcs
  (HEAD, DEPREL) as ``Document.arcs``. Empty nodes (``5.1``) are skipped;
  the words of a multi-word token (``3-4``) are located inside the token's surface form when
  their forms appear there in order, and otherwise all take the whole surface span.
- **WikiText**: a line `` = Title = `` starts an article; `` = = Section = = `` (and deeper) lines
  are section headings inside it and are dropped; the article's paragraphs are joined with
  newlines into one document titled ``Title``. WikiText's split-number markers are undone
  (``1 @,@ 000`` -> ``1,000``, ``0 @.@ 7`` -> ``0.7``, ``A @-@ B`` -> ``A-B``); ``<unk>`` is kept.
- **plain** text: paragraphs separated by blank lines, one document each.
"""

from __future__ import annotations

import hashlib
import logging
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeVar

from .errors import SparsescopeError

log = logging.getLogger(__name__)

Format = Literal["auto", "conllu", "wikitext", "plain"]
Word = tuple[int, int, str]  # (start, end, UPOS): a character span of the document's text
#: Maps texts to their token counts *with* the model's special tokens (see :func:`token_counter`).
TokenCounter = Callable[[Sequence[str]], list[int]]

_WIKI_TITLE = re.compile(r"^ ?= (?!=)(.*?) = ?$")
_WIKI_SECTION = re.compile(r"^ ?(= ){2,}.*?( =){2,} ?$")
_WIKI_JOINER = re.compile(r" @(.)@ ")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class Document:
    """One unit of a corpus: a sentence (CoNLL-U), an article (WikiText) or a paragraph (plain)."""

    text: str
    words: list[Word] | None = None  # gold words with UPOS (CoNLL-U only)
    title: str | None = None
    #: gold dependency arcs, one per word (CoNLL-U only): (index of the head in ``words``, -1
    #: for the root or an unannotated head; DEPREL)
    arcs: list[tuple[int, str]] | None = None


@dataclass(frozen=True)
class PackedInput:
    """One model input made by :func:`pack`.

    ``docs`` is the (first, last) index, inclusive, of the documents its text comes from;
    ``words`` the gold words re-based on this text (None unless every piece has gold words).
    """

    text: str
    n_tokens: int  # special tokens included
    docs: tuple[int, int]
    words: list[Word] | None = None


# ----------------------------------------------------------------------------- reading


def detect_format(lines: Sequence[str]) -> Literal["conllu", "wikitext", "plain"]:
    """Guess the format from a file's first lines (CoNLL-U, then WikiText, else plain)."""
    for line in lines:
        if line.startswith(("# text =", "# sent_id =")):
            return "conllu"
        fields = line.rstrip("\n").split("\t")
        if len(fields) == 10 and re.fullmatch(r"\d+(-\d+|\.\d+)?", fields[0]):
            return "conllu"
    if any(_WIKI_TITLE.match(line.rstrip("\n")) for line in lines):
        return "wikitext"
    return "plain"


def read_corpus(path: str | Path, fmt: Format = "auto") -> list[Document]:
    """Read a corpus file into documents; ``fmt`` "auto" detects the format (module docstring)."""
    p = Path(path)
    if not p.is_file():
        raise SparsescopeError(f"corpus file {str(p)!r} does not exist")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SparsescopeError(f"corpus file {str(p)!r} is not UTF-8 text ({exc.reason})") from None
    lines = text.splitlines()
    if fmt == "auto":
        fmt = detect_format(lines[:200])
    readers = {"conllu": _read_conllu, "wikitext": _read_wikitext, "plain": _read_plain}
    if fmt not in readers:
        raise SparsescopeError(
            f"corpus format must be one of auto, {', '.join(readers)}, got {fmt}"
        )
    docs = readers[fmt](lines)
    if not docs:
        raise SparsescopeError(f"corpus file {str(p)!r} holds no text")
    log.info("read %d documents from %s (%s)", len(docs), p, fmt)
    return docs


def file_digest(path: str | Path) -> str:
    """sha256 of a file (recorded in artefact metadata so a fit names exactly what it read)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _read_plain(lines: list[str]) -> list[Document]:
    docs, para = [], []
    for line in [*lines, ""]:
        if line.strip():
            para.append(line.strip())
        elif para:
            docs.append(Document("\n".join(para)))
            para = []
    return docs


def _read_wikitext(lines: list[str]) -> list[Document]:
    docs: list[Document] = []
    title: str | None = None
    paras: list[str] = []

    def flush() -> None:
        if paras:
            docs.append(Document("\n".join(paras), title=title))

    for line in lines:
        if _WIKI_SECTION.match(line):
            continue
        m = _WIKI_TITLE.match(line)
        if m:
            flush()
            title, paras = _WIKI_JOINER.sub(r"\1", m.group(1).strip()), []
        elif line.strip():
            paras.append(_WIKI_JOINER.sub(r"\1", line.strip()))
    flush()
    return docs


def _read_conllu(lines: list[str]) -> list[Document]:
    docs, block = [], []
    for line in [*lines, ""]:
        if line.strip():
            block.append(line)
        elif block:
            doc = _conllu_sentence(block)
            if doc is not None:
                docs.append(doc)
            block = []
    return docs


def _conllu_sentence(block: list[str]) -> Document | None:
    text = sent_id = None
    rows: list[list[str]] = []
    for line in block:
        if line.startswith("#"):
            key, _, value = line[1:].partition("=")
            if key.strip() == "text":
                text = value.strip()
            elif key.strip() == "sent_id":
                sent_id = value.strip()
        else:
            fields = line.split("\t")
            if len(fields) == 10 and "." not in fields[0]:  # skip empty nodes (5.1)
                rows.append(fields)
    if not rows:
        return None
    if text is None:  # rebuild the raw text from the forms and SpaceAfter=No
        parts = []
        skip_to = 0
        for f in rows:
            if "-" in f[0]:
                skip_to = int(f[0].split("-")[1])
            elif int(f[0]) <= skip_to:
                continue
            parts.append(f[1] + ("" if "SpaceAfter=No" in f[9] else " "))
        text = "".join(parts).strip()
    words = _conllu_words(text, rows)
    return Document(text, words, sent_id, _conllu_arcs(rows) if words is not None else None)


def _conllu_arcs(rows: list[list[str]]) -> list[tuple[int, str]]:
    """HEAD and DEPREL of the syntactic words (multi-word token lines skipped), the head as an
    index into the same words."""
    syntactic = [f for f in rows if "-" not in f[0]]
    index = {f[0]: k for k, f in enumerate(syntactic)}
    return [(index.get(f[6], -1), f[7]) for f in syntactic]


def _conllu_words(text: str, rows: list[list[str]]) -> list[Word] | None:
    """Character spans of the syntactic words in ``text`` (module docstring for the rules)."""
    words: list[Word] = []
    cursor, i = 0, 0
    while i < len(rows):
        f = rows[i]
        if "-" in f[0]:  # multi-word token a-b: its words follow
            a, b = (int(x) for x in f[0].split("-"))
            start = text.find(f[1], cursor)
            if start < 0:
                return None
            end = start + len(f[1])
            parts = rows[i + 1 : i + 1 + (b - a + 1)]
            surface, at, spans = text[start:end].lower(), 0, []
            for p in parts:
                k = surface.find(p[1].lower(), at)
                if k < 0:
                    spans = [(start, end)] * len(parts)
                    break
                spans.append((start + k, start + k + len(p[1])))
                at = k + len(p[1])
            words.extend((s, e, p[3]) for (s, e), p in zip(spans, parts, strict=True))
            cursor, i = end, i + 1 + len(parts)
            continue
        start = text.find(f[1], cursor)
        if start < 0:
            return None
        words.append((start, start + len(f[1]), f[3]))
        cursor, i = start + len(f[1]), i + 1
    return words


# ----------------------------------------------------------------------------- packing


def token_counter(tokenizer) -> TokenCounter:
    """A :data:`TokenCounter` from a ``tokenizers.Tokenizer`` (batched in Rust: 1 MB in seconds)."""

    def count(texts: Sequence[str]) -> list[int]:
        if not texts:
            return []
        return [len(e.ids) for e in tokenizer.encode_batch(list(texts))]

    return count


@dataclass(frozen=True)
class _Unit:
    doc: int
    start: int
    end: int
    tokens: int  # without special tokens


def _spans(text: str, pattern: re.Pattern, start: int = 0, end: int | None = None):
    """Non-blank pieces of text[start:end] separated by ``pattern`` matches, as (s, e) spans."""
    end = len(text) if end is None else end
    out, at = [], start
    for m in pattern.finditer(text, start, end):
        if text[at : m.start()].strip():
            out.append((at, m.start()))
        at = m.end()
    if text[at:end].strip():
        out.append((at, end))
    return out


def _units(docs: Sequence[Document], count: TokenCounter, special: int, budget: int):
    """Documents that fit whole, else their sentences, else (very long sentences) word chunks."""
    doc_tok = [c - special for c in count([d.text for d in docs])]
    pending: list[tuple[int, int, int]] = []  # (doc, start, end) of sentences to count
    order: list[tuple[int, int, int] | _Unit] = []
    for di, (d, t) in enumerate(zip(docs, doc_tok, strict=True)):
        if t <= budget:
            order.append(_Unit(di, 0, len(d.text), t))
        else:
            for s, e in _spans(d.text, _SENTENCE_END):
                pending.append((di, s, e))
                order.append((di, s, e))
    sent_tok = count([docs[di].text[s:e] for di, s, e in pending])
    sizes = {key: c - special for key, c in zip(pending, sent_tok, strict=True)}
    units: list[_Unit] = []
    for item in order:
        if isinstance(item, _Unit):
            units.append(item)
            continue
        di, s, e = item
        if sizes[item] <= budget:
            units.append(_Unit(di, s, e, sizes[item]))
            continue
        words = _spans(docs[di].text, re.compile(r"\s+"), s, e)
        w_tok = [c - special for c in count([docs[di].text[a:b] for a, b in words])]
        cur: list[tuple[int, int]] = []
        used = 0
        for (a, b), c in zip(words, w_tok, strict=True):
            if cur and used + c > budget:
                units.append(_Unit(di, cur[0][0], cur[-1][1], used))
                cur, used = [], 0
            cur.append((a, b))
            used += c
        if cur:
            units.append(_Unit(di, cur[0][0], cur[-1][1], used))
    return units


def _assemble(docs: Sequence[Document], group: list[_Unit]) -> tuple[str, list[Word] | None]:
    """Text of a group of units: original text between pieces of one document, "\\n" between
    documents; the gold words re-based on that text."""
    pieces: list[str] = []
    words: list[Word] | None = []
    at = 0
    for k, u in enumerate(group):
        prev = group[k - 1] if k else None
        if prev is not None:
            sep = docs[u.doc].text[prev.end : u.start] if prev.doc == u.doc else "\n"
            pieces.append(sep)
            at += len(sep)
        d = docs[u.doc]
        pieces.append(d.text[u.start : u.end])
        if words is not None and d.words is not None:
            shift = at - u.start
            words.extend(
                (s + shift, e + shift, tag) for s, e, tag in d.words if u.start <= s and e <= u.end
            )
        else:
            words = None
        at += u.end - u.start
    return "".join(pieces), words


def pack(docs: Sequence[Document], count_tokens: TokenCounter, max_tokens: int = 512):
    """Pack documents into model inputs of at most ``max_tokens`` tokens, special tokens included.

    Deterministic greedy packing in corpus order: a document that fits is one piece, a longer one
    is cut at sentence ends (``[.!?]`` then whitespace) and a sentence still too long at word
    boundaries. Pieces are appended to the current input while the token budget allows
    (``max_tokens`` minus the special tokens, counted as ``count_tokens([""])``), so short
    sentences are concatenated and a long article flows over several full inputs. Token counts
    are assumed additive over whitespace-joined pieces (true for WordPiece); a final check
    re-counts every input and splits any that exceeds the limit at its middle word boundary, so
    ``n_tokens <= max_tokens`` holds for every tokenizer.

    Returns a list of :class:`PackedInput`.
    """
    special = count_tokens([""])[0]
    budget = max_tokens - special
    if budget < 1:
        raise SparsescopeError(
            f"max_tokens must exceed the {special} special tokens of the model, got {max_tokens}"
        )
    units = _units(docs, count_tokens, special, budget)
    groups: list[list[_Unit]] = []
    used = budget + 1
    for u in units:
        if used + u.tokens > budget:
            groups.append([])
            used = 0
        groups[-1].append(u)
        used += u.tokens
    texts = [_assemble(docs, g) for g in groups]
    spans = [(g[0].doc, g[-1].doc) for g in groups]
    counts = count_tokens([t for t, _ in texts])
    out: list[PackedInput] = []
    for (text, words), span, n in zip(texts, spans, counts, strict=True):
        out.extend(_enforce(text, words, span, n, count_tokens, max_tokens))
    log.info("packed %d documents into %d inputs of <= %d tokens", len(docs), len(out), max_tokens)
    return out


def _enforce(text, words, span, n, count_tokens, max_tokens) -> list[PackedInput]:
    """Split an input that a non-additive tokenizer made too long, at its middle word boundary."""
    if n <= max_tokens:
        return [PackedInput(text, n, span, words)]
    gaps = [m.start() for m in re.finditer(r"\s+", text)]
    cut = min(gaps, key=lambda g: abs(g - len(text) // 2)) if gaps else len(text) // 2
    left, right = text[:cut], text[cut:]
    lstrip = len(right) - len(right.lstrip())
    right = right.lstrip()
    if not left.strip() or not right:
        raise SparsescopeError(
            f"cannot fit a piece of text into {max_tokens} tokens: {text[:40]!r}"
        )
    wl = wr = None
    if words is not None:
        off = cut + lstrip
        wl = [w for w in words if w[1] <= cut]
        wr = [(s - off, e - off, t) for s, e, t in words if s >= off]
    nl, nr = count_tokens([left, right])
    return _enforce(left, wl, span, nl, count_tokens, max_tokens) + _enforce(
        right, wr, span, nr, count_tokens, max_tokens
    )


T = TypeVar("T")


def split_indices(n: int, valid_fraction: float, seed: int = 0) -> tuple[list[int], list[int]]:
    """Seeded split of ``range(n)`` into sorted (train, valid) index lists.

    ``round(n * valid_fraction)`` indices go to validation, drawn by ``random.Random(seed)``
    (stable across platforms), but at least one when the fraction is positive and ``n >= 2``,
    and never all of them.
    """
    if not 0.0 <= valid_fraction < 1.0:
        raise SparsescopeError(f"valid fraction must be in [0, 1), got {valid_fraction}")
    k = round(n * valid_fraction)
    if valid_fraction > 0 and n >= 2:
        k = max(k, 1)
    k = min(k, max(n - 1, 0))
    valid = sorted(random.Random(seed).sample(range(n), k))
    chosen = set(valid)
    return [i for i in range(n) if i not in chosen], valid


def split_train_valid(
    inputs: Sequence[T], valid_fraction: float, seed: int = 0
) -> tuple[list[T], list[T]]:
    """Split inputs into (train, valid) lists in their original order (:func:`split_indices`)."""
    tr, va = split_indices(len(inputs), valid_fraction, seed)
    return [inputs[i] for i in tr], [inputs[i] for i in va]
