"""``/api/analyze`` and everything about one analysis (``/api/analyses/{id}/...``).

Plain ``def`` routes: the torch work runs in FastAPI's thread pool, off the event loop. Heavy
bodies are serialised once by the service and sent as bytes (their schema is still declared).
The routes that compute (summary, head payloads, Pareto, budgets, clusters, flow, metrics) run
through :func:`~sparsescope.web.calls.model_call` instead: as a user's request, admitted by the
service's bounded compute gate (app/engine/admission.py: 503 with Retry-After when full), and
cancelled between heads when the client hangs up.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response

from sparse_core.methods import METHODS
from sparse_core.metrics import BLOCKS

from ...engine.request import AnalysisRequest
from ..calls import client_of, model_call
from ..deps import AnalysisId, Head, Layer, QueryHead, QueryLayer, ServiceDep, free_query
from ..errors import documented
from ..openapi import bounded, served
from ..schemas import (
    Analysis,
    AnalyzeRequest,
    Budgets,
    Clusters,
    Flow,
    HeadMetrics,
    HeadPayload,
    HeadSummary,
    MethodName,
    Pareto,
    Roles,
    Tile,
)

router = APIRouter(prefix="/api", tags=["analyses"])

ERRORS = documented(
    400,
    404,
    413,
    422,
    _404="unknown or evicted analysis id (field id), or a part this analysis does not have: "
    "a layer, head, token, tile or k-means fit beyond its own (field names it)",
)
MIN0 = bounded(minimum=0)
MIN1 = bounded(minimum=1)
IN_PYRAMID = "below the level's tiles (the head payload's lod.levels; 404 beyond)"
#: The analyze route may also be refused for now (app/engine/limits.py).
ANALYZE_ERRORS = {**ERRORS, **documented(429, 503)}
#: The computing routes may be refused for now too (app/engine/admission.py).
COMPUTE_ERRORS = {**ERRORS, **documented(503)}


def json_bytes(body: bytes) -> Response:
    return Response(content=body, media_type="application/json")


@router.post("/analyze", response_model=Analysis, responses=ANALYZE_ERRORS)
async def analyze(req: AnalyzeRequest, request: Request, service: ServiceDep) -> Response:
    """Run the model on a text (or answer from the cache): tokens, per-head summary, methods.

    429 over the client's rate, 503 when the model's queue is full (both with ``Retry-After``).
    """
    request.app.state.limits.analyses.take(client_of(request))
    body = await model_call(request, service.analyze_json, AnalysisRequest.of(req), req.summary)
    return json_bytes(body)


@router.get("/analyses/{analysis_id}", response_model=Analysis, responses=COMPUTE_ERRORS)
async def get_analysis(analysis_id: AnalysisId, request: Request, service: ServiceDep) -> Response:
    """The analyze body of a cached analysis (404 once evicted: POST the text again)."""
    return json_bytes(await model_call(request, service.analysis_json, analysis_id))


@router.get(
    "/analyses/{analysis_id}/summary", response_model=list[HeadSummary], responses=COMPUTE_ERRORS
)
async def get_summary(
    analysis_id: AnalysisId,
    request: Request,
    service: ServiceDep,
    method: Annotated[
        list[MethodName],
        Query(
            description="a method whose figures the rows hold (repeat for several); none: "
            "every method the analysis has. An sf-* method on an analysis without a "
            "Sparsefinder artefact: 404",
            max_length=len(METHODS),
        ),
    ] = [],  # noqa: B006 - FastAPI copies a list default
) -> Response:
    """Per head (layer-major), the gold sparsity and the named methods' recall and sparsity at
    their defaults: the analyze body's ``summary`` rows for those methods (what an analysis
    asked with ``summary`` left out), computed once and kept with the analysis."""
    return json_bytes(await model_call(request, service.summary, analysis_id, method or None))


@router.get(
    "/analyses/{analysis_id}/heads/{layer}/{head}",
    response_model=HeadPayload,
    responses=COMPUTE_ERRORS,
)
async def get_head(
    analysis_id: AnalysisId,
    layer: Layer,
    head: Head,
    request: Request,
    service: ServiceDep,
    part: Annotated[
        Literal["all", "graph", "methods"],
        Query(
            description="all (default); graph: the edges as packed CSR (csr), pos and seed, what "
            "the heatmap needs; methods: every method's data (proj, centroids, topk, ...) alone"
        ),
    ] = "all",
    method: Annotated[
        list[MethodName],
        Query(
            description="a method whose data the payload carries (repeat for several): with "
            "all or methods, only these methods' data (default: every method's, today's "
            "payload); with graph, these methods' data besides the graph (default: none). "
            "seed is always there. An sf-* method on an analysis without a Sparsefinder "
            "artefact: its empty data (proj null)",
            max_length=len(METHODS),
        ),
    ] = [],  # noqa: B006 - FastAPI copies a list default
) -> Response:
    """One head: its entmax edges and what the page needs to recompute every method's mask
    (the page asks for the graph and the shown method's data first, then the methods' part)."""
    body = await model_call(request, service.head, analysis_id, layer, head, part, method or None)
    return json_bytes(body)


@router.get(
    "/analyses/{analysis_id}/heads/{layer}/{head}/tiles/{level}/{ti}/{tj}",
    response_model=Tile,
    responses=ERRORS,
)
def get_tile(
    analysis_id: AnalysisId,
    layer: Layer,
    head: Head,
    level: Annotated[
        int,
        Path(
            description="0: every pair, up to the head payload's lod.top (the overview); "
            "beyond this text's pyramid: 404",
            json_schema_extra=MIN0,
        ),
    ],
    ti: Annotated[int, Path(description=f"tile row, from 0, {IN_PYRAMID}", json_schema_extra=MIN0)],
    tj: Annotated[
        int, Path(description=f"tile column, from 0, {IN_PYRAMID}", json_schema_extra=MIN0)
    ],
    service: ServiceDep,
) -> Response:
    """One tile of a head's max-pooled pyramid (level of detail for long texts): the non-zero
    cells, each the largest P_ij of its 2**level x 2**level block and its count of gold edges."""
    return json_bytes(service.tile(analysis_id, layer, head, level, ti, tj))


@router.get("/analyses/{analysis_id}/pareto", response_model=Pareto, responses=COMPUTE_ERRORS)
async def get_pareto(
    analysis_id: AnalysisId,
    request: Request,
    service: ServiceDep,
    layer: Annotated[int | None, QueryLayer("with head: one head; omit both: mean")] = None,
    head: Annotated[int | None, QueryHead("with layer: one head")] = None,
    x: Annotated[
        Literal["sparsity", "block"],
        Query(description="frontiers over token sparsity (default) or block sparsity"),
    ] = "sparsity",
    # an int checked by pareto.check_axis (a Literal of ints rejects every query string)
    block: Annotated[
        int | None,
        Query(
            description="tile size for x=block: 16, 32, 64 or 128 (default 64)",
            json_schema_extra=bounded(enum=list(BLOCKS)),
        ),
    ] = None,
    output_error: Annotated[
        bool,
        Query(description="also each point's output error on the head (needs layer and head)"),
    ] = False,
) -> Response:
    """Sparsity-recall points of every method's sweep grid on this text, and their frontiers
    (over token sparsity, or with ``x=block`` the block sparsity at ``block``); with
    ``output_error=true`` (one head) each point's output error too."""
    return json_bytes(
        await model_call(request, service.pareto, analysis_id, layer, head, x, block, output_error)
    )


