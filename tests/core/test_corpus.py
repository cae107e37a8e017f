"""Corpus readers (format detection, CoNLL-U UPOS, WikiText articles) and packing limits."""

from __future__ import annotations

import textwrap

import pytest

from sparse_core.corpus import (
    Document,
    detect_format,
    pack,
    read_corpus,
    split_indices,
    split_train_valid,
    token_counter,
)
from sparse_core.errors import SparsescopeError

CONLLU = textwrap.dedent(
    """\
    # sent_id = s1
    # text = I don't know.
    1\tI\tI\tPRON\tPRP\t_\t3\tnsubj\t_\t_
    2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_
    2\tdo\tdo\tAUX\tVBP\t_\t4\taux\t_\t_
    3\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t_\t_
    4\tknow\tknow\tVERB\tVB\t_\t0\troot\t_\tSpaceAfter=No
    4.1\tgone\tgo\tVERB\tVBN\t_\t_\t_\t_\t_
    5\t.\t.\tPUNCT\t.\t_\t4\tpunct\t_\t_

    # sent_id = s2
    1\tHello\thello\tINTJ\tUH\t_\t0\troot\t_\tSpaceAfter=No
    2\t!\t!\tPUNCT\t.\t_\t1\tpunct\t_\t_
    """
)

WIKI = textwrap.dedent(
    """\

     = First Article =

     It has 1 @,@ 000 words and a 0 @.@ 5 ratio .

     = = History = =

     Later it grew . A well @-@ known fact .

     = Second Article =

     Short one .
    """
)


@pytest.fixture(scope="module")
def count(tiny_model):
    return token_counter(tiny_model.tokenizer)


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_detect_format():
    assert detect_format(CONLLU.splitlines()) == "conllu"
    assert detect_format(WIKI.splitlines()) == "wikitext"
    assert detect_format(["Just some text.", "", "More text = here."]) == "plain"


def test_conllu_keeps_words_and_upos(tmp_path):
    docs = read_corpus(write(tmp_path, "a.conllu", CONLLU))
    assert [d.title for d in docs] == ["s1", "s2"]
    d = docs[0]
    assert d.text == "I don't know."
    got = [(d.text[s:e], tag) for s, e, tag in d.words]
    # the multi-word token is split into its words, the empty node 4.1 is skipped
    assert got == [("I", "PRON"), ("do", "AUX"), ("n't", "PART"), ("know", "VERB"), (".", "PUNCT")]
    # no "# text" line: the text is rebuilt from the forms and SpaceAfter=No
    assert docs[1].text == "Hello!"
    assert [(docs[1].text[s:e], t) for s, e, t in docs[1].words] == [
        ("Hello", "INTJ"),
        ("!", "PUNCT"),
    ]


def test_wikitext_articles_sections_and_markers(tmp_path):
    docs = read_corpus(write(tmp_path, "w.txt", WIKI))
    assert [d.title for d in docs] == ["First Article", "Second Article"]
    assert "History" not in docs[0].text  # section headings are dropped
    assert "1,000 words" in docs[0].text and "0.5 ratio" in docs[0].text
    assert "well-known" in docs[0].text
    assert docs[0].text.count("\n") == 1  # two paragraphs joined by a newline
    assert docs[1].text == "Short one ."
    assert all(d.words is None for d in docs)


def test_plain_paragraphs(tmp_path):
    docs = read_corpus(write(tmp_path, "p.txt", "One line\ncontinues.\n\n  \nSecond para.\n"))
    assert [d.text for d in docs] == ["One line\ncontinues.", "Second para."]


def test_read_errors(tmp_path):
    with pytest.raises(SparsescopeError, match="does not exist"):
        read_corpus(tmp_path / "missing.txt")
    with pytest.raises(SparsescopeError, match="holds no text"):
        read_corpus(write(tmp_path, "empty.txt", "\n \n"))
    bad = tmp_path / "bin.txt"
    bad.write_bytes(b"\xff\xfe\x00abc")
    with pytest.raises(SparsescopeError, match="not UTF-8"):
        read_corpus(bad)


def test_pack_concatenates_short_sentences(count):
    docs = [Document(f"Sentence number {i} is short.") for i in range(10)]
    out = pack(docs, count, max_tokens=64)
    assert len(out) < len(docs)  # several sentences per input
    assert all(p.n_tokens <= 64 for p in out)
    assert out[0].text.startswith("Sentence number 0 is short.\nSentence number 1")
    assert [p.docs for p in out][0][0] == 0 and out[-1].docs[1] == 9
    # every document appears exactly once, in order
    joined = "\n".join(p.text for p in out)
    assert joined == "\n".join(d.text for d in docs)


def test_pack_splits_long_documents_under_the_limit(count):
    long = " ".join(f"This is sentence {i} of a rather long article ." for i in range(200))
    words = " ".join(["supercalifragilistic"] * 300)  # one sentence longer than any input
    docs = [Document(long, title="A"), Document(words, title="B"), Document("Tail .")]
    for limit in (16, 64, 512):
        out = pack(docs, count, max_tokens=limit)
        assert all(p.n_tokens <= limit for p in out)
        assert all(n == p.n_tokens for n, p in zip(count([p.text for p in out]), out, strict=True))
        # nothing lost: the words of the corpus come back in order
        assert " ".join(p.text for p in out).split() == " ".join(d.text for d in docs).split()
    out = pack(docs, count, max_tokens=64)
    assert max(p.n_tokens for p in out) > 48  # inputs are filled, not one sentence each


def test_pack_keeps_words_rebased(tmp_path, count):
    docs = read_corpus(write(tmp_path, "a.conllu", CONLLU))
    (p,) = pack(docs, count, max_tokens=64)
    assert p.text == "I don't know.\nHello!"
    assert [(p.text[s:e], t) for s, e, t in p.words][-2:] == [("Hello", "INTJ"), ("!", "PUNCT")]


def test_pack_is_deterministic_and_checks_budget(count):
    docs = [Document(f"Doc {i} " + "word " * (i * 7)) for i in range(30)]
    assert pack(docs, count, 40) == pack(docs, count, 40)
    with pytest.raises(SparsescopeError, match="special tokens"):
        pack(docs, count, max_tokens=2)


def test_split_train_valid():
    items = list(range(10))
    tr, va = split_train_valid(items, 0.2, seed=1)
    assert len(va) == 2 and sorted(tr + va) == items and tr == sorted(tr)
    assert split_train_valid(items, 0.2, seed=1) == (tr, va)
    assert split_indices(2, 0.01, 0)[1] != []  # at least one validation input
    assert split_indices(1, 0.5, 0) == ([0], [])  # never everything
    assert split_indices(5, 0.0, 0) == ([0, 1, 2, 3, 4], [])
    with pytest.raises(SparsescopeError):
        split_indices(5, 1.0, 0)


def test_real_corpora_pack_within_the_limit(count):
    """The shared WikiText-2 validation split (if present: /work/shared/data, found from a
    checkout or a worktree below it) packs into > 400 inputs of at most 512 tokens."""
    from pathlib import Path

    found = [
        p / "shared/data/wikitext-2/valid.txt"
        for p in Path(__file__).resolve().parents
        if (p / "shared/data/wikitext-2/valid.txt").is_file()
    ]
    if not found:
        pytest.skip("shared WikiText-2 not available")
    out = pack(read_corpus(found[0]), count, 512)
    assert len(out) > 400 and max(p.n_tokens for p in out) <= 512
