"""Exact α-entmax on the CPU in one compiled pass per row (numba; the n = 512 floor).

The same map and guarantee as :func:`sparse_core.entmax.entmax` (the module docstring there):
the support is ``{i : x_i > τ*}`` for the input scores taken as exact numbers, with τ* correct
to float64 rounding; probabilities under the output dtype's smallest normal number are flushed
to 0. The torch paths make a dozen or more full passes over a layer's scores (each eager op one
pass: the group maxima, the candidates' compare and nonzero, the gathers, the zeroing, the
scatter; ~14 at α 1.25); the kernel (:mod:`sparse_core.entmax._cpu_kernel`) reads each row twice
while it is in cache (maxima, then the candidates), works on the few candidates in float64, and
writes the row once. The algorithm is the torch compact path's, from the group maxima's bound:
the closed form at α 1.5 and 2 (so exact ties give exact zeros, and τ equals the torch path's bit
for bit when both reach the same support), Newton on ``H_β`` otherwise.

Rows are shared out over ``torch.get_num_threads()`` threads: on torch's own OpenMP team where
torch runs on GNU OpenMP (:mod:`sparse_core.entmax._cpu_team`: inside a forward, torch's
workers are still spinning from its last op, and a thread of ours would wait milliseconds for
that core), else on a pool of ours in contiguous ranges (the kernel releases the GIL). Each
row's result depends on that row alone, so any split gives the same bits (a lone analysis,
which runs one torch thread per half of the heads, equals its batched run).
``SPARSESCOPE_ENTMAX_TEAM=0`` keeps the pool of ours.

Where β = 1/(α − 1) is not an integer, the powers ``y^(β−1)`` of Newton's steps and ``y^β`` of
the output are exp(β log y); the kernel takes them four at a time from the vector ``log`` and
``exp`` of SLEEF (1-ulp float64, the AVX2 builds) that torch's CPU library links and exports
(:func:`_vmath`), and Newton's far steps (above 1e-4) from its 8-lane float32 ones, instead of
libm's one value at a time (~2–2.5× faster on those α; the support is the same, values agree
to float64 rounding). Where β's fraction is 1/2 (α 1.4), 1/3 or 2/3 (α 1.15, 1.3, 1.6, 1.75)
the power is a square root (an instruction) or SLEEF's cube root times products instead.
Where such a β is above 2 (α 1.15, 1.3, 1.35, 1.4, 1.45, …) the kernel makes one float64 pass
of powers instead of three: Halley's float32 steps, then Halley's step, Taylor's values and a
certifying Newton step from that one pass (cube roots inline; docs/architecture.md, "Entmax";
2.8× on α 1.15's kernel, 1.5× on α 1.3's). ``SPARSESCOPE_ENTMAX_SLEEF=0``, a CPU without AVX2,
a numba told to compile for another CPU, or a torch without the symbols keep libm's (and
Newton's loop).

While it runs, the kernel sets flush-to-zero and denormals-are-zero on its thread (x86's MXCSR,
restored after; :mod:`sparse_core.entmax._denormals`, switch ``SPARSESCOPE_ENTMAX_FTZ=0``):
a subnormal power costs an Intel core a microcode assist, which made α 1.15's and 1.3's rows
2.5–2.7× slower on an AVX-512 Xeon; the results are the same bits.

``SPARSESCOPE_NO_NUMBA=1`` keeps the torch paths (comparisons, bench/bench_entmax.py
``--torch-entmax``); without numba installed the torch paths run and a line is logged once.
"""

from __future__ import annotations

import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
from torch import Tensor

from . import fast_paths
from ._cpu_team import openmp_library
from ._denormals import mxcsr_bits
from ._sleef import find_vmath as _find_vmath

log = logging.getLogger(__name__)

__all__ = ["MIN_ALPHA", "available", "entmax_rows", "no_copy", "warm"]

MIN_ALPHA = 1.03
"""Below it (β > 33) the kernel's powers lose range; those α keep the torch compact path."""
MIN_ROWS_PER_THREAD = 64
"""A call is shared out over threads only when each gets at least this many rows."""
_BAD_SCORES = "scores contain NaN or +inf; only finite values and -inf (masked) are allowed"

_kernel = None
_tried = False
_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_pool_pid = 0
_team_obj = None
_team_tried = False
_vmath_obj: np.ndarray | None = None


def _load():
    """The compiled kernel module, or None (numba missing or switched off)."""
    global _kernel, _tried
    if _tried:
        return _kernel
    with _lock:
        if not _tried:
            try:
                from . import _cpu_kernel as k

                _kernel = k
            except (ImportError, RuntimeError) as e:  # numba missing, or no cache dir it can use
                log.warning("entmax: numba unavailable (%s); using the torch paths", e)
            _tried = True
    return _kernel


def warm() -> bool:
    """Compile (or load from numba's cache) the kernel for float32 and float64 rows now, e.g.
    when an image is built; False without numba. A process's first call otherwise pays it
    (~1 s from the cache, ~5-10 s to compile on this 2-core machine)."""
    k = _load()
    if k is None:
        return False
    for dtype in (np.float32, np.float64):
        z = np.zeros((1, 4), dtype)
        status = np.zeros(1, np.int8)
        k.solve_rows(z, np.empty_like(z), 1.5, 1e-30, 0, 1, status, _vmath(), no_copy(dtype))
    _team()  # its callbacks are compiled (or loaded) on import
    return True


def no_copy(dtype) -> np.ndarray:
    """``solve_rows``'s ``copy`` for none: no rows, of ``dtype``."""
    return np.empty((0, 1), dtype)


