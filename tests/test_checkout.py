"""The tests run this checkout's code, whatever ``sparsescope`` is installed (tests/checkout.py,
called by tests/conftest.py): in this process, in the subprocesses tests start, and with another
copy first on the path; so do the bench scripts that call it."""

from __future__ import annotations

import importlib.resources
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROBE = (
    "import importlib.resources as r, sparsescope.web.main as m; print(m.__file__); "
    "print(r.files('sparsescope.frontend').joinpath('js', 'main.js')); "
    "print(r.files('sparsescope.static').joinpath('css', 'app.css'))"
)
#: PROBE with the paths resolved where they are printed (a bench script's shim is removed when it
#: exits, so its links cannot be followed afterwards)
RESOLVED = (
    "import importlib.resources as r, pathlib, sparsescope.web.main as m; "
    "f = lambda p: print(pathlib.Path(str(p)).resolve()); f(m.__file__); "
    "f(r.files('sparsescope.frontend').joinpath('js', 'main.js')); "
    "f(r.files('sparsescope.static').joinpath('css', 'app.css'))"
)
WANT = [ROOT / "app/web/main.py", ROOT / "frontend/js/main.js", ROOT / "static/css/app.css"]


def test_this_process_imports_the_checkout():
    import sparsescope.web.main

    assert Path(sparsescope.web.main.__file__).resolve() == WANT[0]
    js = importlib.resources.files("sparsescope.frontend").joinpath("js", "main.js")
    css = importlib.resources.files("sparsescope.static").joinpath("css", "app.css")
    assert [Path(str(js)).resolve(), Path(str(css)).resolve()] == WANT[1:]


def test_a_subprocess_imports_the_checkout():
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, cwd="/"
    ).stdout.split()
    assert [Path(p).resolve() for p in out] == WANT


def stale_copy(tmp_path: Path) -> dict[str, str]:
    """An environment whose PYTHONPATH puts a stale ``sparsescope`` ahead of everything (as a
    plain ``pip install .`` of an older tree would be); importing its web app fails."""
    stale = tmp_path / "site" / "sparsescope"
    stale.mkdir(parents=True)
    (stale / "__init__.py").write_text("STALE = True\n")
    (stale / "web").mkdir()
    (stale / "web" / "__init__.py").write_text("")
    (stale / "web" / "main.py").write_text("raise ImportError('the stale copy was imported')\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(stale.parent)
    return env


def test_a_bench_script_imports_the_checkout(tmp_path):
    """What a script under bench/ does first (tests/checkout.py's docstring), with a stale copy
    first on the path: it and its subprocesses import this checkout's web app, and the line it
    returns says so. Without the call the stale copy is what it imports."""
    script = tmp_path / "bench_probe.py"
    script.write_text(
        "import subprocess, sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from tests.checkout import use_the_checkout\n"
        "print(use_the_checkout(), file=sys.stderr)\n"
        f"exec({RESOLVED!r})\n"
        f"subprocess.run([sys.executable, '-c', {RESOLVED!r}], check=True)\n"
    )
    env = stale_copy(tmp_path)
    res = subprocess.run(
        [sys.executable, str(script)], cwd="/", env=env, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert "through" in res.stderr  # the shim was made: the stale copy was set aside
    assert [Path(p).resolve() for p in res.stdout.split()] == WANT * 2
    bare = subprocess.run(
        [sys.executable, "-c", PROBE], cwd="/", env=env, capture_output=True, text=True
    )
    assert "the stale copy was imported" in bare.stderr


@pytest.mark.slow
def test_another_copy_first_on_the_path_is_not_used(tmp_path):
    """A stale copy of the package ahead of everything (as a plain ``pip install .`` of an older
    tree would be): a pytest run still tests this checkout, and its subprocesses too."""
    env = stale_copy(tmp_path)
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0",
         "tests/test_checkout.py", "-k", "this_process or a_subprocess"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert "2 passed" in res.stdout
    assert "through" in res.stdout  # the header names the shim: the stale copy was set aside
