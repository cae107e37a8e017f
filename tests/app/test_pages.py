"""The page and its files: GET / from the Jinja template, the JSON island helper, the vendored
Plotly, the ES modules and static files, the OpenAPI docs; all offline, all under the CSP."""

from __future__ import annotations

import html
import json
import re
from importlib.resources import files
from pathlib import Path

import pytest

from sparsescope.web.render import PLOTLY_BUNDLE, json_for_html, json_island

NASTY = {"text": '</script><script>alert("x")</script><!-- & \u2028 \' "', "n": [1, 2.5, None]}


def test_json_island_cannot_be_closed_early():
    island = str(json_island("config", NASTY))
    assert island.startswith('<script type="application/json" id="config">')
    assert island.endswith("</script>")
    inner = island[len('<script type="application/json" id="config">') : -len("</script>")]
    assert "<" not in inner and ">" not in inner and "&" not in inner
    assert json.loads(inner) == NASTY  # JSON.parse reads the \u003c escapes back


def test_json_island_id_is_escaped():
    assert '"><b' not in str(json_island('x"><b', 1))


def test_json_for_html_rejects_nan():
    with pytest.raises(ValueError):
        json_for_html(float("nan"))


def test_index_page(client, tiny_model):
    r = client.get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    page = r.text
    assert "script-src 'self'" in r.headers["content-security-policy"]
    # no inline script: every <script> either loads a file or is a JSON island
    for tag in re.findall(r"<script\b[^>]*>", page):
        assert "src=" in tag or 'type="application/json"' in tag, tag
    for island in re.findall(r'<script type="application/json"[^>]*>(.*?)</script>', page, re.S):
        json.loads(island)
    assert tiny_model.model_id in html.unescape(page)


def test_index_page_does_not_reflect_the_query(client):
    r = client.get("/", params={"text": "<script>alert(1)</script>", "alpha": "<b>2</b>"})
    assert r.status_code == 200
    assert "<script>alert(1)" not in r.text and "<b>2</b>" not in r.text


def _trace_types(bundle: str) -> set[str]:
    """The trace types a plotly.js bundle registers."""
    return set(re.findall(r'moduleType:"trace",name:"(\w+)"', bundle))


def test_plotly_is_the_vendored_bundle_and_has_every_trace_the_frontend_draws(client):
    r = client.get("/static/vendor/plotly.min.js")
    assert r.status_code == 200
    assert "javascript" in r.headers["content-type"]
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.content == files("sparsescope.static").joinpath(PLOTLY_BUNDLE).read_bytes()
    served = _trace_types(r.text)
    # every trace type plotly.js has (the full bundle of the plotly Python package), so that a
    # `type: "..."` in the frontend's code is known to be a trace, not a button or an input
    every = _trace_types(files("plotly").joinpath("package_data", "plotly.min.js").read_text())
    code = " ".join(
        p.read_text() for p in Path(str(files("sparsescope.frontend").joinpath("js"))).rglob("*.js")
    )
    drawn = set(re.findall(r'\btype: *"(\w+)"', code)) & every
    assert {"scatter", "heatmap"} <= drawn  # the Pareto plot, the standalone view's heatmap
    assert drawn <= served, f"traces the frontend draws that the bundle lacks: {drawn - served}"
    assert len(served) < len(every)  # the partial bundle, not the full one


def test_es_modules_are_served_as_javascript(client):
    modules = sorted(
        p.name
        for p in files("sparsescope.frontend").joinpath("js").iterdir()
        if p.name.endswith(".js")
    )
    assert "main.js" in modules
    r = client.get(f"/js/{modules[0]}")
    assert r.status_code == 200 and "javascript" in r.headers["content-type"]


def test_static_files_and_missing_ones(client):
    r = client.get("/static/does-not-exist.css")
    assert r.status_code == 404 and set(r.json()) == {"detail", "field"}
    r = client.get("/js/../app/web/main.py")
    assert r.status_code == 404


def test_openapi_lists_every_route(client):
    assert client.get("/docs").status_code == 200
    spec = client.get("/openapi.json").json()
    paths = spec["paths"]
    for path in (
        "/healthz",
        "/api/methods",
        "/api/analyze",
        "/api/analyses/{analysis_id}",
        "/api/analyses/{analysis_id}/heads/{layer}/{head}",
        "/api/analyses/{analysis_id}/pareto",
        "/api/analyses/{analysis_id}/clusters/{layer}/{head}",
        "/api/analyses/{analysis_id}/metrics/{layer}/{head}",
    ):
        assert path in paths, path
    analyze = paths["/api/analyze"]["post"]
    assert {"200", "400", "413", "422"} <= set(analyze["responses"])


def test_docs_page_is_offline_and_csp_clean(client):
    r = client.get("/docs")
    assert r.status_code == 200 and "swagger-ui" in r.text
    assert "cdn" not in r.text.lower() and "http://" not in r.text and "https://" not in r.text
    for tag in re.findall(r"<script\b[^>]*>", r.text):
        assert "src=" in tag, tag  # no inline script
    for url in re.findall(r'(?:src|href)="(/[^"]+)"', r.text):
        got = client.get(url)
        assert got.status_code == 200, url
        if url.endswith(".js"):
            assert "javascript" in got.headers["content-type"], url
    assert "/openapi.json" in client.get("/docs/init.js").text


def test_assets_have_versioned_immutable_urls(client):
    html = client.get("/").text
    urls = re.findall(r'(?:src|href)="(/v/[0-9a-f]{12}/(?:js|static)/[^"]+)"', html)
    assert any(u.endswith("/js/main.js") for u in urls) and any(u.endswith("app.css") for u in urls)
    for url in urls:
        r = client.get(url)
        assert r.status_code == 200, url
        assert r.headers["cache-control"] == "public, max-age=31536000, immutable"
    # the modules' relative imports resolve under the same version
    version = urls[0].split("/")[2]
    assert client.get(f"/v/{version}/js/session.js").headers["cache-control"].endswith("immutable")
    plotly = json.loads(re.search(r'id="config">(.*?)</script>', html).group(1))["plotly"]
    assert plotly.startswith(f"/v/{version}/")
    r = client.get(plotly)
    assert r.status_code == 200 and r.headers["cache-control"].endswith("immutable")


def test_plotly_does_not_block_the_main_page(client):
    """No <script> for Plotly in the page: the Pareto panel loads it after the first paint."""
    html = client.get("/").text
    assert "plotly" not in " ".join(re.findall(r"<script[^>]*>", html)).lower()


def test_first_visit_carries_an_analysed_example(client):
    html = client.get("/").text
    pre = json.loads(re.search(r'id="preload">(.*?)</script>', html).group(1))
    shared = json.loads(re.search(r'id="shared-state">(.*?)</script>', html).group(1))
    assert shared["home"] is True
    assert pre["analysis"]["n"] == pre["payload"]["n"] > 0
    assert pre["analysis"]["alpha"] == shared["state"]["alpha"]
    assert "pareto" in pre and pre["pareto"]["points"]
    # its id is a live analysis: the page's next requests (other heads) use it
    assert client.get(f"/api/analyses/{pre['analysis']['id']}").status_code == 200
    # a URL with a text is the user's own view: no example
    assert 'id="preload"' not in client.get("/", params={"text": "A cat."}).text
