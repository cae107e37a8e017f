"""SLEEF's vector ``log`` and ``exp`` in torch's CPU library, found by symbol name: the
one place the CPU kernel reaches into torch's private parts for its math (the ``sleef`` fast
path, :mod:`sparse_core.entmax.fast_paths`; switch ``SPARSESCOPE_ENTMAX_SLEEF=0``).

torch links SLEEF statically into ``libtorch_cpu.so`` for its own vectorised ops and exports its
symbols; nothing promises it will. Checked with torch 2.13.0 (the Linux x86-64 CPU wheel) and
numba 0.68.1 / llvmlite 0.50.0: every name below is found. On a torch without them
(``AttributeError``), a CPU without AVX2 and FMA, a numba told to compile for another CPU, or
the switch off, the table is zeros and the kernel takes libm's ``log`` / ``exp`` one value at a
time: the same support, values equal to float64 rounding, ~2–2.5x slower at non-integer β
(docs/architecture.md, "Fast paths").
"""

from __future__ import annotations

import logging
import os

import numpy as np
import torch

from . import fast_paths

log = logging.getLogger(__name__)

#: The functions the kernel calls, in the order of its table (``_cpu_kernel``).
SLEEF = (
    "Sleef_logd4_u10avx2",
    "Sleef_expd4_u10avx2",
    "Sleef_logf8_u10avx2",
    "Sleef_expf8_u10avx2",
)


def find_vmath() -> np.ndarray:
    """The addresses of :data:`SLEEF` (int64), or zeros where the path is off or not usable
    (module docstring)."""
    none = np.zeros(len(SLEEF), np.int64)
    if not fast_paths.enabled("sleef"):
        return none
    try:
        import ctypes

        import numba
        from llvmlite import binding

        if torch.backends.cpu.get_cpu_capability() not in ("AVX2", "AVX512"):
            return none
        if numba.config.CPU_NAME or numba.config.CPU_FEATURES:
            return none  # compiled for another CPU: maybe without AVX's vector registers
        features = binding.get_host_cpu_features()
        if not (features.get("avx2") and features.get("fma")):
            return none
        lib = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
        got = np.array(
            [ctypes.cast(getattr(lib, name), ctypes.c_void_p).value for name in SLEEF], np.int64
        )
    except (OSError, AttributeError, ImportError, RuntimeError) as e:
        log.debug("entmax: no SLEEF vector log/exp (%s); libm's", e)
        return none
    log.debug("entmax: SLEEF's vector log and exp for non-integer β")
    return got
