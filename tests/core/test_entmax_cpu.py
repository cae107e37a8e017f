"""The compiled CPU entmax kernel (sparse_core/entmax/cpu.py) on its own: exact supports, the
torch paths' thresholds, ties, masks, errors, thread splits, and real attention rows.

tests/core/test_entmax.py runs every public-map test through both the kernel and the torch
paths; these are the kernel's own cases."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sparse_core import entmax as E
from sparse_core.entmax import cpu as entmax_cpu
from sparse_core.entmax import entmax, fast_paths
from sparse_core.testing import entmax_reference

ALPHAS = [1.03, 1.04, 1.05, 1.1, 1.125, 1.15, 1.2, 1.25, 1.3, 1.3333, 1.45, 1.5, 1.6185, 1.75, 2.0]
"""β = 1/(α − 1): 25 (binary exponentiation passes); 20, 10, 8, 5, 4, 3 (unrolled products); 2
and 1 (closed form); non-integer ones, 33.3 included (SLEEF, or libm under 4 candidates; 1.6185
and 1.3333 take no log / exp on more: a cube root inline and products); those above 2 by the
one-pass series (6.67 and 3.33 with inline cube roots, 3.0003 and 2.22 with the vector log /
exp)."""
TINY32 = torch.finfo(torch.float32).tiny


def torch_entmax(z: torch.Tensor, alpha: float, monkeypatch) -> torch.Tensor:
    with monkeypatch.context() as m:
        m.setenv("SPARSESCOPE_NO_NUMBA", "1")
        return entmax(z, alpha)


def assert_exact(p: torch.Tensor, z: torch.Tensor, alpha: float) -> None:
    r64 = entmax_reference(z.double(), alpha)
    diff = (p > 0) != (r64 > 0)
    if p.dtype == torch.float32:  # exact values under float32's range are flushed to 0
        diff &= torch.maximum(p.double(), r64) >= TINY32
    assert not diff.any(), f"{int(diff.sum())} support entries differ from the float64 reference"
    assert float((p.double() - r64).abs().max()) <= 1e-6
    assert not ((p > 0) & (p < torch.finfo(p.dtype).tiny)).any()


def test_the_kernel_takes_cpu_rows(monkeypatch) -> None:
    z = torch.randn(4, 300)
    assert entmax_cpu.available(z, 1.5)
    assert not entmax_cpu.available(z, 1.0)  # softmax
    assert not entmax_cpu.available(z, 1.01)  # β > 33: the torch compact path
    assert not entmax_cpu.available(z.half(), 1.5)
    monkeypatch.setenv("SPARSESCOPE_NO_NUMBA", "1")
    assert not entmax_cpu.available(z, 1.5)


def test_kernel_calls_are_counted(monkeypatch) -> None:
    """The dispatch really reaches the kernel (and not with the switch set)."""
    calls = []
    real = entmax_cpu.entmax_rows
    monkeypatch.setattr(entmax_cpu, "entmax_rows", lambda *a: calls.append(1) or real(*a))
    entmax(torch.randn(3, 40), 1.5)
    assert calls == [1]
    monkeypatch.setenv("SPARSESCOPE_NO_NUMBA", "1")
    entmax(torch.randn(3, 40), 1.5)
    assert calls == [1]


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("n", [1, 2, 5, 127, 128, 130, 512, 1000])
def test_exact_support_on_random_rows(alpha: float, n: int) -> None:
    g = torch.Generator().manual_seed(n)
    for scale in (0.1, 3.0, 100.0):
        z = torch.randn(13, n, generator=g) * scale
        z[3] = z[3].round()  # ties
        assert_exact(entmax(z, alpha), z, alpha)


@pytest.mark.parametrize("alpha", ALPHAS)
def test_same_support_and_values_as_the_torch_paths(alpha: float, monkeypatch) -> None:
    g = torch.Generator().manual_seed(7)
    z = torch.randn(6, 64, 256, generator=g) * 4
    p, q = entmax(z, alpha), torch_entmax(z, alpha, monkeypatch)
    assert torch.equal(p > 0, q > 0)
    # the torch dense path (α < 1.5) carries float32 rounding amplified by β = 1 / (α − 1)
    assert float((p - q).abs().max()) <= max(1e-6, torch.finfo(torch.float32).eps / (alpha - 1))
    if alpha in (1.5, 2.0):  # the same closed form, sums in the same order: τ bit for bit
        assert torch.equal(p, q)


@pytest.mark.parametrize("alpha", [1.5, 2.0])
def test_exact_ties_give_exact_zeros(alpha: float) -> None:
    # α 1.5: (2, 0) puts the second score exactly on the threshold; α 2: (1, 0) likewise
    top = 2.0 if alpha == 1.5 else 1.0
    z = torch.tensor([[top, 0.0, -5.0] + [-9.0] * 200])
    p = entmax(z, alpha)
    assert p[0, 0] == 1.0 and not p[0, 1:].any()


def test_masked_and_dead_rows() -> None:
    z = torch.randn(4, 300)
    z[0, ::2] = -torch.inf
    z[1] = -torch.inf
    z[2, 1:] = -torch.inf
    p = entmax(z, 1.5)
    assert not p[0, ::2].any() and torch.allclose(p[0].sum(), torch.tensor(1.0))
    assert not p[1].any()  # fully masked: zeros
    assert p[2, 0] == 1.0 and not p[2, 1:].any()
    assert_exact(p[[0, 2, 3]], z[[0, 2, 3]], 1.5)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
@pytest.mark.parametrize("n", [20, 300])
def test_nan_and_inf_are_refused(bad: float, n: int) -> None:
    z = torch.randn(5, n)
    z[3, n // 2] = bad
    with pytest.raises(ValueError, match="NaN or \\+inf"):
        entmax(z, 1.5)
    z = torch.full((2, n), -torch.inf)
    z[1, 4] = bad  # a NaN among masked scores, which the maximum cannot see
    with pytest.raises(ValueError, match="NaN or \\+inf"):
        entmax(z, 1.25)


def test_float64_rows_stay_float64() -> None:
    z = torch.randn(10, 200, dtype=torch.float64) * 5
    p = entmax(z, 1.75)
    assert p.dtype == torch.float64
    assert_exact(p, z, 1.75)


def test_out_buffer_is_written_in_place() -> None:
    z = torch.randn(2, 3, 160)
    buf = torch.full((4, 2, 3, 160), 7.0)
    p = entmax(z, 1.5, out=buf[1])
    assert p.data_ptr() == buf[1].data_ptr()
    assert torch.equal(buf[1], entmax(z, 1.5)) and (buf[0] == 7.0).all()


def _rows_to_copy(n: int, dtype: torch.dtype) -> torch.Tensor:
    """Real-looking rows with the kernel's special cases: fully masked, a lone candidate, a
    masked tail, ties."""
    g = torch.Generator().manual_seed(n)
    z = (torch.randn(40, n, generator=g) * 3).to(dtype)
    z[1] = float("-inf")  # fully masked
    z[2, 5] = 1e4  # one candidate alone
    z[3, n // 2 :] = float("-inf")
    z[4] = z[4].round()
    return z


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n", [300, 512])
@pytest.mark.parametrize("threads", ["one", "team", "own"])
def test_copy_receives_every_row_and_out_may_be_the_scores(dtype, n, threads, monkeypatch):
    """``copy=`` (the kernel's streaming stores) holds the result bit for bit, on one thread,
    on torch's team and on our own threads, whether its rows start on a 64-byte boundary or
    not (n = 300: they do not); ``out=`` the scores themselves (in place) gives the same bits
    as a fresh result, at every kind of α (the series path keeps its row for a redo)."""
    z = _rows_to_copy(n, dtype)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1 if threads == "one" else 2)
        monkeypatch.setattr(entmax_cpu, "MIN_ROWS_PER_THREAD", 4)
        if threads == "own":
            monkeypatch.setattr(entmax_cpu, "_team", lambda: None)
        for alpha in (1.1, 1.15, 1.25, 1.5, 1.6, 1.75, 2.0):
            want = entmax(z, alpha)
            space = torch.full((z.numel() + 1,), 7.0, dtype=dtype)
            copy = space[1:].view(z.shape)  # shifted by one element: rows off the boundary
            got = entmax(z, alpha, copy=copy)
            assert torch.equal(got, want) and torch.equal(copy, want), alpha
            assert space[0] == 7.0
            scores = z.clone()
            rec = torch.full_like(z, 7.0)
            p = entmax(scores, alpha, out=scores, copy=rec)
            assert p.data_ptr() == scores.data_ptr()
            assert torch.equal(scores, want) and torch.equal(rec, want), alpha
    finally:
        torch.set_num_threads(before)


def test_copy_and_in_place_on_every_other_path(monkeypatch) -> None:
    """Where the kernel does not take the rows (softmax, α just above 1, a per-head α, the
    torch paths, a copy that is not contiguous), ``copy`` still receives the result and ``out``
    may still be the scores: each computed aside, then copied."""
    g = torch.Generator().manual_seed(11)
    z = torch.randn(3, 4, 64, 96, generator=g) * 3
    per_head = torch.tensor([1.0, 1.2, 1.5, 2.0]).view(1, 4, 1, 1)
    cases = [1.0, 1.0 + 1e-4, per_head, 1.5]
    for alpha in cases:
        want = entmax(z, alpha)
        copy = torch.full((96, 3, 4, 64), 7.0).permute(1, 2, 3, 0)  # not contiguous
        assert torch.equal(entmax(z, alpha, copy=copy), want) and torch.equal(copy, want)
        scores = z.clone()
        rec = torch.full_like(z, 7.0)
        p = entmax(scores, alpha, out=scores, copy=rec)
        assert p.data_ptr() == scores.data_ptr()
        assert torch.equal(scores, want) and torch.equal(rec, want)
    with monkeypatch.context() as m:  # the torch paths: the compact one zeroes out first
        m.setenv("SPARSESCOPE_NO_NUMBA", "1")
        for alpha in (1.25, 1.75):
            want = entmax(z, alpha)
            scores, rec = z.clone(), torch.empty_like(z)
            entmax(scores, alpha, out=scores, copy=rec)
            assert torch.equal(scores, want) and torch.equal(rec, want)
    with pytest.raises(ValueError, match="copy must have the shape"):
        entmax(z, 1.5, copy=torch.empty(3, 4, 64, 95))
    with pytest.raises(ValueError, match="copy= are not supported"):
        entmax(z.clone().requires_grad_(), 1.5, copy=torch.empty_like(z))


def test_any_split_over_threads_gives_the_same_bits(monkeypatch) -> None:
    g = torch.Generator().manual_seed(3)
    z = torch.randn(12, 64, 512, generator=g) * 3
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = entmax(z, 1.25)
        torch.set_num_threads(3)
        monkeypatch.setattr(entmax_cpu, "MIN_ROWS_PER_THREAD", 5)
        three = entmax(z, 1.25)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one, three)
    assert torch.equal(entmax(z[:, 5:9], 1.25), one[:, 5:9])  # rows alone, as batched


@pytest.fixture
def two_threads():
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("alpha", [1.25, 1.5, 1.75])
def test_torch_team_and_own_threads_give_the_same_bits(alpha, two_threads, monkeypatch) -> None:
    """Rows shared out on torch's OpenMP team (where this torch has one) equal those on our own
    threads and on one thread, bit for bit; and the team really ran them."""
    g = torch.Generator().manual_seed(5)
    z = torch.randn(12, 100, 384, generator=g) * 4
    z[3, :7, 200:] = float("-inf")
    team = entmax_cpu._team()
    if entmax_cpu._openmp_library() is not None and fast_paths.enabled("team"):
        assert team is not None
        runs = []
        real = type(team).run
        monkeypatch.setattr(type(team), "run", lambda self, *a: runs.append(a[5]) or real(self, *a))
    on_team = entmax(z, alpha)
    if team is not None:
        assert runs == [2]
    with monkeypatch.context() as m:
        m.setattr(entmax_cpu, "_team", lambda: None)
        own = entmax(z, alpha)
    torch.set_num_threads(1)
    assert torch.equal(on_team, own) and torch.equal(on_team, entmax(z, alpha))
    assert_exact(on_team, z, alpha)


def test_nan_is_refused_on_the_team(two_threads) -> None:
    z = torch.randn(400, 256)
    z[333, 17] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        entmax(z, 1.25)


def test_no_team_where_torch_is_not_openmp(monkeypatch) -> None:
    monkeypatch.setattr(
        torch.__config__, "parallel_info", lambda: "ATen parallel backend: native thread pool"
    )
    assert entmax_cpu._openmp_library() is None


def test_unsettled_rows_go_to_the_torch_path(monkeypatch) -> None:
    """Rows the kernel flags (status 3) are recomputed by the torch compact path."""
    z = torch.randn(6, 200)
    real = entmax_cpu._load()

    class Flagging:
        @staticmethod
        def solve_rows(zz, o, alpha, tiny, r0, r1, status, vm, copy):
            real.solve_rows(zz, o, alpha, tiny, r0, r1, status, vm, copy)
            status[r0 + 1] = 3
            o[r0 + 1] = 0.5  # garbage the redo must replace

    monkeypatch.setattr(entmax_cpu, "_kernel", Flagging)
    monkeypatch.setattr(entmax_cpu, "MIN_ROWS_PER_THREAD", 10**6)
    p = entmax(z, 1.5)
    assert_exact(p, z, 1.5)


def test_the_kernel_solves_each_row_alone() -> None:
    """The kernel entry point itself: its status and output on a hand-made batch."""
    k = entmax_cpu._load()
    z = np.array([[2.0, 0.0, -1.0, -1.0], [0.0, 0.0, 0.0, 0.0], [np.nan, 0, 0, 0]], np.float32)
    out = np.full_like(z, 9.0)
    status = np.zeros(3, np.int8)
    k.solve_rows(
        z, out, 1.5, TINY32, 0, 3, status, entmax_cpu._vmath(), entmax_cpu.no_copy(out.dtype)
    )
    assert status.tolist() == [0, 0, 1]
    assert out[0].tolist() == [1.0, 0.0, 0.0, 0.0]
    assert out[1].tolist() == [0.25] * 4


@pytest.mark.real_model
@pytest.mark.parametrize("alpha", [1.25, 1.5, 1.75, 2.0])
def test_real_attention_rows(alpha: float, monkeypatch) -> None:
    """The default model's scores of a real sentence: exact, and the torch paths' support."""
    import sparse_core

    model = sparse_core.load_model()
    text = "The cat sat on the mat because it was tired, and the dog watched it from the door. " * 6
    out = model.run(text, alpha=alpha)
    q, k = out.queries[2].float(), out.keys[2].float()  # (H, n, d)
    z = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5  # (H, n, n)
    p = entmax(z, alpha)
    assert_exact(p.view(-1, z.shape[-1]), z.view(-1, z.shape[-1]), alpha)
    assert torch.equal(p > 0, torch_entmax(z, alpha, monkeypatch) > 0)
    assert torch.equal(p, E.entmax(z, alpha))  # deterministic
    # and the kernel settles every row at its first try (no redo from {x > −1}: the bound held)
    rows = z.reshape(-1, z.shape[-1]).contiguous().numpy()
    status = np.zeros(len(rows), np.int8)
    vm = entmax_cpu._vmath()
    out = np.empty_like(rows)
    entmax_cpu._load().solve_rows(
        rows, out, alpha, TINY32, 0, len(rows), status, vm, entmax_cpu.no_copy(out.dtype)
    )
    assert not status.any()


AVX2 = torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512")
#: the series path needs SLEEF's vector math: an AVX2 CPU and the sleef fast path on (with it off
#: the table holds no functions, and the kernel's series must not be called on it)
SERIES = pytest.mark.skipif(
    not (AVX2 and fast_paths.enabled("sleef")),
    reason="the series path runs where SLEEF's vector math is found and switched on (fast_paths)",
)


@pytest.mark.skipif(not AVX2, reason="SLEEF's AVX2 vector log / exp need an AVX2 CPU")
@pytest.mark.skipif(
    not fast_paths.enabled("sleef"), reason="the sleef fast path is switched off (fast_paths)"
)
@pytest.mark.parametrize("alpha", [1.15, 1.3, 1.4, 1.6185, 1.9])
def test_vector_log_and_exp_match_libm(alpha: float) -> None:
    """Non-integer β: the kernel with SLEEF's vector log / exp (found on this CPU; float32 ones for
    Newton's far steps), with only the float64 ones, and with libm's give the same support,
    values equal to float64 rounding — and not the same code (some last bits differ, so the
    vector path really ran)."""
    vm = entmax_cpu._vmath()
    assert vm[:4].all(), "torch's CPU library should export SLEEF's AVX2 log / exp here"
    k = entmax_cpu._load()
    g = torch.Generator().manual_seed(3)
    z = (torch.randn(200, 512, generator=g, dtype=torch.float64) * 0.5).numpy()  # ≥ 16 candidates
    got = {}
    no_far = vm.copy()
    no_far[2:4] = 0  # float64 vectors only: no float32 far steps
    libm = vm.copy()
    libm[:4] = 0
    for name, table in (("sleef", vm), ("libm", libm), ("no_far", no_far)):
        out, status = np.empty_like(z), np.zeros(len(z), np.int8)
        k.solve_rows(z, out, alpha, 0.0, 0, len(z), status, table, entmax_cpu.no_copy(out.dtype))
        assert not status.any()
        got[name] = out
    for other in ("libm", "no_far"):
        assert np.array_equal(got["sleef"] > 0, got[other] > 0)
        # (a tiny y = x − τ carries τ's last bit, relatively large: absolute 1e-15 on values ≤ 1)
        np.testing.assert_allclose(got["sleef"], got[other], rtol=1e-12, atol=1e-15)
    assert not np.array_equal(got["sleef"], got["libm"])
    assert_exact(torch.from_numpy(got["sleef"]), torch.from_numpy(z), alpha)


def test_no_vector_math_when_switched_off_or_compiled_for_another_cpu(monkeypatch) -> None:
    import numba

    monkeypatch.setenv("SPARSESCOPE_ENTMAX_SLEEF", "0")
    assert not entmax_cpu._find_vmath().any()
    monkeypatch.delenv("SPARSESCOPE_ENTMAX_SLEEF")
    monkeypatch.setattr(numba.config, "CPU_NAME", "generic")
    assert not entmax_cpu._find_vmath().any()
    monkeypatch.setattr(numba.config, "CPU_NAME", None)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "DEFAULT")
    assert not entmax_cpu._find_vmath().any()


SERIES_ALPHAS = [1.15, 1.3, 1.35, 1.37, 1.4, 1.45, 1.2222222222222223]
"""Non-integer β > 2, the one-pass series (_series): β's fraction 2/3 and 1/3 (inline cube
roots), 1/2 (α 1.4, 1.2222: square roots), others (the vector log and exp)."""


def _vm_without_far() -> np.ndarray:
    vm = entmax_cpu._vmath().copy()
    vm[2:4] = 0  # no float32 far steps: Newton's float64 loop (the path before the series)
    return vm


@SERIES
@pytest.mark.parametrize("alpha", SERIES_ALPHAS)
def test_the_series_equals_newtons_loop(alpha: float) -> None:
    """The one-pass series (Halley from the float32 far steps, Taylor's values, a certifying
    Newton step) against Newton's float64 loop and exact powers: the same support, values equal
    to float64 rounding — and not the same bits (the series really ran)."""
    k = entmax_cpu._load()
    g = np.random.default_rng(5)
    z = g.standard_normal((300, 512)) * g.choice([0.2, 0.5, 2.0, 8.0], size=(300, 1))
    z[7] = np.round(z[7])  # ties
    got = {}
    for name, table in (("series", entmax_cpu._vmath()), ("newton", _vm_without_far())):
        out, status = np.empty_like(z), np.zeros(len(z), np.int8)
        k.solve_rows(z, out, alpha, 0.0, 0, len(z), status, table, entmax_cpu.no_copy(out.dtype))
        assert not status.any()
        got[name] = out
    assert np.array_equal(got["series"] > 0, got["newton"] > 0)
    np.testing.assert_allclose(got["series"], got["newton"], rtol=1e-12, atol=1e-15)
    assert not np.array_equal(got["series"], got["newton"])
    assert_exact(torch.from_numpy(got["series"]), torch.from_numpy(z), alpha)
    # float32 rows: the same support as float64's, values within float32 rounding of them
    z32 = z.astype(np.float32)
    out32, status = np.empty_like(z32), np.zeros(len(z), np.int8)
    k.solve_rows(
        z32,
        out32,
        alpha,
        TINY32,
        0,
        len(z),
        status,
        entmax_cpu._vmath(),
        entmax_cpu.no_copy(out32.dtype),
    )
    assert not status.any()
    assert_exact(torch.from_numpy(out32), torch.from_numpy(z32), alpha)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [40, 128, 512])
def test_a_lone_candidate_is_exactly_one_hot(dtype, n: int) -> None:
    """Rows whose other scores are all more than 1/(α − 1) below the maximum have one candidate,
    which the kernel solves outright (τ = −1): p is exactly 1 at the maximum and 0 elsewhere,
    float64 rows included, at every kind of β, the row's maximum anywhere in it."""
    k = entmax_cpu._load()
    g = np.random.default_rng(n)
    for alpha in (1.1, 1.25, 1.5, 1.6185, 1.75, 2.0):
        gap = 1.0 / (alpha - 1.0) + 0.5
        z = (g.random((9, n)) * -20.0 - gap + 3.0).astype(dtype)
        top = g.integers(0, n, size=9)
        z[np.arange(9), top] = 3.0
        z[4, : n // 2] = -np.inf  # masked scores beside it
        z[4, top[4]] = 3.0
        out, status = np.full_like(z, np.nan), np.zeros(9, np.int8)
        k.solve_rows(
            z,
            out,
            alpha,
            float(np.finfo(dtype).tiny),
            0,
            9,
            status,
            entmax_cpu._vmath(),
            entmax_cpu.no_copy(out.dtype),
        )
        assert not status.any()
        want = np.zeros_like(z)
        want[np.arange(9), top] = 1.0
        assert np.array_equal(out, want), alpha


@pytest.mark.parametrize("rt", [3, 4])
@pytest.mark.parametrize("a", [0, 1, 2])
def test_inline_roots_are_float64_roots(rt: int, a: int) -> None:
    """_root_pow's inline cube roots (rt 3: y^(a + 1/3), 4: y^(a + 2/3)) match libm's powers to
    a few float64 ulps (4e-15 relative) over float32's normal range up to 1, within 1e-13 below it
    (redone with a library root), and give 0 at 0."""
    k = entmax_cpu._load()
    y = np.concatenate([np.geomspace(1e-300, 1.0, 4001), np.linspace(0.0, 1.0, 1001)])
    kk = (y.size + 7) & ~7
    ds = np.zeros(kk)
    ds[: y.size] = y
    ps = np.empty(kk)
    k._root_pow(ds, ps, kk, a, rt)
    ref = np.cbrt(y) ** (3 * a + rt - 2)  # an integer power of libm's cube root
    got = ps[: y.size]
    assert got[y == 0.0].tolist() == [0.0] * int((y == 0.0).sum())
    rel = np.abs(got - ref) / np.where(ref > 0.0, ref, 1.0)
    normal = y >= TINY32
    assert float(rel[normal].max()) < 4e-15
    # below float32's range a library root, which fast-math may fuse with the products into
    # one pow (its exponent's rounding times |log y|); those y^(a + f) are below 1e-25
    live = ~normal & (ref > 1e-290)  # (products below float64's normal range are not relative)
    assert float(rel[live].max()) < 1e-13


def test_inline_cube_root() -> None:
    """_icbrt32: y^(−1/3) to ~2e-7 over float32's normal range (no library call), finite at 0."""
    k = entmax_cpu._load()
    y = np.concatenate(
        [np.geomspace(float(TINY32), 1.0, 20001), np.linspace(0.0, 1.0, 1001)[1:]]
    ).astype(np.float32)
    w = np.empty_like(y)
    k._icbrt32(y, w, len(y))
    ref = y.astype(np.float64) ** (-1.0 / 3.0)
    assert float(np.max(np.abs(w - ref) / ref)) < 4e-7
    zero, w0 = np.zeros(8, np.float32), np.empty(8, np.float32)
    k._icbrt32(zero, w0, 8)
    assert np.isfinite(w0).all()


@SERIES
@pytest.mark.parametrize("alpha", [1.15, 1.35])
def test_the_series_from_near_and_far_starts(alpha: float) -> None:
    """_series itself: from a τ0 off τ* by 1e-8 … 1e-4 (either side) it returns τ* to float64
    rounding and writes the exact row (the entries too near τ0 for the series computed exactly);
    from 0.05 off it refuses (NaN), and the caller runs Newton's loop."""
    k = entmax_cpu._load()
    beta = 1.0 / (alpha - 1.0)
    g = np.random.default_rng(2)
    z = (g.standard_normal((1, 512)) * 2.0).astype(np.float64)
    ref = entmax_reference(torch.from_numpy(z), alpha).numpy()[0]
    x = np.sort((z[0] - z[0].max()) * (alpha - 1.0))[::-1].copy()
    tau_star = -(float(ref.max()) ** (1.0 / beta))  # the top score's x is 0: p = (0 − τ)^β
    order = np.argsort(-z[0], kind="stable")
    n = x.size
    xs = np.zeros(n + 8)
    xs[:n] = x
    idx = order.astype(np.int32)
    rt = 4 if alpha == 1.15 else 0
    vm = entmax_cpu._vmath()
    reach = (abs(beta * (beta - 1) * (beta - 2) / 6) / 1e-14) ** (1 / 3)
    for off in (1e-8, -1e-8, 1e-6, -1e-6, 1e-4, -1e-4):
        out = np.zeros((1, n))
        scr = np.empty((3, n + 8))
        s32 = np.empty((2, n + 8), np.float32)
        tau = k._series(z, out, 0, xs, idx, n, tau_star + off, beta, rt, scr, s32, vm, 0.0, reach)
        assert abs(tau - tau_star) <= 1e-14, off
        assert np.array_equal(out[0] > 0, ref > 0)
        np.testing.assert_allclose(out[0], ref, rtol=1e-11, atol=1e-15)
    out = np.zeros((1, n))
    tau = k._series(z, out, 0, xs, idx, n, tau_star - 0.05, beta, rt, scr, s32, vm, 0.0, reach)
    assert tau != tau


@pytest.mark.parametrize("alpha", [1.05, 1.1, 1.15])
def test_dense_rows_with_masked_scores(alpha: float) -> None:
    """Rows whose candidates are nearly all scores (α near 1, a flat row) are taken whole,
    uncompacted: masked (−inf) scores among them stay exact zeros, and the rest is exact."""
    g = torch.Generator().manual_seed(11)
    z = torch.randn(40, 600, generator=g) * 0.05
    z[torch.rand(40, 600, generator=g) < 0.08] = -torch.inf
    z[5, :] = z[5, :].clamp(min=0.0)  # ties at the top, no mask
    p = entmax(z, alpha)
    assert not p[torch.isinf(z)].any()
    assert (p[~torch.isinf(z)] > 0).float().mean() > 0.9  # really the dense case
    assert_exact(p, z, alpha)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [8, 13, 512, 1001])
