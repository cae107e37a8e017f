"""The explorer page, ``GET /``, and the vendored Plotly bundle the pages load.

A first visit (``/`` without a ``text`` or ``id`` in its query) opens on an analysed example, the
gallery's :data:`HOME_EXAMPLE`: its view in the ``shared-state`` island (as a gallery page has it,
the query overriding it) and its analysis, open head and Pareto data in the ``preload`` island, so
the page paints it before any request returns. The gallery's warmer computes it at start-up;
otherwise the first visit computes it (a short text) and the service's cache keeps it.

An address that names its own text (``/?text=…`` or ``/?id=…``) opens on the same view as that
example — its layer, head, method, parameters and view flags, in the ``first-view`` island — with
the query's own values winning (frontend/js/main.js). Not carried over: the example's text-bound
fields (its text, locked row, cluster, zoom) and its α (a model trained with entmax opens at its
own α unless the address says otherwise).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, HTMLResponse

from ...engine.errors import RateLimited
from ..gallery import get_example
from ..preload import PRELOAD_ID, charge_query, preload_view, state_with_query
from ..render import PLOTLY_URL, main_page, plotly_bundle, rate_limited_page
from ..shares import ISLAND_ID

router = APIRouter(include_in_schema=False)

#: The gallery example a first visit opens on.
HOME_EXAMPLE = "coreference"
#: The island of the example's view an address with its own text opens on.
FIRST_VIEW_ID = "first-view"
#: The example's ShareState fields that choose how a text is viewed (not which text or α).
FIRST_VIEW_FIELDS = ("layer", "head", "method", "params")
#: View flags tied to the example's own text, not carried over to another text.
TEXT_BOUND_FLAGS = ("zoom",)
#: Static assets are served under versioned URLs (app/web/main.py): cached for a year, immutable.
IMMUTABLE = {"Cache-Control": "public, max-age=31536000, immutable"}


def home_islands(request: Request) -> dict | HTMLResponse:
    """The first visit's islands: the example's view and its preloaded data ({} without one);
    or the 429 page when its query asks for a new analysis over the client's rate."""
    ex = get_example(HOME_EXAMPLE)
    if ex is None:
        return {}
    saved = ex.state.model_dump(mode="json")
    state = state_with_query(saved, request.query_params)
    try:
        charge_query(request, saved, state)
    except RateLimited as exc:
        return rate_limited_page(request, exc)
    view = {
        "id": None,
        "state": state,
        "created": None,
        "home": True,
        "gallery": {"slug": ex.slug, "title": ex.title, "explain": ex.explain,
                    "credit": ex.credit},
    }  # fmt: skip
    islands: dict = {ISLAND_ID: view}
    data = preload_view(request.app.state.service, state)
    if data is not None:
        islands[PRELOAD_ID] = data
    return islands


def first_view() -> dict:
    """The home example's view without its text: what ``/?text=…`` opens on ({} without one)."""
    ex = get_example(HOME_EXAMPLE)
    if ex is None:
        return {}
    state = ex.state.model_dump(mode="json")
    out = {k: state[k] for k in FIRST_VIEW_FIELDS if state.get(k) is not None}
    flags = {k: v for k, v in (state.get("view") or {}).items() if k not in TEXT_BOUND_FLAGS}
    return {**out, "view": flags}


@router.get("/", response_class=HTMLResponse)
def index(request: Request) -> HTMLResponse:
    """The explorer; its state lives in the URL and is restored by the page itself. Without a
    text in the URL it opens on an analysed example (:func:`home_islands`)."""
    q = request.query_params
    islands = {FIRST_VIEW_ID: first_view()} if ("text" in q or "id" in q) else home_islands(request)
    if isinstance(islands, HTMLResponse):
        return islands
    return main_page(request, islands=islands)


def _plotly_path() -> str:
    return str(plotly_bundle())


@router.get(PLOTLY_URL)
def plotly_js() -> FileResponse:
    """The vendored Plotly bundle (render.PLOTLY_BUNDLE: plotly.js's cartesian distribution; no
    CDN)."""
    return FileResponse(
        _plotly_path(),
        media_type="text/javascript",
        headers={"Cache-Control": "public, max-age=86400"},
    )


@router.get("/v/{version}/plotly.min.js")
def plotly_js_versioned(version: str) -> FileResponse:
    """The same bundle under the pages' versioned URL (render.asset_urls): immutable. Any
    version answers (a page rendered before an upgrade still gets a Plotly)."""
    return FileResponse(_plotly_path(), media_type="text/javascript", headers=IMMUTABLE)
