"""The API at its edges: α just above 1, integers of hundreds of digits, number strings in odd
forms, shares that could not be opened, the share schema's keys, and analyses asked for by a
page's address under the client's rate. Each answer is a readable 4xx naming the field (or a
200 where the value is allowed), never a 500; runs on the tiny random model."""

from __future__ import annotations

import json
import re

import pytest
from fastapi.testclient import TestClient

from sparse_core.methods import METHODS
from sparsescope.engine.service import AnalysisService
from sparsescope.web.main import create_app

from .conftest import make_settings

LEAKS = re.compile(r"Traceback|File \"|site-packages|\.py\b")
NEAR_ONE = [1.0 + 2.0**-52, 1.0 + 1e-7, 1.000001, 1.00001, 1.0001]


def assert_error(r, status: int, field: str | None, *fragments: str) -> dict:
    assert r.status_code == status, (r.status_code, r.text[:500])
    body = r.json()
    assert set(body) >= {"detail", "field"} and body["field"] == field, body
    for f in fragments:
        assert f in body["detail"], (f, body["detail"])
    assert not LEAKS.search(body["detail"])
    return body


def share(client, state: dict):
    return client.post("/api/share", json={"state": state})


# ----------------------------------------------------------------------------- α just above 1


@pytest.mark.parametrize("alpha", NEAR_ONE)
def test_analyze_and_share_pages_at_alpha_just_above_one(client, sentence, alpha) -> None:
    r = client.post("/api/analyze", json={"text": sentence, "alpha": alpha})
    assert r.status_code == 200, r.text[:500]
    body = r.json()
    aid = body["id"]
    h = client.get(f"/api/analyses/{aid}/heads/0/0")
    assert h.status_code == 200, h.text[:300]
    r = share(client, {"text": sentence, "alpha": alpha})
    assert r.status_code == 200, r.text
    sid = r.json()["id"]
    for url in (f"/s/{sid}", f"/s/{sid}?alpha={alpha!r}", f"/api/share/{sid}"):
        page = client.get(url)
        assert page.status_code == 200, (url, page.text[:300])
        assert "Traceback" not in page.text


# ----------------------------------------------------------------------------- huge integers


@pytest.mark.parametrize("digits", [309, 400, 4300])
def test_integers_of_hundreds_of_digits_are_a_422_naming_the_field(client, sentence, digits):
    big = "9" * digits
    raw = f'{{"text": "{sentence}", "alpha": {big}}}'
    r = client.post("/api/analyze", content=raw, headers={"content-type": "application/json"})
    body = assert_error(r, 422, "alpha", "[1, 2]")
    assert len(body["detail"]) < 400  # the digits are not echoed
    r = client.post(
        "/api/share",
        content=f'{{"state": {{"text": "{sentence}", "alpha": {big}}}}}',
        headers={"content-type": "application/json"},
    )
    assert_error(r, 422, "state.alpha", "[1, 2]")
    for flag in ("cmpAlpha", "cmpLayer"):
        r = client.post(
            "/api/share",
            content=f'{{"state": {{"text": "{sentence}", "view": {{"{flag}": {big}}}}}}}',
            headers={"content-type": "application/json"},
        )
        body = assert_error(r, 422, f"state.view.{flag}")
        assert len(body["detail"]) < 400


# ----------------------------------------------------------------------------- number forms


ODD = ["３", "1_0", " 3", "3 ", "+1", "٣", "1e1", "0x3", "inf", "nan", "3\n", "--1", "1.", "-"]


@pytest.mark.parametrize("raw", ODD)
def test_query_numbers_in_an_odd_form_are_a_422_naming_the_parameter(client, analysis, raw):
    aid = analysis["id"]
    url = f"/api/analyses/{aid}/metrics/0/0"
    r = client.get(url, params={"method": "window", "window": raw})
    assert_error(r, 422, "window", "plain ASCII digits")
    r = client.get(url, params={"method": "topk", "k": raw})
    assert_error(r, 422, "k", "plain ASCII digits")


@pytest.mark.parametrize("raw", ["+0.5", " 0.5", "0_5", "０.5", "5e-1", ".5", "0.5.1", "--0.5"])
def test_float_parameters_take_one_minus_sign_and_plain_digits(client, analysis, raw) -> None:
    aid = analysis["id"]
    url = f"/api/analyses/{aid}/metrics/0/0"
    r = client.get(url, params={"method": "topp", "p": raw})
    assert_error(r, 422, "p", "plain ASCII digits", "'-' sign")


