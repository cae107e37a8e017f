"""``sparsescope pareto --lengths``: sparsity against length (sparse_core/pareto/lengths.py).

Run on a tiny SparseModernBERT-style checkpoint (sparse_core.testing_modernbert), the model family
the command is meant for: every length sees the same inputs cut to its first n tokens, each
length's figures are those of a plain corpus sweep of the inputs cut to n, and the tables are
read off each length's frontier. Bad lengths are one-line errors.
"""

from __future__ import annotations

import csv
import json

import pytest

from sparse_core import load_model
from sparse_core import pareto as PA
from sparse_core.pareto.lengths import at_length, parse_lengths
from sparse_core.testing_modernbert import write_modernbert_checkpoint
from sparsescope.cli import main

PROSE = (
    "The river rose through the night and by morning the low fields were under water. "
    "Farmers moved their cattle to the ridge, where the old church stood above the town. "
    "Nobody remembered a flood like it, though the records in the church spoke of three. "
    "When the rain stopped, the children went down to the edge to watch the current. "
)
LENGTHS = [32, 64, 128]
METHODS = ["window", "streaming", "topk", "h2o", "moba"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("mb-lengths")
    return write_modernbert_checkpoint(
        root / "SparseModernBERT-alpha1.5", seed=3, sparse={"initial_alpha": 1.5}
    )


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    f = tmp_path_factory.mktemp("corpus") / "prose.txt"
    # three documents (blank-line separated), each long enough for the longest length
    f.write_text("\n\n".join(" ".join([PROSE] * (k + 3)) for k in range(3)) + "\n")
    return f


@pytest.fixture(scope="module")
def run(tmp_path_factory, model_dir, corpus):
    out = tmp_path_factory.mktemp("lengths") / "out"
    argv = ["pareto", "--corpus", str(corpus), "--model", str(model_dir), "--lengths",
            ",".join(map(str, LENGTHS)), "--methods", ",".join(METHODS), "--limit", "2",
            "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    return out


def test_each_length_is_the_sweep_of_the_same_inputs_cut_to_it(run, model_dir, corpus):
    body = json.loads((run / "pareto-lengths.json").read_text())
    assert body["lengths"] == LENGTHS and body["texts"] == 2
    assert [b["n"] for b in body["per_length"]] == LENGTHS
    model = load_model(str(model_dir), device="cpu", max_tokens=max(LENGTHS))
    from sparse_core.corpus import pack, read_corpus, token_counter

    # packed as the command packs them: inputs of at most twice the longest length
    inputs = pack(read_corpus(corpus, "auto"), token_counter(model.tokenizer), 2 * max(LENGTHS))
    texts = [i.text for i in inputs if i.n_tokens >= max(LENGTHS)][:2]
    for n, got in zip(LENGTHS, body["per_length"], strict=True):
        short = at_length(model, n)
        assert [len(short.encode(t, truncate=True).ids) for t in texts] == [n, n]
        want = PA.sweep_corpus(short, texts, None, methods=METHODS, progress=False).to_json()
        assert got["points"] == want["points"] and got["frontiers"] == want["frontiers"]
        assert got["gold_sparsity"] == pytest.approx(want["gold_sparsity"])
    # the longest length is also written as a plain pareto.json (serve --results DIR)
    plain = json.loads((run / "pareto.json").read_text())
    assert plain["points"] == body["per_length"][-1]["points"]


def test_tables_are_read_off_each_lengths_points(run):
    body = json.loads((run / "pareto-lengths.json").read_text())
    assert set(body["recall_at_sparsity"]) == set(METHODS)
    for k, b in enumerate(body["per_length"]):
        for name in METHODS:
            mine = [p for p in b["points"] if p["method"] == name]
            for lv in body["sparsity_levels"]:
                ok = [p["recall"] for p in mine if p["sparsity"] >= lv]
                got = body["recall_at_sparsity"][name][f"{lv:g}"][k]
                assert got == (round(max(ok), 6) if ok else None)
            for lv in body["recall_levels"]:
                ok = [p["sparsity"] for p in mine if p["recall"] >= lv]
                got = body["sparsity_at_recall"][name][f"{lv:g}"][k]
                assert got == (round(max(ok), 6) if ok else None)
    # the window's exact sparsity grows with n at a fixed width: the lengths really differ
    assert body["gold_sparsity"][0] != body["gold_sparsity"][-1]
    rows = list(csv.reader((run / "pareto-lengths.csv").open()))
    assert rows[0] == ["method", "length", "measure", "level", "value"]
    gold = [r for r in rows if r[0] == "gold"]
    assert [int(r[1]) for r in gold] == LENGTHS


@pytest.mark.parametrize(
    ("flag", "needle"),
    [
        ("32,abc", "whole numbers"),
        ("4,64", "each length must be in [16,"),
        (",", "at least one length"),
    ],
)
def test_bad_lengths_are_one_line_errors(tmp_path, corpus, model_dir, capsys, flag, needle):
    argv = ["pareto", "--corpus", str(corpus), "--model", str(model_dir), "--lengths", flag,
            "--out", str(tmp_path / "o")]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_lengths_refuse_what_they_cannot_combine_with(tmp_path, corpus, model_dir, capsys):
    argv = ["pareto", "--corpus", str(corpus), "--model", str(model_dir), "--lengths", "32,64",
            "--x", "block", "--out", str(tmp_path / "o")]  # fmt: skip
    assert main(argv) == 2
    assert "leave out --x block" in capsys.readouterr().err


def test_inputs_shorter_than_the_longest_length_are_refused(model_dir):
    model = load_model(str(model_dir), device="cpu", max_tokens=256)
    from sparse_core.errors import SparsescopeError

    with pytest.raises(SparsescopeError, match="fewer than 256 tokens"):
        PA.lengths.sweep_lengths(model, ["A short text."], None, [32, 256], progress=False)
    assert parse_lengths("128, 32,32", 256) == [32, 128]


def test_the_folder_is_served_with_its_lengths_and_a_broken_file_is_refused(run, tmp_path):
    import shutil

    from fastapi.testclient import TestClient

    from sparsescope.engine.results import CorpusResults, ResultsError
    from sparsescope.engine.service import AnalysisService
    from sparsescope.web.main import create_app
    from tests.app.conftest import make_settings

    body = json.loads((run / "pareto-lengths.json").read_text())
    got = CorpusResults.load(run).summary()["lengths"]
    assert got["lengths"] == LENGTHS and got["recall_at_sparsity"] == body["recall_at_sparsity"]
    assert "per_length" not in got  # each length's points stay in the file
    settings = make_settings(tmp_path, results_dir=run, warmup=False)
    from sparse_core.testing import tiny_model

    with TestClient(create_app(settings, AnalysisService(settings, model=tiny_model()))) as c:
        served = c.get("/api/results").json()["lengths"]
        assert served["sparsity_at_recall"] == body["sparsity_at_recall"]
    bad = tmp_path / "bad"
    shutil.copytree(run, bad)
    for change, needle in [
        (lambda b: {**b, "lengths": [64, 32, 128]}, "ascending"),
        (lambda b: {**b, "gold_sparsity": [0.5]}, "one number per length"),
        (lambda b: {**b, "recall_at_sparsity": {"nope": {}}}, "known methods"),
        (lambda b: {k: v for k, v in b.items() if k != "sparsity_at_recall"}, "lacks"),
    ]:
        (bad / "pareto-lengths.json").write_text(json.dumps(change(body)))
        with pytest.raises(ResultsError, match=needle) as info:
            CorpusResults.load(bad)
        assert "pareto-lengths.json" in str(info.value)


def test_a_long_texts_corpus_sweep_goes_head_by_head_with_the_same_figures():
    """A run recorded sparse (a long text) is swept one head at a time (bounded memory); its
    figures are those of the same run kept dense, swept every head at once."""
    import numpy as np

    from sparse_core.methods import PredictContext
    from sparse_core.pareto.corpus_sweep import Totals
    from sparse_core.testing import tiny_model

    model = tiny_model(seed=2, layers=2, heads=2, hidden=32, max_positions=256)
    text = " ".join(["the river rose and the old bank went over the bridge at night"] * 20)
    dense = model.run(text, alpha=1.5, truncate=True)
    model.dense_max_bytes = 0
    try:
        sparse = model.run(text, alpha=1.5, truncate=True)
    finally:
        model.dense_max_bytes = None
    assert dense.attn.is_dense and not sparse.attn.is_dense
    grids = PA.corpus_grids(METHODS, dense.n, dense.n)
    a, b = Totals(grids), Totals(grids)
    a.add_text(PredictContext.from_run(dense))
    b.add_text(PredictContext.from_run(sparse))
    np.testing.assert_allclose(b.gold, a.gold, rtol=1e-12)
    for name in METHODS:
        for m, v in a.sums[name].items():
            np.testing.assert_allclose(b.sums[name][m], v, rtol=1e-9, atol=1e-12, err_msg=m)
