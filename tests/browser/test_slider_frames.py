"""What a slider frame does and what it leaves for later (docs/benchmarks.md, "Page"), in a
real headless Chromium: after a fast drag (bursts of input events, some within one frame) the
metrics, their bars and the Pareto star show the slider's final value, the server's figures for
it; the address bar is rewritten only once the view has been still for 200 ms, with the final
value; the star is drawn on its canvas where the current setting lies on the plot's axes."""

from __future__ import annotations

import urllib.parse

import pytest

from .test_block_sparsity import LONG, STORE
from .test_page import api, wait_ready

pytestmark = pytest.mark.browser

#: A drag over the window slider: bursts of input events (``burst`` in one task, the way a fast
#: pointer or key repeat delivers them between two frames), a frame between bursts; every call
#: of history.replaceState is recorded with the time since the last input event before it.
DRAG_JS = """async ([values, burst]) => {
  const frame = () => new Promise((r) => requestAnimationFrame(() => r()));
  window.__writes = [];
  let lastInput = 0;
  const replace = history.replaceState.bind(history);
  history.replaceState = (st, t, url) => {
    window.__writes.push({ after: performance.now() - lastInput, url: String(url) });
    return replace(st, t, url);
  };
  for (let k = 0; k < values.length; k++) {
    const c = document.querySelector('[data-range="window"]');
    c.value = String(values[k]);
    lastInput = performance.now();
    c.dispatchEvent(new Event('input', { bubbles: true }));
    if ((k + 1) % burst === 0) await frame();
  }
  return { last: Number(document.querySelector('[data-param="window"]').value) };
}"""

#: The star's centre on the plot (page px, from the axes), and the canvas' alpha there and
#: 40 px to its left and right (the star's radius is 12 px).
STAR_JS = """([x, recall]) => {
  const gd = document.getElementById('pareto');
  const size = gd._fullLayout._size;
  const [x0, x1] = gd.layout.xaxis.range;
  const [y0, y1] = gd.layout.yaxis.range;
  const c = document.querySelector('canvas.pareto-star');
  const box = c.getBoundingClientRect();
  const g = gd.getBoundingClientRect();
  const px = g.left + size.l + (x - x0) / (x1 - x0) * size.w - box.left;
  const py = g.top + size.t + (1 - (recall - y0) / (y1 - y0)) * size.h - box.top;
  const dpr = c.width / box.width;
  const alpha = (dx) => c.getContext('2d').getImageData(
    Math.round((px + dx) * dpr), Math.round(py * dpr), 1, 1).data[3];
  return { visible: getComputedStyle(c).visibility, centre: alpha(0), left: alpha(-40),
           right: alpha(40) };
}"""


def _open(page, server_url: str) -> dict:
    q = {"text": LONG, "alpha": "1.5", "layer": "0", "head": "0", "method": "window"}
    q |= {"p.window": "5", "p.globals": "0"}  # head (0, 0) named: a text alone opens another
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{server_url}/?{urllib.parse.urlencode(q)}")
    wait_ready(page)
    page.wait_for_selector("#pareto .scatterlayer .trace", timeout=30_000)
    return api(server_url, "/api/analyze", {"text": LONG, "alpha": 1.5})


def _server(server_url: str, analysis_id: str, window: int) -> dict:
    return _server_at(server_url, analysis_id, 0, 0, window)


def _server_at(server_url: str, analysis_id: str, layer: int, head: int, window: int) -> dict:
    """The server's metrics of the window method (globals off) on one head."""
    q = urllib.parse.urlencode({"method": "window", "window": str(window), "globals": "false"})
    return api(server_url, f"/api/analyses/{analysis_id}/metrics/{layer}/{head}?{q}")


def _positions(page, count: int) -> list[int]:
    """Scattered slider positions (the range's own scale), ending away from the start."""
    hi = int(page.get_attribute('[data-range="window"]', "max"))
    return [(k * 7919 + 3) % (hi + 1) for k in range(count)]


