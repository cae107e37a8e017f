"""POS tags aligned to sub-words and the k-means cluster POS breakdown (definitions §5)."""

from __future__ import annotations

import json

import pytest
import torch

from sparse_core import pos
from sparse_core.corpus import pack, read_corpus, token_counter
from sparse_core.errors import SparsescopeError
from sparse_core.sparsefinder import Artefact

CONLLU = """# sent_id = s1
# text = The dog's owner unbelievably ran.
1\tThe\tthe\tDET\tDT\t_\t3\tdet\t_\t_
2-3\tdog's\t_\t_\t_\t_\t_\t_\t_\t_
2\tdog\tdog\tNOUN\tNN\t_\t4\tnmod:poss\t_\t_
3\t's\t's\tPART\tPOS\t_\t2\tcase\t_\t_
4\towner\towner\tNOUN\tNN\t_\t6\tnsubj\t_\t_
5\tunbelievably\tunbelievably\tADV\tRB\t_\t6\tadvmod\t_\t_
6\tran\trun\tVERB\tVBD\t_\t0\troot\t_\tSpaceAfter=No
7\t.\t.\tPUNCT\t.\t_\t6\tpunct\t_\t_

"""


def fake_artefact(L=2, H=4, d=8, seed=0, counts=(2, 4)) -> Artefact:
    g = torch.Generator().manual_seed(seed)
    W = torch.randn(L, H, d, 4, generator=g)
    cents = {b: torch.randn(L, H, b, 4, generator=g) for b in counts}
    return Artefact("tiny", 1.5, 4, W, torch.zeros(L, H, 4), cents, {})


def test_align_rules():
    words = [(0, 3, "DET"), (4, 16, "ADV"), (17, 19, "AUX"), (19, 22, "PART")]
    offsets = [(0, 0), (0, 3), (4, 6), (6, 9), (9, 16), (17, 20), (20, 22), (30, 31), (5, 5),
               (0, 0)]  # fmt: skip
    special = [True] + [False] * 8 + [True]
    tags = pos.align(offsets, special, words)
    assert tags == ["[CLS]", "DET", "ADV", "ADV", "ADV", "AUX", "PART", "X", "X", "[SEP]"]
    # (17, 20) overlaps AUX by 2 and PART by 1: the largest overlap; (30, 31) and the empty
    # span (5, 5) overlap nothing: X
    assert pos.align([(0, 0)], [True], [], tokens=["<s>"]) == ["<s>"]


def test_subwords_take_the_tag_of_their_word(tiny_model):
    text = "They were unbelievably happy."
    enc = tiny_model.encode(text)
    assert [t for t in enc.tokens if t.startswith("##")]  # "unbelievably" is split
    words = [(0, 4, "PRON"), (5, 9, "AUX"), (10, 22, "ADV"), (23, 28, "ADJ"), (28, 29, "PUNCT")]
    tags = pos.align(enc.offsets, enc.special, words)
    for tok, (s, e), tag in zip(enc.tokens, enc.offsets, tags, strict=True):
        if 10 <= s and e <= 22:
            assert tag == "ADV", tok
    assert tags[0] == "[CLS]" and tags[-1] == "[SEP]"


def test_spacy_tags(tiny_model):
    out = tiny_model.run("The chef was unbelievably happy.")
    tags = pos.tag_tokens(out.text, out.offsets, out.special)
    assert len(tags) == out.n and tags[0] == "[CLS]" and tags[-1] == "[SEP]"
    by_token = dict(zip(out.tokens, tags, strict=True))
    assert by_token["chef"] == "NOUN" and by_token["."] == "PUNCT"
    pieces = [t for t, (s, e) in zip(out.tokens, out.offsets, strict=True) if 14 <= s and e <= 26]
    assert len(pieces) > 1 and {by_token[p] for p in pieces} == {"ADV"}
    many = pos.word_tags_many(["The dogs bark.", "Hi"])
    assert many[0][1] == (4, 8, "NOUN") and len(many) == 2


