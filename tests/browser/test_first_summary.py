"""The page's open waits for the shown method's summary only (frontend/js/summary.js),
in real Chromium: ``POST /api/analyze`` asks for that method, every other method's summary is
fetched once the head and its Pareto data are in, a method switched to before that is fetched on
its own, and the grid shows the server's summary figure of the method shown."""

from __future__ import annotations

import json
import os
import urllib.parse
from pathlib import Path

import pytest

from .test_page import TEXT, api, wait_ready

pytestmark = pytest.mark.browser

#: Where the screenshots go (looked at by hand; tests/browser/ writes them under the tmp dir).
SHOTS = os.environ.get("SPARSESCOPE_SHOTS")


def shot(page, tmp_path: Path, name: str) -> None:
    folder = Path(SHOTS) if SHOTS else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"{name}.png"), full_page=True)


def open_page(page, server_url: str, **query: str) -> None:
    q = urllib.parse.urlencode({"text": TEXT, **query})
    page.goto(f"{server_url}/?{q}")
    wait_ready(page)


def test_the_page_asks_for_the_shown_methods_summary_then_the_rest(page, server_url, tmp_path):
    events: list[tuple[str, str]] = []  # (what, url) in the order the page saw them
    bodies: list[dict] = []

    def on_request(req):
        if req.url.endswith("/api/analyze"):
            bodies.append(json.loads(req.post_data or "{}"))
        if "/api/analyses/" in req.url and "/summary" in req.url:
            events.append(("request", req.url))

    def on_finished(req):
        if "/api/analyses/" in req.url and ("/heads/" in req.url or "/pareto" in req.url):
            events.append(("finished", req.url))

    page.on("request", on_request)
    page.on("requestfinished", on_finished)
    with page.expect_response(lambda r: r.url.endswith("/summary") and r.ok, timeout=60_000) as got:
        open_page(page, server_url, method="window", grid="recall")
    rows = got.value.json()
    assert bodies and bodies[-1]["summary"] == ["window"], bodies
    a = api(server_url, "/api/analyze", {"text": TEXT, "alpha": 1.5, "causal": False})
    assert rows == a["summary"]  # every method's rows, as an API user's body holds them
    # the whole summary was asked for once the open head and its Pareto data had arrived
    first = next(k for k, (what, _) in enumerate(events) if what == "request")
    done = {url.split("/api/")[1].split("?")[0].split("/")[2] for w, url in events[:first]
            if w == "finished"}  # fmt: skip
    assert {"heads", "pareto"} <= done, events
    page.wait_for_selector("#pareto .scatterlayer .trace")
    shot(page, tmp_path, "first-summary-open")


def test_a_method_switched_to_early_is_fetched_alone(page, server_url, tmp_path):
    held = []
    page.route("**/api/analyses/*/summary", lambda route: held.append(route))  # never answered
    asked = []
    page.on("request", lambda r: asked.append(r.url) if "/summary?" in r.url else None)
    open_page(page, server_url, method="window", grid="recall")
    for _ in range(300):  # the rest is asked for once the head's Pareto data are in
        if held:
            break
        page.wait_for_timeout(100)
    assert held, "the page did not ask for the rest of the summary"
    with page.expect_response(lambda r: "/summary?method=topk" in r.url, timeout=60_000) as got:
        page.select_option("#method", "topk")
    rows = got.value.json()
    assert all(list(r["methods"]) == ["topk"] for r in rows)
    a = api(server_url, "/api/analyze", {"text": TEXT, "alpha": 1.5, "causal": False})
    assert [r["methods"]["topk"] for r in rows] == [r["methods"]["topk"] for r in a["summary"]]
    assert asked == [got.value.url]
    wait_ready(page)
    page.wait_for_selector("#pareto .scatterlayer .trace")
    shot(page, tmp_path, "first-summary-switched")
    for route in held:
        route.abort()


#: Per head, the methods the page's analysis rows hold (the store the page itself uses).
ROW_METHODS = """async () => {
  const base = document.querySelector('script[type=module]').src;
  const store = await import(new URL('state.js', base).href);
  return store.get().analysis.summary.map((row) => Object.keys(row.methods).sort());
}"""


def test_a_shared_page_has_the_whole_summary_and_asks_for_none(page, server_url):
    """A share's page comes with the whole analysis body (the preload island): no summary
    request, every method's figures in the page's rows."""
    state = {"text": TEXT, "alpha": 1.5, "causal": False, "layer": 0, "head": 1,
             "method": "topk", "params": {}}  # fmt: skip
    share = api(server_url, "/api/share", {"state": state})
    asked = []
    page.on("request", lambda r: asked.append(r.url) if "/api/analyses/" in r.url
            and "/summary" in r.url else None)  # fmt: skip
    page.goto(server_url + share["url"])
    wait_ready(page)
    page.wait_for_selector("#pareto .scatterlayer .trace")
    page.wait_for_timeout(500)
    a = api(server_url, "/api/analyze", {"text": TEXT, "alpha": 1.5, "causal": False})
    want = sorted(a["summary"][0]["methods"])
    assert page.evaluate(ROW_METHODS) == [want] * len(a["summary"])
    assert asked == []


def test_the_page_rows_get_every_method_after_the_open(page, server_url):
    open_page(page, server_url, method="window")
    a = api(server_url, "/api/analyze", {"text": TEXT, "alpha": 1.5, "causal": False})
    want = [sorted(a["summary"][0]["methods"])] * len(a["summary"])
    for _ in range(600):  # every method's rows come after the head and its Pareto data
        if page.evaluate(ROW_METHODS) == want:
            break
        page.wait_for_timeout(100)
    assert page.evaluate(ROW_METHODS) == want
