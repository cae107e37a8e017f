"""The gallery, the exports and the Share button in a real headless Chromium: every example opens
the main view on its state; PNG downloads are PNGs, SVG downloads parse as XML with an <svg> root
(hostile token text included); the "Download view" HTML file renders its plots with the network
off; the analysis JSON parses and reopens the view; Share gives a working short link."""

from __future__ import annotations

import json
import urllib.request
import xml.etree.ElementTree as ET

import pytest

pytestmark = pytest.mark.browser

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
HOSTILE = 'a <b>&amp; "q" </svg><script>window.__pwned=1</script> ]]> <!-- x'


def gallery_examples(server_url: str) -> list[dict]:
    with urllib.request.urlopen(server_url + "/api/gallery") as r:
        return json.load(r)["examples"]


def wait_ready(page) -> None:
    """The open head is drawn, its metrics computed, and no analysis is in flight (the first visit
    paints a preloaded example: without the last condition a test could act on the example while
    its own text is still being analysed, with the export buttons disabled)."""
    page.wait_for_selector(".heatmap-cells", state="visible", timeout=60_000)
    page.wait_for_function(
        """() => document.querySelector('.metric-recall .metric-value')?.textContent !== '–'
            && !document.getElementById('status').textContent.startsWith('Analysing')""",
        timeout=90_000,
    )


def wait_pareto(page) -> None:
    page.wait_for_selector("#pareto .main-svg", timeout=60_000)
    page.wait_for_selector('[data-export="pareto-png"]:not([disabled])', timeout=30_000)


def download(page, selector: str):
    """Click an export button; the downloaded file's name and bytes."""
    menu = page.locator(".export-menu")  # the view's downloads sit behind "Download…"
    if page.locator(f".export-menu {selector}").count() and not menu.evaluate("(d) => d.open"):
        page.click(".export-menu summary")
    try:
        with page.expect_download(timeout=60_000) as info:
            page.click(selector)
        d = info.value
    except Exception as exc:  # say what the page reported instead of a bare timeout
        status = page.evaluate("document.querySelector('.export-status')?.textContent")
        raise AssertionError(f"no download from {selector}; the page says {status!r}") from exc
    with open(d.path(), "rb") as f:
        return d.suggested_filename, f.read()


def parse_svg(data: bytes) -> ET.Element:
    root = ET.fromstring(data)
    assert root.tag in ("{http://www.w3.org/2000/svg}svg", "svg"), root.tag
    return root


def analyse(page, server_url: str, text: str) -> None:
    page.goto(server_url + "/")
    page.fill("#text", text)
    page.click("#analyze")
    wait_ready(page)


# ----------------------------------------------------------------------------- gallery


def test_gallery_lists_and_opens_every_example(page, server_url):
    examples = gallery_examples(server_url)
    assert len(examples) >= 8
    page.goto(server_url + "/gallery")
    cards = page.locator(".card")
    assert cards.count() == len(examples)
    # thumbnails are drawn (not blank white)
    blank = page.evaluate(
        """() => [...document.querySelectorAll('canvas[data-thumb]')].filter((c) => {
            const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            for (let k = 0; k < d.length; k += 4) if (d[k] < 240 || d[k + 2] < 240) return false;
            return true; }).length"""
    )
    assert blank == 0
    page.click(f'a[href="/gallery/{examples[0]["slug"]}"]')
    wait_ready(page)
    assert page.url.split("?")[0].endswith(f"/gallery/{examples[0]['slug']}")
    for ex in examples:
        page.goto(f"{server_url}/gallery/{ex['slug']}")
        wait_ready(page)
        s = ex["state"]
        assert page.locator(".gallery-banner strong").inner_text() == ex["title"]
        assert page.input_value("#text") == s["text"]
        got = page.evaluate(
            "() => ({alpha: document.querySelector('input[name=alpha]:checked').value,"
            " causal: document.querySelector('#causal').checked,"
            " method: document.querySelector('#method')?.value})"
        )
        assert float(got["alpha"] if got["alpha"] != "free" else s["alpha"]) == s["alpha"]
        assert got["causal"] == s["causal"]
        assert got["method"] == s["method"], ex["slug"]  # the tiny server has an artefact
        title = page.locator("#head-title").inner_text()
        assert title.startswith("Layer ")  # the head opened (clamped to the tiny model's size)


# ----------------------------------------------------------------------------- figures


