"""What a head does: head roles on one text and per-relation syntax accuracy on a treebank
(definitions §11; Clark, Khandelwal, Levy & Manning 2019, "What Does BERT Look At?", reference
code clarkkev/attention-analysis: ``Syntax_Analysis.ipynb`` for the per-relation evaluation and
the fixed-offset baselines, ``bpe_utils.py`` for the word-level attention maps).

**Roles on one text** (:func:`head_roles`). For every head and every non-special query row i, the
row's top key j* = argmax_j P_ij (ties: the lower key). Each row gets exactly one role, the
first of this order that fits (so the shares of a head add up to at most 1):

1. ``sink``: j* is a special token ([CLS], [SEP], BOS …) or position 0, or at least half of the
   row's mass lies on those positions;
2. ``previous`` (j* = i − 1), ``next`` (j* = i + 1), ``self`` (j* = i);
3. ``delimiter``: j*'s text is punctuation (every character a Unicode punctuation mark);
4. ``syntactic``: j*'s word is i's dependency head or one of its dependents (sub-word tokens
   mapped to the word holding them, :func:`sparse_core.pos.token_words`; the parse is spaCy's
   of the text, ``pos.Words.arcs``). Tested before ``local`` — a project choice: a word two
   tokens away that is its head (``the big dog``) counts as syntax, not as position;
5. ``local``: |i − j*| ≤ 2;
6. ``broad``: the row's support exceeds half of its keys (n, or i + 1 when causal).

Rows that fit none (a far, non-syntactic, concentrated top key) count in no share. The head's
``role`` is the role of the largest share when that share is at least :data:`MIN_SHARE` (0.5);
below it, ``broad`` when broad is the largest share, else ``mixed``, and ``leading`` names the
largest share's role either way. ``syntax`` is the relation the head tracks best on this text
(:func:`syntax_of`), with the best fixed-offset baseline on the same rows, or None.

The top keys come from the sparse store (:class:`~sparse_core.sparse_probs.SparseProbs`) row by
row: a CSR layer by a segmented argmax over its edges (no dense n × n), a dense one by argmax.

**Syntax on a treebank** (:class:`SyntaxTally`, ``sparsescope heads``) follows the reference
code: the attention map of a head is made word-level (the attention to a split word is the sum
over its tokens, the attention from it the mean over its tokens; ``bpe_utils.
get_word_word_attention``, mode "mean"), specials dropped and the diagonal zeroed; a word's
predicted head is its most-attended word (direction ``dep->head``), or the word attending to it
most (``head<-dep``, the transposed map); per relation the accuracy of the best (layer, head,
direction) is set against the best fixed offset (predicted head i + k). Where this differs from
the notebook: offsets k ∈ {−3 … 3} \\ {0} (the notebook takes −3 … 2), no special case for
``poss`` (a Penn Treebank convention; Universal Dependencies attach the possessive marker as
``case``), and ``all`` counts every word but ``root`` and ``punct``, which the table leaves out.
"""

from __future__ import annotations

import logging
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .cancel import checkpoint
from .sparse_probs import SparseProbs

log = logging.getLogger(__name__)

#: Row roles in the order they are tested (a row takes the first that fits).
ROLES = ("sink", "previous", "next", "self", "delimiter", "syntactic", "local", "broad")
#: A head's role: one of :data:`ROLES`, or ``mixed``.
HEAD_ROLES = (*ROLES, "mixed")
#: A head takes its largest share's role when that share is at least this.
MIN_SHARE = 0.5
#: A relation is a head's ``syntax`` only with at least this many rows on the text.
MIN_ROWS = 3
#: Relations left out of the syntax tests (as in the reference table).
SKIP_RELATIONS = ("root", "punct", "")
#: Fixed offsets of the baselines (predicted head = i + k).
OFFSETS = (-3, -2, -1, 1, 2, 3)


def is_punctuation(text: str) -> bool:
    """Whether ``text`` is non-empty and every character is Unicode punctuation (category P)."""
    return bool(text) and all(unicodedata.category(c).startswith("P") for c in text)


# ----------------------------------------------------------------------------- top keys


@dataclass
class TopKeys:
    """Per (layer, head, query row): the top key (−1 for an empty row), the row's support size,
    and its mass on the sink positions."""

    top: np.ndarray  # (L, H, n) int64
    support: np.ndarray  # (L, H, n) int64
    sink_mass: np.ndarray  # (L, H, n) float32