def test_plain_numbers_are_still_read(client, analysis) -> None:
    aid = analysis["id"]
    url = f"/api/analyses/{aid}/metrics/0/0"
    for params in (
        {"method": "window", "window": "3"},
        {"method": "window", "window": "3.0"},
        {"method": "topk", "k": "2"},
        {"method": "topp", "p": "0.5"},
    ):
        r = client.get(url, params=params)
        assert r.status_code == 200, (params, r.text)
    # well formed but out of range: the 400 of a bad value, as before
    r = client.get(url, params={"method": "topp", "p": "-0.5"})
    assert_error(r, 400, "p", "must be in")
    r = client.get(url, params={"method": "window", "window": "-4"})
    assert_error(r, 400, "window", "must be in")
    r = client.get(url, params={"method": "window", "window": "3.5"})
    assert_error(r, 400, "window", "an integer")


# ----------------------------------------------------------------------------- shares


def test_a_share_is_refused_when_opening_it_would_not_work(client, sentence) -> None:
    assert_error(share(client, {"text": "\U0001f642\U0001f680 \U0001f9ea"}), 400, "state.text",
                 "[UNK]")  # fmt: skip
    long_text = " ".join(["word"] * 600)  # over the tiny model's 512 positions
    assert_error(share(client, {"text": long_text}), 400, "state.text", "truncate")
    assert share(client, {"text": long_text, "truncate": True}).status_code == 200
    body = assert_error(
        share(client, {"text": sentence, "view": {"cmpMethod": "nope"}}),
        422,
        "state.view.cmpMethod",
        "window",
    )
    assert "nope" in body["detail"]
    for model in ("../../etc", "nope", "x" * 300):
        assert_error(
            share(client, {"text": sentence, "view": {"cmpModel": model}}),
            422,
            "state.view.cmpModel",
            "served model",
        )
    assert_error(share(client, {"text": sentence, "model": "../../etc"}), 422, "state.model")
    served = client.get("/api/models").json()["models"][0]["id"]
    ok = {"text": sentence, "view": {"cmpMethod": "topk", "cmpModel": served, "compare": "model"}}
    r = share(client, ok)
    assert r.status_code == 200, r.text
    for name in METHODS:  # every registry name is a pane B method
        assert share(client, {"text": sentence, "view": {"cmpMethod": name}}).status_code == 200


def test_saved_shares_that_the_new_checks_refuse_still_open(client, sentence) -> None:
    """A share saved before these checks (its state written to the database directly) opens as
    it always did: no saved data is lost."""
    store = client.app.state.share_store
    rec = store.create({"text": sentence, "view": {"cmpMethod": "nope", "cmpModel": "../x"}})
    r = client.get(f"/api/share/{rec.id}")
    assert r.status_code == 200, r.text
    assert r.json()["state"]["view"]["cmpMethod"] == "nope"
    assert client.get(f"/s/{rec.id}").status_code == 200
    rec2 = store.create({"text": "\U0001f642\U0001f680"})
    assert client.get(f"/api/share/{rec2.id}").status_code == 200


def test_the_share_schema_states_the_keys_and_values_it_takes(client) -> None:
    schema = client.get("/openapi.json").json()
    state = schema["paths"]["/api/share"]["post"]["requestBody"]["content"]["application/json"]
    ref = state["schema"]["$ref"].rsplit("/", 1)[1]
    st = schema["components"]["schemas"][ref]["properties"]["state"]
    params = st["properties"]["params"]
    assert params["additionalProperties"] is False
    assert params["propertyNames"]["pattern"] == r"^[A-Za-z][A-Za-z0-9_.-]{0,39}$"
    strings = [b for b in next(iter(params["patternProperties"].values()))["anyOf"]
               if b.get("type") == "string"]  # fmt: skip
    assert strings and strings[0]["maxLength"] == 200
    view = st["properties"]["view"]
    view = st.get("$defs", {}).get("ViewFlags", view) if "$ref" in view else view
    assert view["propertyNames"]["pattern"] == params["propertyNames"]["pattern"]
    assert view["maxProperties"] == 32
    assert view["properties"]["cmpMethod"]["enum"] == ["", *METHODS]
    served = [m["id"] for m in client.get("/api/models").json()["models"]]
    assert view["properties"]["cmpModel"]["enum"] == ["", *served]
    # keys the schema now refuses were refused by the server too
    for bad in ({"": 1}, {"1a": 1}, {"a b": 1}, {"x" * 41: 1}):
        r = share(client, {"text": "The chef ran.", "params": bad})
        assert_error(r, 422, None if False else r.json()["field"])
        assert r.json()["field"].startswith("state.params")


