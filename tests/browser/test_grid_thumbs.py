"""The head grid at a long text in a real headless Chromium: every head's thumbnail is drawn from
the analysis body (app/engine/thumbs.py) at once, without any head payload, and the open head's,
redrawn from its payload, has the same blocks."""

from __future__ import annotations

import pytest
import torch

from sparsescope.engine.thumbs import decode, pool_max

pytestmark = pytest.mark.browser

LONG = " ".join(f"token{k}" for k in range(700))  # over the tiny model's 512 positions

#: Per tile: where its thumbnail came from, whether it is shown, and its pixels' whiteness
#: (one 0/1 per pixel, row-major: 1 = pure white).
TILES_JS = """() => [...document.querySelectorAll('#grid .tile')].map((tile) => {
  const c = tile.querySelector('canvas.tile-thumb');
  const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  const white = [];
  for (let i = 0; i < px.length; i += 4) {
    white.push(px[i] === 255 && px[i + 1] === 255 && px[i + 2] === 255 ? 1 : 0);
  }
  return { source: tile.dataset.thumb || null, hidden: c.hidden, m: c.width,
           layer: Number(tile.dataset.layer), head: Number(tile.dataset.head), white };
})"""


def expected_white(cells: str, k: int, m: int) -> list[int]:
    """The whiteness of a thumbnail drawn m × m from a body string of k × k block states: the
    page pools the states again by max (its darkest pixel) when the tile is under k pixels."""
    grid = torch.tensor(decode(cells, k * k), dtype=torch.float32).view(k, k)
    return [1 if v == 0 else 0 for v in pool_max(grid, m).flatten().tolist()]


def check_tiles(tiles, body, source: str) -> None:
    k = body["thumbs"]["k"]
    for t in tiles:
        where = (t["layer"], t["head"])
        m = t["m"]
        assert t["source"] == source and not t["hidden"] and 1 <= m <= k, where
        # every query attends somewhere: every row of the thumbnail is coloured somewhere
        assert all(0 in t["white"][a * m : (a + 1) * m] for a in range(m)), where
        # and white exactly where the body says every p of the block is 0
        cells = body["thumbs"]["cells"][t["layer"] * body["heads"] + t["head"]]
        assert t["white"] == expected_white(cells, k, m), where


def test_every_head_thumbnail_is_drawn_from_the_body_without_head_payloads(page, server_url):
    held, asked = [], []

    def hold(route):  # head payloads never arrive until the end of the test
        asked.append(route.request.url)
        held.append(route)

    page.route("**/api/analyses/*/heads/**", hold)
    page.goto(server_url + "/")
    page.fill("#text", LONG)
    with page.expect_response(lambda r: r.url.endswith("/api/analyze") and r.ok) as resp:
        page.click("#analyze")
    body = resp.value.json()
    assert body["n"] == 512 and body["truncated"]
    k = body["thumbs"]["k"]
    count = body["layers"] * body["heads"]
    # the page shows the long text's window (the store holds its analysis, the grid is rebuilt)
    page.wait_for_function(
        "() => document.getElementById('status').textContent.includes('tokens 0–')",
        timeout=30_000,
    )
    tiles = page.evaluate(TILES_JS)
    mine = [u for u in asked if f"/analyses/{body['id']}/" in u]
    assert len(mine) <= 1, mine  # at most the open head was asked for, and it has not arrived
    assert len(tiles) == count
    assert {t["m"] for t in tiles} == {k}  # tiles wider than k pixels: drawn k × k
    check_tiles(tiles, body, "body")

    # a narrow grid (tiles under k pixels): every thumbnail pooled again, no row or column lost
    page.add_style_tag(content="#grid { width: 70px !important; }")
    page.wait_for_function(
        "(k) => [...document.querySelectorAll('#grid canvas.tile-thumb')].every("
        "(c) => c.width < k)",
        arg=k,
        timeout=10_000,
    )
    check_tiles(page.evaluate(TILES_JS), body, "body")

    # the payloads arrive: the open head is redrawn from its exact probabilities, same blocks
    for route in held:
        route.continue_()
    page.unroute("**/api/analyses/*/heads/**")
    page.wait_for_selector("#grid .tile[data-thumb='payload']", timeout=30_000)
    redrawn = [t for t in page.evaluate(TILES_JS) if t["source"] == "payload"]
    assert redrawn
    check_tiles(redrawn, body, "payload")
