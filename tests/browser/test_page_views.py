"""The main page's views in headless Chromium: the first visit paints an analysed example before
any request returns, a share page's address bar is the truth, long texts get a window picker and
a permanent link, α changes re-analyse at once, and the heatmap zooms."""

from __future__ import annotations

import json
import re
import urllib.parse
import urllib.request

import pytest

from .test_page import TEXT, api, wait_ready

pytestmark = pytest.mark.browser


def record_api(page) -> list[str]:
    """Every /api/ request the page sends from now on, in order ("METHOD path")."""
    seen: list[str] = []
    page.on(
        "request",
        lambda r: (
            seen.append(f"{r.method} {urllib.parse.urlsplit(r.url).path}")
            if "/api/" in r.url
            else None
        ),
    )
    return seen


def test_first_visit_paints_an_analysed_example_without_a_request(page, server_url):
    seen = record_api(page)
    # the page's own requests are held back: what is painted came with the HTML
    page.route("**/api/**", lambda route: None)
    page.goto(server_url + "/")
    page.wait_for_selector(".heatmap-cells", state="visible", timeout=30_000)
    page.wait_for_function(
        "() => document.querySelector('.metric-recall .metric-value').textContent !== '–'"
    )
    title = page.inner_text("#head-title")
    assert re.match(r"Layer \d+ · head \d+ · n = \d+", title), title
    assert page.input_value("#text").strip() != ""  # the example's text, ready to be replaced
    assert page.locator(".tile").count() > 0  # the head grid
    assert not any(s.startswith("POST /api/analyze") for s in seen), seen
    opened = re.search(r"Layer (\d+) · head (\d+)", title).groups()
    assert not any(s.endswith(f"/heads/{opened[0]}/{opened[1]}") for s in seen), seen
    page.unroute("**/api/**")


def test_a_url_with_a_text_does_not_open_the_example(page, server_url):
    page.goto(f"{server_url}/?{urllib.parse.urlencode({'text': TEXT})}")
    wait_ready(page)
    assert page.input_value("#text") == TEXT


def current_query(page) -> dict[str, str]:
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(page.url).query,
                                       keep_blank_values=True))  # fmt: skip


def test_share_page_address_is_what_is_on_screen(page, server_url):
    state = {"text": TEXT, "alpha": 1.5, "layer": 1, "head": 3, "method": "window"}
    share = api(server_url, "/api/share", {"state": state})
    page.goto(server_url + share["url"])
    wait_ready(page)
    assert "Layer 1 · head 3" in page.inner_text("#head-title")
    page.locator(".tile").nth(2).click()  # layer 0, head 2 (tiny model: 4 heads a layer)
    page.wait_for_function(
        "() => /Layer 0 · head 2/.test(document.querySelector('#head-title').textContent)"
    )
    page.wait_for_function("() => new URLSearchParams(location.search).get('head') === '2'")
    assert urllib.parse.urlsplit(page.url).path == share["url"]  # still the share, overridden
    q = current_query(page)
    assert (q["layer"], q["head"]) == ("0", "2") and "text" not in q
    page.reload()
    wait_ready(page)
    assert "Layer 0 · head 2" in page.inner_text("#head-title")  # the query wins over the share
    # a new text leaves the share: the address is the plain page with the text
    page.fill("#text", "Another text entirely.")
    page.click("#analyze")
    page.wait_for_function("() => location.pathname === '/'")
    page.wait_for_function(
        "() => new URLSearchParams(location.search).get('text') === 'Another text entirely.'"
    )


def test_long_text_gets_a_permanent_link(page, server_url):
    words = " ".join(f"word{k % 50}" for k in range(400))  # > 1,500 characters, < 512 tokens? no
    text = words[:1800]
    page.goto(server_url + "/")
    page.fill("#text", text)
    page.click("#analyze")
    wait_ready(page)
    page.wait_for_function("() => location.pathname.startsWith('/s/')", timeout=15_000)
    assert "text" not in current_query(page) and "id" not in current_query(page)
    page.reload()
    wait_ready(page)
    assert page.input_value("#text") == text


def analysis_alpha(page) -> str:
    return page.inner_text("#status")


def test_alpha_and_causal_changes_reanalyse_at_once(page, server_url):
    page.goto(f"{server_url}/?{urllib.parse.urlencode({'text': TEXT, 'alpha': '1.5'})}")
    wait_ready(page)
    posts = []
    page.on("request", lambda r: posts.append(json.loads(r.post_data))
            if r.url.endswith("/api/analyze") else None)  # fmt: skip
    page.check('input[name=alpha][value="2"]')  # no Analyze click
    page.wait_for_function("() => document.getElementById('status').textContent.includes('α = 2')")
    page.wait_for_function("() => new URLSearchParams(location.search).get('alpha') === '2'")
    page.check("#causal")
    page.wait_for_function("() => document.getElementById('status').textContent.includes('causal')")
    # the free field: typing 1.25 sends one request (debounced), not one per keystroke
    page.check('input[name=alpha][value="free"]')
    page.fill("#alpha-free", "")
    page.type("#alpha-free", "1.25", delay=30)
    page.wait_for_function(
        "() => document.getElementById('status').textContent.includes('α = 1.25')"
    )
    assert [p["alpha"] for p in posts][:2] == [2, 2] and posts[1]["causal"] is True
    assert 1.25 in [p["alpha"] for p in posts]
    assert not any(p["alpha"] == 1.2 for p in posts), posts  # the keystrokes in between
    assert page.is_checked('input[name=alpha][value="free"]')


