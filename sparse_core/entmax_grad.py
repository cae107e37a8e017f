"""The gradient of α-entmax: closed form w.r.t. the scores and w.r.t. α (SPEC §7).

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

Precision: the backward runs in the forward's result dtype (float32 for float32/half scores,
float64 for float64); the gradient w.r.t. the scores is returned in their dtype.
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
        ctx.a_f = a_f
        ctx.scores_dtype = scores.dtype
        if a_t is not None:
            ctx.save_for_backward(p, a_t.detach())
        else:
            ctx.save_for_backward(p)
        return p

    @staticmethod
    def backward(ctx, grad: Tensor):
        dim = ctx.dim
        saved = ctx.saved_tensors
        p = saved[0]
        g = grad.to(p.dtype)
        if ctx.a_f is not None:
            a: float | Tensor = ctx.a_f
            s = _skew_scalar(p, ctx.a_f)
        else:
            a_raw = saved[1]
            a = _aligned(a_raw, p).to(p.dtype)  # (..., 1, ...) with p's number of dims
            s = torch.where(p > 0, p.pow(2.0 - a), 0.0)
        ss = s.sum(dim, keepdim=True)
        sg = (s * g).sum(dim, keepdim=True)
        q = sg / ss.clamp_min(torch.finfo(p.dtype).tiny)
        dz = (g - q).mul_(s).to(ctx.scores_dtype)
        da = None
        if ctx.a_f is None and ctx.needs_input_grad[1]:
            a_raw = saved[1]
            am1 = a - 1.0
            logp = torch.where(p > 0, p, 1.0).log_()
            shannon = p * logp  # S_i = p_i log p_i, 0 off the support
            ent = shannon.sum(dim, keepdim=True)  # H
            skew = s / ss.clamp_min(torch.finfo(p.dtype).tiny)  # p̃
            soft = am1 == 0
            am1 = torch.where(soft, 1.0, am1)
            term = (p - skew) / (am1 * am1) - (shannon - skew * ent) / am1
            da = (g * term).sum(dim, keepdim=True)
            da = torch.where(soft, 0.0, da)
            da = _reduce_to(da, a_raw.shape).to(a_raw.dtype)
        return dz, da, None, None, None


def _skew_scalar(p: Tensor, a: float) -> Tensor:
    """``s = p^(2−α)`` on the support, 0 off it, for a scalar α (fast special cases)."""
    if a == 1.0:
        return p
    if a == 1.5:
        return p.sqrt()
    if a == 2.0:
        return (p > 0).to(p.dtype)
    return p.pow(2.0 - a)  # 0^(2−α) = 0 for α < 2


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
