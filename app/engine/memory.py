"""Handing freed memory back to the system: glibc's ``malloc_trim`` and a cap on malloc arenas.

A server that runs many model forwards and Pareto sweeps frees large temporaries all the time;
glibc keeps them in its arenas, so the resident memory climbs far past what the bounded analysis
cache holds. Both helpers are best effort: a no-op where libc is not glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

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
    a trend (docs/benchmarks.md, "Server load"). A trim takes a few ms (median 6.6 ms there).
    A no-op where libc has no malloc_trim.
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


class Trimmer:
    """:func:`release_free_memory` after work that frees large temporaries, once per busy
    spell rather than after every piece of it: when the last piece running finishes, or when
    ``every_s`` seconds have passed since the last trim (sustained load never leaves nothing
    running). A lecture hall's 48 simultaneous analyses made 48 trims of a few ms each; now one
    or two."""

    def __init__(self, every_s: float = 1.0, trim: Callable[[], None] | None = None) -> None:
        self.every_s = every_s
        self._trim = trim or release_free_memory
        self._lock = threading.Lock()
        self._running = 0
        self._last = time.monotonic()
        self.trims = 0

    @contextmanager
    def work(self) -> Iterator[None]:
        """Around a piece of work; trims after it if it was the last one running (or it is
        time)."""
        with self._lock:
            self._running += 1
        try:
            yield
        finally:
            with self._lock:
                self._running -= 1
                now = time.monotonic()
                due = self._running == 0 or now - self._last >= self.every_s
                if due:
                    self._last = now
                    self.trims += 1
            if due:
                self._trim()


def limit_malloc_arenas(arenas: int = 2) -> bool:
    """At most ``arenas`` glibc malloc arenas, as ``MALLOC_ARENA_MAX=2`` would (which, when set,
    wins). glibc gives allocating threads up to 8 arenas per core and the routes run in FastAPI's
    thread pool, so memory freed by one request sat in another thread's arena instead of serving
    the next one (docs/benchmarks.md, "Server load"). Call it before the model and the server start
    their threads. Best effort: False where libc has no mallopt.
    """
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    mallopt = getattr(_libc(), "mallopt", None)
    return bool(mallopt(M_ARENA_MAX, arenas)) if mallopt is not None else False


def freeze_startup_objects() -> int:
    """Move every object alive now (the model, torch, spaCy, the imported modules: ~450,000
    on the default model) out of reach of Python's cyclic garbage collector (``gc.freeze``),
    after one last collection. Call it once the server has loaded its models (``serve``: after
    the warm-up).

    A full collection walks every tracked object; with the start-up objects in it, one took
    ~0.2 s of the GIL, about once every few hundred analyses: a lecture hall's burst that met
    one waited that long (docs/benchmarks.md, "Server load"). The frozen objects live as long
    as the server anyway. Returns how many objects were frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
