"""Lecture mode (`/lecture`): the raw-vector route, and the page in a real headless Chromium.

The browser tests run the app in-process (uvicorn in a thread, on a free loopback port) over the
session's tiny random model, and drive Debian's Chromium through Playwright. They skip with a
reason when Playwright or a Chromium binary is missing.
"""

from __future__ import annotations

import math
import re
import socket
import threading
import time
from urllib.parse import parse_qs, quote, urlparse

import pytest
from fastapi.testclient import TestClient

from sparsescope.engine.payloads import MAX_RAW_TOKENS
from sparsescope.engine.service import AnalysisService
from sparsescope.engine.settings import Settings
from sparsescope.web.main import create_app
from sparsescope.web.render import LECTURE_TEXT

# ----------------------------------------------------------------------------- the API (no browser)


@pytest.fixture
def lecture_client(tmp_path, tiny_model):
    settings = Settings(data_dir=tmp_path, warmup=False)
    with TestClient(create_app(settings, AnalysisService(settings, model=tiny_model))) as c:
        yield c


def test_lecture_page_serves_a_json_island_and_no_inline_script(lecture_client):
    r = lecture_client.get("/lecture?step=3&text=%3Cscript%3Ealert(1)%3C/script%3E")
    assert r.status_code == 200
    html = r.text
    assert 'id="lecture-config"' in html and LECTURE_TEXT in html
    # the query string is read by the page itself: nothing of it is echoed into the HTML
    assert "alert(1)" not in html
    for tag in re.findall(r"<script\b[^>]*>", html):
        assert 'type="application/json"' in tag or "src=" in tag, tag
    assert re.search(r"/static/vendor/katex-[\d.]+/katex\.min\.js", html)
    katex = re.search(r"/static/vendor/(katex-[\d.]+)/katex\.min\.css", html).group(1)
    assert lecture_client.get(f"/static/vendor/{katex}/katex.min.js").status_code == 200
    font = f"/static/vendor/{katex}/fonts/KaTeX_Main-Regular.woff2"
    assert lecture_client.get(font).status_code == 200
    assert lecture_client.get("/js/lecture/main.js").status_code == 200


def test_raw_route_gives_the_heads_vectors_and_scaled_scores(lecture_client, tiny_model):
    a = lecture_client.post("/api/analyze", json={"text": LECTURE_TEXT, "causal": True}).json()
    r = lecture_client.get(f"/api/analyses/{a['id']}/raw/1/2")
    assert r.status_code == 200, r.text
    body = r.json()
    n, d = body["n"], body["d_head"]
    assert n == a["n"] and d == tiny_model.config.head_dim
    assert len(body["queries"]) == n and len(body["queries"][0]) == d
    assert len(body["keys"]) == n and len(body["scores"]) == n and len(body["scores"][0]) == n
    q, k = body["queries"], body["keys"]
    for i, j in [(0, 0), (n - 1, 0), (3, n - 1)]:  # unmasked: j > i is there too
        want = sum(q[i][t] * k[j][t] for t in range(d)) / math.sqrt(d)
        assert body["scores"][i][j] == pytest.approx(want, rel=1e-4, abs=1e-4)


def test_raw_route_errors_name_the_field(lecture_client):
    a = lecture_client.post("/api/analyze", json={"text": LECTURE_TEXT}).json()
    r = lecture_client.get(f"/api/analyses/{a['id']}/raw/99/0")
    assert r.status_code == 404 and r.json()["field"] == "layer"  # not in this analysis
    r = lecture_client.get("/api/analyses/0123456789abcdef0123/raw/0/0")
    assert r.status_code == 404 and r.json()["field"] == "id"
    long = lecture_client.post("/api/analyze", json={"text": "word " * (MAX_RAW_TOKENS + 5)}).json()
    r = lecture_client.get(f"/api/analyses/{long['id']}/raw/0/0")
    assert r.status_code == 404 and str(MAX_RAW_TOKENS) in r.json()["detail"]


