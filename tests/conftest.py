"""Shared fixtures: a tiny random model for speed, the real default model for end-to-end tests.

The tests import this checkout's code (tests/checkout.py), installed or not, and run on both
cores by default (pyproject's addopts: ``-n auto --dist loadgroup``, capped at 2 workers); tests
that share something heavy or exclusive run in one worker (``pytest_collection_modifyitems``).
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path

import pytest

from .checkout import use_the_checkout

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Ray calls made while no cluster is connected fail instead of starting a local cluster of
# their own (Ray's auto-init, with its dashboard): after the Ray group's cluster is shut down, an
# object collected at a worker's exit once started a fresh one (read by Ray at import)
os.environ.setdefault("RAY_ENABLE_AUTO_CONNECT", "0")


def _library_logging_on_the_session_stream() -> None:
    """transformers' log handler writes to the ``sys.stderr`` of the moment it is configured
    (its first logger). Configured inside a test that captures with ``capsys``, it kept that
    test's stream, closed afterwards: a later model load's warning then printed "--- Logging
    error ---" into another test's stderr (an order-dependent failure, e.g. test_cli_analyze then
    test_cli_fit). Configured here, at start-up, it writes to the session's stream."""
    from transformers.utils import logging as hf_logging

    hf_logging.get_logger("transformers")


_library_logging_on_the_session_stream()

ROOT = Path(__file__).resolve().parents[1]
#: Which copy of ``sparsescope`` the tests import: always this checkout's, installed or not
#: (tests/checkout.py, which the bench scripts use too).
CHECKOUT = use_the_checkout()


def pytest_report_header(config) -> str:
    return CHECKOUT


#: The browser tests (tests/browser: one Chromium and one live server per worker, package
#: fixtures) are two groups, their files dealt out in turn, so that both workers share them.
BROWSER = "tests/browser/"
#: Tests that share something heavy or exclusive, by folder or file: one xdist worker each.
GROUPS = {
    "tests/core/test_ray_engine.py": "ray",  # one local Ray cluster of 2 CPUs (ray_cluster)
    "tests/core/test_adapt_ray.py": "ray",
    "tests/test_image.py": "image",  # a container build: its steps share one image
}


#: The longest groups, dealt out first (pyproject's addopts: ``--no-loadscope-reorder``, so the
#: scheduler hands out units in the collection's order): then the modules with slow tests, then
#: the rest by test count, so that no long group starts while the other worker runs out of work
#: (by count alone the Ray group and the image build came last, tens of tests after the rest).
LONGEST = ("browser-0", "browser-1", "ray", "image")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items) -> None:
    """Group the tests for ``--dist loadgroup`` (pyproject's addopts): the browser tests, the Ray
    tests and the image test each in one worker (see :data:`GROUPS`), the browser tests in two
    halves (:data:`BROWSER`); every other module as a whole (its module-scoped fixtures, a
    fitted artefact or a corpus sweep, are made once).

    ``tryfirst``: an xdist worker's own hook turns the ``xdist_group`` marks into the node ids'
    ``@group`` suffix that the scheduler reads; it is registered after this conftest, so it runs
    first otherwise, sees no marks, and every test is scheduled on its own."""
    rels = {item: item.path.relative_to(ROOT).as_posix() for item in items}
    browser = sorted({rel for rel in rels.values() if rel.startswith(BROWSER)})
    half = {rel: f"browser-{k % 2}" for k, rel in enumerate(browser)}
    for item, rel in rels.items():
        if item.get_closest_marker("xdist_group"):
            continue
        group = half.get(rel) or next((g for p, g in GROUPS.items() if rel.startswith(p)), rel)
        item.add_marker(pytest.mark.xdist_group(group))
    groups = {item: _group(item) for item in items}
    size = Counter(groups.values())
    slow = {g for item, g in groups.items() if item.get_closest_marker("slow")}

    def first(item) -> tuple:
        g = groups[item]
        return (LONGEST.index(g) if g in LONGEST else len(LONGEST), g not in slow, -size[g])

    items.sort(key=first)  # stable: each module's tests keep their order


