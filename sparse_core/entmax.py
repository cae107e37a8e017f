"""Exact, fast α-entmax (Peters et al. 2019; Correia et al. 2019), forward only.

For scores ``z ∈ ℝⁿ`` and ``α ∈ [1, 2]``::

    entmax_α(z)_i = [(α − 1) z_i − τ]_+ ^ (1 / (α − 1)),   τ such that Σ_i entmax_α(z)_i = 1.

α = 1 is softmax (the limit; computed with ``torch.softmax``), α = 1.5 the paper's setting and α = 2
sparsemax. The map is shift invariant, so we work with ``x = (α − 1)(z − max z) ≤ 0``, whose
threshold lies in ``[−1, −n^(1−α)]``. Let ``β = 1 / (α − 1)`` and ``d_i = [x_i − τ]_+``. For any
``q ≥ 1``, ``H_q(τ) = ‖d‖_q − 1`` is convex and decreasing in τ (an ℓ_q norm of convex non-negative
functions of τ), and ``H_β`` has the root τ*. Newton on ``H_q`` started left of its root never
overshoots, so every iterate is a lower bound and ``{x > τ_k}`` a superset of the support; unlike
Newton on ``f(τ) = Σ d^β − 1`` it is exact when the top scores are equal, and it converges in a few
steps. The step is ``Δτ = (‖d‖_q − 1) ‖d‖_q^(q − 1) / Σ d^(q − 1)``; for α = 1.5 (q = 2) that is
``(‖d‖₂² − ‖d‖₂) / Σ d``. For α > 1.5 we use ``q = 2`` rather than β: since ``‖d‖_β ≥ ‖d‖₂``,
the root of ``H₂`` is a lower bound of τ*, found without any pow and without the crawl of Newton
on the piecewise-linear sparsemax ``f`` (Michelot's iteration from the left).

Algorithm (no sort; all rows at once, in chunks of rows that stay in cache):

1. Dense phase, float32, on whole rows: ``DENSE_STEPS`` Newton steps on ``H_q``, ``q = max(β, 2)``,
   from ``τ₀ = −1`` (where ``f ≥ 0``), each evaluation point pushed down by a margin that covers
   float32 rounding. Two steps shrink the candidate set to about 2 % of a 512-long attention row
   at α = 1.5 (the support is about 1.9 %).
2. Compaction: the candidates ``{x > τ_K}`` (flat indices; ``nonzero`` over the boolean mask read
   as int64 words) are gathered, and ``x`` is recomputed there in float64, exactly.
3. Exact phase, float64, on the candidates only. α = 1.5 and α = 2: the closed form on the support
   ``S = {x > τ}`` (α = 1.5: ``Σ_S (x − τ)² = 1``, so ``τ = mean_S − √(1/|S| − var_S)``; α = 2:
   ``τ = (Σ_S x − 1) / |S|``), repeated until S is stable (about two passes at α = 1.5, four to
   six at α = 2). Other α: Newton on ``H_β`` in float64 until it stops moving (quadratic
   convergence). A row whose τ ends below the compaction threshold (a support entry could have
   been missed; never observed) is recomputed with the always-safe candidate set ``{x > −1}``.
4. Output: zeros, with ``(x_i − τ)^β`` (float64, then cast) scattered onto the support.

Guarantee: the support is ``{i : x_i > τ}`` for the input scores taken as exact numbers, with τ
correct to float64 rounding; for α ∈ {1.5, 2} τ comes from the closed form, so exact ties (e.g.
``z = (2, 0)`` at α = 1.5, whose second entry sits exactly on the threshold) give exact zeros.
Values match the exact map to about 1e-7 relative; values below the smallest normal number of the
result dtype (1.2e-38 in float32; only for α near 1) are flushed to 0. The ``entmax`` package
computes τ in the input precision: on float32 input it can disagree on entries within ~1e-7 of the
threshold (values below ~1e-12), and its values carry errors of a few 1e-6 (float32 cumulative
sums); so the tests compare supports and values with the package run on the same scores in
float64, and against its float32 run allow only such knife-edge differences.

``-inf`` scores are masked (exact zeros); rows that are entirely ``-inf`` give all zeros. NaN or
``+inf`` raise ``ValueError``. float64 input is computed and returned in float64; float16 and
bfloat16 input is computed and returned in float32 (half precision flips support decisions, SPEC
§1). Inference only: no autograd graph is recorded (a local ``torch.no_grad``; nothing global).
Speed and the approaches tried are in docs/benchmarks.md (``bench/bench_entmax.py``).
"""

