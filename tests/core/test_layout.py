"""The shape of sparse_core (docs/architecture.md, "sparse_core"): a one-way chain of modules, no
import cycles, no web imports, and every package of it shipped in the wheel.

Imports are read from the source with ``ast`` (module level and inside functions alike: a lazy
import is still a dependency); only ``if TYPE_CHECKING:`` blocks, which never run, are skipped.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "sparse_core"

#: Layers, lowest first: a module may import only modules of lower layers. Modules not listed
#: (added later) are held only to the no-cycle and no-web rules.
CHAIN = [
    ["errors"],
    ["rng", "entmax"],
    ["model", "patterns", "metrics", "corpus"],
    ["bitsets", "sparsefinder", "baselines", ""],  # "" is sparse_core/__init__.py
    ["sparsefinder_fit"],
    ["methods.spec", "methods.grids", "methods.context"],
    ["methods.selection"],
    ["methods.base", "methods.distance_bits"],
    [
        "methods.structured",
        "methods.bigbird",
        "methods.hashing",
        "methods.learned",
        "methods.streaming",
        "methods.oracle",
        "methods.blocks",
        "methods.block_scores",
    ],
    ["methods"],
    ["pareto.points", "budgets"],
    ["pareto.text_sweep", "pareto.corpus_sweep"],
    ["pareto"],
    ["pos", "viz"],
]
RANK = {name: k for k, layer in enumerate(CHAIN) for name in layer}
WEB = {"fastapi", "starlette", "uvicorn", "pydantic", "jinja2", "sparsescope", "app", "httpx"}


def module_names() -> dict[str, Path]:
    """Dotted names relative to sparse_core ("" for the package itself) -> file."""
    out = {}
    for f in sorted(CORE.rglob("*.py")):
        parts = list(f.relative_to(CORE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


def _runtime_nodes(tree: ast.AST):
    """Every node except those under ``if TYPE_CHECKING:``."""
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo.extend(node.orelse)
            continue
        yield node
        todo.extend(ast.iter_child_nodes(node))


def imports(name: str, path: Path, known: set[str]) -> tuple[set[str], set[str]]:
    """(sparse_core modules, other top-level packages) that the module ``name`` imports."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    package = [p for p in package if p]
    inner, outer = set(), set()
    for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                top, _, rest = a.name.partition(".")
                if top == "sparse_core":
                    inner.add(rest)
                else:
                    outer.add(top)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                top, _, rest = (node.module or "").partition(".")
                if top != "sparse_core":
                    outer.add(top)
                    continue
                base = rest.split(".") if rest else []
            else:
                base = package[: len(package) - (node.level - 1)]
                base += node.module.split(".") if node.module else []
            for a in node.names:  # ``from . import metrics`` imports the module metrics
                sub = ".".join([*base, a.name])
                inner.add(sub if sub in known else ".".join(base))
    return inner - {name}, outer


@pytest.fixture(scope="module")
def graph() -> dict[str, tuple[set[str], set[str]]]:
    mods = module_names()
    return {nm: imports(nm, f, set(mods)) for nm, f in mods.items()}


def test_the_chain_lists_existing_modules():
    mods = module_names()
    missing = sorted(nm for nm in RANK if nm not in mods)
    assert not missing, f"CHAIN names modules that do not exist: {missing}"


def test_no_module_imports_a_later_one(graph):
    late = [
        f"{nm or 'sparse_core'} (layer {RANK[nm]}) imports {dep} (layer {RANK[dep]})"
        for nm, (inner, _) in graph.items()
        if nm in RANK
        for dep in sorted(inner)
        if dep in RANK and RANK[dep] >= RANK[nm]
    ]
    assert not late, "\n".join(late)


def test_no_import_cycles(graph):
    state: dict[str, int] = {}  # 1 on the stack, 2 done

    def visit(nm: str, path: list[str]) -> None:
        state[nm] = 1
        for dep in sorted(graph[nm][0]):
            if dep not in graph:
                continue
            if state.get(dep) == 1:
                cycle = [*path[path.index(dep) :], dep] if dep in path else [nm, dep]
                pytest.fail(f"import cycle: {' -> '.join(c or 'sparse_core' for c in cycle)}")
            if dep not in state:
                visit(dep, [*path, dep])
        state[nm] = 2

    for nm in graph:
        if nm not in state:
            visit(nm, [nm])


def test_the_checker_sees_a_cycle_and_a_late_import(tmp_path):
    """The rules above can fail: a relative import back up the chain is read as such."""
    known = {"patterns", "methods", "methods.base", "pareto"}
    f = tmp_path / "patterns.py"
    f.write_text("from .methods.base import Method\nfrom . import pareto\nimport numpy\n")
    inner, outer = imports("patterns", f, known)
    assert inner == {"methods.base", "pareto"} and outer == {"numpy"}
    g = tmp_path / "__init__.py"
    g.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..pareto import X\n"
                 "from ..patterns import window\nfrom .. import methods\n")  # fmt: skip
    assert imports("methods", g, known)[0] == {"patterns"}


def test_no_web_imports(graph):
    web = {nm or "sparse_core": sorted(outer & WEB) for nm, (_, outer) in graph.items()}
    assert not {k: v for k, v in web.items() if v}, "sparse_core must work without the web app"


def test_every_package_is_in_the_wheel():
    tomllib = pytest.importorskip("tomllib")
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    packages = {
        ".".join(["sparse_core", *f.parent.relative_to(CORE).parts])
        for f in CORE.rglob("__init__.py")
    }
    assert packages <= listed, f"add to pyproject's packages: {sorted(packages - listed)}"
