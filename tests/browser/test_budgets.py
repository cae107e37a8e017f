"""The oracle-budget panel (frontend/js/budgets.js) in headless Chromium: it
shows the server's budgets (GET /api/analyses/{id}/budgets) for the open head and every head,
its toggles and its head strip work from the keyboard, and it follows the open head."""

from __future__ import annotations

import re

import pytest

from tests.browser.test_page import analyse, api

pytestmark = pytest.mark.browser

TEXT = "The chef who ran to the store was out of food, so he went back home quickly."


def fmt(v: float, kind: str) -> str:
    """fmtBudget of budgets.js."""
    if kind == "p":
        return f"{v:.3f}"
    return str(int(v)) if float(v).is_integer() else f"{v:.1f}"


def head_line(page) -> str:
    return page.locator(".panel-budgets .budgets-line").first.inner_text()


def wait_budgets(page, layer: int, head: int) -> None:
    page.wait_for_function(
        """([l, h]) => {
            const line = document.querySelector('.panel-budgets .budgets-line');
            return line && line.textContent.includes(`(layer ${l}, head ${h})`)
                && document.querySelector('.budgets-hist')
                && document.querySelector('.budgets-strip .budgets-head.open');
        }""",
        arg=[layer, head],
        timeout=30_000,
    )


def bar_counts(page) -> list[int]:
    titles = page.eval_on_selector_all(
        ".budgets-hist rect title", "(ts) => ts.map((t) => t.textContent)"
    )
    return [int(re.search(r": (\d+) queries$", t).group(1)) for t in titles]


def test_budget_panel_shows_the_servers_budgets_and_is_keyboard_driven(page, server_url):
    analyse(page, server_url, TEXT)
    aid = api(server_url, "/api/analyze", {"text": TEXT})["id"]  # the page's analysis (cached)
    title = page.inner_text("#head-title")
    layer, head = (int(x) for x in re.search(r"Layer (\d+) · head (\d+)", title).groups())
    page.locator(".panel-budgets").scroll_into_view_if_needed()  # fetched once on screen
    wait_budgets(page, layer, head)

    # this head, k at 0.9 (the defaults): the server's median, q10-q90 and every query counted
    one = api(server_url, f"/api/analyses/{aid}/budgets?layer={layer}&head={head}")
    d = one["k"]["0.9"]
    line = head_line(page)
    assert f"median {fmt(d['q'][3], 'k')}" in line, line
    assert f"q10–q90 {fmt(d['q'][1], 'k')}–{fmt(d['q'][5], 'k')}" in line, line
    n = len(d["values"])
    assert sum(bar_counts(page)) == n  # one count per query (every query has support)
    every = api(server_url, f"/api/analyses/{aid}/budgets")
    assert page.locator(".budgets-strip .budgets-head").count() == len(every["heads"])
    pooled = every["pooled"]["k"]["0.9"]["q"][3]
    assert f"median {fmt(pooled, 'k')}" in page.locator(".budgets-line").nth(1).inner_text()

    # the toggles from the keyboard: recall 0.99, then the p (mass) budget
    page.focus('.panel-budgets button[data-budget="level"][data-value="0.99"]')
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")  # to the next group (one tab stop): its pressed "k keys"
    page.keyboard.press("ArrowRight")  # "p mass"
    page.keyboard.press("Space")
    pressed = page.eval_on_selector_all(
        ".panel-budgets button[aria-pressed=true]", "(bs) => bs.map((b) => b.dataset.value)"
    )
    assert pressed == ["0.99", "p"], pressed
    p = one["p"]["0.99"]
    assert f"median {fmt(p['q'][3], 'p')}" in head_line(page), head_line(page)
    assert sum(bar_counts(page)) == n

    # the strip: → opens the next head (page title, the strip's open head, this head's line)
    page.focus(".budgets-strip-box")
    page.keyboard.press("ArrowRight")
    heads = len(every["heads"]) // (1 + max(h["layer"] for h in every["heads"]))
    flat = layer * heads + head + 1
    nl, nh = divmod(flat, heads)
    page.wait_for_function(
        "(t) => document.querySelector('#head-title').textContent.startsWith(t)",
        arg=f"Layer {nl} · head {nh}",
    )
    wait_budgets(page, nl, nh)
    assert page.get_attribute(".budgets-strip .budgets-head.open", "data-index") == str(flat)
    nxt = api(server_url, f"/api/analyses/{aid}/budgets?layer={nl}&head={nh}")["p"]["0.99"]
    assert f"median {fmt(nxt['q'][3], 'p')}" in head_line(page)
