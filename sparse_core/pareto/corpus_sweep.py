"""The corpus sweep (``sparsescope pareto``; definitions §4, paper §5–§6, Figures 2 and 4).

Every method's grid is evaluated on every text (:func:`sweep_points` per text and method) and the
per-head figures are summed in :class:`Totals`; the figure of a point is then, per head, the mean
over texts (each text weighted equally) and overall the plain mean over heads. ``Totals`` of
disjoint shards merge by addition (:meth:`Totals.merge`), so texts can be split over processes
(``workers``) or machines and the result does not depend on the split beyond float rounding.
:func:`sweep_corpus` takes the inputs in order of length, so that what depends only on n
(BigBird's draws, ``methods.bigbird.width_draws``) is made once per length.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field

import numpy as np
import torch

from ..bitsets import METRICS, Gold
from ..methods import METHODS, PredictContext, available
from .points import points_json, rounded, sweep_points

log = logging.getLogger(__name__)


def corpus_grids(
    names: Sequence[str], n_ref: int, n_min: int, artefact=None
) -> dict[str, list[dict]]:
    """The grid of each method for a corpus: ``Method.grid(n_ref)`` (n_ref = the longest input)
    keeping the points valid for the shortest input n_min (every range grows with n, so they are
    valid for every input)."""
    out = {}
    for name in names:
        method = METHODS[name]
        keep = []
        for p in method.grid(n_ref, artefact):
            try:
                method.validate(n_min, p, artefact)
            except ValueError:
                continue
            keep.append(p)
        out[name] = keep
    return out


@dataclass
class Totals:
    """Per-head sums over texts of every point's figures (add texts, then divide: definitions
    §4)."""

    grids: dict[str, list[dict]]
    sums: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)  # (P, L, H) float64
    gold: np.ndarray | None = None  # (L, H) sum of gold sparsity
    texts: int = 0
    tokens: int = 0
    #: (method, n) -> its grid cleaned by ``Method.validate`` for n (the same for every text of
    #: that length and this artefact); emptied before the sums leave a process
    clean: dict[tuple[str, int], list[dict]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def _points(self, name: str, ctx: PredictContext) -> list[dict]:
        pts = self.clean.get((name, ctx.n))
        if pts is None:
            method = METHODS[name]
            pts = [method.validate(ctx.n, p, ctx.artefact) for p in self.grids[name]]
            self.clean[(name, ctx.n)] = pts
        return pts

    def add_text(self, ctx: PredictContext) -> None:
        if not ctx.out.attn.is_dense and ctx.layers * ctx.heads > 1:
            return self._add_by_head(ctx)
        gold = Gold.of(ctx)
        for name in self.grids:
            got = sweep_points(ctx, name, self._points(name, ctx), gold, clean=True)
            self._add(name, {m: got[m].numpy() for m in METRICS})
        self._add_gold(gold.sparsity(), ctx.n)  # (L, H), from the edge list

    def _add_by_head(self, ctx: PredictContext) -> None:
        """:meth:`add_text` of a long text (P held sparse): each head swept alone on its
        ``PredictContext.view`` (its figures are exactly its own there, as the page's sweep of a
        long text, ``text_sweep._per_head_sweep``), so that what a method builds for a layer
        is built for one head only: memory bounded by a head, not by every head of a layer."""
        L, H = ctx.layers, ctx.heads
        got = {nm: {m: np.zeros((len(self._points(nm, ctx)), L, H)) for m in METRICS}
               for nm in self.grids}  # fmt: skip
        gold = np.zeros((L, H))
        for li in range(L):
            for h in range(H):
                view = ctx.view(li, h)
                g = Gold.of(view)
                for name in self.grids:
                    one = sweep_points(view, name, self._points(name, ctx), g, clean=True)
                    for m in METRICS:
                        got[name][m][:, li, h] = one[m].numpy()[:, 0, 0]
                gold[li, h] = g.sparsity()[0, 0]
        for name, v in got.items():
            self._add(name, v)
        self._add_gold(gold, ctx.n)

    def _add(self, name: str, values: dict[str, np.ndarray]) -> None:
        acc = self.sums.setdefault(name, {})
        for m, v in values.items():
            acc[m] = v if m not in acc else acc[m] + v

    def _add_gold(self, g: np.ndarray, n: int) -> None:
        self.gold = g if self.gold is None else self.gold + g
        self.texts += 1
        self.tokens += n

    def merge(self, other: Totals) -> None:
        for name, acc in other.sums.items():
            mine = self.sums.setdefault(name, {})
            for m, v in acc.items():
                mine[m] = v if m not in mine else mine[m] + v
        if other.gold is not None:
            self.gold = other.gold if self.gold is None else self.gold + other.gold
        self.texts += other.texts
        self.tokens += other.tokens

    def means(self) -> dict[str, dict[str, np.ndarray]]:
        """method -> metric -> (P,) the overall figure: mean over texts, then over heads."""
        return {
            nm: {m: (v / self.texts).mean(axis=(1, 2)) for m, v in acc.items()}
            for nm, acc in self.sums.items()
        }


def sweep_inputs(
    model, texts: Sequence[str], artefact, grids: dict, *, alpha: float = 1.5,
    causal: bool = False, progress: Callable[[int], None] | None = None,
) -> Totals:  # fmt: skip
    """Run the model on each text and add every grid point's figures (one process)."""
    tot = Totals(grids)
    with torch.inference_mode():
        for text in texts:
            out = model.run(text, alpha=alpha, causal=causal, truncate=True, hidden=False)
            tot.add_text(PredictContext.from_run(out, artefact))
            if progress is not None:
                progress(1)
    tot.clean.clear()
    return tot


