"""A lone analysis' work after the forward on both cores, bit for bit one thread's.

The model worker gives a text alone in its round a second worker for the forward (half of every
linear layer's rows and of every layer's heads: ``sparse_core.runtime.Runtime``). What follows on
the request's thread is mostly numpy and torch kernels, which release the GIL, so it also takes
the second core, on the process's one side worker (:func:`side_worker`):

* the analyze body's summary (every method at its defaults, every head): half of the layers
  here, half there (:func:`summary_on_two_cores`), each a context of its own
  (:func:`layer_part`);
* the Pareto sweep of every head (the mean over heads): the same split by layers;
* one head's Pareto sweep (the page's first plot): the methods shared out between the two
  workers, each taking the next method as it finishes one (:func:`sweep_head_on_two_cores`).

Each head's figures are exactly its own whatever other heads share its context (the premise of
``PredictContext.stack`` and ``PredictContext.view``, tested there), and each method's figures
its own whatever other methods are swept beside it, so the bodies are byte for byte those of
one thread (tests/app/test_lone.py). Several lone analyses at once share the one side worker
(the second core): a part it has not started when this thread is done with its own is done
here (never waiting behind another request); a burst is batched by the model worker and
summarised together instead.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any

import numpy as np
import torch

from sparse_core.bitsets import Gold
from sparse_core.cancel import carry
from sparse_core.methods import METHODS, PredictContext, available
from sparse_core.methods.context import _shared
from sparse_core.pareto import TextSweep
from sparse_core.pareto.points import sweep_points
from sparse_core.pareto.text_sweep import summary_tables, sweep_text

from .payloads import summary_json

#: A text's summary or sweep is split from this many tokens (below, the hand-over to the
#: other thread costs more than it saves).
SPLIT_MIN_TOKENS = 64

_side: ThreadPoolExecutor | None = None
_side_lock = threading.Lock()


def side_worker() -> ThreadPoolExecutor | None:
    """The process's one side worker (None on a one-core machine)."""
    global _side
    if (os.cpu_count() or 1) < 2:
        return None
    with _side_lock:
        if _side is None:
            _side = ThreadPoolExecutor(1, thread_name_prefix="sparsescope-side")
    return _side


def splits(ctx: PredictContext) -> bool:
    """Whether a text's every-head work is split by layers: dense P (a long text's sparse one is
    worked head by head, memory bounded), two layers or more, enough tokens."""
    return ctx.out.attn.is_dense and ctx.layers >= 2 and ctx.n >= SPLIT_MIN_TOKENS


def splits_summary(ctx: PredictContext) -> bool:
    """Whether a text's summary is split by layers: :func:`splits`, or a long text held sparse
    of two layers or more (each half then worked head by head, memory bounded per head)."""
    return splits(ctx) or (ctx.layers >= 2 and ctx.n >= SPLIT_MIN_TOKENS)


def summary_on_two_cores(ctx: PredictContext, side: Executor) -> str:
    """The summary rows (JSON text) of one text, the first half of its layers computed here and
    the second on ``side``, put together: byte for byte ``payloads.summary_texts([ctx])[0]``.
    What the parts memoise for every head (packed patterns) is kept in ``ctx``'s memo."""
    return summary_json(*summary_tables_on_two_cores(ctx, side))


def summary_tables_on_two_cores(
    ctx: PredictContext, side: Executor, names: list[str] | None = None
) -> tuple:
    """``summary_tables([ctx], names)[0]`` (gold sparsity (L, H), the methods' tables) with half
    of the layers on ``side`` (:func:`summary_on_two_cores`' figures before they become JSON)."""
    (g0, t0), (g1, t1) = halves(ctx, side, lambda part: summary_tables([part], names)[0])
    gold = np.concatenate([g0, g1])  # (L, H)
    tables = {
        nm: {k: torch.cat([t0[nm][k], t1[nm][k]]) for k in ("recall", "sparsity")} for nm in t0
    }
    return gold, tables


def sweep_on_two_cores(ctx: PredictContext, side: Executor) -> TextSweep:
    """``pareto.sweep_text(ctx, per_head=True)`` with half of the layers on ``side``: the same
    grids and, per head, the same figures (values (P, L, H) joined along the layers)."""
    a, b = halves(ctx, side, lambda part: sweep_text(part, per_head=True))
    values = {
        nm: {k: np.concatenate([v[k], b.values[nm][k]], axis=1) for k in v}
        for nm, v in a.values.items()
    }
    gold = np.concatenate([a.gold_sparsity, b.gold_sparsity])
    return TextSweep(gold, a.grids, values)


def sweep_head_on_two_cores(ctx: PredictContext, layer: int, head: int, side: Executor):
    """``pareto.sweep_text(ctx.view(layer, head), per_head=True)`` with the methods shared out
    between this thread and ``side``: each takes the next method (costliest first, as listed
    by :func:`cost_order`) until none is left, on a view and gold edges of its own."""
    names = available(ctx.artefact)
    order = cost_order(names)
    todo = iter(order)
    lock = threading.Lock()
    got: dict[str, tuple[list[dict], dict]] = {}

    def work() -> np.ndarray:
        view = ctx.view(layer, head)
        gold = Gold.of(view)
        with torch.inference_mode():
            while True:
                with lock:
                    nm = next(todo, None)
                if nm is None:
                    return gold.sparsity()
                grid = METHODS[nm].grid(view.n, view.artefact)
                pts = sweep_points(view, nm, grid, gold)
                got[nm] = (grid, {k: v.numpy() for k, v in pts.items()})

    other = side.submit(carry(work))  # with this request's cancellation token
    gs = work()
    if not other.cancel():  # not started (the side worker busy elsewhere): nothing left for it
        other.result()
    return TextSweep(gs, {nm: got[nm][0] for nm in names}, {nm: got[nm][1] for nm in names})


def cost_order(names: list[str]) -> list[str]:
    """``names`` costliest first by each method's ``cost_rank`` (sparse_core.methods.base: the
    CPU one head's sweep of it took at n = 512), so that the last method left is a cheap one; a
    method without a rank (unmeasured) comes first, ties keep the given order."""
    ranks = [METHODS[nm].cost_rank for nm in names]
    keyed = [(r is not None, -(r or 0.0), k) for k, r in enumerate(ranks)]
    return [names[k] for *_, k in sorted(keyed)]


def halves(ctx: PredictContext, side: Executor, fn) -> tuple[Any, Any]:
    """``fn`` of the first half of ``ctx``'s layers here and of the second on ``side``; what
    the first half memoised for every head is kept in ``ctx``'s memo for the later routes."""
    half = ctx.layers // 2
    low, high = layer_part(ctx, 0, half), layer_part(ctx, half, ctx.layers)

    def run(part: PredictContext) -> Any:
        with torch.inference_mode():
            return fn(part)

    other = side.submit(carry(run), high)  # with this request's cancellation token
    first = run(low)
    # the side worker busy with another request's part and ours not started: do it here
    second = run(high) if other.cancel() else other.result()
    for k, v in list(low.cache.items()):
        if _shared(k, v):
            ctx.cache.setdefault(k, v)
    return first, second


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
        values=None if out.values is None else out.values[ls],
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
        ctx.cache if ctx.parent_cache is None else ctx.parent_cache,
        {k: v.select(ls, slice(None)) for k, v in ctx.learned.items()},
    )
