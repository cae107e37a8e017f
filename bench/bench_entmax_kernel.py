"""Benchmark: the compiled CPU entmax kernel alone, on a real text's scores, at every α asked.

The scores are the ones ``sparse_core.load_model().run(text, alpha=α)`` hands the kernel (every
layer's (H·n, n) rows, captured on their way into ``sparse_core.entmax.cpu.entmax_rows``), so
each α gets the rows of its own run. The kernel (``solve_rows`` of
``sparse_core/entmax/_cpu_kernel.py``) then runs on all of them on one thread, and so,
interleaved repeat by repeat, do the candidates:

- ``this tree``: the kernel as ``entmax_cpu`` calls it (SLEEF's vector log / exp where found);
- ``--libm``: the same kernel without them (libm's log / exp, one value at a time);
- ``--no-ftz``: the same kernel without the flush-to-zero bits on its thread
  (``sparse_core/entmax/_denormals.py``: subnormal results at full cost);
- ``--against DIR``: another checkout's kernel (``DIR/sparse_core/entmax/_cpu_kernel.py``,
  copied to a temporary directory and imported from there under another name, so its numba
  cache is its own and DIR's is untouched), e.g. main before a change.

Each candidate's output must have the same support as this tree's (checked; printed). One
thread, so the figures are the kernel's own cost, not the thread split's; the whole model's
ratio to softmax is bench/bench_entmax.py's.

Run: ``python bench/bench_entmax_kernel.py --alphas 1.05 1.15 1.3 1.5 --against /tmp/main-src``
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sparse_core.entmax import cpu as entmax_cpu  # noqa: E402
from sparse_core.model import load_model  # noqa: E402

SLIDER = [round(1.0 + 0.05 * i, 2) for i in range(1, 21)]


def capture(model, text: str, alpha: float) -> np.ndarray:
    """The rows ``model.run`` hands the kernel at α (the widest calls: the layers' rows)."""
    seen: list[np.ndarray] = []
    real = entmax_cpu.entmax_rows

    def spy(rows, a, out, redo, *rest):
        seen.append(rows.numpy().copy())
        return real(rows, a, out, redo, *rest)

    entmax_cpu.entmax_rows = spy
    try:
        with torch.inference_mode():
            model.run(text, alpha=alpha, truncate=True, hidden=False)
    finally:
        entmax_cpu.entmax_rows = real
    width = max(r.shape[1] for r in seen)
    return np.concatenate([r for r in seen if r.shape[1] == width])


def load_kernel(tree: Path):
    """The other tree's kernel module, imported from a copy in a temporary directory under a
    name of its own: numba caches it there, never in the other tree (a cache written under
    another module name breaks that tree's own later imports). The copy sits in a package of
    its own beside that tree's ``fast_paths.py``, so a kernel that imports it relatively finds
    it (a kernel that found no ``fast_paths`` left its AVX-512 path off)."""
    src = tree / "sparse_core" / "entmax" / "_cpu_kernel.py"
    if not src.is_file():  # a tree from before the entmax modules became a package
        src = tree / "sparse_core" / "_entmax_cpu_kernel.py"
    tmp = Path(tempfile.mkdtemp(prefix="bench-kernel-"))
    pkg = tmp / "other_entmax"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    shutil.copy(src, pkg / "_cpu_kernel.py")
    paths = src.parent / "fast_paths.py"
    if paths.is_file():
        shutil.copy(paths, pkg / "fast_paths.py")
    sys.path.insert(0, str(tmp))
    return importlib.import_module("other_entmax._cpu_kernel")


def caller(kernel, vmath):
    """``f(z, out, alpha, status)`` over every row, for a kernel with or without ``vmath`` (and
    with or without ``copy``: none given)."""
    params = len(inspect.signature(kernel.solve_rows.py_func).parameters)
    takes_vmath = params >= 8
    if takes_vmath and "vmath[5]" in inspect.getsource(kernel.solve_rows.py_func):
        vmath = np.insert(vmath, 4, 0)  # a kernel whose table still had SLEEF's cbrt at 4
    tiny = float(np.finfo(np.float32).tiny)

    def run(z, out, alpha, status):
        if params == 9:
            none = np.empty((0, 1), out.dtype)
            kernel.solve_rows(z, out, alpha, tiny, 0, len(z), status, vmath, none)
        elif takes_vmath:
            kernel.solve_rows(z, out, alpha, tiny, 0, len(z), status, vmath)
        else:
            kernel.solve_rows(z, out, alpha, tiny, 0, len(z), status)

    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--alphas", type=float, nargs="+", default=SLIDER)
    ap.add_argument("--n", type=int, default=512, help="tokens (the text is cut to them)")
    ap.add_argument("--text-file", default="/work/shared/data/wikitext-2/valid.txt")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--against", type=Path, help="another checkout's kernel, side by side")
    ap.add_argument("--libm", action="store_true", help="also this kernel without SLEEF")
    ap.add_argument(
        "--no-ftz", action="store_true", help="also this kernel without the flush-to-zero bits"
    )
    args = ap.parse_args()

    torch.set_num_threads(1)
    model = load_model(None, device="cpu", max_tokens=args.n)
    text = Path(args.text_file).read_text(encoding="utf-8")[: args.n * 12]
    this = entmax_cpu._load()
    vm = entmax_cpu._vmath()
    runs = {"this tree": caller(this, vm)}
    if args.libm:
        libm = vm.copy()
        libm[:4] = 0  # no SLEEF (the flush-to-zero bits, vm[4], as they are)
        runs["this tree, libm"] = caller(this, libm)
    if args.no_ftz:
        plain = vm.copy()
        plain[4] = 0  # the thread's MXCSR as it is (sparse_core/entmax/_denormals.py)
        runs["this tree, no FTZ"] = caller(this, plain)
    if args.against:
        runs[f"against {args.against}"] = caller(load_kernel(args.against), vm)
    print(
        f"SLEEF vector log / exp: {'found' if vm[:4].any() else 'not found'}; "
        f"flush-to-zero: {'on' if vm[4] else 'off'}; one thread"
    )
    print(f"{'alpha':>6} {'rows':>7} {'support/row':>11}  " + "  ".join(f"{k:>24}" for k in runs))
    for alpha in args.alphas:
        z = capture(model, text, alpha)
        outs = {k: np.empty_like(z) for k in runs}
        status = np.zeros(len(z), np.int8)
        for k, f in runs.items():  # compile / load, and the support check
            f(z, outs[k], alpha, status)
        times: dict[str, list[float]] = {k: [] for k in runs}
        for _ in range(args.repeats):
            for k, f in runs.items():
                t = time.perf_counter()
                f(z, outs[k], alpha, status)
                times[k].append(time.perf_counter() - t)
        ref = outs["this tree"] > 0
        base = statistics.median(times["this tree"])
        cells = []
        for k in runs:
            med = statistics.median(times[k])
            same = "" if np.array_equal(outs[k] > 0, ref) else " SUPPORT DIFFERS"
            cells.append(f"{1e3 * med:8.1f} ms ({med / base:4.2f}x){same}")
        nnz = np.count_nonzero(ref) / len(z)
        print(f"{alpha:6.2f} {len(z):7d} {nnz:11.1f}  " + "  ".join(f"{c:>24}" for c in cells))


if __name__ == "__main__":
    main()
