"""The page at n = 4,096 in headless Chromium (a tiny random model with 4,096 positions): the
heatmap paints through the pooled level of detail, the token search jumps to a word's row, the
tile pyramid's overview holds every gold edge of the head the page shows. Every method of the
picker is scored on a long head recorded sparse (CSR), as the server keeps any text whose dense P
would not fit: a text of about 1,000 tokens with the model's dense limit lowered (a sixteenth of
the work of n = 4,096 per method, the same code path)."""

from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path

import pytest

from .conftest import free_port

N = 4096
#: Words of the every-method text: about 1,000 tokens (each word is several).
SPARSE_WORDS = 280
#: Where the long page's screenshot goes (looked at by a person, not compared).
SHOTS = Path(os.environ.get("SPARSESCOPE_SHOTS", tempfile.gettempdir()))


@pytest.fixture(scope="module")
def long_server(tmp_path_factory):
    """The live server on the tiny long model: (its URL, the model, the service)."""
    import uvicorn

    from sparse_core.testing import tiny_model
    from sparsescope.engine.service import AnalysisService
    from sparsescope.engine.settings import Settings
    from sparsescope.web.main import create_app

    model = tiny_model(layers=1, heads=2, max_positions=N)
    # the gate's wait estimate is sized for a full model; the tests' own fetches of a head wait
    # behind the page's sweeps instead of being refused (503) on this tiny one
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("long"),
        warmup=False,
        max_tokens=N,
        compute_max_wait_s=1e9,
    )
    service = AnalysisService(settings, model=model)
    app = create_app(settings, service)
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{server.config.port}", model, service
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture(scope="module")
def long_url(long_server):
    return long_server[0]


def long_text() -> str:
    """Over 4,096 tokens of varied words (cut to 4,096 by truncate), with one rare word."""
    words = [f"w{k % 251}x" for k in range(4400)]
    words[300] = "zebra"  # inside the first 4,096 tokens (a word is several tokens)
    return " ".join(words)


@pytest.fixture(scope="module")
def long_page(browser, long_url):
    ctx = browser.new_context(viewport={"width": 1440, "height": 900})
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.goto(long_url + "/", timeout=180_000)
    body = pg.evaluate(
        """async (text) => (await fetch('/api/analyze', {method: 'POST',
             headers: {'Content-Type': 'application/json'},
             body: JSON.stringify({text, truncate: true})})).json()""",
        long_text(),
    )
    assert body["n"] == N, body
    pg.goto(f"{long_url}/?id={body['id']}&layer=0&head=1", timeout=180_000)
    pg.wait_for_function(
        "() => performance.getEntriesByName('heatmap-head-paint').length > 0", timeout=240_000
    )
    pg.errors = errors
    # the analysis' cache id: the address does not keep it (a text this long is saved as a
    # permanent /s/ link, which the address then names: session.js)
    pg.analysis_id = body["id"]
    yield pg
    ctx.close()
    assert not errors, errors


def test_long_head_paints_pooled(long_page):
    hm = long_page.locator("#heatmap")
    assert hm.get_attribute("data-lod") == "pooled"
    assert hm.get_attribute("data-zoom") == "1.00"
    # the cells canvas shows coloured (non-white) pixels across the whole matrix
    share = long_page.evaluate(
        """() => {
          const c = document.querySelector('.heatmap-cells');
          const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
          let coloured = 0;
          for (let k = 0; k < d.length; k += 4) if (d[k] < 235 || d[k + 2] < 235) coloured++;
          return coloured / (c.width * c.height);
        }"""
    )
    assert share > 0.2, share


