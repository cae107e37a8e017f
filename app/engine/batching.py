"""Micro-batching: one worker thread per loaded model runs every forward, several texts at once.

Requests hand their :class:`~sparsescope.engine.request.AnalysisRequest` to
:meth:`ModelWorker.run` and wait. The worker, idle, waits for the
first job, then gathers for ``window_s`` more (or until ``batch_tokens`` are waiting); busy, it
takes whatever piled up during the last forward (no extra wait). Jobs with the same (alpha,
causal, truncate) share ``SparseModel.run_batch`` forwards: texts of different lengths are packed
one after the other in one row, each with its own positions, and each text's attention is
computed on its own tokens only, so each result is exactly (bit for bit, one torch thread) what
``SparseModel.run`` gives for that text alone. A group is cut into forwards of at most
``batch_tokens`` tokens, shortest texts first (short texts do not wait behind long ones). One
forward per round where it fits: fewer forwards and larger summary stacks
(app/engine/summaries.py) cost less CPU than cutting a round to overlap summaries with the next
forward (measured; on this 2-core machine the CPU, not the overlap, bounds a burst).

The queue is bounded (app/engine/limits.py): at most ``queue_tokens`` tokens and ``queue_jobs`` jobs
of user requests wait; beyond that :class:`~sparsescope.engine.errors.Busy` (503) with a ``Retry-
After`` estimated from the measured costs: the forwards' throughput (tokens a second) plus the
summary that follows each forward, per token at that length (app/engine/admission.py). A single job
is always accepted by an empty queue, however long. Low-priority work (share warm-ups, the gallery)
runs only when no user request waits, is bounded by its own job count, and is dropped at shutdown. A
job whose client has disconnected is dropped before it runs.

When the server begins to shut down (SIGTERM, app/commands/serve.py), :meth:`ModelWorker.close`
answers every job still queued, and every job submitted afterwards, with :class:`Busy` (503,
``Retry-After``): only the forward already running is finished, so each waiting request gets an
answer well within uvicorn's graceful-shutdown time.

While analyses keep arriving, an idle worker keeps gathering: each arrival extends the window by
``window_s`` from then, up to ``max_window_s`` after the first (a lecture hall's 48 requests reach
the worker over some 60 ms as the event loop reads them; with a plain 5 ms window the first one
or few ran in a forward of their own, and the rest waited for it). A request that comes alone
still waits only ``window_s``.

Each model slot (app/engine/slot.py) owns one worker, made from the settings when its model is
loaded; the worker takes the slot's ``lock`` around each forward, so any other holder of the lock
(a test pausing the model) still has the model to itself.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from .errors import Busy, ClientGone
from .limits import LOW, NORMAL, JobContext, current_job
from .request import AnalysisRequest, run_together

log = logging.getLogger(__name__)

#: Low-priority jobs (background warm-ups) that may wait at once.
MAX_LOW_JOBS = 64
#: Tokens of low-priority work run in one round at most.
LOW_BATCH_TOKENS = 512
#: Tokens a second assumed before the first batch is measured (for Retry-After only).
START_RATE = 200.0
#: Retry-After (seconds) of the requests refused because the server is shutting down.
SHUTDOWN_RETRY_S = 5
#: A forward is split into parts run side by side only when each part gets at least this many
#: tokens and this many texts (below, the threads cost more than they save).
SPLIT_TOKENS = 128
SPLIT_TEXTS = 4


@dataclass
class Job:
    """One request's forward, queued: ``n`` tokens (specials included) and its context."""

    request: AnalysisRequest
    n: int
    ctx: JobContext
    future: Future = field(default_factory=Future)
    queued: float = field(default_factory=time.monotonic)

    @property
    def group(self) -> tuple:
        """Jobs of one group may share a forward; a window of a long text runs alone."""
        alone = id(self) if self.request.start else 0
        return (*self.request.batch_key, alone)


@dataclass
class WorkerStats:
    batches: int = 0
    forwards: int = 0  # texts run
    largest_batch: int = 0
    split: int = 0  # forwards run as parts side by side
    dropped_gone: int = 0
    dropped_shutdown: int = 0
    refused: int = 0
    sizes: list[int] = field(default_factory=list)  # the last batch sizes (bounded)