def test_long_text_window_picker(page, server_url):
    long = " ".join(f"token{k}" for k in range(700))  # well over the tiny model's positions
    page.goto(server_url + "/")
    page.fill("#text", long)
    page.click("#analyze")
    picker = page.locator("#window-picker")
    picker.wait_for(state="visible", timeout=30_000)
    assert "Long text" in picker.inner_text()
    wait_ready(page)
    buttons = picker.locator("[data-window-start]")
    assert buttons.count() >= 2
    assert buttons.first.get_attribute("aria-pressed") == "true"
    assert "tokens 0–" in page.inner_text("#status")
    second = buttons.nth(1)
    start = second.get_attribute("data-window-start")
    second.click()
    pressed = (
        "(s) => document.querySelector(`[data-window-start='${s}']`)"
        "?.getAttribute('aria-pressed') === 'true'"
    )
    page.wait_for_function(pressed, arg=start)
    # the server starts a window at a word's beginning: at or a little before the button's
    shown = int(re.search(r"tokens (\d+)–", page.inner_text("#status")).group(1))
    assert 0 < shown <= int(start)
    # the link is permanent and names the window; reloading it shows the same window
    page.wait_for_function("() => location.pathname.startsWith('/s/')", timeout=15_000)
    page.wait_for_function(
        "(s) => new URLSearchParams(location.search).get('start') === s", arg=str(shown)
    )
    page.reload()
    wait_ready(page)
    page.wait_for_function(pressed, arg=start)
    assert f"tokens {shown}–" in page.inner_text("#status")


def test_heatmap_zooms_pans_and_resets(page, server_url):
    text = " ".join(f"w{k % 37}" for k in range(120))  # 120+ tokens: small cells
    page.goto(f"{server_url}/?{urllib.parse.urlencode({'text': text})}")
    wait_ready(page)
    pixels = "() => document.querySelector('.heatmap-cells').toDataURL()"
    zoom = "() => Number(document.getElementById('heatmap').dataset.zoom)"
    before = page.evaluate(pixels)
    page.wait_for_load_state("networkidle")  # late fetches can move the heatmap: read it quiet
    box = page.locator(".heatmap-overlay").bounding_box()
    cx, cy = box["x"] + box["width"] * 0.6, box["y"] + box["height"] * 0.6
    page.mouse.move(cx, cy)
    for _ in range(4):
        page.mouse.wheel(0, -240)
    page.wait_for_function(f"() => ({zoom})() > 2")
    zoomed = page.evaluate(pixels)
    assert zoomed != before
    # drag pans (and the release does not lock a row)
    locked_before = page.locator(".chip.locked").count()
    page.mouse.down()
    page.mouse.move(cx - 80, cy - 60, steps=6)
    page.mouse.up()
    assert page.evaluate(pixels) != zoomed
    assert page.locator(".chip.locked").count() == locked_before
    # keyboard: 0 resets, + zooms in
    page.focus(".heatmap-overlay")
    page.keyboard.press("0")
    assert page.evaluate(zoom) == 1
    assert page.evaluate(pixels) == before
    page.keyboard.press("+")
    assert page.evaluate(zoom) > 1


@pytest.mark.parametrize("size", [(1440, 900), (1280, 720)])
def test_heatmap_metrics_and_pareto_on_one_screen(browser, server_url, size):
    ctx = browser.new_context(viewport={"width": size[0], "height": size[1]})
    page = ctx.new_page()
    page.goto(f"{server_url}/?{urllib.parse.urlencode({'text': TEXT})}")
    wait_ready(page)
    page.wait_for_selector("#pareto .scatterlayer .trace", timeout=60_000)
    boxes = page.evaluate(
        """() => Object.fromEntries(['.heatmap-cells', '#metrics', '#pareto .plot-container']
            .map((q) => { const r = document.querySelector(q).getBoundingClientRect();
                          return [q, [r.left, r.top, r.right, r.bottom]]; }))"""
    )
    ctx.close()
    h = boxes[".heatmap-cells"]
    assert h[3] <= size[1] and h[2] <= size[0], boxes  # the whole matrix
    assert boxes["#metrics"][3] <= size[1], boxes
    # the first screen leads with the heatmap and the recall; the Pareto plot starts on it (its
    # details are one scroll or one "More views" click away)
    assert boxes["#pareto .plot-container"][1] + 100 <= size[1], boxes
    assert h[2] <= boxes["#metrics"][0]  # beside each other, not stacked


@pytest.mark.parametrize("path", ["/", "/gallery", "/gallery/coreference"])
def test_no_sideways_scroll_on_a_phone(browser, server_url, path):
    ctx = browser.new_context(viewport={"width": 390, "height": 844})
    page = ctx.new_page()
    page.goto(server_url + path)
    page.wait_for_load_state("networkidle")
    width = page.evaluate("document.documentElement.scrollWidth")
    nav = page.locator(".top-nav a").first.bounding_box()
    ctx.close()
    assert width <= 390
    assert nav is not None and nav["width"] > 0  # the pages stay reachable
