"""How an async route asks the engine for model work (:func:`model_call`).

The work runs in a thread pool of its own (so that ``/healthz`` and static files, served from
the default pool or the event loop, never wait behind it), as a user's request: normal priority,
admitted by the model worker's bounded queue (app/engine/batching.py), and dropped before it runs
if the client hangs up meanwhile (the request's :class:`~sparsescope.engine.limits.JobContext`,
carried to the worker in a context variable).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread
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


_limiter: anyio.CapacityLimiter | None = None


def _model_limiter() -> anyio.CapacityLimiter:
    global _limiter
    if _limiter is None:
        _limiter = anyio.CapacityLimiter(MODEL_THREADS)
    return _limiter


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
                result.append(await anyio.to_thread.run_sync(fn, *args, limiter=_model_limiter()))
            except Exception as exc:  # raised below, not as a task group's ExceptionGroup
                error.append(exc)
            finally:
                tg.cancel_scope.cancel()
        if error:
            raise error[0]
        return result[0]
    finally:
        CURRENT.reset(token)