from __future__ import annotations

import logging

import torch
from torch import Tensor

log = logging.getLogger(__name__)

__all__ = ["entmax", "entmax_reference"]

DENSE_STEPS = 2
"""Newton steps over whole rows before compaction (1 and 3 measured slower; docs/benchmarks.md)."""
CHUNK_ELEMENTS = 1 << 20
"""Rows go in chunks of about this many scores: the dense phase stays in cache and the compact
phase's arrays stay under torch's parallel grain (no thread barrier per small op)."""
_MAX_EXACT_STEPS = 50
_DENSE_EXACT = 4
"""The exact phase runs on whole rows when more than 1/_DENSE_EXACT of the scores are candidates."""
_BAD_SCORES = "scores contain NaN or +inf; only finite values and -inf (masked) are allowed"
_F64 = torch.float64


# ----------------------------------------------------------------------------------------------
# public API


def entmax(
    scores: Tensor, alpha: float | Tensor = 1.5, dim: int = -1, *, out: Tensor | None = None
) -> Tensor:
    """Exact α-entmax of ``scores`` along ``dim`` (formula and algorithm: module docstring).

    Args:
        scores: real scores; ``-inf`` marks masked entries (a fully masked row gives zeros).
        alpha: a float in [1, 2], or a tensor broadcastable to ``scores`` with size 1 along
            ``dim`` (e.g. (1, H, 1, 1) or (H, 1, 1) for per-head α of (B, H, n, n) scores).
            α = 1 is softmax, 1.5 the default, 2 sparsemax.
        dim: the dimension that sums to one.
        out: optional result tensor of the shape of ``scores`` and the result dtype, e.g. one
            layer's slice of a preallocated (B, L, H, n, n) buffer: written in place when it is
            contiguous (saves the copy of a later ``torch.stack``).

    Returns:
        Probabilities of the shape of ``scores``; float64 for float64 input, else float32.
    """
    a = _check_alpha(alpha, scores, dim)
    with torch.no_grad():
        z = _as_compute_dtype(scores)
        if out is not None and (out.shape != z.shape or out.dtype != z.dtype):
            raise ValueError(
                f"out must have the shape {tuple(z.shape)} and dtype {z.dtype} of the result, "
                f"got {tuple(out.shape)} {out.dtype}"
            )
        last = dim in (-1, z.dim() - 1)
        if z.numel() == 0:
            return torch.zeros_like(z) if out is None else out.zero_()
        if isinstance(a, float) and a == 1.0:
            return _softmax(z, dim, out)
        zl = z if last else z.movedim(dim, -1)  # (..., n)
        n = zl.shape[-1]
        rows = zl.reshape(-1, n)  # (R, n); copies only if dim is not the last
        direct = out is not None and last and out.is_contiguous()
        res = out.view(-1, n) if direct else None
        if isinstance(a, float):
            res = _entmax_rows(rows, a, out=res)
        else:
            ar = a.expand(*z.shape)
            a_rows = (ar if last else ar.movedim(dim, -1)).reshape(-1, n)[:, 0]  # (R,)
            res = _entmax_rows(rows, a_rows, out=res)
            soft = a_rows == 1.0
            if bool(soft.any()):
                res[soft] = _softmax(rows[soft], -1)
        if direct:
            return out
        p = res.view(zl.shape) if last else res.view(zl.shape).movedim(-1, dim)
        return p if out is None else out.copy_(p)


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


def _softmax(z: Tensor, dim: int, out: Tensor | None = None) -> Tensor:
    """Softmax that gives zeros, not NaN, on rows that are entirely ``-inf``.

    Such rows are NaN throughout, so the first column finds them without another full pass.
    """
    p = torch.softmax(z, dim=dim) if out is None else torch.softmax(z, dim, out=out)
    if p.shape[dim]:
        nan_rows = p.select(dim, 0).isnan()
        if bool(nan_rows.any()):
            dead = torch.isneginf(z).all(dim=dim, keepdim=True)
            if bool((nan_rows & ~dead.squeeze(dim)).any()):
                raise ValueError(_BAD_SCORES)
            p = p.masked_fill_(dead, 0.0)
    return p