def test_compaction_gathers_the_candidates_in_order(dtype, n: int) -> None:
    """_compact gathers exactly the scores above the threshold, in index order, with x = (v − m)
    c in float64 bit for bit: ties at the threshold, −inf and n not a multiple of 8 included."""
    k = entmax_cpu._load()
    g = np.random.default_rng(n)
    for trial in range(20):
        row = g.standard_normal(n).astype(dtype)
        row[g.random(n) < 0.1] = -np.inf
        tz = dtype(np.quantile(row[np.isfinite(row)], g.random()))
        row[g.random(n) < 0.05] = tz  # on the threshold: not a candidate
        m, c = float(np.max(row)), 0.15 + trial / 100
        got = [np.full(n + 8, np.nan), np.full(n + 8, -1, np.int32)]
        kg = k._compact(row, n, m, c, tz, *got)
        want = np.flatnonzero(row > tz)
        assert kg == len(want)
        assert np.array_equal(got[1][:kg], want)
        assert np.array_equal(got[0][:kg], (row[want].astype(np.float64) - m) * c)


OVERSHOOT_X = [
    0,
    -6.11543646e-06,
    -7.9393385e-06,
    -8.79764593e-06,
    -1.13725664e-05,
    -1.56640999e-05,
    -2.29597099e-05,
    -2.66075131e-05,
    -0.801271439,
    -0.808694243,
    -0.813174427,
    -0.820966542,
    -0.822463989,
    -0.82798177,
    -0.832326531,
    -0.839731157,
    -0.850023389,
    -0.850025296,
    -0.855312884,
    -0.871575177,
    -0.871575177,
    -0.873103023,
    -0.877164602,
    -0.878354013,
    -0.88107121,
    -0.892787755,
    -0.895252705,
    -0.897217929,
    -0.897561193,
    -0.90236336,
    -0.90286392,
    -0.905255616,
    -0.906389117,
    -0.91319865,
    -0.914417326,
    -0.915352821,
    -0.915628433,
    -0.919286609,
    -0.920058072,
    -0.924608707,
    -0.926784277,
    -0.927681506,
    -0.927681506,
    -0.930505753,
    -0.932081401,
    -0.93208462,
    -0.93297416,
    -0.932992816,
    -0.934463799,
    -0.935022533,
    -0.935614467,
    -0.935676157,
    -0.936719656,
    -0.93921411,
    -0.942269146,
    -0.943820179,
    -0.944842279,
    -0.945567369,
    -0.951053679,
    -0.956662595,
    -0.95724833,
    -0.957851648,
    -0.960690022,
    -0.962258875,
    -0.962274194,
    -0.965921521,
    -0.96592772,
    -0.9687078,
    -0.968734682,
    -0.968734682,
    -0.970843017,
    -0.972401619,
    -0.974209845,
    -0.974674523,
    -0.975742936,
    -0.977130771,
    -0.978277981,
    -0.979239881,
    -0.980070591,
    -0.980317771,
    -0.980347753,
    -0.980347753,
    -0.982507706,
    -0.982756913,
    -0.983936548,
    -0.987835407,
    -0.987835407,
    -0.988871634,
    -0.990552962,
    -0.991723955,
    -0.994659364,
    -0.996792257,
    -0.9969275,
    -0.9969275,
    -0.997084379,
    -0.999842644,
]
"""x = (α − 1)(z − max) of a real row at α 1.45 (MiniLM, positions tiled to 4,096, layer 4): 8
scores within 3e-5 of the top and 88 just above the bound (here −1, a row under 128 scores).
From there Halley's first float32 step was 5× Newton's (κ = 0.8), passed every score, and the
row came out all zeros (found by the n = 4,096 exactness check, bench/exact_long.py)."""