@router.get("/analyses/{analysis_id}/budgets", response_model=Budgets, responses=COMPUTE_ERRORS)
async def get_budgets(
    analysis_id: AnalysisId,
    request: Request,
    service: ServiceDep,
    layer: Annotated[int | None, QueryLayer("with head: one head; omit both: all")] = None,
    head: Annotated[int | None, QueryHead("with layer: one head")] = None,
) -> Response:
    """Oracle budgets (definitions §8): per query, the least top-k and the least top-p mass that
    recover 90 % / 99 % of its true support — every query of one head, or every head's
    quantiles and the distribution pooled over all heads."""
    return json_bytes(await model_call(request, service.budgets, analysis_id, layer, head))


@router.get("/analyses/{analysis_id}/roles", response_model=Roles, responses=COMPUTE_ERRORS)
async def get_roles(analysis_id: AnalysisId, request: Request, service: ServiceDep) -> Response:
    """What every head does on this text (definitions §11, after Clark et al. 2019): the shares
    of its query rows whose top key is a sink, the previous, next or same token, punctuation,
    the word's dependency head or dependent (spaCy's parse), nearby, or that attend broadly;
    the head's role, and the relation it tracks best. Computed through the compute gate
    (503 with Retry-After when it is full), like every other derived result."""
    return json_bytes(await model_call(request, service.roles, analysis_id))


