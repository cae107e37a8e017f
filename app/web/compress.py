"""gzip for JSON, HTML, scripts and styles ("send less"), as pure ASGI middleware.

A 200 response whose type is text-like (:data:`COMPRESSIBLE`), at least ``minimum`` bytes long,
not already encoded and not a range, is sent gzipped to a client whose ``Accept-Encoding`` takes
gzip; every text-like response says ``Vary: Accept-Encoding``. A 512-token analysis' Pareto
data shrinks about 8×, the Plotly bundle 3.0× (docs/benchmarks.md, "Page": 1.50 MB to 0.50 MB).

Files carry an ETag (static assets, the Plotly bundle): their gzipped bytes are kept in a small
LRU keyed by (path, ETag), so a lecture hall loading the page compresses each file once. Their
ETag turns weak (``W/"…"``) when gzipped, as nginx does: Starlette still answers 304 to it, and
no cache takes the gzipped bytes for the identity ones. Bodies over ``THREAD_BYTES`` are
compressed in a worker thread, off the event loop. Other headers (CSP, Cache-Control) are kept.
"""

from __future__ import annotations

import gzip
import threading
from collections import OrderedDict

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .middleware import HttpMiddleware

#: Content types worth compressing (prefixes of the Content-Type header).
COMPRESSIBLE = (
    b"application/json",
    b"application/javascript",
    b"text/",
    b"image/svg+xml",
    b"application/xml",
)
#: Bodies shorter than this are sent as they are (gzip's header would eat the gain).
MIN_BYTES = 1024
#: Bodies at least this long are compressed in a worker thread.
THREAD_BYTES = 64 * 1024
#: gzip level of dynamic bodies (fast) and of cached files (compressed once: smallest).
LEVEL = 5
FILE_LEVEL = 9


def accepts_gzip(scope: Scope) -> bool:
    """Whether the request's ``Accept-Encoding`` takes gzip (a ``q=0`` refuses it)."""
    for name, value in scope.get("headers", []):
        if name == b"accept-encoding":
            for part in value.decode("latin-1").lower().split(","):
                token, _, params = part.strip().partition(";")
                if token.strip() in ("gzip", "*"):
                    q = params.strip()
                    if q.startswith("q="):
                        try:
                            return float(q[2:]) > 0
                        except ValueError:
                            return False
                    return True
    return False


class GzipCache:
    """Gzipped file bodies by (path, ETag), least recently used first out, about ``max_bytes``."""

    def __init__(self, max_bytes: int = 32 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[tuple, bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: tuple) -> bytes | None:
        with self._lock:
            got = self._items.get(key)
            if got is not None:
                self._items.move_to_end(key)
            return got

    def put(self, key: tuple, data: bytes) -> None:
        with self._lock:
            if key in self._items or len(data) > self.max_bytes:
                return
            self._items[key] = data
            self._bytes += len(data)
            while self._bytes > self.max_bytes:
                _, old = self._items.popitem(last=False)
                self._bytes -= len(old)


class Compress(HttpMiddleware):
    """Gzip text-like responses for clients that take it (module docstring)."""

    def __init__(
        self, app: ASGIApp, minimum: int = MIN_BYTES, cache: GzipCache | None = None
    ) -> None:
        super().__init__(app)
        self.minimum = minimum
        self.cache = cache or GzipCache()
        self._pending: dict[tuple, anyio.Event] = {}

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        gzip_ok = accepts_gzip(scope)
        start: Message | None = None  # held while the body is gathered
        chunks: list[bytes] = []
        passing = True

        async def send_compressed(message: Message) -> None:
            nonlocal start, passing
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                have = {k.lower(): v for k, v in headers}
                if not _compressible(have.get(b"content-type", b"")):
                    await send(message)
                    return
                headers = _vary(headers)
                message = {**message, "headers": headers}
                if (
                    gzip_ok
                    and message.get("status", 200) == 200
                    and b"content-encoding" not in have
                    and b"content-range" not in have
                ):
                    start, passing = message, False
                    return
                await send(message)
                return
            if passing or message["type"] != "http.response.body":
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            body = b"".join(chunks)
            chunks.clear()
            assert start is not None
            if len(body) < self.minimum:
                await send(start)
                await send({"type": "http.response.body", "body": body, "more_body": False})
                return
            packed, headers = await self._gzip(scope, start["headers"], body)
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": packed, "more_body": False})

        await self.app(scope, receive, send_compressed)

    async def _file(self, key: tuple, body: bytes) -> bytes:
        """A file's gzipped bytes: from the cache, else compressed once however many requests
        ask for it at the same time (the others wait for that one)."""
        while True:
            got = self.cache.get(key)
            if got is not None:
                return got
            busy = self._pending.get(key)
            if busy is None:
                break
            await busy.wait()
        done = self._pending[key] = anyio.Event()
        try:
            packed = await _compress(body, FILE_LEVEL)
            self.cache.put(key, packed)
        finally:
            del self._pending[key]
            done.set()
        return packed

    async def _gzip(self, scope: Scope, headers: list, body: bytes) -> tuple[bytes, list]:
        etag = next((v for k, v in headers if k.lower() == b"etag"), None)
        key = (scope.get("path", ""), etag) if etag else None
        packed = await (self._file(key, body) if key else _compress(body, LEVEL))
        out = []
        for k, v in headers:
            lk = k.lower()
            if lk == b"content-length":
                continue
            if lk == b"etag" and not v.startswith(b"W/"):
                v = b"W/" + v
            out.append((k, v))
        out += [(b"content-encoding", b"gzip"), (b"content-length", str(len(packed)).encode())]
        return packed, out


def _gzip(body: bytes, level: int) -> bytes:
    return gzip.compress(body, compresslevel=level, mtime=0)


async def _compress(body: bytes, level: int) -> bytes:
    """gzip ``body``; a long one in a worker thread (off the event loop)."""
    if len(body) >= THREAD_BYTES:
        return await anyio.to_thread.run_sync(_gzip, body, level)
    return _gzip(body, level)


def _compressible(content_type: bytes) -> bool:
    ct = content_type.lower()
    if ct.startswith(b"text/event-stream"):  # a stream must not be gathered
        return False
    return any(ct.startswith(p) for p in COMPRESSIBLE)


def _vary(headers: list) -> list:
    """``headers`` with Accept-Encoding in their Vary."""
    for k, (name, value) in enumerate(headers):
        if name.lower() == b"vary":
            if b"accept-encoding" not in value.lower():
                headers[k] = (name, value + b", Accept-Encoding")
            return headers
    return [*headers, (b"vary", b"Accept-Encoding")]
