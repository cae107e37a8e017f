"""sparse_core.entmax against the ``entmax`` package (1.3): exact supports, values, masking, α.

The reference is run on the same scores in float64 (``entmax_reference(z.double(), α)``, sort or
60 bisection halvings): supports must agree exactly (for α near 1 an exact value can lie below
float32's range, ~1e-38, and is 0 in a float32 result) and values to ``value_tol(α)`` (1e-6, or
β · 1.2e-7 for α < 1.12). Against the package in float32 (its own rounding, τ from float32
cumulative sums or bisection) supports may only differ on knife-edge entries whose value is below
1e-10 on both sides, and values by value_tol plus the package's own float32 error. Both of our
paths are checked against the reference and against each other: the dense float32 path with its
certificate (α near 1) and the compact path with its float64 exact phase (larger α, float64
scores, many distinct per-row α); every test runs twice, with CPU rows through the compiled
kernel (sparse_core/entmax/cpu.py, tested on its own in tests/core/test_entmax_cpu.py) and
through the torch paths (fixture ``cpu_path``).
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparse_core import entmax as E
from sparse_core.entmax import entmax
from sparse_core.testing import entmax_reference

ALPHAS = [1.1, 1.25, 1.5, 1.75, 2.0]
"""The α of the issue's goal (the page's slider and the lecture)."""
RANDOM_ALPHAS = [1.0317, 1.05, 1.0864, 1.1667, 1.2239, 1.3333, 1.3712, 1.4, 1.6185, 1.8941]
"""A few others: random draws (seeded, rounded) plus integer / half-integer β = 1 / (α − 1)."""
SIZES = [1, 2, 7, 128, 512]
LENGTHS = [1, 2, 3, 5, 16, 63, 64, 127, 128, 255, 256, 511, 512, 1024]
SCALES = [0.1, 1.0, 10.0, 1000.0]
KNIFE_EDGE = 1e-10
TORCH_INTERNALS = {
    "test_dense_path_redoes_what_it_cannot_certify",
    "test_the_bounded_path_takes_its_candidates_from_the_group_maxima",
}
"""Tests of the torch paths' own steps (they patch its functions): run with the torch paths only."""


@pytest.fixture(autouse=True, params=["kernel", "torch"])
def cpu_path(request):
    """Every test twice: CPU rows through the compiled kernel (sparse_core/entmax/cpu.py, the
    default) and through the torch paths (``SPARSESCOPE_NO_NUMBA``, as on CUDA without triton,
    for per-row α and below α 1.03). Its own MonkeyPatch: a test's ``monkeypatch.undo()`` keeps
    the path."""
    if request.param == "kernel" and request.node.originalname in TORCH_INTERNALS:
        pytest.skip("a test of the torch paths' own steps")
    with pytest.MonkeyPatch.context() as mp:
        if request.param == "torch":
            mp.setenv("SPARSESCOPE_NO_NUMBA", "1")
        yield request.param


def value_tol(alpha) -> float:
    """1e-6, or β · eps32 where larger: the dense float32 path's values carry float32 rounding of
    x − τ amplified by the exponent β = 1 / (α − 1) (measured: about a third of that)."""
    a = alpha if isinstance(alpha, float) else float(alpha[alpha > 1.0].min())
    return max(1e-6, torch.finfo(torch.float32).eps / (a - 1.0)) if a > 1.0 else 1e-6


def assert_matches_reference(z: torch.Tensor, alpha, p: torch.Tensor | None = None) -> None:
    """Exact support and values to value_tol vs float64 reference; knife edges only vs float32."""
    p = entmax(z, alpha) if p is None else p
    assert p.dtype == (torch.float64 if z.dtype == torch.float64 else torch.float32)
    assert not torch.isnan(p).any()
    assert not ((p > 0) & (p < torch.finfo(p.dtype).tiny)).any(), "subnormal values are flushed"
    r64 = entmax_reference(z.double(), alpha)
    diff = (p > 0) != (r64 > 0)
    if p.dtype == torch.float32:  # exact values below float32's range underflow to 0 (α near 1)
        diff &= torch.maximum(p.double(), r64) >= torch.finfo(torch.float32).tiny
    assert not diff.any(), f"{int(diff.sum())} support entries differ from the float64 reference"
    assert float((p.double() - r64).abs().max()) <= value_tol(alpha)
    if z.dtype == torch.float32:
        r32 = entmax_reference(z, alpha)
        flips = (p > 0) != (r32 > 0)
        edge = torch.maximum(p, r32) < KNIFE_EDGE
        assert not (flips & ~edge).any(), "support differs from float32 reference off knife edges"
        own = float((r32.double() - r64).abs().max())  # the package's own float32 error
        assert float((p - r32).abs().max()) <= value_tol(alpha) + own


