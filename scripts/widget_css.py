"""Rebuild static/css/widget.css: the widget's own rules plus the page's head grid, method panel
and heatmap rules of static/css/app.css, every selector scoped under ``.sparsescope-widget`` so
that a notebook's styles are left alone. Run after changing those sections of app.css:

    python scripts/widget_css.py
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = ("head grid", "method panel + metrics", "heatmap")
MARK = "/* ---- the page's rules (static/css/app.css), scoped by scripts/widget_css.py */"


def scoped(css: str) -> str:
    out = []
    for m in re.finditer(r"([^{}]+)\{([^{}]*)\}", css, re.S):
        sels = re.sub(r"/\*.*?\*/", "", m.group(1), flags=re.S).strip()
        pref = ", ".join(f".sparsescope-widget {s.strip()}" for s in sels.split(","))
        out.append(f"{pref} {{{m.group(2)}}}")
    return "\n".join(out)


def main() -> None:
    app = (ROOT / "static/css/app.css").read_text(encoding="utf-8")
    parts = re.split(r"/\* -{10,} (.+?) \*/", app)
    chosen = [parts[k + 1] for k in range(1, len(parts) - 1, 2) if parts[k].strip() in SECTIONS]
    if len(chosen) != len(SECTIONS):
        raise SystemExit(f"app.css no longer has the sections {SECTIONS}")
    if any("@" in c for c in chosen):
        raise SystemExit("an @-rule in those sections: scope it by hand")
    target = ROOT / "static/css/widget.css"
    own = target.read_text(encoding="utf-8").split(MARK)[0].rstrip()
    target.write_text(f"{own}\n\n{MARK}\n{scoped(''.join(chosen))}\n", encoding="utf-8")


if __name__ == "__main__":
    main()