@router.get(
    "/analyses/{analysis_id}/clusters/{layer}/{head}",
    response_model=Clusters,
    responses=COMPUTE_ERRORS,
)
async def get_clusters(
    analysis_id: AnalysisId,
    layer: Layer,
    head: Head,
    request: Request,
    service: ServiceDep,
    clusters: Annotated[
        int | None,
        Query(
            description="k-means clusters B: one of the artefact's fits (default 8, else its "
            "smallest); another: 404, as the analysis has no such fit",
            json_schema_extra=MIN1,
        ),
    ] = None,
    top_k: Annotated[
        int,
        Query(
            description="centroids per token, at most the clusters (404 beyond: the bound "
            "depends on the artefact's fits)",
            json_schema_extra=MIN1,
        ),
    ] = 1,
) -> Response:
    """POS breakdown of the queries and keys in each Sparsefinder k-means cluster of a head."""
    body = await model_call(request, service.clusters, analysis_id, layer, head, clusters, top_k)
    return json_bytes(body)


@router.get("/analyses/{analysis_id}/flow", response_model=Flow, responses=COMPUTE_ERRORS)
async def get_flow(
    analysis_id: AnalysisId,
    request: Request,
    service: ServiceDep,
    token: Annotated[
        int,
        Query(
            description="the target token's index, from 0, below the analysis' n (404 beyond)",
            json_schema_extra=served("token", minimum=0),
        ),
    ],
    layer: Annotated[
        int | None, QueryLayer("the target is this layer's output (default: the last)")
    ] = None,
) -> Response:
    """Information flow: which input tokens reach ``token`` through the layers' entmax graphs
    (exact: entmax's zeros are exact), and with how much attention-rollout mass."""
    return json_bytes(await model_call(request, service.flow, analysis_id, token, layer))


@router.get(
    "/analyses/{analysis_id}/metrics/{layer}/{head}",
    response_model=HeadMetrics,
    responses=COMPUTE_ERRORS,
)
@free_query  # the method's parameters are the rest of the query string
async def get_metrics(
    analysis_id: AnalysisId,
    layer: Layer,
    head: Head,
    request: Request,
    service: ServiceDep,
    method: Annotated[
        str,
        Query(
            description="a method name from /api/methods (the sf-* ones need the analysis' "
            "artefact: a 400 without)",
            json_schema_extra=bounded(enum=list(METHODS)),
        ),
    ],
) -> dict:
    """Recall, sparsity, exact, precision, mass recall, block sparsity (per tile size) and
    output error (what the misses cost this head) of one method at the given parameters (query
    string, e.g. ``&window=3&globals=true``; missing ones take their defaults)."""
    params = {k: v for k, v in request.query_params.items() if k != "method"}
    return await model_call(request, service.metrics, analysis_id, layer, head, method, params)
