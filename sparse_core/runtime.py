"""How a run uses the machine: where its P is recorded, and whether a second core takes half of
its work. None of this changes a number: every runtime gives the run's outputs bit for bit.

The science (:mod:`sparse_core.attention`: scores, masks, α-entmax, P V) asks a
:class:`Runtime` for two things and knows nothing else of the machine:

- :meth:`Runtime.probs_buffer`: the (L, B, H, n, n) float32 tensor a run records P into.
  :class:`KeptBuffers` hands out anonymous mappings with transparent huge pages advised and
  keeps the last ones for later runs (a model's default); without it, ``torch.empty``.
- :attr:`Runtime.side`: a one-worker executor. With one, :meth:`Runtime.forward` splits every
  linear layer's rows in two halves, the second on the side worker (a
  :class:`~torch.overrides.TorchFunctionMode` around the forward: the model's modules are not
  touched), and the attention runs half of every layer's heads there
  (``attention._split_heads``). A lone text then runs on two cores.

The engine passes its own (:mod:`sparsescope.engine.batching`: a model worker's side thread);
``SparseModel.run(side=…)`` is a shorthand for the model's runtime with that side worker.
"""

from __future__ import annotations

import contextlib
import dataclasses
import mmap
import sys
import threading
import warnings
from collections.abc import Iterator
from concurrent.futures import Executor
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.overrides import TorchFunctionMode

__all__ = [
    "HUGE_PAGES_MIN_BYTES",
    "KEPT_BUFFERS",
    "SPLIT_MIN_ROWS",
    "KeptBuffers",
    "Runtime",
    "split_linear",
]

#: A run's P buffer from this many bytes is mapped with huge pages advised (:class:`KeptBuffers`).
HUGE_PAGES_MIN_BYTES = 8 << 20
#: How many of those mappings are kept for later runs once no tensor views them (two: a loop
#: ``out = model.run(text)`` still holds the last result while the next run starts).
KEPT_BUFFERS = 2
#: Rows of a linear layer from which a run with a side worker splits it over two workers (at
#: least the BLAS floor of ``model.rows_kernel_floor``, 4 on MKL, with room).
SPLIT_MIN_ROWS = 32


def _refs(kept: list[mmap.mmap], i: int) -> int:
    """References to ``kept[i]``: the list's, the call's argument, and one per live storage
    made from it by ``torch.frombuffer`` (a view of a view keeps that one storage)."""
    return sys.getrefcount(kept[i])


def _idle_refs() -> int:
    """What :func:`_refs` says of a mapping nothing else holds (measured, not assumed: the
    count of the interpreter's own references differs between Python versions)."""
    probe = [mmap.mmap(-1, mmap.PAGESIZE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)]
    try:
        return _refs(probe, 0)
    finally:
        probe[0].close()


