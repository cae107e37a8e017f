"""``sparsescope prepare``: build once what a first start would otherwise build, one line a step.

``scripts/install.sh`` runs it, so the first ``sparsescope`` after an install finds everything
ready: the compiled CPU kernels (numba's on-disk cache, written beside the installed modules)
and every shipped adapted model rebuilt from its delta (``sparse_core.shipped.materialize``,
under ``$SPARSESCOPE_CACHE`` or the user cache directory). Each step prints what it does and
how long it took; running it again finds everything built and takes seconds.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "prepare",
        help="compile the kernels and build the shipped models now (install.sh runs it)",
        description="Build what the first start would otherwise build: the compiled entmax and "
        "method kernels (numba's cache) and every shipped adapted model (its delta over the "
        "installed base weights, in the user cache). One line per step.",
    )
    p.set_defaults(run=run)


def _step(what: str, fn: Callable[[], object]) -> object:
    print(f"sparsescope prepare: {what} …", flush=True)
    t0 = time.perf_counter()
    got = fn()
    print(f"sparsescope prepare: {what}: done in {time.perf_counter() - t0:.1f} s", flush=True)
    return got


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    import sparse_core
    from sparse_core import _method_kernels
    from sparse_core.entmax import cpu as entmax_cpu
    from sparse_core.errors import SparsescopeError
    from sparse_core.shipped import shipped_models
    from sparse_core.sources import resolve

    # numba's cache lies beside the modules: the line says which copy's (the installed one for a
    # first start; a checkout's when run from inside it with ``python -m``)
    print(f"sparsescope prepare: kernels of {Path(sparse_core.__file__).parent}", flush=True)
    if not _step("compiling the CPU entmax kernel (numba)", entmax_cpu.warm):
        print("sparsescope prepare: numba is unavailable: the torch entmax paths will run")
    if not _step("compiling the methods' kernels (numba)", _method_kernels.warm):
        raise SparsescopeError("the methods' compiled kernels did not run")
    for model_id in shipped_models():
        src = _step(f"building {model_id} from its delta", lambda m=model_id: resolve(m))
        print(f"sparsescope prepare: {model_id} is in {src.path}", flush=True)
    print("sparsescope prepare: ready", flush=True)
    return 0
