"""What a reader sees without hovering, in real Chromium: side by side's panes carry token labels on
their axes while they fit and their full titles (a long model id wrapped, never cut), B's control
is there at once; an address with only a text opens on the landing example's view (its layer,
head, method and parameters), explicit values still winning; on a touch screen the heatmap's
hint speaks of taps, and freeing a row that a tap zoomed in on goes back to the whole matrix."""

from __future__ import annotations

import threading
import time
import urllib.parse

import pytest

from .conftest import free_port, random_artefact
from .test_compare import counts
from .test_page import TEXT, wait_ready

pytestmark = pytest.mark.browser

SHORT = "The chef ran to the store."
#: A second model's id as long as a hub id: its pane's title must still be read in full.
LONG_ID = "sentence-transformers/all-MiniLM-L6-v2-a-second-tiny-random-model"

#: Each pane's labels: [pane, row texts, column texts, their boxes and the canvas's box].
PANE_LABELS = """() => [...document.querySelectorAll('.cmp-pane')].map((f) => {
  const box = (e) => { const r = e.getBoundingClientRect();
    return {x: r.x, y: r.y, w: r.width, h: r.height}; };
  const spans = (sel) => [...f.querySelectorAll(sel)].filter((s) => s.getClientRects().length);
  return {
    pane: f.dataset.pane,
    rows: spans('.cmp-rows span').map((s) => s.textContent),
    cols: spans('.cmp-cols span').map((s) => s.textContent),
    rowBoxes: spans('.cmp-rows span').map(box),
    colBoxes: spans('.cmp-cols span').map(box),
    canvas: box(f.querySelector('canvas')),
    fig: box(f),
  };
})"""


#: The heatmap's zoom in the address ('' at the whole matrix).
ZOOM = "(new URLSearchParams(location.search).get('zoom') || '')"


def query(page) -> dict[str, str]:
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(page.url).query))


def tokens_of(page) -> list[str]:
    return page.evaluate(
        "() => [...document.querySelectorAll('#tokens [data-token]')].map((c) => c.textContent)"
    )


def open_text(page, url: str, text: str = SHORT, **q: str) -> None:
    page.goto(f"{url}/?{urllib.parse.urlencode({'text': text, **q})}")
    wait_ready(page)


def check_labels(panes: list[dict], tokens: list[str], panes_wanted=("A", "B")) -> None:
    """Every token labelled on both axes of each wanted pane (a short text: one label per token),
    rows left of the matrix, columns above it, each label on its own row / column."""
    by = {p["pane"]: p for p in panes}
    for name in panes_wanted:
        p = by[name]
        assert p["rows"] == tokens, (name, p["rows"], tokens)
        assert p["cols"] == tokens, (name, p["cols"], tokens)
        cv = p["canvas"]
        assert cv["w"] >= 100, (name, cv)  # a matrix still worth reading beside its labels
        for r in p["rowBoxes"]:
            assert r["x"] >= p["fig"]["x"] - 0.5 and r["x"] + r["w"] <= cv["x"] + 0.5, (name, r, cv)
            assert cv["y"] - 1 <= r["y"] + r["h"] / 2 <= cv["y"] + cv["h"] + 1, (name, r, cv)
        for c in p["colBoxes"]:
            assert c["y"] + c["h"] <= cv["y"] + 0.5, (name, c, cv)
            assert cv["x"] - 1 <= c["x"] + c["w"] / 2 <= cv["x"] + cv["w"] + 1, (name, c, cv)
        ys = [r["y"] + r["h"] / 2 for r in p["rowBoxes"]]
        assert ys == sorted(ys) and len(set(round(y) for y in ys)) == len(ys), (name, ys)


@pytest.mark.parametrize("size", [(1440, 900), (1280, 720)])
def test_side_by_side_panes_carry_token_labels_on_both_axes(page, server_url, size):
    page.set_viewport_size({"width": size[0], "height": size[1]})
    open_text(page, server_url)
    # B's control is there at once: picking B turns the comparison on
    assert page.locator("#cmp-b").is_visible()
    page.select_option("#cmp-b", "1/2")
    counts(page)
    tokens = tokens_of(page)
    assert 5 <= len(tokens) <= 16, tokens
    panes = page.evaluate(PANE_LABELS)
    check_labels(panes, tokens, ("A", "B", "D"))
    # B's labels are B's own analysis' tokens, the same text here
    page.select_option("#cmp-mode", "alpha")
    counts(page)
    check_labels(page.evaluate(PANE_LABELS), tokens)


