"""Share links: `POST /api/share`, `GET /api/share/{id}` and the pages `/s/{id}`, `/embed/{id}`.

A share is the page's whole view state (:class:`ShareState`), validated on the way in and again on
the way out, saved in the SQLite database of :mod:`sparsescope.store` under a short unguessable id.
The pages hand the saved state to the browser in a JSON island
``<script type="application/json" id="shared-state">`` (escaped for HTML), and the page's
JavaScript restores it. On creation the analysis of the shared text is warmed in the background,
so that opening the link finds it in the service's cache.
"""

from __future__ import annotations

import importlib
import json
import logging
import math
import re
import threading
from typing import Annotated, Any, Literal
from urllib.parse import urlencode

from fastapi import APIRouter, BackgroundTasks, Depends, Request
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from markupsafe import escape
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    StringConstraints,
    ValidationError,
    WithJsonSchema,
    field_validator,
)

from ..deps import ServiceDep
from ..errors import ApiError, validation_message
from ..middleware import CSP
from ..routes.pages import json_island
from ..schemas import ErrorOut
from ..store import ShareRecord, ShareStore, is_valid_id

log = logging.getLogger(__name__)

router = APIRouter(tags=["share"])

#: sparse_core.methods.METHODS, in its order (tests check that the two agree).
METHOD_NAMES = (
    "window",
    "fixed",
    "strided",
    "bigbird",
    "longformer",
    "reformer",
    "routing",
    "sf-distance",
    "sf-quantization",
    "sf-kmeans",
)
MethodName = Literal[
    "window",
    "fixed",
    "strided",
    "bigbird",
    "longformer",
    "reformer",
    "routing",
    "sf-distance",
    "sf-quantization",
    "sf-kmeans",
]
#: A share's state, serialised as compact UTF-8 JSON, may be at most this large (else 413).
MAX_STATE_BYTES = 64 * 1024
MAX_TEXT_CHARS = 20_000
ISLAND_ID = "shared-state"

MAX_STR_CHARS = 200
Key = Annotated[str, StringConstraints(pattern=r"^[A-Za-z][A-Za-z0-9_.-]{0,39}$")]


