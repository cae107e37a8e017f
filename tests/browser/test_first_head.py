"""The page's first head request carries the shown method's data only
(frontend/js/session.js ``loadHead``), in real Chromium: ``?part=graph&method=<shown>`` first, every
other method's data (``?part=methods``) once the head and its Pareto data are in; a method switched
to before that shows "loading", then exactly the overlay and metrics a whole payload gives; compare
mode still draws pane B. Screenshots with ``SPARSESCOPE_SHOTS=DIR``."""

from __future__ import annotations

import urllib.parse

import pytest

from .test_compare import counts
from .test_first_summary import shot
from .test_page import TEXT, api, heatmap_pixels, metric, wait_ready

pytestmark = pytest.mark.browser

HEADS = "**/api/analyses/*/heads/*/*?*"


def head_urls(urls: list[str]) -> list[str]:
    """The head payload requests among ``urls`` (not tiles), from ``/heads/`` on."""
    return [
        "/heads/" + u.split("/heads/")[1] for u in urls if "/heads/" in u and "/tiles/" not in u
    ]


def goto(page, server_url: str, **query: str) -> None:
    page.goto(f"{server_url}/?{urllib.parse.urlencode({'text': TEXT, **query})}")


def shown(page) -> dict:
    return {"recall": metric(page, "recall"), "sparsity": metric(page, "sparsity"),
            "pixels": heatmap_pixels(page)}  # fmt: skip


def test_first_head_asks_the_shown_methods_data_then_the_rest(page, server_url, tmp_path):
    seen: list[tuple[str, str]] = []
    page.on("request", lambda r: seen.append(("request", r.url)))
    page.on("requestfinished", lambda r: seen.append(("finished", r.url)))
    with page.expect_response(lambda r: "?part=methods" in r.url and r.ok, timeout=60_000):
        goto(page, server_url, method="topk", layer="1", head="2")
    wait_ready(page)
    asked = head_urls([u for w, u in seen if w == "request"])
    assert asked[0] == "/heads/1/2?part=graph&method=topk", asked
    # never the whole payload; the open head's rest once its Pareto data had arrived
    assert all("part=" in u for u in asked), asked
    rest = next(
        k for k, (w, u) in enumerate(seen) if w == "request" and "/heads/1/2?part=methods" in u
    )
    assert any(w == "finished" and "/pareto?layer=1&head=2" in u for w, u in seen[:rest]), seen
    assert metric(page, "recall") != "–"
    page.wait_for_selector("#pareto .scatterlayer .trace")
    shot(page, tmp_path, "first-head-open")


def test_a_method_switched_to_before_the_rest_shows_the_whole_heads_overlay(
    page, browser, server_url, tmp_path
):
    held, released = [], []

    def hold(route):
        route.continue_() if released else held.append(route)

    page.route("**/api/analyses/*/heads/*/*?part=methods*", hold)
    goto(page, server_url, method="topk")
    wait_ready(page)  # top-k's mask from the first request alone
    for _ in range(300):  # the rest is asked for once the head's Pareto data are in
        if held:
            break
        page.wait_for_timeout(100)
    assert held, "the page did not ask for the head's other methods' data"
    page.select_option("#method", "reformer")
    page.wait_for_function(
        "() => document.querySelector('#metrics .field-error')?.textContent.includes('loading')"
    )
    assert metric(page, "recall") == "–"
    released.append(True)
    for route in held:
        route.continue_()
    page.wait_for_function(
        """() => document.querySelector('.metric-recall .metric-value').textContent !== '–'
            && document.querySelector('#metrics .field-error').hidden"""
    )
    got = shown(page)
    shot(page, tmp_path, "first-head-switched")

    # the reference: Reformer on a page whose head payloads are whole (today's), same view
    ref = browser.new_context(viewport=page.viewport_size).new_page()
    base = lambda url: url.split("?")[0]  # noqa: E731 - the whole payload
    ref.route(HEADS, lambda route: route.continue_(url=base(route.request.url))
              if "/tiles/" not in route.request.url else route.continue_())  # fmt: skip
    goto(ref, server_url, method="reformer")
    wait_ready(ref)
    want = shown(ref)
    ref.context.close()
    assert got["recall"] == want["recall"] and got["sparsity"] == want["sparsity"]
    assert got["pixels"] == want["pixels"]


def test_compare_modes_draw_pane_b(page, server_url, tmp_path):
    # method mode: A shows a method without data of its own (its head: the graph alone), B top-k
    goto(page, server_url, method="window", cmp="method", cm="topk")
    wait_ready(page)
    got = counts(page)
    a = api(server_url, "/api/analyze", {"text": TEXT})
    mb = api(server_url, f"/api/analyses/{a['id']}/metrics/0/0?method=topk")
    assert got["only-b"] + got["both"] == round((1 - mb["sparsity"]) * a["n"] ** 2)
    assert "B's mask:" not in page.inner_text("#compare")
    shot(page, tmp_path, "first-head-compare-method")
    # head mode: B follows A's method, also one A's first request did not carry
    goto(page, server_url, method="topk", cmp="head", cl="1", ch="3")
    wait_ready(page)
    counts(page)
    page.select_option("#method", "reformer")
    page.wait_for_function(
        "() => document.querySelector('.metric-recall .metric-value').textContent !== '–'"
    )
    page.wait_for_timeout(300)
    assert "B's mask:" not in page.inner_text("#compare")
    shot(page, tmp_path, "first-head-compare-head")
