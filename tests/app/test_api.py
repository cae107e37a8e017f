"""The JSON API against its contract (docs/architecture.md, "Web contract"): schemas, caching,
errors ({detail, field} with the right status and a message naming the field and what is allowed),
security headers and escaping. Runs on the tiny random model; one test uses the real one."""

from __future__ import annotations

import json
import re

import pytest
import torch

from sparsescope.engine.request import ID_HEX, AnalysisRequest
from sparsescope.web.schemas import Analysis, ErrorOut, HeadPayload, Health, MethodsOut

HEX_ID = re.compile(rf"[0-9a-f]{{{ID_HEX}}}")


def assert_error(r, status: int, field: str | None, *needles: str) -> str:
    """The response is a {detail, field} error with ``status``; the detail holds every needle."""
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"detail", "field"}, body
    ErrorOut.model_validate(body)
    assert body["field"] == field, body
    for needle in needles:
        assert needle in body["detail"], (needle, body["detail"])
    assert "Traceback" not in body["detail"] and "/work/" not in body["detail"]
    return body["detail"]


# ----------------------------------------------------------------------------- schemas


def test_healthz(client, tiny_model):
    r = client.get("/healthz")
    assert r.status_code == 200
    h = Health.model_validate(r.json())
    assert h.status == "ok" and h.model == tiny_model.model_id and h.device == "cpu"
    assert h.artefact is None  # the shipped artefact is for MiniLM, not the tiny model


def test_methods_schema(client):
    r = client.get("/api/methods", params={"n": 128})
    assert r.status_code == 200
    body = MethodsOut.model_validate(r.json())
    names = [m.name for m in body.methods]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("n", [0, -3, 100000])
def test_methods_n_out_of_range(client, n):
    assert_error(client.get("/api/methods", params={"n": n}), 400, "n", "n must be in [1, 512]")


def test_analyze_schema(analysis, sentence, tiny_model):
    a = Analysis.model_validate(analysis)
    assert HEX_ID.fullmatch(a.id)
    assert a.n == len(a.tokens) and a.layers == 2 and a.heads == 4
    assert a.model == tiny_model.model_id and a.device == "cpu"
    assert (a.alpha, a.causal, a.truncated) == (1.5, False, False)
    assert a.tokens[0].special and a.tokens[-1].special and a.tokens[0].text == "[CLS]"
    for t in a.tokens:
        if not t.special:
            assert sentence[t.start : t.end].lower() == t.text.removeprefix("##")
    assert [(s.layer, s.head) for s in a.summary] == [(li, h) for li in range(2) for h in range(4)]
    assert all(0.0 <= s.gold_sparsity < 1.0 for s in a.summary)
    assert a.methods == MethodsOut.model_validate({"methods": analysis["methods"]}).methods


def test_gold_sparsity_matches_model(analysis, sentence, tiny_model):
    out = tiny_model.run(sentence)
    gold = 1 - out.graph.float().mean(dim=(-1, -2))  # (L, H)
    for s in analysis["summary"]:
        assert s["gold_sparsity"] == pytest.approx(float(gold[s["layer"], s["head"]]), abs=1e-6)


def test_causal_and_alpha_reach_the_model(client, sentence):
    a = client.post("/api/analyze", json={"text": sentence, "alpha": 2.0, "causal": True}).json()
    assert a["alpha"] == 2.0 and a["causal"] is True
    n = a["n"]
    # causal: at most n(n+1)/2 valid pairs, so every head's graph lies in the lower triangle
    head = client.get(f"/api/analyses/{a['id']}/heads/1/2").json()
    assert all(j <= i for i, j, _ in head["edges"]) and head["n"] == n


# ----------------------------------------------------------------------------- caching


