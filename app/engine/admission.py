"""Bounded, memory-accounted admission of the work derived from an analysis.

Every request that computes from a cached analysis (metrics, flow, budgets, the Pareto sweep, a
head's method payload, tiles, clusters) runs its computation through the one
:class:`ComputeGate` of the service, as analyses run their forwards through the model worker's
bounded queue (app/engine/batching.py):

- **Bounded.** At most ``slots`` computations run at once, and only while the estimated memory
  of those running stays within ``memory_bytes`` (:func:`estimate_bytes`; one job alone always
  runs, however large). The others wait in arrival order; at most ``queue_jobs`` wait, and a
  request that would wait longer than ``max_wait_s`` (estimated) is not queued: both are refused
  with :class:`~sparsescope.engine.errors.Busy` (503) and a ``Retry-After``.
- **Retry-After from measured costs.** :class:`Costs` keeps, per kind of work, the seconds per
  token it took (an exponentially weighted mean, updated as each job completes); the estimate
  of a wait is what is left of the running jobs plus the jobs queued ahead, each its kind's cost
  per token times its tokens, shared out over the slots. The model worker's 503 for analyses
  uses the same table for the summary that follows each forward (``summary`` seconds per
  token), so an analysis queue of long texts is no longer quoted at the forward's speed alone.
- **Cancelled when its client goes away.** A job runs inside
  :func:`sparse_core.cancel.cancellable` with its request's hang-up event
  (:class:`~sparsescope.engine.limits.JobContext`, set by ``web/calls.model_call``): the engine
  stops at its next head or row block (``sparse_core.cancel.checkpoint``) and the job ends with
  :class:`~sparsescope.engine.errors.ClientGone`; a job waiting its turn is dropped as soon as
  its client leaves. So abandoned work never holds CPU or memory, and a server shutting down
  (SIGTERM) never waits for it.

Work with no request behind it (the command line, notebooks, warm-ups) goes through the same
slots but is never refused.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sparse_core.cancel import Cancelled, cancellable, checkpoints

from .errors import Busy, ClientGone
from .limits import current_job

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Seconds per token assumed for a kind of work before one job of it has been measured (about
#: what a long text's every-head sweep takes on a busy 2-core machine; only for Retry-After).
START_SECONDS_PER_TOKEN = 0.005
#: Weight of each new measurement in the running mean.
EWMA = 0.3
#: A waiting job looks at its client's hang-up event this often (seconds).
WAIT_POLL_S = 0.05
#: Working bytes per cell of one (n, n) head, by kind of work: what the engine holds at once
#: while it reads the graph one head at a time (a head's float32 P, its masks and bitsets). The
#: every-head Pareto sweep also keeps every head's bitsets of the gold graph.
CELL_BYTES = {
    "metrics": 12,
    "flow": 16,
    "budgets": 12,
    "pareto": 24,
    "head": 12,
    "tile": 4,
    "clusters": 4,
    "roles": 12,  # a dense layer's support mask (H bytes a cell); CSR: its edges only
    "summary": 12,
}
DEFAULT_CELL_BYTES = 12


def estimate_bytes(kind: str, n: int) -> int:
    """The estimated peak working memory of one ``kind`` job on an analysis of ``n`` tokens."""
    return CELL_BYTES.get(kind, DEFAULT_CELL_BYTES) * n * n


def length_class(n: int) -> int:
    """The power-of-two class of a length: 257..512 -> 512, 513..1024 -> 1024, ..."""
    return 1 << max(0, int(n) - 1).bit_length()


class Costs:
    """Seconds per token of each kind of work, measured as jobs complete (thread-safe).

    A token of a long text costs more than one of a short text (each query meets more keys), so
    the mean is kept per kind and power-of-two length class (:func:`length_class`); a length
    with no measurement of its own takes the nearest measured class of that kind, scaled by
    the ratio of lengths (work that grows as n per token), else :data:`START_SECONDS_PER_TOKEN`.
    """

    def __init__(self, start: float = START_SECONDS_PER_TOKEN) -> None:
        self.start = start
        self._per_token: dict[tuple[str, int], float] = {}
        self._lock = threading.Lock()

    def observe(self, kind: str, tokens: int, seconds: float) -> None:
        if tokens <= 0 or seconds < 0:
            return
        rate = seconds / tokens
        key = (kind, length_class(tokens))
        with self._lock:
            old = self._per_token.get(key)
            self._per_token[key] = rate if old is None else (1 - EWMA) * old + EWMA * rate

    def per_token(self, kind: str, n: int) -> float:
        """Seconds per token of ``kind`` work on a text of ``n`` tokens, as measured."""
        c = length_class(n)
        with self._lock:
            got = self._per_token.get((kind, c))
            if got is not None:
                return got
            near = [(abs(k[1].bit_length() - c.bit_length()), k[1], v)
                    for k, v in self._per_token.items() if k[0] == kind]  # fmt: skip
        if not near:
            return self.start
        _, other, v = min(near)
        return v * c / other

    def measured(self, kind: str, n: int) -> float | None:
        """The measured seconds per token of ``kind`` at ``n``'s length class, or None."""
        with self._lock:
            return self._per_token.get((kind, length_class(n)))

    def snapshot(self) -> dict[str, float]:
        """``"kind@class"`` -> seconds per token (what ``/healthz`` shows)."""
        with self._lock:
            return {f"{k}@{c}": v for (k, c), v in self._per_token.items()}


