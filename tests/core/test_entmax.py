"""sparse_core.entmax against the ``entmax`` package (1.3): exact supports, values, masking, α.

The reference is run on the same scores in float64 (``entmax_reference(z.double(), α)``): our
thresholds are computed in float64, so supports must agree exactly and values to 1e-6 (for α near
1 an exact value can lie below float32's range, ~1e-38, and is 0 in a float32 result). Against
the package in float32 (its own rounding, τ from float32 cumulative sums or bisection) supports may
only differ on knife-edge entries whose value is below 1e-10 on both sides, and values by 1e-6
plus the package's own float32 error.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparse_core import entmax as E
from sparse_core.entmax import entmax, entmax_reference

ALPHAS = [1.1, 1.25, 1.5, 1.75, 2.0]
SIZES = [1, 2, 7, 128, 512]
SCALES = [0.1, 1.0, 10.0, 1000.0]
KNIFE_EDGE = 1e-10


def assert_matches_reference(z: torch.Tensor, alpha, p: torch.Tensor | None = None) -> None:
    """Exact support and 1e-6 values vs float64 reference; knife edges only vs float32."""
    p = entmax(z, alpha) if p is None else p
    assert p.dtype == (torch.float64 if z.dtype == torch.float64 else torch.float32)
    assert not torch.isnan(p).any()
    assert not ((p > 0) & (p < torch.finfo(p.dtype).tiny)).any(), "subnormal values are flushed"
    r64 = entmax_reference(z.double(), alpha)
    diff = (p > 0) != (r64 > 0)
    if p.dtype == torch.float32:  # exact values below float32's range underflow to 0 (α near 1)
        diff &= torch.maximum(p.double(), r64) >= torch.finfo(torch.float32).tiny
    assert not diff.any(), f"{int(diff.sum())} support entries differ from the float64 reference"
    assert float((p.double() - r64).abs().max()) <= 1e-6
    if z.dtype == torch.float32:
        r32 = entmax_reference(z, alpha)
        flips = (p > 0) != (r32 > 0)
        edge = torch.maximum(p, r32) < KNIFE_EDGE
        assert not (flips & ~edge).any(), "support differs from float32 reference off knife edges"
        own = float((r32.double() - r64).abs().max())  # the package's own float32 error
        assert float((p - r32).abs().max()) <= 1e-6 + own


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
    assert float((p - r64).abs().max()) <= 1e-6


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


def test_no_autograd_and_no_global_state() -> None:
    z = torch.randn(3, 10, requires_grad=True)
    p = entmax(z, 1.5)
    assert not p.requires_grad
    assert torch.is_grad_enabled()


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
    assert torch.allclose(q, p, atol=1e-6)


@pytest.mark.parametrize("alpha", [1.5, 1.25, 2.0])
def test_missed_candidates_are_recomputed(alpha: float, monkeypatch, caplog) -> None:
    """If the dense phase overshoots τ (a candidate is lost), the row is redone from {x > −1}."""
    real = E._dense_newton_step

    def overshoot(d, c, a):
        return real(d, c, a) + 0.5  # pushes the candidate threshold above τ*

    monkeypatch.setattr(E, "_dense_newton_step", overshoot)
    z = torch.randn(8, 64, generator=torch.Generator().manual_seed(9)) * 2.0
    with caplog.at_level("WARNING", logger="sparse_core.entmax"):
        p = entmax(z, alpha)
    assert "recomputing" in caplog.text
    assert_matches_reference(z, alpha, p)


@pytest.mark.parametrize("chunk", [64, 1000, 1 << 30])
def test_chunking_does_not_change_the_result(chunk: int) -> None:
    z = torch.randn(50, 64) * 4
    full = E._entmax_rows(z, 1.5)
    assert torch.equal(E._entmax_rows(z, 1.5, chunk_elements=chunk), full)


@pytest.mark.parametrize("alpha", [1.1, 1.25, 1.5, 1.75, 2.0])
def test_exact_phase_on_whole_rows_equals_compact(alpha: float, monkeypatch) -> None:
    """The exact phase runs on the candidates, or on whole rows when most scores are candidates."""
    g = torch.Generator().manual_seed(10)
    z = torch.randn(40, 96, generator=g) * 2.0
    z = z.masked_fill(torch.rand(z.shape, generator=g) < 0.2, float("-inf"))
    z[3] = float("-inf")
    z[4, 1:] = float("-inf")  # causal first row: a single live entry
    monkeypatch.setattr(E, "_DENSE_EXACT", 0)  # always compact
    compact = entmax(z, alpha)
    monkeypatch.setattr(E, "_DENSE_EXACT", 10**9)  # always whole rows
    dense = entmax(z, alpha)
    assert torch.equal(compact > 0, dense > 0)
    assert torch.allclose(compact, dense, atol=1e-7)
    assert_matches_reference(z, alpha, dense)


def test_dense_steps_do_not_change_the_result() -> None:
    z = torch.randn(64, 256) * 3
    results = [E._entmax_rows(z, a, dense_steps=k) for a in (1.5, 1.3) for k in (0, 1, 3)]
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
    alpha=st.sampled_from([1.25, 1.5, 1.75, 2.0]),
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
    assert float((p.double() - r64).abs().max()) <= 1e-6
    assert math.isfinite(float(p.sum()))
