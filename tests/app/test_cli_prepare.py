"""``sparsescope prepare`` (install.sh runs it) builds what a first start would: the compiled
kernels and the shipped adapted models, one printed line per step; and ``serve`` says what it
does while it loads and warms up."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sparse_core.shipped import shipped_models
from sparsescope.cli import main
from sparsescope.engine.service import AnalysisService

from .conftest import make_settings


@pytest.mark.slow
def test_prepare_builds_the_shipped_models_into_the_cache(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SPARSESCOPE_CACHE", str(tmp_path / "cache"))
    assert shipped_models(), "the package ships at least one adapted model"
    assert main(["prepare"]) == 0
    out = capsys.readouterr().out.splitlines()
    import sparse_core

    assert out[0] == f"sparsescope prepare: kernels of {Path(sparse_core.__file__).parent}"
    assert out[1].startswith("sparsescope prepare: compiling the CPU entmax kernel")
    assert out[-1] == "sparsescope prepare: ready"
    for model_id in shipped_models():
        assert any(line.startswith(f"sparsescope prepare: building {model_id}") for line in out)
    built = sorted((tmp_path / "cache" / "adapted").glob("*/model.safetensors"))
    assert len(built) == len(shipped_models())
    stamp = [p.stat().st_mtime_ns for p in built]
    assert main(["prepare"]) == 0  # again: found, not rebuilt
    assert [p.stat().st_mtime_ns for p in built] == stamp


def test_install_sh_prepares_the_installed_copy_not_the_checkout():
    """install.sh's ``prepare`` line, run as the script runs it (from the checkout's root), with
    the command swapped for one that prints which ``sparse_core`` it imports: the installed one,
    whose numba cache a first start reads. ``python -m`` from the checkout's root would import
    the checkout's folder and leave the installed copy to compile at the first start."""
    root = Path(__file__).resolve().parents[2]
    script = (root / "scripts" / "install.sh").read_text()
    (line,) = [ln for ln in script.splitlines() if re.search(r"-m sparsescope\.cli prepare", ln)]
    probe = "import sparse_core, pathlib; print(pathlib.Path(sparse_core.__file__).parent)"
    line = line.replace("-m sparsescope.cli prepare", f"-c '{probe}'")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def imports(command: list[str], cwd: Path) -> Path:
        run = subprocess.run(command, cwd=cwd, env={**env, "PY": sys.executable},
                             capture_output=True, text=True, check=True)  # fmt: skip
        return Path(run.stdout.strip())

    installed = imports([sys.executable, "-c", probe], Path("/"))
    if installed == root / "sparse_core":
        pytest.skip("sparse_core is installed from this checkout (editable): no other copy")
    assert imports(["bash", "-c", line], root) == installed


def test_install_sh_compiles_the_checkouts_kernels_for_the_tests():
    """In a source checkout install.sh also warms the checkout's kernel modules (the tests import
    the checkout, and numba keeps compiled kernels beside the source): the same modules that the
    suite's own warm step compiles (tests/conftest.py ``KERNELS``), each imported from the
    checkout, not from the installed copy."""
    from tests.conftest import KERNELS

    root = Path(__file__).resolve().parents[2]
    script = (root / "scripts" / "install.sh").read_text()
    (loop,) = [ln for ln in script.splitlines() if ln.strip().startswith("for module in ")]
    assert loop.split(" in ", 1)[1].rstrip("; do").split() == list(KERNELS)
    (line,) = [ln for ln in script.splitlines() if "import $module as k; k.warm()" in ln]
    probe = "import $module as m; print(m.__file__)"
    command = line.replace("import $module as k; k.warm()", probe)
    command = command.replace(">/dev/null 2>&1", "").split(" & ")[0].strip()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    for module in KERNELS:
        run = subprocess.run(["bash", "-c", f"module={module}; {command}"], cwd=root,
                             env={**env, "PY": sys.executable}, capture_output=True, text=True,
                             check=True)  # fmt: skip
        src = Path(run.stdout.strip())
        assert src == root.joinpath(*module.split(".")).with_suffix(".py") or src == root.joinpath(
            *module.split("."), "__init__.py"
        ), (module, src)