def _unicode(value: str) -> str:
    """Reject a lone UTF-16 surrogate (JSON's ``"\\ud800"``): it cannot be stored or served."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"strings must be valid Unicode; character {exc.start} is a lone surrogate"
        ) from None
    return value


def _scalar(value: Any) -> bool | int | float | str:
    """A slider value or view flag: true/false, a finite number or a short string."""
    if isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"numbers must be finite, got {value}")
        return value
    if isinstance(value, str):
        if len(value) > MAX_STR_CHARS:
            raise ValueError(f"strings are at most {MAX_STR_CHARS} characters, got {len(value)}")
        return _unicode(value)
    raise ValueError(
        f"a value must be true/false, a number or a short string, got {type(value).__name__}"
    )


_ScalarType = bool | int | float | str
Scalar = Annotated[_ScalarType, PlainValidator(_scalar, json_schema_input_type=_ScalarType)]


class ShareState(BaseModel):
    """Everything needed to reopen exactly one view of the page."""

    # strict: JSON types as declared (no "true" -> True, false -> 0, "1.5" -> 1.5)
    model_config = ConfigDict(extra="forbid", strict=True)

    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS, description="the analysed text")
    alpha: float = Field(1.5, ge=1.0, le=2.0, description="entmax alpha in [1, 2]")
    causal: bool = Field(False, description="decoder-style mask (j <= i)")
    truncate: bool = Field(False, description="analyse only the model's first positions")
    layer: int | None = Field(0, ge=0, le=1023, description="open layer (null: none chosen)")
    head: int | None = Field(0, ge=0, le=1023, description="open head (null: none chosen)")
    method: MethodName = Field("window", description="the method whose mask is shown")
    params: dict[Key, Scalar] = Field(
        default_factory=dict,
        max_length=32,
        description="the method's slider values, add-ons (window, globals) included",
    )
    token: int | None = Field(None, ge=0, le=100_000, description="selected (locked) query row")
    cluster: int | None = Field(None, ge=0, le=100_000, description="selected k-means cluster")
    lecture_step: int | None = Field(None, ge=0, le=1000, description="lecture step, if any")
    view: dict[Key, Scalar] = Field(
        default_factory=dict,
        max_length=32,
        description="small view flags, e.g. {hideSpecial: true, scope: 'head', tab: 'pareto'}",
    )

    @field_validator("text")
    @classmethod
    def _not_blank(cls, text: str) -> str:
        if not text.strip():
            raise ValueError("text is empty or whitespace only; share a view with some text")
        return _unicode(text)


class ShareIn(BaseModel):
    """``POST /api/share``. ``state`` is checked by hand (size first, then :class:`ShareState`)."""

    model_config = ConfigDict(extra="forbid")

    state: Annotated[dict[str, Any], WithJsonSchema(ShareState.model_json_schema())]


class ShareCreated(BaseModel):
    id: str = Field(description="12 URL-safe characters from secrets.token_urlsafe")
    url: str = Field(description="the page of this view: /s/{id}")
    embed: str = Field(description="a minimal view for an iframe: /embed/{id}")


class ShareOut(BaseModel):
    id: str
    state: ShareState
    created: str = Field(description="UTC creation time, ISO 8601")


ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorOut, "description": "unknown or malformed share id"},
    410: {"model": ErrorOut, "description": "a saved state this version cannot open"},
    413: {"model": ErrorOut, "description": "state over 64 KiB"},
    422: {"model": ErrorOut, "description": "the state does not match ShareState"},
}

ShareId = Annotated[str, PathParam(description="a share id returned by POST /api/share")]


# ----------------------------------------------------------------------------- the store


_store_lock = threading.Lock()


def open_share_store(app: Any) -> ShareStore:
    """The app's :class:`ShareStore` (``<settings.data_dir>/shares.sqlite3``), opened once.

    Call it at start-up so that an unreadable database is reported then, naming the file.
    """
    with _store_lock:
        store = getattr(app.state, "share_store", None)
        if store is None:
            store = ShareStore.in_dir(app.state.settings.data_dir)
            app.state.share_store = store
        return store


def close_share_store(app: Any) -> None:
    store = getattr(app.state, "share_store", None)
    if store is not None:
        store.close()
        app.state.share_store = None


def get_store(request: Request) -> ShareStore:
    return open_share_store(request.app)


StoreDep = Annotated[ShareStore, Depends(get_store)]


# ----------------------------------------------------------------------------- helpers


def _state_size(state: Any) -> int:
    text = json.dumps(state, ensure_ascii=False, separators=(",", ":"))
    return len(text.encode("utf-8", "surrogatepass"))  # lone surrogates: 422 from validation


def _validate_in(state: dict[str, Any]) -> ShareState:
    try:
        return ShareState.model_validate(state)
    except ValidationError as exc:
        errors = [{**e, "loc": ("state", *e["loc"])} for e in exc.errors()]
        detail, field = validation_message(RequestValidationError(errors))
        raise ApiError(422, detail, field) from None


def _unknown(share_id: str) -> ApiError:
    if not is_valid_id(share_id):  # never echo arbitrary input back
        return ApiError(
            404,
            "no such share: a share id is 12 characters of A-Z, a-z, 0-9, - and _ "
            "(check that the link was copied whole)",
            "id",
        )
    return ApiError(
        404,
        f"no share with id {share_id!r}: the link is mistyped or was never created",
        "id",
    )


def load_share(store: ShareStore, share_id: str) -> tuple[ShareRecord, ShareState]:
    """The record and its re-validated state; 404 when unknown, 410 when no longer valid."""
    rec = store.get(share_id)
    if rec is None:
        raise _unknown(share_id)
    try:
        state = ShareState.model_validate_json(rec.state_json)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "state"
        log.warning("share %s no longer validates: %s", share_id, exc)
        raise ApiError(
            410,
            f"share {share_id!r} was saved in a form this version of sparsescope cannot open "
            f"({where}: {err['msg']}); open the page and share the view again",
            "state",
        ) from None
    return rec, state


def share_body(rec: ShareRecord, state: ShareState) -> dict[str, Any]:
    """The ``GET /api/share/{id}`` body, also what the pages' JSON island holds."""
    return {"id": rec.id, "state": state.model_dump(mode="json"), "created": rec.created}


def warm_analysis(service: Any, state: ShareState) -> str | None:
    """Analyse the shared text and prepare its open head now (or find both cached), so the link
    opens at once; the analysis id, or None when the text cannot be analysed."""
    if service is None or not getattr(service, "ready", False):
        return None
    try:
        body = service.analyze(state.text, state.alpha, state.causal, state.truncate)
    except Exception as exc:  # the page shows the same error when it analyses; never fail here
        log.info("shared text not analysed: %s", exc)
        return None
    analysis_id = body.get("id") if isinstance(body, dict) else None
    if analysis_id is not None and state.layer is not None and state.head is not None:
        try:
            service.head(analysis_id, state.layer, state.head)
        except Exception as exc:  # e.g. a head this model does not have: the page clamps it
            log.info("shared head not prepared: %s", exc)
    return analysis_id


# ----------------------------------------------------------------------------- API


@router.post("/api/share", response_model=ShareCreated, responses=ERRORS)
def create_share(
    body: ShareIn, store: StoreDep, service: ServiceDep, tasks: BackgroundTasks
) -> dict[str, str]:
    """Save a view of the page; its link ``/s/{id}`` reopens exactly that view."""
    size = _state_size(body.state)
    if size > MAX_STATE_BYTES:
        raise ApiError(
            413,
            f"the shared state is {size} bytes of JSON; at most {MAX_STATE_BYTES} bytes "
            f"(64 KiB) can be shared: shorten the text (at most {MAX_TEXT_CHARS} characters)",
            "state",
        )
    state = _validate_in(body.state)
    rec = store.create(state.model_dump(mode="json"))
    tasks.add_task(warm_analysis, service, state)
    log.info("share %s created (%d bytes)", rec.id, size)
    return {"id": rec.id, "url": f"/s/{rec.id}", "embed": f"/embed/{rec.id}"}


