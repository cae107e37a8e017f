"""Exact α-entmax on a CUDA GPU in one Triton kernel (issue 25, item 5).

The same map and the same guarantee as :func:`sparse_core.entmax.entmax` (module docstring there):
the support is ``{i : x_i > τ*}`` for the input scores taken as exact numbers, with τ* correct to
float64 rounding; probabilities under float32's smallest normal number are flushed to 0. One
program per row keeps the whole row (n ≤ :data:`MAX_N`) in registers, reads the scores once and
writes the probabilities once:

1. ``m = max z``; ``x = (α − 1)(z − m)`` in float32.
2. **Warm start, float32.** Safeguarded Halley steps on ``H_β(τ) = ‖[x − τ]_+‖_β − 1`` from
   τ = −1 (β = 1/(α − 1) ≥ 2; Newton's step for β < 2, where the Halley term's ``Σ y^(β−2)``
   would blow up on tiny y), the steps of the CPU dense path (``_dense_solve``/``_halley_step``):
   Newton's step is the lower limit, ``(G − 1)⁺/β`` the upper one, until a step is below 1e-6.
   Nothing is decided here: τ only has to land near τ*.
3. **Exact phase, float64**, on the whole row as the CPU compact path does on its candidates
   (``_exact_phase``): ``x`` recomputed in float64 from the float32 scores. α = 1.5 and α = 2:
   the closed form on ``S = {x > τ}`` (α = 1.5: ``τ = mean_S − √(1/|S| − var_S)``; α = 2:
   ``τ = (Σ_S x − 1)/|S|``) repeated until S is stable, so exact ties give exact zeros. Other α:
   Newton on ``H_β`` in float64 until a step is below 1e-6, then one more (quadratic: the last
   step's error is ~1e-24). Newton on the convex, decreasing ``H_β`` never passes its root, from
   either side, so the phase converges from wherever the warm start ended.
4. ``p = [x − τ]_+^β`` in float64 (repeated multiplication for an integer β, exp/log otherwise),
   flushed under float32's smallest normal number, stored as float32.

A row that does not settle within the step limits is flagged and recomputed by the torch path
(never observed on attention rows); a NaN or +inf score raises ``ValueError`` as on the CPU.
The reference for the algorithm is this project's own CPU code (sparse_core/entmax.py); the kernel
layout (a row per program, the row in registers) follows AdaSplash's ``triton_entmax``
(github.com/deep-spin/adasplash, adasplash/triton_entmax.py), which runs a fixed number of
bisection/Halley steps in float32 and is therefore not exact (docs/benchmarks.md, "GPU").

Triton is optional: :func:`available` says whether the kernel can run (a CUDA tensor and an
importable ``triton``). Under Triton's CPU interpreter (``TRITON_INTERPRET=1`` in the environment
before triton is first imported) :func:`entmax_rows` also runs on CPU tensors: the tests run it
so on machines without a GPU (tests/core/test_entmax_triton.py).
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable

import torch
from torch import Tensor

from . import fast_paths

log = logging.getLogger(__name__)

__all__ = ["MAX_N", "MIN_ALPHA", "available", "entmax_rows"]

MAX_N = 32768
"""Longest row the kernel holds in registers; longer rows take the torch path."""
MIN_ALPHA = 1.03
"""Below it (β > 33) the warm start's float32 powers underflow; those α take the torch path."""
_MAX_WARM = 40
_MAX_EXACT = 50
NUM_WARPS: int | None = None
"""Warps per program; None: for an integer β (α 1.1, 1.25, 1.5, 2), 4 for rows of up to 2,048
scores, else 8 (on an H100 8 beat 16 and 32 at n = 4,096-16,384); otherwise one per 512 scores,
4 to 32 (with 8, α 1.75 spilled: 226 ms against 90 at n = 16,384; docs/benchmarks.md, "GPU")."""
last_steps: Tensor | None = None
"""(R, 2) int32 of the last call: warm-start steps and exact-phase passes per row (benchmarks)."""
last_recomputed = 0
"""Rows of the last call that did not settle in the kernel and took the torch path."""
_TINY32 = torch.finfo(torch.float32).tiny
_BAD_SCORES = "scores contain NaN or +inf; only finite values and -inf (masked) are allowed"