def test_same_request_is_served_from_cache(client, service, sentence):
    r1 = client.post("/api/analyze", json={"text": sentence, "alpha": 1.5})
    r2 = client.post("/api/analyze", json={"text": sentence, "alpha": 1.5})
    assert r1.status_code == r2.status_code == 200
    assert r1.json() == r2.json()
    assert service.stats.runs == 1 and service.stats.hits == 1
    r3 = client.get(f"/api/analyses/{r1.json()['id']}")
    assert r3.status_code == 200 and r3.json() == r1.json()
    assert service.stats.runs == 1


@pytest.mark.parametrize(
    "change", [{"alpha": 1.2}, {"causal": True}, {"truncate": True}, {"text": "Another text."}]
)
def test_cache_key_covers_every_setting(client, service, sentence, change):
    base = {"text": sentence, "alpha": 1.5, "causal": False, "truncate": False}
    a = client.post("/api/analyze", json=base).json()
    b = client.post("/api/analyze", json={**base, **change}).json()
    assert a["id"] != b["id"] and service.stats.runs == 2


def test_evicted_analysis_is_404_and_can_be_reposted(tmp_path, tiny_model, sentence):
    from fastapi.testclient import TestClient

    from sparsescope.engine.service import AnalysisService
    from sparsescope.web.main import create_app
    from tests.app.conftest import make_settings

    settings = make_settings(tmp_path, cache_entries=1)
    service = AnalysisService(settings, model=tiny_model)
    with TestClient(create_app(settings, service)) as c:
        first = c.post("/api/analyze", json={"text": sentence}).json()["id"]
        c.post("/api/analyze", json={"text": "Something else entirely."})
        assert_error(c.get(f"/api/analyses/{first}"), 404, "id", "evicted", "/api/analyze")
        again = c.post("/api/analyze", json={"text": sentence}).json()["id"]
        assert again == first and service.stats.runs == 3
        assert c.get(f"/api/analyses/{first}").status_code == 200


# ----------------------------------------------------------------------------- head payload


def test_head_payload(client, analysis, sentence, tiny_model):
    r = client.get(f"/api/analyses/{analysis['id']}/heads/1/3")
    assert r.status_code == 200
    h = HeadPayload.model_validate(r.json())
    assert (h.layer, h.head, h.n) == (1, 3, analysis["n"])
    assert h.gold_sparsity == analysis["summary"][1 * 4 + 3]["gold_sparsity"]
    probs = tiny_model.run(sentence).probs[1, 3]  # (n, n)
    assert len(h.edges) == int((probs > 0).sum())
    dense = torch.zeros(h.n, h.n, dtype=torch.float64)
    for i, j, p in h.edges:
        assert p > 0
        assert p == pytest.approx(float(probs[i, j]), rel=1e-5)
        dense[i, j] = p
    assert torch.allclose(dense.sum(-1), torch.ones(h.n, dtype=torch.float64), atol=1e-4)
    assert len(h.pos) == h.n
    assert h.proj is None and h.centroids == {}  # no artefact fits the tiny model


def test_head_payload_is_computed_once(client, analysis, service, monkeypatch):
    import sparsescope.engine.derived

    calls = []
    real = sparsescope.engine.derived.head_body
    monkeypatch.setattr(
        sparsescope.engine.derived, "head_body", lambda *a: calls.append(a) or real(*a)
    )
    for _ in range(3):
        assert client.get(f"/api/analyses/{analysis['id']}/heads/0/0").status_code == 200
    assert len(calls) == 1


@pytest.mark.parametrize(
    ("layer", "head", "field", "allowed"),
    [(2, 0, "layer", "[0, 1]"), (-1, 0, "layer", "[0, 1]"), (0, 4, "head", "[0, 3]")],
)
def test_head_out_of_range(client, analysis, layer, head, field, allowed):
    r = client.get(f"/api/analyses/{analysis['id']}/heads/{layer}/{head}")
    assert_error(
        r, 400, field, f"{field} must be in {allowed}", f"got {layer if field == 'layer' else head}"
    )


