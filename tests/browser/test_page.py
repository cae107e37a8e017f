"""The visualiser in a real headless Chromium: analyse, open heads, move sliders, click the Pareto
plot and the POS panel, restore a view from its URL, survive hostile text, and compute exactly the
server's metrics in JavaScript."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request

import pytest

pytestmark = pytest.mark.browser

TEXT = "The chef who ran to the store was out of food, so he went back home quickly."
HOSTILE = '<img src=x onerror="window.__pwned=1"> <script>window.__pwned=2</script> & "q"'


def analyse(page, server_url: str, text: str = TEXT) -> None:
    """Open the page, type ``text``, Analyze, and wait until the open head's metrics are shown."""
    page.goto(server_url + "/")  # opens on the first visit's example
    page.fill("#text", text)
    page.click("#analyze")
    if len(text) <= 1500:  # the address names the text once its analysis is shown
        page.wait_for_function(
            "(t) => new URLSearchParams(location.search).get('text') === t", arg=text
        )
    wait_ready(page)


def wait_ready(page) -> None:
    """Until the page shows an analysed head with its metrics and no analysis is in flight (the
    first visit paints an example, and α/causal changes re-analyse on their own)."""
    # 60 s: under the whole suite's load (a container build, Ray actors) a first analysis has
    # taken more than 30 s to paint
    page.wait_for_selector(".heatmap-cells", state="visible", timeout=60_000)
    page.wait_for_function(
        """() => document.querySelector('.metric-recall .metric-value').textContent !== '–'
            && !document.getElementById('status').textContent.startsWith('Analysing')""",
        timeout=60_000,
    )


def hover_cell(page, right: int, bottom: int) -> dict:
    """Hover the heatmap ``right`` and ``bottom`` pixels in from its overlay's bottom-right corner
    (the canvas has 8 px of padding there) until the cell's tooltip shows.

    What the page fetches after its first view (the other methods' summary, the other heads) can
    move the heatmap under a still pointer; Chromium then sends the overlay a mouseleave, which
    rightly hides the tooltip. So the pointer is placed once the page is quiet, and placed again
    (one pixel over, a new mousemove) if a late layout change took the tooltip away."""
    page.wait_for_load_state("networkidle")
    overlay = page.locator(".heatmap-overlay")
    tip = page.locator(".tooltip")
    for attempt in range(5):
        box = overlay.bounding_box()  # read when quiet: the layout may have changed
        at = {"x": box["width"] - right - attempt, "y": box["height"] - bottom}
        overlay.hover(position=at)
        try:
            tip.wait_for(state="visible", timeout=3_000)
            return at  # where the pointer is, relative to the overlay
        except Exception:  # playwright's TimeoutError: try again from a quiet page
            page.wait_for_load_state("networkidle")
    tip.wait_for(state="visible", timeout=3_000)  # fails with Playwright's own message
    return at


def metric(page, name: str) -> str:
    return page.locator(f".metric-{name} .metric-value").inner_text()


def heatmap_pixels(page) -> str:
    """The heatmap's cell canvas as a data URL (changes iff anything painted changed)."""
    return page.evaluate("document.querySelector('.heatmap-cells').toDataURL()")


def set_slider(page, name: str, value) -> None:
    """Move a parameter slider as a drag does: set the value, fire `input`, wait two frames."""
    page.evaluate(
        """([name, value]) => {
            const el = document.querySelector(`[data-param="${name}"]`);
            el.value = String(value);
            el.dispatchEvent(new Event('input', {bubbles: true}));
            return new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
        }""",
        [name, value],
    )


def api(server_url: str, path: str, body: dict | None = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        server_url + path, data=data, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)