def available(rows: Tensor) -> bool:
    """Whether the kernel can run on ``rows``: float32 on a CUDA device (or on the CPU under
    Triton's interpreter, ``TRITON_INTERPRET=1``), triton importable; never when
    ``SPARSESCOPE_NO_TRITON`` is set (the torch path, for comparisons)."""
    if rows.dtype != torch.float32:
        return False
    if rows.device.type != "cuda" and not (
        rows.device.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1"
    ):
        return False
    if not fast_paths.enabled("triton"):  # SPARSESCOPE_ENTMAX_TRITON=0 (or SPARSESCOPE_NO_TRITON)
        return False
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def entmax_rows(
    rows: Tensor, alpha: float, out: Tensor, redo: Callable[[Tensor, float, Tensor], None]
) -> Tensor:
    """Write α-entmax of the float32 rows ``rows (R, n)`` into ``out (R, n)`` and return it.

    ``alpha`` in [MIN_ALPHA, 2]; ``n`` ≤ MAX_N; both tensors contiguous. Rows that did not
    settle in the kernel are recomputed by ``redo(rows, alpha, out)`` (the torch compact path on
    the same device, from sparse_core.entmax, which calls this).
    """
    r_count, n = rows.shape
    if not MIN_ALPHA <= alpha <= 2.0:
        raise ValueError(f"the Triton entmax takes alpha in [{MIN_ALPHA}, 2], got {alpha}")
    if n > MAX_N:
        raise ValueError(f"the Triton entmax takes rows of at most {MAX_N} scores, got {n}")
    c = alpha - 1.0
    beta = 1.0 / c
    k = round(beta)
    beta_int = k if abs(beta - k) < 1e-9 else 0
    closed = 1 if alpha == 1.5 else 2 if alpha == 2.0 else 0
    # the warm start's flush threshold δ = tiny^(1/β), raised by 16 ulps as on the CPU
    thr = math.exp(math.log(_TINY32) * c) * (1.0 + 16.0 * torch.finfo(torch.float32).eps)
    params = torch.tensor([c, beta, thr], dtype=torch.float64, device=rows.device)
    status = torch.empty(r_count, 3, dtype=torch.int32, device=rows.device)
    block = max(16, 1 << (n - 1).bit_length())
    if NUM_WARPS:
        warps = NUM_WARPS
    elif beta_int:  # integer β: 8 warps from 4,096 scores up (fewest spills that pay)
        warps = 4 if block <= 2048 else 8
    else:  # exp/log in float64 need registers: one warp per 512 scores
        warps = max(4, min(32, block // 512))
    _launch(rows, out, params, status, n, block, beta_int, closed, beta, warps)
    global last_steps, last_recomputed
    last_steps = status[:, 1:]
    last_recomputed = 0
    flagged = status[:, 0].ne(0)
    if bool(flagged.any()):  # one host wait per call
        if bool(status[:, 0].eq(2).any()):
            raise ValueError(_BAD_SCORES)
        idx = flagged.nonzero().squeeze(1)
        last_recomputed = idx.numel()
        log.warning("entmax (Triton): %d rows did not settle; recomputing them", idx.numel())
        sub = torch.zeros(idx.numel(), n, dtype=out.dtype, device=out.device)
        redo(rows.index_select(0, idx), alpha, sub)
        out.index_copy_(0, idx, sub)
    return out


def _launch(rows, out, params, status, n, block, beta_int, closed, beta, warps) -> None:
    from ._triton_kernel import entmax_kernel  # imports triton

    entmax_kernel[(rows.shape[0],)](
        rows,
        out,
        params,
        status,
        n,
        rows.stride(0),
        out.stride(0),
        BLOCK=block,
        BETA_INT=beta_int,
        CLOSED=closed,
        HALLEY=beta >= 2.0,
        MAX_WARM=_MAX_WARM,
        MAX_EXACT=_MAX_EXACT,
        num_warps=warps,
    )