def test_head_not_an_int(client, analysis):
    r = client.get(f"/api/analyses/{analysis['id']}/heads/x/0")
    assert_error(r, 422, "layer", "layer must be a valid integer", "'x'")


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize("text", ["", "   ", "\n\t "])
def test_empty_text(client, text):
    assert_error(client.post("/api/analyze", json={"text": text}), 400, "text", "empty")


def test_text_too_long_offers_truncation(client, service):
    text = "word " * 700  # 700 word pieces + 2 specials > 512 positions
    d = assert_error(client.post("/api/analyze", json={"text": text}), 400, "text")
    assert "702 tokens" in d and "at most 512" in d and "truncate=true" in d
    assert service.stats.runs == 0
    r = client.post("/api/analyze", json={"text": text, "truncate": True})
    assert r.status_code == 200
    a = r.json()
    assert a["truncated"] is True and a["n"] == 512 and a["tokens"][-1]["text"] == "[SEP]"


@pytest.mark.parametrize("alpha", [0.5, 0.999, 2.01, 3, -1])
def test_alpha_out_of_range(client, sentence, alpha):
    r = client.post("/api/analyze", json={"text": sentence, "alpha": alpha})
    assert_error(r, 400, "alpha", "alpha must be in [1, 2]", f"got {float(alpha)}")


def test_alpha_not_finite(client, sentence):
    body = '{"text": "hi", "alpha": NaN}'
    r = client.post("/api/analyze", content=body, headers={"content-type": "application/json"})
    assert r.status_code in (400, 422)
    assert r.json()["field"] == "alpha" or "JSON" in r.json()["detail"]


@pytest.mark.parametrize("alpha", [1, 1.0, 2, 1.5])
def test_alpha_bounds_are_allowed(client, alpha):
    assert (
        client.post("/api/analyze", json={"text": "Hi there.", "alpha": alpha}).status_code == 200
    )


@pytest.mark.parametrize(
    ("body", "field", "needle"),
    [
        ({}, "text", "text is required"),
        ({"text": 3}, "text", "text must be a valid string"),
        ({"text": "hi", "alpha": "big"}, "alpha", "alpha must be a number in [1, 2] or"),
        ({"text": "hi", "causal": "maybe"}, "causal", "causal must be a valid boolean"),
        ({"text": "hi", "colour": "red"}, "colour", "colour is not a field"),
        ([1, 2], None, "must be a valid dictionary"),
    ],
)
def test_schema_errors_are_readable_422(client, body, field, needle):
    assert_error(client.post("/api/analyze", json=body), 422, field, needle)


def test_malformed_json(client):
    r = client.post(
        "/api/analyze", content=b'{"text": ', headers={"content-type": "application/json"}
    )
    assert_error(r, 422, None, "not valid JSON")


@pytest.mark.parametrize(
    "bad_id", ["0123456789abcdef01234567", "nope", "../../etc/passwd", "A" * 24]
)
def test_unknown_analysis_id(client, bad_id):
    for path in ("", "/heads/0/0", "/pareto", "/clusters/0/0", "/metrics/0/0?method=window"):
        r = client.get(f"/api/analyses/{bad_id}{path}")
        if r.status_code == 404 and r.json()["field"] is None:
            continue  # a path the router itself does not match (e.g. with slashes in the id)
        assert_error(r, 404, "id", "no analysis with id")


def test_unknown_route_and_method(client):
    assert_error(client.get("/api/nothing"), 404, None, "/api/nothing")
    assert_error(client.delete("/healthz"), 405, None, "DELETE")