def live_rows_sum_to_one(p: torch.Tensor, z: torch.Tensor, dim: int = -1) -> None:
    live = ~torch.isneginf(z).all(dim=dim)
    sums = p.sum(dim=dim)
    assert torch.allclose(sums[live], torch.ones_like(sums[live]), atol=1e-5)
    assert (sums[~live] == 0).all()


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("scale", SCALES)
def test_random_scores_match_reference(alpha: float, n: int, scale: float) -> None:
    g = torch.Generator().manual_seed(hash((alpha, n, scale)) % 2**31)
    z = torch.randn(3, 16, n, generator=g) * scale
    p = entmax(z, alpha)
    assert p.shape == z.shape
    assert_matches_reference(z, alpha, p)
    live_rows_sum_to_one(p, z)


@pytest.mark.parametrize("alpha", ALPHAS)
def test_large_magnitudes_and_offsets(alpha: float) -> None:
    g = torch.Generator().manual_seed(1)
    z = torch.randn(32, 128, generator=g) * 3.0 + 5000.0  # offset far from zero
    assert_matches_reference(z, alpha)
    z = torch.randn(32, 128, generator=g) * 1e5
    assert_matches_reference(z, alpha)


@pytest.mark.parametrize("alpha", [1.5, 2.0])
@pytest.mark.parametrize("n", [2, 7, 128, 512])
def test_ties_integer_scores(alpha: float, n: int) -> None:
    """Integer scores: many exact ties, some exactly on the threshold; closed forms are exact."""
    g = torch.Generator().manual_seed(n)
    z = torch.randint(-3, 4, (64, n), generator=g).float()
    assert_matches_reference(z, alpha)


@pytest.mark.parametrize("alpha", [1.1, 1.25, 1.75])
def test_ties_general_alpha(alpha: float) -> None:
    """Integer scores with bisection α: supports agree except where a value is below 1e-10."""
    g = torch.Generator().manual_seed(7)
    z = torch.randint(-3, 4, (64, 64), generator=g).float()
    p = entmax(z, alpha).double()
    r64 = entmax_reference(z.double(), alpha)
    flips = (p > 0) != (r64 > 0)
    assert not (flips & (torch.maximum(p, r64) >= KNIFE_EDGE)).any()
    assert float((p - r64).abs().max()) <= value_tol(alpha)


def test_exact_ties_on_the_threshold() -> None:
    # α = 1.5: x = (0, −1), τ = −1 exactly, so the second entry is exactly zero
    assert entmax(torch.tensor([2.0, 0.0]), 1.5).tolist() == [1.0, 0.0]
    # α = 2: τ = 0 exactly
    assert entmax(torch.tensor([1.0, 0.0]), 2.0).tolist() == [1.0, 0.0]
    # equal scores: uniform, for every α
    for a in ALPHAS:
        p = entmax(torch.full((5,), 3.25), a)
        assert torch.allclose(p, torch.full((5,), 0.2), atol=1e-7), a
    # a single entry
    assert entmax(torch.tensor([[-7.0]]), 1.5).tolist() == [[1.0]]


@pytest.mark.parametrize("alpha", ALPHAS)
def test_real_attention_scores(alpha: float) -> None:
    """Scores with the spread of real attention (heavy tails, a few dominant keys), n = 512."""
    g = torch.Generator().manual_seed(3)
    base = torch.randn(12, 1, 512, generator=g) * 2.0
    z = base + torch.randn(12, 16, 512, generator=g) * 3.0  # (heads, queries, keys)
    z[..., 0] += 8.0  # an attention sink
    assert_matches_reference(z, alpha)


@pytest.mark.parametrize("alpha", [1.0, *ALPHAS])
def test_masked_entries_and_fully_masked_rows(alpha: float) -> None:
    g = torch.Generator().manual_seed(4)
    z = torch.randn(4, 32, 64, generator=g) * 2.0
    z = z.masked_fill(torch.rand(z.shape, generator=g) < 0.3, float("-inf"))
    z[0, 3] = float("-inf")  # a fully masked row
    z[1, :, 5:] = float("-inf")  # short rows (padding)
    z[2, 7, 1:] = float("-inf")  # a row with a single live entry
    p = entmax(z, alpha)
    assert not torch.isnan(p).any()
    assert (p[torch.isneginf(z)] == 0).all()
    assert (p[0, 3] == 0).all()
    assert p[2, 7, 0] == 1.0
    live_rows_sum_to_one(p, z)
    if alpha > 1.0:
        assert_matches_reference(z, alpha, p)


