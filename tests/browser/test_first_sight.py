"""The page at first sight, in real Chromium: few tab stops on the first screen, the heatmap and
the recall on a projector's screen, the picture first on a phone, one colour and marker per
method, the picker grouped by family, honest states (a block as long as the text, a failed
analysis over the previous results, no corpus results served) and no console error on load."""

from __future__ import annotations

import urllib.parse

import pytest

from sparse_core.methods import FAMILIES, METHODS

from .test_page import TEXT, wait_ready

pytestmark = pytest.mark.browser

#: Tab stops on the first screen: focusable, in the tab order, shown, inside the viewport (a radio
#: group is one stop; a closed disclosure's contents are none).
TAB_STOPS = """() => {
  const out = [];
  const focusable = 'a[href], button, input, select, textarea, summary, [tabindex]';
  for (const el of document.querySelectorAll(focusable)) {
    if (el.disabled || el.tabIndex < 0 || el.closest('[hidden], [inert]')) continue;
    if (el.type === 'radio' && !el.checked
        && document.querySelector(`input[type=radio][name="${el.name}"]:checked`)) continue;
    const closed = el.closest('details:not([open])');
    if (closed && el.tagName !== 'SUMMARY') continue;
    const r = el.getBoundingClientRect();
    if (!r.width && !r.height) continue;
    if (getComputedStyle(el).visibility === 'hidden') continue;
    if (r.top >= innerHeight || r.bottom <= 0 || r.left >= innerWidth || r.right <= 0) continue;
    out.push(el.id || el.tagName + ':' + (el.textContent || '').trim().slice(0, 20));
  }
  return out;
}"""


@pytest.fixture
def sized(browser):
    """A fresh page at a given viewport; JavaScript and console errors fail the test (the browser's
    own "Failed to load resource" line included: a normal load asks nothing that fails)."""
    contexts = []
    errors: list[str] = []

    def make(width: int, height: int, allow_failed_loads: bool = False, **kw):
        ctx = browser.new_context(viewport={"width": width, "height": height}, **kw)
        contexts.append(ctx)
        pg = ctx.new_page()
        pg.on("pageerror", lambda e: errors.append(f"page error: {e}"))

        def on_console(msg):
            if msg.type != "error":
                return
            if allow_failed_loads and msg.text.startswith("Failed to load resource"):
                return
            errors.append(f"console error: {msg.text}")

        pg.on("console", on_console)
        return pg

    yield make
    for ctx in contexts:
        ctx.close()
    assert not errors, errors


def open_text(page, server_url: str, text: str = TEXT, **query: str) -> None:
    page.goto(f"{server_url}/?{urllib.parse.urlencode({'text': text, **query})}")
    wait_ready(page)


def test_the_first_screen_has_at_most_30_tab_stops_and_a_path(sized, server_url):
    page = sized(1440, 900)
    page.goto(server_url + "/")  # the first visit's example, as a newcomer sees it
    wait_ready(page)
    page.wait_for_load_state("networkidle")
    stops = page.evaluate(TAB_STOPS)
    assert len(stops) <= 30, stops
    # the head grid, every toggle group and every figure's downloads are one stop each
    crowded = page.evaluate(
        """() => [...document.querySelectorAll('[role=group]')]
             .filter((g) => g.querySelectorAll(
               'button:not([tabindex="-1"]):not(:disabled)').length > 1)
             .map((g) => g.getAttribute('aria-label'))"""
    )
    assert crowded == [], crowded
    guide = page.locator("#guide")
    assert guide.is_visible()
    assert "pick a pattern" in guide.inner_text().lower()
    assert guide.bounding_box()["y"] < 300


def test_a_toggle_group_is_one_tab_stop_moved_by_arrow_keys(sized, server_url):
    page = sized(1440, 900)
    open_text(page, server_url)
    group = page.locator("[aria-label='Pareto x-axis']")
    stops = group.locator("button[tabindex='0']")
    assert stops.count() == 1
    assert stops.first.get_attribute("data-value") == "sparsity"  # the pressed one
    stops.first.focus()
    page.keyboard.press("ArrowRight")
    focused = page.evaluate("() => document.activeElement.dataset.value")
    assert focused == "block"
    page.keyboard.press("Enter")
    page.wait_for_function("() => new URLSearchParams(location.search).get('px') === 'block'")


