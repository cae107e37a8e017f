"""Exact, fast α-entmax (Peters et al. 2019; Correia et al. 2019), and its gradient.

For scores ``z ∈ ℝⁿ`` and ``α ∈ [1, 2]``::

    entmax_α(z)_i = [(α − 1) z_i − τ]_+ ^ (1 / (α − 1)),   τ such that Σ_i entmax_α(z)_i = 1.

α = 1 is softmax (the limit; computed with ``torch.softmax``), α = 1.5 the paper's setting and α = 2
sparsemax. α just above 1 (``α − 1 < NEAR_ONE``) takes its own float64 path in score units
(:func:`_near_one_rows`), which tends continuously to softmax as α → 1. The map is shift
invariant, so we work with ``x = (α − 1)(z − max z) ≤ 0``, whose
threshold lies in ``[−1, −n^(1−α)]`` (n live scores). Let ``c = α − 1``, ``β = 1 / c``,
``y_i = [x_i − τ]_+``, ``G(τ) = Σ y^β`` and ``G_j = Σ y^(β−j)``. For any ``q ≥ 1``,
``H_q(τ) = ‖y‖_q − 1`` is convex and decreasing in τ (an ℓ_q norm of convex non-negative functions
of τ), and ``H_β`` has the root τ*. Newton on a convex decreasing H never passes its root, from
either side: from the left every iterate is a lower bound and ``{x > τ_k}`` a superset of the
support; unlike Newton on ``G − 1`` it is exact when the top scores are equal and converges in a
few steps. ``‖y‖_β`` decreases in β, so for ``q ≥ β`` the root of ``H_q`` is a lower bound of τ*.
``G`` only grows when scores are added, so the root on any subset of a row's scores is a lower
bound of the row's root too: rows of 128 scores or more take the subset of the maxima of 8
strided groups (``z_j, z_{j+w}, …, z_{j+7w}``, ``w = n/8``; one read of the scores), whose
threshold (``_SUBSET_STEPS`` or ``DENSE_STEPS`` float64 Newton steps on ``H_q`` over the
``n/8`` maxima from ``τ = −1``, less 1e-9) on real attention at n = 512 leaves ``{x > τ}`` within
a few percent of the support (1.8 % of the scores against 1.77 % at α = 1.5, 17.2 % against
16.4 % at α = 1.25): the group maxima hold a row's top scores unless several share a group.

Two algorithms, no sort, all rows at once in chunks of ``CHUNK_ELEMENTS`` scores (the bounded
compact path: ``BOUNDED_CHUNK_ELEMENTS``; on a CUDA device with triton installed, float32 rows
with a scalar α in [1.03, 2] of up to 32,768 scores take one Triton kernel instead,
:mod:`sparse_core.entmax.triton`: the same map and guarantee, the compact path's float64 exact
phase on whole rows held in registers; ``SPARSESCOPE_NO_TRITON=1`` keeps the torch path; on
the CPU, float32/float64 rows with a scalar α in [1.03, 2] take one compiled numba kernel,
:mod:`sparse_core.entmax.cpu`: the compact path below from the group maxima's bound, a row at a
time while it is in cache, two reads and one write per row; ``SPARSESCOPE_NO_NUMBA=1`` keeps
the torch paths, which serve per-row α, α below 1.03 and CUDA without triton):

**Dense path** (float32 scores, a scalar α in [``DENSE_MIN_ALPHA``, ``DENSE_MAX_ALPHA``]: α near 1,
where most scores are in the support and compaction buys nothing).

1. ``x = c (z − max)`` once per chunk (float32; the max entry is exactly 0).
2. Halley steps on ``H_β`` from the group maxima's bound (``τ = −1`` below 128 scores) over whole
   rows, float32 elementwise, float64 per row:
   ``H' = −G^(1/β) G₁/G``, ``H'' = (β − 1) G^(1/β) (G₂/G − (G₁/G)²)``, step
   ``s / (1 + s H''/(2H'))`` with Newton's ``s = −H/H'``. The three moments come from one power
   of y: repeated squaring for an integer β (α = 1.1: y⁸, then ×y, ×y), exp((β − 2) log y)
   otherwise. Safeguards: Newton's step is the lower limit (it never passes the root), and
   ``|G'| = β G₁ ≥ β G`` (every ``y ≤ 1``) gives ``τ* − τ ≤ (G − 1)/β`` when ``G ≥ 1``, the upper
   limit. A row stops once its step is below 2e-3 (the next error would be ~step³, under float32
   resolution): from the bound, one step for most rows (from −1: two at α = 1.1, three at 1.25).
   Whole-row steps end when at most 5 % of the rows still move; those continue on their own, so
   a row's result does not depend on the rows batched with it (tests/app/test_lone.py).
3. Output pass: ``p = y^β`` with y thresholded at ``δ = tiny^(1/β)`` (values below float32's
   smallest normal number are flushed to 0, exactly as below), and ``G = Σ p``.
4. Certificate. G is evaluated in float32 to a relative error ``ε_G = (2β + 48) eps₃₂`` (the
   rounding of x and y, amplified by β, the powers, the sum), so, with a factor 2 to spare, the
   bound above and its mirror ``τ − τ* ≤ (1 − G)/(β G)`` (convexity, when ``G < 1``) give
   ``|τ* − τ| ≤ B``. A row whose scores all lie farther than ``B + 4 eps₃₂`` (x's own rounding)
   from τ and from the flush threshold ``τ + δ`` has exactly the support and flush decisions of
   the exact threshold. A row that fails this (0.05-0.3 % of the rows of real attention), or
   whose ``|G − 1|`` exceeds ``max(1e-6, β eps₃₂)`` after its extra steps, is recomputed by the
   float64 exact phase below on its whole row.

**Compact path** (α ≥ 1.5 and α < ``DENSE_MIN_ALPHA``, float64 scores, many distinct per-row α).

1. Rows of 128 scores or more: the group maxima's bound (above; ``DENSE_STEPS`` steps), turned
   into a float32 threshold T in score units rounded down, so that every score above the
   float64 bound is above T; in chunks of ``BOUNDED_CHUNK_ELEMENTS`` (no (R, n) temporaries).
   Shorter rows: ``DENSE_STEPS`` Newton steps on ``H_q``, ``q = max(2, ⌈β⌉)`` (no exp/log:
   ``‖y‖₂`` or an integer power), float32 on whole rows from ``τ₀ = −1``, each evaluation point
   pushed down by a margin that covers float32 rounding.
2. Compaction: the candidates ``{z > T}`` (flat indices; ``nonzero`` over the boolean mask read
   as int64 words) are gathered, and ``x`` is recomputed there in float64, exactly.
3. Exact phase, float64, on the candidates only (on whole rows when more than a quarter are
   candidates). α = 1.5 and α = 2: the closed form on the support ``S = {x > τ}`` (α = 1.5:
   ``Σ_S (x − τ)² = 1``, so ``τ = mean_S − √(1/|S| − var_S)``; α = 2: ``τ = (Σ_S x − 1)/|S|``),
   repeated until S is stable (two passes at α = 1.5, about five at α = 2). Other α: Newton on
   ``H_β`` until every step is below 1e-6, then one more (quadratic convergence). A row whose τ
   ends below the compaction threshold (a support entry could have been missed; never observed)
   is recomputed with the always-safe candidate set ``{x > −1}``.
4. Output: zeros, with ``(x_i − τ)^β`` (float64, then cast) scattered onto the support.

Guarantee: the support is ``{i : x_i > τ*}`` for the input scores taken as exact numbers, with τ*
correct to float64 rounding (the dense path certifies it, or recomputes the row); for α ∈ {1.5, 2}
τ comes from the closed form, so exact ties (e.g. ``z = (2, 0)`` at α = 1.5, whose second entry
sits exactly on the threshold) give exact zeros. Values below the smallest normal number of the
result dtype (1.2e-38 in float32; only for α near 1) are flushed to 0: subnormal probabilities
would slow every later matmul ~100x. Values: the compact path matches the exact map to about
1e-7 relative; the dense path carries float32 rounding of ``x − τ`` amplified by the exponent, at
most about ``β · 1.2e-7`` absolute (measured: a third of that; 5e-7 at α = 1.1), with τ within
``max(1e-6, β eps₃₂)`` of τ*. The ``entmax`` package computes τ in the input precision: on float32
input it can disagree on entries within ~1e-7 of the threshold (values below ~1e-12), and its
values carry errors of a few 1e-6 (float32 cumulative sums); so the tests compare supports and
values with the package run on the same scores in float64, and against its float32 run allow
only such knife-edge differences.

A per-row α (e.g. per head) runs as one scalar-α call per distinct value (a slice of the rows when
they are contiguous, as for one head of (1, H, n, n) scores); more than ``_MAX_GROUPS`` distinct
values take the compact path with a per-row α. ``-inf`` scores are masked (exact zeros); rows that
are entirely ``-inf`` give all zeros. NaN or ``+inf`` raise ``ValueError``. float64 input is
computed and returned in float64; float16 and bfloat16 input is computed and returned in float32
(half precision flips support decisions, definitions §1). Gradients: when autograd is on and the
scores (or a tensor α) require grad, the same forward runs inside a ``torch.autograd.Function``
whose backward is the closed form of definitions §7 w.r.t. the scores and α
(:mod:`sparse_core.entmax.grad`); otherwise (inference, ``torch.inference_mode``) no graph is
recorded and the call costs what it did before (a local ``torch.no_grad``; nothing global). Only
torch ops, device-generic (CUDA included): the host waits on the device once per step and chunk
(convergence checks), not per element.
Speed, and the approaches tried, are in docs/benchmarks.md (``bench/bench_entmax.py``).
"""

