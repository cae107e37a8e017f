"""``sparsescope heads --corpus FILE.conllu`` (definitions §11) on a tiny treebank written here and
tiny random checkpoints: gold relations counted, the offset baselines as counted by hand, both
models side by side, and one-line errors."""

from __future__ import annotations

import json

import pytest

from sparse_core.corpus import read_corpus
from sparse_core.testing import write_tiny_checkpoint
from sparsescope.cli import main

CONLLU = """\
# text = The cat sat on the mat.
1\tThe\tthe\tDET\t_\t_\t2\tdet\t_\t_
2\tcat\tcat\tNOUN\t_\t_\t3\tnsubj\t_\t_
3\tsat\tsit\tVERB\t_\t_\t0\troot\t_\t_
4\ton\ton\tADP\t_\t_\t6\tcase\t_\t_
5\tthe\tthe\tDET\t_\t_\t6\tdet\t_\t_
6\tmat\tmat\tNOUN\t_\t_\t3\tobl\t_\tSpaceAfter=No
7\t.\t.\tPUNCT\t_\t_\t3\tpunct\t_\t_

# text = A dog doesn't bark.
1\tA\ta\tDET\t_\t_\t2\tdet\t_\t_
2\tdog\tdog\tNOUN\t_\t_\t5\tnsubj\t_\t_
3-4\tdoesn't\t_\t_\t_\t_\t_\t_\t_\t_
3\tdoes\tdo\tAUX\t_\t_\t5\taux\t_\t_
4\tn't\tnot\tPART\t_\t_\t5\tadvmod\t_\t_
5\tbark\tbark\tVERB\t_\t_\t0\troot\t_\tSpaceAfter=No
6\t.\t.\tPUNCT\t_\t_\t5\tpunct\t_\t_

# text = Unbelievably large trees grow.
1\tUnbelievably\tunbelievably\tADV\t_\t_\t2\tadvmod\t_\t_
2\tlarge\tlarge\tADJ\t_\t_\t3\tamod\t_\t_
3\ttrees\ttree\tNOUN\t_\t_\t4\tnsubj\t_\t_
4\tgrow\tgrow\tVERB\t_\t_\t0\troot\t_\tSpaceAfter=No
5\t.\t.\tPUNCT\t_\t_\t4\tpunct\t_\t_
"""
OFFSETS = (-3, -2, -1, 1, 2, 3)


@pytest.fixture(scope="module")
def treebank(tmp_path_factory):
    path = tmp_path_factory.mktemp("ud") / "tiny.conllu"
    path.write_text(CONLLU)
    return path


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("m")
    return [
        write_tiny_checkpoint(root / f"tiny-{s}", "bert", seed=s, layers=2, heads=4) for s in (1, 2)
    ]


def gold_counts():
    """Per relation (root and punct left out): words, and hits of each offset, by hand."""
    words, hits = {}, {}
    for doc in read_corpus_text():
        heads = [h for h, _ in doc.arcs]
        for w, (h, r) in enumerate(doc.arcs):
            if r in ("root", "punct"):
                continue
            for key in (r, "all"):
                words[key] = words.get(key, 0) + 1
                hit = hits.setdefault(key, [0] * len(OFFSETS))
                for k, off in enumerate(OFFSETS):
                    hit[k] += min(max(w + off, 0), len(heads) - 1) == h
    return words, hits


def read_corpus_text():
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "t.conllu"
        p.write_text(CONLLU)
        return read_corpus(p, "conllu")


def test_the_treebank_keeps_gold_arcs_through_multiword_tokens():
    docs = read_corpus_text()
    assert [len(d.arcs) for d in docs] == [len(d.words) for d in docs] == [7, 6, 5]
    second = docs[1]
    assert [second.text[a:b] for a, b, _ in second.words] == [
        "A",
        "dog",
        "does",
        "n't",
        "bark",
        ".",
    ]
    assert second.arcs[2] == (4, "aux") and second.arcs[4] == (-1, "root")


def test_heads_json_counts_and_baselines(treebank, checkpoints, capsys):
    argv = ["heads", "--corpus", str(treebank), "--json", "--min-words", "1"]
    for c in checkpoints:
        argv += ["--model", str(c)]
    assert main([*argv, "--alpha", "1.5", "--alpha", "1.0"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["sentences"] == 3 and len(body["models"]) == 2
    assert [m["alpha"] for m in body["models"]] == [1.5, 1.0]
    words, hits = gold_counts()
    for m in body["models"]:
        assert m["skipped_words"] == 0  # every gold word has a token
        table = {r["relation"]: r for r in m["table"]}
        assert set(table) == set(words)
        assert m["table"][0]["relation"] == "all"
        for rel, row in table.items():
            assert row["words"] == words[rel]
            best = max(hits[rel])
            assert row["baseline"] == pytest.approx(best / words[rel], abs=1e-4)
            assert hits[rel][OFFSETS.index(row["offset"])] == best
            assert 0 <= row["accuracy"] <= 1 and 0 <= row["layer"] < 2 and 0 <= row["head"] < 4
            assert row["direction"] in ("dep->head", "head<-dep")


def test_heads_markdown_side_by_side(treebank, checkpoints, capsys):
    argv = ["heads", "--corpus", str(treebank), "--min-words", "2", "--limit", "2"]
    for c in checkpoints:
        argv += ["--model", str(c)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    header = out.splitlines()[0]
    assert header.count("(α = 1.5)") == 2 and "best offset" in header
    rows = [line for line in out.splitlines() if line.startswith("| ")][1:]
    # the first two sentences: det 3 words, nsubj 2; the rest below 2 words
    assert [r.split(" | ")[0].strip("| ") for r in rows] == ["all", "det", "nsubj"]


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["--alpha", "1.5", "--alpha", "1.2"], "--alpha must be given once or once per --model"),
        (["--alpha", "3"], "alpha"),
        (["--limit", "0"], "--limit must be >= 1"),
    ],
)
def test_heads_user_errors_are_one_line(treebank, checkpoints, capsys, extra, fragment):
    assert main(["heads", "--corpus", str(treebank), "--model", str(checkpoints[0]), *extra]) == 2
    err = capsys.readouterr().err
    assert fragment in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_heads_refuses_a_file_without_arcs(tmp_path, capsys):
    p = tmp_path / "plain.conllu"
    p.write_text("# text = Hi\n1\tHi\thi\tINTJ\t_\t_\t_\t_\t_\t_\n")
    assert main(["heads", "--corpus", str(p), "--model", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert "error" in err and "Traceback" not in err