# ----------------------------------------------------------------------------------------------
# the algorithm


def _entmax_rows(
    rows: Tensor,
    alpha: float | Tensor,
    dense_steps: int = DENSE_STEPS,
    chunk_elements: int | None = None,
    out: Tensor | None = None,
) -> Tensor:
    """α-entmax of every row of ``rows (R, n)``; alpha a float or a per-row (R,) float64 tensor.

    ``out``, if given, is a contiguous (R, n) tensor of the dtype of ``rows`` to write into.
    """
    rows = rows.contiguous()
    r_total, n = rows.shape
    out = torch.zeros_like(rows) if out is None else out.zero_()
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
        raise ValueError(_BAD_SCORES)
    m.masked_fill_(torch.isneginf(m), 0.0)  # fully masked rows: all d = 0, no candidates
    if isinstance(alpha, float):
        c: float | Tensor = alpha - 1.0  # x = c (z - m)
        q: float | Tensor = max(1.0 / c, 2.0)  # the norm the dense Newton steps use
    else:
        c = (alpha.where(alpha > 1.0, 2.0) - 1.0).to(z.dtype)[:, None]  # (R, 1); α = 1 rows: caller
        q = (1.0 / c).clamp_min(2.0)
    # Thresholds T live in z units (τ = c (T − m)). T_0 ↔ τ_0 = −1, pushed down by a few ulps so
    # that the float32 rounding of m − 1/c cannot lift it above the exact value.
    eps = torch.finfo(z.dtype).eps
    slack = (m.abs() + 1.0 / c) * (4 * eps)  # (R, 1)
    t_eval = m - 1.0 / c - slack
    d = torch.empty_like(z)
    for k in range(dense_steps + 1):
        torch.sub(z, t_eval, out=d).clamp_(min=0.0)  # (R, n): [z − T]_+ = d_x / c
        if k == dense_steps:
            cand = _flat_nonzero(d)  # (N,) flat indices of the candidates, or None: dense
        step = _dense_newton_step(d, c, q)  # ΔT
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


def _flat_nonzero(d: Tensor) -> Tensor | None:
    """Sorted flat indices of the non-zero entries of the contiguous ``d``, or None when they are
    so many (α near 1) that the exact phase is cheaper on the whole rows.

    ``nonzero`` on CPU costs about 1 ns per scanned element once anything is non-zero, so we scan
    the boolean mask eight bytes at a time (as int64 words) and then only the words that hit.
    """
    b = d.bool().view(-1)  # (R n,) cheap: a vectorised cast, unlike d > 0
    if b.numel() % 8 or b.device.type != "cpu":
        cand = b.nonzero().squeeze(1)
        return None if cand.numel() * _DENSE_EXACT > b.numel() else cand
    wi = b.view(torch.int64).nonzero().squeeze(1)  # words holding a candidate
    j = b.view(-1, 8).index_select(0, wi).view(-1).nonzero().squeeze(1)
    if j.numel() * _DENSE_EXACT > b.numel():
        return None
    return wi.index_select(0, j >> 3).mul_(8).add_(j & 7)


