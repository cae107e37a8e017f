"""Latency of the page in headless Chromium: slider -> repainted heatmap + Pareto star, and opening
a head, read from the page's own User Timing measures ("slider-update", "head-open", live.js).

    python bench/bench_page.py --n 128 512 --write      # the real model (all-MiniLM-L6-v2)
    python bench/bench_page.py --tiny --n 128 512       # tiny random model + random artefact

Per n: one text of exactly n tokens (WikiText-2), analysed through the page; once its Pareto plot
is drawn and its heads are prefetched, every available method's first numeric slider is moved
through up to ``--steps`` positions (an `input` event, then two animation frames, as a drag does),
and every head of the grid is opened in turn. "cold" head opens click a head right after a fresh
analysis, before the page prefetched it (payload fetched from the server). The server runs
in-process (uvicorn thread) on a free loopback port; Chromium is Debian's /usr/bin/chromium.
``--write`` puts the table into docs/benchmarks.md's "## Page" section as the subsection
"### Latency, model `ID`" (replacing a previous run's subsection of that name; the rest of the
page stays as it is).

    python bench/bench_page.py --first-paint --write   # first paint, warm server, real model
    python bench/bench_page.py --arena --n 512          # every slider of the arena's methods
    python bench/bench_page.py --compare --n 512        # side by side off / head / method

``--first-paint``: a warm server (the gallery precomputed, as ``serve`` does at start-up) and, for
the first visit ``/`` and every gallery example ``/gallery/{slug}``, the time from navigation to
the frame that shows the first heatmap (the page's ``heatmap-first-paint`` mark, heatmap.js), in
a fresh browser context (empty HTTP cache) and on a reload (cache warm). Side by side, in the same
run: the same pages with Plotly put back as a ``<script defer>`` in ``<head>`` (how the page
loaded it before Plotly became lazy). ``--write``: the subsection "### First paint, model `ID`"
of "## Page".

``--compare``: side by side (frontend/js/compare.js) — every available method's first slider moved
with side by side off, with pane B on another head, and with pane B another method, the three
interleaved per method in one page and one run (slider-update includes B's mask, the difference
and the three panes' repaint); printed as a table (docs/benchmarks.md, "Page").
``--pointer`` drags the range slider with the mouse instead (CDP mouse events: Chromium delivers
them aligned to the frame, before its animation-frame callbacks, as it does a user's drag; the
synthetic events are dispatched from inside an animation frame, so each waits one whole frame
more than a drag would). ``--baseline TREE`` adds a second page whose JavaScript and CSS come
from another checkout (same server and HTML), interleaved with this tree's per method and mode:
before / after in one run.

``--plotly-bundles``: the first visit ``/`` in a fresh browser context with the vendored Plotly
bundle (plotly.js's cartesian distribution, what the server serves) and with the full bundle of
the ``plotly`` Python package routed in its place, interleaved, ``--repeats`` each: the time from
navigation to the drawn Pareto plot and the CPU seconds of every Chromium process meanwhile (Linux
/proc; up to network idle and 2 s more). Both bundles are handed to the page by the same
Playwright route.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests" / "browser")]

from tests.checkout import use_the_checkout  # noqa: E402

use_the_checkout()  # ``import sparsescope``: this checkout's app/, not an installed copy

from api_latency import texts_of_n_tokens  # noqa: E402
from conftest import CHROMIUM_ARGS, chromium_path, free_port, random_artefact  # noqa: E402

SECTION = "## Page"

SLIDE_JS = """async ([name, steps]) => {
  const el = document.querySelector(`[data-param="${name}"]`);
  const lo = Number(el.min), hi = Number(el.max), st = Number(el.step) || 1;
  const span = Math.max(1, Math.round((hi - lo) / st));
  const frame = () => new Promise((r) => requestAnimationFrame(() => r()));
  performance.clearMeasures('slider-update');
  performance.clearMeasures('slider-work');
  for (let k = 0; k < steps; k++) {
    el.value = String(lo + ((k * 7919) % (span + 1)) * st);  // scattered positions
    el.dispatchEvent(new Event('input', { bubbles: true }));
    await frame();
    await frame();
  }
  const get = (name) => performance.getEntriesByName(name).map((e) => e.duration);
  return { update: get('slider-update'), work: get('slider-work') };
}"""

#: --pointer: the measures of a drag made with the real pointer (CDP mouse events on the range
#: slider, which Chromium delivers aligned to the frame, as a user's drag), read after the drag.
CLEAR_JS = """() => { performance.clearMeasures('slider-update');
  performance.clearMeasures('slider-work'); }"""
FRAMES_JS = """() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))"""
READ_JS = """() => ({ update: performance.getEntriesByName('slider-update').map((e) => e.duration),
  work: performance.getEntriesByName('slider-work').map((e) => e.duration) })"""


def pointer_drag(page, name: str, steps: int) -> dict:
    """Drag parameter ``name``'s range slider with the mouse through ``steps`` scattered
    positions (press on the track, a move per step, two frames after each, release)."""
    el = page.locator(f'[data-range="{name}"]')
    el.scroll_into_view_if_needed()
    box = el.bounding_box()
    y = box["y"] + box["height"] / 2
    at = lambda f: box["x"] + 8 + f * (box["width"] - 16)  # noqa: E731 (the thumb's half width)
    page.evaluate(CLEAR_JS)
    page.mouse.move(at(0.5), y)
    page.mouse.down()
    page.evaluate(FRAMES_JS)
    page.evaluate(CLEAR_JS)  # the press: not a step
    for k in range(steps):
        page.mouse.move(at((k * 0.6180339887 + 0.1) % 1), y)
        page.evaluate(FRAMES_JS)
    page.mouse.up()
    return page.evaluate(READ_JS)


CHOICE_JS = """async ([name, steps]) => {
  const el = document.querySelector(`[data-param="${name}"]`);
  const values = [...el.options].map((o) => o.value);
  const frame = () => new Promise((r) => requestAnimationFrame(() => r()));
  performance.clearMeasures('slider-update');
  performance.clearMeasures('slider-work');
  for (let k = 0; k < steps; k++) {
    el.value = values[(k * 7 + 1) % values.length];  // every choice, in a scattered order
    el.dispatchEvent(new Event('input', { bubbles: true }));
    await frame();
    await frame();
  }
  const get = (name) => performance.getEntriesByName(name).map((e) => e.duration);
  return { update: get('slider-update'), work: get('slider-work') };
}"""

#: The arena's methods: ``--arena`` moves every one of their sliders, and the first
#: slider of a few of the paper's methods in the same run (a loaded machine: the ratio holds).
ARENA = ("streaming", "topk", "topp", "h2o", "moba", "quest", "xattention", "vertical-slash",
         "sparge")  # fmt: skip
BASELINE = ("window", "bigbird", "sf-distance", "sf-kmeans")

HOVER_JS = """async (count) => {
  const el = document.querySelector('.heatmap-overlay');
  const box = el.getBoundingClientRect();
  performance.clearMeasures('hover');
  for (let k = 0; k < count; k++) {
    // scattered points over the matrix (the canvas' last 8 px are padding)
    const fx = ((k * 0.6180339887) % 1) * 0.7 + 0.25, fy = ((k * 0.7548776662) % 1) * 0.7 + 0.25;
    el.dispatchEvent(new MouseEvent('mousemove', {
      clientX: box.left + fx * (box.width - 8), clientY: box.top + fy * (box.height - 8),
      bubbles: true,
    }));
    await new Promise((r) => requestAnimationFrame(() => r()));
  }
  return performance.getEntriesByName('hover').map((e) => e.duration);
}"""

OPEN_JS = """async (tiles) => {
  const all = [...document.querySelectorAll('.tile')];
  const out = [];
  for (const k of tiles) {
    performance.clearMeasures('head-open');
    all[k].click();
    while (performance.getEntriesByName('head-open').length === 0) {
      await new Promise((r) => setTimeout(r, 2));
    }
    out.push(performance.getEntriesByName('head-open')[0].duration);
  }
  return out;
}"""


#: The head grid's last build: every head's thumbnail drawn from the analysis body (grid.js).
THUMBS_JS = "performance.getEntriesByName('grid-thumbs').at(-1).duration"


def start_server(model, artefact, warmup: bool = False) -> str:
    import uvicorn

    from sparsescope.engine.service import AnalysisService
    from sparsescope.engine.settings import Settings
    from sparsescope.web.main import create_app

    settings = Settings(data_dir=Path(tempfile.mkdtemp()), warmup=warmup)
    service = AnalysisService(settings, model=model, artefact=artefact)
    port = free_port()
    app = create_app(settings, service)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}"


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def analyse(page, base: str, text: str) -> dict:
    page.goto(base + "/")
    page.fill("#text", text)
    page.click("#analyze")
    page.wait_for_selector(".heatmap-cells", state="visible", timeout=120_000)
    return page.evaluate("async () => (await fetch('/api/analyze', {method: 'POST', "
                         "headers: {'Content-Type': 'application/json'}, "
                         "body: JSON.stringify({text: document.getElementById('text').value})}))"
                         ".json()")  # fmt: skip


def slider_of(method: dict) -> str | None:
    """The first numeric (int / float) parameter of a method, else the window add-on."""
    for p in method["params"]:
        if p["kind"] in ("int", "float") and p["name"] != "window":
            return p["name"]
    return "window"


def bench_arena(browser, base: str, model, n: int, steps: int, pointer: bool = False) -> dict:
    """Every slider (range inputs and choices, add-ons left out) of every arena method at n:
    {"method · param": [slider-update ms]}, and the frames' work. ``pointer``: range sliders
    dragged with the mouse (:func:`pointer_drag`); choices are always picked by input events."""
    text = texts_of_n_tokens(model, n, 1)[0]
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    page.set_default_timeout(300_000)  # a loaded machine: the first visit computes its example
    a = analyse(page, base, text)
    page.wait_for_selector("#pareto .scatterlayer .trace", timeout=600_000)
    out, work, base = {}, {}, {}
    for m in a["methods"]:
        if m["name"] not in ARENA + BASELINE:
            continue
        page.select_option("#method", m["name"])
        page.wait_for_timeout(300)
        for spec in m["params"]:
            if spec["name"] in ("window", "globals") or spec["kind"] == "bool":
                continue
            if spec["kind"] == "choice":
                got = page.evaluate(CHOICE_JS, [spec["name"], steps])
            elif pointer:
                got = pointer_drag(page, spec["name"], steps)
            else:
                got = page.evaluate(SLIDE_JS, [spec["name"], steps])
            key = f"{m['name']} · {spec['name']}"
            (base if m["name"] in BASELINE else out)[key] = got["update"]
            work[key] = got["work"]
            if m["name"] in BASELINE:
                break  # the paper's methods: their first slider, side by side
    page.close()
    return {"n": n, "per_slider": out, "baseline": base, "work": work}


def arena_report(r: dict, model_id: str, argv: list[str]) -> str:
    load = os.getloadavg()[0]
    lines = [f"{model_id}, n = {r['n']}, {os.cpu_count()} CPU threads, load average {load:.1f} "
             "at the end of the run. Command:", "",
             f"    python bench/bench_page.py {' '.join(argv)}", "",
             "| slider | count | p50 | p95 | max |", "|---|---:|---:|---:|---:|"]  # fmt: skip
    lines[-2:] = ["| slider | count | update p50 | p95 | max | work p50 | work p95 |",
                  "|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    allv = [v for vs in r["per_slider"].values() for v in vs]
    allw = [v for k in r["per_slider"] for v in r["work"][k]]
    basev = [v for vs in r["baseline"].values() for v in vs]
    basew = [v for k in r["baseline"] for v in r["work"][k]]

    def row(name: str, xs: list[float], ws: list[float]) -> str:
        return (f"| {name} | {len(xs)} | {pct(xs, 0.5):.1f} | {pct(xs, 0.95):.1f} | "
                f"{max(xs):.1f} | {pct(ws, 0.5):.1f} | {pct(ws, 0.95):.1f} |")  # fmt: skip

    lines.append(row("**every arena slider**", allv, allw))
    if basev:
        lines.append(row("the paper's methods, first slider (same run)", basev, basew))
    for k, xs in [*r["per_slider"].items(), *r["baseline"].items()]:
        lines.append(row(k, xs, r["work"][k]))
    return "\n".join(lines) + "\n"


#: Set the page's store (the module main.js loaded) to a side by side mode, and wait until its
#: difference is painted.
COMPARE_JS = """async (patch) => {
  const src = document.querySelector('script[type=module][src$="/main.js"]').src;
  const store = await import(src.replace(/main\\.js$/, 'state.js'));
  store.set(patch);
  const root = document.getElementById('compare');
  for (let k = 0; k < 600 && patch.compare !== 'off' && root.dataset.state !== 'ready'; k++) {
    await new Promise((r) => setTimeout(r, 50));
  }
  return root.dataset.state;
}"""


def serve_tree(page, tree: Path) -> None:
    """Serve the page's JavaScript and CSS from another checkout ``tree`` (its frontend/js and
    static/css) instead of this one's: the same server, HTML and API, another page's code."""
    import re

    where = re.compile(r"^https?://[^/]+(?:/v/[^/]+)?/(js|static/css)/([^?#]+)")

    def fulfil(route) -> None:
        m = where.match(route.request.url)
        folder = tree / ("frontend/js" if m.group(1) == "js" else "static/css")
        path = folder / m.group(2)
        if not path.is_file():
            route.fulfill(status=404, body="not in the baseline tree")
            return
        kind = "text/javascript" if path.suffix == ".js" else "text/css"
        route.fulfill(status=200, body=path.read_bytes(), headers={"Content-Type": kind})

    page.route(lambda url: bool(where.match(url)), fulfil)


def bench_compare(browser, base: str, model, n: int, steps: int,
                  baseline: Path | None = None, pointer: bool = False) -> dict:  # fmt: skip
    """Slider latency with side by side off, B = another head, B = another method, interleaved per
    method: {"off" | "head" | "method": [slider-update ms]} and the frames' work. With
    ``baseline`` (another checkout), a second page runs that tree's JavaScript and CSS, interleaved
    with this tree's per method and mode in the same browser and run: keys "<tree> · <mode>"."""
    text = texts_of_n_tokens(model, n, 1)[0]
    trees = {"this tree": None} if baseline is None else {"this tree": None, "baseline": baseline}
    pages, a = {}, None
    for label, tree in trees.items():
        ctx = browser.new_context(viewport={"width": 1600, "height": 1000})
        page = ctx.new_page()
        page.set_default_timeout(600_000)
        if tree is not None:
            serve_tree(page, tree)
        a = analyse(page, base, text)
        page.wait_for_selector("#pareto .scatterlayer .trace", timeout=600_000)
        pages[label] = page
    available = [m for m in a["methods"] if not m["needs_artefact"] or a["artefact"]]
    modes = {
        "off": {"compare": "off"},
        "head": {"compare": "head", "cmpLayer": a["layers"] - 1, "cmpHead": a["heads"] - 1},
        "method": {"compare": "method", "cmpMethod": "strided"},
    }
    keys = [mode if baseline is None else f"{label} · {mode}" for label in trees for mode in modes]
    update = {k: [] for k in keys}
    work = {k: [] for k in keys}
    for k, m in enumerate(available):
        # alternate which tree goes first, so neither always runs right after a method switch
        order = list(pages.items()) if k % 2 == 0 else list(pages.items())[::-1]
        for label, page in order:
            page.bring_to_front()
            page.select_option("#method", m["name"])
            page.wait_for_timeout(300)
            for mode, patch in modes.items():
                state = page.evaluate(COMPARE_JS, patch)
                if mode != "off" and state != "ready":
                    raise RuntimeError(f"side by side ({mode}) did not become ready: {state}")
                if pointer:
                    got = pointer_drag(page, slider_of(m), steps)
                else:
                    got = page.evaluate(SLIDE_JS, [slider_of(m), steps])
                key = mode if baseline is None else f"{label} · {mode}"
                update[key] += got["update"]
                work[key] += got["work"]
    for page in pages.values():
        page.context.close()
    return {"n": n, "update": update, "work": work, "methods": len(available)}