# ----------------------------------------------------------------------------- the page in Chromium


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lecture_server(tmp_path_factory, tiny_model):
    """The app on a free loopback port, served by uvicorn in a thread; yields its base URL."""
    import uvicorn

    settings = Settings(data_dir=tmp_path_factory.mktemp("lecture"), warmup=False)
    app = create_app(settings, AnalysisService(settings, model=tiny_model))
    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            pytest.fail("the test server did not start")
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def page(browser):
    """A fresh 1280×800 page that records script errors (asserted empty by the tests)."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    pg = ctx.new_page()
    pg.set_default_timeout(30_000)
    pg.errors = []
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))
    yield pg
    ctx.close()


def _open(page, base: str, query: str) -> None:
    page.goto(f"{base}/lecture?{query}")
    page.wait_for_selector("body[data-ready]")


def _step(page) -> int:
    return int(parse_qs(urlparse(page.url).query)["step"][0])


def _wait_step(page, k: int) -> None:
    page.wait_for_function(
        "k => document.body.dataset.step === String(k) && 'ready' in document.body.dataset", arg=k
    )
    assert _step(page) == k


@pytest.mark.browser
def test_keyboard_steps_forward_and_back_and_the_url_follows(page, lecture_server):
    _open(page, lecture_server, "step=1")
    assert _step(page) == 1
    page.keyboard.press("ArrowRight")
    _wait_step(page, 2)
    assert page.locator("#step-title").text_content() == "Queries and keys"
    page.keyboard.press(" ")
    _wait_step(page, 3)
    page.keyboard.press("ArrowLeft")
    _wait_step(page, 2)
    page.keyboard.press("End")
    _wait_step(page, 12)
    page.keyboard.press("ArrowRight")  # past the end: stays
    page.wait_for_timeout(100)
    assert _step(page) == 12
    page.keyboard.press("Home")
    _wait_step(page, 1)
    assert page.locator("#step-count").text_content() == "1 / 12"
    page.go_back()  # every step is a history entry
    _wait_step(page, 12)
    # the progress bar marks the current step and links every step
    current = page.locator("#progress-steps a[aria-current=step]")
    assert current.get_attribute("data-step") == "12"
    href = page.locator('#progress-steps a[data-step="4"]').get_attribute("href")
    assert "step=4" in href
    assert page.errors == []


@pytest.mark.browser
def test_every_step_renders_its_formula_with_katex(page, lecture_server):
    _open(page, lecture_server, "step=1")
    for k in range(1, 13):
        if k > 1:
            page.keyboard.press("ArrowRight")
            _wait_step(page, k)
        panel = page.locator("#panel")
        assert panel.locator(".katex").count() >= 1, f"step {k}: no KaTeX formula"
        assert panel.locator(".formula-raw").count() == 0, f"step {k}: KaTeX did not load"
        assert (
            page.locator("#figure").inner_text().strip()
            or page.locator("#figure canvas, #figure svg").count()
        ), f"step {k}: empty picture"
    assert page.errors == []


@pytest.mark.browser
def test_alpha_slider_reruns_the_analysis_and_changes_the_zeros(page, lecture_server):
    _open(page, lecture_server, "step=5&alpha=1")
    zeros = page.locator("#zero-count")
    assert zeros.get_attribute("data-zeros") == "0"  # alpha = 1 is softmax: no exact zeros
    slider = page.locator("#alpha")
    slider.focus()
    page.keyboard.press("End")  # the slider takes the key: alpha -> 2 (sparsemax)
    page.wait_for_function("() => new URL(location.href).searchParams.get('alpha') === '2'")
    page.wait_for_function("() => Number(document.getElementById('zero-count').dataset.zeros) > 0")
    assert _step(page) == 5  # the slide did not change
    n_sparse = int(zeros.get_attribute("data-zeros"))
    assert str(n_sparse) in zeros.text_content()
    assert page.locator("#settings").text_content().startswith("α = 2.00")
    assert page.errors == []


@pytest.mark.browser
def test_hostile_text_in_the_url_is_shown_as_text_and_runs_nothing(page, lecture_server):
    hostile = (
        '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
        '"><svg onload="window.__pwned=3">'
    )
    _open(page, lecture_server, f"step=1&text={quote(hostile)}")
    assert page.evaluate("window.__pwned") is None
    # nothing was parsed as markup: no image, no handler attribute, only the page's own scripts
    assert page.locator("img, [onerror], [onload]").count() == 0
    assert page.locator("body script").count() == 0
    assert page.locator("#sentence-big").text_content() == f"“{hostile}”"
    assert page.locator("#sentence").text_content() == f"“{hostile}”"
    tokens = page.locator(".tok-text").all_text_contents()
    assert "<" in tokens and ">" in tokens and "script" in tokens
    # later slides draw the same tokens as canvas text, still with nothing run
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    _wait_step(page, 3)
    assert page.evaluate("window.__pwned") is None
    assert page.errors == []


@pytest.mark.browser
def test_pareto_slide_says_so_when_the_server_has_no_sweep(page, lecture_server):
    """No silent stand-in sweep: when GET …/pareto fails, the slide shows the server's reason.
    (A 404: a 503 is retried first, five times, which tests/browser/test_busy.py tests.)"""
    page.route(
        "**/pareto?*",
        lambda route: route.fulfill(
            status=404,
            content_type="application/json",
            body='{"detail": "the sweep is down for maintenance", "field": null}',
        ),
    )
    _open(page, lecture_server, "step=9")
    error = page.locator("#pareto-error")
    error.wait_for()
    assert "not available" in error.text_content()
    assert "the sweep is down for maintenance" in error.text_content()
    assert page.locator("#figure .pareto-point").count() == 0
    assert page.errors == []


@pytest.mark.browser
def test_flow_slide_marks_the_servers_reachable_inputs(page, lecture_server):
    """Step 11: one dot row per level; the inputs marked are exactly the server's reachable set
    for the slide's focus token, and the layer slider refetches (fewer or equal at layer 0)."""
    _open(page, lecture_server, "step=11")
    page.wait_for_selector("#flow-figure svg")
    levels = page.evaluate(
        """() => { const svg = document.querySelector('#flow-figure svg');
            const dots = [...svg.querySelectorAll('.flow-dot')];
            const ys = [...new Set(dots.map((c) => c.getAttribute('cy')))];
            return ys.map((y) => [...svg.querySelectorAll(`.flow-dot[cy="${y}"]`)]
                .map((c) => c.classList.contains('flow-dot-on'))); }"""
    )
    reached = page.locator("#flow-reached").text_content()
    n = len(levels[0])
    assert len(levels) >= 3 and all(len(row) == n for row in levels)
    bottom = levels[0]  # drawn in level order: the inputs first
    assert reached == f"{sum(bottom)} / {n}"
    assert sum(levels[-1]) == 1  # the target alone at the top
    top_reach = sum(bottom)
    page.evaluate(
        """() => { const s = document.getElementById('flow-layer'); s.value = '0';
            s.dispatchEvent(new Event('input', {bubbles: true}));
            s.dispatchEvent(new Event('change', {bubbles: true})); }"""
    )
    page.wait_for_function(
        "() => document.querySelectorAll('#flow-figure svg .flow-target').length === 1 &&"
        " new Set([...document.querySelectorAll('#flow-figure .flow-dot')]"
        ".map((c) => c.getAttribute('cy'))).size === 2"
    )
    first = int(page.locator("#flow-reached").text_content().split(" / ")[0])
    assert 1 <= first <= top_reach
    assert page.errors == []