def test_conllu_gold_tags(tiny_model, tmp_path):
    f = tmp_path / "tiny.conllu"
    f.write_text(CONLLU)
    inp = pack(read_corpus(f), token_counter(tiny_model.tokenizer), 64)[0]
    enc = tiny_model.encode(inp.text)
    tags = pos.align(enc.offsets, enc.special, inp.words)
    got = dict(zip(enc.tokens, tags, strict=True))
    assert got["dog"] == "NOUN" and got["owner"] == "NOUN" and got["ran"] == "VERB"
    assert got["s"] == "PART"  # 's of the multi-word token "dog's"
    unb = [t for t, (s, e) in zip(enc.tokens, enc.offsets, strict=True) if 16 <= s and e <= 28]
    assert len(unb) > 1 and {got[t] for t in unb} == {"ADV"}


def test_cluster_breakdown_schema(tiny_model):
    out = tiny_model.run("The chef who ran to the store was out of food, so he went back.")
    art = fake_artefact()
    tags = ["[CLS]"] + ["NOUN", "VERB"] * ((out.n - 2) // 2) + ["DET"] * ((out.n - 2) % 2)
    tags += ["[SEP]"]
    res = pos.cluster_breakdown(out, art, 1, 2, 4, tags)
    assert list(res) == ["layer", "head", "clusters"] and (res["layer"], res["head"]) == (1, 2)
    assert [c["id"] for c in res["clusters"]] == [0, 1, 2, 3]
    assert sum(c["n_queries"] for c in res["clusters"]) == out.n  # top-1: once per side
    assert sum(c["n_keys"] for c in res["clusters"]) == out.n
    for c in res["clusters"]:
        assert set(c) == {"id", "queries", "keys", "n_queries", "n_keys", "examples"}
        for side, total in (("queries", c["n_queries"]), ("keys", c["n_keys"])):
            shares = c[side]
            assert (not shares) == (total == 0)
            if shares:
                assert abs(sum(shares.values()) - 1) < 1e-3
                assert set(shares) <= {"[CLS]", "[SEP]", "NOUN", "VERB", "DET"}
        assert all(isinstance(w, str) and not w.startswith("##") for w in c["examples"])
    json.dumps(res)
    # top-2: every token counts in two clusters per side
    res2 = pos.cluster_breakdown(out, art, 1, 2, 4, tags, top_k=2)
    assert sum(c["n_queries"] for c in res2["clusters"]) == 2 * out.n
    with pytest.raises(SparsescopeError, match="clusters must be one of 2, 4"):
        pos.cluster_breakdown(out, art, 1, 2, 3, tags)
    with pytest.raises(SparsescopeError, match="layer must be in"):
        pos.cluster_breakdown(out, art, 5, 2, 4, tags)
    with pytest.raises(SparsescopeError, match="one tag per token"):
        pos.cluster_breakdown(out, art, 1, 2, 4, tags[:-1])


def test_clusters_command_breakdown_and_table(tiny_model, tmp_path):
    from sparsescope.commands.clusters import _table, breakdown

    f = tmp_path / "tiny.conllu"
    f.write_text(CONLLU * 2)
    inputs = pack(read_corpus(f), token_counter(tiny_model.tokenizer), 64)
    res = breakdown(tiny_model, fake_artefact(), inputs, 0, 1, 2, 1, 1.5)
    assert list(res) == ["layer", "head", "clusters"] and len(res["clusters"]) == 2
    tags = {t for c in res["clusters"] for t in c["queries"]}
    assert tags <= {"[CLS]", "[SEP]", "DET", "NOUN", "PART", "ADV", "VERB", "PUNCT"}
    assert "cluster  0" in _table(res, len(inputs), 2, 1)


@pytest.mark.real_model
@pytest.mark.slow
def test_clusters_cli_json(real_model, tmp_path, capsys):
    from sparse_core.sparsefinder import save_artefact
    from sparsescope.cli import main

    art = fake_artefact(6, 12, 32, counts=(2, 4))
    art.model_id = real_model.model_id
    base = tmp_path / "art"
    save_artefact(art, base)
    f = tmp_path / "tiny.conllu"
    f.write_text(CONLLU)
    argv = ["clusters", "--corpus", str(f), "--layer", "2", "--head", "3", "--clusters", "4",
            "--json", "--artefact", str(base), "--device", "cpu"]  # fmt: skip
    assert main(argv) == 0
    res = json.loads(capsys.readouterr().out)
    assert (res["layer"], res["head"]) == (2, 3) and len(res["clusters"]) == 4
    assert main([*argv[:-4], "--clusters", "3", "--artefact", str(base)]) == 2
    assert "--clusters must be one of 2, 4" in capsys.readouterr().err
