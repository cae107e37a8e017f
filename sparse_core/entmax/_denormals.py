"""The flush-to-zero fast path of the CPU kernel (``ftz``, :mod:`sparse_core.entmax.fast_paths`;
switch ``SPARSESCOPE_ENTMAX_FTZ=0``): the MXCSR bits the kernel sets on its thread while it runs.

x86's SSE/AVX control register has two bits that make subnormal numbers free: FTZ (bit 15, a
subnormal result becomes 0) and DAZ (bit 6, a subnormal operand reads as 0). Without them an
Intel core takes a microcode assist of a hundred cycles or more for each such operation; the
kernel's float32 far steps and float64 power passes meet them where β is large and the
candidates near τ have tiny ``y = x − τ`` (``y^(β−2)``, α 1.15 and 1.3 most: measured with
bench/bench_entmax_kernel.py on an AVX-512 Xeon, 2.7× and 2.4× the time without the bits; AMD's
Zen cores take no such assist). The kernel (``_cpu_kernel.solve_rows``) ORs these bits into the
thread's MXCSR at its start and restores the old value at its end, so torch's threads and the
caller's never see them. Results are the same bits (the kernel flushes probabilities under the
dtype's smallest normal number to 0 anyway, and a subnormal term cannot move a float64 sum of
order one), which tests/core/test_entmax_cpu.py checks on every α.

Only on x86-64 (the register is x86's); elsewhere, or with the switch off, the value is 0 and the
kernel leaves the thread's flags alone.
"""

from __future__ import annotations

import platform

from . import fast_paths

#: MXCSR's flush-to-zero (bit 15) and denormals-are-zero (bit 6).
FTZ_DAZ = 0x8040


def mxcsr_bits() -> int:
    """The MXCSR bits the kernel sets while it runs: :data:`FTZ_DAZ`, or 0 where the switch is
    off or the machine is not x86-64."""
    if not fast_paths.enabled("ftz"):
        return 0
    return FTZ_DAZ if platform.machine().lower() in ("x86_64", "amd64") else 0
