"""The entmax kernels' platform-specific fast paths: where each lives and its one switch.

Each path lives behind one module, reaches what it reaches only there, and has a switch read
from the environment (``0`` turns it off); ``SPARSESCOPE_FAST_PATHS=0`` turns every one off.
With a path off the kernels take the portable way, which gives the same support and the same
values to float64 rounding (the team: the same bits); tests/core runs both sides (CI runs the
entmax and model tests a second time with ``SPARSESCOPE_FAST_PATHS=0``).

- ``team``: :mod:`._cpu_team` calls libgomp's ``GOMP_parallel`` (ctypes) on the OpenMP team
  torch already runs. Switch ``SPARSESCOPE_ENTMAX_TEAM=0``; off: a thread pool of ours.
- ``sleef``: :mod:`._sleef` looks SLEEF's vector log / exp up by symbol name in torch's
  ``libtorch_cpu.so``. Switch ``SPARSESCOPE_ENTMAX_SLEEF=0``; off: libm's, one value at a time.
- ``ftz``: :mod:`._denormals` has the CPU kernel set x86's flush-to-zero and denormals-are-zero
  bits (MXCSR) on its own thread while it runs, restored after: a power or product whose result
  would be subnormal costs a microcode assist on Intel CPUs (α 1.15's rows took 2.7× as long,
  α 1.3's 2.4×, on an AVX-512 Xeon). Switch ``SPARSESCOPE_ENTMAX_FTZ=0``; off: the thread's
  flags as they are. The same bits either way (tests/core/test_entmax_cpu.py): the kernel
  already writes 0 for any probability under the output dtype's smallest normal number, and a
  subnormal term is below a float64 sum's rounding.
- ``triton``: :mod:`.triton` runs the Triton kernel on CUDA. Switch
  ``SPARSESCOPE_ENTMAX_TRITON=0`` (or the older ``SPARSESCOPE_NO_TRITON=1``); off: the torch
  paths on CUDA.

``SPARSESCOPE_NO_NUMBA=1`` is not a fast path's switch: it keeps the torch paths instead of the
compiled kernel altogether (comparisons, bench/bench_entmax.py).
"""

from __future__ import annotations

import os

__all__ = ["PATHS", "enabled", "state"]

#: The fast paths and the environment variable that switches each off ("0").
PATHS = {
    "team": "SPARSESCOPE_ENTMAX_TEAM",
    "sleef": "SPARSESCOPE_ENTMAX_SLEEF",
    "ftz": "SPARSESCOPE_ENTMAX_FTZ",
    "triton": "SPARSESCOPE_ENTMAX_TRITON",
}
#: Every fast path off at once ("0").
ALL = "SPARSESCOPE_FAST_PATHS"


def enabled(path: str) -> bool:
    """Whether the fast path ``path`` (a key of :data:`PATHS`) may run: neither its own switch
    nor :data:`ALL` is ``0`` (read now: a path decided once per process reads it once)."""
    if path not in PATHS:
        raise KeyError(f"no fast path {path!r}; they are {', '.join(PATHS)}")
    if os.environ.get(ALL) == "0" or os.environ.get(PATHS[path]) == "0":
        return False
    return not (path == "triton" and os.environ.get("SPARSESCOPE_NO_TRITON"))


def state() -> dict[str, bool]:
    """Every path's switch as it stands (benchmarks print it beside their figures)."""
    return {p: enabled(p) for p in PATHS}
