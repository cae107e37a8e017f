"""The CPU entmax kernel on torch's own OpenMP threads (:mod:`sparse_core.entmax.cpu`).

Inside a forward, torch's OpenMP workers keep spinning for a few milliseconds after each of its
parallel ops (GNU libgomp's wait policy). A kernel's second half on a thread of our own then
waits for that core: measured at 3–5 ms per call at n = 512, more than the half it saves. So the
rows go to torch's team instead: :func:`run` calls libgomp's ``GOMP_parallel`` — the entry
point every ``#pragma omp parallel`` compiles to, the one torch's ``at::parallel_for`` reaches —
with a compiled C callback (numba ``cfunc``). The calling thread and the workers already
spinning take chunks of rows from a shared atomic counter until none is left. A row's result
depends on that row alone, so the rows' order of completion changes no bit.

Used only when torch's parallel backend is OpenMP and exactly one libgomp is loaded in the
process (the one torch brought); otherwise :mod:`sparse_core.entmax.cpu` keeps its thread pool.
The callbacks themselves (``_body_f32`` / ``_body_f64``, compiled by ``team_bodies``, and the
atomic counter's intrinsics) live in :mod:`sparse_core.entmax._cpu_kernel`, beside the kernel
they call: numba's cache of a function is keyed on its own file only, so callbacks cached from
another file would keep running a changed kernel's old code.

This is the ``team`` fast path (:mod:`sparse_core.entmax.fast_paths`; switch
``SPARSESCOPE_ENTMAX_TEAM=0``): the only module that finds libgomp (by reading /proc/self/maps)
and calls into it. ``GOMP_parallel(fn, data, threads, flags)`` is libgomp's stable ABI (GCC's
``GOMP_4.0`` symbol version, unchanged since GCC 4.9); checked with torch 2.13.0 (its bundled
libgomp) and numba 0.68.1. Where torch brings another OpenMP (LLVM's libomp, Intel's) or none,
:func:`openmp_library` finds no libgomp and the rows go to a thread pool of ours: the same bits
(each row's result depends on that row alone), 7–17 % slower in ``model.run`` at n = 512
(docs/benchmarks.md).

Data block (int64 words): 0 counter, 1 R, 2 n, 3 chunks, 4 z, 5 out, 6 status (addresses), 7 α
and 8 the flush threshold (float64 bits), 9 the address of the vector log / exp table
(``entmax_cpu._vmath``, int64), 10 its length, 11 the address of the streamed copy and 12 its
rows (R, or 0 for none: ``solve_rows``'s ``copy``).
"""

from __future__ import annotations

import ctypes
import os

import numpy as np
import torch

CHUNKS_PER_THREAD = 8
"""Rows are taken in ``threads × 8`` chunks: a thread that starts late takes fewer."""


def openmp_library() -> str | None:
    """The path of the one libgomp loaded in this process when torch's parallel backend is
    OpenMP (Linux: read from /proc/self/maps), else None."""
    if "parallel backend: OpenMP" not in torch.__config__.parallel_info():
        return None
    try:
        with open("/proc/self/maps") as f:
            paths = {ln.split(None, 5)[-1].strip() for ln in f if "libgomp" in ln}
    except OSError:  # not Linux
        return None
    paths = {p for p in paths if os.path.basename(p).startswith("libgomp")}
    return paths.pop() if len(paths) == 1 else None


class Team:
    """``GOMP_parallel`` of the libgomp at ``path`` (the one torch loaded)."""

    def __init__(self, path: str) -> None:
        from ._cpu_kernel import team_bodies  # imports numba: on first use only

        self._bodies = team_bodies()
        lib = ctypes.CDLL(path)  # already loaded: the same handle, the same thread pools
        self._parallel = lib.GOMP_parallel
        self._parallel.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint]
        self._parallel.restype = None

    def run(self, z: np.ndarray, out: np.ndarray, alpha: float, tiny: float,
            status: np.ndarray, threads: int, vmath: np.ndarray,
            copy: np.ndarray) -> None:  # fmt: skip
        """``_entmax_cpu_kernel.solve_rows`` over every row of ``z`` on ``threads`` threads of
        the team of the calling thread (ctypes releases the GIL for the call); ``copy``: (R, n)
        or (0, n), C-contiguous, of the dtype of ``out``."""
        r_total, n = z.shape
        block = np.zeros(13, np.int64)
        block[1:4] = (r_total, n, threads * CHUNKS_PER_THREAD)
        block[4:7] = (z.ctypes.data, out.ctypes.data, status.ctypes.data)
        block[7:9] = np.array([alpha, tiny], np.float64).view(np.int64)
        block[9:11] = (vmath.ctypes.data, len(vmath))  # int64, C-contiguous: entmax_cpu._vmath's
        block[11:13] = (copy.ctypes.data if len(copy) else 0, len(copy))
        self._parallel(self._bodies[z.dtype].address, block.ctypes.data, threads, 0)
