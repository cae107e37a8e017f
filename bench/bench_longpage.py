"""The page at n ≈ 4,096 in headless Chromium: first painted heatmap after the analysis returns,
the head payload's size, slider updates, pan / zoom repaints; and the screenshots of the long page.

    python bench/bench_longpage.py --n 4096                       # tiny 2x4 model, 4,096 positions
    python bench/bench_longpage.py --n 4096 --shape minilm        # MiniLM's shape (6 x 12, d 384)
    python bench/bench_longpage.py --n 4096 --screenshots docs/screenshots

The model is a tiny random entmax BERT (sparse_core.testing.tiny_model) with ``--n`` positions
(until a real model with tiled positions exists), with a random Sparsefinder artefact; the text is
WikiText-2 cut to exactly n tokens. "first paint" is the time from the end of the
``POST /api/analyze`` response (Resource Timing) to the frame that shows the first head
(the page's ``heatmap-head-paint`` mark, heatmap.js), the head payload fetched in between (at
n > 1,024 its graph part, ``?part=graph``); "whole head" the repaint once the head's methods'
part (``?part=methods``) is in and the method's mask drawn. The same script runs on a checkout
without parts (one head payload: then only "first paint").
Slider updates are the page's own "slider-update" measures (live.js) over ``--steps`` positions of
the window slider; pan / zoom repaints the "lod-paint" measures of wheel zooms and drags.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests" / "browser")]

from tests.checkout import use_the_checkout  # noqa: E402

use_the_checkout()  # ``import sparsescope``: this checkout's app/, not an installed copy

from api_latency import texts_of_n_tokens  # noqa: E402
from bench_page import SLIDE_JS, pct  # noqa: E402
from conftest import CHROMIUM_ARGS, chromium_path, free_port, random_artefact  # noqa: E402

FIRST_PAINT_JS = r"""() => {
  const res = performance.getEntriesByType('resource');
  const done = res.filter((e) => e.name.endsWith('/api/analyze')).at(-1).responseEnd;
  const paints = performance.getEntriesByName('heatmap-head-paint')
    .filter((m) => m.startTime >= done);
  // ours only: the landing example's background prefetch of its heads may run meanwhile
  const after = res.filter((e) => e.startTime >= done);
  const heads = after.filter((e) => e.name.includes('/heads/') && !e.name.includes('/tiles/'));
  const graph = heads.find((e) => !e.name.includes('part=methods')) ?? null;
  const methods = heads.find((e) => e.name.includes('part=methods')) ?? null;
  const size = (e) => (e ? { bytes: e.encodedBodySize, decoded: e.decodedBodySize,
                              fetch: e.responseEnd - e.startTime } : null);
  return { afterAnalyze: paints.length ? paints[0].startTime - done : null,
           whole: paints.length ? paints.at(-1).startTime - done : null,
           paints: paints.length, graph: size(graph), methods: size(methods),
           requests: after.filter((e) => e.name.includes('/api/')).map((e) => [
             e.name.replace(/^.*\/api\//, '').replace(/analyses\/[0-9a-f]+/, '{id}'),
             e.startTime - done, e.responseEnd - done, e.decodedBodySize]) };
}"""

ZOOM_JS = """async (count) => {
  const el = document.querySelector('.heatmap-overlay');
  const box = el.getBoundingClientRect();
  const frame = () => new Promise((r) => requestAnimationFrame(() => r()));
  const out = [];
  for (let k = 0; k < count; k++) {
    const t0 = performance.now();
    el.dispatchEvent(new WheelEvent('wheel', { deltaY: k % 2 ? 160 : -320, ctrlKey: true,
      clientX: box.left + box.width * 0.55, clientY: box.top + box.height * 0.5,
      bubbles: true, cancelable: true }));
    await frame();
    out.push(performance.now() - t0);
  }
  return out;
}"""


def start_server(model, artefact, n: int) -> str:
    import tempfile
    import threading

    import uvicorn

    from sparsescope.engine.service import AnalysisService
    from sparsescope.engine.settings import Settings
    from sparsescope.web.main import create_app

    settings = Settings(data_dir=Path(tempfile.mkdtemp()), warmup=False, max_tokens=n)
    service = AnalysisService(settings, model=model, artefact=artefact)
    port = free_port()
    app = create_app(settings, service)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--shape", choices=["tiny", "minilm"], default="tiny")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--timeout", type=int, default=600, help="seconds to wait for the heatmap")
    ap.add_argument("--screenshots", type=Path, default=None, help="write the PNGs here")
    args = ap.parse_args()

    from playwright.sync_api import sync_playwright

    from sparse_core.testing import tiny_model

    shape = dict(layers=6, heads=12, hidden=384) if args.shape == "minilm" else {}
    model = tiny_model(max_positions=args.n, **shape)
    base = start_server(model, random_artefact(model), args.n)
    text = texts_of_n_tokens(model, args.n, 1)[0]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.on("pageerror", lambda e: print(f"page error: {e}", file=sys.stderr))
        page.on("console", lambda m: m.type == "error" and print(m.text, file=sys.stderr))
        page.goto(base + "/", timeout=args.timeout * 1000)
        page.wait_for_function(  # the landing example painted: then only ours counts
            "() => performance.getEntriesByName('heatmap-head-paint').length > 0",
            timeout=args.timeout * 1000,
        )
        page.evaluate(
            "() => { performance.clearMarks('heatmap-head-paint'); "
            "performance.clearResourceTimings(); "
            "performance.setResourceTimingBufferSize(100000); }"
        )
        page.fill("#text", text)
        t0 = time.perf_counter()
        page.click("#analyze")
        page.wait_for_function(
            "() => performance.getEntriesByName('heatmap-head-paint').length > 0",
            timeout=args.timeout * 1000,
        )
        wall = time.perf_counter() - t0
        # the head's methods' part (a long text's second request) and the repaint with the mask
        page.wait_for_function(
            """() => !performance.getEntriesByType('resource').some((e) =>
                 e.name.includes('part=graph')) ||
                 performance.getEntriesByName('heatmap-head-paint').length >= 2""",
            timeout=args.timeout * 1000,
        )
        page.wait_for_timeout(500)
        fp = page.evaluate(FIRST_PAINT_JS)
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"n = {args.n}, model {model.model_id} ({args.shape}), load average {load}")
        print(f"analyze click -> painted: {wall:.1f} s (server analysis included)")
        g = fp["graph"]
        print(
            f"first paint after the analysis returned: {fp['afterAnalyze']:.0f} ms (head "
            f"{'graph part' if fp['methods'] else 'payload'} {g['bytes'] / 1e6:.2f} MB on the "
            f"wire, {g['decoded'] / 1e6:.2f} MB JSON, fetched in {g['fetch']:.0f} ms)"
        )
        if fp["methods"]:
            m = fp["methods"]
            print(
                f"whole head (methods' part in, mask drawn) after the analysis returned: "
                f"{fp['whole']:.0f} ms (methods' part {m['bytes'] / 1e6:.2f} MB on the wire, "
                f"{m['decoded'] / 1e6:.2f} MB JSON, fetched in {m['fetch']:.0f} ms)"
            )
        for name, t0_, t1_, size in fp["requests"]:  # what the server was asked, and when
            print(f"    {name[:60]:<60} {t0_:8.0f} -> {t1_:8.0f} ms  {size / 1e6:6.2f} MB")
        shots = args.screenshots
        if shots:  # overview (the default method's overlay), the search, a jump into the tiles
            shots.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shots / "long-4k-overview.png"))
            page.fill(".token-search-input", "the")
            page.wait_for_selector(".token-hit")
            page.screenshot(path=str(shots / "long-4k-search.png"))
            page.click(".token-hit >> nth=3")
            page.wait_for_timeout(600)
            page.screenshot(path=str(shots / "long-4k-zoomed.png"))
            page.keyboard.press("Escape")
            page.focus(".heatmap-overlay")
            page.keyboard.press("0")  # back to the overview for the timings
        zooms = page.evaluate(ZOOM_JS, 12)
        print(
            f"wheel zoom -> repainted: p50 {statistics.median(zooms):.1f} ms, "
            f"p95 {pct(zooms, 0.95):.1f} ms ({len(zooms)} steps)"
        )
        page.keyboard.press("Escape")
        res = page.evaluate(SLIDE_JS, ["window", args.steps])
        if res["update"]:
            up = res["update"]
            print(
                f"slider (window) -> repainted: p50 {statistics.median(up):.0f} ms, "
                f"p95 {pct(up, 0.95):.0f} ms ({len(up)} steps)"
            )
        browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
