"""The analyze request's ``summary`` field and ``GET /api/analyses/{id}/summary`` (the
page's first view waits for the shown method's summary only): the methods asked for, computed
then; the others later, byte for byte what a whole summary computed at once gives."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

import sparsescope.engine.summaries as S
import sparsescope.engine.two_cores as T
from sparse_core.methods import METHODS, available
from sparsescope.engine.service import AnalysisService
from sparsescope.web.main import create_app
from tests.app.conftest import make_settings

TEXT = "The chef who ran to the store was out of food, so he went back home at once. " * 8


@pytest.fixture
def two_clients(tmp_path, tiny_model, tiny_artefact):
    """Two apps on the same model and artefact, each with its own cache."""
    clients = []
    for k in range(2):
        settings = make_settings(tmp_path / str(k))
        svc = AnalysisService(settings, model=tiny_model, artefact=tiny_artefact)
        clients.append((TestClient(create_app(settings, svc)), svc))
    with clients[0][0], clients[1][0]:
        yield clients


def rows_with(rows: list[dict], names: list[str]) -> list[dict]:
    return [{**r, "methods": {k: v for k, v in r["methods"].items() if k in names}} for r in rows]


def test_an_analysis_asked_for_one_method_computes_it_alone_and_the_rest_later(two_clients):
    (part, svc), (whole, _) = two_clients
    full = whole.post("/api/analyze", json={"text": TEXT})
    assert full.status_code == 200, full.text
    r = part.post("/api/analyze", json={"text": TEXT, "summary": ["window"]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert all(list(row["methods"]) == ["window"] for row in body["summary"])
    # nothing but the shown method was computed before the answer
    assert set(svc.get(body["id"]).parts.tables) == {"window"}
    expect = full.json()
    assert body == {**expect, "summary": rows_with(expect["summary"], ["window"])}
    # the head payload (its gold sparsity) and the Pareto data are today's bytes
    aid = body["id"]
    for url in (f"/api/analyses/{aid}/heads/1/2", f"/api/analyses/{aid}/pareto?layer=1&head=2"):
        assert part.get(url).content == whole.get(url).content
    assert set(svc.get(aid).parts.tables) == {"window"}
    # one more method on demand, then every method: the whole body's rows, byte for byte
    got = part.get(f"/api/analyses/{aid}/summary?method=topk&method=sf-kmeans")
    assert got.status_code == 200, got.text
    assert got.json() == rows_with(expect["summary"], ["topk", "sf-kmeans"])
    assert set(svc.get(aid).parts.tables) == {"window", "topk", "sf-kmeans"}
    every = part.get(f"/api/analyses/{aid}/summary")
    assert every.json() == expect["summary"]
    assert part.get(f"/api/analyses/{aid}").content == full.content
    # an API user's analyze (no summary field) of the cached analysis: today's body
    assert part.post("/api/analyze", json={"text": TEXT}).content == full.content


def test_the_default_body_is_whole_and_a_subset_of_a_whole_analysis_is_sliced(two_clients):
    (a, _), (b, _) = two_clients
    full = a.post("/api/analyze", json={"text": TEXT})
    # the whole body first (default), then a subset of the cached analysis
    sub = a.post("/api/analyze", json={"text": TEXT, "summary": ["topp", "window", "topp"]})
    assert sub.json()["summary"] == rows_with(full.json()["summary"], ["topp", "window"])
    assert [list(r["methods"]) for r in sub.json()["summary"]][0] == ["window", "topp"]
    gold = b.post("/api/analyze", json={"text": TEXT, "summary": []}).json()
    assert gold["summary"] == rows_with(full.json()["summary"], [])
    assert b.get(f"/api/analyses/{gold['id']}").content == full.content


def test_a_lone_texts_remaining_summary_is_split_over_both_cores(two_clients, monkeypatch):
    """The methods left for later are computed half the layers on the side worker, and the
    rows are still the whole summary's."""
    (part, svc), (whole, _) = two_clients
    calls = []
    real = T.halves  # the split of summary_tables_on_two_cores, which the parts call
    monkeypatch.setattr(T, "halves", lambda *a: calls.append(1) or real(*a))
    aid = part.post("/api/analyze", json={"text": TEXT, "summary": ["h2o"]}).json()["id"]
    rows = part.get(f"/api/analyses/{aid}/summary").json()
    assert calls, "the remaining methods were not split over the two workers"
    assert rows == whole.post("/api/analyze", json={"text": TEXT}).json()["summary"]


