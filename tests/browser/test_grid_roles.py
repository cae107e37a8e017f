"""The head grid coloured by role (definitions §11) in a real headless Chromium: every tile takes
its head's role colour and label from GET /api/analyses/{id}/roles, the legend names the roles,
and the open head's panel says its role in words."""

from __future__ import annotations

import json
import urllib.request

import pytest

pytestmark = pytest.mark.browser

TEXT = "The chef who ran to the store was out of food, so he went back home."

#: The role colours and labels of frontend/js/role-words.js, as the browser computes them.
TILES_JS = """() => [...document.querySelectorAll('#grid .tile')].map((t) => ({
  layer: Number(t.dataset.layer), head: Number(t.dataset.head), role: t.dataset.role,
  bg: getComputedStyle(t).backgroundColor, label: t.querySelector('.tile-label').textContent,
  name: t.getAttribute('aria-label'),
}))"""
INFO_JS = """async () => {
  const base = document.querySelector('script[type=module]').src;
  const m = await import(new URL('role-words.js', base).href);
  return Object.fromEntries(Object.entries(m.ROLE_INFO).map(([k, v]) => [k, [v.colour, v.label]]));
}"""


def analysed_text(response) -> bool:
    """The answer to this test's POST /api/analyze (not the first visit's example, whose own
    analysis and roles may still be in flight when the text is typed)."""
    request = response.request
    return (
        response.url.endswith("/api/analyze")
        and request.method == "POST"
        and (request.post_data_json or {}).get("text") == TEXT
    )


def test_the_grid_colours_heads_by_role(page, server_url):
    page.goto(server_url + "/")
    page.fill("#text", TEXT)
    with page.expect_response(analysed_text) as resp:
        page.click("#analyze")
    aid = resp.value.json()["id"]
    with urllib.request.urlopen(f"{server_url}/api/analyses/{aid}/roles") as r:
        roles = json.load(r)["roles"]  # what the page asks for this analysis
    page.wait_for_function(
        "(t) => new URLSearchParams(location.search).get('text') === t", arg=TEXT
    )  # the page shows this text's analysis
    page.wait_for_function(
        "() => document.querySelector('#head-role')?.textContent.includes('rows')"
    )
    at = page.evaluate(
        "() => { const t = document.querySelector('#grid .tile[aria-pressed=true]');"
        " return [Number(t.dataset.layer), Number(t.dataset.head)]; }"
    )
    opened = roles[at[0]][at[1]]
    words = f"{int(100 * opened['share'] + 0.5)} % of rows"  # the open head's role, in words
    page.wait_for_function(
        "(w) => document.querySelector('#head-role').textContent.includes(w)", arg=words
    )

    before = page.evaluate(TILES_JS)
    assert all(t["role"] is None or t["role"] == "" for t in before)  # gold sparsity colours
    page.click("button[data-toggle=gridColour][data-value=role]")
    assert page.get_attribute("button[data-value=role]", "aria-pressed") == "true" or \
        "on" in (page.get_attribute("button[data-value=role]", "class") or "")  # fmt: skip
    page.wait_for_function("() => document.querySelector('#grid .tile')?.dataset.role")
    info = page.evaluate(INFO_JS)
    tiles = page.evaluate(TILES_JS)
    assert len(tiles) == len(roles) * len(roles[0])
    seen = set()
    for t in tiles:
        item = roles[t["layer"]][t["head"]]
        colour, label = info[item["role"]]
        assert t["role"] == item["role"] and t["label"] == label
        assert t["bg"] == colour, (t, colour)
        assert t["name"].startswith(label) and f"layer {t['layer']}" in t["name"]
        seen.add(item["role"])
    legend = page.text_content("#grid-legend")
    assert all(r in legend for r in info)
    # back to gold sparsity: the tiles lose their roles
    page.click("button[data-toggle=gridColour][data-value=gold]")
    page.wait_for_function("() => !document.querySelector('#grid .tile').dataset.role")
    assert "role" not in page.text_content("#grid-legend")
