"""The code base stays ruff-clean (lint and format), as the README promises."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PATHS = ["app", "sparse_core", "tests", "bench", "scripts", "frontend", "static"]


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff is not installed")
def test_ruff_check_is_clean():
    res = subprocess.run(["ruff", "check", *PATHS], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout[-3000:]


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff is not installed")
def test_ruff_format_is_clean():
    res = subprocess.run(
        ["ruff", "format", "--check", *PATHS], cwd=ROOT, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stdout[-3000:]
