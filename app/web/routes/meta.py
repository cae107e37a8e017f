"""``GET /healthz``, ``GET /api/models`` and ``GET /api/methods``."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from ..deps import ServiceDep
from ..errors import documented
from ..openapi import served
from ..schemas import Health, MethodsOut, ModelsOut

router = APIRouter()


@router.get("/healthz", response_model=Health, tags=["meta"])
async def healthz(service: ServiceDep) -> dict:
    """The server is up and the model is loaded: which model, device, artefact and version.

    Async: answered on the event loop, never behind model work in a thread pool."""
    return service.health()


@router.get("/api/models", response_model=ModelsOut, tags=["meta"])
def models(service: ServiceDep) -> dict:
    """The served models (the default first): id, architecture, layers, heads (query and
    key/value), encoder or decoder, token limit, device, and the alphas with learned artefacts."""
    return service.models()


@router.get(
    "/api/methods",
    response_model=MethodsOut,
    tags=["meta"],
    responses=documented(400),
)
def methods(
    service: ServiceDep,
    n: Annotated[
        int,
        Query(
            description="text length in tokens (resolves defaults), from 1 to the model's "
            "positions (GET /api/models: max_tokens)",
            json_schema_extra=served("n", minimum=1),
        ),
    ] = 128,
    model: Annotated[
        str | None,
        Query(
            max_length=300,
            description="a served model's id; omit: the default",
            json_schema_extra=served("model"),
        ),
    ] = None,
) -> dict:
    """Every method with its parameter sliders, defaults resolved for a text of n tokens (and
    sf-kmeans' cluster counts those of the artefact used at the default alpha 1.5)."""
    return {"methods": service.methods(n, model=model)}