def test_a_long_text_labels_every_few_tokens_by_the_heatmap_rule(page, server_url):
    """A text too long for one label per token: every step-th (step = ⌈LABEL_PX / cell⌉, the
    main heatmap's rule), evenly spaced, none overlapping."""
    page.set_viewport_size({"width": 1440, "height": 900})
    open_text(page, server_url, " ".join([TEXT] * 4), cmp="head", cl="1", ch="2")
    counts(page)
    n = len(tokens_of(page))
    a = next(p for p in page.evaluate(PANE_LABELS) if p["pane"] == "A")
    cell = a["canvas"]["w"] / n
    step = -(-14 // cell) if cell < 14 else 1  # LABEL_PX = 14 (heatmap-layout.js)
    assert step > 1
    assert len(a["rows"]) == -(-n // step), (len(a["rows"]), n, step)
    ys = [r["y"] for r in a["rowBoxes"]]
    h = max(r["h"] for r in a["rowBoxes"])
    assert all(b - t >= h - 0.5 for t, b in zip(ys, ys[1:], strict=False)), ys  # none overlap


def test_a_pane_too_narrow_for_labels_goes_without(page, server_url):
    """On a phone the panes stack, each as wide as the page: labelled; the labels never squeeze
    a matrix below a readable size (compare-paint.js LABELLED_MIN)."""
    page.set_viewport_size({"width": 390, "height": 844})
    open_text(page, server_url, cmp="head", cl="1", ch="2")
    counts(page)
    tokens = tokens_of(page)
    check_labels(page.evaluate(PANE_LABELS), tokens, ("A", "B", "D"))


@pytest.fixture(scope="module")
def two_models_url(tmp_path_factory, tiny_model):
    """A live server with two models, the second with a hub-length id (model compare)."""
    import uvicorn

    from sparse_core.testing import tiny_model as make
    from sparsescope.engine.service import AnalysisService
    from sparsescope.engine.settings import Settings
    from sparsescope.engine.slot import ModelSlot
    from sparsescope.web.main import create_app

    second = make(seed=1)
    second.model_id = LONG_ID
    settings = Settings(data_dir=tmp_path_factory.mktemp("two-models"), warmup=False)
    slots = [
        ModelSlot(settings, model=tiny_model, artefact=random_artefact(tiny_model)),
        ModelSlot(settings, model=second, use_artefact=False),
    ]
    service = AnalysisService(settings, slots=slots)
    port = free_port()
    app = create_app(settings, service)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the two-model test server did not start within 30 s")
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


@pytest.mark.parametrize("size", [(1280, 720), (1440, 900), (1024, 768)])
def test_model_compare_titles_are_read_in_full(page, two_models_url, size):
    page.set_viewport_size({"width": size[0], "height": size[1]})
    open_text(page, two_models_url, cmp="model", cmo=LONG_ID)
    counts(page)
    titles = page.evaluate(
        """() => [...document.querySelectorAll('.cmp-title')].map((t) => ({
          text: t.textContent, sw: t.scrollWidth, cw: t.clientWidth, sh: t.scrollHeight,
          ch: t.clientHeight, ellipsis: getComputedStyle(t).textOverflow}))"""
    )
    assert LONG_ID in titles[1]["text"], titles
    for t in titles:
        assert t["sw"] <= t["cw"] and t["sh"] <= t["ch"] + 1, t  # nothing cut or scrolled away
        assert t["ellipsis"] != "ellipsis", t
    # the title is shown in full: its words lie inside the pane
    box = page.locator(".cmp-pane[data-pane='B'] .cmp-title").bounding_box()
    fig = page.locator(".cmp-pane[data-pane='B']").bounding_box()
    assert box["x"] + box["width"] <= fig["x"] + fig["width"] + 0.5
    # B's own model's tokens label its axes; the three matrices stand on one line
    panes = page.evaluate(PANE_LABELS)
    check_labels(panes, tokens_of(page))
    tops = [round(p["canvas"]["y"]) for p in panes]
    assert max(tops) - min(tops) <= 1, tops


def test_an_address_with_only_a_text_opens_on_the_landing_example_s_view(
    page, server_url, tiny_model
):
    from sparsescope.web.gallery import get_example
    from sparsescope.web.routes.pages import HOME_EXAMPLE

    ex = get_example(HOME_EXAMPLE).state
    cfg = tiny_model.config
    # the nearest layer and head the served model has (the page clamps them)
    layer, head = min(ex.layer, cfg.num_layers - 1), min(ex.head, cfg.num_heads - 1)
    assert (layer, head) != (0, 0)  # the schema's defaults: the test can fail

    open_text(page, server_url)
    # the page writes the address once the view has been still for URL_SETTLE_MS (session.js)
    page.wait_for_function("() => new URLSearchParams(location.search).has('layer')")
    q = query(page)
    assert (int(q["layer"]), int(q["head"])) == (layer, head), q
    assert q["method"] == ex.method
    assert ex.params  # the example's own parameters (window 5 with globals): not the defaults
    example_params = {
        f"p.{k}": {True: "1", False: "0"}[v] if isinstance(v, bool) else str(v)
        for k, v in ex.params.items()
    }
    assert {k: q.get(k) for k in example_params} == example_params, q
    assert f"Layer {layer} · head {head}" in page.inner_text(".panel-heatmap h2")
    assert q["text"] == SHORT  # the address's own text, not the example's
    assert "row" not in q  # the example's locked row belongs to its own text

    # the address's own values win, field by field
    open_text(page, server_url, layer="0", head="2")
    q = query(page)
    assert (q["layer"], q["head"]) == ("0", "2"), q
    open_text(page, server_url, method="strided")
    q = query(page)
    assert q["method"] == "strided", q  # at its own defaults, not the example's parameters
    assert {k: q.get(k) for k in example_params} != example_params, q


def test_the_first_visit_still_opens_the_example(page, server_url):
    """The landing page itself (no text in the address) is unchanged: the example and its text."""
    from sparsescope.web.gallery import get_example
    from sparsescope.web.routes.pages import HOME_EXAMPLE

    ex = get_example(HOME_EXAMPLE).state
    page.goto(server_url + "/")
    wait_ready(page)
    assert page.input_value("#text") == ex.text


def test_a_touch_screen_hint_says_what_works_there(browser, server_url):
    ctx = browser.new_context(
        viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True
    )
    try:
        page = ctx.new_page()
        open_text(page, server_url, " ".join([TEXT] * 3))
        hint = page.locator(".panel-heatmap .hint:visible")
        assert hint.count() == 1
        words = hint.inner_text().lower()
        assert "tap" in words
        for said in ("hover", "wheel", "+/−", "arrow", "esc", "drag"):
            assert said not in words, said
        # what it says works: a tap on small cells locks the row and zooms there …
        cells = page.locator(".heatmap-overlay")
        box = cells.bounding_box()
        cells.tap(position={"x": box["width"] * 0.6, "y": box["height"] * 0.6})
        page.wait_for_function("() => new URLSearchParams(location.search).get('row') !== null")
        page.wait_for_function(f"() => {ZOOM} !== ''")
        # … and a tap on the row again frees it and shows the whole matrix
        box = cells.bounding_box()
        cells.tap(position={"x": box["width"] * 0.6, "y": box["height"] * 0.6})
        page.wait_for_function("() => new URLSearchParams(location.search).get('row') === null")
        page.wait_for_function(f"() => {ZOOM} === ''")
    finally:
        ctx.close()


#: Inked pixels (neither transparent nor white) in the overlay's first `px` columns and rows:
#: where a label cut by the canvas's edge would show.
EDGE_INK = """(px) => {
  const cv = document.querySelector('.heatmap-overlay');
  const ctx = cv.getContext('2d');
  const inked = (d) => { let k = 0;
    for (let i = 0; i < d.length; i += 4) {
      if (d[i + 3] > 40 && Math.min(d[i], d[i + 1], d[i + 2]) < 200) k++;
    }
    return k; };
  return { left: inked(ctx.getImageData(0, 0, px, cv.height).data),
           top: inked(ctx.getImageData(0, 0, cv.width, px).data) };
}"""


@pytest.mark.parametrize("size", [(1440, 900), (1280, 720)])
def test_the_locked_row_s_label_is_not_clipped(page, server_url, size):
    """The locked row's label is drawn bold: the label margins fit it, at its row and its column
    (the widest token locked)."""
    page.set_viewport_size({"width": size[0], "height": size[1]})
    text = "Extraordinary understanding requires considerable concentration."
    open_text(page, server_url, text, row="1")
    tokens = tokens_of(page)
    assert max(tokens, key=len) == tokens[1], tokens  # the widest label is the locked one
    page.wait_for_timeout(300)  # the overlay painted with the lock
    assert page.evaluate(EDGE_INK, 2) == {"left": 0, "top": 0}