@pytest.mark.parametrize("alpha", [1.45, 1.35, 1.3, 1.15])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_far_from_tau_halley_does_not_overshoot(alpha: float, dtype) -> None:
    """Where Halley's step would exceed twice Newton's (far from τ*), the far steps take Newton's,
    which never passes τ* from the left; and a series that cannot certify falls back to Newton's
    loop from the bound, never from the far steps' τ."""
    x = torch.tensor(OVERSHOOT_X + [-2.0] * 24, dtype=torch.float64)
    z = (5.0 + x / 0.45).to(dtype)[None]  # the row's scores at α 1.45's scale
    for row in (z, z.flip(-1)):
        p = entmax(row, alpha)
        assert abs(float(p.sum()) - 1.0) < 1e-5
        assert_exact(p, row, alpha)


@pytest.mark.parametrize("beta", [3, 4, 5, 8, 10, 20])
def test_halleys_tau_is_newtons(beta: int) -> None:
    """An integer β's τ by safeguarded Halley steps on the norm (``_halley``, 2–3 passes a row)
    equals Newton's loop's (``_newton``) to float64 rounding, from the bound the kernel starts
    from and from far left of τ* (where the clamp keeps each step from passing it)."""
    k = entmax_cpu._load()
    g = np.random.default_rng(beta)
    for scale in (0.02, 0.3, 3.0):  # near-uniform rows (α near 1's case) to peaked ones
        for _ in range(20):
            x = g.standard_normal(300) * scale
            x = x - x.max()
            for start in (-1.0 - 1e-9, -1.0 - 1e-9 - 3.0 * scale):
                t_h, ok_h = k._halley(x, len(x), start, float(beta), beta)
                t_n, ok_n = k._newton(x, len(x), start, float(beta), beta)
                assert ok_h and ok_n
                assert abs(t_h - t_n) <= 1e-14 * (1.0 + abs(t_n))
                y = np.maximum(x - t_h, 0.0)
                assert abs(float((y**beta).sum()) - 1.0) < 1e-12


