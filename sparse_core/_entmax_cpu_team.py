"""The CPU entmax kernel on torch's own OpenMP threads (:mod:`sparse_core.entmax_cpu`).

Inside a forward, torch's OpenMP workers keep spinning for a few milliseconds after each of its
parallel ops (GNU libgomp's wait policy). A kernel's second half on a thread of our own then
waits for that core: measured at 3–5 ms per call at n = 512, more than the half it saves. So the
rows go to torch's team instead: :func:`run` calls libgomp's ``GOMP_parallel`` — the entry
point every ``#pragma omp parallel`` compiles to, the one torch's ``at::parallel_for`` reaches —
with a compiled C callback (numba ``cfunc``). The calling thread and the workers already
spinning take chunks of rows from a shared atomic counter until none is left. A row's result
depends on that row alone, so the rows' order of completion changes no bit.

Used only when torch's parallel backend is OpenMP and exactly one libgomp is loaded in the
process (the one torch brought); otherwise :mod:`sparse_core.entmax_cpu` keeps its thread pool.
Data block (int64 words): 0 counter, 1 R, 2 n, 3 chunks, 4 z, 5 out, 6 status (addresses),
7 α and 8 the flush threshold (float64 bits), 9 the address of the vector log / exp pair
(``entmax_cpu._vmath``).
"""

from __future__ import annotations

import ctypes

import numpy as np
from llvmlite import ir
from numba import carray, cfunc, njit, types
from numba.extending import intrinsic

from ._entmax_cpu_kernel import solve_rows

CHUNKS_PER_THREAD = 8
"""Rows are taken in ``threads × 8`` chunks: a thread that starts late takes fewer."""


@intrinsic
def _fetch_add(typingctx, ptr, v):
    """``*ptr += v`` atomically; returns the old value."""

    def codegen(context, builder, signature, args):
        return builder.atomic_rmw("add", args[0], args[1], "monotonic")

    return types.int64(ptr, v), codegen


@intrinsic
def _as_float(typingctx, bits):
    """The float64 whose bits are the int64 ``bits``."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return types.float64(bits), codegen


def _pointer_to(item, llvm_item):
    """An intrinsic: the int64 address as a pointer to ``item`` (made at import, module-level
    names: numba caches the functions that use them)."""

    @intrinsic
    def at(typingctx, address):
        def codegen(context, builder, signature, args):
            return builder.inttoptr(args[0], ir.PointerType(llvm_item))

        return types.CPointer(item)(address), codegen

    return at


_f32_at = _pointer_to(types.float32, ir.FloatType())
_f64_at = _pointer_to(types.float64, ir.DoubleType())
_i8_at = _pointer_to(types.int8, ir.IntType(8))
_i64_at = _pointer_to(types.int64, ir.IntType(64))


@njit(nogil=True, cache=True)
def _drain(block, z, out, status, vmath):
    """Chunks of rows from the shared counter ``block[0]`` until none is left."""
    r_total = block[1]
    chunks = block[3]
    alpha = _as_float(block[7])
    tiny = _as_float(block[8])
    while True:
        c = _fetch_add(block, 1)
        if c >= chunks:
            return
        r0 = r_total * c // chunks
        solve_rows(z, out, alpha, tiny, r0, r_total * (c + 1) // chunks, status, vmath)


# Two module-level callbacks (numba caches neither closures nor their intrinsics' variants).
@cfunc(types.void(types.CPointer(types.int64)), nopython=True, nogil=True, cache=True)
def _body_f32(block):
    shape = (block[1], block[2])
    status = carray(_i8_at(block[6]), (block[1],))
    vmath = carray(_i64_at(block[9]), (4,))
    z, out = carray(_f32_at(block[4]), shape), carray(_f32_at(block[5]), shape)
    _drain(block, z, out, status, vmath)


@cfunc(types.void(types.CPointer(types.int64)), nopython=True, nogil=True, cache=True)
def _body_f64(block):
    shape = (block[1], block[2])
    status = carray(_i8_at(block[6]), (block[1],))
    vmath = carray(_i64_at(block[9]), (4,))
    z, out = carray(_f64_at(block[4]), shape), carray(_f64_at(block[5]), shape)
    _drain(block, z, out, status, vmath)


_BODIES = {np.dtype(np.float32): _body_f32, np.dtype(np.float64): _body_f64}


class Team:
    """``GOMP_parallel`` of the libgomp at ``path`` (the one torch loaded)."""

    def __init__(self, path: str) -> None:
        lib = ctypes.CDLL(path)  # already loaded: the same handle, the same thread pools
        self._parallel = lib.GOMP_parallel
        self._parallel.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint]
        self._parallel.restype = None

    def run(self, z: np.ndarray, out: np.ndarray, alpha: float, tiny: float,
            status: np.ndarray, threads: int, vmath: np.ndarray) -> None:  # fmt: skip
        """:func:`solve_rows` over every row of ``z`` on ``threads`` threads of the team of the
        calling thread (ctypes releases the GIL for the call)."""
        r_total, n = z.shape
        block = np.zeros(10, np.int64)
        block[1:4] = (r_total, n, threads * CHUNKS_PER_THREAD)
        block[4:7] = (z.ctypes.data, out.ctypes.data, status.ctypes.data)
        block[7:9] = np.array([alpha, tiny], np.float64).view(np.int64)
        block[9] = vmath.ctypes.data  # int64 (4,), C-contiguous: entmax_cpu._vmath's
        self._parallel(_BODIES[z.dtype].address, block.ctypes.data, threads, 0)
