"""The entmax kernels' fast paths behind their switches (sparse_core/entmax/fast_paths.py): each
path's own switch and the one for all, and a process started with every path off runs none of
them (no OpenMP team, no SLEEF table, no flush-to-zero bits, no Triton) and gives the same
supports and values as this one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from sparse_core.entmax import entmax, fast_paths

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def clean_env(monkeypatch):
    for var in (fast_paths.ALL, "SPARSESCOPE_NO_TRITON", *fast_paths.PATHS.values()):
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def test_each_switch_turns_its_path_off(clean_env):
    assert fast_paths.state() == dict.fromkeys(fast_paths.PATHS, True)
    for path, var in fast_paths.PATHS.items():
        clean_env.setenv(var, "0")
        assert fast_paths.state() == {p: p != path for p in fast_paths.PATHS}, path
        clean_env.delenv(var)
    clean_env.setenv("SPARSESCOPE_NO_TRITON", "1")
    assert not fast_paths.enabled("triton") and fast_paths.enabled("team")


def test_one_switch_turns_every_path_off(clean_env):
    clean_env.setenv(fast_paths.ALL, "0")
    assert not any(fast_paths.state().values())
    clean_env.setenv(fast_paths.ALL, "1")  # only 0 switches off
    assert all(fast_paths.state().values())
    with pytest.raises(KeyError, match="no fast path 'mkl'"):
        fast_paths.enabled("mkl")


PROBE = """
import json, os, numpy as np, torch
from sparse_core.entmax import entmax
from sparse_core.entmax import cpu
torch.set_num_threads(2)
z = torch.load({z!r})
out = {{a: entmax(z, a) for a in (1.25, 1.5, 1.75)}}
torch.save(out, {out!r})
print(json.dumps({{"team": cpu._team() is not None, "sleef": bool(cpu._vmath()[:4].any()),
    "ftz": bool(cpu._vmath()[4])}}))
"""


@pytest.mark.slow
def test_a_process_with_every_path_off_runs_none_and_agrees(tmp_path):
    g = torch.Generator().manual_seed(0)
    z = torch.randn(256, 200, generator=g) * 3
    z[5, 100:] = float("-inf")
    torch.save(z, tmp_path / "z.pt")
    code = PROBE.format(z=str(tmp_path / "z.pt"), out=str(tmp_path / "out.pt"))
    env = {**os.environ, fast_paths.ALL: "0"}  # the checkout's numba cache: the same code
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    ran = json.loads(done.stdout.strip().splitlines()[-1])
    assert ran == {"team": False, "sleef": False, "ftz": False}
    off = torch.load(tmp_path / "out.pt")
    for a, p_off in off.items():
        p_on = entmax(z, a)
        assert torch.equal(p_on > 0, p_off > 0), a  # the same support
        torch.testing.assert_close(p_on, p_off, rtol=1e-6, atol=1e-7)
