"""In real Chromium, what a new user meets in the first minutes (a new text that
inherits the example's locked row, a text box without ``dir=auto``, a zoomed heatmap whose ↑ / ↓
scroll repainted only the labels, the skip link)."""

from __future__ import annotations

import urllib.parse

import pytest

from .test_page import TEXT, wait_ready

pytestmark = pytest.mark.browser

PIXELS = "() => document.querySelector('.heatmap-cells').toDataURL()"


def query(page) -> dict[str, str]:
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(page.url).query))


def test_a_new_text_starts_unlocked(page, server_url):
    page.goto(server_url + "/")  # the first visit's example has a locked row
    wait_ready(page)
    assert page.locator(".chip.locked").count() == 1
    page.fill("#text", TEXT)
    page.click("#analyze")
    page.wait_for_function(
        "(t) => new URLSearchParams(location.search).get('text') === t", arg=TEXT
    )
    wait_ready(page)
    page.wait_for_timeout(300)  # the address is written 200 ms after a change
    assert page.locator(".chip.locked").count() == 0
    assert "row" not in query(page)
    # a lock the user makes on this text is kept by a reload (it is in the address)
    page.locator(".chip").nth(3).click()
    page.wait_for_function("() => new URLSearchParams(location.search).get('row') === '3'")
    page.reload()
    wait_ready(page)
    assert page.locator(".chip.locked").count() == 1


def test_the_text_box_follows_the_texts_direction(page, server_url):
    page.goto(server_url + "/")
    assert page.get_attribute("#text", "dir") == "auto"


def test_a_zoomed_heatmap_scrolled_by_arrow_keys_repaints_its_cells(page, server_url):
    text = " ".join(f"w{k % 37}" for k in range(120))
    page.goto(f"{server_url}/?{urllib.parse.urlencode({'text': text})}")
    wait_ready(page)
    page.focus(".heatmap-overlay")
    for _ in range(3):
        page.keyboard.press("+")
    page.keyboard.press("ArrowDown")  # locks row 0
    before = page.evaluate(PIXELS)
    rows = page.evaluate("() => Number(document.getElementById('heatmap').dataset.zoom)")
    assert rows > 2
    for _ in range(80):  # well past the first screen of rows: the view scrolls down
        page.keyboard.press("ArrowDown")
    assert page.evaluate(PIXELS) != before


def test_the_skip_link_is_the_first_stop_and_jumps_to_the_content(page, server_url):
    page.goto(server_url + "/")
    wait_ready(page)
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "skip-link"
    assert page.locator(".skip-link").bounding_box()["y"] >= 0  # visible once focused
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"


LONG = " ".join(f"w{k % 37}" for k in range(240))  # about 500 tokens (the window runs 0–999+)


def test_sliders_have_a_number_field_and_a_scale_that_fits_n(page, server_url):
    page.goto(f"{server_url}/?{urllib.parse.urlencode({'text': LONG, 'method': 'window'})}")
    wait_ready(page)
    n = int(page.inner_text("#head-title").split("n = ")[1])
    assert n > 400
    number = page.locator('input[type="number"][data-param="window"]')
    slider = page.locator('input[type="range"][data-range="window"]')
    assert number.count() == 1 and slider.count() == 1
    assert slider.get_attribute("data-scale") == "sqrt"  # 2n − 1 values on a few hundred px
    assert slider.bounding_box()["width"] >= 200
    number.fill("37")
    page.wait_for_function("() => new URLSearchParams(location.search).get('p.window') === '37'")
    pos = int(slider.input_value())
    assert 0 < pos < 1000 and slider.get_attribute("aria-valuetext") == "37"
    # the slider's first tenth reaches the small widths one by one
    slider.fill("20")
    assert int(number.input_value()) <= 3
    number.fill("5000")  # typed past the end: the largest width
    page.wait_for_function(
        "(m) => new URLSearchParams(location.search).get('p.window') === String(m)", arg=2 * n - 1
    )


def test_side_panel_labels_are_not_cut(page, server_url):
    page.goto(f"{server_url}/?{urllib.parse.urlencode({'text': TEXT, 'method': 'sf-kmeans'})}")
    wait_ready(page)
    cut = page.evaluate(
        """() => {
            const out = [];
            for (const l of document.querySelectorAll('#method-panel .param-name'))
                if (l.scrollWidth > l.clientWidth + 1) out.push(l.textContent);
            const sel = document.getElementById('method');
            const ctx = document.createElement('canvas').getContext('2d');
            const cs = getComputedStyle(sel);
            ctx.font = `${cs.fontWeight} ${cs.fontSize} ${cs.fontFamily}`;
            const text = sel.options[sel.selectedIndex].text;
            if (ctx.measureText(text).width > sel.clientWidth - 28) out.push(text);
            return out;
        }"""
    )
    assert cut == []
    assert page.input_value("#method") == "sf-kmeans"


