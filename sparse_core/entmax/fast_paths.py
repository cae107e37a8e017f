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
- ``avx512``: :mod:`._cpu_kernel` emits LLVM's x86 AVX-512 register compress (``_compress8``).
  Switch ``SPARSESCOPE_ENTMAX_AVX512=0``; off: the one-at-a-time branch-free loop.
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

The AVX-512 choice is compiled into the numba kernel, and numba's on-disk cache is keyed on the
CPU it compiles for, not on this switch: with ``avx512`` off on a CPU that has it, this module
asks numba to compile for a generic x86-64 CPU (``NUMBA_CPU_NAME=generic``, numba's own switch,
part of its cache key) when numba is not imported yet, so the cache never mixes the two; which
also leaves SLEEF's AVX2 vectors off (they need the host's registers). Set the switch before
the process imports numba (the environment of the command), as CI does.

``SPARSESCOPE_NO_NUMBA=1`` is not a fast path's switch: it keeps the torch paths instead of the
compiled kernel altogether (comparisons, bench/bench_entmax.py).
"""

from __future__ import annotations

import logging
import os
import sys

log = logging.getLogger(__name__)

__all__ = ["PATHS", "enabled", "state"]

#: The fast paths and the environment variable that switches each off ("0").
PATHS = {
    "team": "SPARSESCOPE_ENTMAX_TEAM",
    "sleef": "SPARSESCOPE_ENTMAX_SLEEF",
    "avx512": "SPARSESCOPE_ENTMAX_AVX512",
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


def _generic_cpu_for_numba() -> None:
    """``avx512`` off: numba compiles for a generic CPU (module docstring), if still possible."""
    if enabled("avx512") or os.environ.get("NUMBA_CPU_NAME"):
        return
    if "numba" in sys.modules:
        log.warning(
            "entmax: %s=0 came after numba was imported; set it in the environment of the "
            "process for the kernel to leave AVX-512 out",
            ALL if os.environ.get(ALL) == "0" else PATHS["avx512"],
        )
        return
    os.environ["NUMBA_CPU_NAME"] = "generic"


_generic_cpu_for_numba()
