"""The lecture's adaptive-sparsity step (step 12, frontend/js/lecture/step-adaptive.js), in a real
headless Chromium: on a model with an own α per head the grid shows exactly those α, and the
open head's support at α = 1.25, 1.5 and its own α equals the API's edges; on a model without one
the slide says so and compares α = 1.25, 1.5 and 2."""

from __future__ import annotations

import pytest

from .test_own_alpha_control import OWN, learned_url  # noqa: F401  (the fixture)

pytestmark = pytest.mark.browser

#: The API's support (|G| / n) of one head at each α, fetched in the page.
SUPPORT = """async ([alphas, layer, head]) => {
    const cfg = JSON.parse(document.getElementById('lecture-config').textContent);
    const text = cfg.default_text;
    const out = [];
    for (const alpha of alphas) {
      const a = await (await fetch('/api/analyze', {method: 'POST',
        headers: {'Content-Type': 'application/json'},
        body: JSON.stringify({text, alpha, causal: true, truncate: true})})).json();
      const h = await (await fetch(`/api/analyses/${a.id}/heads/${layer}/${head}`)).json();
      out.push((h.edges.length / a.n).toFixed(1));
    }
    return out;
}"""


def _open_step12(page, base: str) -> None:
    page.set_default_timeout(60_000)
    page.goto(f"{base}/lecture?step=12&layer=1&head=2")
    page.wait_for_function(
        "() => document.body.dataset.step === '12' && 'ready' in document.body.dataset"
    )
    page.wait_for_selector("#adaptive-grid")


def _shown(page) -> list[str]:
    return [page.locator(f"#adaptive-support-{k}").text_content() for k in range(3)]


def test_step_12_shows_each_heads_own_alpha_and_the_support_it_gives(page, learned_url):  # noqa: F811
    _open_step12(page, learned_url)
    cells = page.locator("#adaptive-grid .adaptive-cell")
    assert cells.count() == len(OWN) * len(OWN[0])
    alphas = [float(a) for a in cells.evaluate_all("cs => cs.map((c) => c.dataset.alpha)")]
    assert alphas == pytest.approx([a for row in OWN for a in row], abs=1e-3)
    # the open head (L1 H2, own α 1.2) is outlined, and its own α is named in the panel
    opened = page.locator("#adaptive-grid .adaptive-open")
    assert float(opened.get_attribute("data-alpha")) == pytest.approx(OWN[1][2], abs=1e-3)
    assert "own α = 1.20" in page.locator("#adaptive-support").text_content()
    assert page.locator("#adaptive-none").count() == 0
    want = page.evaluate(SUPPORT, [[1.25, 1.5, "own"], 1, 2])
    assert _shown(page) == want


def test_step_12_without_an_own_alpha_says_so_and_compares_fixed_alphas(page, server_url):
    _open_step12(page, server_url)
    note = page.locator("#adaptive-none").text_content()
    # said plainly: why there is nothing per head, and which model would show it
    assert "one α for every head" in note and "entmax-learned" in note
    assert page.locator("#adaptive-grid .adaptive-cell").count() > 0
    want = page.evaluate(SUPPORT, [[1.25, 1.5, 2], 1, 2])
    assert _shown(page) == want
