"""What a route receives: the service and the share store of the running app, and
the path parameters, each type defined once (its description is the OpenAPI one)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Path, Query, Request
from fastapi.routing import APIRoute

from sparse_core.errors import SparsescopeError

from ..engine.service import AnalysisService
from ..engine.store import ShareStore
from .openapi import bounded, served

# Both are ``async``: FastAPI runs a plain ``def`` dependency in the default thread pool, so
# /healthz (async itself) queued behind every waiting request for a thread just to read an
# attribute: 1.4-3.9 s during a burst of 300 analyses.


async def get_service(request: Request) -> AnalysisService:
    return request.app.state.service


async def get_store(request: Request) -> ShareStore:
    """The share store, opened by the app's lifespan (app/web/main.py)."""
    return request.app.state.share_store


#: Endpoints that read a free query string (a method's parameters): unknown keys are theirs.
FREE_QUERY: set[str] = set()
_KNOWN: dict[int, frozenset[str]] = {}


def free_query(endpoint: Any) -> Any:
    """Mark a route's function as reading its own query keys (:func:`known_query` lets them by)."""
    FREE_QUERY.add(endpoint.__qualname__)
    return endpoint


def _query_names(dependant: Any) -> set[str]:
    """The query keys a route (its dependant and every sub-dependency) takes."""
    names = {p.alias for p in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return names


async def known_query(request: Request) -> None:
    """Every JSON API route (``/api/...``) refuses a query key it does not take, with a 400
    naming it and the ones allowed (``?prat=graph`` is a typo, never silently ignored; the
    OpenAPI schema says so: schemathesis' negative checks hold the API to it). Pages read
    their view from free query strings and are not checked."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute) or not route.path.startswith("/api/"):
        return
    if route.endpoint.__qualname__ in FREE_QUERY:
        return
    known = _KNOWN.get(id(route))
    if known is None:
        known = _KNOWN[id(route)] = frozenset(_query_names(route.dependant))
    unknown = sorted(k for k in request.query_params if k not in known)
    if unknown:
        allowed = ", ".join(sorted(known)) or "none"
        raise SparsescopeError(
            f"unknown query parameter {unknown[0]!r}; {route.path} takes: {allowed}",
            field=unknown[0],
        )


ServiceDep = Annotated[AnalysisService, Depends(get_service)]
StoreDep = Annotated[ShareStore, Depends(get_store)]

AnalysisId = Annotated[str, Path(description="the id returned by POST /api/analyze")]
#: Below the analysis' own model's layers / heads (GET /api/models); the schema's maximum is
#: the largest of the served models' (app/web/openapi.py), a 404 naming the index beyond.
Layer = Annotated[
    int,
    Path(
        description="layer index, from 0, below the analysis' model's layers (GET /api/models)",
        json_schema_extra=served("layer", minimum=0),
    ),
]
Head = Annotated[
    int,
    Path(
        description="head index, from 0, below the analysis' model's heads (GET /api/models)",
        json_schema_extra=served("head", minimum=0),
    ),
]
#: A head of the corpus results (``serve --results DIR``): below their own (layers, heads).
ResultsLayer = Annotated[
    int,
    Path(
        description="layer index, from 0, below the results' heads.layers (GET /api/results)",
        json_schema_extra=bounded(minimum=0),
    ),
]
ResultsHead = Annotated[
    int,
    Path(
        description="head index, from 0, below the results' heads.heads (GET /api/results)",
        json_schema_extra=bounded(minimum=0),
    ),
]
ShareId = Annotated[str, Path(description="a share id returned by POST /api/share")]
Slug = Annotated[str, Path(description="an example's slug, see /api/gallery")]


def QueryLayer(description: str) -> Any:  # noqa: N802 (used as a type's metadata, like Query)
    """An optional ``layer`` query parameter, bounded as :data:`Layer` is."""
    return Query(
        description=f"{description}; from 0, below the analysis' model's layers",
        json_schema_extra=served("layer", minimum=0),
    )


def QueryHead(description: str) -> Any:  # noqa: N802
    """An optional ``head`` query parameter, bounded as :data:`Head` is."""
    return Query(
        description=f"{description}; from 0, below the analysis' model's heads",
        json_schema_extra=served("head", minimum=0),
    )
