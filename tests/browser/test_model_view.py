"""The whole model (frontend/js/model-view.js) in real Chromium: every head painted
with the current pattern over it, the overlay following the slider, a click or Enter opening a
head, the address reproducing the view; and out-of-range address values clamped with a notice."""

from __future__ import annotations

import urllib.parse

import pytest

from .test_page import TEXT, api, wait_ready

pytestmark = pytest.mark.browser

#: Resolves once every head of the model view is painted with the current setting.
PAINTED = """() => {
  const r = document.getElementById('model-view');
  const n = r.querySelectorAll('.mv-tile').length;
  return n > 0 && r.querySelectorAll('.mv-tile[data-paint="mask"]').length === n
    && r.querySelectorAll('.mv-tile.stale').length === 0;
}"""

#: Per tile: [layer, head, recall shown, count of red (missed) pixels, of blue (kept) pixels].
TILES = """() => [...document.querySelectorAll('#model-view .mv-tile')].map((t) => {
  const c = t.querySelector('canvas');
  const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let red = 0, blue = 0;
  for (let k = 0; k < px.length; k += 4) {
    const [r, g, b] = [px[k], px[k + 1], px[k + 2]];
    if (r > 150 && r > g + 60 && r > b + 60) red++;
    if (b > 150 && b > r + 40) blue++;
  }
  return [Number(t.dataset.layer), Number(t.dataset.head), Number(t.dataset.recall), red, blue];
})"""


def open_model(page, server_url: str, **query: str) -> None:
    q = urllib.parse.urlencode({"text": TEXT, "view": "model", **query})
    page.goto(f"{server_url}/?{q}")
    page.wait_for_function(PAINTED, timeout=60_000)


def analysis_id(server_url: str) -> dict:
    return api(server_url, "/api/analyze", {"text": TEXT, "alpha": 1.5, "causal": False})


def test_the_model_view_paints_every_head_with_the_pattern(page, server_url):
    open_model(page, server_url, method="window", **{"p.window": "1"})
    a = analysis_id(server_url)
    tiles = page.evaluate(TILES)
    assert len(tiles) == a["layers"] * a["heads"] > 1
    assert page.locator("#model-panel").is_visible()
    assert page.locator("#heatmap").is_hidden()  # the one-head panels give way
    for layer, head, recall, _red, _blue in tiles[:4]:  # the page's recall is the server's
        q = urllib.parse.urlencode({"method": "window", "window": 1})
        m = api(server_url, f"/api/analyses/{a['id']}/metrics/{layer}/{head}?{q}")
        assert recall == pytest.approx(m["recall"], abs=1e-6), (layer, head)
    for layer, head, recall, red, blue in tiles:
        # a missed gold edge is never pooled away: red iff the pattern misses one
        assert (red > 0) == (recall < 1), (layer, head, recall, red)
        assert blue > 0 or recall == 0, (layer, head)
    labels = page.locator("#model-view .mv-rv").all_inner_texts()
    assert all(t.strip() for t in labels)
    assert "mean recall" in page.inner_text("#model-readout")


def test_the_overlay_follows_the_slider(page, server_url):
    open_model(page, server_url, method="window", **{"p.window": "1"})
    before = page.evaluate(TILES)
    box = page.locator('input[data-param="window"]')
    box.fill("9")
    box.dispatch_event("input")
    page.wait_for_function(
        "() => new URLSearchParams(location.search).get('p.window') === '9'", timeout=30_000
    )
    page.wait_for_function(PAINTED, timeout=60_000)
    after = page.evaluate(TILES)
    # a wider band keeps every pair the narrow one kept: recall never drops, and rises somewhere
    assert all(b[2] >= a[2] - 1e-9 for a, b in zip(before, after, strict=True))
    assert sum(b[2] for b in after) > sum(a[2] for a in before)
    assert sum(b[3] for b in after) < sum(a[3] for a in before)  # fewer missed (red) pixels
    assert "window 9" in page.inner_text("#model-readout")


def test_a_click_or_enter_opens_a_head(page, server_url):
    open_model(page, server_url)
    page.locator('.mv-tile[data-layer="1"][data-head="2"]').click()
    wait_ready(page)
    assert "Layer 1 · head 2" in page.inner_text("#head-title")
    assert page.locator("#model-panel").is_hidden()
    page.wait_for_function("() => !new URLSearchParams(location.search).has('view')")
    # back to the whole model by its toggle; the heads are one tab stop; arrows, then Enter
    page.click('button[data-toggle="view"][data-value="model"]')
    page.wait_for_function(PAINTED, timeout=60_000)
    stops = page.locator('#model-view .mv-tile[tabindex="0"]')
    assert stops.count() == 1
    assert stops.first.get_attribute("aria-current") == "true"  # the open head
    stops.first.focus()
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowRight")
    assert "Layer 0, head 3" in page.inner_text("#model-readout")  # read out by keyboard
    page.keyboard.press("Enter")
    wait_ready(page)
    assert "Layer 0 · head 3" in page.inner_text("#head-title")


