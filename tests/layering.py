"""Reading a package's import graph from its source, for the layering tests (tests/core/
test_layout.py for sparse_core, tests/app/test_layout_app.py for app/ = ``sparsescope``).

Imports are read with ``ast`` (module level and inside functions alike: a lazy import is still a
dependency); only ``if TYPE_CHECKING:`` blocks, which never run, are skipped.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path


def module_names(root: Path) -> dict[str, Path]:
    """Dotted names relative to the package folder ``root`` ("" for its ``__init__``) -> file."""
    out = {}
    for f in sorted(root.rglob("*.py")):
        if "__pycache__" in f.parts:
            continue
        parts = list(f.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


def runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node except those under ``if TYPE_CHECKING:``."""
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo.extend(node.orelse)
            continue
        yield node
        todo.extend(ast.iter_child_nodes(node))


def imports(top: str, name: str, path: Path, known: set[str]) -> tuple[set[str], set[str]]:
    """(modules of the package ``top``, other top-level packages) that its module ``name``
    (relative, "" for the package) imports; ``known``: the package's module names."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    package = [p for p in package if p]
    inner, outer = set(), set()
    for node in runtime_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                first, _, rest = a.name.partition(".")
                if first == top:
                    inner.add(rest)
                else:
                    outer.add(first)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                first, _, rest = (node.module or "").partition(".")
                if first != top:
                    outer.add(first)
                    continue
                base = rest.split(".") if rest else []
            else:
                base = package[: len(package) - (node.level - 1)]
                base += node.module.split(".") if node.module else []
            for a in node.names:  # ``from . import metrics`` imports the module metrics
                sub = ".".join([*base, a.name])
                inner.add(sub if sub in known else ".".join(base))
    return inner - {name}, outer


def graph_of(top: str, root: Path) -> dict[str, tuple[set[str], set[str]]]:
    """Every module of the package at ``root`` -> (its package imports, other packages)."""
    mods = module_names(root)
    return {nm: imports(top, nm, f, set(mods)) for nm, f in mods.items()}


def find_cycle(graph: dict[str, tuple[set[str], set[str]]]) -> list[str] | None:
    """One import cycle (its modules, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1 on the stack, 2 done

    def visit(nm: str, path: list[str]) -> list[str] | None:
        state[nm] = 1
        for dep in sorted(graph[nm][0]):
            if dep not in graph:
                continue
            if state.get(dep) == 1:
                return [*path[path.index(dep) :], dep] if dep in path else [nm, dep]
            if dep not in state:
                found = visit(dep, [*path, dep])
                if found:
                    return found
        state[nm] = 2
        return None

    for nm in graph:
        if nm not in state:
            found = visit(nm, [nm])
            if found:
                return found
    return None


def late_imports(graph: dict[str, tuple[set[str], set[str]]], chain: list[list[str]]) -> list[str]:
    """Imports of a module of ``chain`` (layers, lowest first) from its own layer or a later one."""
    rank = {name: k for k, layer in enumerate(chain) for name in layer}
    return [
        f"{nm or '(package)'} (layer {rank[nm]}) imports {dep or '(package)'} (layer {rank[dep]})"
        for nm, (inner, _) in graph.items()
        if nm in rank
        for dep in sorted(inner)
        if dep in rank and rank[dep] >= rank[nm]
    ]
