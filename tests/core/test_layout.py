"""The shape of sparse_core (docs/architecture.md, "sparse_core"): a one-way chain of modules, no
import cycles, no web imports, and every package of it shipped in the wheel.

Imports are read from the source with ``ast`` (tests/layering.py: module level and inside
functions alike: a lazy import is still a dependency); only ``if TYPE_CHECKING:`` blocks, which
never run, are skipped.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import layering

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "sparse_core"

#: Layers, lowest first: a module may import only modules of lower layers. Every module is
#: listed (test_every_module_is_in_the_chain): a new one takes its place here.
CHAIN = [
    ["errors", "cancel", "runtime", "entmax.fast_paths", "_method_kernels"],
    ["entmax._triton_kernel", "entmax._cpu_kernel", "entmax._sleef", "entmax._denormals"],
    ["entmax._cpu_team"],
    ["modernbert", "shipped", "entmax.grad", "entmax.triton", "entmax.cpu"],
    ["rng", "entmax", "sparse_probs"],
    ["attention", "outputs", "sources", "tokens"],
    ["model", "patterns", "metrics", "corpus", "flow"],
    ["selectors"],
    ["bitsets", "sparsefinder", "baselines", "testing", "view_schema", ""],  # "" is __init__.py
    ["view_codec", "testing_modernbert"],
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
    ["methods.trained"],
    ["methods"],
    ["pareto.points", "budgets", "selectors_fit"],
    ["pareto.text_sweep", "pareto.corpus_sweep"],
    ["pareto.lengths"],
    ["pareto"],
    ["pos", "viz", "ray_engine"],
    ["roles"],
    ["adapt.alpha", "adapt.report", "adapt.lm", "adapt.store"],
    ["adapt.data", "adapt.delta"],
    ["adapt.trainer", "adapt.evaluate"],
    ["card"],
    ["adapt.loop", "pareto.task"],
    ["adapt.ray_train"],
    ["adapt.run"],
    ["adapt"],
]
RANK = {name: k for k, layer in enumerate(CHAIN) for name in layer}
WEB = {"fastapi", "starlette", "uvicorn", "pydantic", "jinja2", "sparsescope", "app", "httpx"}


def module_names() -> dict[str, Path]:
    """Dotted names relative to sparse_core ("" for the package itself) -> file."""
    return layering.module_names(CORE)


def imports(name: str, path: Path, known: set[str]) -> tuple[set[str], set[str]]:
    """(sparse_core modules, other top-level packages) that the module ``name`` imports."""
    return layering.imports("sparse_core", name, path, known)


@pytest.fixture(scope="module")
def graph() -> dict[str, tuple[set[str], set[str]]]:
    return layering.graph_of("sparse_core", CORE)


def test_the_chain_lists_existing_modules():
    mods = module_names()
    missing = sorted(nm for nm in RANK if nm not in mods)
    assert not missing, f"CHAIN names modules that do not exist: {missing}"


def test_every_module_is_in_the_chain():
    unplaced = sorted(nm or "sparse_core" for nm in module_names() if nm not in RANK)
    assert not unplaced, f"place these modules in CHAIN (and docs/architecture.md): {unplaced}"


def test_no_module_imports_a_later_one(graph):
    late = layering.late_imports(graph, CHAIN)
    assert not late, "\n".join(late)


def test_no_import_cycles(graph):
    cycle = layering.find_cycle(graph)
    if cycle:
        pytest.fail(f"import cycle: {' -> '.join(c or 'sparse_core' for c in cycle)}")


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
