"""α just above 1: every entmax path tends continuously to softmax (no overflow in 1/(α − 1)).

The reference is independent of our code: each row solved in mpmath (50 digits) by bisection on
``Σ [1 + (α − 1)(z_i − max z − w)]_+^(1/(α − 1)) = 1``, and the α-gradient is mpmath's
derivative of ``Σ g_i p_i(α)`` of that reference. Paths: the default dispatch (CPU rows through
the compiled kernel's module, which routes α below its MIN_ALPHA to the torch code), the torch
paths (``SPARSESCOPE_NO_NUMBA=1``), the dense/compact paths forced, per-row α (few and many
distinct values), the Triton kernel's dispatch under its CPU interpreter, and the gradient.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap

import mpmath as mp
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparse_core import entmax as E
from sparse_core.entmax import cpu as entmax_cpu
from sparse_core.entmax import entmax

ALPHAS = [1.0 + 2.0**-52, 1.0 + 1e-7, 1.000001, 1.00001, 1.0001]
F64 = torch.float64
_REF_DPS = 40


def ref_row(z: list[float], alpha: float) -> list[mp.mpf]:
    """α-entmax of one row in mpmath: bisection on w (τ = −1 + (α − 1) w in x units)."""
    with mp.workdps(_REF_DPS):
        c = mp.mpf(alpha) - 1
        live = [mp.mpf(v) for v in z if v != -math.inf]
        m = max(live)

        def terms(w):
            out = []
            for v in z:
                t = 1 + c * (mp.mpf(v) - m - w) if v != -math.inf else mp.mpf(0)
                out.append(t ** (1 / c) if t > 0 else mp.mpf(0))
            return out

        lo, hi = mp.mpf(0), mp.mpf(1)
        while mp.fsum(terms(hi)) > 1:
            hi *= 2
        for _ in range(160):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if mp.fsum(terms(mid)) > 1 else (lo, mid)
        return terms((lo + hi) / 2)


def reference(z: torch.Tensor, alpha: float) -> torch.Tensor:
    if alpha == 1.0:
        return torch.softmax(z.double(), -1)
    rows = z.double().reshape(-1, z.shape[-1]).tolist()
    out = [
        [float(v) for v in ref_row(r, alpha)] if any(x != -math.inf for x in r) else [0.0] * len(r)
        for r in rows
    ]
    return torch.tensor(out, dtype=F64).view(z.shape)


def scores(seed: int, shape=(3, 9), scale: float = 3.0, dtype=torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    z = (torch.randn(shape, generator=g, dtype=F64) * scale).to(dtype)
    z[0, 2] = -math.inf  # a masked entry
    return z


def assert_close(p: torch.Tensor, z: torch.Tensor, alpha: float) -> None:
    ref = reference(z, alpha)
    assert torch.isfinite(p).all()
    tol = 2e-7 if p.dtype == torch.float32 else 1e-13
    err = (p.double() - ref).abs().max().item()
    assert err < tol, (alpha, p.dtype, err)
    assert ((p > 0) == (ref > 0)).all()


@pytest.fixture(params=["kernel", "torch"])
def cpu_path(request, monkeypatch):
    if request.param == "torch":
        monkeypatch.setenv("SPARSESCOPE_NO_NUMBA", "1")
    return request.param


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("dtype", [torch.float32, F64])
def test_entmax_just_above_one_matches_the_reference(alpha, dtype, cpu_path) -> None:
    # 9 scores (short rows) and 130 (the group-maxima bound of rows from 128 scores)
    for z in (scores(1, dtype=dtype), scores(2, (2, 130), dtype=dtype)):
        p = entmax(z, alpha)
        assert_close(p, z, alpha)


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("path", ["dense", "compact"])
def test_forced_torch_paths_just_above_one(alpha, path) -> None:
    z = scores(3)
    p = E._entmax_rows(z, alpha, path=path)
    assert_close(p, z, alpha)


@pytest.mark.parametrize("many", [False, True])
def test_per_row_alpha_just_above_one(many) -> None:
    """A few distinct α (one call per value) and more than _MAX_GROUPS (the compact path with
    a per-row α): rows just above 1 mixed with 1, 1.5 and 1.2."""
    values = ALPHAS + [1.0, 1.5, 1.2]
    if many:
        values = values + [1.0 + 1e-6 * (i + 2) for i in range(E._MAX_GROUPS)]
    z = scores(4, (len(values), 7))
    a = torch.tensor(values, dtype=F64).view(-1, 1)
    p = entmax(z, a)
    for i, v in enumerate(values):
        assert_close(p[i : i + 1], z[i : i + 1], v)


def test_continuous_into_softmax_and_across_the_threshold() -> None:
    """|entmax − softmax| shrinks linearly with α − 1, and the near-softmax path meets the
    compact path at NEAR_ONE without a jump."""
    z = scores(5, (4, 50), dtype=F64)
    soft = torch.softmax(z, -1)
    prev = None
    for e in (1e-3 * 0.99, 1e-5, 1e-7, 1e-9, 1e-12, 2.0**-52):
        d = (entmax(z, 1.0 + e) - soft).abs().max().item()
        if prev is not None:
            assert d < prev[1] * (e / prev[0]) * 1.5 + 1e-15
        prev = (e, d)
    below = entmax(z, 1.0 + E.NEAR_ONE * (1 - 1e-12))
    above = entmax(z, 1.0 + E.NEAR_ONE)
    assert (below - above).abs().max().item() < 1e-10


def test_the_kernels_refuse_alpha_below_their_range() -> None:
    z = torch.randn(2, 8)
    with pytest.raises(ValueError, match="alpha in"):
        entmax_cpu.entmax_rows(z, 1.00001, torch.empty_like(z), lambda *a: None)


def test_triton_dispatch_under_the_interpreter_just_above_one() -> None:
    """The Triton kernel takes α in [MIN_ALPHA, 2] and refuses the rest; entmax on CPU rows
    with the interpreter on routes α just above 1 to the near-softmax path."""
    pytest.importorskip("triton", reason="triton is not installed")
    code = textwrap.dedent(
        """
        import json, torch
        import sparse_core.entmax as E
        import sparse_core.entmax.triton as T
        z = torch.load(%r)
        res = {}
        for a in %r:
            out = torch.full_like(z, float("nan"))
            E._entmax_rows(z, a, out=out)
            res[repr(a)] = out.double().tolist()
        try:
            T.entmax_rows(z, 1.00001, torch.empty_like(z), lambda *a: None)
            res["refused"] = False
        except ValueError:
            res["refused"] = True
        res["kernel_ok"] = E._use_triton(z, 1.5) and not E._use_triton(z, 1.00001)
        print(json.dumps(res))
        """
    )
    z = scores(6, (3, 40))
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"near_one_{os.getpid()}.pt")
    torch.save(z, path)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", code % (path, ALPHAS)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    os.unlink(path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["refused"] and res["kernel_ok"]
    for a in ALPHAS:
        assert_close(torch.tensor(res[repr(a)]).float(), z, a)


@pytest.mark.parametrize("alpha", ALPHAS)
def test_gradient_just_above_one(alpha) -> None:
    """∂L/∂α against mpmath's derivative of the reference, and ∂L/∂z by gradcheck."""
    z = scores(7, (2, 6), dtype=F64)
    g = torch.randn(z.shape, generator=torch.Generator().manual_seed(8), dtype=F64)
    for dtype, tol in ((F64, 1e-5), (torch.float32, 1e-4)):
        a = torch.tensor([alpha, alpha + 1e-9], dtype=F64).view(2, 1).requires_grad_()
        zz = z.detach().to(dtype).clone().requires_grad_()
        p = entmax(zz, a)
        (p * g.to(dtype)).sum().backward()
        assert torch.isfinite(zz.grad).all() and torch.isfinite(a.grad).all()
        for r in range(2):
            row, ar = z[r].tolist(), alpha + (1e-9 if r else 0.0)

            def f(x, row=row, r=r):
                return mp.fsum(mp.mpf(float(g[r, i])) * v for i, v in enumerate(ref_row(row, x)))

            with mp.workdps(_REF_DPS):
                want = float(mp.diff(f, mp.mpf(ar), h=mp.mpf(10) ** -20))
            got = float(a.grad[r, 0])
            assert abs(got - want) <= tol * max(1.0, abs(want)), (alpha, dtype, r, got, want)
    zc = z.clone().requires_grad_()
    assert torch.autograd.gradcheck(lambda x: entmax(x, alpha), (zc,))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.floats(min_value=1.0, max_value=1.001, exclude_min=True),
    st.lists(st.floats(-30.0, 30.0, allow_nan=False), min_size=1, max_size=40),
    st.sampled_from([torch.float32, F64]),
)
def test_property_just_above_one(alpha: float, row: list[float], dtype) -> None:
    """For α ∈ (1, 1.001] every score here is in the support (1/(α − 1) ≥ 1000 > the score
    range), where entmax is characterised by ``Σ p = 1`` and ``(p_i^c − p_j^c)/c = z_i − z_j``
    (c = α − 1); checked in float64 with expm1 (no cancellation), and |p − softmax| = O(c)."""
    z = torch.tensor([row], dtype=dtype)
    p = entmax(z, alpha).double()
    z64 = z.double()
    assert torch.isfinite(p).all()
    assert abs(p.sum().item() - 1.0) < (1e-6 if dtype == torch.float32 else 1e-12)
    c = alpha - 1.0
    j = int(z64.argmax())
    live = p[0] > 1e-30 if dtype == F64 else p[0] > 1e-20
    logp = p[0].log()
    # p_i^c − p_j^c over c = p_j^c expm1(c (log p_i − log p_j)) / c
    lhs = p[0, j] ** c * torch.expm1(c * (logp - logp[j])) / c
    want = z64[0] - z64[0, j]
    rel = 1e-9 if dtype == F64 else 1e-5
    err = ((lhs - want).abs() / (1.0 + want.abs()))[live]
    # float32 values: log p carries ~eps32 relative per entry
    assert err.numel() == 0 or err.max().item() < rel + (0 if dtype == F64 else 6e-7 * 30)
    soft = torch.softmax(z64, -1)
    spread = float(z64.max() - z64.min())
    assert (p - soft).abs().max().item() <= c * (spread**2 + 1.0) + 1e-6