def top_keys(attn: SparseProbs, sink: np.ndarray) -> TopKeys:
    """The top key of every row of every head (ties: the lower key), read from the store as it
    is: a dense layer by argmax, a CSR layer by a segmented argmax over its edges."""
    L, H, n = attn.L, attn.H, attn.n
    sink = np.asarray(sink, dtype=bool)
    top = np.full((L, H, n), -1, dtype=np.int64)
    support = np.zeros((L, H, n), dtype=np.int64)
    mass = np.zeros((L, H, n), dtype=np.float32)
    for li in range(L):
        checkpoint()  # a request whose client has gone stops here (sparse_core.cancel)
        if attn.is_dense:
            p = attn.layer(li).cpu().numpy()  # (H, n, n)
            support[li] = (p > 0).sum(-1)
            top[li] = np.where(support[li] > 0, p.argmax(-1), -1)  # argmax: the first maximum
            mass[li] = p[..., sink].sum(-1)
            continue
        crow = attn.crow[li].cpu().numpy()
        col = attn.col[li].cpu().numpy().astype(np.int64)
        val = attn.val[li].cpu().numpy()
        counts = np.diff(crow)
        rows = np.flatnonzero(counts > 0)
        if not len(rows):
            continue
        starts = crow[:-1][rows]
        best = np.full(H * n, -np.inf, dtype=np.float32)
        best[rows] = np.maximum.reduceat(val, starts)
        at = np.where(val == np.repeat(best, counts), np.arange(len(val)), len(val))
        first = np.minimum.reduceat(at, starts)  # keys ascend within a row: the lowest key
        t = np.full(H * n, -1, dtype=np.int64)
        t[rows] = col[first]
        m = np.zeros(H * n, dtype=np.float32)
        m[rows] = np.add.reduceat(val * sink[col], starts)
        top[li], support[li], mass[li] = (
            t.reshape(H, n),
            counts.reshape(H, n),
            m.reshape(H, n),
        )
    return TopKeys(top, support, mass)


# ----------------------------------------------------------------------------- roles


@dataclass
class TextSyntax:
    """One text's words as the roles see them: every token's word (−1: none) and every word's
    head word (−1: none) and relation."""

    token_word: np.ndarray  # (n,) int64
    head: np.ndarray  # (W,) int64
    rel: list[str]

    @classmethod
    def from_words(cls, offsets, special, words, arcs) -> TextSyntax:
        from .pos import token_words

        if arcs is None or len(arcs) != len(words):
            raise ValueError("the words need one arc each")
        return cls(
            np.asarray(token_words(offsets, special, words), dtype=np.int64),
            np.asarray([h for h, _ in arcs], dtype=np.int64).reshape(-1),
            [r for _, r in arcs],
        )


def row_roles(
    keys: TopKeys,
    special: Sequence[bool],
    punct: Sequence[bool],
    causal: bool = False,
    syntax: TextSyntax | None = None,
) -> np.ndarray:
    """(L, H, n) int8: every row's role as an index into :data:`ROLES`; −1 for special rows,
    empty rows and rows that fit no role (module docstring for the order)."""
    top, n = keys.top, keys.top.shape[-1]
    special = np.asarray(special, dtype=bool)
    sink = special.copy()
    if n:
        sink[0] = True
    i = np.arange(n)
    t = np.maximum(top, 0)  # empty rows are masked at the end
    valid = i + 1 if causal else np.full(n, n)
    tests = [
        sink[t] | (keys.sink_mass >= 0.5),
        top == i - 1,
        top == i + 1,
        top == i,
        np.asarray(punct, dtype=bool)[t],
        _syntactic(t, syntax) if syntax is not None else np.zeros(top.shape, dtype=bool),
        np.abs(top - i) <= 2,
        keys.support > valid / 2,
    ]
    codes = np.select(tests, list(range(len(ROLES))), default=-1).astype(np.int8)
    codes[(top < 0) | special[None, None, :]] = -1
    return codes


def _syntactic(t: np.ndarray, syn: TextSyntax) -> np.ndarray:
    wi = syn.token_word[None, None, :]  # the query's word
    wj = syn.token_word[t]  # the top key's word
    ok = (wi >= 0) & (wj >= 0) & (wi != wj)
    hi = np.where(wi >= 0, syn.head[np.maximum(wi, 0)], -1)
    hj = np.where(wj >= 0, syn.head[np.maximum(wj, 0)], -1)
    return ok & ((hi == wj) | (hj == wi))


def syntax_of(
    top: np.ndarray, special: Sequence[bool], syn: TextSyntax, min_rows: int = MIN_ROWS
) -> dict | None:
    """The relation one head tracks best on this text: for each relation r and direction —
    ``head`` (rows of words attached by r whose top key is in their head word) and
    ``dependent`` (rows of words with an r dependent whose top key is in one) — the share of
    those rows that hit; the best with at least ``min_rows`` rows (ties: more rows, then the
    name), and the best fixed offset on the same rows (``baseline``, ``offset``). None when no
    relation has enough rows, or the best hits none. ``top``: (n,) the head's top keys."""
    return syntax_all(np.asarray(top)[None], special, syn, min_rows)[0]