def test_analyze_open_head_and_move_a_slider(page, server_url):
    analyse(page, server_url)
    tiles = page.locator(".tile")
    analysis = api(server_url, "/api/analyze", {"text": TEXT})
    assert tiles.count() == analysis["layers"] * analysis["heads"]
    assert page.locator(".chip").count() == analysis["n"]
    assert analysis["artefact"] and page.locator("#artefact-hint").is_hidden()  # the shipped one

    # open another head: it is marked in the grid and named in the title
    tiles.nth(analysis["heads"] + 1).click()
    page.wait_for_function(
        "() => document.getElementById('head-title').textContent.includes('head 1 ·')"
    )
    assert "Layer 1" in page.inner_text("#head-title")
    assert "open" in (tiles.nth(analysis["heads"] + 1).get_attribute("class") or "")
    assert page.locator(".tile.open").count() == 1

    # a method and its sliders, built from the API's ParamSpecs
    page.select_option("#method", "strided")
    page.wait_for_selector('[data-param="stride"]')
    spec = next(m for m in analysis["methods"] if m["name"] == "strided")
    stride = next(p for p in spec["params"] if p["name"] == "stride")
    slider = page.locator('[data-param="stride"]')
    assert float(slider.get_attribute("max")) == stride["max"]
    set_slider(page, "stride", 1)
    set_slider(page, "window", 0)
    before = (metric(page, "recall"), metric(page, "sparsity"), heatmap_pixels(page))
    set_slider(page, "stride", 6)
    after = (metric(page, "recall"), metric(page, "sparsity"), heatmap_pixels(page))
    assert before[0] != after[0] or before[1] != after[1]
    assert before[2] != after[2], "the heatmap was not repainted"
    # the slider update was measured
    assert page.evaluate("performance.getEntriesByName('slider-update').length") > 0
    # ... and the URL is a shareable link of this view
    page.wait_for_function("() => location.search.includes('p.stride=6')")
    q = urllib.parse.parse_qs(page.evaluate("location.search")[1:])
    assert q["method"] == ["strided"] and q["layer"] == ["1"] and q["head"] == ["1"]
    assert q["text"] == [TEXT]


def test_hover_shows_the_cell_and_click_locks_a_row(page, server_url):
    analyse(page, server_url)
    overlay = page.locator(".heatmap-overlay")
    corner = hover_cell(page, right=12, bottom=12)  # the bottom-right cell: last query, last key
    tip = page.locator(".tooltip")
    text = tip.inner_text()
    assert "query" in text and "key" in text and "[SEP]" in text and "p" in text
    assert "kept" in text or "missed" in text or "predicted" in text
    overlay.click(position=corner)
    page.wait_for_function("() => location.search.includes('row=')")
    assert page.locator(".chip.locked").count() == 1


def test_pareto_point_click_applies_its_setting(page, server_url):
    analyse(page, server_url)
    page.wait_for_selector("#pareto .scatterlayer .trace", timeout=60_000)
    analysis_id = api(server_url, "/api/analyze", {"text": TEXT})["id"]
    q = urllib.parse.parse_qs(page.evaluate("location.search")[1:])  # the open head
    layer, head = q["layer"][0], q["head"][0]
    pareto = api(server_url, f"/api/analyses/{analysis_id}/pareto?layer={layer}&head={head}")
    # what the page fetches after its first view (the other methods' summary, the other heads)
    # can move the panels above the plot: the point's position is read once it is all in
    page.wait_for_load_state("networkidle")
    page.locator("#pareto").scroll_into_view_if_needed()
    # the sweep point farthest from every other one, so the click cannot land on a neighbour
    data = page.evaluate(
        """() => {
            const gd = document.getElementById('pareto');
            const size = gd._fullLayout._size;
            const [x0, x1] = gd.layout.xaxis.range;
            const [y0, y1] = gd.layout.yaxis.range;
            const box = gd.getBoundingClientRect();
            const pts = gd.data.filter((t) => t.visible !== false)
              .flatMap((t) => t.x.map((x, j) => ({
              x: box.left + size.l + (x - x0) / (x1 - x0) * size.w,
              y: box.top + size.t + (1 - (t.y[j] - y0) / (y1 - y0)) * size.h,
              index: t.customdata[j],
            })));
            const gap = (p) => Math.min(...pts.filter((q) => q.index !== p.index)
              .map((q) => Math.hypot(q.x - p.x, q.y - p.y)));
            return pts.reduce((best, p) => (gap(p) > gap(best) ? p : best));
        }"""
    )
    point = pareto["points"][data["index"]]
    page.mouse.move(data["x"], data["y"])
    page.mouse.click(data["x"], data["y"])
    page.wait_for_function(f"() => document.getElementById('method').value === '{point['method']}'")
    for name, value in point["params"].items():
        if isinstance(value, bool):
            assert page.is_checked(f'[data-param="{name}"]') == value, name
        elif isinstance(value, str):
            assert page.input_value(f'[data-param="{name}"]') == value, name
        else:
            assert float(page.input_value(f'[data-param="{name}"]')) == value, name
    # the page's own metrics for that setting are the point's (same head, same definitions)
    page.wait_for_function(
        "() => document.querySelector('.metric-recall .metric-value').textContent === "
        f"'{point['recall']:.3f}'"
    )
    assert metric(page, "sparsity") == f"{point['sparsity']:.3f}"


