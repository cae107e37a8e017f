"""What a route receives: the service and the share store of the running app, and
the path parameters, each type defined once (its description is the OpenAPI one)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Request

from ..engine.service import AnalysisService
from ..engine.store import ShareStore

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
Layer = Annotated[int, Path(description="layer index, from 0")]
Head = Annotated[int, Path(description="head index, from 0")]
ShareId = Annotated[str, Path(description="a share id returned by POST /api/share")]
Slug = Annotated[str, Path(description="an example's slug, see /api/gallery")]
