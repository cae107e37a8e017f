"""docs/architecture.md names every module, one line each, and no module that is gone.

Its "Layout" section is a tree in a code block: a folder line ends with ``/``, deeper lines are
indented by two spaces per level, and a module's line is its file name (or a path below the
folder) followed by what it is. Every module of sparse_core/, app/, frontend/js/, bench/ and
scripts/ must have such a line with a description; a line naming a file of those folders that
does not exist fails too.

Every backticked dotted name that points into sparse_core/ or app/ (`runtime.KeptBuffers`,
`SparseProbs.host_reads`, `sparse_core.methods.METHODS`, `attn.rows` for the run's P store) must
name something that exists: the module (by its file's or package's name) or class, and the
attribute in it, read from the source (no import). A module name followed by a method of one of
its classes counts too (`model.run` is `SparseModel.run` of sparse_core/model.py).
"""

from __future__ import annotations

import ast
import re
from functools import cache
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


# ----------------------------------------------------------------------------- named symbols

#: the roots a dotted name can start from (the app is installed as ``sparsescope``)
PACKAGES = {"sparse_core": ROOT / "sparse_core", "sparsescope": ROOT / "app", "app": ROOT / "app"}
#: backticked ``a.b[.c…]``, optionally called: ``model.run(text)``
DOTTED = re.compile(r"`([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?:\([^`]*\))?`")
#: file names, not symbols
EXTENSIONS = {"py", "js", "mjs", "md", "json", "jsonl", "html", "css", "sh", "txt", "npz", "toml",
              "yml", "yaml", "png", "safetensors", "csv"}  # fmt: skip
#: the doc's names for instances: ``attn`` is a run's P store, ``ctx`` a method's context, …
INSTANCES = {"attn": "SparseProbs", "ctx": "PredictContext", "out": "RunOutput", "method": "Method"}


def _defined(node: ast.AST) -> set[str]:
    """The names a statement of a module or class body defines."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return {node.target.id}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    if isinstance(node, (ast.If, ast.Try)):
        return set().union(*(_defined(c) for c in ast.iter_child_nodes(node)))
    return set()


@cache
def _source(path: Path) -> tuple[set[str], dict[str, tuple[set[str], list[str]]]]:
    """A module's top-level names, and per class its members (``self.x`` included) and bases."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top: set[str] = set()
    classes: dict[str, tuple[set[str], list[str]]] = {}
    for node in tree.body:
        top |= _defined(node)
        if isinstance(node, ast.ClassDef):
            members = set().union(*(_defined(item) for item in node.body))
            for sub in ast.walk(node):
                if (
                    isinstance(sub, ast.Attribute)
                    and isinstance(sub.ctx, ast.Store)
                    and isinstance(sub.value, ast.Name)
                    and sub.value.id == "self"
                ):
                    members.add(sub.attr)
            bases = [b.id if isinstance(b, ast.Name) else b.attr
                     for b in node.bases if isinstance(b, (ast.Name, ast.Attribute))]  # fmt: skip
            classes[node.name] = (members, bases)
    return top, classes


@cache
def _index() -> tuple[dict[str, list[Path]], dict[str, list[tuple[set[str], list[str]]]]]:
    """Module name -> its files (a package by its folder's name), class name -> its classes."""
    modules: dict[str, list[Path]] = {}
    classes: dict[str, list[tuple[set[str], list[str]]]] = {}
    for top in ("sparse_core", "app"):
        for f in sorted((ROOT / top).rglob("*.py")):
            if "__pycache__" in f.parts:
                continue
            modules.setdefault(f.parent.name if f.name == "__init__.py" else f.stem, []).append(f)
            for name, cls in _source(f)[1].items():
                classes.setdefault(name, []).append(cls)
    return modules, classes


def _class_has(cls: tuple[set[str], list[str]], attr: str) -> bool:
    members, bases = cls
    classes = _index()[1]
    return attr in members or any(_class_has(c, attr) for b in bases for c in classes.get(b, []))


def _in_module(path: Path, rest: list[str]) -> bool:
    top, classes = _source(path)
    if rest[0] in top:
        if len(rest) > 1 and rest[0] in classes:
            return _class_has(classes[rest[0]], rest[1])
        return True  # a function or value: nothing further to check
    if path.name == "__init__.py":
        sub = path.parent / rest[0]
        for cand in (sub.with_suffix(".py"), sub / "__init__.py"):
            if cand.is_file():
                return len(rest) == 1 or _in_module(cand, rest[1:])
    return any(_class_has(c, rest[0]) for c in classes.values())


def resolves(dotted: str) -> bool | None:
    """True if ``dotted`` names something in sparse_core/ or app/ that exists, False if it points
    there and does not, None if it is not one of ours (torch, numpy, a file name, …)."""
    parts = dotted.split(".")
    if parts[-1] in EXTENSIONS:
        return None
    if parts[0] in PACKAGES:
        path, i = PACKAGES[parts[0]], 1
        while i < len(parts):
            if (path / parts[i]).is_dir():
                path = path / parts[i]
            elif (path / f"{parts[i]}.py").is_file():
                path = path / f"{parts[i]}.py"
            else:
                break
            i += 1
        if path.is_dir():
            path = path / "__init__.py"
        return i == len(parts) or _in_module(path, parts[i:])
    modules, classes = _index()
    head = INSTANCES.get(parts[0], parts[0])
    mods = modules.get(head, []) if head == parts[0] else []
    found = classes.get(head, [])
    if not mods and not found:
        return None
    return any(_in_module(m, parts[1:]) for m in mods) or any(
        _class_has(c, parts[1]) for c in found
    )


def named_symbols(text: str) -> list[str]:
    return sorted(set(DOTTED.findall(text)))


def test_every_named_symbol_exists():
    names = named_symbols(DOC.read_text(encoding="utf-8"))
    checked = [n for n in names if resolves(n) is not None]
    assert len(checked) >= 30, f"the reader found too few names to check: {checked}"
    stale = [n for n in checked if not resolves(n)]
    assert not stale, f"docs/architecture.md names what does not exist (any more): {stale}"


def test_the_symbol_check_can_fail():
    """Real names resolve, invented ones in our modules do not, other libraries' are skipped."""
    text = (
        "`runtime.KeptBuffers` `SparseProbs.host_reads` `sparse_core.methods.METHODS` "
        "`attn.rows` `model.run(text)` `pareto.summary` `methods.evaluate` "
        "`payloads.method_parts` `methods.summary` `SparseProbs.no_such_reader` "
        "`sparse_core.methods.NO_SUCH` `attn.no_such` `torch.softmax` `session.js`"
    )
    verdict = {n: resolves(n) for n in named_symbols(text)}
    assert verdict == {
        "SparseProbs.host_reads": True,
        "SparseProbs.no_such_reader": False,
        "attn.no_such": False,
        "attn.rows": True,
        "methods.evaluate": True,
        "methods.summary": False,
        "runtime.KeptBuffers": True,
        "model.run": True,
        "pareto.summary": True,
        "payloads.method_parts": False,
        "session.js": None,
        "sparse_core.methods.METHODS": True,
        "sparse_core.methods.NO_SUCH": False,
        "torch.softmax": None,
    }
