"""Errors over HTTP: THE one table that maps error classes to statuses, and the handlers.

Code below the routes never names an HTTP status. It raises, where it finds a problem, a
:class:`~sparse_core.errors.SparsescopeError` (from ``sparse_core``, or one of the engine's own:
:mod:`sparsescope.engine.errors`, :mod:`sparsescope.engine.store`) whose message says what was
wrong and what is allowed and whose ``field`` names the input at fault. :data:`HTTP` maps each
class to a status (the most specific class listed wins) and every error is sent as
``{"detail": str, "field": str | null}``.

400 bad value, 404 unknown id / route, 405 wrong method, 410 a saved share this version cannot
open, 413 body too large, 422 schema, 429 over the client's rate, 499 the client went away, 503
a full queue (or a share store that cannot write), 507 full share storage; a bug becomes a
generic 500 (the trace goes to the log, never to the client). A new kind of refusal is a new
class in the engine and one row in :data:`HTTP`; an error with a ``retry_after`` (seconds) is
sent with a ``Retry-After`` header.
"""

from __future__ import annotations

import logging
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from sparse_core.errors import MalformedValueError, SparsescopeError

from ..engine.errors import (
    Busy,
    ClientGone,
    Gone,
    Invalid,
    NotFound,
    RateLimited,
    TooLarge,
)
from ..engine.store import ShareStoreError, ShareStoreFull, ShareStoreUnavailable
from .schemas import ErrorOut

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- the table


@dataclass(frozen=True)
class Http:
    """How an error class is answered: its status, and whether its message may be shown."""

    status: int
    #: sent instead of the error's own message (which then goes only to the log), for errors
    #: whose message names server-side things such as file paths
    detail: str | None = None


HTTP: dict[type[Exception], Http] = {
    SparsescopeError: Http(400),  # a bad value: every user error not listed below
    NotFound: Http(404),
    Gone: Http(410),
    TooLarge: Http(413),
    Invalid: Http(422),
    MalformedValueError: Http(422),  # a number string outside the plain form
    ShareStoreError: Http(
        500, "the share database cannot be used right now; the server's log says why"
    ),
    ShareStoreFull: Http(507),  # messages without server paths (app/engine/store.py)
    ShareStoreUnavailable: Http(503),
    ClientGone: Http(499),
    Busy: Http(503),
    RateLimited: Http(429),
}


#: What each status means, for the OpenAPI schema of the routes (:func:`documented`).
MEANING = {
    400: "a bad value (the message names the field)",
    404: "unknown id",
    410: "a saved state this version cannot open",
    413: "request body too large",
    422: "the request does not match the schema",
    429: "too many requests from this client: retry after `retry_after` seconds",
    503: "the server is busy (or cannot write): retry after `retry_after` seconds",
    507: "share storage is full",
}


def documented(*statuses: int, **meanings: str) -> dict[int | str, dict[str, Any]]:
    """``responses=`` of a route: each status with the ``{detail, field}`` body, described by
    :data:`MEANING` or by ``meanings`` (``_404="unknown share id"``)."""
    return {
        s: {"model": ErrorOut, "description": meanings.get(f"_{s}", MEANING[s])} for s in statuses
    }


def http_of(exc: Exception) -> Http | None:
    """The row of the most specific class of ``exc`` in :data:`HTTP` (None: not listed)."""
    for cls in type(exc).__mro__:
        if cls in HTTP:
            return HTTP[cls]
    return None


def _utf8(s: str | None) -> str | None:
    """``s`` with any lone surrogate (from JSON's ``"\\ud800"`` or a path) written as ``\\ud800``,
    so that echoing a bad field name or value can never fail to encode the error itself."""
    return None if s is None else s.encode("utf-8", "backslashreplace").decode("utf-8")


def error_response(
    status: int,
    detail: str,
    field: str | None = None,
    *,
    retry_after: int | None = None,
    **headers: str,
):
    """The ``{detail, field}`` body every error is sent with (``retry_after`` too, and its
    ``Retry-After`` header, when the client should try again later)."""
    body: dict[str, Any] = {"detail": _utf8(detail), "field": _utf8(field)}
    if retry_after is not None:
        body["retry_after"] = int(retry_after)
        headers = {**headers, "Retry-After": str(int(retry_after))}
    return JSONResponse(body, status_code=status, headers=headers)


def domain_error_response(exc: SparsescopeError) -> JSONResponse:
    """A domain error as its :data:`HTTP` row says (a 400 when its class is not listed)."""
    row = http_of(exc) or HTTP[SparsescopeError]
    if row.detail is not None:
        log.error("%s: %s", type(exc).__name__, exc)
    retry_after = getattr(exc, "retry_after", None)
    if retry_after is not None:
        retry_after = max(0, math.ceil(retry_after))
    return error_response(row.status, row.detail or str(exc), exc.field, retry_after=retry_after)


_REASONS = {
    404: "not found",
    405: "method not allowed",
}


