"""``sparsescope analyze``: the JSON report on the real default model, and one-line errors."""

from __future__ import annotations

import json

import pytest

from sparse_core.methods import METHODS
from sparsescope.cli import main


@pytest.mark.real_model
def test_analyze_json_on_the_real_model(capsys, sentence):
    assert main(["analyze", "--json", sentence]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["model"] == "sparsescope/all-MiniLM-L6-v2-entmax1.5"  # the default
    assert report["device"] == "cpu" and report["alpha"] == 1.5 and report["causal"] is False
    assert report["tokens"][0] == "[CLS]" and report["tokens"][-1] == "[SEP]"
    assert len(report["heads"]) == 72
    assert {(h["layer"], h["head"]) for h in report["heads"]} == {
        (li, hi) for li in range(6) for hi in range(12)
    }
    for h in report["heads"]:
        assert 0.0 <= h["gold_sparsity"] < 1.0
        assert list(h["patterns"]) == list(METHODS)  # every method, shipped artefact at 1.5
        for pat in h["patterns"].values():
            assert set(pat) >= {"params", "sparsity", "recall", "exact", "precision",
                                "mass_recall"}  # fmt: skip
            assert 0.0 <= pat["recall"] <= 1.0 and 0.0 <= pat["sparsity"] <= 1.0
            assert 0.0 <= pat["mass_recall"] <= 1.0 + 1e-6
    # the oracle budgets (definitions §8): every head, and pooled over all heads' queries
    b = report["budgets"]
    assert b["levels"] == [0.9, 0.99] and len(b["heads"]) == 72
    assert b["pooled"]["k"]["0.99"]["q"][0] >= 1 and b["pooled"]["p"]["0.9"]["q"][-1] <= 1 + 1e-6
    n = len(report["tokens"])
    stride = report["heads"][0]["patterns"]["strided"]["params"]["stride"]
    assert abs(stride - n**0.5) <= 1  # stride ≈ √n


@pytest.mark.real_model
def test_analyze_reports_the_chosen_methods(capsys, sentence):
    argv = ["analyze", "--json", "--alpha", "2", "--method", "strided", "--method", "sf-kmeans"]
    assert main([*argv, sentence]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    # no artefact is fitted at alpha 2: the learned method is left out, with a note
    assert all(list(h["patterns"]) == ["strided"] for h in report["heads"])
    assert "sf-* methods left out" in captured.err


def test_analyze_refuses_an_unknown_method(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["analyze", "--method", "magic", "hi"])
    assert exc.value.code == 2 and "sf-kmeans" in capsys.readouterr().err


@pytest.mark.real_model
def test_analyze_causal_table(capsys):
    assert main(["analyze", "--causal", "--alpha", "2", "A short causal example."]) == 0
    out = capsys.readouterr().out
    assert "causal" in out and "alpha=2.0" in out
    assert len([ln for ln in out.splitlines() if ln[:5].strip().isdigit()]) == 72


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["analyze", "   "], "empty"),
        (["analyze", "\U0001f642\U0001f680"], "none of this text's tokens is in the model's"),
        (["analyze", "--alpha", "2.5", "hi"], "alpha must be in [1, 2]"),
        (["analyze", "--model", "/nonexistent/model", "hi"], "does not exist"),
        (["analyze", "word " * 600], "at most 512"),
    ],
)
def test_analyze_user_errors_are_one_line(capsys, argv, fragment):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert fragment in err and "Traceback" not in err and err.count("\n") == 1
