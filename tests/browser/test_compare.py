"""Side by side (frontend/js/compare.js, docs/compare.md) in real Chromium: the
toggle, pane B differing by head and by method, the difference's counts against the server's own
graphs and masks, the address and a share reproducing the view, linked hover, axe with it on."""

from __future__ import annotations

import struct
import urllib.parse

import pytest

from .axe import serious_violations
from .test_page import TEXT, analyse, api, wait_ready

pytestmark = pytest.mark.browser


#: The page's own modules (the same URLs main.js loaded: one store), as `await js("state.js")`.
MODULE = (
    "async () => { const js = (name) => import(document.querySelector("
    "'script[type=module][src$=\"/main.js\"]').src.replace(/main\\.js$/, name))"
)


def counts(page) -> dict[str, int]:
    """The legend's counts once the difference is shown."""
    page.wait_for_selector("#compare[data-state='ready'] #cmp-legend .cmp-count")
    d = page.locator("#cmp-legend")
    return {k: int(d.get_attribute(f"data-{k}")) for k in ("only-a", "only-b", "both")}


def gold(server_url: str, analysis_id: str, layer: int, head: int) -> set[tuple[int, int]]:
    body = api(server_url, f"/api/analyses/{analysis_id}/heads/{layer}/{head}")
    return {(i, j) for i, j, _ in body["edges"]}


def query(page) -> dict[str, str]:
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(page.url).query))


def test_compare_two_heads_counts_the_server_s_gold_graphs(page, server_url):
    analyse(page, server_url)
    assert page.locator(".cmp-body").is_hidden()  # off until asked
    page.click(".cmp-on")
    assert page.get_attribute(".cmp-on", "aria-pressed") == "true"
    got = counts(page)
    # B is another head of the same analysis (cl / ch in the address; 0 is the default, unwritten)
    page.wait_for_function("() => new URLSearchParams(location.search).get('cmp') === 'head'")
    q = query(page)
    la, ha = int(q["layer"]), int(q["head"])
    lb, hb = int(q.get("cl", 0)), int(q.get("ch", 0))
    assert (la, ha) != (lb, hb)
    assert f"L{lb} H{hb}" in page.inner_text(".cmp-pane[data-pane='B'] .cmp-title")
    a = api(server_url, "/api/analyze", {"text": TEXT})
    ga, gb = gold(server_url, a["id"], la, ha), gold(server_url, a["id"], lb, hb)
    assert got == {"only-a": len(ga - gb), "only-b": len(gb - ga), "both": len(ga & gb)}
    assert got["only-a"] + got["only-b"] > 0  # two random heads differ: the test can fail
    assert "gold graphs" in page.inner_text("#cmp-legend")
    # another B head: the counts follow
    page.select_option("#cmp-b", "1/2")
    page.wait_for_function("() => new URLSearchParams(location.search).get('cl') === '1'")
    gc = gold(server_url, a["id"], 1, 2)
    page.wait_for_function(
        "(w) => document.getElementById('cmp-legend').dataset.onlyB === String(w)",
        arg=len(gc - ga),
    )
    assert counts(page) == {"only-a": len(ga - gc), "only-b": len(gc - ga), "both": len(ga & gc)}
    assert "L1 H2" in page.inner_text(".cmp-pane[data-pane='B'] .cmp-title")
    # off again: the panes go, the address drops the comparison
    page.click(".cmp-on")
    assert page.locator(".cmp-body").is_hidden()
    page.wait_for_function("() => !new URLSearchParams(location.search).has('cmp')")


def test_compare_two_methods_counts_the_predicted_masks(page, server_url):
    analyse(page, server_url)
    page.click(".cmp-on")
    page.select_option("#cmp-mode", "method")
    page.select_option("#cmp-b", "strided")
    page.wait_for_function("() => new URLSearchParams(location.search).get('cm') === 'strided'")
    got = counts(page)
    assert "predicted masks" in page.inner_text("#cmp-legend")
    assert "strided" in page.inner_text(".cmp-pane[data-pane='B'] .cmp-title")
    # |M_A| = only A + both, |M_B| = only B + both: the server's sparsity of each setting
    a = api(server_url, "/api/analyze", {"text": TEXT})
    n = a["n"]
    q = query(page)
    params = {k[2:]: v for k, v in q.items() if k.startswith("p.")}
    ma = api(server_url, f"/api/analyses/{a['id']}/metrics/{q['layer']}/{q['head']}?"
             + urllib.parse.urlencode({"method": q["method"], **params}))  # fmt: skip
    mb = api(server_url, f"/api/analyses/{a['id']}/metrics/{q['layer']}/{q['head']}?method=strided")
    size = lambda m: round((1 - m["sparsity"]) * n * n)  # noqa: E731
    assert got["only-a"] + got["both"] == size(ma)
    assert got["only-b"] + got["both"] == size(mb)
    # the PNG: three panes, titles and the legend at 2× (1,356 × 564 CSS px)
    with page.expect_download() as dl:
        page.click(".cmp-bar button:has-text('PNG')")
    png = open(dl.value.path(), "rb").read()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", png[16:24]) == (2712, 1128)
    assert dl.value.suggested_filename.startswith("sparsescope-compare-method-")
    # A's slider moves: A's mask and the difference follow in the same frame
    before = got
    page.evaluate("""() => {
      const el = document.querySelector('[data-param="window"]');
      el.value = el.value === '1' ? '9' : '1';
      el.dispatchEvent(new Event('input', { bubbles: true }));
    }""")
    page.wait_for_function(  # |M_A| = only A + both changes
        "(b) => { const d = document.getElementById('cmp-legend').dataset;"
        " return Number(d.onlyA) + Number(d.both) !== b; }",
        arg=before["only-a"] + before["both"],
    )
    after = counts(page)
    # B (strided at its defaults) is unchanged: |M_B| = only B + both stays
    assert after["only-b"] + after["both"] == before["only-b"] + before["both"]


