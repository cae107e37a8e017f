"""Connections: how ``sparsescope serve`` runs uvicorn so that slow or idle clients cannot hold
the server (docs/api.md, "Limits").

- a request's head (request line and headers) must arrive within ``header_timeout`` seconds of
  the connection opening, or of the previous response on a kept-alive connection; trickling it
  a byte at a time does not reset the clock (uvicorn's own keep-alive timer restarts on every
  byte, and a fresh connection has no timer at all). The body then has ``header_timeout``
  seconds too (app/web/middleware.py ``BodySizeLimit``: 408).
- an idle kept-alive connection is closed after ``timeout_keep_alive`` seconds;
- at most ``max_connections`` connections are served at once (uvicorn's ``limit_concurrency``:
  beyond it a plain 503);
- the listening socket is bound before the model is loaded, so a port in use is a one-line
  error (exit 2), not a traceback after a minute of loading;
- on SIGTERM (or Ctrl-C) every analysis in flight gets an answer before the process exits
  (:class:`DrainingServer`): the model workers answer what they still queue, and anything
  submitted later, 503 with ``Retry-After`` at once, the forwards already running finish, and
  uvicorn waits up to ``timeout_graceful_shutdown`` seconds for those responses (were
  the queue left to run, analyses still queued would be cut off at that limit).
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from sparse_core.errors import SparsescopeError

log = logging.getLogger(__name__)


#: Seconds uvicorn waits at shutdown for the responses in flight (a forward already running).
GRACEFUL_SHUTDOWN_S = 30


class DrainingServer(uvicorn.Server):
    """uvicorn's server that calls ``on_shutdown`` once, as soon as the first exit signal
    arrives (before uvicorn stops listening and waits for the requests in flight)."""

    def __init__(self, config: uvicorn.Config, on_shutdown: Any) -> None:
        super().__init__(config)
        self._on_shutdown = on_shutdown

    def handle_exit(self, sig: int, frame: Any) -> None:
        if not self.should_exit:
            log.info("signal %d: queued analyses answered 503, running ones finished", sig)
            try:
                self._on_shutdown()
            except Exception:  # the server must still stop
                log.exception("shutdown hook failed")
        super().handle_exit(sig, frame)


def timed_protocol(header_timeout: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol with a request-head deadline (module docstring)."""

    class TimedH11Protocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm_head_timer()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:  # a whole request head has arrived
                self._cancel_head_timer()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
                self._arm_head_timer()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_head_timer()
            super().connection_lost(exc)

        def _arm_head_timer(self) -> None:
            self._cancel_head_timer()
            self._head_timer = self.loop.call_later(header_timeout, self._head_timed_out)

        def _cancel_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_timed_out(self) -> None:
            self._head_timer = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                log.info("closing a connection that sent no request head in %g s", header_timeout)
                self.transport.close()

    return TimedH11Protocol


def bind(host: str, port: int) -> socket.socket:
    """The listening socket (uvicorn's own options); a clear error when it cannot be bound."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        raise SparsescopeError(f"cannot bind {host}:{port}: {exc.strerror or exc}") from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
        sock.set_inheritable(True)
    except OSError as exc:
        sock.close()
        hint = " (is another server running there? try --port)" if exc.errno == 98 else ""
        raise SparsescopeError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}{hint}"
        ) from None
    return sock


def uvicorn_options(settings: Any) -> dict[str, Any]:
    """uvicorn.Config keywords for the connection limits in ``settings``."""
    return {
        "http": timed_protocol(settings.header_timeout),
        "timeout_keep_alive": settings.timeout_keep_alive,
        "limit_concurrency": settings.max_connections,
        "timeout_graceful_shutdown": GRACEFUL_SHUTDOWN_S,
        # uvicorn trusts X-Forwarded-For from 127.0.0.1 by default: any local client could then
        # claim any address and escape the per-address rate limits
        **proxy_options(getattr(settings, "trusted_proxies", None)),
    }


def proxy_options(trusted: str | None) -> dict[str, Any]:
    """uvicorn's proxy-header keywords: off unless ``trusted`` names the proxies."""
    names = [n.strip() for n in (trusted or "").split(",") if n.strip()]
    if not names:
        return {"proxy_headers": False, "forwarded_allow_ips": ""}
    return {"proxy_headers": True, "forwarded_allow_ips": ",".join(names)}