def test_overview_tile_holds_every_edge_of_the_head(long_page):
    got = long_page.evaluate(
        """async (id) => {
          const r = await fetch(`/api/analyses/${id}/heads/0/1`);
          const head = await r.json();
          if (r.status !== 200) return { status: r.status, error: head };
          const top = head.lod.top;
          const ov = await (await fetch(`/api/analyses/${id}/heads/0/1/tiles/${top}/0/0`)).json();
          const f = ov.factor, listed = new Set(ov.i.map((a, k) => a * 100000 + ov.j[k]));
          const lost = head.edges.filter(([i, j]) => !listed.has(Math.floor(i / f) * 100000
            + Math.floor(j / f))).length;
          const bad = await fetch(`/api/analyses/${id}/heads/0/1/tiles/${top + 1}/0/0`);
          const counted = ov.count.reduce((a, b) => a + b, 0);
          return { cells: ov.cells, edges: head.edges.length, counted, lost,
                   badStatus: bad.status, badField: (await bad.json()).field };
        }""",
        long_page.analysis_id,
    )
    assert "error" not in got, got
    assert max(got["cells"]) <= 256
    assert got["lost"] == 0 and got["counted"] == got["edges"] > 0
    assert (got["badStatus"], got["badField"]) == (404, "level")


def test_token_search_jumps_to_the_word(long_page):
    pg = long_page
    pg.fill(".token-search-input", "zebra")
    hits = pg.locator(".token-hit")
    hits.first.wait_for()
    assert hits.count() == 1
    assert pg.locator(".token-search-count").text_content() == "1 match"
    k = int(hits.first.get_attribute("data-token"))
    assert pg.evaluate("() => document.querySelector('.token-hit strong').textContent") == "zebra"
    hits.first.click()
    pg.wait_for_function("() => Number(document.querySelector('#heatmap').dataset.zoom) > 10")
    pg.wait_for_function(f"() => new URLSearchParams(location.search).get('row') === '{k}'")
    # zoomed in, the cells are big: no pooling in the visible region (f = 1)
    assert pg.locator("#heatmap").get_attribute("data-lod") == "pooled"
    # user text is only text: a search for markup lists nothing and injects nothing
    pg.fill(".token-search-input", "<img src=x onerror=alert(1)>")
    assert pg.locator(".token-search-count").text_content() == "0 matches"
    assert pg.locator(".token-search img").count() == 0


def test_long_head_comes_graph_first_then_methods(long_page):
    """The long head is drawn from its packed graph (?part=graph), then its methods' part
    (?part=methods) arrives and the mask is computed: no 'loading' note stays behind."""
    pg = long_page
    pg.wait_for_function(
        """() => performance.getEntriesByType('resource').some((e) =>
             e.name.includes('/heads/0/1?part=methods'))""",
        timeout=240_000,
    )
    names = pg.evaluate(
        """() => performance.getEntriesByType('resource').map((e) => e.name)
             .filter((n) => n.includes('/heads/0/1') && !n.includes('/tiles/'))"""
    )
    own = [n for n in names if "part=" in n]  # the test's own fetches have no part
    assert own[0].endswith("?part=graph") and own[1].endswith("?part=methods"), names
    # the metrics panel's note of a method waiting for that part goes once the part is in
    pg.wait_for_function(
        """() => ![...document.querySelectorAll('p.field-error')]
             .some((e) => !e.hidden && e.textContent.includes('loading'))""",
        timeout=60_000,
    )
    assert pg.evaluate("() => document.querySelector('#heatmap').dataset.lod") == "pooled"


def test_the_flow_waits_for_the_long_heads_graph(long_page):
    """The information flow of a long text is asked for after the open head's graph has arrived:
    its request does not compete with the first paint's (frontend/js/flow.js)."""
    pg = long_page
    pg.wait_for_function(
        "() => performance.getEntriesByType('resource').some((e) => e.name.includes('/flow?'))",
        timeout=240_000,
    )
    graph, flow = pg.evaluate(
        """() => {
          const rs = performance.getEntriesByType('resource');
          const g = rs.find((e) => e.name.includes('/heads/0/1?part=graph'));
          const f = rs.find((e) => e.name.includes('/flow?'));
          return [g.responseEnd, f.startTime];
        }"""
    )
    assert flow >= graph, (graph, flow)


