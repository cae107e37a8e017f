"""A plain, non-editable wheel carries the templates, browser modules, static files and data, under
the one ``sparsescope`` namespace (plus ``sparse_core``): never generic top-level names such as
``app``, ``frontend`` or ``static``, which would clash with other distributions."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _shipped_files() -> list[str]:
    """The files under frontend/, static/ and sparse_core/data/: git's list in a checkout, the
    folders' files otherwise (e.g. a source tree copied into an image without .git)."""
    folders = ["frontend", "static", "sparse_core/data"]
    git = subprocess.run(["git", "ls-files", *folders], cwd=ROOT, capture_output=True, text=True)
    if git.returncode == 0 and git.stdout.strip():
        return git.stdout.split()
    return [
        str(p.relative_to(ROOT))
        for folder in folders
        for p in (ROOT / folder).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    ]


@pytest.mark.slow
def test_wheel_carries_frontend_static_and_data(tmp_path):
    tracked = _shipped_files()
    assert tracked, "no frontend/static/data files found"
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
    installed = {
        f"sparsescope/{f}" if f.startswith(("frontend/", "static/")) else f for f in tracked
    }
    missing = sorted(f for f in installed if f not in names)
    assert not missing, f"files left out of the wheel: {missing}"
    assert "sparsescope/cli.py" in names and "sparse_core/model.py" in names
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"sparsescope", "sparse_core"}, f"top-level names in the wheel: {sorted(tops)}"
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "sparsescope = sparsescope.cli:main" in zipfile.ZipFile(wheel).read(entry).decode()
