"""Issue 27 item 6 in real Chromium: what a new user hit in the first minutes (a new text that
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
