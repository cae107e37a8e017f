"""A long text through the API (docs/api.md, "Long texts"): P recorded sparse and never
densified (``SparseProbs.dense`` refuses here whatever the size), every method's metrics, the
flow, the oracle budgets, one head's Pareto data and the summary answer 200 and equal a dense
reference computed in the test from the same model run kept dense; bad input stays a 4xx."""

from __future__ import annotations

import pytest
import torch
from fastapi.testclient import TestClient

from sparse_core import budgets as BU
from sparse_core import sparse_probs
from sparse_core.flow import reachability, rollout
from sparse_core.methods import METHODS, PredictContext, available, evaluate
from sparse_core.testing import tiny_model
from sparsescope.engine.service import AnalysisService
from sparsescope.web.main import create_app
from tests.core.test_sparse_metrics import long_text

from .conftest import make_settings

N = 720
LAYER, HEAD = 1, 0


@pytest.fixture(scope="module")
def long_model():
    return tiny_model(seed=3, layers=2, heads=2, hidden=32, max_positions=1024)


@pytest.fixture(scope="module")
def text(long_model):
    return long_text(long_model, N, seed=1)


@pytest.fixture(scope="module")
def reference(long_model, text):
    """The same text run with P kept dense: the reference every figure is checked against."""
    return PredictContext.from_run(long_model.run(text, alpha=1.5))


@pytest.fixture
def long_client(tmp_path, long_model, monkeypatch):
    monkeypatch.setattr(sparse_probs, "DENSIFY_MAX_BYTES", 0)  # no (L, H, n, n) P, ever
    long_model.dense_max_bytes = 0  # recorded sparse, as a long text is
    settings = make_settings(tmp_path, max_tokens=1024)
    try:
        with TestClient(create_app(settings, AnalysisService(settings, model=long_model))) as c:
            yield c
    finally:
        long_model.dense_max_bytes = None


@pytest.fixture
def long_analysis(long_client, text) -> dict:
    r = long_client.post("/api/analyze", json={"text": text, "summary": ["window"]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["n"] == N and body["n"] > 680
    return body


def test_the_summary_of_a_long_text_is_the_dense_one(long_client, long_analysis, reference):
    assert set(long_analysis["summary"][0]["methods"]) == {"window"}
    r = long_client.get(f"/api/analyses/{long_analysis['id']}/summary")
    assert r.status_code == 200, r.text
    rows = r.json()
    for name in available(None):
        want = evaluate(reference, name, METHODS[name].defaults(N))
        for k, row in enumerate(rows):
            li, h = divmod(k, reference.heads)
            got = row["methods"][name]
            assert got["recall"] == pytest.approx(float(want["recall"][li, h]), abs=1e-6)
            assert got["sparsity"] == pytest.approx(float(want["sparsity"][li, h]), abs=1e-6)


@pytest.mark.parametrize("name", available(None))
def test_every_method_s_metrics_of_a_long_text_equal_the_dense_ones(
    long_client, long_analysis, reference, name
):
    aid = long_analysis["id"]
    p = {**METHODS[name].defaults(N), "window": 3}
    q = {"method": name, **{k: str(v).lower() if isinstance(v, bool) else v for k, v in p.items()}}
    r = long_client.get(f"/api/analyses/{aid}/metrics/{LAYER}/{HEAD}", params=q)
    assert r.status_code == 200, r.text
    got = r.json()
    want = evaluate(reference, name, p)
    for k in ("recall", "sparsity", "exact", "precision", "mass_recall"):
        assert got[k] == pytest.approx(float(want[k][LAYER, HEAD]), rel=0, abs=1e-9), k
    for b, v in got["block_sparsity"].items():
        assert v == pytest.approx(float(want[f"block_{b}"][LAYER, HEAD]), rel=0, abs=1e-9), b


def test_bad_metrics_input_of_a_long_text_is_a_clear_4xx(long_client, long_analysis):
    aid = long_analysis["id"]
    r = long_client.get(f"/api/analyses/{aid}/metrics/0/0", params={"method": "topk", "k": 0})
    assert r.status_code == 400 and "k" in r.text
    r = long_client.get(f"/api/analyses/{aid}/metrics/0/0", params={"method": "nope"})
    assert r.status_code == 400 and "window" in r.text
    r = long_client.get(f"/api/analyses/{aid}/flow", params={"token": N})
    assert r.status_code == 404 and "token" in r.text


def test_the_flow_of_a_long_text_is_the_dense_rollout(long_client, long_analysis, reference):
    aid, layers = long_analysis["id"], long_analysis["layers"]
    t = N // 3
    r = long_client.get(f"/api/analyses/{aid}/flow", params={"token": t})
    assert r.status_code == 200, r.text
    body = r.json()
    out = reference.out
    reach = reachability(out.graph)[layers - 1, t]
    roll = rollout(out.probs)[layers - 1, t]
    assert body["reachable"] == reach.tolist()
    assert body["mass"] == pytest.approx(roll.tolist(), rel=1e-5, abs=1e-12)


def test_the_budgets_of_a_long_head_are_the_dense_ones(long_client, long_analysis, reference):
    aid = long_analysis["id"]
    r = long_client.get(f"/api/analyses/{aid}/budgets", params={"layer": LAYER, "head": HEAD})
    assert r.status_code == 200, r.text
    want = BU.head_budgets(reference, LAYER, HEAD)
    body = r.json()
    assert body["k"]["0.9"]["values"] == want["k"][0.9].tolist()
    assert body["p"]["0.99"]["values"] == pytest.approx(want["p"][0.99].tolist(), abs=1e-6)
    r = long_client.get(f"/api/analyses/{aid}/budgets")
    assert r.status_code == 200, r.text


def test_one_head_s_pareto_data_of_a_long_text(long_client, long_analysis, reference):
    from sparse_core.pareto import sweep_text

    aid = long_analysis["id"]
    r = long_client.get(f"/api/analyses/{aid}/pareto", params={"layer": LAYER, "head": HEAD})
    assert r.status_code == 200, r.text
    body = r.json()
    want = sweep_text(reference.view(LAYER, HEAD)).points(0, 0)
    assert body["points"] == want["points"]
    assert torch.tensor(body["gold_sparsity"]) == pytest.approx(want["gold_sparsity"])
