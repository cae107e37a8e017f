"""Make ``import sparsescope`` load this checkout's code, whatever copy of the package is installed.

The web app lives in app/ but is installed as ``sparsescope`` (pyproject's package-dir), so putting
the checkout on ``sys.path`` maps ``sparse_core`` to it but leaves ``sparsescope`` the installed
copy: a test or a benchmark run from an edited checkout would exercise the installed web app.
:func:`use_the_checkout` fixes that for this process and every subprocess it starts. The tests
call it first thing (tests/conftest.py), and so does every script under bench/ that imports the
web app::

    sys.path.insert(0, str(ROOT))  # the checkout: sparse_core, and this module
    from tests.checkout import use_the_checkout

    use_the_checkout()
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The installed package's sub-packages whose folders lie outside app/ (pyproject's package-dir).
OUTSIDE_APP = {"frontend": ROOT / "frontend", "static": ROOT / "static"}
#: The shim's folder once :func:`use_the_checkout` made one in this process (else None).
SHIM: Path | None = None


def is_checkout() -> bool:
    """Whether ``import sparsescope`` loads this checkout's app/ (an editable install of it, or
    the shim of :func:`use_the_checkout`, possibly from a parent process's PYTHONPATH)."""
    try:
        import sparsescope
    except ImportError:
        return False
    return any(Path(p).resolve() == ROOT / "app" for p in getattr(sparsescope, "__path__", []))


def use_the_checkout() -> str:
    """Make ``import sparsescope`` load this checkout's code, here and in every subprocess this
    process starts (servers, the CLI, Jupyter kernels, xdist workers), whatever is installed.

    An editable install of this checkout already does. Otherwise (a plain ``pip install .``, as
    CI does, or an editable install of another checkout) a small package ``sparsescope`` in a
    temporary folder is put first on ``sys.path`` and ``PYTHONPATH``: its ``__path__`` starts with
    app/, and links to frontend/ and static/ stand for ``sparsescope.frontend`` and
    ``sparsescope.static``. Returns a line that says which copy is used (the tests' report
    header; the benchmarks log it)."""
    if not (ROOT / "app").is_dir():
        return "sparsescope: as installed"
    if is_checkout():
        return f"sparsescope: this checkout's app/ ({ROOT / 'app'})"
    for name in [m for m in sys.modules if m == "sparsescope" or m.startswith("sparsescope.")]:
        del sys.modules[name]  # another copy, imported before: forgotten
    global SHIM
    shim = SHIM = Path(tempfile.mkdtemp(prefix="sparsescope-checkout-"))
    pkg = shim / "sparsescope"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        f'"""This checkout\'s app/ as the sparsescope package (made by tests/checkout.py)."""\n'
        f"__path__[:0] = [{str(ROOT / 'app')!r}]\n" + (ROOT / "app" / "__init__.py").read_text()
    )
    for name, folder in OUTSIDE_APP.items():
        (pkg / name).symlink_to(folder, target_is_directory=True)
    sys.path.insert(0, str(shim))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(shim), os.environ.get("PYTHONPATH", "")) if p
    )
    made_by = os.getpid()
    atexit.register(lambda: os.getpid() == made_by and shutil.rmtree(shim, ignore_errors=True))
    assert is_checkout(), "the shim does not load this checkout's app/"
    return f"sparsescope: this checkout's app/ through {shim} (the installed copy is not used)"


def without_the_shim(pythonpath: str) -> str:
    """``pythonpath`` (a PYTHONPATH value) without this process's shim: for a subprocess that
    runs another checkout's code (a benchmark's ``--against`` side), which must not import this
    one's web app."""
    parts = pythonpath.split(os.pathsep) if pythonpath else []
    return os.pathsep.join(p for p in parts if SHIM is None or p != str(SHIM))