def _dense_newton_step(d: Tensor, c: float | Tensor, q: float | Tensor) -> Tensor:
    """Newton step on ``H(T) = c ‖d‖_q − 1`` for ``d = [z − T]_+ (R, n)``; returns ΔT (R, 1).

    ``c d`` is ``[x − τ]_+`` in x units. With ``q = β`` the root of H is τ*; with ``q = 2 > β``
    (α > 1.5) it is a lower bound of τ*, since ``‖v‖_β >= ‖v‖_2``, reached without any pow (and
    without the crawl of Newton on the piecewise-linear sparsemax f). With ``G = Σ d^q`` and
    ``G₁ = Σ d^(q − 1)``: ``ΔT = (‖d‖_q − 1/c) ‖d‖_q^(q − 1) / G₁``.
    """
    if isinstance(q, float) and q == 2.0:
        g1 = d.sum(dim=-1, keepdim=True)
        nq = torch.linalg.vector_norm(d, dim=-1, keepdim=True)
        return ((nq - 1.0 / c) * nq / g1.clamp_min(1e-30)).where(g1 > 0, 0.0)
    # q > 2: d^q of small d would be subnormal, and subnormal arithmetic is ~100x slower on x86;
    # scale d by a power of two S with (S/c)^q <= 2^100 (d <= 1/c), so only d < ~1e-6 go there.
    # G_S = S^q G, G1_S = S^(q−1) G1, and ΔT = (‖dS‖_q / S − 1/c) ‖dS‖_q^(q−1) / G1_S.
    log2_s = torch.floor(torch.log2(torch.as_tensor(c, dtype=_F64)) + 100.0 / torch.as_tensor(q))
    big = torch.exp2(log2_s)  # S, a float64 scalar or (R, 1)
    ds = d * big.to(d.dtype)
    dp = _pow(ds, q - 1.0)  # (R, n) (dS)^(q−1), 0 where d = 0
    g1 = dp.sum(dim=-1, keepdim=True, dtype=_F64)
    g = dp.mul_(ds).sum(dim=-1, keepdim=True, dtype=_F64)
    nq = g.pow(1.0 / q)
    step = (nq / big - 1.0 / c) * (g / nq) / g1.clamp_min(1e-300)
    return step.where(g1 > 0, 0.0).to(d.dtype)


def _pow(d: Tensor, e: float | Tensor) -> Tensor:
    """``d ** e`` for ``d >= 0`` with ``0 ** e = 0`` (also for e = 0), avoiding slow ``pow``.

    torch's CPU pow is ~20x slower than a multiply for most exponents, and log / sqrt hit slow
    paths on zeros; integer exponents use repeated squaring, others exp(e log d) on d > 0.
    """
    if isinstance(e, float) and abs(e - round(e)) < 1e-9 and 0 <= e <= 64:
        ei = round(e)  # 1/(α − 1) − 1 for α = 1.1 is 8.99999999999999...: use the integer
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


class _Rows:
    """The exact phase's view of the candidates: flat (N,) with row ids, or whole rows (R, n).

    ``spread`` takes a per-row (R,) tensor to one value per element; ``sum`` sums per row.
    """

    def __init__(self, r_count: int, n: int, cand: Tensor | None, device: torch.device) -> None:
        self.r_count, self.cand, self.device = r_count, cand, device
        if cand is None:
            self.row = None
        elif n & (n - 1) == 0:
            self.row = cand >> (n.bit_length() - 1)  # (N,) row of each candidate
        else:
            self.row = torch.div(cand, n, rounding_mode="floor")

    def spread(self, v: Tensor) -> Tensor:
        return v[:, None] if self.row is None else v.index_select(0, self.row)

    def sum(self, v: Tensor) -> Tensor:  # per-row sums in float64, exact order per row
        if self.row is None:
            return v.sum(dim=-1)
        zeros = torch.zeros(self.r_count, dtype=_F64, device=self.device)
        return zeros.scatter_add_(0, self.row, v)

    def gather(self, z: Tensor) -> Tensor:
        return z.to(_F64) if self.cand is None else z.view(-1).index_select(0, self.cand).to(_F64)

    def write(self, out: Tensor, p: Tensor) -> None:
        if self.cand is None:
            out.copy_(p)
        else:
            out.view(-1).scatter_(0, self.cand, p.to(out.dtype))


