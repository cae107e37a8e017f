"""Share links through the API and the pages: round trips, validation in and out, unguessable ids,
survival of restarts and of ``kill -9``, warm analyses, and hostile text shown only as text."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from sparse_core.methods import METHODS
from sparsescope.engine.request import AnalysisRequest
from sparsescope.engine.service import AnalysisService
from sparsescope.engine.store import DB_NAME, ShareStoreError
from sparsescope.web.main import create_app
from sparsescope.web.schemas import ShareState
from sparsescope.web.shares import ISLAND_ID, MAX_STATE_BYTES

ROOT = Path(__file__).resolve().parents[2]
ID_RE = re.compile(r"[A-Za-z0-9_-]{12}")
HOSTILE = ["<script>alert(1)</script>", '"><img src=x onerror=alert(1)>', "</script><!-- & -->"]
ISLAND_RE = re.compile(
    rf'<script type="application/json" id="{ISLAND_ID}">(.*?)</script>', re.DOTALL
)
TINY_ID = "tiny-random-2x4-seed0"  # the tiny_model fixture
STATE = {
    "text": "The chef who ran to the store was out of food.",
    "alpha": 1.5,
    "causal": False,
    "layer": 1,
    "head": 2,
    "method": "bigbird",
    "params": {"random_keys": 2, "window": 3, "globals": True},
    "token": 4,
    "cluster": None,
    "lecture_step": None,
    "view": {"hideSpecial": True, "scope": "head"},
}


def assert_error(r, status: int, *needles: str) -> dict:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"detail", "field"}, body
    for needle in needles:
        assert needle in body["detail"], (needle, body["detail"])
    assert "Traceback" not in r.text
    return body


def share(client, state: dict) -> str:
    r = client.post("/api/share", json={"state": state})
    assert r.status_code == 200, r.text
    return r.json()["id"]


def island_of(html: str) -> dict:
    (found,) = ISLAND_RE.findall(html)
    return json.loads(found)


# ----------------------------------------------------------------------------- API


def test_round_trip(client):
    r = client.post("/api/share", json={"state": STATE})
    assert r.status_code == 200, r.text
    body = r.json()
    assert ID_RE.fullmatch(body["id"])
    assert body["url"] == f"/s/{body['id']}" and body["embed"] == f"/embed/{body['id']}"
    got = client.get(f"/api/share/{body['id']}")
    assert got.status_code == 200, got.text
    out = got.json()
    assert set(out) == {"id", "state", "created"} and out["id"] == body["id"]
    assert out["state"] == {**STATE, "truncate": False, "start": 0, "model": TINY_ID}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", out["created"])


def test_minimal_state_gets_defaults(client):
    sid = share(client, {"text": "hello"})
    state = client.get(f"/api/share/{sid}").json()["state"]
    assert state == ShareState(text="hello", model=TINY_ID).model_dump(mode="json")


@pytest.mark.parametrize(
    ("patch", "field", "needle"),
    [
        ({"alpha": 3.0}, "state.alpha", "2"),
        ({"alpha": 0.5}, "state.alpha", "1"),
        ({"method": "magic"}, "state.method", "sf-kmeans"),
        ({"layer": -1}, "state.layer", "greater than or equal"),
        ({"text": ""}, "state.text", "text"),
        ({"text": "x" * 20_001}, "state.text", "20000"),
        ({"causal": "maybe"}, "state.causal", "bool"),
        ({"params": {"window": [1, 2]}}, "state.params.window", ""),
        ({"params": {"bad key!": 1}}, "state.params", ""),
        ({"params": {f"p{i}": i for i in range(40)}}, "state.params", "32"),
        ({"view": {"tab": "x" * 500}}, "state.view.tab", "200"),
        ({"colour": "red"}, "state.colour", "remove it"),
    ],
)
def test_bad_states_are_422_naming_the_field(client, patch, field, needle):
    r = client.post("/api/share", json={"state": {**STATE, **patch}})
    body = assert_error(r, 422, needle)
    assert body["field"] is not None and body["field"].startswith(field), body


def test_nan_and_missing_state(client):
    raw = b'{"state": {"text": "a", "alpha": NaN}}'
    r = client.post("/api/share", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert_error(client.post("/api/share", json={}), 422)
    assert_error(client.post("/api/share", json={"state": "text"}), 422)


def test_oversized_state_is_413(client):
    big = {**STATE, "text": "x" * (MAX_STATE_BYTES + 10)}
    body = assert_error(client.post("/api/share", json={"state": big}), 413, "64 KiB")
    assert body["field"] == "state"
    # non-ASCII text counts in UTF-8 bytes: 20000 four-byte characters are too much
    emoji = {**STATE, "text": "\N{GRINNING FACE}" * 20_000}
    assert_error(client.post("/api/share", json={"state": emoji}), 413, "64 KiB")
    # a body over the app's request limit is refused before it is read
    huge = {**STATE, "text": "x" * (2 << 20)}
    assert client.post("/api/share", json={"state": huge}).status_code == 413


@pytest.mark.parametrize(
    "bad", ["AAAAAAAAAAAA", "short", "x" * 100, "..%2F..%2Fetc", "%3Cscript%3E12345", "a.b.c.d.e"]
)
def test_unknown_or_malformed_ids_are_404(client, bad):
    body = assert_error(client.get(f"/api/share/{bad}"), 404)
    assert "<script>" not in body["detail"]
    r = client.get(f"/s/{bad}")
    assert r.status_code == 404
    if "%2F" not in bad:  # a decoded "/" matches no page route: the API's JSON 404 answers
        assert "text/html" in r.headers["content-type"]
    assert "<script>" not in r.text
    assert client.get(f"/embed/{bad}").status_code == 404


def test_ids_are_short_unguessable_and_distinct(client):
    ids = [share(client, {"text": "same text"}) for _ in range(50)]
    assert len(set(ids)) == 50
    assert all(ID_RE.fullmatch(i) for i in ids)


def test_rows_that_no_longer_validate_give_410_not_500(client, app_settings):
    good = share(client, STATE)
    conn = sqlite3.connect(Path(app_settings.data_dir) / DB_NAME)
    bad_alpha = json.dumps({**STATE, "alpha": 7.0})
    conn.execute(
        "INSERT INTO shares VALUES ('badalpha0001', ?, '2024-01-01T00:00:00+00:00')", (bad_alpha,)
    )
    conn.execute("INSERT INTO shares VALUES ('notjson00001', '{oops', '2024-01-01T00:00:00+00:00')")
    conn.commit()
    conn.close()
    for sid in ("badalpha0001", "notjson00001"):
        body = assert_error(client.get(f"/api/share/{sid}"), 410, "cannot open")
        assert body["field"] == "state"
        page = client.get(f"/s/{sid}")
        assert page.status_code == 410 and "cannot open" in page.text
        assert "Traceback" not in page.text
    assert client.get(f"/api/share/{good}").status_code == 200


def test_the_schema_lists_the_registry_s_method_names(client):
    """ShareState.method is the registry's names (sparse_core.methods.METHODS), in its order,
    as an enum in the OpenAPI schema; any other name is refused."""
    schema = client.get("/openapi.json").json()["components"]["schemas"]
    assert schema["ShareState"]["properties"]["method"]["enum"] == list(METHODS)
    for name in METHODS:
        assert ShareState(text="x", method=name).method == name


# ----------------------------------------------------------------------------- persistence


def test_shares_survive_a_new_app_on_the_same_data_dir(app_settings, tiny_model):
    with TestClient(create_app(app_settings, AnalysisService(app_settings, model=tiny_model))) as c:
        sid = share(c, STATE)
    with TestClient(create_app(app_settings, AnalysisService(app_settings, model=tiny_model))) as c:
        r = c.get(f"/api/share/{sid}")
    assert r.status_code == 200 and r.json()["state"]["text"] == STATE["text"]


def test_an_unreadable_database_stops_start_up_naming_the_file(app_settings, tiny_model):
    path = Path(app_settings.data_dir) / DB_NAME
    path.write_bytes(b"not a database at all" * 50)
    app = create_app(app_settings, AnalysisService(app_settings, model=tiny_model))
    with pytest.raises(ShareStoreError, match=re.escape(str(path))), TestClient(app):
        pass
    assert path.read_bytes() == b"not a database at all" * 50


# ----------------------------------------------------------------------------- warm links


def test_creating_a_share_warms_the_analysis(client, service):
    state = {**STATE, "text": "A text nobody analysed before sharing it."}
    sid = share(client, state)
    assert client.app.state.limits.warmups.join()  # warmed at low priority, in the background
    key = service.key(AnalysisRequest(state["text"], state["alpha"], state["causal"], False))
    entry = service.cache.get(key)
    head = ("head", STATE["layer"], STATE["head"], "all")
    assert entry is not None and head in entry.derived
    runs, warmed = service.stats.runs, entry.derived[head]
    page = client.get(f"/s/{sid}")
    r = client.post("/api/analyze", json={"text": state["text"], "alpha": state["alpha"]})
    h = client.get(f"/api/analyses/{key}/heads/{STATE['layer']}/{STATE['head']}")
    assert page.status_code == r.status_code == h.status_code == 200
    # all three answered from the cache: no model run, the warmed head payload itself
    assert service.stats.runs == runs and entry.derived[head] is warmed
    assert island_of(page.text)["analysis"] == r.json()["id"] == key


@pytest.mark.real_model
def test_a_shared_link_opens_from_the_warm_cache_on_the_real_model(real_client):
    """What makes a shared link open at once: creating the share warms its analysis and its
    head, so opening it runs no model and computes no head (a check of the cache, not a timing:
    speed is the benchmarks' to measure)."""
    service = real_client.app.state.service
    text = " ".join(["The chef who ran to the store was out of food, so he went back."] * 8)
    state = {**STATE, "text": text, "layer": 3, "head": 5, "method": "window"}
    sid = share(real_client, state)  # warms the analysis and the shared head
    assert real_client.app.state.limits.warmups.join()
    runs = service.stats.runs
    page = real_client.get(f"/s/{sid}")
    restored = island_of(page.text)["state"]
    a = real_client.post(
        "/api/analyze",
        json={k: restored[k] for k in ("text", "alpha", "causal", "truncate")},
    )
    entry = service.cache.get(a.json()["id"])
    warmed = entry.derived[("head", 3, 5, "all")]
    h = real_client.get(f"/api/analyses/{a.json()['id']}/heads/3/5")
    assert page.status_code == a.status_code == h.status_code == 200
    assert a.json()["n"] > 100
    assert service.stats.runs == runs and entry.derived[("head", 3, 5, "all")] is warmed


def test_a_saved_share_whose_text_cannot_be_analysed_still_opens(client):
    """New shares are checked as analyses are (tests/app/test_edges.py): a text too long
    without truncate is a 400. One saved before that check still opens, unanalysed."""
    r = client.post("/api/share", json={"state": {**STATE, "text": "word " * 2000}})
    assert r.status_code == 400 and r.json()["field"] == "state.text"
    rec = client.app.state.share_store.create({**STATE, "text": "word " * 2000})
    assert client.get(f"/api/share/{rec.id}").status_code == 200
    page = client.get(f"/s/{rec.id}")
    assert page.status_code == 200 and island_of(page.text)["analysis"] is None


# ----------------------------------------------------------------------------- pages


def test_shared_page_carries_the_state_in_an_island(client):
    sid = share(client, STATE)
    r = client.get(f"/s/{sid}")
    assert r.status_code == 200 and "text/html" in r.headers["content-type"]
    data = island_of(r.text)
    assert data["id"] == sid and data["state"] == {
        **STATE,
        "truncate": False,
        "start": 0,
        "model": TINY_ID,
    }
    assert r.headers["x-robots-tag"] == "noindex"
    assert "frame-ancestors 'none'" in r.headers["content-security-policy"]


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_text_appears_only_escaped(client, hostile):
    sid = share(client, {**STATE, "text": f"before {hostile} after"})
    for url in (f"/s/{sid}", f"/embed/{sid}"):
        html = client.get(url).text
        assert hostile not in html, url
        assert "alert(1)</script>" not in html and "<img" not in html
        data = island_of(html)
        assert data["state"]["text"] == f"before {hostile} after"
        raw = ISLAND_RE.search(html).group(1)
        assert "<" not in raw and ">" not in raw and "&" not in raw
    embed = client.get(f"/embed/{sid}").text
    assert "&lt;" in embed  # shown as text in the caption


def test_a_lecture_share_opens_the_lecture_at_its_step(client):
    sid = share(client, {**STATE, "lecture_step": 4, "causal": True})
    r = client.get(f"/s/{sid}", follow_redirects=False)
    assert r.status_code == 303
    url = httpx.URL(r.headers["location"])
    assert url.path == "/lecture"
    assert dict(url.params) == {
        "step": "4",
        "text": STATE["text"],
        "alpha": "1.5",
        "causal": "1",
        "model": TINY_ID,
        "layer": "1",
        "head": "2",
    }
    # too long for a URL: the page comes with the island instead
    sid = share(client, {**STATE, "lecture_step": 4, "text": "word " * 3000, "truncate": True})
    r = client.get(f"/s/{sid}", follow_redirects=False)
    assert r.status_code == 200 and island_of(r.text)["state"]["lecture_step"] == 4


def test_embed_page(client):
    sid = share(client, STATE)
    r = client.get(f"/embed/{sid}")
    assert r.status_code == 200
    csp = r.headers["content-security-policy"]
    assert "frame-ancestors *" in csp and "'none'" not in csp.split("frame-ancestors")[1]
    assert "script-src 'self'" in csp
    assert "x-frame-options" not in r.headers
    assert re.search(r'<script type="module" src="/v/[0-9a-f]{12}/js/embed\.js"></script>', r.text)
    assert 'id="embed-heatmap"' in r.text and f'href="/s/{sid}"' in r.text
    assert island_of(r.text)["state"]["layer"] == STATE["layer"]
    # only /embed may be framed
    assert "frame-ancestors 'none'" in client.get(f"/s/{sid}").headers["content-security-policy"]
    assert client.get("/js/embed.js").status_code == 200


# ----------------------------------------------------------------------------- kill -9

SERVER = textwrap.dedent(
    """
    from sparsescope.web.main import create_app
    from sparsescope.engine.service import AnalysisService
    from sparsescope.engine.settings import Settings
    from sparse_core.testing import tiny_model


    def app():
        settings = Settings.from_env(warmup=False)
        return create_app(settings, AnalysisService(settings, model=tiny_model(seed=0)))
    """
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_server(tmp_path: Path, data_dir: Path) -> tuple[subprocess.Popen, str]:
    (tmp_path / "share_server.py").write_text(SERVER)
    port = _free_port()
    env = {
        **os.environ,
        "SPARSESCOPE_DATA_DIR": str(data_dir),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    cmd = [
        sys.executable,
        "-m",
        "uvicorn",
        "--factory",
        "share_server:app",
        "--app-dir",
        str(tmp_path),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    log = (tmp_path / f"server-{port}.log").open("wb")
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"server exited: {(tmp_path / f'server-{port}.log').read_text()[-2000:]}")
        try:
            if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    pytest.fail("server did not start within 120 s")


@pytest.mark.slow
def test_acknowledged_shares_survive_kill_9(tmp_path):
    data_dir = tmp_path / "data"
    proc, base = _start_server(tmp_path, data_dir)
    acked: dict[str, int] = {}
    lock = threading.Lock()
    stop = threading.Event()

    def writer(k: int) -> None:
        with httpx.Client(base_url=base, timeout=5) as c:
            for i in range(5000):  # bounded; the kill ends it much earlier
                if stop.is_set():
                    return
                state = {"text": "kill test", "params": {"writer": k, "seq": i}}
                try:
                    r = c.post("/api/share", json={"state": state})
                except httpx.HTTPError:
                    return  # the server is gone
                if r.status_code == 200:
                    with lock:
                        acked[r.json()["id"]] = k * 100_000 + i

    threads = [threading.Thread(target=writer, args=(k,), daemon=True) for k in range(2)]
    try:
        for t in threads:
            t.start()
        deadline = time.monotonic() + 60
        while len(acked) < 40 and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)  # mid-stream: writers are still posting
        proc.wait(timeout=10)
    finally:
        stop.set()
        if proc.poll() is None:
            proc.kill()
        for t in threads:
            t.join(timeout=10)
    assert len(acked) >= 40, "too few shares were written before the kill"

    db = data_dir / DB_NAME
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    stored = dict(conn.execute("SELECT id, state FROM shares").fetchall())
    conn.close()
    missing = set(acked) - set(stored)
    assert not missing, f"{len(missing)} acknowledged shares lost"
    for sid, tag in acked.items():
        params = json.loads(stored[sid])["params"]
        assert params["writer"] * 100_000 + params["seq"] == tag

    proc, base = _start_server(tmp_path, data_dir)
    try:
        with httpx.Client(base_url=base, timeout=5) as c:
            for sid in list(acked)[:: max(1, len(acked) // 25)]:
                r = c.get(f"/api/share/{sid}")
                assert r.status_code == 200, r.text
            assert share(c, {"text": "after the restart"})
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


def test_the_share_store_lives_with_the_app(app_settings, service):
    """Opened by the lifespan (not by the first request), closed at shutdown."""
    app = create_app(app_settings, service)
    assert getattr(app.state, "share_store", None) is None
    with TestClient(app) as c:
        store = app.state.share_store
        assert store.path == app_settings.data_dir / DB_NAME and store.count() == 0
        share(c, {"text": "kept"})
    with pytest.raises(ShareStoreError, match="closed"):
        store.count()
