"""Pure ASGI middleware: bugs answered as a plain 500, a request-body size cap (413) and read
timeout (408), security headers on every response, a Host-header allowlist (400) and HEAD
answered wherever GET is."""

from __future__ import annotations

import ipaddress
import logging
import re

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .errors import BUG_DETAIL, error_response

log = logging.getLogger(__name__)

#: Scripts only from this origin (no inline script, no eval); the page's server data comes in
#: ``<script type="application/json">`` islands, which are data, not scripts. Plotly sets inline
#: style attributes, hence 'unsafe-inline' for styles only; data:/blob: images for PNG/SVG export.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)

SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]


class HttpMiddleware:
    """A pure ASGI middleware that acts on HTTP requests only (:meth:`http`); lifespan and other
    messages pass straight through."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.http(scope, receive, send)

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        raise NotImplementedError


class CatchBugs(HttpMiddleware):
    """An unexpected exception becomes the generic 500 right here (the innermost middleware, so
    the others wrap its answer).

    Starlette's handler for ``Exception`` (its ServerErrorMiddleware) re-raises after answering,
    and uvicorn then closes the connection under the client: a keep-alive client's *next* request
    on it fails with "connection reset". Answered here, the request ends normally. (After the
    response has started there is no honest answer left; then the exception goes on up.)
    """

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def send_tracking(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, send_tracking)
        except Exception as exc:
            if started:
                raise
            log.error("internal error on %s %s", scope["method"], scope["path"], exc_info=exc)
            await error_response(500, BUG_DETAIL, None)(scope, receive, send)


class SecurityHeaders(HttpMiddleware):
    """Add :data:`SECURITY_HEADERS` to every HTTP response (headers it already has stay).

    A response that sets its own Content-Security-Policy (e.g. an embeddable page with its own
    ``frame-ancestors``) gets no X-Frame-Options either, so the two never disagree.
    """

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {k.lower() for k, _ in headers}
                if b"content-security-policy" in present:
                    present.add(b"x-frame-options")
                headers += [(k, v) for k, v in SECURITY_HEADERS if k not in present]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


class BodySizeLimit(HttpMiddleware):
    """Answer 413 to a request whose body is over ``max_bytes`` (declared or streamed).

    The body is read here (it is small: the cap is about a megabyte) and replayed to the app, so
    a chunked upload without Content-Length is bounded too.
    """

    def __init__(self, app: ASGIApp, max_bytes: int, timeout_s: float | None = None) -> None:
        super().__init__(app)
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s

    async def _reject(self, scope: Scope, receive: Receive, send: Send, size: int | None) -> None:
        got = f"{size} bytes" if size is not None else f"more than {self.max_bytes} bytes"
        detail = (
            f"the request body is {got}; at most {self.max_bytes} bytes are accepted "
            "(shorten the text)"
        )
        await error_response(413, detail, None, connection="close")(scope, receive, send)

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        for key, value in scope.get("headers", []):
            if key == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = None
                if declared is not None and declared > self.max_bytes:
                    await self._reject(scope, receive, send, declared)
                    return
        chunks: list[bytes] = []
        size = 0
        # a body trickled in slower than this is refused (408) instead of holding the server
        with anyio.move_on_after(self.timeout_s) as scope_timer:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > self.max_bytes:
                    await self._reject(scope, receive, send, None)
                    return
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
        if scope_timer.cancelled_caught:
            detail = (
                f"the request body did not arrive within {self.timeout_s:g} s "
                f"({size} bytes came); send it at once"
            )
            await error_response(408, detail, None, connection="close")(scope, receive, send)
            return
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


class HostAllowlist(HttpMiddleware):
    """Answer 400 to a request whose ``Host`` header is not one of ``names`` (DNS rebinding: a
    web page of another site, its name pointed at 127.0.0.1, must not drive this server).

    ``names`` are host names without port; ``None`` lets every host through.
    """

    def __init__(self, app: ASGIApp, names: list[str] | None) -> None:
        super().__init__(app)
        self.names = None if names is None else {n.lower() for n in names}

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.names is not None:
            host = ""
            for key, value in scope.get("headers", []):
                if key == b"host":
                    host = value.decode("latin-1")
                    break
            name = host_name(host)
            if name is None:
                detail = (
                    f"the Host header {host[:100]!r} is malformed: send a host name or an IP "
                    "address ([::1] for IPv6), optionally with :port (1-65535), and nothing else"
                )
                await error_response(400, detail, None)(scope, receive, send)
                return
            if name not in self.names:
                detail = (
                    f"this server does not answer to the host name {name[:100]!r}; it answers "
                    f"to {', '.join(sorted(self.names))} (SPARSESCOPE_ALLOWED_HOSTS)"
                )
                await error_response(400, detail, None)(scope, receive, send)
                return
        await self.app(scope, receive, send)


_NAME = re.compile(r"[a-z0-9_](?:[a-z0-9_.-]{0,252})")
_PORT = re.compile(r"[0-9]{1,5}")


def host_name(host: str) -> str | None:
    """The lower-cased name of a ``Host`` header (RFC 9110 §7.2: ``uri-host [":" port]``), or
    None when it is malformed: ``"LocalHost:8000"`` -> ``"localhost"``, ``"[::1]:80"`` ->
    ``"[::1]"``; ``"[::1]evil"``, ``"localhost:abc"``, ``"localhost:99999"``, ``"localhost:"``,
    ``"user@localhost"`` -> None."""
    host = host.lower()
    if host.startswith("["):
        end = host.find("]")
        name, rest = host[: end + 1], host[end + 1 :]
        try:
            ipaddress.IPv6Address(name[1:-1])
        except ValueError:
            return None
    else:
        name, colon, port = host.partition(":")
        rest = colon + port
        if not _NAME.fullmatch(name):
            return None
    if rest:
        port = rest[1:]
        if rest[0] != ":" or not _PORT.fullmatch(port) or not 1 <= int(port) <= 65535:
            return None
    return name


class HeadAsGet(HttpMiddleware):
    """``HEAD`` wherever ``GET`` works: the request runs as a GET, its headers are sent and its
    body is not (FastAPI's routes answer 405 to HEAD otherwise)."""

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def send_head(message: Message) -> None:
            if message["type"] == "http.response.body":
                if message.get("more_body", False):
                    return
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, send_head)
