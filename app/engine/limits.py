"""Back-pressure and fairness: who may ask for model work, and how much of it may wait.

- :class:`RateLimiter`: a token bucket per client address (``rate_per_s`` refilled, ``rate_burst``
  deep). Over it: :class:`~sparsescope.engine.errors.RateLimited` (429, ``Retry-After``). The
  default lets a lecture hall behind one NAT address through (48 simultaneous analyses and more).
- The work queue itself is the model worker's (app/engine/batching.py): bounded in tokens of text
  (``queue_tokens``) and jobs (``queue_jobs``); beyond it
  :class:`~sparsescope.engine.errors.Busy` (503, ``Retry-After`` from the measured throughput).
- :class:`JobContext`: what a request's model work carries down to the worker, through a
  :class:`~contextvars.ContextVar` (no signature of the service changes): its priority, whether it
  counts against the queue, and an event set when its client has hung up (the worker then drops
  the job before it runs). Work without a context (the gallery's warm-up, tests, the CLI) is
  low priority and never refused.
- :class:`Warmups`: shares warm their analysis through a small bounded queue at low priority,
  never an unbounded pile of background tasks; shutdown drops what is still queued.
"""

from __future__ import annotations

import contextvars
import logging
import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .errors import RateLimited

log = logging.getLogger(__name__)

#: Priorities of model work: what a user waits for, and what merely warms a cache.
NORMAL, LOW = 0, 1
#: Distinct client addresses whose buckets are remembered (the least recently seen are dropped:
#: a dropped bucket is a full one, which errs on the side of serving).
MAX_CLIENTS = 10_000


@dataclass
class JobContext:
    """What the worker needs to know about the request behind a job."""

    priority: int = LOW
    #: counted against (and refused by) the bounded queue; background work is not
    admit: bool = False
    #: set when the client has disconnected: the job is dropped before it runs
    gone: threading.Event = field(default_factory=threading.Event)
    client: str | None = None


#: The context of the model work being asked for in this thread / task (None: background).
CURRENT: contextvars.ContextVar[JobContext | None] = contextvars.ContextVar(
    "sparsescope_job", default=None
)


def current_job() -> JobContext:
    return CURRENT.get() or JobContext()


# ----------------------------------------------------------------------------- rate limit


class RateLimiter:
    """A token bucket per client: ``burst`` requests at once, then ``rate_per_s`` a second.

    ``rate_per_s <= 0`` turns the limit off. ``what`` names the requests in the 429 message.
    """

    def __init__(self, rate_per_s: float, burst: int, what: str, setting: str) -> None:
        self.rate = float(rate_per_s)
        self.burst = max(1, int(burst))
        self.what = what
        self.setting = setting
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    def take(self, client: str | None, cost: float = 1.0, now: float | None = None) -> None:
        """Take ``cost`` from ``client``'s bucket, or raise :class:`RateLimited`."""
        if not self.enabled:
            return
        key = client or "?"
        now = time.monotonic() if now is None else now
        with self._lock:
            level, last = self._buckets.pop(key, (float(self.burst), now))
            level = min(float(self.burst), level + (now - last) * self.rate)
            if level < cost:
                self._buckets[key] = (level, now)
                wait = (cost - level) / self.rate
                raise RateLimited(
                    f"too many {self.what} from your address ({self.burst} at once, then "
                    f"{self.rate:g} a second; {self.setting}); retry in {math.ceil(wait)} s",
                    retry_after=wait,
                )
            self._buckets[key] = (level - cost, now)
            while len(self._buckets) > MAX_CLIENTS:
                self._buckets.popitem(last=False)


# ----------------------------------------------------------------------------- share warm-ups


class Warmups:
    """At most ``max_pending`` warm-ups waiting, run one at a time at low priority in a daemon
    thread; more are skipped (the share's first open then analyses). :meth:`stop` drops the
    queue at shutdown without waiting for it."""

    def __init__(self, max_pending: int) -> None:
        self.max_pending = max_pending
        self._queue: deque[Callable[[], Any]] = deque()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._running = False
        self.skipped = 0
        self.done = 0

    def submit(self, fn: Callable[[], Any]) -> bool:
        """Queue ``fn``; False (skipped) when the queue is full or stopped."""
        with self._cond:
            if self._stopped or len(self._queue) >= self.max_pending:
                self.skipped += 1
                return False
            self._queue.append(fn)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="sparsescope-share-warmups", daemon=True
                )
                self._thread.start()
            self._cond.notify()
            return True

    @property
    def pending(self) -> int:
        return len(self._queue)

    def join(self, timeout: float = 60.0) -> bool:
        """Wait until every queued warm-up has run (tests); False on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._cond:
                if not self._queue and not self._running:
                    return True
            time.sleep(0.01)
        return False

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopped:
                    self._cond.wait()
                if self._stopped:
                    return
                fn = self._queue.popleft()
                self._running = True
            token = CURRENT.set(JobContext(priority=LOW))
            try:
                fn()
            except Exception as exc:  # a warm-up must never take the server down
                log.warning("share warm-up failed: %s", exc)
            finally:
                CURRENT.reset(token)
                with self._cond:
                    self._running = False
                    self.done += 1

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            dropped = len(self._queue)
            self._queue.clear()
            self._cond.notify_all()
        if dropped:
            log.info("shutdown: %d queued share warm-ups dropped", dropped)


@dataclass
class Limits:
    """The app's limits (``app.state.limits``), from the settings."""

    analyses: RateLimiter
    shares: RateLimiter
    warmups: Warmups

    @classmethod
    def from_settings(cls, settings: Any) -> Limits:
        return cls(
            analyses=RateLimiter(
                settings.rate_per_s,
                settings.rate_burst,
                "analyses",
                "SPARSESCOPE_RATE_BURST / SPARSESCOPE_RATE_PER_S",
            ),
            shares=RateLimiter(
                settings.share_rate_per_s,
                settings.share_rate_burst,
                "new shares",
                "SPARSESCOPE_SHARE_RATE_BURST / SPARSESCOPE_SHARE_RATE_PER_S",
            ),
            warmups=Warmups(settings.share_warmups),
        )
