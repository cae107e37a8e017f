"""What a route receives: the service and the share store of the running app, and
the path parameters, each type defined once (its description is the OpenAPI one)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Path, Query, Request

from ..engine.service import AnalysisService
from ..engine.store import ShareStore
from .openapi import bounded, served

# Both are ``async``: FastAPI runs a plain ``def`` dependency in the default thread pool, so
# /healthz (async itself) queued behind every waiting request for a thread just to read an
# attribute: 1.4-3.9 s during a burst of 300 analyses (issue 26, finding 8).


async def get_service(request: Request) -> AnalysisService:
    return request.app.state.service


async def get_store(request: Request) -> ShareStore:
    """The share store, opened by the app's lifespan (app/web/main.py)."""
    return request.app.state.share_store


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
