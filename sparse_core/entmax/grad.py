"""The gradient of α-entmax: closed form w.r.t. the scores and w.r.t. α (definitions §7).

:func:`sparse_core.entmax.entmax` calls :func:`entmax_with_grad` when autograd is on and the
scores, or a tensor α, require a gradient, passing itself as ``forward`` (so this module sits
below it and imports nothing of it); the forward is the exact no-grad entmax unchanged (bit for
bit: it runs the same code), and the backward never differentiates through its iterations.

**Scores** (Peters et al. 2019, "Sparse Sequence-to-Sequence Models", §3.2). With
``p = α-entmax(z)``, ``p_i = [(α − 1) z_i − τ]_+^(1/(α−1))``, let ``s_i = p_i^(2−α)`` on the
support and 0 off it. Differentiating ``p_i`` and the constraint ``Σ p = 1`` gives the Jacobian
``∂p/∂z = diag(s) − s sᵀ / Σ_j s_j``, so for an upstream gradient ``g = ∂L/∂p``::

    ∂L/∂z = s ⊙ (g − (Σ_j s_j g_j) / Σ_j s_j).

α = 2 (sparsemax): s is the support indicator; α = 1.5: ``s = √p``; α = 1 (softmax): ``s = p``,
softmax's own gradient. Masked (−∞) scores and the rest of the complement of the support get 0,
and a fully masked row (all zeros) gets 0.

**α** (Correia et al. 2019, "Adaptively Sparse Transformers", §3.2 and Appendix B). With the
Shannon terms ``S_i = p_i log p_i`` (0 off the support), ``H = Σ_i S_i`` and the skewed
distribution ``p̃ = s / Σ_j s_j``::

    ∂L/∂α = Σ_i g_i [ (p_i − p̃_i) / (α − 1)² − (S_i − p̃_i H) / (α − 1) ].

This is the backward of ``EntmaxBisectFunction`` in the ``entmax`` package
(github.com/deep-spin/entmax, ``entmax/root_finding.py``, by Correia, Peters, Niculae and
Martins); we compute the same expression from our exact p. At α = 1 it is singular (0/0; softmax
has no α); rows whose α is exactly 1 get an α-gradient of 0 (a learned α = 1 + sigmoid(a) never
reaches 1 in float64 in practice). The α-gradient is summed over the dimensions α was broadcast
along, so it has α's own shape (e.g. (1, H, 1, 1) for per-head α of (B, H, n, n) scores).

**Computation.** The forward saves p only (and α aligned with it when the rows have different
α); the backward forms ``s`` once and then uses per-row sums only: ``Σ s``, ``Σ s g`` (so
``Σ p̃ g = Σ s g / Σ s``) and, for α, ``Σ g p``, ``H`` and ``Σ g S``, so that ``∂L/∂α`` per row is
``(Σ g p − Σ p̃ g) / (α − 1)² − (Σ g S − H Σ p̃ g) / (α − 1)``; no (..., n) temporary for p̃ or
the bracket. ``s``: α = 1.5 ``p · rsqrt(p)`` (0 · ∞ = NaN set to 0: ``sqrt`` takes a slow path on
the zeros of a sparse p on CPU, ~5x), α = 2 the support indicator, α = 1 p, other α (and rows
with distinct α) ``exp((2 − α) log p)`` masked by the support, reusing the α-gradient's ``log p``
(``pow`` with a tensor exponent is ~20x a multiply on CPU). A tensor α whose entries are all
equal (every head at 1.5 on the first step of ``--alpha learned``) takes the scalar cases.

**Precision** (docs/models.md, "Gradients"). Everything runs in the forward's result dtype:
float32 for float32 and half scores, float64 for float64 scores (the gradchecks); nothing of
shape (..., n) is upcast to float64 for float32 scores, α is used rounded to that dtype (float32:
6e-8 relative), and the gradients are returned in the scores' and α's own dtypes. The support is
that of the exact forward: off it ``∂L/∂z`` is exactly 0. In float32, ``s`` carries ≤ 2 ulp at
α = 1.5 (rsqrt), exp/log rounding elsewhere; the sums float32 reductions over n terms;
on MiniLM's layer-0 scores (n = 128, unit-scale g) ``∂L/∂z`` agrees with the float64
computation to 6e-7 absolute and the per-head ``∂L/∂α`` to 5e-6 relative, as accurate as the
element-wise form before it (3e-6 to 1e-5); tested at 2e-5 and 1e-4. The ``1/(α − 1)²`` of
``∂L/∂α`` amplifies rounding as α → 1.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

__all__ = ["entmax_with_grad"]


def entmax_with_grad(
    scores: Tensor, alpha: float | Tensor, dim: int, forward: Callable[..., Tensor]
) -> Tensor:
    """Differentiable exact α-entmax of ``scores`` along ``dim`` (module docstring).

    ``forward(scores, alpha, dim)``: the exact entmax, run without autograd (the caller's).

    ``alpha``: a float, or a tensor broadcastable to ``scores`` with size 1 along ``dim``
    (already validated by :func:`sparse_core.entmax.entmax`); a tensor that requires grad gets
    its gradient.
    """
    a_t = alpha if isinstance(alpha, Tensor) else None
    a_f = None if a_t is not None else float(alpha)
    return _Entmax.apply(scores, a_t, a_f, dim, forward)


class _Entmax(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx, scores: Tensor, a_t: Tensor | None, a_f: float | None, dim: int, entmax
    ) -> Tensor:
        a = a_t if a_t is not None else a_f
        p = entmax(scores.detach(), a.detach() if isinstance(a, Tensor) else a, dim)
        ctx.dim = dim
        ctx.scores_dtype = scores.dtype
        ctx.a_shape = None if a_t is None else a_t.shape
        ctx.a_dtype = None if a_t is None else a_t.dtype
        # One α for every row (a float, or a tensor whose values are all equal, e.g. every head
        # at 1.5 on the first step of --alpha learned): the backward's fast scalar cases.
        ctx.a_f = a_f if a_t is None else _common(a_t)
        if ctx.a_f is None:
            # α − 1 (..., 1, ...), formed in float64 before the cast to p's dtype: α just above 1
            # keeps its distance from 1 in float32 (1 + 2^-52 would round to 1)
            c_t = _aligned(a_t.detach(), p).to(torch.float64) - 1.0
            ctx.save_for_backward(p, c_t.to(p.dtype))
        else:
            ctx.save_for_backward(p)
        return p

    @staticmethod
    def backward(ctx, grad: Tensor):
        dim = ctx.dim
        saved = ctx.saved_tensors
        p = saved[0]
        g = grad.to(p.dtype)
        want_a = ctx.a_shape is not None and ctx.needs_input_grad[1]
        logp = None
        if want_a or (ctx.a_f is not None and ctx.a_f not in _FAST):
            # log p on the support; 0 off it (p clamped up to tiny: log(0) is a slow path and
            # the factor p or the mask zeroes those entries wherever log p is used)
            logp = torch.clamp_min(p, torch.finfo(p.dtype).tiny).log_()
        a: float | Tensor = ctx.a_f if ctx.a_f is not None else saved[1] + 1.0
        s = _skew(p, a, logp)  # (..., n) p^(2−α) on the support, 0 off it
        ss = s.sum(dim, keepdim=True)  # Σ s
        sg = torch.linalg.vecdot(s, g, dim=dim).unsqueeze(dim)  # Σ s g
        q = sg.div_(ss.clamp_min(torch.finfo(p.dtype).tiny))  # Σ s g / Σ s = Σ p̃ g
        dz = torch.sub(g, q).mul_(s).to(ctx.scores_dtype)  # s ⊙ (g − Σ p̃ g)
        del s
        da = None
        if want_a:
            # Σ_i g_i [(p_i − p̃_i)/c² − (S_i − p̃_i H)/c] with c = α − 1, S = p log p,
            # H = Σ S, p̃ = s / Σ s: per-row sums only, Σ p̃ g being q above.
            am1 = saved[1] if isinstance(a, Tensor) else torch.full_like(q, a - 1.0)
            near = bool((am1 < _NEAR_C).any())  # α near 1: the form without 1/(α − 1)²
            shannon = logp * p if near else logp.mul_(p)  # S (0 off the support: p = 0 there)
            ent = shannon.sum(dim, keepdim=True)  # H
            gs = torch.linalg.vecdot(shannon, g, dim=dim).unsqueeze(dim)  # Σ g S
            gp = torch.linalg.vecdot(p, g, dim=dim).unsqueeze(dim)  # Σ g p
            soft = am1 == 0
            if near:
                da = _alpha_grad_near_one(p, g, logp, am1, ss, gp, gs, ent, dim)
            else:
                da = (gp - q) / (am1 * am1) - (gs - q * ent) / am1
            da = torch.where(soft, 0.0, da)
            da = _reduce_to(da, ctx.a_shape).to(ctx.a_dtype)
        return dz, da, None, None, None


_NEAR_C = 0.25
"""Rows with α − 1 below it take the α-gradient's cancellation-free form
(:func:`_alpha_grad_near_one`): the direct form's rounding grows as eps / (α − 1)²."""


def _alpha_grad_near_one(
    p: Tensor,
    g: Tensor,
    logp: Tensor,
    c: Tensor,
    w: Tensor,
    gp: Tensor,
    gs: Tensor,
    ent: Tensor,
    dim: int,
) -> Tensor:
    """``∂L/∂α`` per row without the ``1/(α − 1)²`` cancellation, for α just above 1.

    With ``c = α − 1``, ``L = log p`` (on the support), ``E[f] = Σ p f``, ``ḡ = E[g]``,
    ``H = E[L]``, ``w_i = p_i^(−c) = e^(x_i)`` (``x = −c L ≥ 0``), ``W = E[w] = Σ s`` and the
    tilted mean ``Σ p̃ g = E[g w] / W``: the module's ``A / c² − B / c`` (``A = ḡ − Σ p̃ g``,
    ``B = Σ g S − H Σ p̃ g``) rewritten exactly, with ``e₁ = (w − 1)/c = −L expm1(x)/x`` and
    ``e₂ = (w − 1 − x)/c² = L² (expm1(x) − x)/x²``, as::

        ∂L/∂α = (H E[(g − ḡ) e₁] − E[(g − ḡ) e₂] − Cov(g, L) E[e₁]) / W,

    ``Cov(g, L) = Σ g S − ḡ H``. No term divides by c: the 1/c parts of ``A/c²`` and ``B/c``
    cancel analytically (``A = c Cov(g, L) + O(c²)``), so the rounding stays that of the sums
    at every α > 1, and as c → 0 the value tends to ``−E[(g − ḡ) L²] / 2``, the one-sided
    derivative at α = 1 (continuous in α). ``expm1(x)/x`` and
    ``(expm1(x) − x)/x²`` take their Taylor series below x = 0.1 (error below x⁶/8! there).
    """
    x = logp * -c  # −c log p >= 0 (log p of the zeros clamped: those terms carry the factor p)
    small = x < 0.1
    xs = torch.where(small, x, 0.0)
    r1 = 1.0 + xs * (1 / 2 + xs * (1 / 6 + xs * (1 / 24 + xs * (1 / 120 + xs / 720))))
    r2 = 0.5 + xs * (1 / 6 + xs * (1 / 24 + xs * (1 / 120 + xs * (1 / 720 + xs / 5040))))
    xb = torch.where(small, 1.0, x)
    em = torch.expm1(xb)
    r1 = torch.where(small, r1, em / xb)
    r2 = torch.where(small, r2, (em - xb) / (xb * xb))
    e1 = -logp * r1
    e2 = logp * logp * r2
    pe1 = p * e1
    pe2 = p * e2
    se1 = pe1.sum(dim, keepdim=True)  # E[e₁]
    ge1 = torch.linalg.vecdot(pe1, g, dim=dim).unsqueeze(dim) - gp * se1  # E[(g − ḡ) e₁]
    ge2 = torch.linalg.vecdot(pe2, g, dim=dim).unsqueeze(dim) - gp * pe2.sum(dim, keepdim=True)
    cov = gs - gp * ent
    return (ent * ge1 - ge2 - cov * se1) / w.clamp_min(torch.finfo(p.dtype).tiny)


_FAST = (1.0, 1.5, 2.0)
"""Scalar α whose s needs no logarithm."""


def _common(a: Tensor) -> float | None:
    """The value of ``a`` if all its entries are equal (one α for every row), else None."""
    flat = a.detach().reshape(-1)
    first = flat[0]
    return float(first) if bool((flat == first).all()) else None


def _skew(p: Tensor, a: float | Tensor, logp: Tensor | None) -> Tensor:
    """``s = p^(2−α)`` on the support, 0 off it: a new tensor.

    α = 1: p; α = 1.5: √p as ``p · rsqrt(p)`` (rsqrt(0) = inf, 0 · inf = NaN, set to 0: on CPU
    ``sqrt`` takes a slow path on zeros, and most of a sparse P is zeros); α = 2: the support
    indicator; other α (a float, or a per-row tensor aligned with p): ``exp((2 − α) log p)``
    masked by the support, from ``logp`` (``log`` of p clamped up to tiny).
    """
    if isinstance(a, float) and a == 1.0:
        return p.clone()
    if isinstance(a, float) and a == 1.5:
        return torch.rsqrt(p).mul_(p).nan_to_num_(0.0, 0.0, 0.0)
    if isinstance(a, float) and a == 2.0:
        return (p > 0).to(p.dtype)
    assert logp is not None
    return torch.mul(logp, 2.0 - a).exp_().mul_(p > 0)


def _aligned(a: Tensor, like: Tensor) -> Tensor:
    """α with leading singleton dims so that it has ``like``'s number of dims."""
    return a.reshape((1,) * (like.dim() - a.dim()) + tuple(a.shape))


def _reduce_to(x: Tensor, shape: torch.Size) -> Tensor:
    """Sum ``x`` over the dims that ``shape`` broadcasts along; the result has ``shape``."""
    lead = x.dim() - len(shape)
    if lead:
        x = x.sum(dim=tuple(range(lead)))
    dims = tuple(i for i, s in enumerate(shape) if s == 1 and x.shape[i] != 1)
    if dims:
        x = x.sum(dim=dims, keepdim=True)
    return x.reshape(shape)
