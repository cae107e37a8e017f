"""Block sparsity on the page, in a real headless Chromium: the metrics panel's
block figure is the server's for the tile size picked in its header, follows the picker, lives in
the address bar, drives the Pareto plot's x-axis on request, and goes into the CSV export."""

from __future__ import annotations

import csv
import io
import os
import urllib.parse

import pytest

from .test_page import api, wait_ready

pytestmark = pytest.mark.browser

# ~150 tokens: tiles of 16, 32, 64 and 128 all cut the grid differently (the last ones ragged)
LONG = " ".join(
    ["The chef who ran to the store was out of food, so he went back home quickly."] * 8
)
# the page's own store module (the versioned URL main.js was loaded from: one module instance)
STORE = "import(new URL('state.js', document.querySelector('script[type=module]').src).href)"
SETTING = {"method": "window", "window": 5, "globals": False}


def block_figure(page) -> str:
    return page.locator(".metric-block .metric-value").inner_text()


def server_metrics(server_url: str, analysis_id: str, layer: int, head: int) -> dict:
    q = urllib.parse.urlencode({k: str(v).lower() for k, v in SETTING.items()})
    return api(server_url, f"/api/analyses/{analysis_id}/metrics/{layer}/{head}?{q}")


def open_long_text(page, server_url: str, extra: dict | None = None) -> dict:
    """Open the page on LONG with the window setting; the API's analysis of the same text."""
    q = {"text": LONG, "alpha": "1.5", "layer": "0", "head": "0", "method": "window"}
    q |= {"p.window": "5", "p.globals": "0"}  # head (0, 0) named: a text alone opens another
    page.goto(f"{server_url}/?{urllib.parse.urlencode({**q, **(extra or {})})}")
    wait_ready(page)
    page.wait_for_function(
        "() => document.querySelector('.metric-block .metric-value').textContent !== '–'"
    )
    return api(server_url, "/api/analyze", {"text": LONG, "alpha": 1.5})


def test_panel_block_figure_is_the_servers_and_follows_the_picker(page, server_url, tmp_path):
    analysis = open_long_text(page, server_url)
    n = analysis["n"]
    assert n > 128 and n % 64 != 0, n  # ragged last tiles at every size
    want = server_metrics(server_url, analysis["id"], 0, 0)["block_sparsity"]
    assert len({f"{v:.3f}" for v in want.values()}) == 4, want  # the sizes tell apart

    # default: 128 × 128 tiles, the 128 button pressed, the figure the server's
    assert page.get_attribute('[data-toggle="block"][data-value="128"]', "aria-pressed") == "true"
    assert "128 × 128" in page.inner_text(".metric-block .metric-name")
    assert block_figure(page) == f"{want['128']:.3f}"
    # the token sparsity sits beside it, unchanged by the picker
    sparsity = page.locator(".metric-sparsity .metric-value").inner_text()

    for b in ("64", "16", "32", "128", "64"):
        page.click(f'[data-toggle="block"][data-value="{b}"]')
        page.wait_for_function(
            "(b) => document.querySelector('.metric-block').dataset.block === b", arg=b
        )
        assert block_figure(page) == f"{want[b]:.3f}", b
        assert f"{b} × {b}" in page.inner_text(".metric-block .metric-name")
        assert page.locator(".metric-sparsity .metric-value").inner_text() == sparsity
    # the JS figure is the server's to the last bit, not only to 3 decimals
    js = page.evaluate(STORE + ".then((s) => s.get().result.metrics.block_sparsity)")
    assert js == want

    # another setting changes the figure, still the server's: global tokens fill the tiles of
    # the first and last rows and columns
    page.check('[data-param="globals"]')
    page.wait_for_function(
        "(v) => document.querySelector('.metric-block .metric-value').textContent !== v",
        arg=f"{want['64']:.3f}",
    )
    wider = {**SETTING, "globals": True}
    q = urllib.parse.urlencode({k: str(v).lower() for k, v in wider.items()})
    got = api(server_url, f"/api/analyses/{analysis['id']}/metrics/0/0?{q}")["block_sparsity"]
    assert block_figure(page) == f"{got['64']:.3f}"

    # the choice is in the address bar and a reload restores it
    page.wait_for_function(
        """() => { const q = new URLSearchParams(location.search);
            return q.get('block') === '64' && q.get('p.globals') === '1'; }"""
    )
    page.reload()
    wait_ready(page)
    assert page.get_attribute('[data-toggle="block"][data-value="64"]', "aria-pressed") == "true"
    assert block_figure(page) == f"{got['64']:.3f}"
    shot = os.environ.get("SPARSESCOPE_SCREENSHOT_DIR", str(tmp_path))
    page.screenshot(path=os.path.join(shot, "block-panel.png"))


