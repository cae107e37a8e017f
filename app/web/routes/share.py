"""Share links: ``POST /api/share``, ``GET /api/share/{id}`` and the pages ``/s/{id}``,
``/embed/{id}`` (app/web/shares.py has the logic, app/engine/store.py the database).

The pages hand the saved state to the browser in the ``shared-state`` JSON island
(``{id, state, created, analysis}``), which the page's JavaScript restores. On creation the
analysis of the shared text is warmed in the background, so that opening the link finds it in
the service's cache.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from ...engine.errors import Gone, NotFound, RateLimited, UnknownModel
from ..calls import client_of
from ..deps import ServiceDep, ShareId, StoreDep
from ..errors import documented, http_of
from ..middleware import CSP
from ..preload import PRELOAD_ID, charge_query, preload_view, state_with_query
from ..render import error_page, lecture_page, main_page, rate_limited_page, render_page
from ..schemas import ShareCreated, ShareIn, ShareOut
from ..shares import (
    ISLAND_ID,
    MAX_REDIRECT_QUERY,
    check_openable,
    check_state,
    lecture_query,
    load_share,
    share_body,
    warm_analysis,
)

log = logging.getLogger(__name__)

router = APIRouter(tags=["share"])

ERRORS = documented(
    400,
    404,
    410,
    413,
    422,
    429,
    503,
    507,
    _400="the state's text is blank (as POST /api/analyze calls it; field state.text)",
    _404="unknown or malformed share id",
    _413="state over 64 KiB",
    _422="the state does not match ShareState",
    _503="the data directory cannot be written right now",
    _507="share storage (or its disk) is full",
)
#: Share pages are not for search engines.
PAGE_HEADERS = {"X-Robots-Tag": "noindex"}
#: The page's Content-Security-Policy, but any site may frame ``/embed/...`` (and only that).
EMBED_CSP = re.sub(r"frame-ancestors[^;]*", "frame-ancestors *", CSP)


@router.post("/api/share", response_model=ShareCreated, responses=ERRORS)
def create_share(
    body: ShareIn, request: Request, store: StoreDep, service: ServiceDep
) -> dict[str, str]:
    """Save a view of the page; its link ``/s/{id}`` reopens exactly that view.

    429 over the client's share rate, 507 when share storage is full, 503 when the data
    directory cannot be written (reading shares keeps working)."""
    limits = request.app.state.limits
    limits.shares.take(client_of(request))
    state = check_openable(service, check_state(body.state))
    rec = store.create(state.model_dump(mode="json"))
    # warmed at low priority through a small bounded queue (else on first open): a burst of
    # shares never piles up model work
    limits.warmups.submit(lambda: warm_analysis(service, state))
    log.info("share %s created", rec.id)
    return {"id": rec.id, "url": f"/s/{rec.id}", "embed": f"/embed/{rec.id}"}


@router.get("/api/share/{share_id}", response_model=ShareOut, responses=ERRORS)
def get_share(share_id: ShareId, store: StoreDep) -> dict[str, Any]:
    """A saved view: its state (validated again) and creation time."""
    return share_body(*load_share(store, share_id))


@router.get("/s/{share_id}", response_class=HTMLResponse, include_in_schema=False)
def shared_page(
    share_id: ShareId, request: Request, store: StoreDep, service: ServiceDep
) -> Response:
    """The main page, opened on the shared view.

    A share made in the lecture (``lecture_step`` set) redirects to the lecture page at that
    step, whose state lives in its URL; the island goes with the lecture page instead when that
    URL would be too long for a request line.
    """
    try:
        rec, state = load_share(store, share_id)
    except (NotFound, Gone) as exc:
        return _cannot_open(request, exc, PAGE_HEADERS)
    try:
        service.slot_for(state.model)
    except UnknownModel as exc:
        return _cannot_open(request, exc, PAGE_HEADERS)
    # warm (or hit) the cache now: the page's own POST /api/analyze then answers at once
    analysis = warm_analysis(service, state)
    if state.lecture_step is not None:
        query = lecture_query(state)
        if len(query) <= MAX_REDIRECT_QUERY:
            return RedirectResponse(f"/lecture?{query}", status_code=303, headers=PAGE_HEADERS)
    islands = {ISLAND_ID: {**share_body(rec, state), "analysis": analysis}}
    if state.lecture_step is None:  # the query overrides the saved view: preload what is shown
        saved = state.model_dump(mode="json")
        view = state_with_query(saved, request.query_params)
        try:
            charge_query(request, saved, view)
        except RateLimited as exc:
            return rate_limited_page(request, exc, PAGE_HEADERS)
        pre = preload_view(service, view)
        if pre is not None:
            islands[PRELOAD_ID] = pre
    page = lecture_page if state.lecture_step is not None else main_page
    return page(request, islands=islands, headers=PAGE_HEADERS)


@router.get("/embed/{share_id}", response_class=HTMLResponse, include_in_schema=False)
def embed_page(
    share_id: ShareId, request: Request, store: StoreDep, service: ServiceDep
) -> HTMLResponse:
    """A minimal view of a shared head (heatmap and metrics) for an ``<iframe>``."""
    headers = {**PAGE_HEADERS, "Content-Security-Policy": EMBED_CSP}
    try:
        rec, state = load_share(store, share_id)
    except (NotFound, Gone) as exc:
        return _cannot_open(request, exc, headers)
    data = {**share_body(rec, state), "analysis": warm_analysis(service, state)}
    return render_page(
        request,
        "embed.html",
        share_id=rec.id,
        state=state,
        islands={ISLAND_ID: data},
        headers=headers,
    )


def _cannot_open(
    request: Request, exc: NotFound | Gone | UnknownModel, headers: dict[str, str]
) -> HTMLResponse:
    """The page for a share link that cannot be opened (404 unknown, 410 outdated, 422 made
    with a model this server does not serve)."""
    return error_page(
        request,
        http_of(exc).status,
        title="share link not found",
        heading="This share link cannot be opened",
        message=str(exc),
        headers=headers,
    )