# ----------------------------------------------------------------------------- GET analyses


@pytest.fixture
def limited_client(tmp_path, tiny_model):
    settings = make_settings(tmp_path, rate_burst=3, rate_per_s=0.01)
    service = AnalysisService(settings, model=tiny_model)
    with TestClient(create_app(settings, service)) as c:
        yield c, service


def test_analyses_asked_for_by_a_page_address_are_rate_limited(limited_client, sentence):
    client, service = limited_client
    sid = client.post("/api/share", json={"state": {"text": sentence}}).json()["id"]
    assert client.get(f"/s/{sid}").status_code == 200  # the saved view: no charge
    before = service.stats.misses if hasattr(service.stats, "misses") else None
    codes = []
    for i in range(8):
        r = client.get(f"/s/{sid}?alpha=1.{i + 2}1")  # never the saved 1.5
        codes.append(r.status_code)
        if r.status_code == 429:
            assert int(r.headers["retry-after"]) >= 1
            assert "Too many analyses" in r.text
    assert codes[:3] == [200, 200, 200] and set(codes[3:]) == {429}, codes
    # the same client's POST /api/analyze shares the bucket: it is empty now
    r = client.post("/api/analyze", json={"text": sentence, "alpha": 1.9})
    assert r.status_code == 429
    # the saved view still opens (no new analysis)
    assert client.get(f"/s/{sid}").status_code == 200
    if before is not None:
        assert service.stats.misses - before <= 3


def test_gallery_and_home_addresses_share_the_limit(limited_client) -> None:
    client, _ = limited_client
    gallery = client.get("/api/gallery")
    slugs = [e["slug"] for e in gallery.json()["examples"]] if gallery.status_code == 200 else []
    if not slugs:
        pytest.skip("no gallery examples shipped")
    codes = [client.get(f"/gallery/{slugs[0]}?alpha=1.{i + 2}1").status_code for i in range(5)]
    assert codes[:3] == [200, 200, 200] and set(codes[3:]) == {429}, codes
    assert client.get("/?alpha=1.77").status_code == 429
    assert client.get(f"/gallery/{slugs[0]}").status_code == 200


def test_error_bodies_are_json(client) -> None:
    r = client.post("/api/analyze", content=b'{"text": "a", "alpha": 1' + b"0" * 500 + b"}",
                    headers={"content-type": "application/json"})  # fmt: skip
    assert r.status_code == 422
    json.loads(r.text)


# ----------------------------------------------------------------------------- /healthz


def test_starting_the_model_threads_at_shutdown_is_quiet(monkeypatch) -> None:
    """A process that ends just after serve started its model threads (the pool then refuses new
    work): the starter thread ends without an exception, so nothing prints a traceback."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from sparsescope.web import calls

    closed = ThreadPoolExecutor(1)
    closed.shutdown()
    monkeypatch.setattr(calls, "_pool", closed)
    monkeypatch.setattr(calls, "_starter", None)
    raised: list[BaseException] = []
    monkeypatch.setattr(threading, "excepthook", lambda a: raised.append(a.exc_value))
    t = calls.start_model_threads(2)
    t.join(10)
    assert not t.is_alive()
    assert raised == []


def test_analyses_start_no_thread_on_the_event_loop(client, monkeypatch) -> None:
    """A thread's start waits until the new thread has held the GIL once: seconds on a loaded
    machine, during which the event loop (and /healthz) waits. Concurrent analyses must find
    their model-call threads started already (docs/benchmarks.md, "/healthz at a burst's
    onset"): no ``Thread.start`` runs on an event loop while they are answered."""
    import asyncio
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from sparsescope.web import calls

    starter = getattr(calls, "start_model_threads", None)  # the app's lifespan ran it
    if starter is not None:
        starter().join(120)  # idempotent: waits until every thread is started
    on_loop: list[str] = []
    start = threading.Thread.start

    def watched(self):
        try:
            asyncio.get_running_loop()
            on_loop.append(self.name)
        except RuntimeError:
            pass
        return start(self)

    monkeypatch.setattr(threading.Thread, "start", watched)
    texts = [f"The chef ran to the store {i} times." for i in range(12)]
    with ThreadPoolExecutor(12) as pool:
        codes = list(pool.map(lambda t: client.post("/api/analyze", json={"text": t}), texts))
    assert [r.status_code for r in codes] == [200] * 12
    assert client.get("/healthz").status_code == 200
    assert on_loop == [], f"threads started on the event loop: {on_loop}"