def test_pareto_x_block_and_csv_export(page, server_url):
    analysis = open_long_text(page, server_url, {"block": "32"})
    page.click('[data-toggle="paretoX"][data-value="block"]')
    page.wait_for_function(
        """() => { const gd = document.getElementById('pareto');
            return gd.layout && gd.layout.xaxis.title.text.startsWith('block sparsity (32'); }""",
        timeout=30_000,
    )
    served = api(
        server_url, f"/api/analyses/{analysis['id']}/pareto?layer=0&head=0&x=block&block=32"
    )
    # the plotted frontier of a method is the server's frontier over block sparsity at 32
    plotted = page.evaluate(
        """() => document.getElementById('pareto').data
              .filter((t) => t.mode === 'lines+markers')
              .map((t) => ({ name: t.legendgroup, x: t.x, y: t.y }))"""
    )
    win = next(t for t in plotted if t["name"] == "window")
    front = served["frontiers"]["window"]
    assert win["x"] == [served["points"][k]["block_sparsity"]["32"] for k in front]
    assert win["y"] == [served["points"][k]["recall"] for k in front]
    page.wait_for_function("() => new URLSearchParams(location.search).get('px') === 'block'")
    assert page.inner_text("#h-pareto") == "Block sparsity – recall"
    assert "32 × 32 tiles" in page.inner_text("#pareto-note")

    # the CSV export: the current setting's row carries the server's block sparsity at every size
    page.click(".export-menu summary")  # the view's downloads sit behind "Download…"
    with page.expect_download() as dl:
        page.click('[data-export="metrics-csv"]')
    rows = list(csv.DictReader(io.StringIO(open(dl.value.path(), encoding="utf-8").read())))
    current = rows[0]
    assert current["row"] == "current" and current["method"] == "window"
    want = server_metrics(server_url, analysis["id"], 0, 0)
    for b, v in want["block_sparsity"].items():
        assert float(current[f"block_sparsity_{b}"]) == v, b
    assert float(current["sparsity"]) == want["sparsity"]
    sweep = [r for r in rows if r["row"] == "sweep"]
    assert len(sweep) == len(served["points"])
    on_front = {k for k, r in enumerate(sweep) if r["on_frontier"] == "1"}
    assert on_front == {k for ks in served["frontiers"].values() for k in ks}

    # the mean over heads: the star is the mean block sparsity (computed over every head in JS)
    page.click('[data-toggle="scope"][data-value="mean"]')
    page.wait_for_function(
        """() => document.getElementById('pareto-note').textContent.startsWith(
                'mean over all heads · x: 32 × 32 tiles · ★')
            && document.querySelector('.pareto-star').style.visibility === 'visible'""",
        timeout=30_000,
    )
    mean = page.evaluate(STORE + ".then((s) => s.get().meanMetrics.block_sparsity)")
    per_head = [
        server_metrics(server_url, analysis["id"], layer, head)["block_sparsity"]
        for layer in range(analysis["layers"])
        for head in range(analysis["heads"])
    ]
    for b in ("16", "32", "64", "128"):
        assert mean[b] == pytest.approx(sum(h[b] for h in per_head) / len(per_head), abs=1e-12)
    shot = os.environ.get("SPARSESCOPE_SCREENSHOT_DIR")
    if shot:
        page.screenshot(path=os.path.join(shot, "block-pareto.png"), full_page=True)


def test_a_share_keeps_the_tile_size_and_the_axis(page, server_url):
    """The tile size and the Pareto axis travel in a share link's saved view."""
    open_long_text(page, server_url, {"block": "16", "px": "block"})
    state = page.evaluate(
        """async () => {
            const base = document.querySelector('script[type=module]').src;
            const { shareState } = await import(new URL('share.js', base).href);
            const store = await import(new URL('state.js', base).href);
            return shareState(store.get());
        }"""
    )
    assert state["view"] == {"block": "16", "paretoX": "block"}
    share = api(server_url, "/api/share", {"state": state})
    page.goto(server_url + share["url"])
    wait_ready(page)
    for key, value in (("block", "16"), ("paretoX", "block")):
        button = f'[data-toggle="{key}"][data-value="{value}"]'
        assert page.get_attribute(button, "aria-pressed") == "true", key
    assert "16 × 16" in page.inner_text(".metric-block .metric-name")


def test_embed_shows_the_shared_tile_size(page, server_url, tmp_path):
    """The embed of a share shows the block sparsity at the shared view's tile size."""
    analysis = api(server_url, "/api/analyze", {"text": LONG, "alpha": 1.5})
    state = {
        "text": LONG, "alpha": 1.5, "causal": False, "layer": 0, "head": 0,
        "method": "window", "params": {"window": 5, "globals": False}, "view": {"block": "64"},
    }  # fmt: skip
    share = api(server_url, "/api/share", {"state": state})
    page.goto(server_url + share["embed"])
    want = server_metrics(server_url, analysis["id"], 0, 0)["block_sparsity"]["64"]
    page.wait_for_function(
        "(v) => document.querySelector('dd[data-metric=block]').textContent === v",
        arg=f"{want:.3f}",
        timeout=30_000,
    )
    assert page.inner_text("#embed-block-name") == "block sparsity (64)"
    shot = os.environ.get("SPARSESCOPE_SCREENSHOT_DIR", str(tmp_path))
    page.screenshot(path=os.path.join(shot, "block-embed.png"))
