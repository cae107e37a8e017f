"""The code base stays ruff-clean (lint and format), as the README promises (ruff is in the test
extra: a missing ruff fails here rather than skipping)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: ruff's own launcher, found through this interpreter (a venv's bin/ need not be on PATH)
RUFF = [sys.executable, "-m", "ruff"]
PATHS = ["app", "sparse_core", "tests", "bench", "scripts", "frontend", "static"]


def test_ruff_check_is_clean():
    res = subprocess.run([*RUFF, "check", *PATHS], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout[-3000:]


def test_ruff_format_is_clean():
    res = subprocess.run(
        [*RUFF, "format", "--check", *PATHS], cwd=ROOT, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stdout[-3000:]
