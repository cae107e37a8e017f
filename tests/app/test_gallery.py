"""The example gallery: the shipped examples (at least eight, each a valid ShareState with its
measured figures), the /gallery page and /api/gallery listing, /gallery/{slug} opening the main
page on an example, and the start-up precomputation (in the background, never blocking)."""

from __future__ import annotations

import json
import re
import threading
import time

import pytest
from fastapi.testclient import TestClient

from sparsescope.engine.request import AnalysisRequest
from sparsescope.engine.service import AnalysisService
from sparsescope.web import gallery as G
from sparsescope.web.main import create_app
from sparsescope.web.schemas import Gallery, ShareState
from sparsescope.web.shares import ISLAND_ID
from tests.app.conftest import make_settings

ISLAND_RE = re.compile(
    rf'<script type="application/json" id="{ISLAND_ID}">(.*?)</script>', re.DOTALL
)
REQUIRED = {"lecture-causal", "coreference", "softmax", "entmax", "code", "pos-clusters",
            "periodic-table"}  # fmt: skip


@pytest.fixture(scope="module")
def raw() -> dict:
    return json.loads(G.examples_path().read_text(encoding="utf-8"))


def test_the_gallery_file_has_at_least_eight_valid_examples(raw):
    gallery = Gallery.model_validate(raw)
    assert len(gallery.examples) >= 8
    slugs = [ex.slug for ex in gallery.examples]
    assert len(set(slugs)) == len(slugs)
    assert REQUIRED <= set(slugs)
    assert any(s.startswith("wikipedia-") for s in slugs)
    for ex in raw["examples"]:
        state = ShareState.model_validate(ex["state"])  # each is a share state as is
        assert ex["title"] and ex["explain"] and ex["how"] and ex["figures"]
        assert state.layer is not None and state.head is not None
        assert ex["thumb"]["m"] ** 2 == len(ex["thumb"]["cells"])
    assert len(json.dumps(raw)) < 64_000  # small: shipped in the wheel, served to every visitor


def test_the_examples_cover_what_the_gallery_promises(raw):
    by = {ex["slug"]: ex for ex in raw["examples"]}
    assert by["lecture-causal"]["state"]["causal"] is True
    assert "chef who ran to the store" in by["lecture-causal"]["state"]["text"]
    assert by["softmax"]["state"]["alpha"] == 1.0 and by["entmax"]["state"]["alpha"] == 1.5
    assert by["softmax"]["state"]["text"] == by["entmax"]["state"]["text"]
    assert by["periodic-table"]["state"]["method"] == "strided"
    wiki = next(ex for s, ex in by.items() if s.startswith("wikipedia-"))
    assert wiki["state"]["method"] in ("fixed", "strided")
    assert "CC BY-SA" in wiki["credit"] and "Wikipedia" in wiki["credit"]
    assert len(wiki["state"]["text"]) > 1500  # a long passage, copied into the gallery
    # a modern block method missing a head's far edges, on the same passage
    blocks = by["block-misses"]
    assert blocks["state"]["method"] == "moba" and blocks["state"]["text"] == wiki["state"]["text"]
    assert blocks["state"]["token"] is not None  # the locked row holds its heaviest miss
    kept = next(f["value"] for f in blocks["figures"] if f["label"].startswith("far edges"))
    assert 0 <= kept < 1
    if raw["artefact"] is not None:
        assert "learned-misses" in by
        assert by["learned-misses"]["state"]["method"].startswith("sf-")


@pytest.fixture
def warm_client(tmp_path, tiny_model):
    """The app with start-up warming on (the gallery precomputation runs)."""
    settings = make_settings(tmp_path, warmup=True)
    service = AnalysisService(settings, model=tiny_model)
    with TestClient(create_app(settings, service)) as c:
        yield c


