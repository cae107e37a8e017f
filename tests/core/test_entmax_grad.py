"""Gradients of sparse_core.entmax (definitions §7) against the ``entmax`` package's autograd,
float64.

The package's ``entmax15`` and ``sparsemax`` (sort-based, closed-form backward) and
``entmax_bisect`` (its backward w.r.t. the scores and α, Correia et al. 2019) are the references;
``torch.autograd.gradcheck`` checks both gradients against finite differences of our forward.
"""

from __future__ import annotations

import pytest
import torch
from entmax import entmax15, entmax_bisect, sparsemax

from sparse_core.entmax import entmax

ALPHAS = [1.1, 1.25, 1.5, 1.75, 2.0, 1.3333]
F64 = torch.float64


def package(z: torch.Tensor, alpha) -> torch.Tensor:
    """The package's differentiable α-entmax (float64)."""
    if not isinstance(alpha, torch.Tensor):
        if alpha == 1.5:
            return entmax15(z, dim=-1)
        if alpha == 2.0:
            return sparsemax(z, dim=-1)
    return entmax_bisect(z, alpha, dim=-1, n_iter=200)


def scores(seed: int, shape=(3, 4, 11), scale: float = 2.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=F64) * scale


def grads(fn, z: torch.Tensor, g: torch.Tensor, *extra: torch.Tensor):
    z = z.clone().requires_grad_()
    extra = tuple(e.detach().clone().requires_grad_() for e in extra)
    p = fn(z, *extra)
    (p * g).sum().backward()
    return p.detach(), z.grad, *(e.grad for e in extra)


@pytest.mark.parametrize("alpha", ALPHAS)
def test_score_gradient_equals_package(alpha: float) -> None:
    z = scores(int(alpha * 100))
    g = torch.randn(z.shape, generator=torch.Generator().manual_seed(1), dtype=F64)
    p, dz = grads(lambda x: entmax(x, alpha), z, g)
    r, dr = grads(lambda x: package(x, alpha), z, g)
    assert torch.allclose(p, r, atol=1e-12)
    assert torch.allclose(dz, dr, atol=1e-10)
    assert (dz[p == 0] == 0).all()  # off the support the gradient is exactly 0


@pytest.mark.parametrize("alpha", [1.25, 1.5, 2.0])
def test_ties_and_masked_keys(alpha: float) -> None:
    z = scores(7, (2, 3, 8))
    z[0, 0, :4] = 1.5  # four tied top scores
    z[0, 1] = torch.tensor([3.0, 3.0, 3.0, -1.0, -2.0, 0.0, 1.0, 2.9], dtype=F64)
    z[1, 0, 2:5] = float("-inf")  # masked keys
    z[1, 1, :] = float("-inf")  # a fully masked row
    z[1, 2, 1:] = float("-inf")  # one live key
    live = ~torch.isneginf(z).all(-1, keepdim=True)
    g = torch.randn(z.shape, generator=torch.Generator().manual_seed(2), dtype=F64)
    p, dz = grads(lambda x: entmax(x, alpha), z, g)
    # the package raises (sort) or returns NaN (bisection) on fully masked rows: fill them
    zf = z.masked_fill(~live, 0.0)
    r, dr = grads(lambda x: package(x, alpha), zf, g)
    assert torch.allclose(p[live.expand_as(p)], r[live.expand_as(r)], atol=1e-12)
    keep = live.expand_as(dz)
    assert torch.allclose(dz[keep], dr[keep], atol=1e-10)
    assert (dz[~keep] == 0).all() and not dz.isnan().any()
    assert (dz[torch.isneginf(z)] == 0).all()
    assert (dz[1, 2] == 0).all()  # one live key: p = (1, 0, ...) whatever z, zero gradient


@pytest.mark.parametrize(
    "values",
    [[1.25, 1.5, 1.9], [1.1, 1.6, 2.0], [1.5, 1.5, 1.5], [1.25, 1.25, 1.25], [2.0, 2.0, 2.0]],
)
def test_alpha_gradient_equals_entmax_bisect(values: list[float]) -> None:
    z = scores(11, (2, 3, 5, 9))  # (B, H, n, n)
    z[0, 1, 2, :3] = float("-inf")
    g = torch.randn(z.shape, generator=torch.Generator().manual_seed(3), dtype=F64)
    a = torch.tensor(values, dtype=F64).view(1, 3, 1, 1)
    p, dz, da = grads(lambda x, al: entmax(x, al), z, g, a)
    a_full = a.expand(2, 3, 5, 1)
    r, dr, da_full = grads(lambda x, al: package(x, al), z, g, a_full)
    assert torch.allclose(p, r, atol=1e-12)
    assert torch.allclose(dz, dr, atol=1e-10)
    assert da.shape == a.shape
    assert torch.allclose(da, da_full.sum(dim=(0, 2), keepdim=True), atol=1e-9)


