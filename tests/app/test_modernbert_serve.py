"""A tiny ModernBERT and a SparseModernBERT-style checkpoint served by directory.

``sparsescope serve --model DIR`` takes any supported model: the analysis, the head endpoint and
the metrics run through the API like the default model's; a local layer's edges stay inside its
sliding window (|i − j| ≤ 4 in these checkpoints: layers 1 and 2).
"""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from sparse_core.testing_modernbert import write_modernbert_checkpoint
from sparsescope.cli import main
from sparsescope.engine.service import AnalysisService
from sparsescope.engine.settings import Settings
from sparsescope.web.main import create_app

TEXT = (
    "The chef who ran to the store was out of food, so he went back to the village and "
    "asked the merchant for salt."
)
W = 4


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("mb-models")
    plain = write_modernbert_checkpoint(root / "tiny-modernbert", seed=1)
    sparse = write_modernbert_checkpoint(
        root / "SparseModernBERT-alpha2.0", seed=2, sparse={"initial_alpha": 1.01}
    )
    return plain, sparse


def serve(data_dir, *models) -> TestClient:
    settings = Settings(data_dir=data_dir, models=tuple(str(m) for m in models), warmup=False)
    return TestClient(create_app(settings, AnalysisService(settings)))


def test_modernbert_serves_and_analyses_through_the_api(tmp_path, model_dirs):
    with serve(tmp_path, *model_dirs) as c:
        models = {m["id"]: m for m in c.get("/api/models").json()["models"]}
        mb = models["tiny-modernbert"]
        assert (mb["model_type"], mb["decoder"], mb["layers"], mb["heads"]) == (
            "modernbert",
            False,
            4,
            4,
        )
        assert mb["max_tokens"] == 512  # the server's cap below the model's 8,192 positions
        assert models["SparseModernBERT-alpha2.0"]["model_type"] == "modernbert"
        for model in models:
            r = c.post("/api/analyze", json={"text": TEXT, "model": model, "alpha": 1.5})
            assert r.status_code == 200, r.text
            a = r.json()
            assert a["model"] == model and a["layers"] == 4 and not a["causal"]
            toks = a["tokens"]
            assert toks[0]["special"] and toks[-1]["special"] and toks[0]["text"] == "[CLS]"
            n = a["n"]
            assert n == len(toks) > 3 * W
            for layer, local in ((0, False), (1, True), (2, True), (3, False)):
                head = c.get(f"/api/analyses/{a['id']}/heads/{layer}/1").json()
                far = [(i, j) for i, j, _ in head["edges"] if abs(i - j) > W]
                assert bool(far) != local, (model, layer)
            r = c.get(f"/api/analyses/{a['id']}/metrics/1/0", params={"method": "window"})
            assert r.status_code == 200, r.text
            assert 0.0 <= r.json()["recall"] <= 1.0


def test_cli_analyze_runs_a_sparse_modernbert_directory(model_dirs, capsys):
    code = main(["analyze", "--model", str(model_dirs[1]), "--json", TEXT])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["model"] == "SparseModernBERT-alpha2.0" and report["decoder"] is False
    assert len(report["heads"]) == 16