class ModelWorker:
    """The one thread that runs ``model``'s forwards (see the module docstring)."""

    def __init__(
        self,
        model: Any,
        lock: threading.Lock | None = None,
        *,
        window_s: float = 0.005,
        max_window_s: float | None = None,
        batch_tokens: int = 4096,
        queue_tokens: int = 16384,
        queue_jobs: int = 512,
        low_jobs: int = MAX_LOW_JOBS,
        run_one: Callable[[Job], Any] | None = None,
        run_many: Callable[[list[Job]], list[Any]] | None = None,
        split: int = 1,
        after_batch: Callable[[list[Job], list[Any]], None] | None = None,
    ) -> None:
        self.model = model
        self.lock = lock or threading.Lock()
        self.window_s = max(0.0, float(window_s))
        #: how long arrivals may keep extending the window (None: not at all)
        self.max_window_s = max(self.window_s, float(max_window_s or 0.0))
        self.batch_tokens = max(1, int(batch_tokens))
        self.queue_tokens = max(1, int(queue_tokens))
        self.queue_jobs = max(1, int(queue_jobs))
        self.low_jobs = max(0, int(low_jobs))
        #: a large forward runs as this many parts side by side (torch releases the GIL in its
        #: kernels, so each part takes a core; at most the machine's cores); 1: never split
        self.split = max(1, min(int(split), os.cpu_count() or 1))
        self._side: ThreadPoolExecutor | None = None
        #: a lone text's second core: half its linear rows and heads (the model's runtime with
        #: this side worker, ``Runtime.beside``: bit for bit its run without it); its own
        #: worker, as the side pool may be busy with a part of a split forward
        self._lone: ThreadPoolExecutor | None = None
        self._alone = False  # the forward now running is one text alone (under ``lock``)
        self._run_one = run_one or self._model_run
        self._run_many = run_many or self._model_run_batch
        self._cond = threading.Condition()
        self._normal: list[Job] = []
        self._low: list[Job] = []
        self._tokens = 0  # tokens of admitted (normal) jobs not yet finished
        self._thread: threading.Thread | None = None
        self._closed = False  # shutting down: nothing more is queued (close)
        self._rate = START_RATE  # tokens a second, measured (EWMA)
        self.stats = WorkerStats()
        #: called with (jobs, outputs) of every batch of two or more, after the forward and
        #: before the requests get their outputs (the model slot ties them together to compute
        #: their summaries at once, app/engine/summaries.py); it must be quick and not raise
        self.after_batch = after_batch
        #: seconds per token of the summary that follows each forward, measured by the service
        #: (app/engine/admission.py ``Costs``); None: the forward's own rate alone
        self.summary_seconds_per_token: Callable[[int], float] | None = None

    # -- asking --------------------------------------------------------------------------------

    def run(self, request: AnalysisRequest, n: int) -> Any:
        """The model's output for ``request`` (``n`` tokens), run in a batch; blocks until done.

        Raises :class:`Busy` when the queue is full, :class:`ClientGone` when the request's
        client disconnected before its turn.
        """
        return self.submit_request(request, n).result()

    def submit_request(self, request: AnalysisRequest, n: int) -> Future:
        """Queue ``request`` (as :meth:`run`) and return the future of its output at once. The
        job's priority and hang-up event come from the caller's :class:`JobContext`."""
        job = Job(request, n, current_job())
        self.submit(job)
        return job.future

    def submit(self, job: Job) -> None:
        with self._cond:
            if self._closed:
                self.stats.refused += 1
                raise _shutting_down()
            if job.ctx.priority == LOW:
                if len(self._low) >= self.low_jobs:
                    self.stats.refused += 1
                    raise Busy("the background queue is full; this work was skipped", retry_after=5)
                self._low.append(job)
            else:
                if job.ctx.admit:
                    self._admit(job.n)
                self._normal.append(job)
                self._tokens += job.n
            self._start()
            self._cond.notify_all()

    def _admit(self, n: int) -> None:
        waiting = len(self._normal)
        if waiting == 0 and self._tokens == 0:
            return  # an idle worker takes any one job, however long
        if self._tokens + n > self.queue_tokens or waiting + 1 > self.queue_jobs:
            self.stats.refused += 1
            queued = sum(j.n for j in self._normal)
            running = max(0, self._tokens - queued)  # tokens of forwards and summaries under way
            wait = sum(j.n * self.seconds_per_token(j.n) for j in self._normal)
            wait += (running + n) * self.seconds_per_token(n)
            raise Busy(
                f"the server is busy: {waiting} analyses ({self._tokens} tokens) are waiting for "
                f"the model, the most it queues (SPARSESCOPE_QUEUE_TOKENS); retry in "
                f"{max(1, round(wait))} s",
                retry_after=wait,
            )

    def seconds_per_token(self, n: int) -> float:
        """What one token of an analysis of ``n`` tokens costs, as measured: its share of the
        forwards (the worker's rate) plus, where the service measures it, its summary's (per
        length class, app/engine/admission.py ``Costs``)."""
        cost = 1.0 / max(self._rate, 1.0)
        if self.summary_seconds_per_token is not None:
            cost += self.summary_seconds_per_token(n)
        return cost

    @property
    def waiting_tokens(self) -> int:
        return self._tokens

    @property
    def waiting(self) -> int:
        return len(self._normal) + len(self._low)

    # -- the worker ----------------------------------------------------------------------------

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._loop, name="sparsescope-model-worker", daemon=True
            )
            self._thread.start()

    def drop_low(self) -> int:
        """Drop the low-priority jobs still queued (the app's shutdown does not wait for them);
        user jobs already queued still run: their requests are waiting. How many were dropped."""
        with self._cond:
            low, self._low = self._low, []
        for job in low:
            job.future.set_exception(Busy("the server is shutting down", retry_after=5))
        self.stats.dropped_shutdown += len(low)
        return len(low)

    def close(self) -> int:
        """Begin the shutdown: the jobs still queued (user and low-priority) get :class:`Busy`
        (503, ``Retry-After``) now, and so does every later :meth:`submit`; the forward already
        running finishes and its requests get their outputs. How many jobs were refused."""
        with self._cond:
            self._closed = True
            jobs, self._normal, self._low = self._normal + self._low, [], []
        for job in jobs:
            self._done(job, error=_shutting_down())
        self.stats.dropped_shutdown += len(jobs)
        return len(jobs)

    @property
    def closed(self) -> bool:
        return self._closed

    def _loop(self) -> None:
        idle = True
        while True:
            with self._cond:
                while not self._normal and not self._low:
                    self._cond.wait()
                    idle = True
                if idle and self.window_s > 0:
                    first = time.monotonic()
                    deadline = first + self.window_s
                    seen = self.waiting
                    while self._pending_tokens() < self.batch_tokens:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            break
                        self._cond.wait(left)
                        if self.waiting > seen:  # more came: wait for company a while longer
                            seen = self.waiting
                            last = first + self.max_window_s
                            deadline = min(time.monotonic() + self.window_s, last)
                jobs = self._take()
            idle = False
            if jobs:
                self._run_round(jobs)

    def _pending_tokens(self) -> int:
        return sum(j.n for j in self._normal) + sum(j.n for j in self._low)

    def _take(self) -> list[Job]:
        """User jobs up to ``batch_tokens`` (at least one), oldest first; else low-priority
        jobs up to :data:`LOW_BATCH_TOKENS` (a user request arriving meanwhile waits at most
        for that small round)."""
        if self._normal:
            return _first(self._normal, self.batch_tokens)
        return _first(self._low, min(self.batch_tokens, LOW_BATCH_TOKENS))

    def _run_round(self, jobs: list[Job]) -> None:
        live = []
        for job in jobs:
            if job.ctx.gone.is_set():
                self.stats.dropped_gone += 1
                self._done(job, error=ClientGone("the client disconnected before its turn"))
            else:
                live.append(job)
        groups: dict[tuple, list[Job]] = {}
        for job in live:
            groups.setdefault(job.group, []).append(job)
        forwards = [f for g in groups.values() for f in _forwards(g, self.batch_tokens)]
        for group in sorted(forwards, key=lambda g: g[0].n):
            group = [j for j in group if not self._drop_if_gone(j)]
            if group and self._closed:  # shutting down: only a forward already running finishes
                self.stats.dropped_shutdown += len(group)
                for job in group:
                    self._done(job, error=_shutting_down())
            elif group:
                self._run_group(group)

    def _drop_if_gone(self, job: Job) -> bool:
        if job.ctx.gone.is_set():
            self.stats.dropped_gone += 1
            self._done(job, error=ClientGone("the client disconnected before its turn"))
            return True
        return False

    def _run_group(self, group: list[Job]) -> None:
        t0 = time.perf_counter()
        parts = self._split(group)
        results: list[tuple[list[Job], list[Any] | None, BaseException | None]] = []
        with self.lock:
            if len(parts) == 1:
                self._alone = len(group) == 1
                try:
                    results.append(self._forward(group))
                finally:
                    self._alone = False
            else:  # the halves of a large forward side by side, one per core
                pending = [self._side_pool().submit(self._forward, p) for p in parts[1:]]
                results.append(self._forward(parts[0]))
                results += [f.result() for f in pending]
        dt = time.perf_counter() - t0
        good = [(part, outs) for part, outs, exc in results if exc is None]
        for part, _, exc in results:
            if exc is not None:  # each waiting request gets the error (a bad text's own)
                for job in part:
                    self._done(job, error=exc)
        if not good:
            return
        jobs = [j for part, _ in good for j in part]
        outs = [o for _, part_outs in good for o in part_outs]
        tokens = sum(j.n for j in jobs)
        if dt > 0:
            self._rate = 0.8 * self._rate + 0.2 * (tokens / dt)
        self.stats.batches += 1
        self.stats.split += len(parts) > 1
        self.stats.forwards += len(jobs)
        self.stats.largest_batch = max(self.stats.largest_batch, len(jobs))
        self.stats.sizes = [*self.stats.sizes[-255:], len(jobs)]
        hook = self.after_batch
        if hook is not None and len(jobs) > 1:
            try:
                hook(jobs, outs)
            except Exception:  # the outputs are still good
                log.exception("after_batch failed")
        for job, out in zip(jobs, outs, strict=True):
            self._done(job, result=out)

    def _forward(self, part: list[Job]) -> tuple[list[Job], list[Any] | None, BaseException | None]:
        try:
            outs = [self._run_one(part[0])] if len(part) == 1 else self._run_many(part)
        except BaseException as exc:
            return part, None, exc
        return part, outs, None

    def _split(self, group: list[Job]) -> list[list[Job]]:
        """A forward of many texts as ``split`` forwards of about equal tokens, run side by side
        (each text is still computed exactly as alone: a packed forward's rows do not depend on
        the other rows); shortest texts in the first part, as in the whole. Below
        :data:`SPLIT_TOKENS` tokens a part, one forward."""
        tokens = sum(j.n for j in group)
        parts = min(self.split, tokens // SPLIT_TOKENS, len(group) // SPLIT_TEXTS)
        if parts < 2:
            return [group]
        return _forwards(group, -(-tokens // parts), most=parts)

    def _side_pool(self) -> ThreadPoolExecutor:
        if self._side is None:
            self._side = ThreadPoolExecutor(
                max_workers=max(1, self.split - 1), thread_name_prefix="sparsescope-model-side"
            )
        return self._side

    def _done(self, job: Job, *, result: Any = None, error: BaseException | None = None) -> None:
        if job.ctx.priority == NORMAL:
            with self._cond:
                self._tokens -= job.n
        if error is not None:
            job.future.set_exception(error)
        else:
            job.future.set_result(result)

    # -- the model -----------------------------------------------------------------------------

    def _model_run(self, job: Job) -> Any:
        runtime = None
        # only on one torch thread: there the halves are bit for bit the whole (with more
        # threads the lone run takes the cores already, and BLAS blocks rows by thread count)
        if self._alone and self.split > 1 and _torch_threads() == 1:
            if self._lone is None:
                self._lone = ThreadPoolExecutor(1, thread_name_prefix="sparsescope-model-lone")
            runtime = self.model.runtime.beside(self._lone)
        return job.request.run(self.model, runtime=runtime)

    def _model_run_batch(self, jobs: list[Job]) -> list[Any]:
        return run_together(self.model, [j.request for j in jobs])


def _shutting_down() -> Busy:
    return Busy(
        "the server is shutting down; retry in a few seconds (it may be restarting)",
        retry_after=SHUTDOWN_RETRY_S,
    )


def _forwards(group: list[Job], budget: int, most: int | None = None) -> list[list[Job]]:
    """Cut one group's jobs into forwards of at most ``budget`` tokens (at least one job each),
    shortest texts first (packed texts need no padding: a forward costs its real tokens);
    ``most``: at most that many forwards (the last takes the rest)."""
    out: list[list[Job]] = []
    cur: list[Job] = []
    total = 0
    for job in sorted(group, key=lambda j: j.n):
        if cur and total + job.n > budget and (most is None or len(out) < most - 1):
            out.append(cur)
            cur, total = [], 0
        cur.append(job)
        total += job.n
    if cur:
        out.append(cur)
    return out


def _first(queue: list[Job], budget: int) -> list[Job]:
    """Remove and return the oldest jobs of ``queue`` within ``budget`` tokens (at least one)."""
    taken, total = [], 0
    for job in queue:
        if taken and total + job.n > budget:
            break
        taken.append(job)
        total += job.n
    del queue[: len(taken)]
    return taken


def _torch_threads() -> int:
    import torch

    return torch.get_num_threads()