@router.get("/api/share/{share_id}", response_model=ShareOut, responses=ERRORS)
def get_share(share_id: ShareId, store: StoreDep) -> dict[str, Any]:
    """A saved view: its state (validated again) and creation time."""
    return share_body(*load_share(store, share_id))


# ----------------------------------------------------------------------------- pages

#: The page's Content-Security-Policy, but any site may frame ``/embed/...`` (and only that).
EMBED_CSP = re.sub(r"frame-ancestors[^;]*", "frame-ancestors *", CSP)
PAGE_HEADERS = {"Cache-Control": "no-cache", "X-Robots-Tag": "noindex"}
#: Longest lecture URL query a share redirects to (uvicorn's h11 takes request heads of 16 KiB).
MAX_REDIRECT_QUERY = 8000


def _error_page(exc: ApiError, headers: dict[str, str]) -> HTMLResponse:
    """A small HTML page for a share link that cannot be opened (404 unknown, 410 outdated)."""
    html = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        "<title>sparsescope: share link not found</title></head><body>"
        f"<h1>This share link cannot be opened</h1><p>{escape(exc.detail)}</p>"
        '<p><a href="/" target="_top">Open sparsescope</a></p></body></html>'
    )
    return HTMLResponse(html, status_code=exc.status, headers=headers)


def _with_island(html: str, island_html: str) -> str:
    """Place the island at the end of the body (parsed before the deferred module scripts run)."""
    at = html.rfind("</body>")
    if at < 0:
        at = html.rfind("</html>")
    return html + island_html if at < 0 else html[:at] + island_html + "\n" + html[at:]


def _shared(store: ShareStore, service: Any, share_id: str) -> tuple[ShareState, dict[str, Any]]:
    rec, state = load_share(store, share_id)
    # warm (or hit) the cache now: the page's own POST /api/analyze then answers at once
    analysis = warm_analysis(service, state)
    return state, {**share_body(rec, state), "analysis": analysis}


def _lecture_query(state: ShareState) -> str:
    """The lecture page's own URL state (frontend/js/lecture/state.js)."""
    q: dict[str, str | int | float] = {"step": state.lecture_step or 0, "text": state.text}
    q.update(alpha=state.alpha, causal="1" if state.causal else "0")
    q.update({k: v for k, v in (("layer", state.layer), ("head", state.head)) if v is not None})
    return urlencode(q)


@router.get("/s/{share_id}", response_class=HTMLResponse, include_in_schema=False)
def shared_page(
    share_id: ShareId, request: Request, store: StoreDep, service: ServiceDep
) -> Response:
    """The main page, opened on the shared view: the state rides in the ``shared-state`` island
    (``{id, state, created, analysis}``), which the page's JavaScript restores.

    A share made in the lecture (``lecture_step`` set) redirects to the lecture page at that
    step, whose state lives in its URL; the island goes with the lecture page instead when that
    URL would be too long for a request line.
    """
    try:
        state, data = _shared(store, service, share_id)
    except ApiError as exc:
        return _error_page(exc, PAGE_HEADERS)
    page: Response | None = None
    if state.lecture_step is not None:
        query = _lecture_query(state)
        if len(query) <= MAX_REDIRECT_QUERY:
            return RedirectResponse(f"/lecture?{query}", status_code=303, headers=PAGE_HEADERS)
        lecture = _optional_route("lecture")
        if lecture is not None:
            page = lecture.lecture_page(request)
    if page is None:
        from ..routes.pages import index

        page = index(request, service)
    html = _with_island(bytes(page.body).decode("utf-8"), str(json_island(ISLAND_ID, data)))
    return HTMLResponse(html, headers=PAGE_HEADERS)


def _optional_route(name: str) -> Any:
    try:
        return importlib.import_module(f"sparsescope.routes.{name}")
    except ModuleNotFoundError as exc:
        if exc.name == f"sparsescope.routes.{name}":
            return None
        raise


@router.get("/embed/{share_id}", response_class=HTMLResponse, include_in_schema=False)
def embed_page(
    share_id: ShareId, request: Request, store: StoreDep, service: ServiceDep
) -> HTMLResponse:
    """A minimal view of a shared head (heatmap and metrics) for an ``<iframe>``."""
    headers = {**PAGE_HEADERS, "Content-Security-Policy": EMBED_CSP}
    try:
        state, data = _shared(store, service, share_id)
    except ApiError as exc:
        return _error_page(exc, headers)
    html = request.app.state.jinja.get_template("embed.html").render(
        share_id=data["id"],
        state=state,
        island=json_island(ISLAND_ID, data),
    )
    return HTMLResponse(html, headers=headers)