def test_the_example_story_reads_in_full(sized, server_url):
    page = sized(1440, 900)
    page.goto(server_url + "/")
    wait_ready(page)
    explain = page.locator(".banner-explain")
    if explain.count() == 0:
        pytest.skip("this server has no first-visit example")
    clamped = explain.evaluate("(p) => p.scrollHeight > p.clientHeight + 1")
    more = page.locator(".banner-more")
    assert more.get_attribute("aria-expanded") == "false"
    more.click()
    assert more.get_attribute("aria-expanded") == "true"
    assert explain.evaluate("(p) => p.scrollHeight <= p.clientHeight + 1")
    if clamped:  # it was cut before: now it is taller
        assert explain.evaluate("(p) => p.clientHeight") > 24


def test_the_heatmap_and_the_recall_are_on_a_projectors_first_screen(sized, server_url):
    page = sized(1280, 720)
    open_text(page, server_url)
    for sel in (".heatmap-cells", ".metric-recall .metric-value"):
        box = page.locator(sel).bounding_box()
        assert box is not None, sel
        assert box["y"] >= 0 and box["y"] + box["height"] <= 720 + 0.5, (sel, box)
        assert box["x"] >= 0 and box["x"] + box["width"] <= 1280 + 0.5, (sel, box)


def test_a_phone_shows_the_picture_before_the_form(sized, server_url):
    page = sized(390, 844, is_mobile=True, has_touch=True)
    open_text(page, server_url)
    heat = page.locator(".heatmap-cells").bounding_box()
    form = page.locator("#input-bar").bounding_box()
    assert heat["y"] < form["y"], (heat, form)
    # the hint speaks of taps, not of hovering or a wheel
    hint = page.locator(".panel-heatmap .hint:visible")
    assert hint.count() == 1
    words = hint.inner_text().lower()
    assert "tap" in words and "hover" not in words and "wheel" not in words


def test_every_method_has_its_own_colour_and_marker(sized, server_url):
    page = sized(1440, 900)
    open_text(page, server_url)
    page.wait_for_selector("#pareto-legend .pareto-key", timeout=60_000)
    keys = page.locator("#pareto-legend .pareto-key").evaluate_all(
        "(bs) => bs.map((b) => [b.dataset.method, b.dataset.colour, b.dataset.marker])"
    )
    assert len(keys) >= 10
    colours = [c for _, c, _ in keys]
    assert len(set(colours)) == len(colours), keys
    by_family: dict[str, set[str]] = {}
    for name, _, marker in keys:
        fam = METHODS[name].family
        assert marker not in by_family.setdefault(fam, set()), (name, keys)
        by_family[fam].add(marker)
    # the plot draws them so: Plotly's traces carry the same colour and symbol
    traces = page.evaluate(
        """() => document.getElementById('pareto').data
             .filter((t) => t.mode === 'lines+markers')
             .map((t) => [t.legendgroup, t.marker.color, t.marker.symbol])"""
    )
    assert {t[0]: (t[1], t[2]) for t in traces} == {k[0]: (k[1], k[2]) for k in keys}


def test_the_method_picker_is_grouped_by_family(sized, server_url):
    page = sized(1440, 900)
    open_text(page, server_url)
    groups = page.locator("#method optgroup").evaluate_all(
        "(gs) => gs.map((g) => [g.dataset.family, g.label, [...g.children].map((o) => o.value)])"
    )
    assert [g[0] for g in groups] == list(dict.fromkeys(m.family for m in METHODS.values()))
    for family, label, names in groups:
        assert label == FAMILIES[family]
        assert names == [n for n, m in METHODS.items() if m.family == family]


def test_a_block_as_long_as_the_text_is_said_not_scored(sized, server_url):
    page = sized(1440, 900)
    open_text(page, server_url, TEXT, method="moba", **{"p.block": "32"})  # n ≈ 20 tokens
    note = page.locator("[data-note=block]")
    note.wait_for(state="visible")
    assert "shorter than one block" in note.inner_text()
    # the 128-tile line is trivially 0 on a short text: a sentence instead of a number
    assert page.locator(".metric-block").is_hidden()
    assert "one 128 × 128 tile" in page.inner_text("[data-note=tile]")
    # a block shorter than the text: the note goes
    assert (
        page.evaluate(
            "() => Number(document.getElementById('head-title').textContent.split('n = ')[1])"
        )
        > 16
    )
    page.select_option("[data-param=block]", "16")
    note.wait_for(state="hidden")