@pytest.mark.parametrize("alpha", [1.05, 1.1, 1.2, 1.25, 1.3333333333333333])
def test_halley_from_far_stays_exact(alpha: float) -> None:
    """The real row where an unclamped step passed every score (``OVERSHOOT_X``), at the integer
    β's scale: the Halley solve keeps the support and sums to 1."""
    c = alpha - 1.0
    for dtype in (torch.float32, torch.float64):
        x = torch.tensor(OVERSHOOT_X + [-2.0] * 24, dtype=torch.float64)
        z = (5.0 + x / c).to(dtype)[None]
        for row in (z, z.flip(-1)):
            p = entmax(row, alpha)
            assert abs(float(p.sum()) - 1.0) < 1e-5
            assert_exact(p, row, alpha)


FTZ = pytest.mark.skipif(
    not entmax_cpu._vmath()[4],
    reason="flush-to-zero is off here (SPARSESCOPE_ENTMAX_FTZ=0, or not an x86-64 CPU)",
)


@FTZ
def test_the_mxcsr_bits_are_set_and_restored() -> None:
    """The kernel's MXCSR helpers: the bits are set while they should be, the old value comes
    back after."""
    from sparse_core.entmax import _cpu_kernel as K
    from sparse_core.entmax._denormals import FTZ_DAZ

    before = K.thread_mxcsr()
    assert before & FTZ_DAZ == 0  # Python's threads run without them
    during = _mxcsr_during(FTZ_DAZ)
    assert during & FTZ_DAZ == FTZ_DAZ and during & ~FTZ_DAZ == before
    assert K.thread_mxcsr() == before