def syntax_all(
    tops: np.ndarray, special: Sequence[bool], syn: TextSyntax, min_rows: int = MIN_ROWS
) -> list[dict | None]:
    """:func:`syntax_of` of K heads at once, ``tops`` (K, n): the relations' rows and their
    offset baselines depend on the text alone and are found once."""
    K, n = tops.shape
    special = np.asarray(special, dtype=bool)
    rows = np.flatnonzero(~special & (syn.token_word >= 0))
    if not len(rows):
        return [None] * K
    w = syn.token_word[rows]
    t = tops[:, rows]
    wj = np.where(t >= 0, syn.token_word[np.maximum(t, 0)], -1)  # (K, R) the top key's word
    rel = np.asarray(syn.rel, dtype=object)
    word_at = []
    for k in OFFSETS:
        s = rows + k
        word_at.append(np.where((s >= 0) & (s < n), syn.token_word[np.clip(s, 0, n - 1)], -1))
    shifted = np.stack(word_at)  # (len(OFFSETS), R)
    best_acc = np.full(K, -1.0)
    best_count = np.zeros(K, dtype=np.int64)
    best: list[tuple | None] = [None] * K
    for r in sorted(set(syn.rel) - set(SKIP_RELATIONS)):
        is_r = rel == r
        # direction "head": the row's word is attached by r; the hit is its head word
        dep_rows = np.flatnonzero(is_r[w] & (syn.head[w] >= 0))
        # direction "dependent": the row's word has r dependents; the hit is one of them
        has_dep = np.zeros(len(syn.head), dtype=bool)
        has_dep[syn.head[is_r & (syn.head >= 0)]] = True
        gov_rows = np.flatnonzero(has_dep[w])
        for direction, sel in (("head", dep_rows), ("dependent", gov_rows)):
            count = len(sel)
            if count < min_rows:
                continue
            ws = w[sel]

            def hits(cand, ws=ws, direction=direction, is_r=is_r):  # cand (·, count) words
                if direction == "head":
                    return (cand >= 0) & (cand == syn.head[ws])
                safe = np.maximum(cand, 0)
                return (cand >= 0) & (syn.head[safe] == ws) & is_r[safe]

            accs = hits(wj[:, sel]).mean(1)  # (K,)
            base_accs = hits(shifted[:, sel]).mean(1)  # (len(OFFSETS),)
            b = max(range(len(OFFSETS)), key=lambda k: (base_accs[k], -abs(OFFSETS[k])))
            better = (accs > best_acc) | ((accs == best_acc) & (count > best_count))
            for h in np.flatnonzero(better):
                best[h] = (float(accs[h]), count, r, direction, float(base_accs[b]), OFFSETS[b])
            best_acc = np.where(better, accs, best_acc)
            best_count = np.where(better, count, best_count)
    out: list[dict | None] = []
    for got in best:
        if got is None or got[0] == 0:
            out.append(None)
            continue
        acc, count, r, direction, base, k = got
        out.append(
            {
                "relation": r,
                "direction": direction,
                "accuracy": round(acc, 4),
                "rows": count,
                "baseline": round(base, 4),
                "offset": k,
            }  # fmt: skip
        )
    return out


def head_roles(
    attn: SparseProbs,
    special: Sequence[bool],
    token_texts: Sequence[str],
    causal: bool = False,
    syntax: TextSyntax | None = None,
) -> list[list[dict]]:
    """Every head's role on one text, (L × H) lists of ``{"role", "share", "leading", "shares",
    "rows", "syntax"}`` (module docstring). ``token_texts``: each token's text (its span of the
    analysed text), for the delimiter test; ``syntax``: the text's words and parse (None: no
    ``syntactic`` rows and no ``syntax``)."""
    special = np.asarray(special, dtype=bool)
    sink = special.copy()
    if attn.n:
        sink[0] = True
    keys = top_keys(attn, sink)
    punct = [is_punctuation(t.strip()) for t in token_texts]
    codes = row_roles(keys, special, punct, causal, syntax)
    rows = int((~special).sum())
    L, H, n = keys.top.shape
    syn_all = (
        syntax_all(keys.top.reshape(L * H, n), special, syntax)
        if syntax is not None
        else [None] * (L * H)
    )
    out = []
    for li in range(attn.L):
        layer = []
        for h in range(attn.H):
            counts = np.bincount(codes[li, h][codes[li, h] >= 0], minlength=len(ROLES))
            shares = {
                r: round(float(c) / rows, 4) if rows else 0.0
                for r, c in zip(ROLES, counts, strict=True)
            }
            leading = max(ROLES, key=lambda r: (shares[r], -ROLES.index(r)))
            share = shares[leading]
            if share >= MIN_SHARE:
                role = leading
            else:
                role = "broad" if leading == "broad" else "mixed"
            syn = syn_all[li * H + h]
            layer.append(
                {
                    "role": role,
                    "share": share,
                    "leading": leading,
                    "shares": shares,
                    "rows": rows,
                    "syntax": syn,
                }  # fmt: skip
            )
        out.append(layer)
    return out