#: Run in a fresh interpreter: every numba kernel's compiled signatures after ``prepare``'s warm
#: steps, then the new ones a first start's warm-up analysis (the real default model) added.
FIRST_START = """
import json, sys, tempfile
import numba
from sparse_core import _method_kernels as M
from sparse_core.entmax import _cpu_kernel as K, cpu as C
from sparsescope.engine.service import AnalysisService
from sparsescope.engine.settings import Settings

def signatures():
    return {f"{m.__name__}.{n}": set(map(str, f.signatures)) for m in (M, K)
            for n, f in vars(m).items() if isinstance(f, numba.core.registry.CPUDispatcher)}

assert M.warm() and C.warm()
warm = signatures()
AnalysisService(Settings(data_dir=tempfile.mkdtemp(), warmup=True)).start(step=lambda s: None)
new = {k: sorted(v - warm.get(k, set())) for k, v in signatures().items()}
print(json.dumps({k: v for k, v in new.items() if v}))
"""


@pytest.mark.slow
def test_a_first_start_compiles_nothing_prepare_did_not(tmp_path):
    """What ``prepare`` compiles covers the first start: the default model's warm-up analysis
    (every served model, the shipped artefact's methods) needs no kernel signature that the
    warm steps did not build, so the installed cache holds everything it loads (a read-only
    array, say, is a signature of its own)."""
    import json

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "SPARSESCOPE_CACHE": str(tmp_path / "cache")}
    run = subprocess.run([sys.executable, "-c", FIRST_START], cwd=root, env=env,
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads(run.stdout.strip().splitlines()[-1]) == {}


def test_the_service_start_says_each_step(tmp_path, tiny_model):
    heard: list[str] = []
    service = AnalysisService(make_settings(tmp_path, warmup=True), model=tiny_model)
    service.start(step=heard.append)
    assert heard[0] == "loading the models" and heard[1].startswith("models loaded in ")
    assert heard[2].startswith("warming up") and heard[3].startswith("warm-up done in ")
    service.start(step=heard.append)  # started once: nothing more to say
    assert len(heard) == 4


def test_serve_warms_up_once_the_server_answers(tmp_path, tiny_model, monkeypatch):
    """``serve`` loads the models, starts answering, then warms up in a thread of its own and
    freezes the start-up objects: no warm-up before the server has started, one after (then the
    freeze), and neither when it stopped first."""
    import threading
    import types

    import sparsescope.engine.memory as memory
    from sparsescope.commands.serve import warm_when_serving

    froze: list[int] = []  # this test process's objects are not frozen for good
    monkeypatch.setattr(memory, "freeze_startup_objects", lambda: froze.append(1) or 1)

    heard: list[str] = []
    service = AnalysisService(make_settings(tmp_path, warmup=True), model=tiny_model)
    service.start(step=heard.append, warm=False)
    assert heard == [heard[0], heard[1]] and service.stats.warmups == 0
    server, stopped = types.SimpleNamespace(started=False), threading.Event()
    thread = warm_when_serving(server, service, heard.append, stopped)
    thread.join(0.3)
    assert thread.is_alive() and service.stats.warmups == 0 and froze == []  # waits for it
    server.started = True
    thread.join(120)
    assert not thread.is_alive() and service.stats.warmups == 1 and froze == [1]
    assert heard[2].startswith("warming up") and heard[3].startswith("warm-up done in ")

    later = AnalysisService(make_settings(tmp_path / "b", warmup=True), model=tiny_model)
    later.start(warm=False)
    stopped_first = threading.Event()
    thread = warm_when_serving(types.SimpleNamespace(started=False), later, print, stopped_first)
    stopped_first.set()
    thread.join(5)
    assert not thread.is_alive() and later.stats.warmups == 0 and froze == [1]
