"""Corpus results in the page (``serve --results DIR``; app/engine/results.py): a real
`sparsescope pareto` output folder (the tiny model's sweep, written by the command's own writer)
served read only, per head and as the mean; foreign and broken files give a clear error naming
what is wrong, at start (exit 2 for `serve`), never a 500."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from fastapi.testclient import TestClient

from sparse_core import pareto as PA
from sparsescope.commands.pareto import write_outputs
from sparsescope.engine.results import CorpusResults, ResultsError
from sparsescope.engine.service import AnalysisService
from sparsescope.web.main import create_app
from tests.app.conftest import make_settings

TEXTS = [
    "The cat sat on the mat because it was warm.",
    "Alice met Bob in Paris, and she gave him the book he wanted.",
    "Numbers like 3, 14 and 159 follow each other here.",
]
METHODS = ["window", "fixed", "strided", "bigbird"]


@pytest.fixture(scope="module")
def sweep(tiny_model):
    return PA.sweep_corpus(tiny_model, TEXTS, None, methods=METHODS, progress=False)


@pytest.fixture
def results_dir(tmp_path, sweep):
    out = tmp_path / "run"
    write_outputs(sweep, out, {"corpus": "test"})
    return out


def client_for(tmp_path, tiny_model, results_dir):
    settings = make_settings(tmp_path, results_dir=results_dir)
    return TestClient(create_app(settings, AnalysisService(settings, model=tiny_model)))


def test_served_results_are_the_folders_and_never_written(tmp_path, tiny_model, results_dir, sweep):
    before = {p.name: p.stat().st_mtime_ns for p in results_dir.iterdir()}
    with client_for(tmp_path, tiny_model, results_dir) as c:
        r = c.get("/api/results")
        assert r.status_code == 200, r.text
        body = r.json()
        on_disk = json.loads((results_dir / "pareto.json").read_text())
        assert body["points"] == on_disk["points"] and body["frontiers"] == on_disk["frontiers"]
        assert body["name"] == "run" and body["texts"] == 3
        L, H = tiny_model.config.num_layers, tiny_model.config.num_heads
        assert body["heads"] == {"layers": L, "heads": H}

        h = c.get("/api/results/heads/1/2").json()
        assert h["scope"] == "head" and (h["layer"], h["head"]) == (1, 2)
        # the per-head figures are the sweep's per-head means over texts, for every point
        tot = sweep.per_head
        k = 0
        for name in METHODS:
            for j in range(len(sweep.grids[name])):
                p = h["points"][k]
                assert p["method"] == name and p["params"] == sweep.grids[name][j]
                want = tot.sums[name]["recall"][j, 1, 2] / tot.texts
                assert p["recall"] == pytest.approx(want, abs=2e-6)
                k += 1
        assert h["gold_sparsity"] == pytest.approx(tot.gold[1, 2] / tot.texts, abs=2e-6)
        # frontiers: indices of their own method, recall strictly rising as sparsity falls
        for name, idx in h["frontiers"].items():
            pts = sorted((h["points"][i] for i in idx), key=lambda p: -p["sparsity"])
            assert all(p["method"] == name for p in pts)
            assert all(a["recall"] < b["recall"] for a, b in zip(pts, pts[1:], strict=False))

        r = c.get("/api/results/heads/9/0")
        assert r.status_code == 400 and r.json()["field"] == "layer"
        r = c.get("/api/results/heads/0/99")
        assert r.status_code == 400 and r.json()["field"] == "head"
    after = {p.name: p.stat().st_mtime_ns for p in results_dir.iterdir()}
    assert after == before


def test_without_results_the_api_says_how_to_get_them(client):
    r = client.get("/api/results")
    assert r.status_code == 404
    assert "--results DIR" in r.json()["detail"]
    assert client.get("/api/results/heads/0/0").status_code == 404


def test_a_folder_without_the_per_head_file_serves_the_mean_only(tmp_path, tiny_model, results_dir):
    (results_dir / "pareto-heads.npz").unlink()
    with client_for(tmp_path, tiny_model, results_dir) as c:
        assert c.get("/api/results").json()["heads"] is None
        r = c.get("/api/results/heads/0/0")
        assert r.status_code == 400 and "pareto-heads.npz" in r.json()["detail"]


def _rewrite(path, fn):
    body = json.loads(path.read_text())
    path.write_text(json.dumps(fn(body)))


@pytest.mark.parametrize(
    ("breakage", "needle"),
    [
        (lambda d: (d / "pareto.json").write_text("{not json"), "not valid JSON"),
        (lambda d: (d / "pareto.json").write_text('{"rows": [1, 2]}'), "lacks model"),
        (lambda d: (d / "pareto.json").write_text("[1, 2, 3]"), "JSON object"),
        (lambda d: (d / "pareto.json").unlink(), "no pareto.json"),
        (
            lambda d: _rewrite(
                d / "pareto.json", lambda b: {**b, "points": [{**b["points"][0], "method": "x"}]}
            ),
            "known methods",
        ),
        (
            lambda d: _rewrite(
                d / "pareto.json",
                lambda b: {**b, "points": [{**b["points"][0], "recall": 7}, *b["points"][1:]]},
            ),
            "recall must be a number in [0, 1]",
        ),
        (
            lambda d: _rewrite(d / "pareto.json", lambda b: {**b, "frontiers": {"window": [999]}}),
            "frontier 'window'",
        ),
        (
            lambda d: _rewrite(d / "pareto.json", lambda b: {**b, "task": {"loss_full": -1}}),
            "loss_full is a number ≥ 0",
        ),
        (
            lambda d: _rewrite(
                d / "pareto.json",
                lambda b: {
                    **b,
                    "task": {"loss_full": 2.5},
                    "points": [{**b["points"][0], "task_loss": "low"}, *b["points"][1:]],
                },
            ),
            "point 0's task_loss must be a number ≥ 0 or null",
        ),
        (
            lambda d: _rewrite(
                d / "pareto.json", lambda b: {**b, "task": {"objective": "sts", "spearman_full": 2}}
            ),
            "spearman_full must be a number in [-1, 1]",
        ),
        (
            lambda d: _rewrite(
                d / "pareto.json",
                lambda b: {
                    **b,
                    "task": {"objective": "sts", "spearman_full": 0.6},
                    "points": [{**b["points"][0], "task_spearman": -3}, *b["points"][1:]],
                },
            ),
            "point 0's task_spearman must be a number in [-1, 1] or null",
        ),
        (lambda d: (d / "pareto-heads.npz").write_bytes(b"PK\x03\x04junk"), "not a readable .npz"),
        (
            lambda d: np.savez(d / "pareto-heads.npz", gold_sparsity=np.zeros((2, 4))),
            "window/sparsity is missing",
        ),
    ],
)
def test_foreign_or_broken_files_are_refused_with_a_clear_message(results_dir, breakage, needle):
    breakage(results_dir)
    with pytest.raises(ResultsError) as e:
        CorpusResults.load(results_dir)
    assert needle in str(e.value) and e.value.field == "results"


def test_serve_with_a_bad_results_folder_is_one_line_and_exit_2(tmp_path, capsys):
    from sparsescope.cli import main
    from tests.browser.conftest import free_port

    flags = ["--port", str(free_port()), "--data-dir", str(tmp_path / "data")]
    code = main(["serve", "--results", str(tmp_path / "nowhere"), *flags])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "no such folder" in err and len(err.splitlines()) == 1
    d = tmp_path / "foreign"
    d.mkdir()
    shutil.copyfile(__file__, d / "pareto.json")
    code = main(["serve", "--results", str(d), *flags])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "not valid JSON" in err


def test_an_sts_task_folder_is_served(tmp_path, results_dir):
    """``pareto --task sts`` writes a task block of Spearman figures: it loads."""
    _rewrite(results_dir / "pareto.json", lambda b: {
        **b, "task": {"objective": "sts", "metric": "STS Spearman", "spearman_full": 0.6},
        "points": [{**b["points"][0], "task_spearman": 0.55}, *b["points"][1:]],
    })  # fmt: skip
    CorpusResults.load(results_dir)
