"""The lecture on a projector: at 1280×720 and 1920×1080, every one of the twelve steps shows all of
its text at 14 px or more, and nothing is cut off (no element clips its content, nothing lies
outside the viewport). The projector profile (up to 1600 px wide: 1280×720, 1024×768) holds every
text at 18 px or more, but for the matrices' tick labels (canvas) and the glyphs inside formulas
(KaTeX's sub- and superscripts).

Runs the app on the tiny model with a random Sparsefinder artefact (``server_url`` of
tests/browser/conftest.py), so that every step has its data. ``SPARSESCOPE_SHOTS=dir`` also writes
a screenshot of every step at both sizes into ``dir`` (docs/screenshots/ holds the chosen ones).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import quote

import pytest

pytestmark = pytest.mark.browser

SIZES = [(1280, 720), (1920, 1080)]
#: a sentence of its own, long for a slide (about 40 tokens): labels thin out, nothing spills
LONG = (
    "When the committee finally published its report, the researchers who had argued for "
    "sparse attention found that most heads keep only a handful of keys per query."
)
CASES = [(w, h, "") for w, h in SIZES] + [(1280, 720, LONG), (1024, 768, "")]
MIN_PX = 14.0
#: the projector profile's floor (static/css/lecture.css), for widths up to 1600 px
PROJECTOR_PX = 18.0
#: what the 18 px floor leaves out: a matrix's tick labels (drawn on a canvas, thinned to fit) and
#: the glyphs of a formula (KaTeX spans: mord, mbin, mrel, …; sub- and superscripts are smaller)
EXEMPT = re.compile(r"^(canvas\.matrix|span\.m[a-z]+[ .])")

# One pass over the page (tests/browser/legibility.js): what is too small, outside, or clipped.
AUDIT = (Path(__file__).parent / "legibility.js").read_text(encoding="utf-8")


def _wait_step(page, k: int) -> None:
    page.wait_for_function(
        "k => document.body.dataset.step === String(k) && 'ready' in document.body.dataset"
        " && !('loading' in document.body.dataset)",
        arg=k,
    )


@pytest.mark.parametrize(
    "width,height,text", CASES, ids=[f"{w}x{h}{'-long' if t else ''}" for w, h, t in CASES]
)
def test_every_step_is_legible_and_whole_on_a_projector(browser, server_url, width, height, text):
    shots = os.environ.get("SPARSESCOPE_SHOTS")
    ctx = browser.new_context(viewport={"width": width, "height": height})
    page = ctx.new_page()
    page.set_default_timeout(30_000)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(f"{server_url}/lecture?step=1" + (f"&text={quote(text)}" if text else ""))
        page.wait_for_selector("body[data-ready]")
        page.evaluate("document.fonts.ready")
        problems: dict[int, dict] = {}
        for k in range(1, 13):
            if k > 1:
                page.keyboard.press("ArrowRight")
            _wait_step(page, k)
            page.wait_for_timeout(150)  # KaTeX fonts, the panel's refit
            if k == 9:
                page.wait_for_selector("#figure svg, #pareto-error")
            if k == 11:
                page.wait_for_selector("#flow-figure svg, #flow-error")
            if k == 12:
                page.wait_for_selector("#adaptive-grid")
            if shots:
                Path(shots).mkdir(parents=True, exist_ok=True)
                tag = "-long" if text else ""
                page.screenshot(path=f"{shots}/lecture-{width}x{height}{tag}-step{k}.png")
            found = page.evaluate(AUDIT, PROJECTOR_PX if width <= 1600 else MIN_PX)
            if width <= 1600:
                found["small"] = [t for t in found["small"] if not EXEMPT.match(t)]
            if any(found.values()):
                problems[k] = {key: v for key, v in found.items() if v}
        assert not problems, "\n".join(f"step {k}: {v}" for k, v in problems.items())
        assert errors == []
    finally:
        ctx.close()