def test_all_rows_masked_and_degenerate_shapes() -> None:
    z = torch.full((3, 9), float("-inf"))
    for a in (1.0, 1.5, 1.3, 2.0):
        p = entmax(z, a)
        assert (p == 0).all() and not torch.isnan(p).any()
    assert entmax(torch.empty(0, 5), 1.5).shape == (0, 5)
    assert entmax(torch.empty(4, 0), 1.5).shape == (4, 0)
    assert entmax(torch.tensor([float("-inf")]), 1.5).tolist() == [0.0]


def test_alpha_one_is_exactly_softmax() -> None:
    z = torch.randn(8, 33)
    assert torch.equal(entmax(z, 1.0), torch.softmax(z, dim=-1))
    assert torch.equal(entmax(z, 1), torch.softmax(z, dim=-1))


@pytest.mark.parametrize("shape", [(1, 4, 1, 1), (4, 1, 1)])
def test_per_head_alpha(shape: tuple[int, ...]) -> None:
    g = torch.Generator().manual_seed(5)
    z = torch.randn(2, 4, 16, 128, generator=g) * 3.0  # (B, H, n, n)
    z[1, 2, 3] = float("-inf")
    heads = [1.0, 1.25, 1.5, 2.0]
    alpha = torch.tensor(heads).view(shape)
    p = entmax(z, alpha)
    for h, a in enumerate(heads):
        assert torch.equal(p[:, h], entmax(z[:, h], a)), a
    r = entmax_reference(z.double(), alpha)
    assert not ((p > 0) != (r > 0)).any()
    assert float((p.double() - r).abs().max()) <= 1e-6


def test_per_head_alpha_general_values_match_bisection() -> None:
    g = torch.Generator().manual_seed(6)
    z = torch.randn(3, 64, 64, generator=g) * 2.0
    alpha = torch.tensor([1.1, 1.6, 1.9]).view(3, 1, 1)
    assert_matches_reference(z, alpha)


def test_uniform_alpha_tensor_takes_the_scalar_path() -> None:
    z = torch.randn(2, 3, 8, 8)
    a = torch.full((1, 3, 1, 1), 1.5)
    assert torch.equal(entmax(z, a), entmax(z, 1.5))
    assert torch.equal(entmax(z, torch.tensor(2.0)), entmax(z, 2.0))


@pytest.mark.parametrize("dim", [0, 1, -2])
def test_dim(dim: int) -> None:
    z = torch.randn(6, 7, 8)
    p = entmax(z, 1.5, dim=dim)
    q = entmax(z.movedim(dim, -1), 1.5).movedim(-1, dim)
    assert torch.equal(p, q)
    live_rows_sum_to_one(p, z, dim=dim)


def test_dtypes() -> None:
    z = torch.randn(4, 50) * 3
    assert entmax(z, 1.5).dtype == torch.float32
    p64 = entmax(z.double(), 1.5)
    assert p64.dtype == torch.float64
    assert_matches_reference(z.double(), 1.5, p64)
    for half in (torch.float16, torch.bfloat16):
        ph = entmax(z.to(half), 1.5)
        assert ph.dtype == torch.float32  # never computed in half precision
        assert torch.equal(ph, entmax(z.to(half).float(), 1.5))


def test_out_argument_writes_in_place() -> None:
    z = torch.randn(2, 3, 16, 16) * 3
    buf = torch.full((2, 6, 3, 16, 16), 7.0)  # (B, L, H, n, n): slices are not contiguous
    z[1, 2, 3] = float("-inf")  # a fully masked row
    per_head = torch.tensor([1.0, 1.5, 2.0]).view(1, 3, 1, 1)
    for layer, a in ((0, 1.0), (1, 1.5), (2, 1.25), (4, per_head)):
        res = entmax(z, a, out=buf[:, layer])
        assert res.data_ptr() == buf[:, layer].data_ptr()
        assert torch.equal(buf[:, layer], entmax(z, a))
    flat = torch.full((3, 16, 16), 7.0)  # contiguous: written directly
    assert entmax(z[0], 2.0, out=flat) is flat
    assert torch.equal(flat, entmax(z[0], 2.0))
    assert torch.equal(entmax(z, 1.5, dim=1, out=torch.empty_like(z)), entmax(z, 1.5, dim=1))
    with pytest.raises(ValueError, match="out must have the shape"):
        entmax(z, 1.5, out=torch.empty(2, 3, 16))


