"""The information-flow panel in headless Chromium: the chips show exactly the server's reachable
set and mass order, picking a token (click, arrow keys, a locked heatmap row) and a layer refetches,
and hostile token text stays text."""

from __future__ import annotations

import json
import urllib.request

import pytest

from tests.browser.test_page import HOSTILE, TEXT, analyse

pytestmark = pytest.mark.browser


@pytest.fixture(autouse=True)
def _patient(page):
    """The machine is shared: a loaded CI box answers slowly, never wrongly."""
    page.set_default_timeout(90_000)


def flow_of(server_url: str, aid: str, token: int, layer: int | None = None) -> dict:
    q = f"token={token}" + ("" if layer is None else f"&layer={layer}")
    with urllib.request.urlopen(f"{server_url}/api/analyses/{aid}/flow?{q}") as r:
        return json.load(r)


def chips(page) -> list[dict]:
    return page.evaluate(
        """() => [...document.querySelectorAll('#flow-chips .flow-chip')].map((b) => ({
            reached: !b.classList.contains('flow-unreached'),
            pressed: b.getAttribute('aria-pressed') === 'true',
            mass: Number(getComputedStyle(b).getPropertyValue('--mass') || 0),
            text: b.textContent}))"""
    )


def pressed(page) -> int:
    """The target the panel shows, once its answer is painted."""
    page.wait_for_selector("#flow-chips [aria-pressed=true]", timeout=90_000)
    page.wait_for_function("() => !document.getElementById('flow').hasAttribute('aria-busy')")
    return int(page.get_attribute("#flow-chips [aria-pressed=true]", "data-index"))


def wait_target(page, token: int, timeout: float = 90_000) -> None:
    """Until the panel shows ``token`` as its target with its answer painted; on a timeout, the
    error says what the panel shows instead (its target, whether a request is in flight, its
    caption, the page's busy notice)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(
            "(t) => document.querySelector(`#flow-chips [data-index='${t}'][aria-pressed=true]`)"
            " && !document.getElementById('flow').hasAttribute('aria-busy')",
            arg=token,
            timeout=timeout,
        )
    except PlaywrightTimeout as exc:
        shown = page.evaluate(
            """() => ({
                pressed: document.querySelector('#flow-chips [aria-pressed=true]')?.dataset.index,
                busy: document.getElementById('flow').hasAttribute('aria-busy'),
                caption: document.getElementById('flow-caption').textContent,
                notice: document.getElementById('busy-notice')?.textContent ?? null,
                focused: document.activeElement?.outerHTML?.slice(0, 120) ?? null})"""
        )
        msg = f"the panel never showed token {token} as its target: {shown}"
        raise PlaywrightTimeout(msg) from exc


def click_chip(page, token: int) -> None:
    """Click chip ``token`` and wait until the panel shows it as the target.

    What the page fetches after its first view (the other methods' summary, the other heads) can
    move the panel between Playwright's check of the chip's position and the mouse's press, so
    the press lands elsewhere (another chip, a heatmap row). So the click is made once the page
    is quiet, and made again if the panel did not retarget within 30 s; a handler that ignored
    the click fails every try."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for attempt in range(3):
        page.wait_for_load_state("networkidle")  # the first paint's fetches (no-op once reached)
        page.click(f"#flow-chips [data-index='{token}']")
        try:
            wait_target(page, token, timeout=30_000)
            return
        except PlaywrightTimeout:
            if attempt == 2:
                raise


def test_flow_panel_shows_the_servers_reachable_set(page, server_url):
    analyse(page, server_url)
    aid = page.evaluate(
        "fetch('/api/analyze', {method: 'POST', headers: {'Content-Type': 'application/json'},"
        f" body: JSON.stringify({{text: {json.dumps(TEXT)}}})}}).then((r) => r.json())"
        ".then((b) => b.id)"
    )
    page.wait_for_selector(f"#flow[data-analysis='{aid}']")
    t = pressed(page)  # the locked query row, else the first non-special token
    body = flow_of(server_url, aid, t)
    got = chips(page)
    assert [c["reached"] for c in got] == body["reachable"]
    assert [c["pressed"] for c in got].index(True) == t
    # shade follows mass: the most massive input is the darkest chip, unreached ones are blank
    shades = [c["mass"] for c in got]
    assert shades.index(max(shades)) == body["mass"].index(max(body["mass"]))
    assert all(s == 0 for s, r in zip(shades, body["reachable"], strict=True) if not r)
    levels = page.locator("#flow-levels .flow-level")
    assert levels.count() == body["layer"] + 2
    counts = page.locator("#flow-levels .flow-level-count").all_inner_texts()
    assert counts == [f"{c} / {body['n']}" for c in reversed(body["counts"])]
    assert f"reached by {body['reached']} of {body['n']}" in page.inner_text("#flow-caption")

    # a chip click retargets; the arrow key moves on; layer 0 changes the reach
    click_chip(page, 4)
    assert [c["reached"] for c in chips(page)] == flow_of(server_url, aid, 4)["reachable"]
    page.focus("#flow-chips [data-index='4']")
    page.keyboard.press("ArrowRight")
    wait_target(page, 5)
    page.select_option("#flow-layer", "0")
    page.wait_for_function(
        "() => document.querySelectorAll('#flow-levels .flow-level').length === 2"
    )
    wait_target(page, 5)
    assert [c["reached"] for c in chips(page)] == flow_of(server_url, aid, 5, 0)["reachable"]


def test_a_locked_heatmap_row_becomes_the_target_and_hostile_text_stays_text(page, server_url):
    analyse(page, server_url, HOSTILE)
    pressed(page)
    # the page's own store (its versioned module URL, as main.js imports it)
    page.evaluate(
        """() => import(document.querySelector('script[src$="/main.js"]').src
            .replace(/main\\.js$/, 'state.js')).then((s) => s.set({lockedRow: 3}))"""
    )
    wait_target(page, 3)
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#flow-chips img, #flow-chips script").count() == 0
    assert "script" in page.inner_text("#flow-chips").split()  # the markup shown as text