def test_a_fast_drag_shows_the_final_value_and_writes_the_address_once_settled(page, server_url):
    analysis = _open(page, server_url)
    positions = _positions(page, 90)  # 30 frames: longer than the 200 ms settle
    got = page.evaluate(DRAG_JS, [positions, 3])
    last = got["last"]
    assert last != 5  # the drag moved the setting
    # the frame after the last burst shows the last value's metrics, the server's figures
    want = _server(server_url, analysis["id"], last)
    page.wait_for_function(
        "(r) => document.querySelector('.metric-recall .metric-value').textContent === r",
        arg=f"{want['recall']:.3f}",
        timeout=10_000,
    )
    assert page.inner_text(".metric-sparsity .metric-value") == f"{want['sparsity']:.3f}"
    bar = page.evaluate(
        "() => document.querySelector('.metric-recall .metric-bar span').style.backgroundSize"
    )
    assert bar == f"{want['recall'] * 100:.1f}% 100%"
    # the address: untouched during the drag, then written once with the final value
    page.wait_for_function(
        "(w) => new URLSearchParams(location.search).get('p.window') === w",
        arg=str(last),
        timeout=10_000,
    )
    page.wait_for_timeout(400)  # nothing left to write
    writes = page.evaluate("() => window.__writes")
    assert writes, "the address was written after the drag"
    # written only once the view was still for 200 ms (a busy machine's frame can be that long:
    # then a write in the drag is right), never while steps come faster; the last is the final
    assert all(w["after"] >= 199 for w in writes), writes
    assert f"p.window={last}&" in writes[-1]["url"] + "&", writes[-1]


def test_the_star_is_drawn_where_the_setting_lies_and_follows_the_slider(page, server_url):
    analysis = _open(page, server_url)
    page.locator("#pareto").scroll_into_view_if_needed()
    for window in (5, 41):
        page.fill('[data-param="window"]', str(window))
        want = _server(server_url, analysis["id"], window)
        page.wait_for_function(
            "(r) => document.querySelector('.metric-recall .metric-value').textContent === r",
            arg=f"{want['recall']:.3f}",
        )
        page.wait_for_timeout(100)  # the frame that moved the star
        star = page.evaluate(STAR_JS, [want["sparsity"], want["recall"]])
        assert star["visible"] == "visible", star
        assert star["centre"] > 200, star  # opaque: the star's fill
        assert star["left"] == 0 and star["right"] == 0, star  # and nothing else drawn


def test_the_mean_over_heads_follows_a_drag_through_running_sweeps(page, server_url):
    """With the Pareto plot on the mean over heads, the sweep (sweep.js) runs after every pause
    of the drag (a step that comes while it runs cancels it); once the drag ends, the mean is the
    final setting's, over every head, as the server computes each head."""
    analysis = _open(page, server_url)
    page.click('[data-toggle="scope"][data-value="mean"]')
    page.wait_for_function(f"() => {STORE}.then((s) => s.get().meanMetrics !== null)")
    positions = _positions(page, 7)
    for k, pos in enumerate(positions):
        page.evaluate(
            """(v) => { const c = document.querySelector('[data-range="window"]');
                c.value = String(v); c.dispatchEvent(new Event('input', { bubbles: true })); }""",
            pos,
        )
        page.wait_for_timeout(150 + 60 * k)  # some pauses pass the settle: a sweep starts
    last = int(page.input_value('[data-param="window"]'))
    page.wait_for_function(
        f"""(w) => {STORE}.then((s) => s.get().meanMetrics !== null
            && s.get().params.window === w)""",
        arg=last,
        timeout=30_000,
    )
    mean = page.evaluate(f"() => {STORE}.then((s) => s.get().meanMetrics)")
    heads = [
        _server_at(server_url, analysis["id"], layer, head, last)
        for layer in range(analysis["layers"])
        for head in range(analysis["heads"])
    ]
    for key in ("recall", "sparsity", "mass_recall"):
        want = sum(h[key] for h in heads) / len(heads)
        assert mean[key] == pytest.approx(want, abs=1e-9), key