@pytest.fixture(scope="module")
def sparse_page(long_page, long_server):
    """A second page of the same browser, on a text of about 1,000 tokens that the server
    recorded sparse (CSR) like any long text (the model's dense limit is 0 for its forward)."""
    url, model, service = long_server
    pg = long_page.context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.goto(url + "/", timeout=180_000)
    text = " ".join(f"w{k % 251}x" for k in range(SPARSE_WORDS))
    model.dense_max_bytes = 0
    try:
        body = pg.evaluate(
            """async (text) => (await fetch('/api/analyze', {method: 'POST',
                 headers: {'Content-Type': 'application/json'},
                 body: JSON.stringify({text})})).json()""",
            text,
        )
    finally:
        model.dense_max_bytes = None
    assert 512 < body["n"] < N, body
    assert not service.get(body["id"]).out.attn.is_dense  # the sparse P, as at n = 4,096 of MiniLM
    pg.goto(f"{url}/?id={body['id']}&layer=0&head=1", timeout=180_000)
    pg.wait_for_function(
        "() => performance.getEntriesByName('heatmap-head-paint').length > 0", timeout=240_000
    )
    pg.analysis_id = body["id"]
    yield pg
    pg.close()
    assert not errors, errors


def test_every_method_scores_the_long_head_as_the_server_does(sparse_page):
    """Every method of the picker on a long head recorded sparse: the page's metrics panel shows
    its figures, the page's JS twins (methods.js + metrics.js, from the head payload) equal the
    server's GET …/metrics (read from the sparse P), and the summary holds the method for every
    head; nothing says the text is too long."""
    pg = sparse_page
    names = pg.evaluate(
        """() => [...document.querySelectorAll('#method option')]
             .filter((o) => !o.disabled).map((o) => o.value)"""
    )
    assert len(names) >= 16, names
    got = pg.evaluate(
        """async ([names, id]) => {
            const { prepareHead } = await import('/js/head.js');
            const { predict } = await import('/js/methods.js');
            const { computeMetrics } = await import('/js/metrics.js');
            // as a client does: a 503 (the compute gate is full while the page preloads) is
            // asked again after its Retry-After
            const get = async (path) => {
              for (let i = 0; ; i += 1) {
                const r = await fetch(`/api/analyses/${id}/${path}`);
                if (r.status !== 503 || i === 20) return { status: r.status, body: await r.json() };
                const wait = Math.min(10, Number(r.headers.get('Retry-After') || 1));
                await new Promise((ok) => setTimeout(ok, 1000 * wait));
              }
            };
            const head = await get('heads/0/1');
            if (head.status !== 200) {
              throw new Error(`head: ${head.status} ${JSON.stringify(head.body)}`);
            }
            const h = prepareHead(head.body, false);
            const summary = (await get('summary')).body;
            const specs = (await (await fetch(`/api/methods?n=${h.n}`)).json()).methods;
            const out = [];
            for (const method of names) {
              const py = await get(`metrics/0/1?method=${method}`);
              const ps = {};
              for (const p of specs.find((x) => x.name === method).params) ps[p.name] = p.default;
              const js = py.status === 200
                ? computeMetrics(predict(h, method, ps), h.gold, h.n, h.causal, undefined, h.probs)
                : null;
              out.push({ method, status: py.status, py: py.body, js,
                         inSummary: summary.every((row) => method in row.methods) });
            }
            return out;
        }""",
        [names, pg.analysis_id],
    )
    for row in got:
        assert row["status"] == 200, row
        assert row["inSummary"], row["method"]
        for key in ("recall", "sparsity", "exact", "precision"):
            assert row["js"][key] == row["py"][key], (row["method"], key)
    for name in names:  # the panel shows each one's figures, with no error note
        pg.select_option("#method", name)
        pg.wait_for_function(
            """() => document.querySelector('.metric-recall .metric-value').textContent !== '–'
                 && ![...document.querySelectorAll('p.field-error')].some((e) => !e.hidden)""",
            timeout=120_000,
        )
    text = pg.inner_text("body").lower()
    assert "too long" not in text and "dense p" not in text
    pg.select_option("#method", "h2o")
    pg.wait_for_timeout(500)
    pg.screenshot(path=str(SHOTS / "long-page-sparse-h2o.png"))