def test_the_address_reproduces_the_model_view(page, browser, server_url):
    page.goto(f"{server_url}/?{urllib.parse.urlencode({'text': TEXT})}")
    wait_ready(page)
    page.click('button[data-toggle="view"][data-value="model"]')
    box = page.locator('input[data-param="window"]')
    box.fill("5")
    box.dispatch_event("input")
    page.wait_for_function(PAINTED, timeout=60_000)
    page.wait_for_function(
        """() => { const q = new URLSearchParams(location.search);
                   return q.get('view') === 'model' && q.get('p.window') === '5'; }"""
    )
    shown = page.evaluate(TILES)
    other = browser.new_page(viewport={"width": 1440, "height": 900})
    try:
        other.goto(page.url)
        other.wait_for_function(PAINTED, timeout=60_000)
        assert other.locator("#model-panel").is_visible()
        assert [t[:3] for t in other.evaluate(TILES)] == [t[:3] for t in shown]
    finally:
        other.close()


def test_out_of_range_address_values_are_clamped_with_a_notice(page, server_url):
    q = urllib.parse.urlencode({"text": TEXT, "alpha": "7", "layer": "99", "head": "1",
                                "method": "window", "p.window": "5000", "hide": "yes"})  # fmt: skip
    page.goto(f"{server_url}/?{q}")
    wait_ready(page)
    a = analysis_id(server_url)
    last = a["layers"] - 1
    assert "α = 2" in page.inner_text("#status")  # the maximum, not the default
    assert f"Layer {last} · head 1" in page.inner_text("#head-title")  # the last layer, not 0
    note = page.locator('[data-error-for="_"]')
    note.wait_for(state="visible")
    page.wait_for_function(
        "() => document.querySelector('[data-error-for=\"_\"]').textContent.includes('p.window')"
    )
    text = note.inner_text()
    assert "alpha=7 is above the maximum 2: using 2" in text
    assert f"layer=99 is above the last layer {last}: using {last}" in text
    spec = next(m for m in a["methods"] if m["name"] == "window")
    top = next(p for p in spec["params"] if p["name"] == "window")["max"]
    assert f"p.window=5000 is above the maximum {top}: using {top}" in text
    assert 'hide must be 1 or 0, got "yes"' in text  # garbage is still left out
    assert page.input_value('input[data-param="window"]') == str(top)
    page.wait_for_function(
        "(m) => new URLSearchParams(location.search).get('p.window') === String(m)", arg=top
    )


#: Per tile: the picture's width in pooled cells (one cell a token for a short text).
WIDTHS = "() => [...document.querySelectorAll('#model-view .mv-tile canvas')].map((c) => c.width)"


def test_hiding_cls_and_sep_leaves_them_out_of_every_head(page, server_url):
    a = analysis_id(server_url)
    n = a["n"]
    open_model(page, server_url, method="window", **{"p.window": "1"})
    assert set(page.evaluate(WIDTHS)) == {n}  # a short text: one cell a token
    with_special = page.evaluate(TILES)
    open_model(page, server_url, method="window", hide="1", **{"p.window": "1"})
    assert set(page.evaluate(WIDTHS)) == {n - 2}  # [CLS] and [SEP] left out
    without = page.evaluate(TILES)
    # the recall shown is the head's (every token); the picture only drops two rows and columns
    assert [t[2] for t in without] == [t[2] for t in with_special]
    assert sum(t[4] for t in without) < sum(t[4] for t in with_special)


def test_the_model_panel_has_its_own_cls_sep_toggle(page, server_url):
    a = analysis_id(server_url)
    open_model(page, server_url, method="window", **{"p.window": "1"})
    page.locator('#model-panel button[data-toggle="hideSpecial"][data-value="true"]').click()
    page.wait_for_function(
        "() => new URLSearchParams(location.search).get('hide') === '1'", timeout=30_000
    )
    page.wait_for_function(f"() => ({WIDTHS})().every((w) => w === {a['n'] - 2})", timeout=30_000)
    pressed = page.locator('#model-panel button[data-value="true"]').get_attribute("aria-pressed")
    assert pressed == "true"