def test_no_autograd_graph_without_grad_and_no_global_state() -> None:
    z = torch.randn(3, 10)
    p = entmax(z, 1.5)
    assert not p.requires_grad
    assert torch.is_grad_enabled()
    with torch.inference_mode():  # the model's hot path: no graph even for leaves with grad
        assert not entmax(z.requires_grad_(), 1.5).requires_grad


def test_errors_name_the_problem() -> None:
    z = torch.randn(2, 3, 4, 4)
    with pytest.raises(ValueError, match=r"alpha must be in \[1, 2\], got 3.0"):
        entmax(z, 3.0)
    with pytest.raises(ValueError, match=r"alpha must be in \[1, 2\]"):
        entmax(z, torch.tensor([1.5, 0.5, 1.5]).view(1, 3, 1, 1))
    with pytest.raises(ValueError, match="size 1 along dim"):
        entmax(z, torch.full((1, 3, 1, 4), 1.5))
    with pytest.raises(ValueError, match="does not broadcast"):
        entmax(z, torch.tensor([1.5, 1.2]))  # (H,) is the package's pitfall: needs (1, H, 1, 1)
    with pytest.raises(ValueError, match="NaN or \\+inf"):
        entmax(torch.tensor([1.0, float("nan")]), 1.5)
    with pytest.raises(ValueError, match="NaN or \\+inf"):
        entmax(torch.tensor([1.0, float("inf")]), 1.2)
    with pytest.raises(ValueError, match="NaN or \\+inf"):
        entmax(torch.tensor([[1.0, float("nan")], [float("-inf")] * 2]), 1.0)
    with pytest.raises(TypeError, match="floating-point"):
        entmax(torch.tensor([1, 2]), 1.5)


@pytest.mark.parametrize("alpha", [1.25, 1.5, 2.0])
def test_sparse_consistency(alpha: float) -> None:
    """Proposition 1 of the Sparsefinder paper: masking every non-support entry changes nothing."""
    g = torch.Generator().manual_seed(8)
    z = torch.randn(16, 256, generator=g) * 3.0
    p = entmax(z, alpha)
    q = entmax(z.masked_fill(p == 0, float("-inf")), alpha)
    assert torch.equal(q > 0, p > 0)
    assert torch.allclose(q, p, atol=value_tol(alpha))


@pytest.mark.parametrize("alpha", [1.5, 1.25, 2.0])
def test_missed_candidates_are_recomputed(alpha: float, monkeypatch, caplog) -> None:
    """Compact path: if the dense steps overshoot τ (a candidate is lost), the row is redone from
    the always-safe candidate set {x > −1}."""
    real = E._dense_newton_step

    def overshoot(d, c, a):
        return real(d, c, a) + 0.5  # pushes the candidate threshold above τ*

    monkeypatch.setattr(E, "_dense_newton_step", overshoot)
    z = torch.randn(8, 64, generator=torch.Generator().manual_seed(9)) * 2.0
    with caplog.at_level("WARNING", logger="sparse_core.entmax"):
        p = E._entmax_rows(z, alpha, path="compact")
    assert "recomputing" in caplog.text
    assert_matches_reference(z, alpha, p)


@pytest.mark.parametrize("alpha", [1.1, 1.5])
@pytest.mark.parametrize("chunk", [64, 1000, 1 << 30])
def test_chunking_does_not_change_the_result(alpha: float, chunk: int) -> None:
    z = torch.randn(50, 64) * 4
    full = E._entmax_rows(z, alpha)
    assert torch.equal(E._entmax_rows(z, alpha, chunk_elements=chunk), full)


@pytest.mark.parametrize("alpha", [1.1, 1.25, 1.5, 1.75, 2.0])
def test_exact_phase_on_whole_rows_equals_compact(alpha: float, monkeypatch) -> None:
    """The exact phase runs on the candidates, or on whole rows when most scores are candidates."""
    g = torch.Generator().manual_seed(10)
    z = torch.randn(40, 96, generator=g) * 2.0
    z = z.masked_fill(torch.rand(z.shape, generator=g) < 0.2, float("-inf"))
    z[3] = float("-inf")
    z[4, 1:] = float("-inf")  # causal first row: a single live entry
    monkeypatch.setattr(E, "_DENSE_EXACT", 0)  # always compact
    compact = E._entmax_rows(z.view(-1, 96), alpha, path="compact").view_as(z)
    monkeypatch.setattr(E, "_DENSE_EXACT", 10**9)  # always whole rows
    dense = E._entmax_rows(z.view(-1, 96), alpha, path="compact").view_as(z)
    assert torch.equal(compact > 0, dense > 0)
    assert torch.allclose(compact, dense, atol=1e-7)
    assert_matches_reference(z, alpha, dense)