from __future__ import annotations

import logging
import math
import threading

import torch
import torch.nn.functional as F
from torch import Tensor

from . import cpu as _cpu
from . import fast_paths  # noqa: F401  (its switches apply before numba is imported)
from . import triton as _triton
from .grad import entmax_with_grad

log = logging.getLogger(__name__)

__all__ = ["entmax"]

DENSE_MAX_ALPHA = 1.499
"""Float32 scores with a scalar α in [DENSE_MIN_ALPHA, DENSE_MAX_ALPHA] take the dense path;
α >= 1.5, float64 scores and many distinct per-row α take the compact path."""
DENSE_MIN_ALPHA = 1.03
"""Below it (β > 33) the dense path's float32 values, whose rounding grows with β, would be off
by more than ~4e-6; those α take the compact path (float64 values)."""
DENSE_STEPS = 2
"""Compact path: Newton steps over whole rows before compaction (docs/benchmarks.md)."""
CHUNK_ELEMENTS = 1 << 20
"""Rows go in chunks of about this many scores, so that a chunk's few buffers stay in the
last-level cache (2^19 and 2^21 measured no better, 2^22 about 2x slower; docs/benchmarks.md)."""
CUDA_CHUNK_ELEMENTS = 1 << 24
"""The same on a GPU, which has no such cache and pays a host wait per chunk and step instead:
a (12, 512, 512) layer is one chunk (measured on an H100: 2^20 cost ~6 ms per layer at n = 512,
mostly waits; docs/benchmarks.md, "GPU"). The chunk's buffers take about 200 MB there."""
_GROUPS = 8
"""Scores of a row are split into this many strided groups whose maxima bound its threshold
from below (:func:`_subset_tau`)."""
_BOUND_MIN_N = 128
"""Rows from this length take their candidates from the group maxima (:func:`_bounded_chunk`;
shorter rows from whole-row Newton steps, which cost little there)."""
_SUBSET_STEPS = 3
"""Dense path: Newton steps on the group maxima for its starting τ (with an integer β, the
subset's own threshold to ~1e-9 after three)."""
BOUNDED_CHUNK_ELEMENTS = 1 << 22
"""The compact path from the group maxima (:func:`_bounded_chunk`) reads every score once
and makes no (R, n) temporaries, so it takes larger chunks (a (12, 512, 512) layer in one):
a third of the calls of 2^20, each a few hundred small torch ops."""
NEAR_ONE = 1e-3
"""α with ``0 < α − 1 < NEAR_ONE`` take the near-softmax path (:func:`_near_one_rows`): in x units
the threshold τ sits within ``(α − 1) log n`` of −1 and ``(x − τ)^(1/(α−1))`` would amplify the
float64 rounding of ``x − τ`` by ``1/(α − 1)`` (and ``q = ⌈β⌉`` powers underflow); there the
threshold is solved in score units and the powers taken through ``log1p``, exact for every
α > 1 and continuous into softmax as α → 1."""
_NEAR_STEPS = 60
_MAX_GROUPS = 16
"""A per-row α with at most this many distinct values runs as one scalar-α call per value."""
_MAX_EXACT_STEPS = 50
_DENSE_EXACT = 4
"""The exact phase runs on whole rows when more than 1/_DENSE_EXACT of the scores are candidates."""
_BAD_SCORES = "scores contain NaN or +inf; only finite values and -inf (masked) are allowed"
_F64 = torch.float64
_EPS32 = torch.finfo(torch.float32).eps
_TINY32 = torch.finfo(torch.float32).tiny


