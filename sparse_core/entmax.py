"""Exact, fast α-entmax (Peters et al. 2019; Correia et al. 2019), forward only.

For scores ``z ∈ ℝⁿ`` and ``α ∈ [1, 2]``::

    entmax_α(z)_i = [(α − 1) z_i − τ]_+ ^ (1 / (α − 1)),   τ such that Σ_i entmax_α(z)_i = 1.

α = 1 is softmax (the limit; computed with ``torch.softmax``), α = 1.5 the paper's setting and α = 2
sparsemax. The map is shift invariant, so we work with ``x = (α − 1)(z − max z) ≤ 0``, whose
threshold lies in ``[−1, −n^(1−α)]``. With ``β = 1 / (α − 1)`` and ``d_i = [x_i − τ]_+``, both
``f(τ) = Σ d_i^β − 1`` and ``h(τ) = ‖d‖_β − 1`` are convex and decreasing in τ (``h`` is an ℓ_β
norm of convex non-negative functions of τ). Newton on ``h`` is exact when the top scores are equal
and needs far fewer steps than Newton on ``f``; its step is
``Δτ = (g − g^(1 − 1/β)) / g₁`` with ``g = Σ d^β``, ``g₁ = Σ d^(β − 1)`` (α = 1.5: ``g = ‖d‖₂²``,
``g₁ = Σ d``; α = 2: Michelot's sparsemax step ``(Σ d − 1) / |{d > 0}|``).

Algorithm (no sort; all rows at once, in chunks of rows that stay in cache):

1. Dense phase, float32, on the whole rows: Newton on ``h`` from ``τ₀ = −1`` (where ``f ≥ 0``).
   Newton on a convex decreasing function started on the left never overshoots, so every iterate
   is a lower bound of τ* and ``{x > τ_k}`` a superset of the support (a small margin absorbs
   float32 rounding). Two steps shrink that superset to about 2 % of a 512-long attention row.
2. Compaction: the candidates ``{x > τ_K}`` are gathered (flat indices) and ``x`` is recomputed
   there in float64 from the input, exactly.
3. Exact phase, float64, on the candidates only. α = 1.5 and α = 2: the closed form on the support
   ``S = {x > τ}`` (α = 1.5: ``Σ_S (x − τ)² = 1``, so ``τ = mean_S − √(1/|S| − var_S)``; α = 2:
   ``τ = (Σ_S x − 1) / |S|``), repeated until S is stable (one pass, two on knife edges). Other α:
   Newton on ``h`` in float64 to convergence. A row whose τ ended below the compaction threshold
   (a candidate could have been missed; never observed) is recomputed with the always-safe
   candidate set ``{x > −1}``.
4. Output: zeros, with ``(x_i − τ)^β`` (float64, then cast) scattered onto the support.

Guarantee: the support is ``{i : x_i > τ}`` for the input scores taken as exact numbers, with τ
correct to float64 rounding; for α ∈ {1.5, 2} τ comes from the closed form, so exact ties (e.g.
``z = (2, 0)`` at α = 1.5, where the second entry sits exactly on the threshold) give exact zeros.
Values match the exact map to about 1e-7 relative. The ``entmax`` package computes τ in the input
precision, so on float32 input it may disagree on entries within ~1e-7 of the threshold (their
value is below ~1e-13) and its values carry errors of up to a few 1e-6 (cumulative sums); the tests
therefore compare supports and values with the package run on the same scores in float64.

``-inf`` scores are masked (exact zeros); rows that are entirely ``-inf`` give all zeros. NaN or
``+inf`` raise ``ValueError``. float64 input is computed and returned in float64; float16 and
bfloat16 input is computed and returned in float32 (half precision flips support decisions, SPEC
§1). Inference only: no autograd graph is recorded.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch
from torch import Tensor

log = logging.getLogger(__name__)

__all__ = ["entmax", "entmax_reference"]

DENSE_STEPS = 2
"""Newton steps over the whole rows before compaction (see docs/benchmarks.md)."""
CHUNK_ELEMENTS = 1 << 21
"""Rows are processed in chunks of about this many scores, so the dense phase stays in cache."""
_MAX_EXACT_STEPS = 50
_F64 = torch.float64


# ----------------------------------------------------------------------------------------------
# public API


def entmax(scores: Tensor, alpha: float | Tensor = 1.5, dim: int = -1) -> Tensor:
    """Exact α-entmax of ``scores`` along ``dim`` (formula and algorithm: module docstring).

    Args:
        scores: real scores; ``-inf`` marks masked entries (a fully masked row gives zeros).
        alpha: a float in [1, 2], or a tensor broadcastable to ``scores`` with size 1 along
            ``dim`` (e.g. (1, H, 1, 1) or (H, 1, 1) for per-head α of (B, H, n, n) scores).
            α = 1 is softmax, 1.5 the default, 2 sparsemax.
        dim: the dimension that sums to one.

    Returns:
        Probabilities of the shape of ``scores``; float64 for float64 input, else float32.
    """
    a = _check_alpha(alpha, scores, dim)
    with torch.no_grad():
        z = _as_compute_dtype(scores)
        if isinstance(a, float) and a == 1.0:
            return _softmax(z, dim)
        if z.numel() == 0:
            return torch.zeros_like(z)
        zl = z.movedim(dim, -1)  # (..., n)
        shape = zl.shape
        n = shape[-1]
        rows = zl.reshape(-1, n).contiguous()  # (R, n); copies only if dim is not the last
        if isinstance(a, float):
            out = _entmax_rows(rows, a)
        else:
            a_rows = a.expand(*z.shape).movedim(dim, -1).reshape(-1, n)[:, 0]  # (R,)
            out = _entmax_rows(rows, a_rows)
            soft = a_rows == 1.0
            if bool(soft.any()):
                out[soft] = _softmax(rows[soft], -1)
        return out.reshape(shape).movedim(-1, dim)


def entmax_reference(scores: Tensor, alpha: float | Tensor = 1.5, dim: int = -1) -> Tensor:
    """α-entmax computed by the ``entmax`` package (1.3), its pitfalls fixed: the test baseline.

    α = 1: ``torch.softmax``; α = 1.5: ``entmax15`` (sort); α = 2: ``sparsemax`` (sort); any
    other α, or a per-head α tensor: ``entmax_bisect`` (60 halvings). Fully ``-inf`` rows are
    filled with zeros before the call and zeroed after (the package raises or returns NaN on
    them); a per-head α is expanded to the batch shape with size 1 along ``dim``, which the
    package requires; rows whose α is 1 use softmax. Computes in the dtype of ``scores``.
    """
    from entmax import entmax15, entmax_bisect, sparsemax

    a = _check_alpha(alpha, scores, dim)
    with torch.no_grad():
        z = _as_compute_dtype(scores)
        dead = torch.isneginf(z).all(dim=dim, keepdim=True)
        zf = z.masked_fill(dead, 0.0)
        if isinstance(a, float):
            if a == 1.0:
                p = torch.softmax(zf, dim=dim)
            elif a == 1.5:
                p = entmax15(zf, dim=dim)
            elif a == 2.0:
                p = sparsemax(zf, dim=dim)
            else:
                p = entmax_bisect(zf, a, dim=dim, n_iter=60)
        else:
            shape = list(z.shape)
            shape[dim] = 1
            a_full = a.expand(*shape).to(z.dtype)
            p = entmax_bisect(zf, a_full.where(a_full > 1.0, 2.0), dim=dim, n_iter=60)
            soft = (a_full == 1.0).expand_as(z)
            if bool(soft.any()):
                p = torch.where(soft, torch.softmax(zf, dim=dim), p)
        return p.masked_fill(dead, 0.0)


# ----------------------------------------------------------------------------------------------
# argument handling


def _as_compute_dtype(scores: Tensor) -> Tensor:
    if not scores.is_floating_point():
        raise TypeError(f"scores must be a floating-point tensor, got {scores.dtype}")
    if scores.dim() == 0:
        raise ValueError("scores must have at least one dimension, got a 0-d tensor")
    z = scores.detach()
    return z if z.dtype in (torch.float32, _F64) else z.float()


def _check_alpha(alpha: float | Tensor, scores: Tensor, dim: int) -> float | Tensor:
    """Validate α. Returns a float, or a float64 tensor with ``scores.dim()`` dims."""
    if not isinstance(alpha, Tensor):
        a = float(alpha)
        if not 1.0 <= a <= 2.0:
            raise ValueError(f"alpha must be in [1, 2], got {alpha}")
        return a
    if alpha.numel() == 1:
        return _check_alpha(float(alpha.reshape(())), scores, dim)
    want = "e.g. (1, H, 1, 1) or (H, 1, 1) for per-head alpha of (B, H, n, n) scores"
    if alpha.dim() > scores.dim():
        raise ValueError(
            f"alpha of shape {tuple(alpha.shape)} has more dims than scores "
            f"{tuple(scores.shape)}; {want}"
        )
    a = alpha.detach().to(device=scores.device, dtype=_F64)
    a = a.reshape((1,) * (scores.dim() - a.dim()) + tuple(a.shape))
    try:
        torch.broadcast_shapes(a.shape, scores.shape)
    except RuntimeError as e:
        raise ValueError(
            f"alpha of shape {tuple(alpha.shape)} does not broadcast to scores "
            f"{tuple(scores.shape)}; {want}"
        ) from e
    if a.shape[dim] != 1:
        raise ValueError(
            f"alpha of shape {tuple(alpha.shape)} must have size 1 along dim {dim} of scores "
            f"{tuple(scores.shape)}; {want}"
        )
    if not bool(((a >= 1.0) & (a <= 2.0)).all()):
        raise ValueError(f"alpha must be in [1, 2], got values {alpha.flatten().tolist()}")
    first = a.flatten()[0]
    if bool((a == first).all()):
        return float(first)
    return a


def _softmax(z: Tensor, dim: int) -> Tensor:
    """Softmax that gives zeros, not NaN, on rows that are entirely ``-inf``."""
    p = torch.softmax(z, dim=dim)
    if z.numel() and bool(torch.isneginf(z).all(dim=dim).any()):
        p = p.nan_to_num_(0.0)
    return p


# ----------------------------------------------------------------------------------------------
# the algorithm


def _entmax_rows(
    rows: Tensor,
    alpha: float | Tensor,
    dense_steps: int = DENSE_STEPS,
    chunk_elements: int | None = None,
) -> Tensor:
    """α-entmax of every row of ``rows (R, n)``; alpha a float or a per-row (R,) float64 tensor."""
    rows = rows.contiguous()
    r_total, n = rows.shape
    out = torch.zeros_like(rows)
    if r_total == 0 or n == 0:
        return out
    chunk = max(1, (chunk_elements or CHUNK_ELEMENTS) // n)
    for r0 in range(0, r_total, chunk):
        a = alpha if isinstance(alpha, float) else alpha[r0 : r0 + chunk]
        _entmax_chunk(rows[r0 : r0 + chunk], a, out[r0 : r0 + chunk], dense_steps)
    return out


def _entmax_chunk(z: Tensor, alpha: float | Tensor, out: Tensor, dense_steps: int) -> None:
    """Write α-entmax of ``z (R, n)`` into ``out`` (zeros on entry)."""
    m = z.amax(dim=-1, keepdim=True)  # (R, 1)
    if bool((torch.isnan(m) | torch.isposinf(m)).any()):
        raise ValueError("scores contain NaN or +inf; only finite values and -inf are allowed")
    m.masked_fill_(torch.isneginf(m), 0.0)  # fully masked rows: all d = 0, no candidates
    if isinstance(alpha, float):
        c: float | Tensor = alpha - 1.0  # x = c (z - m)
    else:
        c = (alpha.where(alpha > 1.0, 2.0) - 1.0).to(z.dtype)[:, None]  # (R, 1); α = 1 rows: caller
    # Thresholds T live in z units (τ = c (T − m)). T_0 ↔ τ_0 = −1, pushed down by a few ulps so
    # that the float32 rounding of m − 1/c cannot lift it above the exact value.
    eps = torch.finfo(z.dtype).eps
    slack = (m.abs() + 1.0 / c) * (4 * eps)  # (R, 1)
    t_eval = m - 1.0 / c - slack
    d = torch.empty_like(z)
    for k in range(dense_steps + 1):
        torch.sub(z, t_eval, out=d).clamp_(min=0.0)  # (R, n): [z − T]_+ = d_x / c
        if k == dense_steps:
            cand = _flat_nonzero(d)  # (N,) flat indices of the candidates, row-major
        step = _dense_newton_step(d, c, alpha)  # Δτ / c
        t_next = t_eval + step
        if k < dense_steps:
            # Newton from the left stays below τ*; the margin covers float32 rounding of the step.
            t_eval = t_next - (step.abs() * 1e-4 + slack)
    del d
    bad = _exact_phase(z, m, alpha, c, cand, t_eval, t_next, out)
    if bad is not None:
        if dense_steps == 0:
            raise RuntimeError("entmax: the candidate set {x > -1} missed the support (a bug)")
        log.warning("entmax: %d rows may have missed a support entry; recomputing", len(bad))
        sub = torch.zeros_like(z[bad])
        _entmax_chunk(z[bad], alpha if isinstance(alpha, float) else alpha[bad], sub, 0)
        out[bad] = sub


def _flat_nonzero(d: Tensor) -> Tensor:
    """Sorted flat indices of the non-zero entries of the contiguous ``d``.

    ``nonzero`` on CPU costs about 1 ns per scanned element once anything is non-zero, so we scan
    the boolean mask eight bytes at a time (as int64 words) and then only the words that hit.
    """
    b = d.bool().view(-1)  # (R n,) cheap: a vectorised cast, unlike d > 0
    if b.numel() % 8 or b.device.type != "cpu":
        return b.nonzero().squeeze(1)
    wi = b.view(torch.int64).nonzero().squeeze(1)  # words holding a candidate
    j = b.view(-1, 8).index_select(0, wi).view(-1).nonzero().squeeze(1)
    return wi.index_select(0, j >> 3).mul_(8).add_(j & 7)


def _dense_newton_step(d: Tensor, c: float | Tensor, alpha: float | Tensor) -> Tensor:
    """Newton step on h for ``d = [z − T]_+ (R, n)``; returns ΔT (R, 1) in z units.

    In x units (``d_x = c d``): ``Δτ = (g − g^(1 − 1/β)) / g₁``, ``g = Σ d_x^β``,
    ``g₁ = Σ d_x^(β − 1)``, and ΔT = Δτ / c.
    """
    if isinstance(alpha, float) and alpha == 1.5:
        s1 = d.sum(dim=-1, keepdim=True)
        nrm = torch.linalg.vector_norm(d, dim=-1, keepdim=True)
        # c = 1/2: g = ‖d‖²/4, g₁ = Σd/2, so ΔT = 2Δτ = (‖d‖² − 2‖d‖) / Σd.
        return ((nrm * nrm - 2.0 * nrm) / s1.clamp_min(1e-30)).where(s1 > 0, 0.0)
    if isinstance(alpha, float) and alpha == 2.0:
        s1 = d.sum(dim=-1, keepdim=True)
        k = torch.sign(d).sum(dim=-1, keepdim=True)  # |{d > 0}|
        return ((s1 - 1.0) / k.clamp_min(1.0)).where(k > 0, 0.0)
    beta = 1.0 / c
    dp = _pow(d, beta - 1.0)  # (R, n) d^(β−1), 0 where d = 0
    g1 = dp.sum(dim=-1, keepdim=True) * c ** (beta - 1.0)
    g = dp.mul_(d).sum(dim=-1, keepdim=True) * c**beta
    step = (g - g.pow(1.0 - 1.0 / beta)) / g1.clamp_min(1e-30) / c
    return step.where(g1 > 0, 0.0)


def _pow(d: Tensor, e: float | Tensor) -> Tensor:
    """``d ** e`` for ``d >= 0`` with ``0 ** e = 0`` (also for e = 0), avoiding slow ``pow``.

    torch's CPU pow is ~20x slower than a multiply for most exponents, and log / sqrt hit slow
    paths on zeros; integer exponents use repeated squaring, others exp(e log d) on d > 0.
    """
    if isinstance(e, float) and e == round(e) and 0 <= e <= 64:
        ei = int(e)
        if ei == 0:
            return torch.sign(d)
        result: Tensor | None = None
        base = d
        while ei:
            if ei & 1:
                result = base.clone() if result is None else result.mul_(base)
            ei >>= 1
            if ei:
                base = base * base
        assert result is not None
        return result
    pos = torch.sign(d)
    tiny = torch.finfo(d.dtype).tiny
    return d.clamp_min(tiny).log_().mul_(e).exp_().mul_(pos)


def _exact_phase(
    z: Tensor,
    m: Tensor,
    alpha: float | Tensor,
    c: float | Tensor,
    cand: Tensor,
    t_floor: Tensor,
    t_start: Tensor,
    out: Tensor,
) -> Tensor | None:
    """Float64 threshold on the candidates ``cand`` (flat indices into ``z (R, n)``).

    Writes the probabilities into ``out`` and returns None, or returns the rows whose τ ended
    below the candidate threshold ``t_floor`` (a support entry may be missing) untouched.
    """
    r_count, n = z.shape
    if n & (n - 1) == 0:
        row = cand >> (n.bit_length() - 1)  # (N,) row of each candidate
    else:
        row = torch.div(cand, n, rounding_mode="floor")
    if isinstance(c, float):
        c64: float | Tensor = c
        c_c: float | Tensor = c
    else:
        c64 = c.view(-1).to(_F64)  # (R,)
        c_c = c64.index_select(0, row)
    m64 = m.view(-1).to(_F64)
    zc = z.view(-1).index_select(0, cand).to(_F64)
    x = (zc - m64.index_select(0, row)) * c_c  # (N,) x, exact
    # Non-candidates have z <= t_floor exactly, hence x <= floor (made a hair larger for safety).
    floor = (t_floor.view(-1).to(_F64) - m64) * c64
    floor = floor - floor.abs() * 1e-12  # (R,)
    tau = torch.maximum((t_start.view(-1).to(_F64) - m64) * c64, floor).clamp_max(0.0)

    def row_sum(v: Tensor) -> Tensor:  # (N,) -> (R,) per-row sums, in float64
        return torch.zeros(r_count, dtype=_F64, device=z.device).scatter_add_(0, row, v)

    if isinstance(alpha, float):
        if alpha in (1.5, 2.0):
            tau = _closed_form(x, row, tau, alpha, row_sum)
        else:
            tau = _newton64(x, row, tau, 1.0 / c64, row_sum)
    else:
        tau = _newton64(x, row, tau, 1.0 / c64, row_sum)
        if bool(((alpha == 1.5) | (alpha == 2.0)).any()):
            tau = _closed_form(x, row, tau, alpha, row_sum)
    bad = tau < floor
    if bool(bad.any()):
        return bad.nonzero().squeeze(1)
    d = (x - tau.index_select(0, row)).clamp_(min=0.0)  # (N,)
    beta = 1.0 / c_c
    if isinstance(beta, float):
        p = d if beta == 1.0 else d * d if beta == 2.0 else _pow(d, beta)
    else:
        p = _pow(d, beta)
    out.view(-1).scatter_(0, cand, p.to(out.dtype))
    return None


def _newton64(
    x: Tensor, row: Tensor, tau: Tensor, beta: float | Tensor, row_sum: Callable[[Tensor], Tensor]
) -> Tensor:
    """Newton on h(τ) = ‖[x − τ]_+‖_β − 1 in float64 over the candidates, to convergence."""
    beta_c = beta if isinstance(beta, float) else beta.index_select(0, row)
    for _ in range(_MAX_EXACT_STEPS):
        d = (x - tau.index_select(0, row)).clamp_(min=0.0)
        dp = _pow(d, beta_c - 1.0)
        g1 = row_sum(dp)
        g = row_sum(dp.mul_(d))
        step = ((g - g.pow(1.0 - 1.0 / beta)) / g1.clamp_min(1e-300)).where(g1 > 0, 0.0)
        tau = tau + step
        if not bool((step.abs() > 1e-13).any()):
            # quadratic convergence: one more step lands on τ to float64 rounding
            d = (x - tau.index_select(0, row)).clamp_(min=0.0)
            dp = _pow(d, beta_c - 1.0)
            g1 = row_sum(dp)
            g = row_sum(dp.mul_(d))
            step = ((g - g.pow(1.0 - 1.0 / beta)) / g1.clamp_min(1e-300)).where(g1 > 0, 0.0)
            return tau + step
    log.warning("entmax: Newton did not converge in %d float64 steps", _MAX_EXACT_STEPS)
    return tau


def _closed_form(
    x: Tensor,
    row: Tensor,
    tau: Tensor,
    alpha: float | Tensor,
    row_sum: Callable[[Tensor], Tensor],
) -> Tensor:
    """Closed-form τ on S = {x > τ}, repeated until S is stable (rows with α ∈ {1.5, 2}).

    α = 1.5: Σ_S (x − τ)² = 1, so τ = mean_S − √(1/|S| − var_S).
    α = 2:   Σ_S (x − τ) = 1,  so τ = (Σ_S x − 1) / |S|.
    """
    x2 = x * x
    for _ in range(_MAX_EXACT_STEPS):
        s = x > tau.index_select(0, row)  # (N,)
        sf = s.to(_F64)
        k = row_sum(sf)
        s1 = row_sum(x * sf)
        s2 = row_sum(sf.mul_(x2))
        kk = k.clamp_min(1.0)
        mean = s1 / kk
        t15 = mean - (1.0 / kk - (s2 / kk - mean * mean)).clamp_min(0.0).sqrt()
        t2 = (s1 - 1.0) / kk
        if isinstance(alpha, float):
            new = t15 if alpha == 1.5 else t2
        else:
            new = torch.where(alpha == 1.5, t15, torch.where(alpha == 2.0, t2, tau))
        new = new.where(k > 0, tau)
        stable = bool(torch.equal(x > new.index_select(0, row), s))
        tau = new
        if stable:
            return tau
    log.warning("entmax: support did not stabilise in %d closed-form passes", _MAX_EXACT_STEPS)
    return tau