def run_roles(out, words=None) -> list[list[dict]]:
    """:func:`head_roles` of a :class:`~sparse_core.outputs.RunOutput`; ``words``: its words
    with their parse (``pos.Words``; default ``out.extra["words"]``, else no syntax)."""
    words = out.extra.get("words") if words is None else words
    arcs = getattr(words, "arcs", None)
    syntax = (
        TextSyntax.from_words(out.offsets, out.special, words, arcs)
        if words is not None and arcs is not None
        else None
    )
    texts = [out.text[a:b] for a, b in out.offsets]
    return head_roles(out.attn, out.special, texts, bool(out.causal), syntax)


# ----------------------------------------------------------------------------- treebank


def word_maps(token_word: np.ndarray, n_words: int) -> tuple[np.ndarray, np.ndarray]:
    """(W, n) query averaging and (n, W) key summing matrices of the word-level attention
    (``bpe_utils.get_word_word_attention``, mode "mean"): A P B is the word-by-word map."""
    n = len(token_word)
    key = np.zeros((n, n_words), dtype=np.float64)
    ok = np.flatnonzero(token_word >= 0)
    key[ok, token_word[ok]] = 1.0
    query = key.T.copy()
    sizes = query.sum(1, keepdims=True)
    query = np.divide(query, sizes, out=np.zeros_like(query), where=sizes > 0)
    return query, key


@dataclass
class SyntaxTally:
    """Per relation: words seen, and hits of every (layer, head, direction) and every offset,
    summed over a treebank's sentences (module docstring, "Syntax on a treebank")."""

    layers: int
    heads: int
    words: dict[str, int] = field(default_factory=dict)
    hits: dict[str, np.ndarray] = field(default_factory=dict)  # rel -> (2, L, H)
    offset_hits: dict[str, np.ndarray] = field(default_factory=dict)  # rel -> (len(OFFSETS),)
    skipped_words: int = 0  # words no token maps to

    def add(self, probs: np.ndarray, token_word: np.ndarray, head: np.ndarray, rel: Sequence[str]):
        """One sentence: ``probs`` (L, H, n, n) its attention, ``token_word`` (n,) each token's
        word (−1 for specials), ``head`` (W,) each word's gold head (−1: root), ``rel`` (W,)."""
        W = len(head)
        qm, km = word_maps(token_word, W)
        covered = km.sum(0) > 0  # words some token maps to
        self.skipped_words += int((~covered).sum())
        wmap = qm @ probs.astype(np.float64) @ km  # (L, H, W, W)
        idx = np.arange(W)
        wmap[..., idx, idx] = 0.0  # the reference ignores attention to the word itself
        wmap[..., :, ~covered] = -1.0  # never predict a word without tokens
        wmap[..., ~covered, :] = -1.0
        pred = np.stack([wmap.argmax(-1), wmap.argmax(-2)])  # (2, L, H, W)
        gold = np.asarray(head, dtype=np.int64)
        hit = pred == gold  # root (gold −1) never hits
        base = np.stack([np.clip(idx + k, 0, W - 1) == gold for k in OFFSETS])  # (K, W)
        for w in np.flatnonzero(covered & (gold >= 0) & covered[np.maximum(gold, 0)]):
            for r in (rel[w], "all"):
                if rel[w] in SKIP_RELATIONS:
                    continue
                self.words[r] = self.words.get(r, 0) + 1
                if r not in self.hits:
                    self.hits[r] = np.zeros((2, self.layers, self.heads), dtype=np.int64)
                    self.offset_hits[r] = np.zeros(len(OFFSETS), dtype=np.int64)
                self.hits[r] += hit[..., w]
                self.offset_hits[r] += base[:, w]

    def table(self, min_words: int = 1) -> list[dict]:
        """Per relation with at least ``min_words`` words (``all`` first, then by count): the best
        head's accuracy, layer, head and direction, and the best offset's."""
        rows = []
        for r, count in sorted(self.words.items(), key=lambda kv: (kv[0] != "all", -kv[1], kv[0])):
            if count < min_words and r != "all":
                continue
            acc = self.hits[r] / count  # (2, L, H)
            d, li, h = np.unravel_index(int(acc.argmax()), acc.shape)
            k = int(self.offset_hits[r].argmax())
            rows.append({
                "relation": r,
                "words": count,
                "accuracy": round(float(acc[d, li, h]), 4),
                "layer": int(li),
                "head": int(h),
                "direction": ("dep->head", "head<-dep")[d],
                "baseline": round(float(self.offset_hits[r][k] / count), 4),
                "offset": OFFSETS[k],
            })  # fmt: skip
        return rows