def available(rows: Tensor, alpha: object) -> bool:
    """Whether :func:`entmax_rows` takes ``rows``: float32/float64 on the CPU, a scalar α in
    [MIN_ALPHA, 2], numba importable, ``SPARSESCOPE_NO_NUMBA`` unset."""
    return (
        isinstance(alpha, float)
        and MIN_ALPHA <= alpha <= 2.0
        and rows.device.type == "cpu"
        and rows.dtype in (torch.float32, torch.float64)
        and not os.environ.get("SPARSESCOPE_NO_NUMBA")
        and _load() is not None
    )


_openmp_library = openmp_library  # (tests and benches patch this name)


def _team():
    """torch's OpenMP team (:mod:`sparse_core.entmax._cpu_team`), or None: not OpenMP, not
    exactly one libgomp loaded, or ``SPARSESCOPE_ENTMAX_TEAM=0`` (then a thread pool of ours)."""
    global _team_obj, _team_tried
    if _team_tried:
        return _team_obj
    with _lock:
        if not _team_tried:
            path = _openmp_library() if fast_paths.enabled("team") else None
            if path is not None:
                try:
                    from . import _cpu_team as _entmax_cpu_team

                    _team_obj = _entmax_cpu_team.Team(path)
                except (OSError, AttributeError, ImportError, RuntimeError) as e:
                    log.warning("entmax: torch's OpenMP team unusable (%s); own threads", e)
            log.debug("entmax: rows shared out on %s", path or "threads of our own")
            _team_tried = True
    return _team_obj


def _vmath() -> np.ndarray:
    """The kernel's table of platform helpers: the addresses of SLEEF's 4-lane float64 and
    8-lane float32 ``log`` and ``exp`` (AVX2) in torch's CPU library, or
    zeros (libm's): needs AVX2 and FMA on this CPU (torch's own dispatch says so), numba
    compiling for this CPU (the vectors' calling convention), the symbols exported, and
    ``SPARSESCOPE_ENTMAX_SLEEF`` not ``0``; then the MXCSR bits the kernel sets while it runs
    (flush-to-zero, :mod:`sparse_core.entmax._denormals`; 0 where ``SPARSESCOPE_ENTMAX_FTZ``
    is ``0`` or the CPU is not x86-64)."""
    global _vmath_obj
    if _vmath_obj is not None:
        return _vmath_obj
    with _lock:
        if _vmath_obj is None:
            _vmath_obj = np.append(_find_vmath(), np.int64(mxcsr_bits()))
    return _vmath_obj


def _threads(r: int) -> int:
    return max(1, min(torch.get_num_threads(), r // MIN_ROWS_PER_THREAD))


def _executor(size: int) -> ThreadPoolExecutor:
    """The helper threads (created on first use; again in a forked child, whose copy of the
    parent's pool has no threads)."""
    global _pool, _pool_size, _pool_pid
    with _lock:
        if _pool is None or _pool_size < size or _pool_pid != os.getpid():
            _pool = ThreadPoolExecutor(size, thread_name_prefix="entmax-cpu")
            _pool_size, _pool_pid = size, os.getpid()
        return _pool


def entmax_rows(
    rows: Tensor, alpha: float, out: Tensor, redo, copy: Tensor | None = None
) -> Tensor:
    """α-entmax of the contiguous CPU ``rows (R, n)`` into ``out (R, n)`` (same dtype; it may be
    ``rows`` itself: in place). ``copy``: a contiguous (R, n) tensor of that dtype that receives
    every row too, by streaming stores (``_cpu_kernel.solve_rows``).

    ``redo(z, alpha, out)`` recomputes rows the kernel flags as unsettled (the torch compact
    path; never observed). Raises ``ValueError`` on NaN or +inf scores, and on α outside
    [MIN_ALPHA, 2]: α just above 1 would overflow the kernel's powers ``1/(α − 1)``; those α
    take :func:`sparse_core.entmax._near_one_rows` (``entmax`` never hands them here).
    """
    if not MIN_ALPHA <= alpha <= 2.0:
        raise ValueError(f"the CPU entmax kernel takes alpha in [{MIN_ALPHA}, 2], got {alpha}")
    k = _load()
    r_total = rows.shape[0]
    z = rows.numpy()
    o = out.numpy()
    status = np.zeros(r_total, dtype=np.int8)
    c = copy.numpy() if copy is not None else no_copy(o.dtype)
    tiny = float(torch.finfo(out.dtype).tiny)
    vm = _vmath()
    t = _threads(r_total)
    if t == 1:
        k.solve_rows(z, o, alpha, tiny, 0, r_total, status, vm, c)
    elif (team := _team()) is not None:
        team.run(z, o, alpha, tiny, status, t, vm, c)
    else:
        cuts = [r_total * i // t for i in range(t + 1)]
        pool = _executor(t - 1)
        futures = [
            pool.submit(k.solve_rows, z, o, alpha, tiny, cuts[i], cuts[i + 1], status, vm, c)
            for i in range(1, t)
        ]
        k.solve_rows(z, o, alpha, tiny, cuts[0], cuts[1], status, vm, c)
        for f in futures:
            f.result()
    if status.any():
        if (status == 1).any():
            raise ValueError(_BAD_SCORES)
        redone = np.flatnonzero(status == 2).size
        if redone:
            log.warning("entmax: %d rows may have missed a support entry; recomputed", redone)
        bad = torch.from_numpy(np.flatnonzero(status == 3))
        if bad.numel():
            log.warning("entmax: %d rows did not settle in the CPU kernel; torch path", bad.numel())
            sub = torch.zeros_like(rows[bad])
            redo(rows[bad], alpha, sub)
            out[bad] = sub
            if copy is not None:
                copy[bad] = sub
    return out
