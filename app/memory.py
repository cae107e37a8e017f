"""Handing freed memory back to the system: glibc's ``malloc_trim`` and a cap on malloc arenas.

A server that runs many model forwards and Pareto sweeps frees large temporaries all the time;
glibc keeps them in its arenas, so the resident memory climbs far past what the bounded analysis
cache holds. Both helpers are best effort: a no-op where libc is not glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
from collections.abc import Callable

#: glibc's mallopt() parameter number of MALLOC_ARENA_MAX (malloc.h).
M_ARENA_MAX = -8


@functools.cache
def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    libc = _libc()
    return getattr(libc, "malloc_trim", None) if libc is not None else None


def release_free_memory() -> None:
    """Hand the heap's free pages back to the system (glibc's ``malloc_trim(0)``).

    Called after a model run or a Pareto sweep has freed its large temporaries. glibc keeps
    freed memory in its arenas (and, once a large block was freed, serves tensors from the heap
    rather than from fresh mappings), so the resident memory climbed far past what the bounded
    cache holds. With bench/bench_load.py on the real model, 8 clients: 664 MiB after the 100th
    request, 907 MiB after the 1,000th without it; 571 and 703 MiB with it (and 2 arenas, see
    :func:`limit_malloc_arenas`), oscillating between 565 and 806 MiB over 2,000 requests without
    a trend (docs/benchmarks.md, "Load test"). A trim takes a few ms (median 6.6 ms there).
    A no-op where libc has no malloc_trim.
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def limit_malloc_arenas(arenas: int = 2) -> bool:
    """At most ``arenas`` glibc malloc arenas, as ``MALLOC_ARENA_MAX=2`` would (which, when set,
    wins). glibc gives allocating threads up to 8 arenas per core and the routes run in FastAPI's
    thread pool, so memory freed by one request sat in another thread's arena instead of serving
    the next one (docs/benchmarks.md, "Load test"). Call it before the model and the server start
    their threads. Best effort: False where libc has no mallopt.
    """
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    mallopt = getattr(_libc(), "mallopt", None)
    return bool(mallopt(M_ARENA_MAX, arenas)) if mallopt is not None else False