def test_a_long_texts_heatmap_takes_the_width_it_has(browser, server_url):
    """≥ 700 px square at 1440 × 900 for n ≈ 500 (it was a ~580 px square)."""
    ctx = browser.new_context(viewport={"width": 1440, "height": 900})
    page = ctx.new_page()
    page.goto(f"{server_url}/?{urllib.parse.urlencode({'text': LONG})}")
    wait_ready(page)
    size = page.evaluate(
        """() => { const h = document.getElementById('heatmap');
                   const c = document.querySelector('.heatmap-cells').getBoundingClientRect();
                   return [c.width, c.height, h.getBoundingClientRect().right]; }"""
    )
    wide = page.evaluate("document.querySelector('main.layout').classList.contains('big-head')")
    scroll = page.evaluate("document.documentElement.scrollWidth")
    ctx.close()
    assert wide and size[0] >= 700 + 60 and size[1] >= 700 + 60, size  # matrix + label margins
    assert scroll <= 1440


ZOOM = "() => Number(document.getElementById('heatmap').dataset.zoom)"


def test_zoom_is_kept_in_the_address_and_a_locked_row_opens_legible(page, server_url):
    """The zoom is a view field (address, shares); a click that locks a row of
    a long text's unzoomed matrix zooms there (cells ≥ 9 px: ★ / × drawn)."""
    page.goto(f"{server_url}/?{urllib.parse.urlencode({'text': LONG})}")
    wait_ready(page)
    assert page.evaluate(ZOOM) == 1
    page.wait_for_load_state("networkidle")  # late fetches can move the heatmap: read it quiet
    box = page.locator(".heatmap-overlay").bounding_box()
    page.mouse.click(box["x"] + box["width"] * 0.6, box["y"] + box["height"] * 0.6)
    page.wait_for_function(f"() => ({ZOOM})() > 3")
    page.wait_for_function("() => /^[0-9.]+@[0-9.]+,[0-9.]+$/.test("
                           "new URLSearchParams(location.search).get('zoom') || '')")  # fmt: skip
    q = query(page)
    assert "row" in q
    page.reload()
    wait_ready(page)
    page.wait_for_function(f"() => ({ZOOM})() > 3")
    assert query(page)["zoom"] == q["zoom"]  # the same view (z to 2 decimals)
    assert abs(page.evaluate(ZOOM) - float(q["zoom"].split("@")[0])) < 0.01


def test_the_embed_offers_an_iframe_and_fits_800_by_600(browser, page, server_url):
    """The Share box gives an iframe snippet; the embed fits 800 × 600."""
    page.goto(f"{server_url}/?{urllib.parse.urlencode({'text': TEXT})}")
    wait_ready(page)
    page.click(".share-button")
    page.wait_for_function(
        "() => document.querySelector('.share-iframe')?.value.includes('/embed/')"
    )
    snippet = page.input_value(".share-iframe")
    assert snippet.startswith('<iframe src="http') and 'width="800" height="600"' in snippet
    embed = snippet.split('src="')[1].split('"')[0]
    ctx = browser.new_context(viewport={"width": 800, "height": 600})
    pg = ctx.new_page()
    pg.goto(embed)
    pg.wait_for_function(
        "() => !document.getElementById('embed-status').textContent.startsWith('Loading')"
    )
    size = pg.evaluate(
        "[document.documentElement.scrollWidth, document.documentElement.scrollHeight]"
    )
    ctx.close()
    assert size[0] <= 800 and size[1] <= 600, size


def test_tiles_of_128_on_a_short_text_say_why_every_point_is_at_zero(page, server_url):
    page.goto(f"{server_url}/?{urllib.parse.urlencode({'text': TEXT, 'px': 'block'})}")
    wait_ready(page)
    page.wait_for_function(
        "() => document.getElementById('pareto-note').textContent.includes('tile')"
    )
    page.wait_for_function(
        "() => document.getElementById('pareto-note').textContent.includes('block sparsity is 0')"
    )
    note = page.inner_text("#pareto-note")
    assert "pick tile 16" in note