_WORKER: dict = {}


def _worker_init(model_path, artefact_path, alpha: float, threads: int) -> None:
    """A worker's model and artefact. A failure is kept and raised by the worker's first task
    (the caller reports it once, as its own error), not printed as the pool's traceback: the
    workers of ``sparsescope pareto`` start before it has checked the model path itself."""
    torch.set_num_threads(threads)
    from ..model import load_model
    from ..sparsefinder import load_artefact

    try:
        model = load_model(model_path, device="cpu")
        art = None
        if artefact_path is not False:
            art = load_artefact(artefact_path, model_id=model.model_id, alpha=alpha)
    except Exception as exc:  # noqa: BLE001 - re-raised by _worker_run
        _WORKER.update(error=exc)
        return
    _WORKER.update(model=model, artefact=art)


def _worker_run(texts: list[str], grids: dict, alpha: float, causal: bool) -> Totals:
    if "error" in _WORKER:
        raise _WORKER["error"]
    return sweep_inputs(
        _WORKER["model"], texts, _WORKER["artefact"], grids, alpha=alpha, causal=causal
    )


@dataclass
class CorpusSweep:
    """The corpus sweep: ``to_json()`` is the pareto.json body (app/commands/pareto.py)."""

    model: str
    alpha: float
    causal: bool
    texts: int
    gold_sparsity: float
    grids: dict[str, list[dict]]
    values: dict[str, dict[str, np.ndarray]]  # method -> metric -> (P,)
    per_head: Totals
    fidelity: dict[str, dict[int, float]] | None = None  # method -> point index -> fidelity
    meta: dict = field(default_factory=dict)

    def to_json(self, x: str = "sparsity", block: int | None = None) -> dict:
        """The pareto.json body; frontiers over (x, recall) (``points.check_axis``)."""
        body = points_json(self.grids, self.values, x, block)
        if self.fidelity is not None:
            offset = 0
            for name, grid in self.grids.items():
                got = self.fidelity.get(name, {})
                for k in range(len(grid)):
                    f = got.get(k)
                    body["points"][offset + k]["fidelity"] = None if f is None else rounded(f)
                offset += len(grid)
        return {
            "model": self.model,
            "alpha": self.alpha,
            "causal": self.causal,
            "texts": self.texts,
            "gold_sparsity": rounded(self.gold_sparsity),
            **body,
        }


