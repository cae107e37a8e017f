"""The view's one definition on the page (frontend/js/view-state.js): an address value the view
does not allow is left out, the rest of the address still applies, and the page says what was
wrong; a share page's query is read alike by the page and by the server's ``preload`` island
(the page paints the preloaded view without analysing)."""

from __future__ import annotations

import urllib.parse

import pytest

from .test_page import TEXT, api, wait_ready
from .test_page_views import record_api

pytestmark = pytest.mark.browser


def test_bad_address_values_are_left_out_and_said(page, server_url):
    q = urllib.parse.urlencode({"text": TEXT, "alpha": "three", "layer": "1", "head": "2",
                                "scope": "all", "hide": "1"})  # fmt: skip
    page.goto(f"{server_url}/?{q}")
    wait_ready(page)
    assert "Layer 1 · head 2" in page.inner_text("#head-title")  # the rest of the address
    assert "α = 1.5" in page.inner_text("#status")  # the default α ("three" is no number)
    assert page.locator(".chip.special").first.is_hidden()
    note = page.locator('[data-error-for="_"]')
    note.wait_for(state="visible")
    text = note.inner_text()
    assert 'alpha must be a number in [1, 2] or own, got "three"' in text
    assert 'scope must be one of head, mean, got "all"' in text
    # the address is rewritten from what is on screen: the bad values are gone
    page.wait_for_function("() => new URLSearchParams(location.search).get('alpha') === '1.5'")
    assert "scope=" not in page.url


def test_a_share_page_query_is_read_alike_by_page_and_server(page, server_url):
    share = api(server_url, "/api/share", {"state": {"text": TEXT, "layer": 1, "head": 3}})
    seen = record_api(page)
    # alpha=x is left out by both: the island the server made is the view the page opens
    page.goto(f"{server_url}{share['url']}?alpha=x&layer=0&head=2&block=64")
    wait_ready(page)
    assert "Layer 0 · head 2" in page.inner_text("#head-title")
    assert "α = 1.5" in page.inner_text("#status")
    # a text shorter than one tile says so ("fit in one 64 × 64 tile"); a longer one names its tiles
    assert "64 × 64 tile" in page.inner_text("#metrics")
    assert not any(s.startswith("POST /api/analyze") for s in seen), seen
    assert not any(s.endswith("/heads/0/2") for s in seen), seen  # preloaded
