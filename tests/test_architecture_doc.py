"""docs/architecture.md names every module, one line each, and no module that is gone.

Its "Layout" section is a tree in a code block: a folder line ends with ``/``, deeper lines are
indented by two spaces per level, and a module's line is its file name (or a path below the
folder) followed by what it is. Every module of sparse_core/, app/, frontend/js/, bench/ and
scripts/ must have such a line with a description; a line naming a file of those folders that
does not exist fails too.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
#: (folder, file patterns) whose every file must be named in the Layout.
MODULES = [
    ("sparse_core", ("**/*.py",)),
    ("app", ("**/*.py",)),
    ("frontend/js", ("**/*.js",)),
    ("bench", ("*.py",)),
    ("scripts", ("**/*.py", "*.sh")),
]
SUFFIXES = (".py", ".js", ".sh")


def layout_entries(text: str) -> dict[str, str]:
    """Path -> description of every file line of the first code block under "## Layout"."""
    section = text.split("\n## Layout", 1)[1]
    block = section.split("```", 2)[1]
    entries: dict[str, str] = {}
    folders: list[str] = []  # folders[k]: the folder open at indentation level k
    for line in block.splitlines():
        m = re.match(r"^( *)(\S+)(.*)$", line)
        if not m:
            continue
        level = len(m.group(1)) // 2
        name, rest = m.group(2), m.group(3).strip()
        parent = "/".join(folders[:level])
        path = f"{parent}/{name}" if parent else name
        if name.endswith("/"):
            folders = [*folders[:level], name.strip("/")]
            continue
        if name.endswith(SUFFIXES):
            entries[path] = rest
    return entries


def modules() -> list[str]:
    found = set()
    for folder, patterns in MODULES:
        for pattern in patterns:
            for f in (ROOT / folder).glob(pattern):
                if "__pycache__" not in f.parts and f.is_file():
                    found.add(str(f.relative_to(ROOT)))
    return sorted(found)


def test_every_module_has_a_line():
    entries = layout_entries(DOC.read_text(encoding="utf-8"))
    missing = [m for m in modules() if m not in entries]
    assert not missing, (
        "add a line (name + what it is) to the Layout of docs/architecture.md for: "
        + ", ".join(missing)
    )
    empty = [m for m in modules() if not entries[m]]
    assert not empty, f"these lines say nothing of their module: {empty}"


def test_no_line_names_a_module_that_is_gone():
    entries = layout_entries(DOC.read_text(encoding="utf-8"))
    roots = tuple(folder + "/" for folder, _ in MODULES)
    gone = [p for p in entries if p.startswith(roots) and not (ROOT / p).is_file()]
    assert not gone, f"docs/architecture.md names modules that do not exist: {gone}"


def test_the_reader_follows_the_tree():
    """The check can fail: a module without a line is seen, nested folders resolve."""
    doc = (
        "# x\n\n## Layout\n\n```\napp/                 the app\n  engine/            the engine\n"
        "    request.py       the request\n  cli.py             the entry point\n"
        "frontend/\n  js/\n    lecture/main.js  lecture mode\n    bare.js\n```\n"
    )
    entries = layout_entries(doc)
    assert entries == {
        "app/engine/request.py": "the request",
        "app/cli.py": "the entry point",
        "frontend/js/lecture/main.js": "lecture mode",
        "frontend/js/bare.js": "",
    }
    assert "app/engine/service.py" not in entries