def sweep_corpus(
    model,
    texts: Sequence[str],
    artefact=None,
    *,
    alpha: float = 1.5,
    causal: bool = False,
    methods: Iterable[str] | None = None,
    workers: int = 1,
    threads: int = 1,
    model_path=None,
    artefact_path=None,
    fidelity_texts: int = 0,
    progress: bool = True,
    pool: Workers | None = None,
) -> CorpusSweep:
    """Sweep every method's grid over ``texts`` (model inputs) and aggregate (definitions §4).

    Grids: :func:`corpus_grids` with n_ref / n_min the longest / shortest input. ``workers`` > 1
    splits the texts over that many processes (``spawn``; each loads the model from
    ``model_path`` and the artefact from ``artefact_path`` — None: the shipped one, False: none —
    and runs torch with ``threads`` threads); sums are merged, so the figures do not depend on
    the split beyond float rounding. ``fidelity_texts`` > 0 adds the output fidelity
    (``metrics.output_fidelity``) of every *frontier* point on the first that many texts (one
    masked forward pass per point and text: costly, hence the subsample); other points get None.
    ``pool``: worker processes started ahead (:class:`Workers`, e.g. while this process loaded
    its model), used when they were started for the same workers, threads, model, artefact and
    α; the caller shuts them down.
    """
    from tqdm.auto import tqdm

    t0 = time.perf_counter()
    names = available(artefact, None if methods is None else list(methods))
    counts = [len(e.ids) for e in model.tokenizer.encode_batch(list(texts))]
    limit = model.config.max_positions
    counts = [min(c, limit) for c in counts]
    grids = corpus_grids(names, max(counts), min(counts), artefact)
    bar = tqdm(total=len(texts), desc="pareto", unit="text", disable=not progress)
    if workers <= 1:
        # by length: what depends only on n (BigBird's draws) is then made once per length
        by_length = [texts[i] for i in sorted(range(len(texts)), key=counts.__getitem__)]
        tot = sweep_inputs(model, by_length, artefact, grids, alpha=alpha, causal=causal,
                           progress=bar.update)  # fmt: skip
    else:
        art_path = artefact_path if artefact is not None else False
        ready = None
        if pool is not None and pool.key == (workers, threads, model_path, art_path, alpha):
            ready = pool.executor
        tot = _parallel(model, artefact, length_chunks(texts, counts, workers), grids, alpha,
                        causal, workers, threads, model_path, art_path, bar, ready)  # fmt: skip
    bar.close()
    values = tot.means()
    sweep = CorpusSweep(
        model=model.model_id,
        alpha=float(alpha),
        causal=bool(causal) or bool(model.config.is_decoder),  # a decoder is always causal
        texts=tot.texts,
        gold_sparsity=float((tot.gold / tot.texts).mean()),
        grids=grids,
        values=values,
        per_head=tot,
        meta={"tokens": tot.tokens, "sweep_seconds": time.perf_counter() - t0},
    )
    if fidelity_texts > 0:
        t1 = time.perf_counter()
        sweep.fidelity = _fidelity(model, texts[:fidelity_texts], artefact, sweep, alpha, causal,
                                   progress)  # fmt: skip
        sweep.meta["fidelity_seconds"] = time.perf_counter() - t1
        sweep.meta["fidelity_texts"] = min(fidelity_texts, len(texts))
    return sweep


def length_chunks(texts: Sequence[str], counts: Sequence[int], workers: int) -> list[list[str]]:
    """The texts in chunks of one length each (what depends only on n, BigBird's draws, is then
    made once per length in the whole sweep), longest first (the shortest, cheapest chunks
    last: an even finish). A length's texts stay together up to ``size`` (at most 8, fewer
    for a small corpus), else they are split into nearly equal chunks."""
    size = max(1, min(8, math.ceil(len(texts) / (4 * workers))))
    groups: dict[int, list[str]] = {}
    for i in sorted(range(len(texts)), key=lambda i: (-counts[i], i)):
        groups.setdefault(counts[i], []).append(texts[i])
    chunks = []
    for g in groups.values():
        parts = math.ceil(len(g) / size)
        cuts = [round(j * len(g) / parts) for j in range(parts + 1)]
        chunks += [g[a:b] for a, b in zip(cuts, cuts[1:], strict=False)]
    return chunks


class Workers:
    """``workers`` − 1 sweep worker processes started ahead of :func:`sweep_corpus` (``pool=``):
    each spawns, loads the model (``model_path``) and the artefact (``artefact_path``; None: the
    shipped one, False: none) at once, so a caller that starts them before loading its own
    model (``sparsescope pareto``) has them ready when the sweep begins instead of a few
    seconds into it. Idle until then; :meth:`shutdown` (or ``with``) ends them."""

    def __init__(self, workers: int, threads: int, model_path, artefact_path, alpha: float):
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        self.key = (workers, threads, model_path, artefact_path, alpha)
        with _child_threads(threads):
            self.executor = ProcessPoolExecutor(
                max_workers=workers - 1,
                mp_context=mp.get_context("spawn"),
                initializer=_worker_init,
                initargs=(model_path, artefact_path, alpha, threads),
            )
            # a process is spawned on a submit (the variables above are read as it starts)
            for _ in range(workers - 1):
                self.executor.submit(_ready)

    def shutdown(self) -> None:
        self.executor.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()


def _ready() -> bool:
    return True


