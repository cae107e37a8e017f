"""A plain, non-editable install carries the templates, browser modules, static files and data."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_carries_frontend_static_and_data(tmp_path):
    tracked = subprocess.run(
        ["git", "ls-files", "frontend", "static", "sparse_core/data"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    if not tracked:
        pytest.skip("not a git checkout")
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            ".",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = tmp_path.glob("sparsescope-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = [f for f in tracked if f not in names]
    assert not missing, f"files left out of the wheel: {missing}"
    assert "app/cli.py" in names and "sparse_core/model.py" in names
    assert not any(n.startswith("tests/") for n in names)
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "sparsescope = app.cli:main" in zipfile.ZipFile(wheel).read(entry).decode()