def test_cluster_click_highlights_its_tokens(page, server_url):
    analyse(page, server_url)
    page.select_option("#method", "sf-kmeans")
    page.wait_for_selector(".pos-bar")
    bars = page.locator(".pos-group").first.locator(".pos-bar")
    # a cluster that holds some tokens
    counts = [int(bars.nth(k).locator(".pos-count").inner_text()[2:]) for k in range(bars.count())]
    c = next(k for k, v in enumerate(counts) if v > 0)
    assert page.locator(".chip.in-cluster").count() == 0
    bars.nth(c).click()
    page.wait_for_function("() => document.querySelectorAll('.chip.in-cluster').length > 0")
    assert "selected" in bars.nth(c).get_attribute("class")
    assert page.locator(".chip.in-cluster").count() >= counts[c]
    page.wait_for_function(f"() => location.search.includes('cluster={c}')")
    # the heatmap marks them too (ticks next to the labels are painted on the overlay)
    before = page.evaluate("document.querySelector('.heatmap-overlay').toDataURL()")
    bars.nth(c).click()  # unselect
    page.wait_for_function("() => document.querySelectorAll('.chip.in-cluster').length === 0")
    assert page.evaluate("document.querySelector('.heatmap-overlay').toDataURL()") != before


def test_hostile_text_is_shown_as_text_and_runs_nothing(page, server_url):
    analyse(page, server_url, HOSTILE)
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#tokens img, #tokens script, #heatmap img").count() == 0
    chips = page.locator(".chip").all_inner_texts()
    assert {"<", ">", "&", "script", "/"} <= set(chips)
    # hover a cell: the tooltip shows the token text literally
    hover_cell(page, right=12, bottom=30)
    assert page.locator(".tooltip img, .tooltip script").count() == 0
    # a shared link carrying the text restores it as text, too
    page.wait_for_function("() => location.search.includes('text=')")
    page.goto(page.url)
    wait_ready(page)
    assert page.input_value("#text") == HOSTILE
    assert page.evaluate("window.__pwned") is None


def test_url_restores_the_view(page, server_url):
    q = urllib.parse.urlencode(
        {
            "text": TEXT,
            "alpha": "1.5",
            "layer": "1",
            "head": "2",
            "method": "bigbird",
            "p.random_keys": "2",
            "p.window": "5",
            "p.globals": "0",
            "row": "3",
            "hide": "1",
        }
    )
    page.goto(f"{server_url}/?{q}")
    wait_ready(page)
    assert page.input_value("#text") == TEXT
    assert page.input_value("#method") == "bigbird"
    assert page.input_value('[data-param="random_keys"]') == "2"
    assert page.input_value('[data-param="window"]') == "5"
    assert not page.is_checked('[data-param="globals"]')
    assert "Layer 1 · head 2" in page.inner_text("#head-title")
    assert page.locator(".chip.locked").count() == 1
    assert page.locator(".chip.special").first.is_hidden()


def test_errors_are_shown_next_to_their_control(page, server_url):
    page.goto(server_url + "/")
    page.fill("#text", "   ")
    page.click("#analyze")
    err = page.locator('[data-error-for="text"]')
    err.wait_for(state="visible")
    assert "text" in err.inner_text().lower()
    page.fill("#text", TEXT)
    page.check('input[name="alpha"][value="free"]')
    page.fill("#alpha-free", "3")
    page.click("#analyze")
    err = page.locator('[data-error-for="alpha"]')
    err.wait_for(state="visible")
    assert "alpha" in err.inner_text() and "[1, 2]" in err.inner_text()
    assert page.locator('[data-error-for="text"]').is_hidden()


