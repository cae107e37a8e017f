"""Today's learned selectors (definitions §12) through the HTTP contract: the metrics of
``indexer`` and ``seer`` (200, the registry's figures), bad parameters (400 naming the
parameter), the head payload's orders (HeadPayload), and an artefact without selectors (4xx
naming the method)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from sparse_core.methods import METHODS, PredictContext, evaluate
from sparsescope.engine.service import AnalysisService
from sparsescope.web.main import create_app
from sparsescope.web.schemas import HeadPayload, Metrics
from tests.browser.conftest import random_artefact

TEXT = (
    "The chef who ran to the store was out of food, so he went back home again. Later that "
    "evening the neighbours came over with bread and soup."
)


@pytest.fixture
def art(tiny_model):
    return random_artefact(tiny_model)


@pytest.fixture
def sel_client(app_settings, tiny_model, art):
    service = AnalysisService(app_settings, model=tiny_model, artefact=art)
    with TestClient(create_app(app_settings, service)) as c:
        yield c


@pytest.fixture
def analysis(sel_client):
    r = sel_client.post("/api/analyze", json={"text": TEXT})
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize(
    ("method", "params"),
    [("indexer", {}), ("indexer", {"k": "3"}), ("seer", {}), ("seer", {"block": 16, "topk": 2})],
)
def test_metrics_of_both_methods(sel_client, analysis, tiny_model, art, method, params):
    r = sel_client.get(
        f"/api/analyses/{analysis['id']}/metrics/1/2", params={"method": method, **params}
    )
    assert r.status_code == 200, r.text
    got = Metrics.model_validate(r.json())
    ctx = PredictContext.from_run(tiny_model.run(TEXT), art)
    want = evaluate(ctx, method, METHODS[method].validate(ctx.n, params, art))
    assert got.recall == float(want["recall"][1, 2])
    assert got.sparsity == float(want["sparsity"][1, 2])
    assert {m["name"] for m in analysis["methods"]} >= {"indexer", "seer"}


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        ("indexer", {"k": "-1"}, "k"),
        ("indexer", {"k": "1000"}, "k"),
        ("indexer", {"k": "0"}, "k"),
        ("seer", {"block": "24"}, "block"),
        ("seer", {"topk": "0"}, "topk"),
        ("seer", {"tau": "0.5"}, "tau"),
    ],
)
def test_bad_parameters_are_a_400_naming_them(sel_client, analysis, method, params, field):
    r = sel_client.get(
        f"/api/analyses/{analysis['id']}/metrics/1/2", params={"method": method, **params}
    )
    assert r.status_code == 400, r.text
    body = r.json()
    assert body["field"] == field and field in body["detail"]


def test_the_head_payload_carries_the_orders(sel_client, analysis):
    r = sel_client.get(f"/api/analyses/{analysis['id']}/heads/1/2")
    assert r.status_code == 200
    body = HeadPayload.model_validate(r.json())
    n = analysis["n"]
    assert body.indexer is not None and body.indexer.order.shape == [n, body.indexer.k_max]
    assert sorted(body.seer, key=int) == ["16", "32", "64", "128"]
    assert body.seer["16"].shape == [-(-n // 16)] * 2


def test_an_artefact_without_selectors(app_settings, tiny_model, art):
    art.learned = {}
    service = AnalysisService(app_settings, model=tiny_model, artefact=art)
    with TestClient(create_app(app_settings, service)) as c:
        a = c.post("/api/analyze", json={"text": TEXT}).json()
        r = c.get(f"/api/analyses/{a['id']}/metrics/0/0", params={"method": "indexer"})
        assert 400 <= r.status_code < 500, r.text
        assert r.json()["field"] == "method" and "fit --method indexer" in r.json()["detail"]
        body = c.get(f"/api/analyses/{a['id']}/heads/0/0").json()
        assert body["indexer"] is None and body["seer"] == {}
