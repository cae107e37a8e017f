"""axe-core in the browser tests: inject the vendored ``vendor/axe.min.js`` (axe-core 4.14.1 from
npm, MPL-2.0, its licence beside it) into a page and return its serious and critical violations.

Every page test may call :func:`serious_violations`; tests/browser/test_a11y.py runs it on every
page of the app (the explorer, the lecture, the gallery, shares, embeds, error pages)."""

from __future__ import annotations

from pathlib import Path

AXE = Path(__file__).with_name("vendor") / "axe.min.js"
#: Impacts that fail a test (axe's scale: minor, moderate, serious, critical).
FAILING = ("serious", "critical")


def serious_violations(
    page, *, exclude: tuple[str, ...] = (), rules_off: tuple[str, ...] = ()
) -> list[str]:
    """The page's serious / critical axe violations as one line each (rule: node targets);
    ``exclude``: CSS selectors left out, ``rules_off``: axe rule ids not run (each use says why)."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.add_script_tag(content=AXE.read_text(encoding="utf-8"))
    result = page.evaluate(
        """async ([exclude, off]) => {
            const context = exclude.length ? {exclude: exclude.map((s) => [s])} : document;
            const rules = Object.fromEntries(off.map((id) => [id, {enabled: false}]));
            const r = await axe.run(context, {resultTypes: ['violations'], rules});
            return r.violations.map((v) => ({id: v.id, impact: v.impact, help: v.help,
                nodes: v.nodes.slice(0, 4).map((n) => n.target.join(' ') + ' — ' +
                    (n.failureSummary || '').split('\\n').slice(1, 2).join(''))}));
        }""",
        [list(exclude), list(rules_off)],
    )
    return [
        f"{v['id']} ({v['impact']}): {v['help']}: {'; '.join(v['nodes'])}"
        for v in result
        if v["impact"] in FAILING
    ]