def _mxcsr_during(bits: int) -> int:
    from numba import njit

    from sparse_core.entmax import _cpu_kernel as K

    @njit
    def probe(b):
        old = K._mxcsr_or(b)
        now = K.thread_mxcsr()
        K._mxcsr_set(old)
        return now

    return int(probe(bits))


@FTZ
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_flush_to_zero_gives_the_same_bits_and_leaves_the_thread_as_it_was(dtype) -> None:
    """Every α's kind of path (integer β: Halley; non-integer: far steps, Newton, the series;
    the closed forms) on rows whose candidates near τ have tiny y (subnormal powers): the
    kernel with the MXCSR bits and without them writes the same bits, and the calling thread's
    MXCSR is what it was."""
    from sparse_core.entmax import _cpu_kernel as K

    k = entmax_cpu._load()
    vm = entmax_cpu._vmath()
    plain = vm.copy()
    plain[4] = 0
    g = np.random.default_rng(11)
    z = g.standard_normal((400, 512)) * g.choice([0.5, 2.0, 8.0, 30.0], size=(400, 1))
    z[3, 200:] = -np.inf  # masked
    z = z.astype(dtype)
    tiny = float(np.finfo(dtype).tiny)
    before = K.thread_mxcsr()
    for alpha in (1.05, 1.1, 1.15, 1.25, 1.3, 1.45, 1.5, 1.6185, 1.75, 1.9, 2.0):
        got = {}
        for name, table in (("ftz", vm), ("plain", plain)):
            out, status = np.empty_like(z), np.zeros(len(z), np.int8)
            k.solve_rows(
                z, out, alpha, tiny, 0, len(z), status, table, entmax_cpu.no_copy(out.dtype)
            )
            assert not status.any(), (alpha, name)
            assert K.thread_mxcsr() == before, (alpha, name)
            got[name] = out
        assert np.array_equal(got["ftz"], got["plain"]), alpha
