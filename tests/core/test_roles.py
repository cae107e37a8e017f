"""Head roles (definitions §11, sparse_core/roles.py) on hand-built P where the answer is known,
read from the dense and from the CSR store alike; the syntactic test on a real spaCy parse; the
treebank tally against hand-counted hits."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sparse_core import pos, roles
from sparse_core.sparse_probs import SparseProbs

#: [CLS] ten plain tokens [SEP]: no punctuation unless a test says so
N = 12
SPECIAL = [True] + [False] * (N - 2) + [True]
TEXTS = ["[CLS]"] + [f"w{k}" for k in range(1, N - 1)] + ["[SEP]"]


def probs_of(targets: dict[int, int], n: int = N, other: int | None = None) -> np.ndarray:
    """(n, n) rows: 0.6 on the row's target, 0.4 on ``other`` (default: the row's mirror key,
    a far plain token), every row defined; rows not in ``targets`` put 0.6 on themselves."""
    p = np.zeros((n, n), dtype=np.float32)
    for i in range(n):
        t = targets.get(i, i)
        o = other if other is not None else (n - 1 - i if n - 1 - i != t else (t + n // 2) % n)
        p[i, t] += 0.6
        p[i, o] += 0.4
    return p


def stores(*heads: np.ndarray) -> list[SparseProbs]:
    """One layer of these heads as a dense and as a CSR store."""
    dense = torch.from_numpy(np.stack(heads))[None]  # (1, H, n, n)
    return [SparseProbs.from_dense(dense), SparseProbs.csr_from_dense(dense)]


def roles_of(*heads, texts=TEXTS, special=SPECIAL, causal=False, syntax=None):
    got = [roles.head_roles(s, special, texts, causal, syntax)[0] for s in stores(*heads)]
    assert got[0] == got[1]  # the CSR store answers as the dense one
    return got[0]


PLAIN = range(1, N - 1)


@pytest.mark.parametrize(
    ("targets", "role", "share"),
    [
        ({i: i - 1 for i in PLAIN}, "previous", 9 / 10),  # row 1's previous is [CLS]: sink
        ({i: i + 1 for i in PLAIN}, "next", 9 / 10),  # row 10's next is [SEP]: sink
        ({i: i for i in PLAIN}, "self", 1.0),
        ({i: 0 for i in PLAIN}, "sink", 1.0),
        ({i: N - 1 for i in PLAIN}, "sink", 1.0),  # [SEP] is a sink too
        ({i: (i + 2 if i + 2 < N - 1 else i - 2) for i in PLAIN}, "local", 1.0),
    ],
)
def test_each_positional_role_is_detected(targets, role, share):
    (head,) = roles_of(probs_of(targets))
    assert head["role"] == role and head["leading"] == role
    assert head["share"] == pytest.approx(share, abs=1e-4)
    assert head["rows"] == N - 2
    assert sum(head["shares"].values()) <= 1 + 1e-6


def test_sink_by_mass_even_when_the_top_key_is_elsewhere():
    p = np.zeros((N, N), dtype=np.float32)
    for i in range(N):
        far = 6 if abs(i - 6) > 2 else 1
        p[i, far], p[i, 0], p[i, N - 1] = 0.45, 0.3, 0.25  # the top is far; 55 % on sinks
    (head,) = roles_of(p)
    assert head["role"] == "sink" and head["shares"]["sink"] == 1.0
    p[:, N - 1], p[:, far] = 0.15, 0.55  # 45 % on the sinks: no longer a sink row
    (head,) = roles_of(p)
    assert head["shares"]["sink"] == 0.0


def test_delimiter_and_the_threshold_of_one_half():
    texts = list(TEXTS)
    texts[6] = ","
    # every plain row's top key is the comma at 6: rows 5, 7 are next / previous, row 6 self,
    # the other seven delimiter (tested before local: rows 4 and 8 too)
    (head,) = roles_of(probs_of({i: 6 for i in PLAIN}), texts=texts)
    assert head["shares"]["delimiter"] == pytest.approx(7 / 10)
    assert head["shares"]["next"] == head["shares"]["previous"] == pytest.approx(1 / 10)
    assert head["role"] == "delimiter"
    # five of ten rows exactly: the role (share >= 0.5)
    targets = {1: 6, 2: 6, 3: 6, 9: 6, 10: 6, 4: 4, 5: 5, 6: 6, 7: 8, 8: 9}  # + 3 self, 2 next
    (head,) = roles_of(probs_of(targets), texts=texts)
    assert head["shares"]["delimiter"] == 0.5 and head["role"] == "delimiter"


def test_mixed_and_broad_below_one_half():
    # 4 previous, 3 next, 3 self: no role reaches one half
    targets = {i: (i - 1 if i <= 4 else i + 1 if i <= 7 else i) for i in PLAIN}
    targets[1] = 1  # row 1's previous would be [CLS]; make it self (previous: rows 2-4 = 3)
    (head,) = roles_of(probs_of(targets))
    assert head["role"] == "mixed" and head["leading"] == "self"  # self 4, previous 3, next 3
    assert head["share"] == pytest.approx(0.4)
    # broad rows: support over more than half the keys, top key far from the row
    p = np.zeros((N, N), dtype=np.float32)
    for i in range(N):
        far = 9 if i < 6 else 2
        keys = [k for k in range(1, N - 1) if k != far][:6]
        p[i, keys] = 0.4 / 6
        p[i, far] = 0.6  # 7 keys of 12 in the support
    (head,) = roles_of(p)
    assert head["role"] == "broad" and head["shares"]["broad"] > 0.5
    p2 = p.copy()
    p2[1:5] = probs_of({i: i - 1 for i in range(2, 6)})[1:5]  # rows 1-4: previous / sink
    (head,) = roles_of(p2)
    assert head["shares"]["broad"] == pytest.approx(0.6)
    # row 1 self, rows 2-5 previous, row 6 next, rows 7-10 broad: previous and broad tie at 0.4,
    # and the tie goes to the earlier role: mixed, not broad
    p2[1:7] = probs_of({1: 1, 2: 1, 3: 2, 4: 3, 5: 4, 6: 7})[1:7]
    (head,) = roles_of(p2)
    assert head["shares"]["previous"] == head["shares"]["broad"] == pytest.approx(0.4)
    assert head["leading"] == "previous" and head["role"] == "mixed"


def test_broad_counts_the_valid_keys_when_causal():
    p = np.tril(np.ones((N, N), dtype=np.float32))
    for i in range(N):
        p[i, : i + 1] = 1.0 / (i + 1)
        if i >= 4:
            p[i, 1] += 0.01  # a top key far back (ties would fall on [CLS], a sink)
    (bidir,) = roles_of(p)
    (causal,) = roles_of(p, causal=True)
    # rows 4-10 use all their i + 1 keys: broad when causal; as an encoder fewer than n / 2
    assert causal["shares"]["broad"] == pytest.approx(0.7)
    assert bidir["shares"]["broad"] == pytest.approx(5 / 10)  # rows 6-10 have > 6 keys


def test_ties_take_the_lower_key_in_both_stores():
    p = probs_of({i: i for i in range(N)})
    p[5] = 0
    p[5, 2] = p[5, 8] = 0.5
    p[6] = 0
    p[6, [9, 4, 5]] = [0.3, 0.35, 0.35]
    sink = np.array(SPECIAL)
    for s in stores(p):
        top = roles.top_keys(s, sink).top[0, 0]
        assert top[5] == 2 and top[6] == 4
    (head,) = roles_of(p)  # row 5: 2 is three back (no role); row 6: 4 is local
    assert head["shares"]["self"] == pytest.approx(8 / 10)
    assert head["shares"]["local"] == pytest.approx(1 / 10)


def test_special_rows_are_left_out():
    a = probs_of({i: i - 1 for i in PLAIN})
    b = a.copy()
    b[0] = 0
    b[0, 1] = 1.0  # [CLS] now looks "next", [SEP] "self"
    b[N - 1] = 0
    b[N - 1, N - 1] = 1.0
    assert roles_of(a) == roles_of(b)
    (head,) = roles_of(a)
    assert head["rows"] == N - 2


def test_syntactic_rows_by_word_and_before_local():
    # tokens 1-10 are words 0-9, except that tokens 3 and 4 are both word 2 (a split word)
    token_word = np.array([-1, 0, 1, 2, 2, 3, 4, 5, 6, 7, 8, -1])
    head = np.array([2, 2, -1, 2, 3, 3, 8, 8, 3])  # word 2 is the root
    rel = ["det", "amod", "root", "obj", "case", "nmod", "det", "amod", "obl"]
    syn = roles.TextSyntax(token_word, head, rel)
    targets = {
        1: 4,  # word 0 -> a piece of its head, word 2, three tokens on: syntactic
        2: 4,  # word 1 -> word 2, two on: syntactic, not local
        3: 7,  # word 2 -> word 5, its dependent? no: word 5's head is 3 -> not syntactic, far
        4: 5,  # a piece of word 2 -> next token: next
        5: 3,  # word 3 -> its head word 2 (token 3), two back: syntactic
        6: 9,  # word 4 -> word 7: unrelated, 3 on: none
        7: 10,  # word 5 -> word 8, its head's dependent? no; 3 on: none
        8: 10,  # word 6 -> word 8, its head, two on: syntactic
        9: 4,  # word 7 -> word 2: unrelated: none
        10: 5,  # word 8 -> word 3, its head, far: syntactic
    }
    (with_parse,) = roles_of(probs_of(targets), syntax=syn)
    (without,) = roles_of(probs_of(targets))
    assert with_parse["shares"]["syntactic"] == pytest.approx(5 / 10)
    assert with_parse["role"] == "syntactic"
    assert without["shares"]["syntactic"] == 0.0
    assert without["shares"]["local"] == pytest.approx(3 / 10)  # tokens 2, 5, 8 are 2 away


def test_syntax_of_names_the_relation_and_its_baseline():
    # six words, one token each; three "det" words each one before its head
    token_word = np.array([-1, 0, 1, 2, 3, 4, 5, -1])
    head = np.array([1, 4, 3, 4, -1, 4])
    rel = ["det", "nsubj", "det", "obj", "root", "punct"]
    syn = roles.TextSyntax(token_word, head, rel)
    special = [True] + [False] * 6 + [True]
    # the head hits det's head for words 0 and 2 and misses word 3's (no det there: fine)
    top = np.array([0, 2, 5, 4, 5, 5, 5, 7])
    got = roles.syntax_of(top, special, syn, min_rows=2)
    assert got == {"relation": "det", "direction": "head", "accuracy": 1.0, "rows": 2,
                   "baseline": 1.0, "offset": 1}  # fmt: skip
    # "dependent": the rows of word 4 (the root) hit when the top key is one of its dependents
    top2 = np.array([0, 0, 0, 0, 0, 2, 0, 7])  # word 4 -> word 1 (its nsubj dependent)
    got2 = roles.syntax_of(top2, special, syn, min_rows=1)
    assert got2["relation"] == "nsubj" and got2["direction"] == "dependent"
    assert got2["accuracy"] == 1.0 and got2["baseline"] == 1.0 and got2["offset"] == -3
    assert roles.syntax_of(top2, special, syn, min_rows=3) is None


def test_syntactic_on_a_real_spacy_parse():
    text = "The dog and the cat and the bird sleep in the big old house ."
    words = pos.word_tags(text)
    assert words.arcs is not None and len(words.arcs) == len(words)
    by_text = {text[a:b]: k for k, (a, b, _) in enumerate(words)}
    assert words.arcs[by_text["big"]] == (by_text["house"], "amod")
    # one token per word, [CLS] and [SEP] around
    offsets = [(0, 0), *((a, b) for a, b, _ in words), (0, 0)]
    special = [True] + [False] * len(words) + [True]
    n = len(offsets)
    syn = roles.TextSyntax.from_words(offsets, special, words, words.arcs)
    # a head whose every word row attends to its dependency head (the root to itself)
    targets = {k + 1: (h + 1 if h >= 0 else k + 1) for k, (h, _) in enumerate(words.arcs)}
    p = probs_of(targets, n=n, other=0)
    p[:, 0] = 0.0  # no sink mass: the rows' other 0.4 go to the far [SEP]
    p[:, n - 1] += 0.4
    p[0, 0], p[n - 1, n - 1] = 0.6, 0.6
    texts = ["[CLS]", *(text[a:b] for a, b, _ in words), "[SEP]"]
    (head,) = roles_of(p, texts=texts, special=special, syntax=syn)
    expected = sum(
        1
        for k, (h, _) in enumerate(words.arcs)
        if h >= 0 and abs(h - k) >= 2 and not roles.is_punctuation(texts[h + 1])
    )
    assert expected >= 3
    assert head["shares"]["syntactic"] == pytest.approx(expected / len(words), abs=1e-4)
    assert head["syntax"]["direction"] == "head" and head["syntax"]["accuracy"] == 1.0


def test_word_tags_keep_the_parse_through_shift_and_map_tokens_to_words():
    words = pos.word_tags("Cats sleep.")
    moved = pos.shift(words, 10)
    assert moved.arcs == words.arcs and moved[0][0] == words[0][0] + 10
    assert moved == [(a + 10, b + 10, t) for a, b, t in words]  # still compares as a list
    ws = [(0, 4, "NOUN"), (5, 10, "VERB"), (10, 11, "PUNCT")]
    offsets = [(0, 0), (0, 2), (2, 4), (5, 10), (10, 11), (3, 7), (0, 0)]
    special = [True, False, False, False, False, False, True]
    assert pos.token_words(offsets, special, ws) == [-1, 0, 0, 1, 2, 1, -1]


def test_the_treebank_tally_against_hand_counts():
    # one sentence of 4 words, one token each; gold: 0 -det-> 1 -nsubj-> 2 (root) <-obj- 3
    head = np.array([1, 2, -1, 2])
    rel = ["det", "nsubj", "root", "obj"]
    token_word = np.array([-1, 0, 1, 2, 3, -1])
    p = np.zeros((1, 2, 6, 6), dtype=np.float32)
    # head 0: every word attends to its gold head; head 1: to the word before
    for w, h in enumerate(head):
        p[0, 0, w + 1, (h if h >= 0 else w) + 1] = 1.0
        p[0, 1, w + 1, max(w - 1, 0) + 1] = 1.0
    p[0, :, 0, 0] = p[0, :, 5, 5] = 1.0
    tally = roles.SyntaxTally(1, 2)
    tally.add(p, token_word, head, rel)
    table = {r["relation"]: r for r in tally.table()}
    assert set(table) == {"all", "det", "nsubj", "obj"}
    assert table["all"]["words"] == 3
    assert table["det"]["accuracy"] == 1.0 and table["det"]["head"] == 0
    assert table["det"]["baseline"] == 1.0 and table["det"]["offset"] == 1
    assert table["obj"]["accuracy"] == 1.0 and table["obj"]["baseline"] == 1.0
    assert table["obj"]["offset"] == -1
    assert table["all"]["accuracy"] == 1.0 and table["all"]["baseline"] == pytest.approx(
        2 / 3, abs=1e-4
    )
