"""The Triton entmax kernel (sparse_core/entmax/triton.py) on the CPU.

Triton's interpreter (``TRITON_INTERPRET=1``, read when triton is first imported) runs the very
kernel the GPU runs, on CPU tensors, with numpy: each check runs in a fresh interpreter process.
The support must equal the float64 reference (the ``entmax`` package, sparse_core.testing) at
every α, exact ties must give exact zeros, and the values must match to float32 rounding. The same
checks on a GPU are in tests/core/test_cuda.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import sparse_core.entmax as E

pytest.importorskip("triton", reason="triton is not installed (pip install triton)")

_PRELUDE = """
import json, torch
import sparse_core.entmax as E
import sparse_core.entmax.triton as T
from sparse_core.testing import entmax_reference
TINY = torch.finfo(torch.float32).tiny

def check(z, alpha):
    out = torch.full_like(z, float("nan"))
    E._entmax_rows(z, alpha, out=out)  # dispatched to the kernel (the interpreter runs it)
    steps, T.last_steps = T.last_steps, None
    assert steps is not None and steps.shape[0] == z.shape[0]
    ref = entmax_reference(z.double(), alpha)
    bad = ((out > 0) != (ref > 0)) & (torch.maximum(out.double(), ref) >= TINY)
    return {"alpha": alpha, "mismatch": int(bad.sum()),
            "err": float((out.double() - ref).abs().max()),
            "sums": [float(s) for s in out.double().sum(-1)],
            "steps": steps.tolist(), "out": out.tolist()}
"""


def _run(body: str) -> object:
    """Run ``body`` (after the prelude) in a fresh interpreter under TRITON_INTERPRET=1; the
    snippet prints one JSON value, which is returned."""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    code = _PRELUDE + textwrap.dedent(body)
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_kernel_support_is_the_float64_references_at_every_alpha() -> None:
    rows = _run(
        """
        g = torch.Generator().manual_seed(7)
        z = torch.randn(8, 100, generator=g) * 4  # 100 scores: a block of 128, its tail padded
        z[0, 30:] = float("-inf")                 # a masked tail
        z[1] = float("-inf")                      # a fully masked row: zeros
        z[2] = 0.0                                # all equal: uniform
        z[3, 0] = 60.0                            # one score far above: a one-hot row
        z[4] = torch.linspace(-3, 3, 100)         # evenly spread
        res = [check(z, a) for a in (1.03, 1.1, 1.25, 1.333, 1.5, 1.75, 2.0)]
        print(json.dumps(res))
        """
    )
    for r in rows:
        assert r["mismatch"] == 0, r["alpha"]
        assert r["err"] < 1e-6, (r["alpha"], r["err"])
        sums = r["sums"]
        assert sums[1] == 0.0  # the fully masked row
        assert all(abs(s - 1.0) < 1e-5 for i, s in enumerate(sums) if i != 1)
        assert max(r["out"][2]) == pytest.approx(1 / 100, rel=1e-5)
        assert r["out"][3][0] == 1.0 and sum(r["out"][3][1:]) == 0.0
        assert all(p == 0.0 for p in r["out"][0][30:])  # masked entries stay exact zeros
        assert max(s for s, _ in r["steps"]) < 40 and max(e for _, e in r["steps"]) < 50


def test_exact_ties_give_exact_zeros_and_real_attention_rows_are_exact(
    real_model, tmp_path
) -> None:
    """z = (2, 0) at α = 1.5: the second entry sits exactly on the threshold (p = 0 exactly);
    the same for α = 2 with z = (1, 0). Then rows of the real model's attention scores: every
    fourth row of layer 2's heads stacked (rows of every head), from a forward run here, as
    under the interpreter the forward would take its own entmax through the kernel (a hundred
    times slower, and not what is checked)."""
    run = real_model.run("The cat sat on the mat because it was warm, and the dog did not mind.")
    q, k = run.queries[2], run.keys[2]  # (H, n, d)
    s = (q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5).reshape(-1, q.shape[1])
    torch.save(s.contiguous(), tmp_path / "scores.pt")
    res = _run(
        f"""
        z15 = torch.tensor([[2.0, 0.0, -5.0]])
        z2 = torch.tensor([[1.0, 0.0, -5.0]])
        a = check(z15, 1.5)["out"][0]
        b = check(z2, 2.0)["out"][0]
        s = torch.load({str(tmp_path / "scores.pt")!r})[::4].contiguous()
        real = [check(s, al) for al in (1.1, 1.25, 1.5, 2.0)]
        print(json.dumps({{"a": a, "b": b, "rows": s.shape[0],
                          "real": [(r["mismatch"], r["err"]) for r in real]}}))
        """
    )
    assert res["a"] == [1.0, 0.0, 0.0]
    assert res["b"] == [1.0, 0.0, 0.0]
    assert res["rows"] == len(range(0, s.shape[0], 4)) >= 3 * real_model.config.num_heads
    for mismatch, err in res["real"]:
        assert mismatch == 0 and err < 1e-6


def test_bad_scores_raise_and_unsettled_rows_are_recomputed() -> None:
    res = _run(
        """
        z = torch.randn(4, 64)
        z[2, 5] = float("nan")
        try:
            E._entmax_rows(z, 1.5, out=torch.empty_like(z))
            nan = "no error"
        except ValueError as e:
            nan = str(e)
        # one exact pass only: most rows do not settle and go to the torch path
        T._MAX_EXACT = 1
        g = torch.Generator().manual_seed(3)
        z = torch.randn(8, 150, generator=g) * 3
        r = check(z, 2.0)
        n1 = T.last_recomputed
        r2 = check(z, 1.25)
        n2 = T.last_recomputed
        print(json.dumps({"nan": nan, "m": [r["mismatch"], r2["mismatch"]], "redo": [n1, n2],
                          "err": [r["err"], r2["err"]]}))
        """
    )
    assert "NaN or +inf" in res["nan"]
    assert res["redo"][1] == 8  # Newton needs at least two passes: every row recomputed
    assert res["m"] == [0, 0] and max(res["err"]) < 1e-6


def test_the_torch_path_is_kept_off_cuda() -> None:
    """On the CPU (and for float64, per-row α, α out of the kernel's range) ``entmax`` never
    dispatches to the kernel: the CPU results stay bit for bit what they were."""
    rows = torch.randn(8, 32)
    assert not E._use_triton(rows, 1.5)
    assert not E._use_triton(rows.double(), 1.5)
    assert not E._use_triton(rows, torch.full((8,), 1.5, dtype=torch.float64))
    assert not E._triton.available(rows)