def test_dense_steps_do_not_change_the_result() -> None:
    z = torch.randn(64, 256) * 3
    results = [
        E._entmax_rows(z, a, dense_steps=k, path="compact") for a in (1.5, 1.3) for k in (0, 1, 3)
    ]
    for a, group in ((1.5, results[:3]), (1.3, results[3:])):
        for r in group[1:]:
            assert torch.equal(r > 0, group[0] > 0), a
            assert torch.allclose(r, group[0], atol=1e-7), a


def test_reference_wrapper_fixes_package_pitfalls() -> None:
    z = torch.randn(2, 3, 5, 5)
    z[0, 1, 2] = float("-inf")
    for a in (1.5, 2.0, 1.3, torch.tensor([1.5, 1.2, 1.0]).view(1, 3, 1, 1)):
        r = entmax_reference(z, a)
        assert not torch.isnan(r).any()
        assert (r[0, 1, 2] == 0).all()
    r = entmax_reference(z, torch.tensor([1.5, 1.2, 1.0]).view(3, 1, 1))
    assert torch.allclose(r[:, 2], torch.softmax(z[:, 2], -1).nan_to_num(0.0))


finite = st.floats(-50, 50, allow_nan=False, width=32)
cells = st.one_of(finite, finite, finite, st.just(float("-inf")), st.sampled_from([0.0, 1.0, -1.0]))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(st.lists(cells, min_size=1, max_size=40), min_size=1, max_size=6).filter(
        lambda r: len({len(x) for x in r}) == 1
    ),
    alpha=st.sampled_from([1.05, 1.1, 1.2, 1.25, 1.3, 1.4, 1.5, 1.75, 2.0]),
    scale=st.sampled_from([0.01, 1.0, 30.0]),
)
def test_property_matches_reference(rows: list[list[float]], alpha: float, scale: float) -> None:
    z = torch.tensor(rows, dtype=torch.float32) * scale
    p = entmax(z, alpha)
    live_rows_sum_to_one(p, z)
    assert (p[torch.isneginf(z)] == 0).all()
    r64 = entmax_reference(z.double(), alpha)
    flips = (p.double() > 0) != (r64 > 0)
    if alpha in (1.5, 2.0):
        assert not flips.any()
    else:  # bisection reference: its τ is 2^-60 off, enough to leave 1e-20 values on ties
        assert not (flips & (torch.maximum(p.double(), r64) >= KNIFE_EDGE)).any()
    p64 = entmax(z.double(), alpha)  # the float64 path: the same support off knife edges
    assert not (((p64 > 0) != (p > 0)) & (torch.maximum(p64, p.double()) >= KNIFE_EDGE)).any()
    assert float((p.double() - r64).abs().max()) <= value_tol(alpha)
    assert math.isfinite(float(p.sum()))


# ----------------------------------------------------------------------------------------------
# exactness at every α of the slider, every length, masks, per-head α, both paths