def test_the_address_and_a_share_reproduce_the_compare_view(page, server_url):
    q = urllib.parse.urlencode({"text": TEXT, "layer": 0, "head": 2, "cmp": "head",
                                "cl": 1, "ch": 3})  # fmt: skip
    page.goto(f"{server_url}/?{q}")
    wait_ready(page)
    got = counts(page)
    assert page.input_value("#cmp-mode") == "head"
    assert page.input_value("#cmp-b") == "1/3"
    a = api(server_url, "/api/analyze", {"text": TEXT})
    ga, gb = gold(server_url, a["id"], 0, 2), gold(server_url, a["id"], 1, 3)
    assert got == {"only-a": len(ga - gb), "only-b": len(gb - ga), "both": len(ga & gb)}
    # the Share button's state keeps it (ShareState.view flags) and /s/{id} reopens it
    state = page.evaluate(
        MODULE + "; return (await js('share.js')).shareState((await js('state.js')).get()); }"
    )
    assert state["view"]["compare"] == "head"
    assert (state["view"]["cmpLayer"], state["view"]["cmpHead"]) == (1, 3)
    share = api(server_url, "/api/share", {"state": state})
    page.goto(server_url + share["url"])
    wait_ready(page)
    assert counts(page) == got
    assert page.input_value("#cmp-b") == "1/3"


def test_linked_hover_outlines_the_cell_everywhere_and_says_both_values(page, server_url):
    analyse(page, server_url)
    page.click(".cmp-on")
    counts(page)
    page.wait_for_load_state("networkidle")  # late fetches can move the panes: read them quiet
    box = page.locator(".cmp-pane[data-pane='B'] canvas").bounding_box()
    n = api(server_url, "/api/analyze", {"text": TEXT})["n"]
    # cell (2, 5) of pane B
    page.mouse.move(box["x"] + (5.5 / n) * box["width"], box["y"] + (2.5 / n) * box["height"])
    readout = page.locator("#cmp-readout")
    page.wait_for_function("() => document.getElementById('cmp-readout').textContent !== ''")
    text = readout.inner_text()
    assert "(2) → key" in text and "(5) · A: p = " in text
    assert "A: p = " in text and "B: p = " in text
    # the main heatmap outlines the same cell: its tooltip-free crosshair is drawn on the overlay
    # (a hover there is echoed back: the readout follows the heatmap's pointer)
    cells = page.locator(".heatmap-overlay").bounding_box()
    page.mouse.move(cells["x"] + cells["width"] - 5, cells["y"] + cells["height"] - 5)
    page.wait_for_function(
        "() => /\\((\\d+)\\) → key/.exec(document.getElementById('cmp-readout').textContent)?.[1]"
        " !== '2'"
    )
    # the heatmap's keyboard cell cursor is linked too: its cell is said under the panes
    page.mouse.move(2, 2)
    page.wait_for_function("() => document.getElementById('cmp-readout').textContent === ''")
    page.focus(".heatmap-overlay")
    page.keyboard.press("ArrowDown")
    page.wait_for_function(
        "() => /\\(\\d+\\) → key .* · A: p = .* · B: p = /"
        ".test(document.getElementById('cmp-readout').textContent)"
    )


def test_axe_with_side_by_side_on(browser, server_url):
    context = browser.new_context(viewport={"width": 1440, "height": 900}, bypass_csp=True)
    page = context.new_page()
    try:
        q = urllib.parse.urlencode({"text": TEXT, "cmp": "method", "cm": "strided"})
        page.goto(f"{server_url}/?{q}")
        wait_ready(page)
        counts(page)
        assert (v := serious_violations(page)) == [], "\n".join(v)
    finally:
        context.close()


@pytest.fixture(scope="module")
def real_server_url(tmp_path_factory, real_model):
    """A live server on the real model (all-MiniLM-L6-v2, no artefact), as conftest's server_url."""
    import threading
    import time

    import uvicorn

    from sparsescope.engine.service import AnalysisService
    from sparsescope.engine.settings import Settings
    from sparsescope.web.main import create_app

    from .conftest import free_port

    settings = Settings(data_dir=tmp_path_factory.mktemp("compare-real"), warmup=False)
    service = AnalysisService(settings, model=real_model, artefact=None)
    port = free_port()
    config = uvicorn.Config(create_app(settings, service), host="127.0.0.1", port=port,
                            log_level="warning")  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the real-model server did not start within 60 s")
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


@pytest.mark.real_model
def test_two_alphas_of_the_real_model_count_the_server_s_two_analyses(page, real_server_url):
    """B = the same text at α = 2 (a second analysis): the difference is sparsemax's edges
    against entmax-1.5's, as the server's two analyses give them."""
    url = real_server_url
    q = urllib.parse.urlencode({"text": TEXT, "layer": 3, "head": 1, "cmp": "alpha", "ca": 2})
    page.goto(f"{url}/?{q}")
    wait_ready(page)
    got = counts(page)
    assert "α = 2" in page.inner_text(".cmp-pane[data-pane='B'] .cmp-title")
    a = api(url, "/api/analyze", {"text": TEXT, "alpha": 1.5})
    b = api(url, "/api/analyze", {"text": TEXT, "alpha": 2})
    ga, gb = gold(url, a["id"], 3, 1), gold(url, b["id"], 3, 1)
    assert got == {"only-a": len(ga - gb), "only-b": len(gb - ga), "both": len(ga & gb)}
    assert got["only-a"] > 0  # sparsemax drops edges entmax-1.5 keeps: the test can fail
