"""Shared fixtures: a tiny random model for speed, the real default model for end-to-end tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


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
#: checkout folder -> installed package (pyproject's [tool.setuptools] package-dir)
INSTALLED = {
    "app": "sparsescope",
    "frontend": "sparsescope/frontend",
    "static": "sparsescope/static",
}


def _stale_install() -> str | None:
    """Why the installed ``sparsescope`` is not this checkout's code, or None.

    The web app is tested as installed (``import sparsescope``), so after editing app/,
    frontend/ or static/ a non-editable install must be redone; an editable one is always live.
    """
    try:
        import sparsescope
    except ImportError:
        return "sparsescope is not installed: run `bash scripts/install.sh` (or `pip install -e .`)"
    pkg = Path(sparsescope.__file__).resolve().parent
    if pkg == ROOT / "app":  # an editable install of this checkout
        return None
    site = pkg.parent
    for folder, installed in INSTALLED.items():
        for src in (ROOT / folder).rglob("*"):
            if src.suffix not in (".py", ".js", ".html", ".css", ".json") or "__pycache__" in str(
                src
            ):
                continue
            dst = site / installed / src.relative_to(ROOT / folder)
            if not dst.is_file() or dst.read_bytes() != src.read_bytes():
                return (
                    f"the installed sparsescope ({pkg}) differs from this checkout's {folder}/ "
                    f"({src.relative_to(ROOT)}): run `pip install .` again, or "
                    "`pip install -e .` while developing"
                )
    return None


def pytest_configure(config) -> None:
    if (ROOT / "app").is_dir():
        why = _stale_install()
        if why:
            pytest.exit(why, returncode=2)


SENTENCE = "The chef who ran to the store was out of food, so he went back."


@pytest.fixture(scope="session")
def tiny_model():
    from sparse_core.testing import tiny_model as make

    return make(seed=0)


@pytest.fixture(scope="session")
def real_model():
    from sparse_core import load_model

    return load_model(device="cpu")


@pytest.fixture(scope="session")
def sentence() -> str:
    return SENTENCE
