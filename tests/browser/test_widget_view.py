"""The notebook widget's bundled ESM (sparsescope.widget) rendered in headless Chromium with a
minimal anywidget-like model (get / set / on / off / save_changes): the page's heatmap draws,
a head set in Python redraws, a tile click and the method picker write the traits back."""

from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("anywidget")

from sparsescope.widget import AttentionWidget, bundle  # noqa: E402

TEXT = "The chef who ran to the store was out of food."


@pytest.fixture
def widget(tiny_model):
    return AttentionWidget(tiny_model, TEXT, alpha=1.5)


SHIM = r"""
async ([esm, css, state]) => {
  const listeners = {};
  const data = { ...state };
  window.saved = [];
  window.model = {
    get: (k) => data[k],
    // as Backbone (anywidget's model in Jupyter) does: set fires change:<k> at once, synchronously
    set: (k, v) => {
      data[k] = v;
      window.saved.push([k, v]);
      for (const fn of listeners[`change:${k}`] ?? []) fn();
    },
    on: (ev, fn) => { (listeners[ev] ??= []).push(fn); },
    off: (ev, fn) => { listeners[ev] = (listeners[ev] ?? []).filter((f) => f !== fn); },
    save_changes: () => { window.saves = (window.saves ?? 0) + 1; },
    // what the kernel does: a trait changed in Python
    fromPython: (patch) => {
      Object.assign(data, patch);
      for (const k of Object.keys(patch)) for (const fn of listeners[`change:${k}`] ?? []) fn();
    },
  };
  const style = document.createElement('style');
  style.textContent = css;
  document.head.append(style);
  const url = URL.createObjectURL(new Blob([esm], { type: 'text/javascript' }));
  const mod = await import(url);
  const host = document.createElement('div');
  host.id = 'host';
  document.body.append(host);
  window.cleanup = mod.default.render({ model: window.model, el: host });
}
"""

# a hash of the heatmap's pixels: changes when the drawing does
PIXELS = """() => {
  const c = document.querySelector('#host canvas.heatmap-cells');
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let h = 0;
  for (let k = 0; k < d.length; k += 7) h = (h * 31 + d[k]) >>> 0;
  return [c.width, c.height, h];
}"""


SYNCED = ("layer", "head", "method", "params", "_analysis", "_head", "_recall", "_thumbs")


def _state(w) -> dict:
    """The widget's synced traits as the front end receives them (JSON)."""
    return json.loads(json.dumps({k: getattr(w, k) for k in SYNCED}))


@pytest.mark.browser
def test_the_esm_draws_the_heatmap_and_redraws_on_a_new_head(browser, widget):
    ctx = browser.new_context(viewport={"width": 1200, "height": 900})
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    try:
        page.set_content("<!doctype html><html><body></body></html>")
        page.evaluate(SHIM, [bundle(), AttentionWidget._css, _state(widget)])
        page.wait_for_function("document.getElementById('host').dataset.drawn === '0/0'")
        n_tiles = widget.analysis["layers"] * widget.analysis["heads"]
        assert page.locator("#host .tile").count() == n_tiles
        assert page.locator("#host select#method option").count() >= 5
        # every tile shows its head's graph as a thumbnail (the page's thumbImage)
        assert page.locator("#host .tile.has-thumb").count() == n_tiles
        k = widget._thumbs["k"]
        assert (
            page.evaluate(
                "() => [...document.querySelectorAll('#host canvas.tile-thumb')].map(c => c.width)"
            )
            == [k] * n_tiles
        )
        first = page.evaluate(PIXELS)
        assert first[0] > 0 and first[1] > 0
        # the view's metrics (the JS twin) are Python's (sparse_core.methods.evaluate)
        want = widget.metrics()
        for k in ("recall", "sparsity", "exact", "precision"):
            shown = page.locator(f"#host .metric-{k} .metric-value").text_content()
            assert float(shown) == pytest.approx(want[k], abs=5e-4), k

        # Python sets head = 2: the view redraws that head
        widget.head = 2
        page.evaluate("s => window.model.fromPython(s)", _state(widget))
        page.wait_for_function("document.getElementById('host').dataset.drawn === '0/2'")
        assert page.evaluate(PIXELS) != first
        assert page.locator("#host .tile.open").get_attribute("data-head") == "2"

        # a click on a tile in the view sets layer / head on the model (saved for Python)
        page.locator('#host .tile[data-layer="1"][data-head="3"]').click()
        saved = dict(page.evaluate("window.saved"))
        assert saved["layer"] == 1 and saved["head"] == 3
        # and the view keeps that head (a change event fired inside set must not undo the head)
        assert page.evaluate("[host.dataset.layer, host.dataset.head]") == ["1", "3"]
        assert page.evaluate("window.saves") >= 1
        widget.layer, widget.head = saved["layer"], saved["head"]  # what the kernel applies
        page.evaluate("s => window.model.fromPython(s)", _state(widget))
        page.wait_for_function("document.getElementById('host').dataset.drawn === '1/3'")

        # the method picker writes method + that method's default params
        page.locator("#host select#method").select_option("strided")
        saved = dict(page.evaluate("window.saved"))
        assert saved["method"] == "strided" and "stride" in saved["params"]
        widget.method = saved["method"]
        widget.params = saved["params"]  # valid for Python's validator too
        assert widget.params == saved["params"]
        page.evaluate("s => window.model.fromPython(s)", _state(widget))

        # the grid coloured by recall shows Python's per-head recall of this very setting
        page.locator("#host .sw-toggle button[data-value=recall]").click()
        heads = widget.analysis["heads"]
        for k, r in enumerate(widget._recall["recall"]):
            tile = page.locator(f'#host .tile[data-layer="{k // heads}"][data-head="{k % heads}"]')
            assert tile.text_content() == f"{r:.2f}".lstrip("0") or r == 1.0, (k, r)
            assert "stale" not in (tile.get_attribute("class") or "")

        # a slider dragged through many values: Python gets a few of them, and the last
        page.evaluate("window.saved = []; window.saves = 0")
        page.evaluate(
            """() => {
              const input = document.querySelector('#host input[data-param="window"]');
              for (let v = 0; v <= Number(input.max); v++) {
                input.value = String(v);
                input.dispatchEvent(new Event('input', { bubbles: true }));
              }
              return Number(input.max);
            }"""
        )
        last = int(page.locator('#host input[data-param="window"]').input_value())
        page.wait_for_function(
            "w => (window.saved.filter(([k]) => k === 'params').at(-1) ?? [0, {}])[1].window === w",
            arg=last,
        )
        sent = [v for k, v in page.evaluate("window.saved") if k == "params"]
        assert 1 <= len(sent) < last  # rate-limited, not one message per input event
        widget.params = sent[-1]
        assert widget.params["window"] == last
        shots = os.environ.get("SPARSESCOPE_SHOTS")
        if shots:
            page.screenshot(path=f"{shots}/widget.png", full_page=True)
        assert errors == []
    finally:
        ctx.close()