# ----------------------------------------------------------------------------------------------
# public API


def entmax(
    scores: Tensor,
    alpha: float | Tensor = 1.5,
    dim: int = -1,
    *,
    out: Tensor | None = None,
    copy: Tensor | None = None,
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
            contiguous (saves the copy of a later ``torch.stack``). It may be ``scores`` itself
            (float32 or float64 scores): the result then overwrites them.
        copy: optional second tensor of that shape and dtype that receives the result too. The
            CPU kernel writes each row there by streaming stores as it finishes it (they take
            no cache lines: for a recording that is not read back soon, while ``out`` stays in
            cache for what reads the result next); elsewhere it is copied at the end.

    Returns:
        Probabilities of the shape of ``scores``; float64 for float64 input, else float32.
    """
    a = _check_alpha(alpha, scores, dim)
    if torch.is_grad_enabled() and (
        scores.requires_grad or (isinstance(alpha, Tensor) and alpha.requires_grad)
    ):
        if out is not None or copy is not None:
            raise ValueError("out= and copy= are not supported when a gradient is required")
        return entmax_with_grad(scores, alpha if isinstance(alpha, Tensor) else a, dim, entmax)
    with torch.no_grad():
        z = _as_compute_dtype(scores)
        for name, t in (("out", out), ("copy", copy)):
            if t is not None and (t.shape != z.shape or t.dtype != z.dtype):
                raise ValueError(
                    f"{name} must have the shape {tuple(z.shape)} and dtype {z.dtype} of the "
                    f"result, got {tuple(t.shape)} {t.dtype}"
                )
        p, streamed = _entmax_into(z, a, dim, out, copy)
        if copy is not None and not streamed:
            copy.copy_(p)
        return p


def _entmax_into(
    z: Tensor, a: float | Tensor, dim: int, out: Tensor | None, copy: Tensor | None
) -> tuple[Tensor, bool]:
    """:func:`entmax` of checked scores (the result is ``out`` when given), and whether the CPU
    kernel also streamed it into ``copy``."""
    last = dim in (-1, z.dim() - 1)
    if z.numel() == 0:
        return (torch.zeros_like(z) if out is None else out.zero_()), False
    if out is not None and _shares_memory(out, z) and not _kernel_in_place(z, a, last, out):
        p, streamed = _entmax_into(z, a, dim, None, copy)  # only the CPU kernel works in place
        return out.copy_(p), streamed
    if isinstance(a, float) and a == 1.0:
        return _softmax(z, dim, out), False
    zl = z if last else z.movedim(dim, -1)  # (..., n)
    n = zl.shape[-1]
    rows = zl.reshape(-1, n)  # (R, n); copies only if dim is not the last
    direct = out is not None and last and out.is_contiguous()
    res = out.view(-1, n) if direct else None
    stream = copy.view(-1, n) if copy is not None and last and copy.is_contiguous() else None
    streamed = False
    if isinstance(a, float):
        res, streamed = _entmax_rows_streamed(rows, a, res, stream)
    else:
        ar = a.expand(*z.shape)
        a_rows = (ar if last else ar.movedim(dim, -1)).reshape(-1, n)[:, 0]  # (R,)
        res = _entmax_per_row(rows, a_rows, out=res)
    if direct:
        return out, streamed
    p = res.view(zl.shape) if last else res.view(zl.shape).movedim(-1, dim)
    return (p if out is None else out.copy_(p)), streamed


def _shares_memory(a: Tensor, b: Tensor) -> bool:
    """Whether two tensors view one storage (conservative: any views of it)."""
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def _kernel_in_place(z: Tensor, a: float | Tensor, last: bool, out: Tensor) -> bool:
    """Whether ``out`` is exactly ``z`` and the CPU kernel takes its rows: the one path that
    reads each row whole before it writes it (the torch paths zero ``out`` first)."""
    return (
        isinstance(a, float)
        and a - 1.0 >= NEAR_ONE
        and last
        and out.data_ptr() == z.data_ptr()
        and out.is_contiguous()
        and z.is_contiguous()
        and not _use_triton(z, a)
        and _cpu.available(z.view(-1, z.shape[-1]), a)
    )


def _entmax_rows_streamed(
    rows: Tensor, alpha: float, out: Tensor | None, copy: Tensor | None
) -> tuple[Tensor, bool]:
    """:func:`_entmax_rows` of a scalar α; with ``copy`` (R, n), the CPU kernel streams each
    row there too when it takes these rows. Returns the result and whether it did."""
    if (
        copy is None
        or alpha - 1.0 < NEAR_ONE
        or _use_triton(rows, alpha)
        or not _cpu.available(rows, alpha)
    ):
        return _entmax_rows(rows, alpha, out=out), False
    rows = rows.contiguous()
    res = torch.empty_like(rows) if out is None else out
    redo = lambda z, a, o: _compact_chunk(z, a, o, 0)  # noqa: E731 (as _entmax_rows')
    return _cpu.entmax_rows(rows, alpha, res, redo, copy), True


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
        return _check_alpha(float(alpha.detach().reshape(())), scores, dim)
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


def _entmax_per_row(rows: Tensor, a_rows: Tensor, out: Tensor | None = None) -> Tensor:
    """α-entmax of ``rows (R, n)`` with a per-row α ``a_rows (R,)`` (float64, not all equal).

    Per-head α has a few distinct values: each runs as one scalar-α call on its rows (a slice
    when they are contiguous, as for one head of (1, H, n, n) scores). Many distinct values take
    the compact path with a per-row α; rows with α = 1 use softmax there.
    """
    rows = rows.contiguous()
    out = torch.zeros_like(rows) if out is None else out.zero_()
    values = torch.unique(a_rows)
    if values.numel() > _MAX_GROUPS:
        soft = a_rows == 1.0
        near = (a_rows > 1.0) & (a_rows - 1.0 < NEAR_ONE)
        if not bool(near.any()):
            _entmax_rows(rows, a_rows, out=out)
        elif not bool(near.all()):  # α just above 1 never reaches the compact path
            idx = (~near).nonzero().squeeze(1)
            out.index_copy_(0, idx, _entmax_rows(rows.index_select(0, idx), a_rows[idx]))
        if bool(near.any()):
            idx = near.nonzero().squeeze(1)
            sub = torch.empty_like(rows.index_select(0, idx))
            c = (a_rows[idx] - 1.0).view(-1, 1)
            out.index_copy_(0, idx, _near_one_rows(rows.index_select(0, idx), c, sub))
        if bool(soft.any()):
            out[soft] = _softmax(rows[soft], -1)
        return out
    for v in values.tolist():
        idx = (a_rows == v).nonzero().squeeze(1)
        lo, hi = int(idx[0]), int(idx[-1]) + 1
        if hi - lo == idx.numel():  # contiguous rows: work on the views
            _entmax_rows(rows[lo:hi], v, out=out[lo:hi])
        else:
            out.index_copy_(0, idx, _entmax_rows(rows.index_select(0, idx), v))
    return out


def _entmax_rows(
    rows: Tensor,
    alpha: float | Tensor,
    dense_steps: int = DENSE_STEPS,
    chunk_elements: int | None = None,
    out: Tensor | None = None,
    path: str | None = None,
) -> Tensor:
    """α-entmax of every row of ``rows (R, n)``; alpha a float or a per-row (R,) float64 tensor.

    ``out``, if given, is a contiguous (R, n) tensor of the dtype of ``rows`` to write into.
    ``path`` forces "dense" or "compact" (tests; the default picks by α and dtype).
    """
    rows = rows.contiguous()
    r_total, n = rows.shape
    if isinstance(alpha, float) and alpha == 1.0:
        return _softmax(rows, -1, out)
    if r_total == 0 or n == 0:
        return torch.zeros_like(rows) if out is None else out.zero_()
    if isinstance(alpha, float) and alpha - 1.0 < NEAR_ONE:  # α just above 1: near softmax
        return _near_one_rows(rows, alpha - 1.0, torch.empty_like(rows) if out is None else out)
    # one exact kernel: Triton on CUDA (entmax_triton), numba on the CPU (entmax_cpu); rows
    # they leave unsettled are redone by the compact path from {x > −1}
    kernel = None
    if path is None:
        kernel = (
            _triton if _use_triton(rows, alpha) else _cpu if _cpu.available(rows, alpha) else None
        )
    if kernel is not None:
        res = torch.empty_like(rows) if out is None else out
        return kernel.entmax_rows(rows, alpha, res, lambda z, a, o: _compact_chunk(z, a, o, 0))
    if path is None:
        dense = (
            isinstance(alpha, float)
            and rows.dtype == torch.float32
            and DENSE_MIN_ALPHA <= alpha <= DENSE_MAX_ALPHA
        )
    else:
        dense = path == "dense"
    default = CUDA_CHUNK_ELEMENTS if rows.device.type == "cuda" else CHUNK_ELEMENTS
    chunk = max(1, (chunk_elements or default) // n)
    if dense:  # writes every entry
        assert isinstance(alpha, float)
        return _dense_rows(rows, alpha, torch.empty_like(rows) if out is None else out, chunk)
    out = torch.zeros_like(rows) if out is None else out.zero_()
    if chunk_elements is None and n >= _BOUND_MIN_N and dense_steps > 0:
        # the bounded compact path makes no (R, n) temporaries: larger chunks, fewer calls
        chunk = max(chunk, BOUNDED_CHUNK_ELEMENTS // n)
    for r0 in range(0, r_total, chunk):
        a = alpha if isinstance(alpha, float) else alpha[r0 : r0 + chunk]
        _compact_chunk(rows[r0 : r0 + chunk], a, out[r0 : r0 + chunk], dense_steps)
    return out


def _near_one_rows(rows: Tensor, c: float | Tensor, out: Tensor) -> Tensor:
    """α-entmax of ``rows (R, n)`` into ``out`` for α just above 1 (``c = α − 1`` in
    (0, ``NEAR_ONE``), a float or a per-row (R, 1) float64 tensor): float64 on whole rows.

    With ``u = z − max z`` and the threshold written ``τ = −1 + c w`` (x units), the map is
    ``p_i = [1 + c (u_i − w)]_+^(1/c) = exp(log1p(c (u_i − w)) / c)``, and w the root of
    ``H(w) = ‖[1 + c (u − w)]_+‖_β − 1``, convex and decreasing (the module docstring's ``H_β``
    in these units). Newton from ``w = 0`` (``H(0) ≥ 0``: the top entry alone gives 1) rises to
    the root and never passes it, so every iterate has ``u − w ≤ 0`` (no overflow). With
    ``G = Σ p`` and ``G₁ = Σ p / (1 + c (u − w))``, the step is
    ``expm1(c log G) / c · G^(1 − c) / G₁``: at c → 0 it is ``log G``, Newton on softmax's
    ``log Σ exp(u − w)``, exact in one step, so two or three steps reach float64 rounding.
    Nothing here divides by c or forms ``1 + c u`` before the ``log1p``: the values carry float64
    rounding (relative ~1e-15 times the few operations), with no ``1/(α − 1)`` amplification,
    and tend to softmax's ``exp(u − logsumexp u)`` as c → 0; the difference from softmax is
    O(c) (about ``c · u² / 2`` relative, e.g. 1e-7 at c = 1e-9 for scores 10 apart), so
    softmax itself would not do. The support is every score with ``c (u_i − w) > −1`` (for
    ``c < NEAR_ONE`` only scores more than 1000 below the maximum leave it, whose values would be
    below 1e-400 anyway); values below the result dtype's smallest normal number are flushed to
    0 as on the other paths. Rows in chunks of ``CHUNK_ELEMENTS`` scores.
    """
    r_total, n = rows.shape
    tiny = torch.finfo(out.dtype).tiny
    chunk = max(1, CHUNK_ELEMENTS // n)
    for r0 in range(0, r_total, chunk):
        z = rows[r0 : r0 + chunk]
        cc = c if isinstance(c, float) else c[r0 : r0 + chunk].to(_F64)
        m, dead = _row_max(z)
        u = z.to(_F64) - m.to(_F64)  # <= 0, -inf where masked
        w = torch.zeros_like(m, dtype=_F64)

        def logs(w: Tensor, u: Tensor = u, cc: float | Tensor = cc) -> tuple[Tensor, Tensor]:
            t = ((u - w) * cc).clamp_(min=-1.0)  # c (u − w) in [−1, 0] from the left of the root
            return t, torch.log1p(t)  # log1p(−1) = −inf: off the support, p = 0

        for _ in range(_NEAR_STEPS):
            t, lt = logs(w)
            p = (lt / cc).exp_()  # p_i
            g = p.sum(dim=-1, keepdim=True)
            g1 = (lt * ((1.0 - cc) / cc)).exp_().sum(dim=-1, keepdim=True)  # Σ p / (1 + t)
            lg = g.clamp_min(1e-300).log()
            step = torch.expm1(lg * cc) / cc * (lg * (1.0 - cc)).exp() / g1.clamp_min(1e-300)
            step = step.where(g1 > 0, 0.0).masked_fill_(dead, 0.0)
            w = w + step
            if not bool((step.abs() > 1e-13 * (1.0 + w.abs())).any()):
                break
        else:
            log.warning("entmax: Newton did not converge in %d near-softmax steps", _NEAR_STEPS)
        _, lt = logs(w)
        p = (lt / cc).exp_().masked_fill_(dead, 0.0)
        out[r0 : r0 + chunk] = p.masked_fill_(p < tiny, 0.0)
    return out


def _maxima(z: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Row maxima (R, 1) as :func:`_row_max` gives them, fully masked rows (R, 1), and the
    maxima of ``_GROUPS`` strided groups (R, w), ``w = n // _GROUPS``: entry j is the largest of
    ``z[:, j], z[:, j + w], …, z[:, j + (_GROUPS − 1) w]`` (the last ``n mod _GROUPS`` scores
    are in no group). One pass over the scores, like ``amax``; ``z`` contiguous."""
    r, n = z.shape
    w = n // _GROUPS
    sub = z.as_strided((r, _GROUPS, w), (n, w, 1)).amax(1)  # (R, w)
    m = sub.amax(dim=-1, keepdim=True)
    if n > w * _GROUPS:
        m = torch.maximum(m, z[:, w * _GROUPS :].amax(dim=-1, keepdim=True))
    if bool((torch.isnan(m) | torch.isposinf(m)).any()):
        raise ValueError(_BAD_SCORES)
    dead = torch.isneginf(m)
    return m.masked_fill_(dead, 0.0), dead, sub


def _subset_tau(sub: Tensor, m: Tensor, c: float | Tensor, q: float | Tensor, steps: int) -> Tensor:
    """A lower bound (R, 1), float64, of each row's threshold τ* (x units), from a subset of
    its scores (``sub`` (R, w), e.g. the group maxima of :func:`_maxima`; m the row maxima).

    ``G(τ) = Σ [x_i − τ]_+^β`` only grows when scores are added, so the root of ``H_q`` on a
    subset is at most the root on the whole row, which for ``q >= β`` is at most τ* (module
    docstring). ``steps`` Newton steps on the subset's ``H_q`` from ``τ = −1`` (each iterate
    below that root: H_q is convex and decreasing), less a margin of 1e-9 for float64
    rounding. The group maxima hold a row's top scores unless several share a group, so the
    bound is tight: on real attention at n = 512, two steps leave ``{x > τ}`` within a few
    percent of the support (docs/benchmarks.md)."""
    c64 = c if isinstance(c, float) else c.to(_F64)
    x = sub.to(_F64).sub_(m).mul_(c64)  # (R, w) <= 0; -inf where masked
    tau = torch.full_like(m, -1.0, dtype=_F64)
    d = torch.empty_like(x)
    for _ in range(steps):
        torch.sub(x, tau, out=d).clamp_(min=0.0)
        if isinstance(q, float) and q == 2.0:
            g1 = d.sum(dim=-1, keepdim=True)
            nq = torch.linalg.vector_norm(d, dim=-1, keepdim=True)
            step = (nq - 1.0) * nq / g1.clamp_min(1e-300)
        else:
            q64 = q if isinstance(q, float) else q.to(_F64)
            dp = _pow(d, q64 - 1.0)  # d^(q − 1)
            g1 = dp.sum(dim=-1, keepdim=True)
            g = dp.mul_(d).sum(dim=-1, keepdim=True)
            nq = g.pow(1.0 / q64)
            step = (nq - 1.0) * (g / nq.clamp_min(1e-300)) / g1.clamp_min(1e-300)
        tau = tau + step.where(g1 > 0, 0.0).nan_to_num_(0.0)
    return tau - 1e-9 * (1.0 + tau.abs())


def _use_triton(rows: Tensor, alpha: float | Tensor) -> bool:
    """Whether ``_entmax_rows`` hands ``rows`` to the Triton kernel: float32 on a CUDA device with
    triton installed, a scalar α the kernel takes, rows it holds in registers."""
    return (
        isinstance(alpha, float)
        and _triton.MIN_ALPHA <= alpha <= 2.0
        and rows.shape[-1] <= _triton.MAX_N
        and _triton.available(rows)
    )


def _row_max(z: Tensor) -> tuple[Tensor, Tensor]:
    """Row maxima (R, 1) with fully masked rows set to 0, and those rows (R, 1) bool."""
    m = z.amax(dim=-1, keepdim=True)
    if bool((torch.isnan(m) | torch.isposinf(m)).any()):
        raise ValueError(_BAD_SCORES)
    dead = torch.isneginf(m)
    return m.masked_fill_(dead, 0.0), dead


# ----------------------------------------------------------------------------------------------
# the compact path


def _compact_chunk(z: Tensor, alpha: float | Tensor, out: Tensor, dense_steps: int) -> None:
    """Write α-entmax of ``z (R, n)`` into ``out`` (zeros on entry) by the compact path."""
    # q >= β, an integer (no pow) when β > 2: the root of ‖d‖_q = 1 is a lower bound of τ*.
    if isinstance(alpha, float):
        c: float | Tensor = alpha - 1.0  # x = c (z - m)
        q: float | Tensor = max(float(math.ceil(1.0 / c - 1e-9)), 2.0)
    else:
        c = (alpha.where(alpha > 1.0, 2.0) - 1.0).to(z.dtype)[:, None]  # (R, 1); α = 1 rows: caller
        q = torch.ceil(1.0 / c - 1e-6).clamp_min(2.0)
    if dense_steps > 0 and z.shape[1] >= _BOUND_MIN_N:
        _bounded_chunk(z, alpha, out, dense_steps, c, q)
        return
    m, _ = _row_max(z)  # fully masked rows: m = 0, all d = 0, no candidates
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
        _compact_chunk(z[bad], alpha if isinstance(alpha, float) else alpha[bad], sub, 0)
        out[bad] = sub


def _bounded_chunk(
    z: Tensor,
    alpha: float | Tensor,
    out: Tensor,
    steps: int,
    c: float | Tensor,
    q: float | Tensor,
) -> None:
    """The compact path with its candidates from the group maxima (n >= ``_BOUND_MIN_N``): one
    pass for the maxima (:func:`_maxima`), ``steps`` Newton steps on the (R, n / 8) maxima
    only (:func:`_subset_tau`), one pass for the candidates ``{z > T}``; then the exact phase
    as below. Rows whose τ ends below T (never observed: T is a certified lower bound) are
    redone from ``{x > −1}``."""
    m, _, sub = _maxima(z)
    tau = _subset_tau(sub, m, c, q, steps)  # (R, 1) float64, x units
    c64 = c if isinstance(c, float) else c.to(_F64)
    t64 = m.to(_F64) + tau / c64  # z units
    t = t64.to(z.dtype)
    if z.dtype != _F64:  # rounded down: every z above the float64 bound is above t
        t = torch.where(t.to(_F64) > t64, torch.nextafter(t, t.new_tensor(-math.inf)), t)
    cand = _flat_nonzero(z, t)  # None: most scores are candidates, the exact phase on rows
    bad = _exact_phase(z, m, alpha, c, cand, t, t, out)
    if bad is not None:
        log.warning("entmax: %d rows may have missed a support entry; recomputing", len(bad))
        sub_out = torch.zeros_like(z[bad])
        _compact_chunk(z[bad], alpha if isinstance(alpha, float) else alpha[bad], sub_out, 0)
        out[bad] = sub_out


def _flat_nonzero(d: Tensor, t: Tensor | None = None) -> Tensor | None:
    """Sorted flat indices of the non-zero entries of the contiguous ``d`` (with ``t`` (R, 1):
    of its entries above ``t``), or None when they are so many (α near 1) that the exact phase
    is cheaper on the whole rows.

    ``nonzero`` on CPU costs about 1 ns per scanned element once anything is non-zero, so we scan
    the boolean mask eight bytes at a time (as int64 words) and then only the words that hit.
    """
    size = d.numel()
    if d.device.type != "cpu":
        cand = (d if t is None else d > t).view(-1).nonzero().squeeze(1)
        return None if cand.numel() * _DENSE_EXACT > size else cand
    b = torch.empty(-(-size // 8) * 8, dtype=torch.bool)  # padded to whole int64 words
    b[size:].zero_()
    if t is None:
        b[:size].copy_(d.view(-1))  # a vectorised cast, unlike d > 0
    else:
        torch.gt(d, t, out=b[:size].view(d.shape))
    wi = b.view(torch.int64).nonzero().squeeze(1)  # words holding a candidate
    j = b.view(-1, 8).index_select(0, wi).view(-1).nonzero().squeeze(1)
    if j.numel() * _DENSE_EXACT > size:
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

    torch's CPU pow is ~20x slower than a multiply for most exponents, and log of 0 and exp
    of an underflowing argument take slow paths (~10x); integer exponents use repeated
    squaring, others exp(e log d) with d clamped up to where d^e is still a normal number
    (the zeros are restored by the sign).
    """
    if isinstance(e, float) and abs(e - round(e)) < 1e-9 and 0 <= e <= 64:
        ei = round(e)  # 1/(α − 1) − 1 for α = 1.1 is 8.99999999999999...: use the integer
        return torch.sign(d) if ei == 0 else _ipow(d, ei)
    pos = torch.sign(d)
    log_tiny = math.log(torch.finfo(d.dtype).tiny)
    if isinstance(e, float):
        floor: float | Tensor = math.exp(log_tiny / max(e, 1.0)) * 1.01
        return d.clamp_min(floor).log_().mul_(e).exp_().mul_(pos)
    floor = torch.exp(log_tiny / e.clamp_min(1.0)) * 1.01
    return torch.maximum(d, floor).log_().mul_(e).exp_().mul_(pos)


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
    """Newton on h in float64 until every step is below 1e-6, then one more step: convergence
    is quadratic (a step of 1e-6 leaves an error of ~1e-12, the last step ~1e-24)."""
    for _ in range(_MAX_EXACT_STEPS):
        step = _newton_step64(x, rows, tau, beta)
        tau = tau + step
        if not bool((step.abs() > 1e-6).any()):
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


# ----------------------------------------------------------------------------------------------
# the dense path (float32 scores, α near 1: most scores are in the support)


class _Dense:
    """Constants of the dense path for one α: ``c = α − 1``, ``β = 1/c``, the flush threshold.

    Probabilities ``y^β`` (``y = [x − τ]_+``) below float32's smallest normal number are flushed
    to 0, i.e. only ``y > δ = tiny^(1/β)`` is kept; ``thr`` is δ raised by 16 ulps so that no
    kept value rounds below tiny (the certificate's band covers the difference).
    """

    def __init__(self, alpha: float) -> None:
        self.c = alpha - 1.0
        self.beta = 1.0 / self.c
        # An integer β takes repeated squaring. A β within 1e-5 of one (α rounded to float32,
        # 1.1 -> 1.10000002) is computed with that integer: each kept term y^β (y >= δ) then
        # changes by at most |Δβ| |log δ| relative, which the error bound of G covers.
        k = round(self.beta)
        self.k_int = k if abs(self.beta - k) <= 1e-5 * self.beta else None
        self.steps, self.tol = 6, 2e-3  # Halley: the next error would be ~step³
        self.q = float(math.ceil(self.beta - 1e-9))  # >= β: H_q's root bounds τ* from below
        self.delta = math.exp(math.log(_TINY32) * self.c)
        self.thr = self.delta * (1.0 + 16.0 * _EPS32)
        # Relative error of G = Σ y^β evaluated in float32 (x, y, the powers, the sum).
        self.eps_g = (2.0 * self.beta + 48.0) * _EPS32
        if self.k_int is not None:
            self.eps_g += abs(self.beta - k) * -math.log(_TINY32) * self.c
        self.g_tol = max(1e-6, self.beta * _EPS32)


_kept = threading.local()
_KEEP_WORK = 3 * (1 << 20)
"""Elements of the dense path's scratch a CPU thread keeps between calls (12 MB of float32:
three buffers of the default chunk)."""
_DENSE_LATE = 0.05
"""Whole-row steps stop once at most this fraction of the rows still moves by more than the
tolerance (2e-3 in x units: the next error would be ~step³, under float32 resolution); those
rows finish on their own."""


class _Work:
    """Scratch (R, n) float32 buffers of the dense path, reused by every chunk and step, and on
    the CPU by the calls that follow in the same thread (up to ``_KEEP_WORK`` elements: a model
    run calls entmax once per layer): a fresh multi-megabyte tensor can cost more in page
    faults than the arithmetic on it."""

    def __init__(self, rows: int, n: int, like: Tensor) -> None:
        self.n = n
        size = rows * n
        kept = getattr(_kept, "work", None)
        if like.device.type != "cpu" or 3 * size > _KEEP_WORK:
            self.flat = torch.empty(3, size, dtype=like.dtype, device=like.device)
        elif kept is not None and kept.dtype == like.dtype and kept.shape[1] >= size:
            self.flat = kept
        else:  # a normal tensor (not an inference one): usable in and out of inference mode
            with torch.inference_mode(False):
                self.flat = _kept.work = torch.empty(3, size, dtype=like.dtype)

    def get(self, i: int, rows: int) -> Tensor:
        return self.flat[i, : rows * self.n].view(rows, self.n)


def _dense_rows(rows: Tensor, alpha: float, out: Tensor, chunk: int) -> Tensor:
    """Write α-entmax of float32 ``rows (R, n)`` into ``out`` by the dense path.

    Per chunk of rows: safeguarded Halley steps over whole rows in float32 until all but a few
    rows have settled, then the output pass with its certificate. Then, once for all chunks:
    rows that have not converged get more steps on their own, and rows the certificate cannot
    settle are recomputed in float64 on whole rows.
    """
    k = _Dense(alpha)
    r_total, n = rows.shape
    work = _Work(min(chunk, r_total), n, rows)
    m = torch.empty(r_total, 1, dtype=rows.dtype, device=rows.device)
    tau = torch.empty(r_total, 1, dtype=_F64, device=rows.device)
    bound = torch.empty_like(tau)
    flags = torch.empty(4, r_total, dtype=torch.bool, device=rows.device)  # ok conv dead moving
    for r0 in range(0, r_total, chunk):
        r1 = min(r0 + chunk, r_total)
        z = rows[r0:r1]
        x, y, u = work.get(0, r1 - r0), work.get(1, r1 - r0), work.get(2, r1 - r0)
        if n >= _BOUND_MIN_N:  # τ starts from the group maxima's threshold, a lower bound
            mc, dead, sub = _maxima(z)
            t = _subset_tau(sub, mc, k.c, k.q, _SUBSET_STEPS).clamp_(-1.0, 0.0)  # (R, 1) f64
        else:
            mc, dead = _row_max(z)
            t = torch.full_like(mc, -1.0, dtype=_F64)  # τ of each row (R, 1), float64
        m[r0:r1], flags[2, r0:r1] = mc, dead.view(-1)
        torch.sub(z, mc, out=x).mul_(k.c)  # x = c (z − max) <= 0, the max entry exactly 0
        o = out[r0:r1]  # free until the output pass: the solver's spare buffer
        t, flags[3, r0:r1] = _dense_solve(x, t, k, k.steps, _DENSE_LATE, y, u, o)
        ok, conv, tau[r0:r1], bound[r0:r1] = _dense_output(x, t, k, o, y, u)
        flags[0, r0:r1], flags[1, r0:r1] = ok, conv
    live = ~flags[2]
    # Rows still moving, or not converged: more steps on those rows only. Each row steps until
    # its own step is small, so its result does not depend on the rows batched with it.
    late = (flags[3] | ~flags[1]) & live
    if bool(late.any()):
        j = late.nonzero().squeeze(1)
        xj = torch.sub(rows.index_select(0, j), m.index_select(0, j)).mul_(k.c)
        oj, yj, uj = torch.empty_like(xj), torch.empty_like(xj), torch.empty_like(xj)
        tj, _ = _dense_solve(xj, tau.index_select(0, j), k, 3 * k.steps, 0.0, yj, uj, oj)
        okj, convj, tj, bj = _dense_output(xj, tj, k, oj, yj, uj)
        out.index_copy_(0, j, oj)
        tau.index_copy_(0, j, tj)
        bound.index_copy_(0, j, bj)
        flags[0].index_copy_(0, j, okj)
        flags[1].index_copy_(0, j, convj)
    redo = ~(flags[0] & flags[1]) & live  # uncertain or unconverged: float64 on whole rows
    if not bool(redo.any()):
        return out
    idx = redo.nonzero().squeeze(1)
    if idx.numel():
        _dense_redo_exact(rows, m, tau, bound, alpha, idx, out)
    return out


def _dense_solve(
    x: Tensor,
    tau: Tensor,
    k: _Dense,
    steps: int,
    late: float,
    y: Tensor,
    u: Tensor,
    spare: Tensor,
) -> tuple[Tensor, Tensor]:
    """Up to ``steps`` safeguarded Halley steps on ``H(τ) = ‖[x − τ]_+‖_β − 1`` (float64 τ).

    A row stops (its τ frozen) after a step below ``k.tol``, so that its result does not depend
    on the other rows of the batch (per-head α groups rows differently from a scalar call). The
    whole-row passes end once at most a fraction ``late`` of the rows still moves (from the
    group maxima's bound one step is often enough): returns τ and those rows (R,), which the
    caller finishes on their own.
    ``y``, ``u`` and ``spare`` are scratch buffers of the shape of ``x``.
    """
    active = torch.ones_like(tau, dtype=torch.bool)
    for i in range(steps):
        t32 = tau.to(torch.float32)
        torch.sub(x, t32, out=y)
        F.threshold_(y, k.thr, 0.0)  # y = [x − τ]_+ with entries under the flush threshold at 0
        g, g1, g2 = _moments(y, k, u, spare)
        step = _halley_step(g, g1, g2, k)
        tau = torch.where(active, (t32.to(_F64) + step).clamp_(min=-1.0), tau)
        active &= step.abs() > k.tol
        if i + 1 < steps and int(active.sum()) <= late * len(x):
            break
    return tau, active.view(-1)


def _moments(y: Tensor, k: _Dense, u: Tensor, spare: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Per-row float64 ``(G, G₁, G₂) = (Σ y^β, Σ y^(β−1), Σ y^(β−2))`` (float32 sums).

    Integer β: repeated squaring. Otherwise exp((β − 2) log y) with y clamped up to the flush
    threshold (log of 0 and exp's underflow take slow paths on CPU), which only the G₂ terms of
    the zero entries see (G₂ only shapes Halley's step, inside its safeguards).
    """
    if k.k_int is not None:
        u = _ipow(y, k.k_int - 2, out=u) if k.k_int > 2 else torch.sign(y, out=u)
    else:
        u = torch.clamp_min(y, k.thr, out=u).log_().mul_(k.beta - 2.0).exp_()
        if k.beta < 2.25:  # a zero entry's thr^(β−2) > tiny^0.11 is not negligible: drop it
            u.mul_(torch.sign(y, out=spare))
    g2 = u.sum(dim=-1, keepdim=True).to(_F64)
    g1 = u.mul_(y).sum(dim=-1, keepdim=True).to(_F64)
    g = u.mul_(y).sum(dim=-1, keepdim=True).to(_F64)
    return g, g1, g2


def _halley_step(g: Tensor, g1: Tensor, g2: Tensor, k: _Dense) -> Tensor:
    """Safeguarded Halley step Δτ on ``H = G^(1/β) − 1`` from the moments of G.

    ``G' = −β G₁`` and ``G'' = β(β − 1) G₂`` give ``H' = −G^(1/β) G₁ / G`` and
    ``H'' = (β − 1) G^(1/β) (G₂/G − (G₁/G)²)``. Newton's step is ``s = −H / H'``
    ``= (G^(1/β) − 1) / (G^(1/β) G₁/G)``, Halley's ``s / (1 + s H'' / (2 H'))``
    ``= s / (1 − s (β − 1)(G₂/G − (G₁/G)²) / (2 G₁/G))``. H is convex, so Newton's iterate never
    passes the root (from either side): ``s`` is the lower limit. ``|G'| >= β G`` (every
    ``y <= 1``) gives ``τ* − τ <= (G − 1) / β`` when ``G >= 1``: the upper limit.
    """
    nq = g.pow(k.c)
    r1 = g1 / g
    s = (nq - 1.0) / (nq * r1)
    q = (g2 / g - r1 * r1) * ((k.beta - 1.0) / 2.0) / r1
    halley = (s / (1.0 - s * q)).nan_to_num_(nan=-math.inf)
    step = torch.maximum(torch.minimum(halley, (g - 1.0).clamp_min(0.0) * k.c), s)
    return step.nan_to_num_(0.0)


def _dense_output(
    x: Tensor, tau: Tensor, k: _Dense, out: Tensor, y: Tensor, tmp: Tensor
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Write ``[x − τ]_+^β`` into ``out`` and certify the support.

    Returns ``ok`` (R,): no score lies where the support or flush decision could differ from
    the exact threshold's; ``conv`` (R,): ``|G − 1| <= g_tol``; the τ used (R, 1) and the bound
    (R, 1) on ``|τ* − τ|``: ``τ* − τ <= (G − 1) / β`` when ``G >= 1`` and
    ``τ − τ* <= (1 − G) / (β G)`` otherwise, for G evaluated to relative ``eps_g`` (module
    docstring).
    """
    t32 = tau.to(torch.float32)
    tau_used = t32.to(_F64)
    torch.sub(x, t32, out=y)  # x − τ
    split = k.thr > 1e-5  # the flush threshold τ + δ lies apart from τ: two bands
    if split:  # one reduction for both: |y (y − δ)| is small exactly near 0 and near δ
        near = torch.sub(y, k.thr, out=tmp).mul_(y).abs_().amin(dim=-1, keepdim=True)
    else:
        near = torch.abs(y, out=tmp).amin(dim=-1, keepdim=True)
    F.threshold_(y, k.thr, 0.0)  # y = [x − τ]_+, flushed entries 0
    if k.k_int is not None:
        p = _ipow(y, k.k_int, out=out)
    else:
        # zeros clamped 0.1 % above the flush threshold: exp stays off its subnormal slow path
        p = torch.clamp_min(y, k.thr * 1.001, out=out).log_().mul_(k.beta).exp_().mul_(y.sign_())
    g = p.sum(dim=-1, keepdim=True).to(_F64)
    g_hi, g_lo = g * (1.0 + k.eps_g), (g * (1.0 - k.eps_g)).clamp_min(1e-300)
    bound = torch.maximum(g_hi - 1.0, (1.0 - g_lo) / g_lo).clamp_min(0.0) * (2.0 * k.c)
    # x carries float32 rounding (|x| <= 1 near τ >= −1), and the flush threshold is δ raised
    # by 16 ulps: a band of `bound` plus a few eps around τ, and around τ + δ.
    band = bound + (4.0 * _EPS32 + 32.0 * _EPS32 * k.thr)
    if split:  # |y| <= band or |y − δ| <= band imply |y (y − δ)| <= band (δ + band)
        ok = near.to(_F64) > band * (k.thr + band)
    else:  # one band over [τ − band, τ + δ + band]
        ok = near.to(_F64) > band + k.thr
    conv = (g - 1.0).abs() <= k.g_tol
    return ok.view(-1), conv.view(-1), tau_used, bound


def _dense_redo_exact(
    z: Tensor, m: Tensor, tau: Tensor, bound: Tensor, alpha: float, idx: Tensor, out: Tensor
) -> None:
    """Recompute rows ``idx`` in float64 on whole rows (the exact phase), from below τ*."""
    c = alpha - 1.0
    zs = z.index_select(0, idx)
    ms = m.index_select(0, idx).to(_F64)
    tau0 = (tau.index_select(0, idx) - 2.0 * bound.index_select(0, idx)).nan_to_num(-1.0)
    t0 = ms + tau0.clamp(-1.0, 0.0) / c
    sub = torch.zeros_like(zs)
    _exact_phase(zs, ms, alpha, c, None, t0, t0, sub)
    out.index_copy_(0, idx, sub)


def _ipow(y: Tensor, k: int, out: Tensor | None = None) -> Tensor:
    """``y ** k`` for an integer ``k >= 1``, left-to-right binary powering (no pow): one new
    tensor (or ``out``), ``floor(log2 k)`` squarings and ``popcount(k) − 1`` multiplies by y."""
    bits = bin(k)[3:]  # after the leading 1
    if not bits:
        return y.clone() if out is None else out.copy_(y)
    r = y * y if out is None else torch.mul(y, y, out=out)
    for i, bit in enumerate(bits):
        if i:
            r.mul_(r)
        if bit == "1":
            r.mul_(y)
    return r