def test_heatmap_png_and_svg_downloads(page, server_url):
    analyse(page, server_url, HOSTILE)
    name, data = download(page, '[data-export="heatmap-png"]')
    assert name.endswith(".png") and data.startswith(PNG_MAGIC)
    name, data = download(page, '[data-export="heatmap-svg"]')
    assert name.endswith(".svg")
    root = parse_svg(data)
    texts = [t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text")]
    # the tokens are there, as text (word pieces: "<", "&", "]"...)
    assert {"<", ">", "&", "]"} <= set(texts)
    assert not list(root.iter("{http://www.w3.org/2000/svg}script"))
    stars = root.findall(".//{http://www.w3.org/2000/svg}path")
    assert stars, "the gold edges are marked"
    assert page.evaluate("window.__pwned") is None


def test_heatmap_svg_of_a_long_text_embeds_the_cells_as_an_image(page, server_url):
    slug = next(ex["slug"] for ex in gallery_examples(server_url) if ex["slug"].startswith("wiki"))
    page.goto(f"{server_url}/gallery/{slug}")
    wait_ready(page)
    _, data = download(page, '[data-export="heatmap-svg"]')
    root = parse_svg(data)
    images = root.findall(".//{http://www.w3.org/2000/svg}image")
    assert len(images) == 1 and images[0].get("href", "").startswith("data:image/png;base64,")
    assert len(root.findall(".//{http://www.w3.org/2000/svg}text")) > 10  # vector axis labels


def test_pareto_and_pos_downloads(page, server_url):
    analyse(page, server_url, "The chef who ran to the store was out of food, so he went back.")
    wait_pareto(page)
    _, data = download(page, '[data-export="pareto-png"]')
    assert data.startswith(PNG_MAGIC)
    _, data = download(page, '[data-export="pareto-svg"]')
    parse_svg(data)
    page.wait_for_selector('[data-export="pos-svg"]:not([disabled])', timeout=30_000)
    _, data = download(page, '[data-export="pos-svg"]')
    root = parse_svg(data)
    assert len(root.findall(".//{http://www.w3.org/2000/svg}rect")) > 2
    _, data = download(page, '[data-export="pos-png"]')
    assert data.startswith(PNG_MAGIC)


# ----------------------------------------------------------------------------- view, JSON, share


def test_view_html_renders_offline(page, browser, server_url, tmp_path):
    analyse(page, server_url, HOSTILE + " The chef who ran to the store was out of food.")
    wait_pareto(page)
    name, data = download(page, '[data-export="view-html"]')
    assert name.endswith(".html") and len(data) > 1_000_000  # Plotly is inside
    html = data.decode("utf-8")
    assert "<script src=" not in html and "<link" not in html
    offline = browser.new_context(offline=True)
    requests: list[str] = []

    def block(route):
        requests.append(route.request.url)
        route.abort()

    offline.route("**/*", block)
    try:
        pg = offline.new_page()
        errors: list[str] = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.set_content(html, wait_until="load", timeout=60_000)
        pg.wait_for_selector(".plot-container svg.main-svg", timeout=60_000)
        assert pg.locator(".plot-container").count() == 2  # heatmap and Pareto plot
        assert pg.evaluate("window.__pwned") is None
        assert not errors, errors
        assert not [u for u in requests if not u.startswith(("data:", "about:"))], requests
    finally:
        offline.close()


def test_analysis_json_download(page, server_url):
    from sparsescope.web.schemas import ShareState

    analyse(page, server_url, "The chef who ran to the store was out of food.")
    name, data = download(page, '[data-export="analysis-json"]')
    body = json.loads(data)
    assert name.endswith(".json") and body["format"] == "sparsescope-analysis/1"
    state = ShareState.model_validate(body["state"])
    assert state.text.startswith("The chef")
    assert body["analysis"]["n"] == body["head"]["n"] == len(body["analysis"]["tokens"])
    assert body["head"]["edges"] and all(p > 0 for _, _, p in body["head"]["edges"])
    assert set(body["method"]["metrics"]) >= {"recall", "sparsity", "exact", "precision"}


def test_share_button_gives_a_working_short_link(page, server_url):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server_url)
    analyse(page, server_url, "The chef who ran to the store was out of food.")
    page.click(".share-button")
    page.wait_for_function(
        "() => document.querySelector('.share-url').value.includes('/s/')", timeout=30_000
    )
    url = page.input_value(".share-url")
    page.click(".share-box button")
    page.wait_for_function("() => document.querySelector('.share-note').textContent !== ''")
    assert page.locator(".share-note").inner_text() == "copied"
    assert page.evaluate("navigator.clipboard.readText()") == url
    page.goto(url)
    wait_ready(page)
    assert page.input_value("#text") == "The chef who ran to the store was out of food."


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk."""
    assert data.startswith(PNG_MAGIC)
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_heatmap_png_at_2x_and_3x_for_papers_and_slides(page, server_url):
    """PNGs ≥ 1,800 px wide from the vector figure (it was a 613×748 copy of
    the screen), the subtitle wrapped, not clipped; no locked-row dimming unless asked."""
    analyse(
        page,
        server_url,
        "The council refused the demonstrators a permit because they feared violence.",
    )
    page.locator(".chip").nth(2).click()  # a locked row: the screen dims the others
    name, two = download(page, '[data-export="heatmap-png"]')
    assert name.endswith("@2x.png")
    _, three = download(page, '[data-export="heatmap-png3x"]')
    (w2, _), (w3, _) = png_size(two), png_size(three)
    assert w2 >= 1800 and w3 >= 2700 and abs(w3 / w2 - 1.5) < 0.01, (w2, w3)
    _, svg = download(page, '[data-export="heatmap-svg"]')
    root = parse_svg(svg)
    width = float(root.get("width"))
    ns = "{http://www.w3.org/2000/svg}"
    for t in root.iter(f"{ns}text"):
        if t.get("x") == "10":  # the title, subtitle, text and legend lines
            assert 10 + 6.6 * len(t.text or "") <= width + 40, t.text  # fits the figure
    assert not [r for r in root.iter(f"{ns}rect") if r.get("fill-opacity")]  # no dimming