def test_summary_errors_name_the_field(client):
    bad = client.post("/api/analyze", json={"text": TEXT, "summary": ["nope"]})
    assert bad.status_code == 422 and bad.json()["field"] == "summary.0", bad.text
    assert "'window'" in bad.json()["detail"]
    bad = client.post("/api/analyze", json={"text": TEXT, "summary": "window"})
    assert bad.status_code == 422 and bad.json()["field"] == "summary", bad.text
    aid = client.post("/api/analyze", json={"text": TEXT, "summary": ["window"]}).json()["id"]
    r = client.get(f"/api/analyses/{aid}/summary?method=nope")
    assert r.status_code == 422 and r.json()["field"].startswith("method"), r.text
    # the tiny service has no artefact: an sf-* method is not in this analysis
    r = client.get(f"/api/analyses/{aid}/summary?method=sf-kmeans")
    assert r.status_code == 404 and r.json()["field"] == "method", r.text
    assert "artefact" in r.json()["detail"]
    # asked for in the analyze request, it is left out (as the whole summary leaves it out)
    r = client.post("/api/analyze", json={"text": TEXT, "summary": ["sf-kmeans", "window"]})
    assert list(r.json()["summary"][0]["methods"]) == ["window"]
    missing = client.get("/api/analyses/" + "0" * 64 + "/summary")
    assert missing.status_code == 404 and missing.json()["field"] == "id", missing.text
    # the whole summary without an artefact: the methods that need none
    rows = client.get(f"/api/analyses/{aid}/summary").json()
    assert list(rows[0]["methods"]) == available(None)


def test_the_service_checks_summary_names(service):
    from sparse_core.errors import SparsescopeError
    from sparsescope.engine.request import AnalysisRequest

    with pytest.raises(SparsescopeError) as err:
        service.analyze_json(AnalysisRequest(TEXT), ["window", "nope"])
    assert err.value.field == "summary"
    body = json.loads(service.analyze_json(AnalysisRequest(TEXT), list(METHODS)))
    assert list(body["summary"][0]["methods"]) == available(None)


@pytest.mark.real_model
def test_real_model_first_view_summary(real_client):
    """The real model: the page's analyze (one method's summary) and the rest later add up to
    the whole body an API user gets."""
    text = "The quick brown fox jumps over the lazy dog because it was bored."
    sub = real_client.post("/api/analyze", json={"text": text, "alpha": 1.25, "summary": ["fixed"]})
    assert sub.status_code == 200, sub.text
    aid = sub.json()["id"]
    rest = real_client.get(f"/api/analyses/{aid}/summary").json()
    full = real_client.post("/api/analyze", json={"text": text, "alpha": 1.25}).json()
    assert rest == full["summary"]
    assert sub.json()["summary"] == rows_with(full["summary"], ["fixed"])


def test_the_openapi_schema_states_the_field_and_the_route(client):
    schema = client.get("/openapi.json").json()
    field = schema["components"]["schemas"]["AnalyzeRequest"]["properties"]["summary"]
    array = next(s for s in field["anyOf"] if s.get("type") == "array")
    assert array["maxItems"] == len(METHODS)
    assert array["items"]["enum"] == list(METHODS)
    assert field.get("default") is None and "every method" in field["description"]
    route = schema["paths"]["/api/analyses/{analysis_id}/summary"]["get"]
    (param,) = [p for p in route["parameters"] if p["name"] == "method"]
    assert param["in"] == "query" and not param.get("required", False)
    assert param["schema"]["type"] == "array"
    assert param["schema"]["items"]["enum"] == list(METHODS)
    assert {"200", "400", "404", "422"} <= set(route["responses"])
    ok = route["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok["type"] == "array" and ok["items"]["$ref"].endswith("/HeadSummary")


def test_a_request_for_some_methods_leaves_its_batch(tiny_model, tiny_artefact):
    """Two texts of one batched forward: the one asked for a method alone leaves the batch (the
    other summarises itself only), and both get exactly their texts' rows alone."""
    from sparse_core.methods import PredictContext
    from sparsescope.engine.payloads import summary_texts

    outs = [tiny_model.run(t, alpha=1.5) for t in (TEXT, TEXT.upper())]
    S.tie_batch([], outs)
    ctx, parts, count = S.summarise(outs[0], tiny_artefact, ["window"])
    assert count == 1 and set(parts.tables) == {"window"}
    _, whole, count = S.summarise(outs[1], tiny_artefact)
    assert count == 1 and whole.complete  # itself only: the first left the batch
    for out, p in zip(outs, (parts, whole), strict=True):
        alone = summary_texts([PredictContext.from_run(out, tiny_artefact)])[0]
        assert p.rows_json(None) == alone
