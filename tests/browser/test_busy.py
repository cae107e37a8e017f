"""The page when the server says "not now" (503/429 with retry_after): it shows "busy, retrying in
N s", waits, and retries on its own (frontend/js/api.js)."""

from __future__ import annotations

import json
import os

import pytest

from tests.browser.test_page import TEXT, wait_ready

pytestmark = pytest.mark.browser


def test_a_busy_server_is_retried_with_a_notice(page, server_url, tmp_path):
    refused: list[str] = []

    def busy_once(route):
        if not refused:  # the first analysis is refused, as by a full queue
            refused.append(route.request.url)
            body = {"detail": "the server is busy: retry in 2 s", "field": None, "retry_after": 2}
            route.fulfill(
                status=503,
                headers={"Retry-After": "2", "Content-Type": "application/json"},
                body=json.dumps(body),
            )
        else:
            route.continue_()

    page.route("**/api/analyze", busy_once)
    page.goto(server_url + "/")
    page.fill("#text", TEXT)
    page.click("#analyze")
    notice = page.locator("#busy-notice")
    notice.wait_for(state="visible", timeout=10_000)
    assert "busy, retrying in" in notice.inner_text()
    shot = os.environ.get("SPARSESCOPE_SCREENSHOT_DIR", str(tmp_path))
    page.screenshot(path=os.path.join(shot, "busy-notice.png"))
    wait_ready(page)  # the retry went through: the analysis is shown
    notice.wait_for(state="hidden", timeout=10_000)  # and the notice is gone once the wait ends
    assert refused
