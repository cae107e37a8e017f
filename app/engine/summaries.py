"""Summaries of a batched forward's texts, computed together (the analyze body's ``summary``).

The model worker (app/engine/batching.py) runs several texts in one forward; its ``after_batch``
hook (:func:`tie_batch`, installed by the model slot) ties their outputs to one
:class:`SummaryBatch`. Each request then asks :func:`summarise` for its predict context and
summary rows: the first of a batch to ask computes those of every sibling of its length (and
causality) at once (``payloads.summary_texts``: texts of one length stacked, each head's figures
exactly its own text's); the others take theirs. A text run alone is summarised alone, on both
cores (issue 26): half of its layers on a side worker (app/engine/two_cores.py), byte for byte
the one-thread summary. A request that asks for some methods only (the page's first view,
app/engine/summary_parts.py) leaves its batch and computes those alone.
"""

from __future__ import annotations

import threading
from typing import Any

import torch

from sparse_core.methods import PredictContext
from sparse_core.pareto import summary_tables

from .summary_parts import SummaryParts
from .two_cores import side_worker, splits_summary, summary_tables_on_two_cores

#: Where a batch ties an output to its siblings (``RunOutput.extra``; popped by summarise).
BATCH_KEY = "_summary_batch"


class SummaryBatch:
    """The outputs of one batched forward, summarised together on first demand.

    One length group is summarised at a time: the summaries are many small numpy / torch calls,
    and several threads running them at once mostly contend for the GIL (the server's CPU per
    analysis in a burst of 48 fell from about 30 to 23 ms with one at a time;
    docs/benchmarks.md). A sibling whose request has gone leaves its part to the garbage
    collector with this object.
    """

    def __init__(self, outs: list) -> None:
        self._waiting: dict[tuple, list] = {}
        for o in outs:
            self._waiting.setdefault(_summary_group(o), []).append(o)
        self._done: dict[int, tuple] = {}
        one = threading.Lock()  # one length group at a time (see the class docstring)
        self._locks = {k: one for k in self._waiting}

    def take(self, out: Any, art: Any) -> tuple[PredictContext, SummaryParts, int]:
        """``(ctx, every method's summary, texts summarised by this call)`` of ``out`` (one of
        the batch's outputs); the count is 0 when a sibling's call summarised it."""
        key = _summary_group(out)
        lock = self._locks.get(key)
        got, count = None, 0
        if lock is not None:
            with lock:
                outs = self._waiting.pop(key, None)
                if outs is not None:
                    with torch.inference_mode():
                        ctxs = [PredictContext.from_run(o, art) for o in outs]
                        rows = summary_tables(ctxs)
                    count = len(outs)
                    for o, c, r in zip(outs, ctxs, rows, strict=True):
                        self._done[id(o)] = (c, SummaryParts(c, *r))
                got = self._done.pop(id(out), None)
        if got is None:  # not one of ours after all: alone
            return (*_alone(out, art), 1)
        return (*got, count)

    def leave(self, out: Any) -> tuple[PredictContext, SummaryParts] | None:
        """Take ``out`` out of the batch (its request wants some methods only): what a
        sibling's call already computed for it, else None (and no sibling computes it)."""
        key = _summary_group(out)
        lock = self._locks.get(key)
        if lock is None:
            return None
        with lock:
            outs = self._waiting.get(key)
            if outs is not None:
                self._waiting[key] = [o for o in outs if o is not out]
            return self._done.pop(id(out), None)


def _alone(out: Any, art: Any, names: list[str] | None = None) -> tuple[PredictContext, Any]:
    with torch.inference_mode():
        ctx = PredictContext.from_run(out, art)
    side = side_worker()
    long = not ctx.out.attn.is_dense
    if names is not None and not long:  # some methods only: cheap, on this thread
        return ctx, SummaryParts.of(ctx, names)
    if side is not None and splits_summary(ctx):  # a long text's few methods too
        got = summary_tables_on_two_cores(ctx, side, names) if names is not None else \
            summary_tables_on_two_cores(ctx, side)  # fmt: skip
        return ctx, SummaryParts(ctx, *got)
    return ctx, SummaryParts.of(ctx, names)


def _summary_group(out: Any) -> tuple:
    """Outputs summarised together: one length and causality (``PredictContext.stack``)."""
    return (out.n, bool(out.causal))


def tie_batch(jobs: list, outs: list) -> None:
    """The model worker's ``after_batch``: tie a batch's outputs to one :class:`SummaryBatch`."""
    batch = SummaryBatch(outs)
    for out in outs:
        if isinstance(getattr(out, "extra", None), dict):
            out.extra[BATCH_KEY] = batch


def summarise(
    out: Any, art: Any, names: list[str] | None = None
) -> tuple[PredictContext, SummaryParts, int]:
    """``(ctx, summary, texts summarised by this call)`` of one output: with its batch's
    siblings when the worker tied it to them (:func:`tie_batch`), else alone. ``names``: the
    methods wanted now (None: every one); the others are computed when asked for."""
    batch = out.extra.pop(BATCH_KEY, None) if isinstance(out.extra, dict) else None
    if batch is not None and names is None:
        return batch.take(out, art)
    if batch is not None:
        done = batch.leave(out)
        if done is not None:
            return (*done, 0)
    return (*_alone(out, art, names), 1)