def _exact_phase(
    z: Tensor,
    m: Tensor,
    alpha: float | Tensor,
    c: float | Tensor,
    cand: Tensor | None,
    t_floor: Tensor,
    t_start: Tensor,
    out: Tensor,
) -> Tensor | None:
    """Float64 threshold on the candidates ``cand`` (flat indices into ``z (R, n)``; None: all).

    Writes the probabilities into ``out`` and returns None, or returns the rows whose τ ended
    below the candidate threshold ``t_floor`` (a support entry may be missing) untouched.
    """
    r_count, n = z.shape
    rows = _Rows(r_count, n, cand, z.device)
    c64 = c if isinstance(c, float) else c.view(-1).to(_F64)  # float or (R,)
    c_el = c64 if isinstance(c64, float) else rows.spread(c64)
    m64 = m.view(-1).to(_F64)
    x = (rows.gather(z) - rows.spread(m64)) * c_el  # (N,) or (R, n): x, exact
    # Non-candidates have z <= t_floor exactly, hence x <= floor (made a hair larger for safety).
    floor = (t_floor.view(-1).to(_F64) - m64) * c64
    floor = floor - floor.abs() * 1e-12  # (R,)
    tau = torch.maximum((t_start.view(-1).to(_F64) - m64) * c64, floor).clamp_max(0.0)
    beta = 1.0 / c64
    if not (isinstance(alpha, float) and alpha in (1.5, 2.0)):
        tau = _newton64(x, rows, tau, beta)
    if (
        isinstance(alpha, float)
        and alpha in (1.5, 2.0)
        or (isinstance(alpha, Tensor) and bool(((alpha == 1.5) | (alpha == 2.0)).any()))
    ):
        tau = _closed_form(x, rows, tau, alpha)
    bad = tau < floor
    if cand is not None and bool(bad.any()):
        return bad.nonzero().squeeze(1)
    d = (x - rows.spread(tau)).clamp_(min=0.0)
    beta_el = 1.0 / c_el
    if isinstance(beta_el, float):
        p = d if beta_el == 1.0 else d * d if beta_el == 2.0 else _pow(d, beta_el)
    else:
        p = _pow(d, beta_el)
    # Values below the output's smallest normal number (1.2e-38 in float32; only for α near 1)
    # are flushed to 0: subnormal probabilities would slow every later matmul ~100x.
    rows.write(out, p.masked_fill_(p < torch.finfo(out.dtype).tiny, 0.0))
    return None


def _newton_step64(x: Tensor, rows: _Rows, tau: Tensor, beta: float | Tensor) -> Tensor:
    """One Newton step on h(τ) = ‖[x − τ]_+‖_β − 1 in float64: Δτ = (g − g^(1−1/β)) / g₁."""
    beta_el = beta if isinstance(beta, float) else rows.spread(beta)
    d = (x - rows.spread(tau)).clamp_(min=0.0)
    dp = _pow(d, beta_el - 1.0)
    g1 = rows.sum(dp)
    g = rows.sum(dp.mul_(d))
    return ((g - g.pow(1.0 - 1.0 / beta)) / g1.clamp_min(1e-300)).where(g1 > 0, 0.0)


def _newton64(x: Tensor, rows: _Rows, tau: Tensor, beta: float | Tensor) -> Tensor:
    """Newton on h in float64 until it stops moving, then one more step (quadratic)."""
    for _ in range(_MAX_EXACT_STEPS):
        step = _newton_step64(x, rows, tau, beta)
        tau = tau + step
        if not bool((step.abs() > 1e-13).any()):
            return tau + _newton_step64(x, rows, tau, beta)
    log.warning("entmax: Newton did not converge in %d float64 steps", _MAX_EXACT_STEPS)
    return tau


def _closed_form(x: Tensor, rows: _Rows, tau: Tensor, alpha: float | Tensor) -> Tensor:
    """Closed-form τ on S = {x > τ}, repeated until S is stable (rows with α ∈ {1.5, 2}).

    α = 1.5: Σ_S (x − τ)² = 1, so τ = mean_S − √(1/|S| − var_S).
    α = 2:   Σ_S (x − τ) = 1,  so τ = (Σ_S x − 1) / |S|.
    """
    x2 = x * x
    s = x > rows.spread(tau)  # S
    for _ in range(_MAX_EXACT_STEPS):
        k = rows.sum(s.to(_F64))
        s1 = rows.sum(x.where(s, 0.0))  # where, not a product: masked x are -inf on whole rows
        s2 = rows.sum(x2.where(s, 0.0))
        kk = k.clamp_min(1.0)
        mean = s1 / kk
        if isinstance(alpha, float):
            if alpha == 1.5:
                new = mean - (1.0 / kk - (s2 / kk - mean * mean)).clamp_min(0.0).sqrt()
            else:
                new = (s1 - 1.0) / kk
        else:
            t15 = mean - (1.0 / kk - (s2 / kk - mean * mean)).clamp_min(0.0).sqrt()
            new = torch.where(alpha == 1.5, t15, torch.where(alpha == 2.0, (s1 - 1.0) / kk, tau))
        tau = new.where(k > 0, tau)
        s_new = x > rows.spread(tau)
        if torch.equal(s_new, s):
            return tau
        s = s_new
    log.warning("entmax: support did not stabilise in %d closed-form passes", _MAX_EXACT_STEPS)
    return tau
