"""Cancelling long computations: a token checked between heads and row blocks.

A caller that may abandon a computation (the server, when the request's client hangs up) runs it
inside :func:`cancellable` with a :class:`threading.Event`; the engine's per-head and per-row-block
accessors (``PredictContext``'s head reads, ``SparseProbs``' head and row reads, the flow's and
the budgets' loops over heads) call :func:`checkpoint`, which raises :class:`Cancelled` once the
event is set. A computation stops at its next head or row block, not at its end, so an abandoned
request frees its CPU and memory within one head's work, and a server shutting down never waits
for work nobody will read.

The token travels in a :class:`~contextvars.ContextVar`: no signature changes, and code run
without a token (the command line, notebooks, tests) pays one context-variable read per head.
Work handed to another thread carries the token only if it is submitted in a copy of the
caller's context (:func:`carry`).

:data:`CHECKPOINTS` counts every checkpoint passed in this process (with or without a token): a
figure that grows while some computation reads heads, and stops growing when none does (the
tests watch it stop after a cancellation).
"""

from __future__ import annotations

import contextvars
import itertools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")


class Cancelled(Exception):
    """The computation's token was set: whoever asked for it no longer wants it."""


#: The cancellation event of the computation running in this thread / task (None: none).
CURRENT: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "sparse_core_cancel", default=None
)

_counter = itertools.count()
_seen = 0


def checkpoints() -> int:
    """How many checkpoints this process has passed (every :func:`checkpoint` call)."""
    return _seen


def checkpoint() -> None:
    """Raise :class:`Cancelled` if the running computation's token is set; else count and return."""
    global _seen
    _seen = next(_counter) + 1  # itertools.count is atomic under the GIL
    event = CURRENT.get()
    if event is not None and event.is_set():
        raise Cancelled("the computation was cancelled")


@contextmanager
def cancellable(event: threading.Event | None) -> Iterator[None]:
    """Run the body with ``event`` as its cancellation token (None: not cancellable)."""
    token = CURRENT.set(event)
    try:
        yield
    finally:
        CURRENT.reset(token)


def carry(fn: Callable[..., T]) -> Callable[..., T]:
    """``fn`` bound to a copy of the caller's context, for a pool thread: the token goes along."""
    ctx = contextvars.copy_context()

    def run(*args: Any, **kwargs: Any) -> T:
        return ctx.run(fn, *args, **kwargs)

    return run