def test_body_over_the_cap_is_413(client, app_settings, service):
    cap = app_settings.max_body_bytes
    big = json.dumps({"text": "a " * cap})
    r = client.post("/api/analyze", content=big, headers={"content-type": "application/json"})
    assert_error(r, 413, None, f"at most {cap} bytes")
    assert "content-security-policy" in r.headers

    def chunks():  # no Content-Length: the cap still holds while streaming
        for _ in range(cap // 1000 + 2):
            yield b"x" * 1000

    r = client.post("/api/analyze", content=chunks(), headers={"content-type": "application/json"})
    assert_error(r, 413, None, f"at most {cap} bytes")
    assert service.stats.runs == 0


def test_body_under_the_cap_passes(client, app_settings):
    text = "word " * 100
    body = json.dumps({"text": text})
    assert len(body) < app_settings.max_body_bytes
    assert (
        client.post(
            "/api/analyze", content=body, headers={"content-type": "application/json"}
        ).status_code
        == 200
    )


# ----------------------------------------------------------------------------- security, escaping


@pytest.mark.parametrize("path", ["/healthz", "/api/methods", "/api/nothing", "/docs"])
def test_security_headers(client, path):
    r = client.get(path)
    csp = r.headers["content-security-policy"]
    assert (
        "script-src 'self'" in csp
        and "unsafe-inline" not in csp.split("script-src")[1].split(";")[0]
    )
    assert "'unsafe-eval'" not in csp
    assert r.headers["x-content-type-options"] == "nosniff"


XSS = 'He said "<script>alert(1)</script>" & left </script><!-- ok'


def test_script_text_round_trips_as_data(client):
    r = client.post("/api/analyze", json={"text": XSS})
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    a = r.json()
    again = client.get(f"/api/analyses/{a['id']}").json()
    assert again == a
    pieces = "".join(XSS[t["start"] : t["end"]] for t in a["tokens"] if not t["special"])
    assert pieces == XSS.replace(" ", "")
    assert any(t["text"] == "<" for t in a["tokens"]) and any(
        t["text"] == "script" for t in a["tokens"]
    )


def test_catch_all_handler_hides_the_trace(app_settings, service, caplog):
    from fastapi.testclient import TestClient

    from sparsescope.web.main import create_app

    app = create_app(app_settings, service)

    @app.get("/boom")
    def boom() -> None:
        raise RuntimeError("secret /home/user/path detail")

    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.get("/boom")
    body = assert_error(r, 500, None, "internal server error")
    assert "secret" not in body and "/home" not in body
    assert "secret /home/user/path detail" in caplog.text  # the log has it


# ----------------------------------------------------------------------------- real model


@pytest.mark.real_model
def test_real_model_end_to_end(real_client, sentence):
    from sparse_core import DEFAULT_MODEL_ID

    h = real_client.get("/healthz").json()
    assert h["model"] == DEFAULT_MODEL_ID
    r = real_client.post("/api/analyze", json={"text": sentence})
    assert r.status_code == 200
    a = Analysis.model_validate(r.json())
    assert (a.layers, a.heads) == (6, 12) and len(a.summary) == 72
    mean_gold = sum(s.gold_sparsity for s in a.summary) / 72
    assert 0.3 < mean_gold < 1.0  # entmax 1.5 attention is sparse
    head = HeadPayload.model_validate(real_client.get(f"/api/analyses/{a.id}/heads/2/3").json())
    assert head.n == a.n and head.edges
    if a.artefact is not None:
        assert head.proj is not None and len(head.proj.queries) == a.n


def test_concurrent_requests_run_the_model_once(service, sentence):
    from concurrent.futures import ThreadPoolExecutor

    service.start()
    with ThreadPoolExecutor(8) as pool:
        bodies = list(pool.map(lambda _: service.analyze(AnalysisRequest(sentence)), range(16)))
    assert len({b["id"] for b in bodies}) == 1
    assert service.stats.runs == 1 and service.stats.hits == 15


def test_cache_is_bounded_in_bytes(tmp_path, tiny_model):
    from sparsescope.engine.service import AnalysisService
    from tests.app.conftest import make_settings

    service = AnalysisService(make_settings(tmp_path, cache_bytes=1 << 20), model=tiny_model)
    service.start()
    for k in range(12):
        service.analyze(AnalysisRequest(f"Text number {k}. " * 40))
    assert service.cache.nbytes <= 1 << 20 or len(service.cache) == 1
    assert 1 <= len(service.cache) < 12 and service.cache.evictions >= 1