def wait_precomputed(client, timeout: float = 120.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        body = client.get("/api/gallery").json()
        if body["precomputed"] or time.monotonic() > deadline:
            return body
        time.sleep(0.2)


def test_every_example_is_precomputed_after_startup(warm_client):
    service = warm_client.app.state.service
    body = wait_precomputed(warm_client)
    assert body["precomputed"], [ex["slug"] for ex in body["examples"] if not ex["ready"]]
    for ex in body["examples"]:
        s = ex["state"]
        key = service.key(AnalysisRequest(s["text"], s["alpha"], s["causal"], s["truncate"]))
        assert ex["analysis"] == key and ex["ready"]
        entry = service.cache.get(key)
        assert entry is not None, ex["slug"]
        layer = min(s["layer"], entry.out.layers - 1)
        head = min(s["head"], entry.out.heads - 1)
        assert ("head", layer, head, "all") in entry.derived
        # the opened head's Pareto data as the page first asks for it (recall over token
        # sparsity, no output errors: state.js paretoY "recall"), swept for that head alone
        assert ("pareto", layer, head, "sparsity", None, False) in entry.derived
    # opening an example now runs no model
    runs = service.stats.runs
    page = warm_client.get("/gallery/coreference")
    assert page.status_code == 200 and service.stats.runs == runs


def test_healthz_answers_while_the_gallery_is_being_precomputed(tmp_path, tiny_model):
    settings = make_settings(tmp_path, warmup=True)
    service = AnalysisService(settings, model=tiny_model)
    gate = threading.Event()
    released: list[bool] = []
    real = service.analyze

    def slow(*args, **kw):  # the first example's analysis blocks until the test lets it go
        released.append(gate.wait(60))  # False: it gave up waiting (a blocked /healthz)
        return real(*args, **kw)

    service.analyze = slow
    with TestClient(create_app(settings, service)) as c:
        assert c.get("/healthz").json()["status"] == "ok"
        assert c.get("/api/gallery").json()["precomputed"] is False
        gate.set()  # only now: had either call waited on the precomputation, it would not be
        assert wait_precomputed(c)["precomputed"]
    assert released and all(released)


def test_no_precomputation_without_warmup(client):
    """warmup off (the test default): nothing runs at start-up; an example is analysed when it is
    first opened."""
    service = client.app.state.service
    body = client.get("/api/gallery").json()
    assert not body["precomputed"] and not any(ex["ready"] for ex in body["examples"])
    assert service.stats.runs == 0
    page = client.get("/gallery/entmax")
    assert page.status_code == 200 and service.stats.runs == 1
    island = json.loads(ISLAND_RE.search(page.text).group(1))
    ex = next(e for e in body["examples"] if e["slug"] == "entmax")
    assert island["state"] == ex["state"]
    s = ex["state"]
    assert island["analysis"] == service.key(
        AnalysisRequest(s["text"], s["alpha"], s["causal"], s["truncate"])
    )
    assert island["gallery"]["title"] == ex["title"]


def test_gallery_page_lists_every_example(client, raw):
    r = client.get("/gallery")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    html = r.text
    for ex in raw["examples"]:
        assert f'href="/gallery/{ex["slug"]}"' in html
        assert f'data-thumb="{ex["slug"]}"' in html
    assert "<script>" not in html  # no inline script (CSP script-src 'self')
    assert re.search(r'src="/v/[0-9a-f]{12}/js/gallery\.js"', html)
    thumbs = re.search(r'<script type="application/json" id="gallery-thumbs">(.*?)</script>', html)
    assert set(json.loads(thumbs.group(1))) == {ex["slug"] for ex in raw["examples"]}


def test_api_gallery_lists_examples_with_urls(client, raw):
    body = client.get("/api/gallery").json()
    assert [ex["slug"] for ex in body["examples"]] == [ex["slug"] for ex in raw["examples"]]
    for ex in body["examples"]:
        assert ex["url"] == f"/gallery/{ex['slug']}"
        ShareState.model_validate(ex["state"])


def test_main_page_links_the_gallery(client):
    html = client.get("/").text
    assert 'href="/gallery"' in html and re.search(r'src="/v/[0-9a-f]{12}/js/export\.js"', html)
    assert 'id="view-actions"' in html


def test_unknown_example_is_a_404_page(client):
    r = client.get("/gallery/no-such-example")
    assert r.status_code == 404 and "gallery" in r.text
    r = client.get("/gallery/%3Cscript%3E")
    assert r.status_code == 404 and "<script>" not in r.text


def test_a_broken_gallery_file_gives_an_empty_gallery(monkeypatch, tmp_path, client):
    bad = tmp_path / "examples.json"
    bad.write_text("{not json")
    monkeypatch.setattr(G, "examples_path", lambda: bad)
    G.load_gallery.cache_clear()
    try:
        assert client.get("/api/gallery").json()["examples"] == []
        assert client.get("/gallery").status_code == 200
    finally:
        G.load_gallery.cache_clear()