def _group(item) -> str | None:
    mark = item.get_closest_marker("xdist_group") if item is not None else None
    return (mark.args[0] if mark.args else mark.kwargs.get("name")) if mark else None


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem) -> None:
    """The Ray cluster of :func:`ray_cluster` ends with the last test of the ``ray`` group in a
    row (its processes hold memory, and another test may start a cluster of its own)."""
    if _group(item) == "ray" and _group(nextitem) != "ray" and sys.modules.get("ray"):
        import ray

        if ray.is_initialized():
            ray.shutdown()


#: The modules whose numba kernels are compiled into the checkout's ``__pycache__`` (numba's
#: ``cache=True``): each has a ``warm()`` (what ``sparsescope prepare`` runs for an install).
KERNELS = ("sparse_core.entmax.cpu", "sparse_core._method_kernels")


def _kernels_cached() -> bool:
    """Whether every kernel module has numba index files at least as new as its source (numba
    checks the source's stamp itself; this only decides whether warming is worth starting)."""
    for module in KERNELS:
        src = ROOT.joinpath(*module.split(".")).with_suffix(".py")
        kernel = src.with_name("_cpu_kernel.py") if module.endswith(".cpu") else src
        index = list((kernel.parent / "__pycache__").glob(f"{kernel.stem}.*.nbi"))
        if not index or min(p.stat().st_mtime for p in index) < kernel.stat().st_mtime:
            return False
    return True


def pytest_configure(config) -> None:
    """On a run with xdist workers, compile the checkout's numba kernels once, before the workers
    start, one process per module side by side. A fresh clone has no numba cache beside its
    modules (``sparsescope prepare`` warmed the installed copy's), and otherwise every worker,
    and every CLI or server subprocess started before one had written the cache, compiled the
    same kernels (about 25 CPU-s each on a 2-core machine). Nothing is done where the cache is
    there already, in a worker, or in a run without workers."""
    import subprocess

    if os.environ.get("PYTEST_XDIST_WORKER") or not getattr(config.option, "tx", None):
        return
    if config.getoption("collectonly", False) or _kernels_cached():
        return
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", f"import {m} as k; k.warm()"],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for m in KERNELS
    ]
    for p in procs:  # a failure here is the tests' to report, where the kernels are used
        p.wait()


def pytest_xdist_auto_num_workers(config) -> int:
    """``-n auto`` (pyproject's addopts): both cores of a 2-core machine, never more than 2 (each
    worker loads its own models; the suite's heavy tests are grouped, see pytest_collection_
    modifyitems)."""
    return max(1, min(2, os.cpu_count() or 1))


SENTENCE = "The chef who ran to the store was out of food, so he went back."


@pytest.fixture(scope="session")
def tiny_model():
    from sparse_core.testing import tiny_model as make

    return make(seed=0)


@pytest.fixture(scope="session")
def real_model():
    from sparse_core import load_model

    return load_model(device="cpu")


@pytest.fixture
def ray_cluster(monkeypatch):
    """A local Ray cluster of 2 CPUs, started as the engines start one without ``RAY_ADDRESS``
    (:func:`sparse_core.ray_engine.connect`). Starting one costs seconds to tens of seconds, so
    the Ray tests (the ``ray`` group, one worker) share it: the first one starts it, the engines
    connect to the running cluster (and leave it running), and it is shut down after the group's
    last test (:func:`pytest_runtest_teardown`). Skipped where Ray is not installed."""
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        pytest.skip("Ray is not installed (pip install 'sparsescope[ray]'): engine not tested")
    import ray

    from sparse_core.ray_engine import connect

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    if not ray.is_initialized():
        assert connect(num_cpus=2)  # what the engine does without RAY_ADDRESS: a local cluster
    assert ray.cluster_resources()["CPU"] == 2
    assert not connect(num_cpus=2)  # an engine's own connect reuses it, and leaves it running
    return ray


@pytest.fixture(scope="session")
def sentence() -> str:
    return SENTENCE


@pytest.fixture
def one_thread():
    """One torch thread for the test (restored after): then BLAS computes a row the same whatever
    the row count, so split, batched and single runs can be compared bit for bit."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