def attention_like(rows: int, n: int, g: torch.Generator, scale: float = 3.0) -> torch.Tensor:
    """(3 rows, n) scores shaped like attention: a per-key bias, noise, an attention sink; the
    first third plain, the second causal (query i of n sees keys j <= i), the last padded (a
    quarter of the keys masked) with one fully masked row and one with a single live key."""
    z = torch.randn(1, n, generator=g) * (scale / 2) + torch.randn(rows, n, generator=g) * scale
    z[:, 0] += 2.0 * scale  # a sink
    third = max(1, rows // 3)
    q = torch.linspace(0, n - 1, third).round().long()
    z[third : 2 * third] = z[third : 2 * third].masked_fill(
        torch.arange(n)[None, :] > q[:, None], float("-inf")
    )
    pad = z[2 * third :]
    pad[:, n - n // 4 :] = float("-inf")
    pad[0] = float("-inf")
    if len(pad) > 1:
        pad[1, 1:] = float("-inf")
    return z


def check_exact(z: torch.Tensor, alpha, p: torch.Tensor) -> None:
    """Support equal to the float64 reference's (values under float32's tiny excepted), values
    to value_tol, masked entries and fully masked rows 0, live rows summing to 1, no
    subnormals."""
    r64 = entmax_reference(z.double(), alpha)
    diff = (p > 0) != (r64 > 0)
    if p.dtype == torch.float32:
        diff &= torch.maximum(p.double(), r64) >= torch.finfo(torch.float32).tiny
    assert not diff.any(), f"{int(diff.sum())} support entries differ from the float64 reference"
    assert float((p.double() - r64).abs().max()) <= value_tol(alpha)
    assert (p[torch.isneginf(z)] == 0).all()
    assert not ((p > 0) & (p < torch.finfo(p.dtype).tiny)).any()
    live_rows_sum_to_one(p, z)


@pytest.mark.parametrize("alpha", ALPHAS + RANDOM_ALPHAS)
@pytest.mark.parametrize("n", LENGTHS)
def test_exact_at_every_alpha_and_length(alpha: float, n: int) -> None:
    """Plain, causal and padded rows, n = 1 … 1024, at the slider's α and a few random ones."""
    g = torch.Generator().manual_seed(round(alpha * 1e4) * 7919 + n)
    rows = max(6, min(48, 8192 // n))
    z = attention_like(rows, n, g)
    p = entmax(z, alpha)
    check_exact(z, alpha, p)
    if n >= 2:
        assert (p[max(1, rows // 3) * 2] == 0).all()  # the fully masked row
    single = z[-1] if rows % 3 == 0 else None
    del single


@pytest.mark.parametrize("alpha", ALPHAS + RANDOM_ALPHAS)
@pytest.mark.parametrize("scale", [0.01, 0.3, 30.0])
def test_exact_at_small_and_large_score_spreads(alpha: float, scale: float) -> None:
    """Nearly uniform rows (support = everything) and nearly one-hot rows."""
    g = torch.Generator().manual_seed(round(alpha * 1e4) + round(scale * 100))
    z = attention_like(24, 300, g, scale=scale)
    check_exact(z, alpha, entmax(z, alpha))


@pytest.mark.parametrize("alpha", ALPHAS + RANDOM_ALPHAS + [1.0])
def test_single_live_entry_and_ties_are_exact(alpha: float) -> None:
    """A row with one live key (the first causal row) is exactly one-hot at every α; equal top
    scores get exactly equal probabilities."""
    z = torch.full((3, 9), float("-inf"))
    z[0, 4] = 2.5
    z[1, :] = torch.tensor([1.0, 7.0, 7.0, 7.0, -3.0, 0.5, 7.0, 2.0, 1.0])
    z[2, :2] = torch.tensor([1e4, -1e4])
    p = entmax(z, alpha)
    assert p[0].tolist() == [0.0] * 4 + [1.0] + [0.0] * 4
    top = p[1, [1, 2, 3, 6]]
    assert (top == top[0]).all()
    assert p[2].tolist() == [1.0] + [0.0] * 8


@pytest.mark.parametrize("n", [7, 128])
@pytest.mark.parametrize("shape", [(1, 8, 1, 1), (8, 1, 1)])
def test_per_head_alpha_mixing_every_alpha(n: int, shape: tuple[int, ...]) -> None:
    """Per-head α mixing the slider's values, a random one and softmax heads, causal and padded:
    each head equals the scalar-α call, and the whole matches the float64 reference."""
    g = torch.Generator().manual_seed(11 + n)
    heads = [1.0, 1.1, 1.25, 1.5, 1.75, 2.0, 1.3712, 1.0]
    z = torch.randn(2, 8, n, n, generator=g) * 3.0
    z = z.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))  # causal
    z[1, :, :, n - n // 3 :] = float("-inf")  # padding in the second batch
    z[1, 3, 0] = float("-inf")  # a fully masked row
    alpha = torch.tensor(heads, dtype=torch.float64).view(shape)  # float32 would round 1.1
    p = entmax(z, alpha)
    for h, a in enumerate(heads):
        assert torch.equal(p[:, h], entmax(z[:, h], a)), a
    check_exact(z, alpha, p)
    first = p[:, :, 0, 0]  # the first causal row is one-hot at every α (but the masked one)
    assert first.sum() == first.numel() - 1 and first[1, 3] == 0.0


def test_per_row_alpha_with_many_values() -> None:
    """More distinct α than per-head grouping takes: the compact path with a per-row α."""
    g = torch.Generator().manual_seed(12)
    z = attention_like(60, 96, g).view(3, 20, 96)
    alpha = 1.0 + torch.rand(3, 20, 1, generator=g)
    alpha[0, :4] = 1.0
    alpha[1, :3] = 1.1
    assert torch.unique(alpha).numel() > E._MAX_GROUPS
    p = entmax(z, alpha)
    check_exact(z, alpha, p)


@pytest.mark.parametrize("alpha", [1.05, 1.1, 1.1667, 1.2, 1.25, 1.3, 1.3333, 1.4, 1.5])
def test_dense_and_compact_paths_agree(alpha: float) -> None:
    """The two algorithms on the same scores: identical supports, values within value_tol."""
    g = torch.Generator().manual_seed(round(alpha * 1e4))
    z = attention_like(90, 200, g)
    dense = E._entmax_rows(z, alpha, path="dense")
    compact = E._entmax_rows(z, alpha, path="compact")
    assert torch.equal(dense > 0, compact > 0)
    check_exact(z, alpha, dense)
    assert float((dense - compact).abs().max()) <= value_tol(alpha)


@pytest.mark.parametrize("alpha", [1.05, 1.1, 1.25, 1.3])
def test_dense_path_redoes_what_it_cannot_certify(alpha: float, monkeypatch) -> None:
    """Rows stopped early get more steps of their own; rows left unconverged, or with a score on
    the threshold, are recomputed in float64: the result stays exact."""
    g = torch.Generator().manual_seed(13)
    z = attention_like(30, 64, g)
    expected = entmax(z, alpha)
    real_solve, solves = E._dense_solve, []

    def first_one_step(x, tau, k, steps, *rest):
        solves.append(len(x))
        return real_solve(x, tau, k, 1 if len(solves) == 1 else steps, *rest)

    monkeypatch.setattr(E, "_dense_solve", first_one_step)  # unconverged after the first pass
    p = entmax(z, alpha)
    assert len(solves) == 2 and solves[1] < solves[0]  # the late rows, on their own
    assert torch.equal(p > 0, expected > 0)
    check_exact(z, alpha, p)
    monkeypatch.undo()
    calls = []
    real_redo = E._dense_redo_exact

    def spy(*args):
        calls.append(args[-2].numel())
        return real_redo(*args)

    monkeypatch.setattr(E, "_dense_redo_exact", spy)
    monkeypatch.setattr(E, "_dense_solve", lambda x, tau, *a: (tau, torch.zeros(len(x)) > 0))
    p = entmax(z, alpha)
    one_hot = torch.zeros_like(z).scatter_(-1, z.argmax(-1, keepdim=True), 1.0)
    far = (expected - one_hot).abs().amax(-1) > value_tol(alpha)  # τ* well above −1
    far = int((far & ~torch.isneginf(z).all(-1)).sum())
    assert far >= 10 and calls and calls[0] >= far  # τ stayed at −1: all of those redone
    check_exact(z, alpha, p)
    assert float((p - expected).abs().max()) <= value_tol(alpha)


@pytest.mark.parametrize("alpha", [1.1, 1.2, 1.25, 1.3333])
@pytest.mark.parametrize("n", [4, 64, 512])
def test_dense_path_on_integer_scores(alpha: float, n: int) -> None:
    """Many exact ties; equal scores get equal values and the support matches the reference
    off knife edges (the bisection reference leaves ~1e-20 on scores tied with its τ)."""
    g = torch.Generator().manual_seed(n)
    z = torch.randint(-4, 5, (64, n), generator=g).float()
    p = entmax(z, alpha)
    r64 = entmax_reference(z.double(), alpha)
    flips = (p > 0) != (r64 > 0)
    assert not (flips & (torch.maximum(p.double(), r64) >= KNIFE_EDGE)).any()
    assert float((p.double() - r64).abs().max()) <= value_tol(alpha)
    for v in range(-4, 5):  # equal scores in a row, equal probabilities
        vals = p.masked_fill(z != v, float("nan"))
        lo = vals.nan_to_num(float("inf")).amin(-1)
        hi = vals.nan_to_num(float("-inf")).amax(-1)
        has = (z == v).any(-1)
        assert torch.equal(lo[has], hi[has])


def test_float64_scores_near_alpha_one() -> None:
    """float64 scores take the compact path at every α, with float64 thresholds and values."""
    g = torch.Generator().manual_seed(14)
    z = attention_like(30, 128, g).double()
    for a in (1.05, 1.1, 1.25):
        p = entmax(z, a)
        assert p.dtype == torch.float64
        check_exact(z, a, p)
        assert float((p - entmax(z.float(), a).double()).abs().max()) <= value_tol(a)


# ----------------------------------------------------------------------------------------------
# the group maxima's bound (rows of 128 scores or more)


@pytest.mark.parametrize("alpha", [1.1, 1.25, 1.5, 1.75, 2.0, 1.3712])
@pytest.mark.parametrize("n", [128, 300, 512])
def test_group_bound_is_below_tau_even_when_the_top_shares_a_group(alpha: float, n: int) -> None:
    """The subset threshold bounds τ* from below whatever the rows: here each row's top scores
    sit in one strided group (j, j + w, …), so the group maxima see only one of them and the
    bound is loose; every support entry is still a candidate and the result exact."""
    import math as m

    g = torch.Generator().manual_seed(n + round(alpha * 100))
    z = torch.randn(24, n, generator=g)
    w = n // E._GROUPS
    for r in range(24):  # the top eight scores in group r % w, nearly tied
        z[r, (r % w) + w * torch.arange(E._GROUPS)] = 6.0 + 0.01 * torch.rand(
            E._GROUPS, generator=g
        )
    m_, _, sub = E._maxima(z)
    c = alpha - 1.0
    q = max(2.0, float(m.ceil(1.0 / c - 1e-9)))
    tau = E._subset_tau(sub, m_, c, q, 2)  # x units
    exact = entmax_reference(z.double(), alpha)
    x = (z.double() - m_.double()) * c
    assert ((x > tau) | (exact == 0)).all(), "a support entry lies below the bound"
    check_exact(z, alpha, entmax(z, alpha))


@pytest.mark.parametrize("alpha", [1.5, 2.0, 1.75])
def test_a_bound_above_tau_is_caught_and_the_rows_redone(alpha: float, monkeypatch, caplog):
    """Bounded compact path: should the bound ever lie above τ* (a candidate lost), the exact
    phase sees τ end below it and the rows are redone from {x > −1}."""
    real = E._subset_tau
    monkeypatch.setattr(E, "_subset_tau", lambda *a: real(*a) + 0.3)
    z = attention_like(30, 256, torch.Generator().manual_seed(15))
    with caplog.at_level("WARNING", logger="sparse_core.entmax"):
        p = E._entmax_rows(z, alpha, path="compact")
    assert "recomputing" in caplog.text
    check_exact(z, alpha, p)


def test_the_bounded_path_takes_its_candidates_from_the_group_maxima(monkeypatch) -> None:
    """Rows of 128 scores or more skip the whole-row Newton steps (one read for the maxima):
    the whole-row step function is never called there, and is below 128."""
    calls = []
    real = E._dense_newton_step
    monkeypatch.setattr(E, "_dense_newton_step", lambda *a: calls.append(1) or real(*a))
    g = torch.Generator().manual_seed(16)
    check_exact(z := torch.randn(40, 128, generator=g) * 3, 1.5, entmax(z, 1.5))
    assert not calls
    check_exact(z := torch.randn(40, 127, generator=g) * 3, 1.5, entmax(z, 1.5))
    assert calls


def test_the_kept_scratch_serves_inference_mode_and_later_calls() -> None:
    """The dense path's scratch kept between calls of a thread is made in inference mode
    (a model run) and used after it (a training step): it must be a normal tensor."""
    z = torch.randn(64, 256, generator=torch.Generator().manual_seed(17)) * 3
    with torch.inference_mode():
        first = entmax(z, 1.25)
    assert torch.equal(entmax(z, 1.25), first)
    zg = z.clone().requires_grad_()
    entmax(zg, 1.25).pow(2).sum().backward()
    assert zg.grad is not None and torch.isfinite(zg.grad).all()


def test_per_row_alpha_with_many_values_on_long_rows() -> None:
    """Many distinct per-row α on rows of 128 scores or more: the bounded compact path with a
    per-row α (its subset steps with a per-row q)."""
    g = torch.Generator().manual_seed(18)
    z = attention_like(60, 256, g).view(3, 20, 256)
    alpha = 1.0 + torch.rand(3, 20, 1, generator=g, dtype=torch.float64)
    alpha[0, :4] = 1.0
    alpha[1, :3] = 1.1
    alpha[2, :3] = 2.0
    assert torch.unique(alpha).numel() > E._MAX_GROUPS
    check_exact(z, alpha, entmax(z, alpha))