@dataclass
class Ticket:
    """One job's place: its kind, tokens, estimated bytes and seconds, and its client's event."""

    kind: str
    n: int
    nbytes: int
    seconds: float
    gone: threading.Event
    admit: bool
    started: float | None = None


@dataclass
class GateStats:
    admitted: int = 0
    completed: int = 0
    refused: int = 0
    cancelled: int = 0  # stopped while running (the client went away)
    dropped: int = 0  # dropped while waiting (the client went away)
    peak_running: int = 0
    peak_waiting: int = 0
    last_retry_after: float | None = None
    by_kind: dict[str, int] = field(default_factory=dict)


class ComputeGate:
    """The service's admission of derived work (see the module docstring)."""

    def __init__(
        self,
        slots: int = 2,
        memory_bytes: int = 1 << 30,
        queue_jobs: int = 32,
        max_wait_s: float = 120.0,
        costs: Costs | None = None,
    ) -> None:
        self.slots = max(1, int(slots))
        self.memory_bytes = max(1, int(memory_bytes))
        self.queue_jobs = max(0, int(queue_jobs))
        self.max_wait_s = float(max_wait_s)
        self.costs = costs or Costs()
        self._cond = threading.Condition()
        self._running: list[Ticket] = []
        self._waiting: deque[Ticket] = deque()
        self.stats = GateStats()

    # -- asking --------------------------------------------------------------------------------

    def run(self, kind: str, n: int, fn: Callable[[], T]) -> T:
        """``fn()`` once admitted, cancellable by the caller's hang-up; its cost is measured.

        Raises :class:`Busy` (503, ``Retry-After``) when the queue is full or the wait would be
        too long, and :class:`ClientGone` when the client left while it waited or ran.
        """
        ctx = current_job()
        ticket = Ticket(
            kind,
            int(n),
            estimate_bytes(kind, int(n)),
            self.costs.per_token(kind, int(n)) * int(n),
            ctx.gone,
            ctx.admit,
        )
        self._enter(ticket)
        t0 = time.perf_counter()
        try:
            with cancellable(ctx.gone if ctx.admit else None):
                result = fn()
        except Cancelled:
            with self._cond:
                self.stats.cancelled += 1
            log.info("client %s went away: its %s work was cancelled", ctx.client, kind)
            raise ClientGone("the client disconnected; its computation was cancelled") from None
        finally:
            self._leave(ticket)
        self.costs.observe(kind, ticket.n, time.perf_counter() - t0)
        with self._cond:
            self.stats.completed += 1
        return result

    def retry_after(self, kind: str, n: int) -> float:
        """The estimated seconds before a ``kind`` job of ``n`` tokens asked now would finish."""
        with self._cond:
            return self._wait_estimate() + self.costs.per_token(kind, n) * n

    # -- the queue -----------------------------------------------------------------------------

    def _wait_estimate(self) -> float:
        """Seconds until a job queued now would start (under ``_cond``): what is left of the
        running jobs and the whole of the waiting ones, over the slots."""
        now = time.perf_counter()
        left = sum(max(0.0, t.seconds - (now - (t.started or now))) for t in self._running)
        ahead = sum(t.seconds for t in self._waiting)
        return (left + ahead) / self.slots

    def _fits(self, ticket: Ticket) -> bool:
        if not self._running:
            return True  # one job alone always runs, however large
        if len(self._running) >= self.slots:
            return False
        used = sum(t.nbytes for t in self._running)
        return used + ticket.nbytes <= self.memory_bytes

    def _enter(self, ticket: Ticket) -> None:
        with self._cond:
            if ticket.admit and (self._waiting or not self._fits(ticket)):
                wait = self._wait_estimate()
                if len(self._waiting) >= self.queue_jobs or wait > self.max_wait_s:
                    self.stats.refused += 1
                    retry = wait + ticket.seconds
                    self.stats.last_retry_after = retry
                    raise Busy(
                        f"the server is busy computing: {len(self._running)} running, "
                        f"{len(self._waiting)} waiting (about {round(wait)} s of work ahead, "
                        f"SPARSESCOPE_COMPUTE_QUEUE_JOBS / SPARSESCOPE_COMPUTE_MAX_WAIT_S); retry "
                        f"in {max(1, round(retry))} s",
                        retry_after=retry,
                    )
            self._waiting.append(ticket)
            self.stats.peak_waiting = max(self.stats.peak_waiting, len(self._waiting))
            try:
                while not (self._waiting[0] is ticket and self._fits(ticket)):
                    if ticket.admit and ticket.gone.is_set():
                        self.stats.dropped += 1
                        raise ClientGone("the client disconnected before its computation ran")
                    self._cond.wait(WAIT_POLL_S)
            except BaseException:
                self._waiting.remove(ticket)
                self._cond.notify_all()
                raise
            self._waiting.popleft()
            ticket.started = time.perf_counter()
            self._running.append(ticket)
            self.stats.admitted += 1
            self.stats.by_kind[ticket.kind] = self.stats.by_kind.get(ticket.kind, 0) + 1
            self.stats.peak_running = max(self.stats.peak_running, len(self._running))
            self._cond.notify_all()

    def _leave(self, ticket: Ticket) -> None:
        with self._cond:
            self._running.remove(ticket)
            self._cond.notify_all()

    # -- looking -------------------------------------------------------------------------------

    @property
    def running(self) -> int:
        return len(self._running)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def info(self) -> dict[str, Any]:
        """What ``/healthz`` shows of the gate: load, counters, measured costs."""
        with self._cond:
            s = self.stats
            return {
                "running": len(self._running),
                "waiting": len(self._waiting),
                "slots": self.slots,
                "memory_bytes": self.memory_bytes,
                "running_bytes": sum(t.nbytes for t in self._running),
                "admitted": s.admitted,
                "completed": s.completed,
                "refused": s.refused,
                "cancelled": s.cancelled,
                "dropped": s.dropped,
                # heads and row blocks read by every computation so far (sparse_core.cancel)
                "checkpoints": checkpoints(),
                "seconds_per_token": {
                    k: round(v, 6) for k, v in sorted(self.costs.snapshot().items())
                },
            }