def _field_of(loc: tuple | list) -> str | None:
    """('body', 'alpha') -> 'alpha'; ('query', 'top_k') -> 'top_k'; ('body',) -> None."""
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header", "cookie")]
    return ".".join(parts) or None


def validation_message(exc: RequestValidationError) -> tuple[str, str | None]:
    """A one-line message for the first schema error (and how many more there are).

    ``{"text": 3}`` -> ``text must be a valid string, got 3``; pydantic's "Input should be" is
    turned into "<field> must be", which already says what is allowed.
    """
    errors = exc.errors()
    if not errors:
        return "the request does not match the schema", None
    err = errors[0]
    kind = err.get("type", "")
    if kind == "json_invalid":
        msg = (err.get("ctx") or {}).get("error", "malformed JSON")
        return f"the request body is not valid JSON ({msg}); send a JSON object", None
    field = _field_of(err.get("loc", ()))
    where = field or "the request body"
    if kind == "missing":
        text = f"{where} is required"
    elif kind == "extra_forbidden":
        text = f"{where} is not a field of this request; remove it"
    else:
        msg = str(err.get("msg", "is invalid"))
        if msg.startswith("Input should be"):
            msg = "must be" + msg[len("Input should be") :]
        elif msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        text = f"{where}: {msg}" if not msg.startswith("must be") else f"{where} {msg}"
        got = None if ", got " in msg else err.get("input")  # the message may show it already
        if got is not None and not isinstance(got, dict | list):
            shown = repr(got)
            text += f", got {shown[:60] + '...' if len(shown) > 60 else shown}"
        elif isinstance(got, dict | list):
            text += f", got a JSON {'object' if isinstance(got, dict) else 'array'}"
    if len(errors) > 1:
        text += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    return text, field


BUG_DETAIL = "internal server error: the server hit a bug; the log has the details"


def wants_html(request: Request) -> bool:
    """A browser opening a page (not the API): its ``Accept`` names ``text/html`` and the path is
    not under ``/api/``. API clients (``Accept: application/json``, ``*/*``) keep the JSON body."""
    accept = request.headers.get("accept", "")
    return "text/html" in accept and not request.url.path.startswith("/api/")


#: Renders the HTML page of a routing error for a browser: (request, status, message) -> page.
PageMaker = Callable[[Request, int, str], Response]


def install_error_handlers(app: FastAPI, page: PageMaker | None = None) -> None:
    """Every error as ``{detail, field}``: domain errors by :data:`HTTP`, schema errors as 422,
    routing errors (404, 405) with a hint. A bug is answered by ``middleware.CatchBugs``.
    ``page`` (app/web/render.py ``routing_error_page``): a routing error asked for by a browser
    (:func:`wants_html`) is answered with the styled HTML page it makes, same status."""

    @app.exception_handler(SparsescopeError)
    async def _domain_error(request: Request, exc: SparsescopeError) -> JSONResponse:
        return domain_error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        detail, field = validation_message(exc)
        return error_response(422, detail, field)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail = exc.detail if isinstance(exc.detail, str) else _REASONS.get(exc.status_code, "")
        if exc.status_code == 404 and detail.lower() == "not found":
            detail = f"there is no page or API route at {request.url.path}; see /docs"
        elif exc.status_code == 405:
            detail = f"{request.method} is not allowed on {request.url.path}; see /docs"
        elif exc.status_code == 400 and isinstance(exc.__cause__, UnicodeDecodeError):
            # FastAPI's "There was an error parsing the body": bytes that are not UTF-8 text are
            # malformed JSON like any other, hence the contract's 422
            detail = "the request body is not valid JSON (it is not UTF-8 text); send a JSON object"
            return error_response(422, detail, None)
        elif exc.status_code == 400 and isinstance(exc.__cause__, RecursionError):
            detail = (
                "the request body is nested too deeply to be read (arrays or objects inside "
                "each other hundreds of levels deep); no request of this API needs that"
            )
            return error_response(422, detail, None)
        elif exc.status_code == 400 and isinstance(exc.__cause__, ValueError):
            # e.g. Python's int-string conversion limit: a JSON integer of over 4300 digits
            limit = sys.get_int_max_str_digits()
            if "digits" in str(exc.__cause__):
                detail = (
                    f"the request body holds a number of more than {limit} digits, which cannot "
                    f"be read as JSON here; no field of this API takes one: send numbers of at "
                    f"most {limit} digits"
                )
            else:
                detail = "the request body is not valid JSON; send a JSON object"
            return error_response(422, detail, None)
        if page is not None and exc.status_code in (404, 405) and wants_html(request):
            return page(request, exc.status_code, detail)
        return error_response(exc.status_code, detail, None, **(exc.headers or {}))

    @app.exception_handler(Exception)
    async def _bug(request: Request, exc: Exception) -> JSONResponse:
        log.error("internal error on %s %s", request.method, request.url.path, exc_info=exc)
        return error_response(500, BUG_DETAIL, None)