@pytest.mark.browser
def test_sparsefinder_slide_shows_the_explorers_predictions(page, server_url):
    """Step 8 predicts with the explorer's twins (methods.js): its k-means and distance figures
    equal sfKmeans / sfDistance + computeMetrics on the same head payload."""
    _open(page, server_url, "step=8&layer=1&head=2&causal=0")
    assert page.locator("#figure svg .sf-query").count() > 0
    t = float(page.locator("#threshold").input_value())
    want = page.evaluate(
        """async (t) => {
            const { prepareHead } = await import('/js/head.js');
            const { sfDistance, sfKmeans } = await import('/js/methods.js');
            const { computeMetrics } = await import('/js/metrics.js');
            const { pct } = await import('/js/dom.js');
            const text = new URL(location.href).searchParams.get('text')
              ?? JSON.parse(document.getElementById('lecture-config').textContent).default_text;
            const a = await (await fetch('/api/analyze', {method: 'POST',
              headers: {'Content-Type': 'application/json'},
              body: JSON.stringify({text, alpha: 1.5, causal: false, truncate: true})})).json();
            const payload = await (await fetch(`/api/analyses/${a.id}/heads/1/2`)).json();
            const h = prepareHead(payload, false);
            const bs = [...h.centroids.keys()].sort((x, y) => x - y);
            const b = bs[Math.floor((bs.length - 1) / 2)];
            const km = computeMetrics(sfKmeans(h, b, 1), h.gold, h.n, false);
            const d = computeMetrics(sfDistance(h, t), h.gold, h.n, false);
            return [pct(km.recall), pct(km.sparsity), pct(d.recall), pct(d.sparsity)];
        }""",
        t,
    )
    got = [
        page.locator(f"#{k}").text_content()
        for k in ("sf-kmeans-recall", "sf-kmeans-sparsity", "sf-recall", "sf-sparsity")
    ]
    assert got == want
    assert page.errors == []
