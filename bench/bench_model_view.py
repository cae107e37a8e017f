"""Time to paint the whole model (frontend/js/model-view.js) in headless Chromium: every head's
picture with the current pattern over it, read from the page's own User Timing measure
("model-view": from the change that asked for the paint to the frame after the last head).

    python bench/bench_model_view.py --n 128 512          # the real model (all-MiniLM-L6-v2)
    python bench/bench_model_view.py --tiny --n 128 512   # tiny random model

Per n: one WikiText-2 text of exactly n tokens is analysed through the page (its heads prefetched
where they fit the page's cache, as a user who waits a moment has them), then, ``--repeats``
times each:

- open: the "whole model" toggle pressed (one head view -> every head painted);
- slider: the window slider moved to another value while the model view is shown (every head's
  mask re-evaluated and repainted; the sweep starts 250 ms after the last input, included).

Also counted: the head payloads the page fetched during the paint (GET …/heads/{l}/{h}): at
n = 512 the page keeps about 30 of the 72 heads (session.js CACHE_CELLS), so every paint fetches
the others again. The server runs in-process (bench_page.py ``start_server``); Chromium is
Debian's. Prints a markdown table with the load average (docs/benchmarks.md, "The whole model").
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests" / "browser")]

from api_latency import texts_of_n_tokens  # noqa: E402
from bench_page import analyse, start_server  # noqa: E402
from conftest import CHROMIUM_ARGS, chromium_path, random_artefact  # noqa: E402

log = logging.getLogger("bench_model_view")

PAINTED = """() => {
  const r = document.getElementById('model-view');
  const n = r.querySelectorAll('.mv-tile').length;
  return n > 0 && r.querySelectorAll('.mv-tile[data-paint="mask"]').length === n
    && r.querySelectorAll('.mv-tile.stale').length === 0
    && performance.getEntriesByName('model-view').length > 0;
}"""
LAST = "performance.getEntriesByName('model-view').at(-1).duration"
PREFETCHED = """([id, count]) => performance.getEntriesByType('resource')
  .filter((e) => e.name.includes(`/analyses/${id}/heads/`)).length >= count"""


HEAD_URL = re.compile(r"/api/analyses/[^/]+/heads/\d+/\d+$")


def count_heads(page) -> list[int]:
    """A counter (one-item list) of the head payloads the page requests from now on."""
    seen = [0]
    page.on("request", lambda r: seen.__setitem__(0, seen[0] + bool(HEAD_URL.search(r.url))))
    return seen


def bench_n(browser, base: str, model, n: int, repeats: int) -> dict:
    text = texts_of_n_tokens(model, n, 1)[0]
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    page.set_default_timeout(180_000)
    fetched = count_heads(page)
    a = analyse(page, base, text)
    page.evaluate("performance.setResourceTimingBufferSize(100000)")
    count = a["layers"] * a["heads"]
    log.info("n = %d: analysed (%d heads)", n, count)
    if count * n * n <= 8_000_000:  # session.js prefetches every head when they fit its cache
        page.wait_for_function(PREFETCHED, arg=[a["id"], count])
        log.info("n = %d: every head prefetched", n)
    out = {"n": n, "heads": count, "open": [], "slider": [], "fetch_open": [], "fetch_slider": []}
    for r in range(repeats):
        page.click('button[data-toggle="view"][data-value="head"]')
        page.evaluate("performance.clearMeasures('model-view')")
        f0 = fetched[0]
        page.click('button[data-toggle="view"][data-value="model"]')
        page.wait_for_function(PAINTED)
        out["open"].append(page.evaluate(LAST))
        out["fetch_open"].append(fetched[0] - f0)
        page.evaluate("performance.clearMeasures('model-view')")
        f0 = fetched[0]
        box = page.locator('input[data-param="window"]')
        box.fill(str(3 + 2 * (r + 1)))
        box.dispatch_event("input")
        page.wait_for_function(PAINTED)
        out["slider"].append(page.evaluate(LAST))
        out["fetch_slider"].append(fetched[0] - f0)
        log.info("n = %d, repeat %d: open %.0f ms, slider %.0f ms", n, r, out["open"][-1],
                 out["slider"][-1])  # fmt: skip
    page.close()
    return out


def report(rows: list[dict], model_id: str, argv: list[str]) -> str:
    load = os.getloadavg()
    lines = [
        f"`python bench/bench_model_view.py {' '.join(argv)}` · {model_id} · Chromium headless "
        f"1440×900 · {platform.machine()} · load average {load[0]:.1f} / {load[1]:.1f} / "
        f"{load[2]:.1f} (1 / 5 / 15 min; the machine's 2 cores are shared)",
        "",
        "| n | heads | paint | median ms | max ms | head payloads fetched |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        for kind, label in (("open", "view opened"), ("slider", "slider moved")):
            xs = r[kind]
            lines.append(
                f"| {r['n']} | {r['heads']} | {label} | {statistics.median(xs):.0f} | "
                f"{max(xs):.0f} | {statistics.median(r['fetch_' + kind]):.0f} |"
            )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, nargs="+", default=[128, 512])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tiny", action="store_true", help="tiny random model + random artefact")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    exe = chromium_path()
    if exe is None:
        print("no Chromium executable (/usr/bin/chromium or SPARSESCOPE_CHROMIUM)", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    if args.tiny:
        from sparse_core.testing import tiny_model

        model = tiny_model(seed=0)
        artefact = random_artefact(model)
    else:
        from sparse_core import load_model

        model, artefact = load_model(device="cpu"), None
    base = start_server(model, artefact)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        rows = [bench_n(browser, base, model, n, args.repeats) for n in args.n]
        browser.close()
    print(report(rows, model.model_id, sys.argv[1:]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