def test_a_failed_analysis_greys_and_labels_the_previous_results(sized, server_url):
    page = sized(1440, 900, allow_failed_loads=True)
    open_text(page, server_url)
    assert page.locator("#stale-note").is_hidden()
    # a lone surrogate: the server refuses the text (a 4xx, said next to the text box)
    page.evaluate(
        "() => { const t = document.getElementById('text'); t.value = 'broken \\ud800 text'; }"
    )
    page.click("#analyze")
    page.locator("[data-error-for=text], [data-error-for=_]").first.wait_for(state="visible")
    note = page.locator("#stale-note")
    note.wait_for(state="visible")
    assert "previous text" in note.inner_text()
    assert TEXT[:30] in note.inner_text()
    assert page.locator("main.layout.stale").count() == 1
    opacity = float(
        page.evaluate("() => getComputedStyle(document.querySelector('.col-center')).opacity")
    )
    assert opacity < 0.8
    # a good text again: the results are current
    page.fill("#text", "The dog barked at the postman.")
    page.click("#analyze")
    note.wait_for(state="hidden")
    assert page.locator("main.layout.stale").count() == 0


def test_a_normal_load_asks_nothing_that_fails(sized, server_url):
    """No console error at all (not even a failed resource): without corpus results the page does
    not ask for them, and their panel is one line."""
    page = sized(1440, 900)
    failed = []
    page.on("response", lambda r: failed.append(r.url) if r.status >= 400 else None)
    page.goto(server_url + "/")
    wait_ready(page)
    page.wait_for_load_state("networkidle")
    assert failed == []
    panel = page.locator(".panel-results")
    assert panel.get_attribute("data-empty") == "true"
    assert page.locator("#results-scope").is_hidden()
    assert "--results" not in panel.inner_text()


def test_more_views_are_one_click_away(sized, server_url):
    page = sized(1440, 900)
    open_text(page, server_url)
    page.click("#more-menu summary")
    links = page.locator("#more-menu a")
    assert links.count() >= 7
    # taken at once: the panels above the flow (the Pareto plot, the budgets) may still grow
    # after the jump, and the page holds the flow panel in place while they do
    page.click("#more-menu a[href='#h-flow']")
    in_view = (
        "() => { const r = document.getElementById('h-flow').getBoundingClientRect();"
        " return r.top >= 0 && r.top < innerHeight; }"
    )
    page.wait_for_function(in_view)
    page.wait_for_selector("#pareto .main-svg", timeout=60_000)  # the Pareto plot above it...
    page.wait_for_timeout(300)
    assert page.evaluate(in_view)  # ...and the flow panel still on the screen
    page.click("#more-menu summary")
    page.click("#more-menu a[data-view=model]")
    page.wait_for_function("() => new URLSearchParams(location.search).get('view') === 'model'")
    assert page.locator("#model-panel").is_visible()


def test_a_shared_link_reopens_what_was_open(sized, server_url):
    """What a reader opened with a click (the whole model, the Pareto plot's x and points, side by
    side's B) is in the Share button's state, and its /s/ link reopens exactly that."""
    from .test_compare import MODULE
    from .test_page import api

    page = sized(1440, 900)
    open_text(page, server_url)
    page.click("[data-toggle=paretoX][data-value=block]")
    page.click("[data-toggle=paretoPoints][data-value=true]")
    page.select_option("#cmp-b", "1/3")  # B's control is there at once: picking B turns it on
    page.wait_for_function("() => new URLSearchParams(location.search).get('cmp') === 'head'")
    page.click("#more-menu summary")
    page.click("#more-menu a[data-view=model]")
    page.wait_for_function("() => new URLSearchParams(location.search).get('view') === 'model'")
    state = page.evaluate(
        MODULE + "; return (await js('share.js')).shareState((await js('state.js')).get()); }"
    )
    share = api(server_url, "/api/share", {"state": state})
    other = sized(1440, 900)
    other.goto(server_url + share["url"])
    other.wait_for_selector("#model-panel:not([hidden])")
    for key, value in (("paretoX", "block"), ("paretoPoints", "true"), ("view", "model")):
        sel = f"[data-toggle={key}][data-value={value}]"
        assert other.get_attribute(sel, "aria-pressed") == "true", key
    assert other.input_value("#cmp-mode") == "head"
    assert other.input_value("#cmp-b") == "1/3"
