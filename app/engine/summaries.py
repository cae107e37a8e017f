"""Summaries of a batched forward's texts, computed together (the analyze body's ``summary``).

The model worker (app/engine/batching.py) runs several texts in one forward; its ``after_batch``
hook (:func:`tie_batch`, installed by the model slot) ties their outputs to one
:class:`SummaryBatch`. Each request then asks :func:`summarise` for its predict context and
summary rows: the first of a batch to ask computes those of every sibling of its length (and
causality) at once (``payloads.summary_texts``: texts of one length stacked, each head's figures
exactly its own text's); the others take theirs. A text run alone is summarised alone, on both
cores (issue 26): the first half of its layers here, the second on a side worker
(:func:`summary_on_two_cores`; each head's figures are its own whatever heads share its context,
as for a stack of texts, so the JSON is byte for byte the one-thread summary's).
"""

from __future__ import annotations

import dataclasses
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import torch

from sparse_core.methods import PredictContext
from sparse_core.methods.context import _shared
from sparse_core.pareto.text_sweep import summary_tables

from .payloads import summary_json, summary_texts

#: Where a batch ties an output to its siblings (``RunOutput.extra``; popped by summarise).
BATCH_KEY = "_summary_batch"
#: A text alone is summarised on two cores from this many tokens (below, the thread hand-over
#: costs more than half its summary) when it has at least two layers.
SPLIT_MIN_TOKENS = 64

_side: ThreadPoolExecutor | None = None
_side_lock = threading.Lock()


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

    def take(self, out: Any, art: Any) -> tuple[PredictContext, str, int]:
        """``(ctx, summary rows as JSON text, texts summarised by this call)`` of ``out`` (one
        of the batch's outputs); the count is 0 when a sibling's call summarised it."""
        key = _summary_group(out)
        lock = self._locks.get(key)
        got, count = None, 0
        if lock is not None:
            with lock:
                outs = self._waiting.pop(key, None)
                if outs is not None:
                    with torch.inference_mode():
                        ctxs = [PredictContext.from_run(o, art) for o in outs]
                    rows = summary_texts(ctxs)
                    count = len(outs)
                    for o, c, r in zip(outs, ctxs, rows, strict=True):
                        self._done[id(o)] = (c, r)
                got = self._done.pop(id(out), None)
        if got is None:  # not one of ours after all: alone
            return (*_alone(out, art), 1)
        return (*got, count)


def _alone(out: Any, art: Any) -> tuple[PredictContext, str]:
    with torch.inference_mode():
        ctx = PredictContext.from_run(out, art)
    if _side_worker() is not None and _splits(ctx):
        return ctx, summary_on_two_cores(ctx, _side_worker())
    return ctx, summary_texts([ctx])[0]


def _splits(ctx: PredictContext) -> bool:
    """Whether a lone text's summary is split over two workers: dense P (a long text's sparse
    one is summarised head by head, memory bounded), two layers or more, enough tokens."""
    return ctx.out.attn.is_dense and ctx.layers >= 2 and ctx.n >= SPLIT_MIN_TOKENS


def summary_on_two_cores(ctx: PredictContext, side: Any) -> str:
    """The summary rows (JSON text) of one text, its first half of layers computed here and the
    second on ``side`` (an executor; numpy and torch release the GIL in their kernels), then
    put together: byte for byte ``summary_texts([ctx])[0]`` (tested), as each head's figures
    are exactly its own in any context holding it (``PredictContext.stack``). What the parts
    memoise for every head (packed patterns) is kept in ``ctx``'s memo for the later routes."""
    half = ctx.layers // 2
    low, high = layer_part(ctx, 0, half), layer_part(ctx, half, ctx.layers)
    other = side.submit(_tables, high)
    (g0, t0), (g1, t1) = _tables(low), other.result()
    gold = np.concatenate([g0, g1])  # (L, H)
    tables = {
        nm: {k: torch.cat([t0[nm][k], t1[nm][k]]) for k in ("recall", "sparsity")} for nm in t0
    }
    for k, v in list(low.cache.items()):
        if _shared(k, v):
            ctx.cache.setdefault(k, v)
    return summary_json(gold, tables)


def _tables(part: PredictContext) -> tuple[np.ndarray, dict]:
    with torch.inference_mode():
        return summary_tables([part])[0]


def layer_part(ctx: PredictContext, first: int, stop: int) -> PredictContext:
    """Layers ``first`` to ``stop - 1`` of ``ctx`` with every head, as a context of their own
    (views of its tensors; as ``PredictContext.view`` for one head): what is drawn per head
    uses the model's own layer indices (``layer_ids``)."""
    ls = slice(first, stop)
    out = ctx.out
    alpha = out.alpha
    if isinstance(alpha, torch.Tensor) and alpha.dim() == 2:  # an (L, H) table
        alpha = alpha[ls]
    sub = dataclasses.replace(
        out,
        queries=out.queries[ls],
        keys=out.keys[ls],
        attn=out.attn.select_layers(first, stop),
        scaling=None if out.scaling is None else out.scaling[ls],
        alpha=alpha,
        extra={},
    )
    art = ctx.artefact
    if art is not None:
        art = dataclasses.replace(
            art,
            W=art.W[ls],
            b=art.b[ls],
            centroids={k: c[ls] for k, c in art.centroids.items()},
        )
    shared = {k: v for k, v in dict(ctx.cache).items() if _shared(k, v)}
    return PredictContext(
        sub,
        art,
        None if ctx.proj_q is None else ctx.proj_q[ls],
        None if ctx.proj_k is None else ctx.proj_k[ls],
        shared,
        ctx.layer_index()[ls],
        ctx.head_index(),
    )


def _side_worker() -> ThreadPoolExecutor | None:
    """The process's one side worker for lone summaries (None on a one-core machine)."""
    global _side
    if (os.cpu_count() or 1) < 2:
        return None
    with _side_lock:
        if _side is None:
            _side = ThreadPoolExecutor(1, thread_name_prefix="sparsescope-summary-side")
    return _side


def _summary_group(out: Any) -> tuple:
    """Outputs summarised together: one length and causality (``PredictContext.stack``)."""
    return (out.n, bool(out.causal))


def tie_batch(jobs: list, outs: list) -> None:
    """The model worker's ``after_batch``: tie a batch's outputs to one :class:`SummaryBatch`."""
    batch = SummaryBatch(outs)
    for out in outs:
        if isinstance(getattr(out, "extra", None), dict):
            out.extra[BATCH_KEY] = batch


def summarise(out: Any, art: Any) -> tuple[PredictContext, str, int]:
    """``(ctx, summary rows as JSON text, texts summarised by this call)`` of one output: with
    its batch's siblings when the worker tied it to them (:func:`tie_batch`), else alone."""
    batch = out.extra.pop(BATCH_KEY, None) if isinstance(out.extra, dict) else None
    if batch is not None:
        return batch.take(out, art)
    return (*_alone(out, art), 1)