PARITY_CASES = [
    ("window", {"window": 5, "globals": True}),
    ("fixed", {"stride": 4, "c": 2, "part": "union", "spread": True, "window": 0, "globals": 0}),
    ("strided", {"stride": 3, "part": "A2", "window": 3, "globals": False}),
    ("bigbird", {"random_keys": 4, "window": 3, "globals": True}),
    ("longformer", {"n_globals": 3, "window": 5, "globals": False}),
    ("reformer", {"n_buckets": 4, "rounds": 2, "window": 0, "globals": False}),
    ("routing", {"n_clusters": 4, "window": 1, "globals": False}),
    ("sf-distance", {"t": 2.5, "window": 0, "globals": False}),
    ("sf-quantization", {"n_buckets": 4, "window": 0, "globals": True}),
    ("sf-kmeans", {"n_clusters": 4, "top_k": 2, "window": 0, "globals": False}),
    # the arena (definitions §8): arena.js against the server, in the browser
    ("streaming", {"sinks": 2, "recent": 3, "window": 0, "globals": False}),
    ("topk", {"k": 3, "window": 0, "globals": True}),
    ("topp", {"p": 0.7, "window": 0, "globals": False}),
    ("h2o", {"recent": 1, "k": 3, "window": 0, "globals": False}),
    ("moba", {"block": 16, "topk": 1, "window": 3, "globals": False}),
    ("quest", {"page": 16, "topk": 1, "window": 0, "globals": False}),
    ("xattention", {"block": 16, "stride": 4, "tau": 0.5, "window": 0, "globals": False}),
    ("vertical-slash", {"last": 4, "verticals": 2, "slashes": 3, "window": 0, "globals": False}),
    ("sparge", {"block": 16, "theta": 0.3, "tau": 0.6, "window": 0, "globals": False}),
]


@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
def test_js_metrics_equal_the_servers(page, server_url, causal):
    """methods.js + metrics.js against GET /metrics for every method, on two heads: equal to
    the last bit (same definitions, same tie rules, same hashed random draws)."""
    page.goto(server_url + "/")
    analysis = api(server_url, "/api/analyze", {"text": TEXT, "causal": causal})
    got = page.evaluate(
        """async ([id, causal, cases]) => {
            const { prepareHead } = await import('/js/head.js');
            const { predict } = await import('/js/methods.js');
            const { computeMetrics } = await import('/js/metrics.js');
            const out = [];
            const get = async (path) => (await fetch(`/api/analyses/${id}/${path}`)).json();
            for (const [layer, head] of [[0, 0], [1, 3]]) {
              const h = prepareHead(await get(`heads/${layer}/${head}`), causal);
              for (const [method, params] of cases) {
                const js = computeMetrics(predict(h, method, params), h.gold, h.n, h.causal,
                  undefined, h.probs);
                const q = new URLSearchParams({ method, ...params });
                const py = await get(`metrics/${layer}/${head}?${q}`);
                out.push({ layer, head, method, js, py });
              }
            }
            return out;
        }""",
        [analysis["id"], causal, PARITY_CASES],
    )
    assert len(got) == 2 * len(PARITY_CASES)
    for row in got:
        for key in ("recall", "sparsity", "exact", "precision"):
            assert row["js"][key] == row["py"][key], (row["method"], row["layer"], row["head"], key)
        # mass recall: a float sum in another order, equal to ~1e-15 (docs/methods.md)
        assert abs(row["js"]["mass_recall"] - row["py"]["mass_recall"]) <= 1e-12, row["method"]


def test_rng_port_reproduces_the_python_test_vectors(page, server_url):
    """rng.js is bit-identical to sparse_core/rng.py (the vectors of its docstring)."""
    from sparse_core.rng import hash_u32, hash_uniform

    page.goto(server_url + "/")
    cases = [[0], [1, 2, 3], [7, 0, 5, 2], [-5, 3], [2**32 + 9, 2**31], [1005, 1, 511, 19]]
    got = page.evaluate(
        """async (cases) => {
            const { hashU32, hashUniform } = await import('/js/rng.js');
            return cases.map((c) => [hashU32(...c), hashUniform(...c)]);
        }""",
        cases,
    )
    assert [g[0] for g in got[:3]] == [0x01FCE552, 0xA6FDE042, 0xFD7B6CA4]
    assert got == [[hash_u32(*c), hash_uniform(*c)] for c in cases]


def test_a_text_of_unknown_tokens_only_says_so_next_to_the_text(page, server_url, tmp_path):
    """Emoji only: the true message (not "empty"), next to the text box."""
    page.goto(server_url + "/")
    page.fill("#text", "\U0001f642\U0001f680 \U0001f9ea")
    page.click("#analyze")
    err = page.locator('[data-error-for="text"]')
    err.wait_for(state="visible")
    assert "none of this text's tokens is in the model's vocabulary" in err.inner_text()
    assert "empty" not in err.inner_text()
    page.screenshot(path=tmp_path / "unknown-tokens.png", full_page=False)
