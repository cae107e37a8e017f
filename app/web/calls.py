"""How an async route asks the engine for model work (:func:`model_call`).

The work runs in a thread pool of its own (so that ``/healthz`` and static files, served from
the default pool or the event loop, never wait behind it), as a user's request: normal priority,
admitted by the model worker's bounded queue (app/engine/batching.py), and dropped before it runs
if the client hangs up meanwhile (the request's :class:`~sparsescope.engine.limits.JobContext`,
carried to the worker in a context variable).

The pool's threads are started before the first request, from a thread of their own
(:func:`start_model_threads`, the app's lifespan), never on the event loop: starting a thread
waits until the new thread holds the GIL once, and with the pool's other threads busy in Python
(summaries, JSON) that took 0.4-1.3 s a thread on a loaded machine (docs/benchmarks.md,
"/healthz at a burst's onset"), so
a burst of 300 analyses that started its threads on the loop held ``/healthz`` for seconds.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import anyio
from starlette.requests import Request

from ..engine.limits import CURRENT, NORMAL, JobContext

log = logging.getLogger(__name__)

T = TypeVar("T")

#: A waiting request waits for its client's hang-up message; if the server hands it anything
#: else, it looks again after this many seconds.
DISCONNECT_POLL_S = 0.05
#: Threads waiting on model work at once (each holds no CPU: it waits on the worker's result).
MODEL_THREADS = 256


def client_of(request: Request) -> str | None:
    """The client's address (uvicorn puts a trusted proxy's X-Forwarded-For there)."""
    return request.client.host if request.client else None


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
_starter: threading.Thread | None = None


def _model_pool() -> ThreadPoolExecutor:
    """The model-call threads (created on first use; :func:`start_model_threads` starts them)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(MODEL_THREADS, thread_name_prefix="model-call")
        return _pool


def start_model_threads(count: int = MODEL_THREADS) -> threading.Thread:
    """Start ``count`` threads of the model-call pool now, from a daemon thread of their own
    (returned; the caller need not wait): each thread the pool starts on a request would be
    started on the event loop instead (module docstring).

    Idempotent: the pool lives as long as the process, so its threads are started once; a later
    call (another app's lifespan in the same process) returns the first call's thread, running
    or done. Two starts at once would share the pool's threads between their holds, each hold
    waiting for threads the other start's holds keep busy: both stalled for their 60 s timeouts,
    with every model call queued behind them."""
    global _starter
    with _pool_lock:
        if _starter is not None:
            return _starter
    pool = _model_pool()

    def run() -> None:
        gate = threading.Event()
        started = threading.Semaphore(0)

        def hold() -> None:  # keeps its thread busy until all are started: each submit starts one
            started.release()
            gate.wait(60)

        futures = []
        try:
            for _ in range(count):
                futures.append(pool.submit(hold))
        except RuntimeError:  # the interpreter is shutting down (a short-lived process): no pool
            gate.set()
            return
        for _ in futures:
            started.acquire(timeout=60)
        gate.set()

    t = threading.Thread(target=run, name="model-call-start", daemon=True)
    with _pool_lock:
        if _starter is not None:  # another caller started it meanwhile
            return _starter
        _starter = t
        t.start()
    return t


async def model_call(request: Request, fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn(*args)`` (which may queue model work) as a user's request: normal priority,
    admitted by the bounded queue, dropped if the client hangs up before it runs.

    It runs in a thread pool of its own (:data:`MODEL_THREADS`), not the default one that
    static files and plain routes use; meanwhile the client's connection is watched.
    """
    ctx = JobContext(priority=NORMAL, admit=True, client=client_of(request))
    token = CURRENT.set(ctx)  # the thread runs in a copy of this context
    try:
        result: list[T] = []
        error: list[Exception] = []
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                # the body has been read: the next message is the client's hang-up (or the end
                # of the response, after this task is cancelled). Waiting for it costs nothing,
                # where polling woke every waiting request 20 times a second.
                while not ctx.gone.is_set():
                    message = await request.receive()
                    if message.get("type") == "http.disconnect":
                        ctx.gone.set()
                        log.info("client %s went away; its queued work is dropped", ctx.client)
                        return
                    await anyio.sleep(DISCONNECT_POLL_S)  # anything else: look again later

            tg.start_soon(watch)
            try:
                # the thread runs in a copy of this context (the JobContext above)
                run = contextvars.copy_context().run
                future = asyncio.get_running_loop().run_in_executor(_model_pool(), run, fn, *args)
                with anyio.CancelScope(shield=True):  # as to_thread: waits for the thread
                    result.append(await future)
            except Exception as exc:  # raised below, not as a task group's ExceptionGroup
                error.append(exc)
            finally:
                tg.cancel_scope.cancel()
        if error:
            raise error[0]
        return result[0]
    finally:
        CURRENT.reset(token)
