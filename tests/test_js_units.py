"""The page's pure JavaScript modules' unit tests (tests/js/*.test.mjs: view-state.js and the
heatmap's layout, zoom / pan, hit-testing and cell colours), run by node's own test runner
(``node --test``; node's built-in ``node:test`` and ``node:assert``, no npm packages), one pytest
test per file so that CI runs them with the rest. While editing, run one directly::

    node --test tests/js/heatmap_zoom.test.mjs
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
UNITS = sorted((ROOT / "tests" / "js").glob("*.test.mjs"))
NODE = shutil.which("node")


def test_there_are_unit_files():
    names = {p.name for p in UNITS}
    assert {"heatmap_layout.test.mjs", "heatmap_zoom.test.mjs", "heatmap_hit.test.mjs",
            "view_state.test.mjs"} <= names  # fmt: skip


@pytest.mark.skipif(NODE is None, reason="node is not installed (CI has it)")
@pytest.mark.parametrize("path", UNITS, ids=lambda p: p.name)
def test_node_unit_file(path):
    res = subprocess.run(
        [NODE, "--test", "--test-reporter=tap", str(path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    out = res.stdout + res.stderr
    failed = "\n".join(re.findall(r"^not ok .*$", out, re.M))
    assert res.returncode == 0, f"{path.name}: {failed or out[-3000:]}"
    passed = re.search(r"^# pass (\d+)$", out, re.M)
    assert passed and int(passed.group(1)) > 0, out[-3000:]  # the file's tests ran
