"""The lecture on a projector: at 1280×720 and 1920×1080, every one of the nine steps shows all of
its text at 14 px or more, and nothing is cut off (no element clips its content, nothing lies
outside the viewport).

Runs the app on the tiny model with a random Sparsefinder artefact (``server_url`` of
tests/browser/conftest.py), so that every step has its data. ``SPARSESCOPE_SHOTS=dir`` also writes
a screenshot of every step at both sizes into ``dir`` (docs/screenshots/ holds the chosen ones).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

SIZES = [(1280, 720), (1920, 1080)]
MIN_PX = 14.0

# One pass over the page: every visible element that owns text (a non-blank text node of its own,
# or an SVG <text>), its computed font size and box; every element that clips its content
# (overflow other than visible) and is overfull; the document's own scroll size.
AUDIT = r"""
(minPx) => {
  const vw = window.innerWidth, vh = window.innerHeight;
  const small = [], outside = [], clipped = [];
  const name = (e) => {
    let s = e.tagName.toLowerCase();
    if (e.id) s += '#' + e.id;
    if (e.classList && e.classList.length) s += '.' + [...e.classList].join('.');
    return s;
  };
  const visible = (e) => {
    if (!e.getClientRects().length) return false;
    for (let a = e; a && a.nodeType === 1; a = a.parentElement) {
      const cs = getComputedStyle(a);
      if (cs.display === 'none' || cs.visibility === 'hidden' || Number(cs.opacity) === 0) return false;
      if (a.hasAttribute('hidden') || a.getAttribute('aria-hidden') === 'true' && a.closest('.katex-mathml')) return false;
      if (cs.clip === 'rect(0px, 0px, 0px, 0px)' || a.classList.contains('sr-only')) return false;
      if (a.tagName === 'DETAILS' && !a.open && a !== e && !e.closest('summary')) return false;
    }
    return true;
  };
  const all = document.body.querySelectorAll('*');
  for (const e of all) {
    if (e.closest('.katex-mathml, script, style, noscript, template')) continue;
    const own = [...e.childNodes].some((c) => c.nodeType === 3 && c.textContent.replace(/[\s\u200b]/g, ''));
    if (own && visible(e)) {
      const px = parseFloat(getComputedStyle(e).fontSize);
      const r = e.getBoundingClientRect();
      const text = e.textContent.trim().slice(0, 40);
      if (px < minPx - 0.01 && r.width > 0 && r.height > 0) small.push(`${name(e)} "${text}" ${px.toFixed(1)}px`);
      if (r.width > 0 && (r.left < -0.5 || r.top < -0.5 || r.right > vw + 0.5 || r.bottom > vh + 0.5))
        outside.push(`${name(e)} "${text}" [${r.left|0},${r.top|0},${r.right|0},${r.bottom|0}]`);
      // inside a clipping ancestor (the figure, the panel): within its box too
      for (let a = e.parentElement; a && a !== document.body; a = a.parentElement) {
        const cs = getComputedStyle(a);
        if (cs.overflowX === 'visible' && cs.overflowY === 'visible') continue;
        const b = a.getBoundingClientRect();
        if (r.left < b.left - 0.5 || r.right > b.right + 0.5 || r.top < b.top - 0.5 || r.bottom > b.bottom + 0.5)
          outside.push(`${name(e)} "${text}" outside ${name(a)}`);
        break;
      }
    }
    if (!visible(e)) continue;
    const cs = getComputedStyle(e);
    if (e.closest('.katex')) continue;  // KaTeX's struts overhang by design; their text is checked above
    if (cs.overflowX !== 'visible' && e.scrollWidth > e.clientWidth + 1)
      clipped.push(`${name(e)} scrollWidth ${e.scrollWidth} > ${e.clientWidth}`);
    if (cs.overflowY !== 'visible' && e.scrollHeight > e.clientHeight + 1)
      clipped.push(`${name(e)} scrollHeight ${e.scrollHeight} > ${e.clientHeight}`);
  }
  const d = document.documentElement;
  if (d.scrollWidth > vw + 1) clipped.push(`document scrollWidth ${d.scrollWidth} > ${vw}`);
  if (d.scrollHeight > vh + 1) clipped.push(`document scrollHeight ${d.scrollHeight} > ${vh}`);
  // canvases (matrices) report the font they drew their labels with
  for (const c of document.querySelectorAll('canvas[data-min-font]')) {
    const px = Number(c.dataset.minFont);
    if (px < minPx - 0.01) small.push(`${name(c)} canvas text ${px}px`);
    const r = c.getBoundingClientRect();
    if (r.left < -0.5 || r.top < -0.5 || r.right > vw + 0.5 || r.bottom > vh + 0.5)
      outside.push(`${name(c)} [${r.left|0},${r.top|0},${r.right|0},${r.bottom|0}]`);
  }
  return { small, outside, clipped };
}
"""


def _wait_step(page, k: int) -> None:
    page.wait_for_function(
        "k => document.body.dataset.step === String(k) && 'ready' in document.body.dataset"
        " && !('loading' in document.body.dataset)",
        arg=k,
    )


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_every_step_is_legible_and_whole_on_a_projector(browser, server_url, size):
    width, height = size
    shots = os.environ.get("SPARSESCOPE_SHOTS")
    ctx = browser.new_context(viewport={"width": width, "height": height})
    page = ctx.new_page()
    page.set_default_timeout(30_000)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(f"{server_url}/lecture?step=1")
        page.wait_for_selector("body[data-ready]")
        page.evaluate("document.fonts.ready")
        problems: dict[int, dict] = {}
        for k in range(1, 10):
            if k > 1:
                page.keyboard.press("ArrowRight")
            _wait_step(page, k)
            page.wait_for_timeout(150)  # KaTeX fonts, the panel's refit
            if k == 9:
                page.wait_for_selector("#figure svg, #pareto-error")
            if shots:
                Path(shots).mkdir(parents=True, exist_ok=True)
                page.screenshot(path=f"{shots}/lecture-{width}x{height}-step{k}.png")
            found = page.evaluate(AUDIT, MIN_PX)
            if any(found.values()):
                problems[k] = {key: v for key, v in found.items() if v}
        assert not problems, "\n".join(f"step {k}: {v}" for k, v in problems.items())
        assert errors == []
    finally:
        ctx.close()