def _parallel(model, artefact, chunks, grids, alpha, causal, workers, threads, model_path,
              artefact_path, bar, ready=None) -> Totals:  # fmt: skip
    """Sweep ``chunks`` with ``workers`` processes: this one (its model is loaded already)
    and ``workers`` − 1 spawned ones (``ready``: an executor of them started ahead, else made
    and shut down here), each taking the next chunk when done with its last. The chunks' sums
    are merged in chunk order, so the result does not depend on who ran which."""
    import multiprocessing as mp
    import threading
    from concurrent.futures import ProcessPoolExecutor

    done: list[Totals | None] = [None] * len(chunks)
    errors: list[BaseException] = []
    lock = threading.Condition()
    cursor = iter(range(len(chunks)))

    def take() -> int | None:
        with lock:
            return None if errors else next(cursor, None)

    def feed(pool) -> None:
        k = take()
        if k is None:
            return
        fut = pool.submit(_worker_run, chunks[k], grids, alpha, causal)

        def finished(f, k=k):
            try:
                part, err = f.result(), None
            except BaseException as e:  # noqa: BLE001  re-raised in the caller's thread
                part, err = None, e
            with lock:
                done[k] = part
                if err is not None:
                    errors.append(err)
                lock.notify_all()
            if err is None:
                bar.update(len(chunks[k]))
                feed(pool)

        fut.add_done_callback(finished)

    executor = nullcontext(ready)  # started ahead: the caller shuts it down
    if ready is None:
        executor = ProcessPoolExecutor(
            max_workers=workers - 1,
            mp_context=mp.get_context("spawn"),
            initializer=_worker_init,
            initargs=(model_path, artefact_path, alpha, threads),
        )
    with _child_threads(threads), executor as pool:
        for _ in range(2 * (workers - 1)):  # one running and one queued per process
            feed(pool)
        try:
            with _own_threads(threads):
                while (k := take()) is not None:
                    part = sweep_inputs(model, chunks[k], artefact, grids, alpha=alpha,
                                        causal=causal, progress=bar.update)  # fmt: skip
                    with lock:
                        done[k] = part
        except BaseException as e:  # noqa: BLE001  (an interrupt too): hand out no more chunks
            with lock:
                errors.append(e)
            raise
        with lock:  # the spawned processes' last chunks
            lock.wait_for(lambda: errors or all(d is not None for d in done))
    if errors:
        raise errors[0]
    tot = Totals(grids)
    for part in done:
        tot.merge(part)
    return tot


@contextmanager
def _own_threads(threads: int):
    """Run this process's share with ``threads`` torch and BLAS threads (as the workers)."""
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - numpy then keeps its own BLAS threads
        threadpool_limits = None
    try:
        if threadpool_limits is None:
            yield
        else:
            with threadpool_limits(limits=max(1, int(threads)), user_api="blas"):
                yield
    finally:
        torch.set_num_threads(old)


#: thread-count variables of the BLAS / OpenMP runtimes numpy and torch load
_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


@contextmanager
def _child_threads(threads: int):
    """Start child processes with ``threads`` BLAS / OpenMP threads (the variables are read when
    a spawned worker loads numpy, before any initializer runs): numpy's OpenBLAS would otherwise
    start one thread per core in every worker, which on a small machine only spin-wait against
    each other (twice the CPU time of the sweep's matrix products)."""
    old = {k: os.environ.get(k) for k in _THREAD_VARS}
    os.environ.update({k: str(max(1, int(threads))) for k in _THREAD_VARS})
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _fidelity(model, texts, artefact, sweep: CorpusSweep, alpha, causal, progress) -> dict:
    """Output fidelity (mean over ``texts``) of every frontier point of every method."""
    from tqdm.auto import tqdm

    from ..metrics import output_fidelity

    body = points_json(sweep.grids, sweep.values)
    todo = []
    offset = 0
    for name, grid in sweep.grids.items():
        todo += [(name, k - offset) for k in body["frontiers"][name]]
        offset += len(grid)
    sums = {key: 0.0 for key in todo}
    bar = tqdm(total=len(todo) * len(texts), desc="fidelity", unit="pass", disable=not progress)
    with torch.inference_mode():
        for text in texts:
            out = model.run(text, alpha=alpha, causal=causal, truncate=True)
            ctx = PredictContext.from_run(out, artefact)
            for name, k in todo:
                mask = METHODS[name].predict(ctx, **sweep.grids[name][k])
                sums[(name, k)] += output_fidelity(model, out, mask)
                bar.update(1)
    bar.close()
    res: dict[str, dict[int, float]] = {}
    for (name, k), v in sums.items():
        res.setdefault(name, {})[k] = v / len(texts)
    return res
