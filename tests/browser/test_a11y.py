"""Accessibility in real Chromium: axe-core (vendored, tests/browser/axe.py) on
every page with zero serious or critical violations; keyboard paths with few tab stops."""

from __future__ import annotations

import json
import urllib.request

import pytest

from .axe import serious_violations
from .test_page import TEXT, analyse, api, wait_ready

pytestmark = pytest.mark.browser


@pytest.fixture
def page(browser):
    """A fresh page at 1440×900 that may inject axe (the app's CSP allows no inline script: the
    context bypasses it); JavaScript errors fail the test."""
    context = browser.new_context(viewport={"width": 1440, "height": 900}, bypass_csp=True)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    yield pg
    context.close()
    assert not errors, errors


def share_id(server_url: str) -> str:
    state = {"text": TEXT, "alpha": 1.5, "causal": False, "layer": 0, "head": 1,
             "method": "window", "params": {"window": 3}}  # fmt: skip
    return api(server_url, "/api/share", {"state": state})["id"]


def gallery_slug(server_url: str) -> str:
    with urllib.request.urlopen(server_url + "/api/gallery", timeout=30) as r:
        return json.load(r)["examples"][0]["slug"]


def test_axe_on_the_explorer_after_an_analysis(page, server_url):
    analyse(page, server_url)
    page.locator(".tile").nth(3).click()
    wait_ready(page)
    assert (v := serious_violations(page)) == [], "\n".join(v)


def test_axe_on_the_whole_model(page, server_url):
    """The model view open and painted, a head focused by keyboard."""
    analyse(page, server_url)
    page.click('button[data-toggle="view"][data-value="model"]')
    page.wait_for_function(
        """() => { const t = document.querySelectorAll('#model-view .mv-tile');
                   return t.length > 0 && [...t].every((x) => x.dataset.paint === 'mask'); }""",
        timeout=60_000,
    )
    page.locator('#model-view .mv-tile[tabindex="0"]').focus()
    page.keyboard.press("ArrowRight")
    assert (v := serious_violations(page)) == [], "\n".join(v)


def test_axe_on_the_first_visit(page, server_url):
    page.goto(server_url + "/")
    wait_ready(page)
    assert (v := serious_violations(page)) == [], "\n".join(v)


@pytest.mark.parametrize("path", ["/lecture", "/gallery"])
def test_axe_on_the_other_pages(page, server_url, path):
    page.goto(server_url + path)
    page.wait_for_load_state("networkidle")
    assert (v := serious_violations(page)) == [], "\n".join(v)


def test_axe_on_the_api_docs(page, server_url):
    """/docs is the vendored Swagger UI: its colours are fixed by static/css/docs.css; its
    operation header is a button that holds other buttons (Swagger UI's own markup, upstream
    swagger-api/swagger-ui), so axe's nested-interactive rule is off on this page only."""
    page.goto(server_url + "/docs")
    page.wait_for_selector(".opblock")
    v = serious_violations(page, rules_off=("nested-interactive",))
    assert v == [], "\n".join(v)


def test_axe_on_the_lecture_at_every_step(page, server_url):
    page.goto(server_url + "/lecture?text=" + "The cat sat on the mat because it was tired.")
    page.wait_for_load_state("networkidle")
    seen = []
    for _ in range(12):
        page.wait_for_timeout(300)
        seen += serious_violations(page)
        page.keyboard.press("ArrowRight")
    assert seen == [], "\n".join(seen)


def test_axe_on_share_embed_and_gallery_pages(page, server_url):
    sid = share_id(server_url)
    for path in (f"/s/{sid}", f"/embed/{sid}", f"/gallery/{gallery_slug(server_url)}"):
        page.goto(server_url + path)
        page.wait_for_load_state("networkidle")
        assert (v := serious_violations(page)) == [], (path, *v)


@pytest.mark.parametrize("path", ["/no/such/page", "/s/", "/s/zzzzzzzzzzzz", "/embed/nope"])
def test_axe_on_error_pages(page, server_url, path):
    page.goto(server_url + path)
    assert (v := serious_violations(page)) == [], "\n".join(v)


def test_the_head_grid_is_one_tab_stop_with_arrow_keys(page, server_url):
    analyse(page, server_url)
    page.locator('#grid .tile[data-layer="0"][data-head="0"]').click()  # room to move right, down
    wait_ready(page)
    stops = page.locator('#grid .tile[tabindex="0"]')
    assert stops.count() == 1
    assert page.locator(".tile").count() > 1
    stops.first.focus()
    here = "[document.activeElement.dataset.layer, document.activeElement.dataset.head].map(Number)"
    layer, head = page.evaluate(here)
    assert page.get_attribute(".tile:focus", "aria-pressed") == "true"  # the open head
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowDown")
    assert page.evaluate(here) == [layer + 1, head + 1]
    assert page.get_attribute(".tile:focus", "aria-pressed") == "true"
    assert page.locator('.tile[aria-pressed="true"]').count() == 1
    assert page.locator('#grid .tile[tabindex="0"]').count() == 1
    page.keyboard.press("Tab")  # one Tab leaves the grid
    assert page.evaluate("document.activeElement.classList.contains('tile')") is False


def test_token_chips_are_one_tab_stop_and_say_which_is_locked(page, server_url):
    analyse(page, server_url)
    assert page.locator('#tokens .chip[tabindex="0"]').count() == 1
    page.locator('#tokens .chip[tabindex="0"]').focus()
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    k = page.evaluate("document.activeElement.dataset.token")
    page.keyboard.press("Enter")
    assert page.get_attribute(f'.chip[data-token="{k}"]', "aria-pressed") == "true"
    assert page.locator('.chip[aria-pressed="true"]').count() == 1
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.classList.contains('chip')") is False


def test_the_keyboards_cell_is_read_out(page, server_url):
    analyse(page, server_url)
    assert page.get_attribute("#cell-said", "aria-live") == "polite"
    page.focus(".heatmap-overlay")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    said = page.inner_text("#cell-said")
    assert said.startswith("query ") and "key " in said and "p = " in said, said
    assert "(1), key" in said and "(2):" in said  # row 1, column 2
    assert page.locator(".heatmap .tooltip").is_visible()
