"""``GET /api/results`` and ``GET /api/results/heads/{layer}/{head}``: the corpus results of
``sparsescope serve --results DIR`` (app/engine/results.py), read only; 404 when the server was
started without them."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from ...engine.payloads import dumps
from ..deps import ResultsHead, ResultsLayer, ServiceDep
from ..errors import documented
from ..schemas import CorpusResults, Pareto

router = APIRouter(prefix="/api/results", tags=["results"])

ERRORS = documented(400, 404, _404="the server was started without --results DIR")


@router.get("", response_model=CorpusResults, responses=ERRORS)
def get_results(service: ServiceDep) -> Response:
    """The corpus sweep of `sparsescope pareto` (pareto.json: every method's points, the mean
    over heads, and their frontiers), the folder's name and the per-head file's (layers, heads)."""
    body = service.corpus_results().summary()
    return Response(content=dumps(body), media_type="application/json")


@router.get("/heads/{layer}/{head}", response_model=Pareto, responses=ERRORS)
def get_results_head(layer: ResultsLayer, head: ResultsHead, service: ServiceDep) -> Response:
    """One head's corpus points and frontiers (pareto-heads.npz), the shape of
    ``GET /api/analyses/{id}/pareto?layer=&head=``."""
    body = service.corpus_results().head(layer, head)
    return Response(content=dumps(body), media_type="application/json")