class KeptBuffers:
    """P buffers of a run: on the CPU, from :data:`HUGE_PAGES_MIN_BYTES` on, an anonymous mapping
    of its own with transparent huge pages advised (``madvise(MADV_HUGEPAGE)``; Linux).

    The kernel's page faults of a buffer's first touch in 4 KiB pages cost 2-3x those in 2 MiB
    pages (75 MB at n = 512 on the default model: 111-212 ms against 32-83 ms, measured with
    bench/bench_open.py --server). The last ``keep`` mappings are kept: one of the size asked
    that no tensor views any more (its run's output is gone) is handed out again, its pages
    already there — no faults at all, and none of the kernel's compaction stalls for fresh huge
    pages, which after other large allocations made a run up to 2x slower (measured with
    bench/bench_entmax.py). A mapping is idle when only this object refers to it: every storage
    ``torch.frombuffer`` made from it holds a reference until it is freed, so a mapping still
    viewed is never handed out; one dropped from the list lives as long as a tensor views it.
    Elsewhere (a GPU, a small run, no madvise) ``torch.empty``."""

    def __init__(self, keep: int = KEPT_BUFFERS) -> None:
        self.keep = keep
        self._kept: list[mmap.mmap] = []  # newest last
        self._lock = threading.Lock()
        self._idle = _idle_refs()

    def __call__(self, shape: tuple[int, ...], device: torch.device) -> Tensor:
        """An uninitialised float32 tensor of ``shape`` on ``device``."""
        size = 4
        for k in shape:
            size *= int(k)
        advise = getattr(mmap, "MADV_HUGEPAGE", None)
        if device.type != "cpu" or size < HUGE_PAGES_MIN_BYTES or advise is None:
            return torch.empty(shape, dtype=torch.float32, device=device)
        with self._lock:  # a mapping is found idle and viewed again before another thread looks
            kept, mm = self._kept, None
            for i in range(len(kept)):
                if len(kept[i]) == size and _refs(kept, i) <= self._idle:
                    mm = kept.pop(i)
                    break
            if mm is None:
                try:
                    mm = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
                    mm.madvise(advise)
                except (OSError, ValueError):  # no such advice here: plain pages
                    return torch.empty(shape, dtype=torch.float32, device=device)
            kept.append(mm)
            del kept[: -self.keep]
            with warnings.catch_warnings():  # frombuffer warns of a non-writable buffer only
                warnings.simplefilter("ignore")
                return torch.frombuffer(mm, dtype=torch.float32).view(shape)


def split_linear(side: Executor, x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``F.linear(x, weight, bias)`` with its rows in two halves, the second on ``side`` (each
    half at least :data:`SPLIT_MIN_ROWS` rows: a BLAS row's result then does not depend on the
    rows beside it, as for packed texts); fewer rows: in one piece, here."""
    rows = x.numel() // max(1, x.shape[-1])
    if rows < 2 * SPLIT_MIN_ROWS:
        return F.linear(x, weight, bias)
    flat = x.reshape(rows, x.shape[-1])
    half = rows // 2

    def lower() -> Tensor:
        with torch.inference_mode():
            return F.linear(flat[half:], weight, bias)

    other = side.submit(lower)
    top = F.linear(flat[:half], weight, bias)
    return torch.cat([top, other.result()]).view(*x.shape[:-1], weight.shape[0])


class _SplitLinear(TorchFunctionMode):
    """Within a forward: every ``F.linear`` (what ``nn.Linear`` calls) through
    :func:`split_linear`; every other torch function as it is. Modes are per thread: the side
    worker's own calls run plain."""

    def __init__(self, side: Executor) -> None:
        super().__init__()
        self.side = side

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.linear:
            return split_linear(self.side, *args, **kwargs)
        return func(*args, **kwargs)


@dataclass(frozen=True)
class Runtime:
    """How one run uses the machine (module docstring). The default is a plain run on this
    thread whose P is a fresh ``torch.empty``."""

    #: the P buffer of a run (``buffers(shape, device)``); None: ``torch.empty``
    buffers: KeptBuffers | None = None
    #: a one-worker executor that takes half of every linear layer's rows and of every layer's
    #: heads (with torch on one thread in each, the results are the plain run's bit for bit);
    #: None: the run stays on the calling thread
    side: Executor | None = None

    def probs_buffer(self, shape: tuple[int, ...], device: torch.device) -> Tensor:
        """An uninitialised float32 tensor of ``shape`` for a run's recording of P."""
        if self.buffers is None:
            return torch.empty(shape, dtype=torch.float32, device=device)
        return self.buffers(shape, device)

    def beside(self, side: Executor | None) -> Runtime:
        """This runtime with ``side`` as its side worker."""
        return dataclasses.replace(self, side=side)

    @contextlib.contextmanager
    def forward(self) -> Iterator[None]:
        """Entered around a run's forward: with a side worker, every linear layer's rows split
        in two halves (:func:`split_linear`); else nothing."""
        if self.side is None:
            yield
            return
        with _SplitLinear(self.side):
            yield