def test_alpha_gradient_of_a_scalar_tensor_and_per_head_shapes() -> None:
    z = scores(5, (2, 3, 4, 6))
    g = torch.randn(z.shape, generator=torch.Generator().manual_seed(4), dtype=F64)
    a0 = torch.tensor(1.4, dtype=F64)
    _, _, da0 = grads(lambda x, al: entmax(x, al), z, g, a0)
    _, _, dr = grads(lambda x, al: package(x, al), z, g, a0.expand(2, 3, 4, 1))
    assert da0.shape == () and torch.allclose(da0, dr.sum(), atol=1e-9)
    a3 = torch.tensor([1.2, 1.5, 1.8], dtype=F64).view(3, 1, 1)  # (H, 1, 1)
    _, _, da3 = grads(lambda x, al: entmax(x, al), z, g, a3)
    _, _, dr3 = grads(lambda x, al: package(x, al), z, g, a3.expand(2, 3, 4, 1))
    assert da3.shape == (3, 1, 1)
    assert torch.allclose(da3, dr3.sum(dim=(0, 2)).view(3, 1, 1), atol=1e-9)


def test_gradcheck_scores_and_alpha() -> None:
    z = scores(21, (2, 3, 7)).requires_grad_()
    a = torch.tensor([1.2, 1.5, 1.8], dtype=F64).view(3, 1).requires_grad_()
    assert torch.autograd.gradcheck(lambda x, al: entmax(x, al), (z, a))
    for alpha in (1.5, 2.0, 1.3):
        assert torch.autograd.gradcheck(lambda x, al=alpha: entmax(x, al), (z,))


def test_alpha_one_gives_softmax_gradient_and_zero_alpha_gradient() -> None:
    z = scores(3)
    g = torch.randn(z.shape, dtype=F64)
    p, dz = grads(lambda x: entmax(x, 1.0), z, g)
    r, dr = grads(lambda x: torch.softmax(x, -1), z, g)
    assert torch.allclose(p, r) and torch.allclose(dz, dr, atol=1e-12)
    a = torch.tensor([1.0, 1.5, 1.5, 1.5], dtype=F64).view(4, 1)
    _, _, da = grads(lambda x, al: entmax(x, al), z, g, a)
    assert da[0, 0] == 0 and torch.isfinite(da).all() and (da[1:] != 0).all()


def test_forward_is_unchanged_and_float32_gradient() -> None:
    z = scores(9, (4, 6, 64)).float()
    for alpha in (1.1, 1.5, 1.75, 2.0):
        with torch.no_grad():
            ref = entmax(z, alpha)
        zz = z.clone().requires_grad_()
        p = entmax(zz, alpha)
        assert p.requires_grad and torch.equal(p.detach(), ref)  # bit for bit
        p.square().sum().backward()
        z64 = z.double().requires_grad_()
        entmax(z64, alpha).square().sum().backward()
        assert zz.grad.dtype == torch.float32
        assert torch.allclose(zz.grad.double(), z64.grad, atol=1e-5)
    half = z.bfloat16().requires_grad_()
    p = entmax(half, 1.5)
    assert p.dtype == torch.float32
    p.sum().backward()
    assert half.grad.dtype == torch.bfloat16


def test_no_graph_without_grad_and_out_is_refused() -> None:
    z = torch.randn(3, 10, requires_grad=True)
    with torch.inference_mode():
        assert not entmax(z, 1.5).requires_grad
    with torch.no_grad():
        assert not entmax(z, 1.5).requires_grad
    assert not entmax(z.detach(), 1.5).requires_grad
    with pytest.raises(ValueError, match="out="):
        entmax(z, 1.5, out=torch.empty(3, 10))


@pytest.mark.parametrize("values", [[1.5] * 3, [1.25] * 3, [1.75] * 3, [1.2, 1.5, 1.8]])
def test_gradcheck_learned_alpha_one_value_or_per_head(values: list[float]) -> None:
    """Every head at one α (the first step of --alpha learned: the backward's scalar fast
    paths, s = √p at 1.5) and distinct α per head, with masked keys: float64 gradcheck."""
    z = scores(31, (2, 3, 4, 7))
    z[0, 1, 2, :3] = float("-inf")
    z[1, 2, 0, 4:] = float("-inf")
    a = torch.tensor(values, dtype=F64).view(1, 3, 1, 1).requires_grad_()
    assert torch.autograd.gradcheck(lambda x, al: entmax(x, al), (z.requires_grad_(), a))


def test_float32_alpha_gradient_matches_float64() -> None:
    """float32 scores: the backward in float32 (rsqrt at 1.5, exp/log elsewhere) gives the
    float64 gradients to float32 rounding, for one α and for per-head α."""
    z = scores(41, (4, 3, 16, 48)).float()
    g = torch.randn(z.shape, generator=torch.Generator().manual_seed(5))
    for values in ([1.5] * 3, [1.3, 1.5, 1.9]):
        a = torch.tensor(values, dtype=F64).view(1, 3, 1, 1)
        _, dz32, da32 = grads(lambda x, al: entmax(x, al), z, g, a)
        _, dz64, da64 = grads(lambda x, al: entmax(x, al), z.double(), g.double(), a)
        assert dz32.dtype == torch.float32 and da32.dtype == F64
        assert torch.allclose(dz32.double(), dz64, atol=2e-5)
        assert torch.allclose(da32, da64, rtol=1e-4, atol=1e-4)
        assert (dz32[dz64 == 0] == 0).all()