def compare_report(r: dict, model_id: str, argv: list[str]) -> str:
    load = os.getloadavg()[0]
    lines = [f"{model_id}, n = {r['n']}, {r['methods']} methods (first slider each), "
             f"{os.cpu_count()} CPU threads, load average {load:.1f} at the end of the run. "
             "Command:", "", f"    python bench/bench_page.py {' '.join(argv)}", "",
             "| side by side | count | update p50 | p95 | max | work p50 | work p95 | p95 / off |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for key, xs in r["update"].items():
        # the ratio to side by side off of the same tree
        off = pct(r["update"][key.rsplit(" · ", 1)[0] + " · off" if " · " in key else "off"], 0.95)
        ws = r["work"][key]
        lines.append(f"| {key} | {len(xs)} | {pct(xs, 0.5):.1f} | {pct(xs, 0.95):.1f} | "
                     f"{max(xs):.1f} | {pct(ws, 0.5):.1f} | {pct(ws, 0.95):.1f} | "
                     f"{pct(xs, 0.95) / off:.2f} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def bench_n(browser, base: str, model, n: int, steps: int, cold: int) -> dict:
    texts = texts_of_n_tokens(model, n, 1 + cold)
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    a = analyse(page, base, texts[0])
    page.wait_for_selector("#pareto .scatterlayer .trace", timeout=600_000)
    heads = a["layers"] * a["heads"]
    prefetched = heads * n * n <= 8_000_000
    if prefetched:  # wait for the page's background prefetch of every head
        page.wait_for_function(
            f"() => performance.getEntriesByType('resource')"
            f".filter((e) => e.name.includes('/heads/')).length >= {heads}",
            timeout=600_000,
        )
    available = [m for m in a["methods"] if not m["needs_artefact"] or a["artefact"]]
    per_method, work = {}, []
    for m in available:
        page.select_option("#method", m["name"])
        page.wait_for_timeout(300)
        got = page.evaluate(SLIDE_JS, [slider_of(m), steps])
        per_method[m["name"]] = got["update"]
        work += got["work"]
    hover = page.evaluate(HOVER_JS, 60)
    thumbs = [page.evaluate(THUMBS_JS)]
    warm = page.evaluate(OPEN_JS, list(range(1, heads)) + [0])
    page.close()
    cold_times = []
    for text in texts[1:]:
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        analyse(page, base, text)
        thumbs.append(page.evaluate(THUMBS_JS))
        cold_times += page.evaluate(OPEN_JS, [heads - 1])
        page.close()
    return {"n": n, "per_method": per_method, "work": work, "warm": warm, "cold": cold_times,
            "hover": hover, "prefetched": prefetched, "thumbs": thumbs,
            "body": len(json.dumps(a, separators=(",", ":")))}  # fmt: skip


INTRO = """\
Headless Chromium (Debian's `/usr/bin/chromium`, `--disable-gpu`) driven by Playwright, the server
in-process on loopback; `bench/bench_page.py` (one subsection per model, replaced by a re-run).
Times in ms from the page's own User Timing measures (frontend/js/live.js, heatmap.js):
`slider-update` runs from the first `input` event of a frame to the end of the repaint (mask,
metrics, heatmap canvas, metrics panel, Pareto star), the wait for the animation frame included
(`slider-work` is that frame's work alone: what the page costs, the rest is scheduling);
`hover` is the work of entering a new heatmap cell (tooltip and crosshair, no server call);
`head-open` runs from the grid click to the new head's heatmap, metrics and star; `grid-thumbs`
draws every head's thumbnail in the head grid from the analysis body (decode, canvases; grid.js).
The machine is shared (2 CPU threads, several other processes busy): the load average is given
with each run.
"""


def report(results: list[dict], model_id: str, argv: list[str]) -> str:
    """The "### Latency, model `...`" subsection of one run: context, command and the table."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = [
        f"### Latency, model `{model_id}`",
        "",
        f"{platform.machine()}, {os.cpu_count()} CPU threads, load average {load:.1f} at the end"
        " of the run. Command:",
        "",
        f"    python bench/bench_page.py {' '.join(argv)}".rstrip(),
        "",
        "| n | measure | count | p50 | p95 | max | target |",
        "|---:|---|---:|---:|---:|---:|---|",
    ]

    def row(n: int, name: str, xs: list[float], target: str = "") -> str:
        return (
            f"| {n} | {name} | {len(xs)} | {pct(xs, 0.5):.1f} | {pct(xs, 0.95):.1f} | "
            f"{max(xs):.1f} | {target} |"
        )

    for r in results:
        n = r["n"]
        allv = [v for vs in r["per_method"].values() for v in vs]
        target = "≤ 50 ms p95" if n <= 128 else "≤ 150 ms p95"
        lines.append(row(n, "**slider-update, all methods**", allv, target))
        lines.append(row(n, "slider-work (the frame's work, no wait), all methods", r["work"]))
        for name, xs in r["per_method"].items():
            lines.append(row(n, f"slider-update, {name}", xs))
        lines.append(row(n, "hover (tooltip + crosshair)", r["hover"], "< 50 ms"))
        warm = "head-open (prefetched)" if r["prefetched"] else "head-open (fetched on click)"
        lines.append(row(n, warm, r["warm"], "≤ 100 ms" if n <= 128 else ""))
        if r["cold"]:
            lines.append(row(n, "head-open (cold: fetched from the server)", r["cold"]))
        if r["thumbs"]:
            what = f"grid-thumbs (every head's thumbnail from the {r['body'] / 1000:.0f} kB body)"
            lines.append(row(n, what, r["thumbs"]))
    return "\n".join(lines) + "\n"


def write_section(sub: str) -> Path:
    """Put ``sub`` (a "### ..." subsection) into docs/benchmarks.md's "## Page" section (created
    with its intro if missing), replacing the subsection of the same heading line; the rest of
    the page is left as it is."""
    path = ROOT / "docs" / "benchmarks.md"
    doc = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    start = doc.find(SECTION)
    if start < 0:
        doc = doc.rstrip("\n") + f"\n\n{SECTION}\n\n{INTRO}"
        start = doc.find(SECTION)
    end = doc.find("\n## ", start + len(SECTION))
    end = len(doc) if end < 0 else end + 1
    section = doc[start:end]
    head = sub.split("\n", 1)[0]
    at = section.find(head + "\n")
    if at < 0:
        section = section.rstrip("\n") + "\n\n" + sub
    else:
        nxt = section.find("\n### ", at + len(head))
        section = section[:at] + sub + ("" if nxt < 0 else section[nxt:])
    doc = doc[:start] + section.rstrip("\n") + "\n" + ("\n" + doc[end:] if end < len(doc) else "")
    path.write_text(doc, encoding="utf-8")
    return path


PAINT_JS = """async () => {
  const t0 = performance.now();
  while (performance.getEntriesByName('heatmap-first-paint').length === 0) {
    if (performance.now() - t0 > 60000) return null;
    await new Promise((r) => setTimeout(r, 5));
  }
  return performance.getEntriesByName('heatmap-first-paint')[0].startTime;
}"""


def plotly_in_head(route) -> None:
    """The page as it was before: Plotly as a deferred script in <head> (it blocks the modules)."""
    resp = route.fetch()
    html = resp.text()
    cfg = html.split('id="config">', 1)[1].split("</script>", 1)[0]
    import json as _json

    url = _json.loads(cfg)["plotly"]
    html = html.replace("<script type=\"module\"", f'<script src="{url}" defer></script>\n  '
                        '<script type="module"', 1)  # fmt: skip
    route.fulfill(response=resp, body=html)


def first_paint(browser, base: str, repeats: int) -> list[dict]:
    import json as _json
    import urllib.request

    deadline = time.monotonic() + 900
    while True:  # the gallery's precomputation (the server's start-up work)
        with urllib.request.urlopen(base + "/api/gallery") as r:
            listing = _json.load(r)
        if listing["precomputed"] or time.monotonic() > deadline:
            break
        time.sleep(1)
    pages = ["/"] + [ex["url"] for ex in listing["examples"]]
    out = []
    for variant in ("lazy Plotly (now)", "Plotly in <head> (before)"):
        for url in pages:
            cold, warm = [], []
            for _ in range(repeats):
                ctx = browser.new_context(viewport={"width": 1440, "height": 900})
                page = ctx.new_page()
                if variant.startswith("Plotly in"):
                    target = (base + url).rstrip("/")
                    page.route(lambda u, t=target: u.split("?")[0].rstrip("/") == t, plotly_in_head)
                page.goto(base + url)
                cold.append(page.evaluate(PAINT_JS))
                page.reload()
                warm.append(page.evaluate(PAINT_JS))
                ctx.close()
            out.append({"variant": variant, "url": url, "cold": cold, "warm": warm})
            print(f"{variant:28s} {url:32s} cold {statistics.median(cold):7.0f} ms  "
                  f"warm {statistics.median(warm):7.0f} ms")  # fmt: skip
    return out


def first_report(rows: list[dict], model_id: str, argv: list[str]) -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = [
        f"### First paint, model `{model_id}`",
        "",
        "Navigation to the frame that shows the first heatmap (`heatmap-first-paint` mark), warm "
        "server, headless Chromium; floor ≤ 1,500 ms. "
        f"{platform.machine()}, {os.cpu_count()} CPU threads, load average {load:.1f} at the end"
        " of the run. Median of the repeats, ms from navigation. Command:",
        "",
        f"    python bench/bench_page.py {' '.join(argv)}".rstrip(),
        "",
        "| page | lazy Plotly, empty cache | lazy, cached | Plotly in `<head>`, empty cache "
        "| in `<head>`, cached |",
        "|---|---:|---:|---:|---:|",
    ]
    by = {(r["variant"], r["url"]): r for r in rows}
    urls = [r["url"] for r in rows if r["variant"].startswith("lazy")]
    med = statistics.median
    for url in urls:
        a, b = by[("lazy Plotly (now)", url)], by[("Plotly in <head> (before)", url)]
        lines.append(f"| `{url}` | {med(a['cold']):.0f} | {med(a['warm']):.0f} | "
                     f"{med(b['cold']):.0f} | {med(b['warm']):.0f} |")  # fmt: skip
    worst = max(max(r["cold"] + r["warm"]) for r in rows if r["variant"].startswith("lazy"))
    lines += ["", f"Slowest lazy first paint of any repeat: {worst:.0f} ms."]
    return "\n".join(lines) + "\n"


def chromium_cpu() -> float:
    """CPU seconds of every Chromium process now alive (with their reaped children's), from
    /proc (Linux)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if "chrom" not in stat[stat.index("(") + 1 : stat.rindex(")")]:
            continue
        f = stat.rsplit(")", 1)[1].split()
        total += sum(int(v) for v in f[11:15]) / ticks  # utime, stime, cutime, cstime
    return total


def plotly_bundles(browser, base: str, repeats: int) -> dict[str, dict[str, list[float]]]:
    """``--plotly-bundles`` (module docstring): per bundle, its bytes (plain, gzip -9: what the
    server sends a browser that takes gzip), the Pareto plot's time from navigation and the
    Chromium CPU seconds of the load."""
    import gzip

    import plotly

    from sparsescope.web.render import plotly_bundle

    bodies = {
        "vendored": plotly_bundle().read_bytes(),
        "full": (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_bytes(),
    }
    sizes = {name: (len(b), len(gzip.compress(b, 9))) for name, b in bodies.items()}

    def serve(body: bytes):
        def handler(route) -> None:  # one parameter: Playwright then passes the route alone
            route.fulfill(status=200, body=body, content_type="text/javascript")

        return handler

    out = {name: {"pareto": [], "cpu": [], "bytes": sizes[name]} for name in sizes}
    for k in range(repeats + 1):  # the first round warms the server and Chromium: not counted
        for name in out:
            ctx = browser.new_context(viewport={"width": 1440, "height": 900})
            page = ctx.new_page()
            # both bundles through the same route, whichever the server has installed
            page.route("**/plotly.min.js", serve(bodies[name]))
            c0 = chromium_cpu()
            page.goto(base + "/")
            page.wait_for_selector("#pareto .main-svg", timeout=120_000)
            ms = page.evaluate("performance.now()")
            page.wait_for_load_state("networkidle")
            page.wait_for_timeout(2000)  # the page's prefetches after the plot, in both
            cpu = chromium_cpu() - c0  # before the close: the page's renderer still counted
            ctx.close()
            if k:
                out[name]["pareto"].append(ms)
                out[name]["cpu"].append(cpu)
                print(f"{name:9s} Pareto drawn {ms:6.0f} ms  Chromium CPU {cpu:5.2f} s")
    return out


def bundles_report(r: dict, model_id: str, argv: list[str]) -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    med = statistics.median
    lines = [
        f"`python bench/bench_page.py {' '.join(argv)}`, model `{model_id}`, "
        f"{os.cpu_count()} CPU threads, load average {load:.1f} at the end; medians:",
        "",
        "| Plotly bundle | bytes | gzipped | `/` to the Pareto plot, ms | Chromium CPU, s |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, label in (("vendored", "cartesian (vendored)"), ("full", "full (plotly package)")):
        x = r[name]
        lines.append(f"| {label} | {x['bytes'][0]:,} | {x['bytes'][1]:,} | "
                     f"{med(x['pareto']):.0f} | {med(x['cpu']):.2f} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, nargs="+", default=[128, 512])
    ap.add_argument("--steps", type=int, default=30, help="slider positions per method")
    ap.add_argument("--cold", type=int, default=3, help="cold head opens (fresh texts) per n")
    ap.add_argument("--tiny", action="store_true", help="tiny random model + random artefact")
    ap.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    ap.add_argument("--first-paint", action="store_true", help="first paint of / and the gallery")
    ap.add_argument("--repeats", type=int, default=3, help="--first-paint: repeats per page")
    ap.add_argument(
        "--plotly-bundles",
        action="store_true",
        help="the first visit with the vendored Plotly bundle and with the full one, interleaved",
    )
    ap.add_argument(
        "--arena",
        action="store_true",
        help="every slider of every arena method, printed as a table",
    )
    ap.add_argument(
        "--compare",
        action="store_true",
        help="side by side off / head / method, interleaved, printed as a table",
    )
    ap.add_argument(
        "--pointer",
        action="store_true",
        help="--compare, --arena: drag each range slider with the mouse (frame-aligned input, as "
        "a user's drag) "
        "instead of input events dispatched from an animation frame",
    )
    ap.add_argument(
        "--baseline",
        type=Path,
        metavar="TREE",
        help="--compare: also run another checkout's page (its frontend/js and static/css, e.g. "
        "`git -C /work/main archive HEAD | tar -x -C TREE`), interleaved in the same run",
    )
    args = ap.parse_args()
    if args.baseline is not None and not (args.baseline / "frontend" / "js" / "main.js").is_file():
        print(f"--baseline {args.baseline}: no frontend/js/main.js there", file=sys.stderr)
        return 2
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from playwright.sync_api import sync_playwright

    if args.tiny:
        from sparse_core.testing import tiny_model

        model = tiny_model(seed=0)
        artefact = random_artefact(model)
    else:
        from sparse_core import load_model

        model, artefact = load_model(device="cpu"), None
    base = start_server(model, artefact, warmup=args.first_paint)
    exe = chromium_path()
    if exe is None:
        print("no Chromium executable (/usr/bin/chromium or SPARSESCOPE_CHROMIUM)", file=sys.stderr)
        return 1
    if args.first_paint:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
            rows = first_paint(browser, base, args.repeats)
            browser.close()
        text = first_report(rows, model.model_id, sys.argv[1:])
        print(text)
        if args.write:
            print(f"wrote {write_section(text)}")
        return 0
    if args.plotly_bundles:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
            print(bundles_report(plotly_bundles(browser, base, args.repeats), model.model_id,
                                 sys.argv[1:]))  # fmt: skip
            browser.close()
        return 0
    if args.compare:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
            for n in args.n:
                r = bench_compare(browser, base, model, n, args.steps, args.baseline, args.pointer)
                print(compare_report(r, model.model_id, sys.argv[1:]))
            browser.close()
        return 0
    if args.arena:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
            for n in args.n:
                print(arena_report(bench_arena(browser, base, model, n, args.steps, args.pointer),
                                   model.model_id, sys.argv[1:]))  # fmt: skip
            browser.close()
        return 0
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        results = [bench_n(browser, base, model, n, args.steps, args.cold) for n in args.n]
        browser.close()
    text = report(results, model.model_id, sys.argv[1:])
    print(text)
    for r in results:
        allv = [v for vs in r["per_method"].values() for v in vs]
        print(f"n={r['n']}: slider-update p50 {statistics.median(allv):.1f} ms, "
              f"p95 {pct(allv, 0.95):.1f} ms")  # fmt: skip
    if args.write:
        print(f"wrote {write_section(text)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
