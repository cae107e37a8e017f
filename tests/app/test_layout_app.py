"""The shape of app/ (the ``sparsescope`` package; docs/architecture.md, "Layers"): web -> engine
-> sparse_core, one way, over every module.

- the engine (app/engine) imports only itself and sparse_core, and no web framework (pydantic
  only in its settings, for the environment's validation);
- the web layer (app/web) imports the engine and itself; the commands (app/commands) the engine,
  the web layer (``serve``) and themselves; the notebook widget the engine only; nothing imports
  upwards (``cli``, ``widget``, ``commands`` are imported by no layer below them);
- inside each package a chain of layers (lowest first) that every module is placed in, no
  import cycles at all, and every package shipped in the wheel.

Imports are read from the source (tests/layering.py), lazy ones included.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import layering

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "app"

ENGINE = [
    ["engine.store_files"],
    ["engine.errors", "engine.memory", "engine.thumbs", "engine.settings", "engine.request",
     "engine.cache", "engine.store", "engine.tagging", "engine.results"],
    ["engine.limits", "engine.payloads"],
    ["engine.lod", "engine.two_cores"],
    ["engine.summary_parts"],
    ["engine.batching", "engine.summaries", "engine.derived"],
    ["engine.slot"],
    ["engine.models"],
    ["engine.service"],
    ["engine"],
]  # fmt: skip
WEB = [
    ["web.openapi"],
    ["web.view_state"],
    ["web.schemas", "web.connections", "web.calls"],
    ["web.errors"],
    ["web.middleware", "web.render", "web.deps", "web.preload", "web.gallery"],
    ["web.compress", "web.shares"],
    ["web.routes.meta", "web.routes.analyses", "web.routes.docs", "web.routes.gallery",
     "web.routes.lecture", "web.routes.pages", "web.routes.share", "web.routes.results",
     "web.routes"],
    ["web.main"],
    ["web"],
]  # fmt: skip
COMMANDS = [
    ["commands.common"],
    [
        "commands.serve",
        "commands.analyze",
        "commands.fit",
        "commands.pareto",
        "commands.clusters",
        "commands.heads",
        "commands.adapt",
        "commands.card",
    ],
    ["commands"],
]
#: Every module of app/, lowest layer first: engine, then web, then the front ends.
CHAIN = [*ENGINE, *WEB, *COMMANDS, ["widget"], ["cli", ""]]
RANK = {name: k for k, layer in enumerate(CHAIN) for name in layer}

#: What each part of app/ may import from app/ (by the first component of a module's name).
MAY_IMPORT = {
    "engine": {"engine"},
    "web": {"engine", "web"},
    "commands": {"engine", "web", "commands"},
    "widget": {"engine"},
    "cli": {"commands"},
    "": set(),
}
#: Web frameworks and servers: never in the engine (nor the widget, which runs in a kernel).
FRAMEWORKS = {
    "fastapi", "starlette", "uvicorn", "jinja2", "markupsafe", "httpx", "h11", "anyio",
    "multipart", "python_multipart",
}  # fmt: skip
#: The one engine module that may use pydantic (the environment's settings, validated).
PYDANTIC_OK = {"engine.settings"}


def part_of(name: str) -> str:
    return name.split(".")[0]


@pytest.fixture(scope="module")
def graph() -> dict[str, tuple[set[str], set[str]]]:
    return layering.graph_of("sparsescope", APP)


def test_every_module_is_placed_and_every_placed_one_exists(graph):
    unplaced = sorted(nm or "(app/__init__)" for nm in graph if nm not in RANK)
    assert not unplaced, f"place these modules in CHAIN (and docs/architecture.md): {unplaced}"
    gone = sorted(nm for nm in RANK if nm not in graph)
    assert not gone, f"CHAIN names modules that do not exist: {gone}"


def test_each_part_imports_only_what_it_may(graph):
    wrong = [
        f"{nm} imports {dep}"
        for nm, (inner, _) in graph.items()
        for dep in sorted(inner)
        if part_of(dep) not in MAY_IMPORT[part_of(nm)]
    ]
    assert not wrong, "\n".join(wrong)


def test_no_module_imports_a_later_one(graph):
    late = layering.late_imports(graph, CHAIN)
    assert not late, "\n".join(late)


def test_no_import_cycles(graph):
    cycle = layering.find_cycle(graph)
    assert cycle is None, f"import cycle: {' -> '.join(c or 'sparsescope' for c in cycle)}"


def test_the_engine_and_the_widget_import_no_web_framework(graph):
    bad = {}
    for nm, (_, outer) in graph.items():
        if part_of(nm) in ("engine", "widget"):
            found = outer & FRAMEWORKS
            if "pydantic" in outer and nm not in PYDANTIC_OK:
                found |= {"pydantic"}
            if found:
                bad[nm] = sorted(found)
    assert not bad, f"the engine must run without the web app: {bad}"


def test_the_checker_sees_an_upward_import_a_framework_and_a_cycle(tmp_path):
    """The rules above can fail: an engine module importing the web layer or FastAPI, and a
    cycle, are all seen."""
    pkg = tmp_path / "app"
    (pkg / "engine").mkdir(parents=True)
    (pkg / "web").mkdir()
    for f in ("__init__.py", "engine/__init__.py", "web/__init__.py"):
        (pkg / f).write_text("")
    (pkg / "engine" / "service.py").write_text(
        "from fastapi import Request\nfrom ..web.errors import HTTP\n"
    )
    (pkg / "web" / "errors.py").write_text("from ..engine import service\n")
    g = layering.graph_of("sparsescope", pkg)
    inner, outer = g["engine.service"]
    assert inner == {"web.errors"} and "fastapi" in outer
    assert part_of("web.errors") not in MAY_IMPORT["engine"]
    assert layering.find_cycle(g) == ["engine.service", "web.errors", "engine.service"]
    assert layering.late_imports(g, [["engine.service"], ["web.errors"]]) == [
        "engine.service (layer 0) imports web.errors (layer 1)"
    ]


def test_every_package_is_in_the_wheel():
    tomllib = pytest.importorskip("tomllib")
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    packages = {
        ".".join(["sparsescope", *f.parent.relative_to(APP).parts])
        for f in APP.rglob("__init__.py")
    }
    assert packages <= listed, f"add to pyproject's packages: {sorted(packages - listed)}"
