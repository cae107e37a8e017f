"""Lecture mode: ``GET /lecture`` (the presentation page) and the raw vectors of one head.

``GET /api/analyses/{id}/raw/{layer}/{head}`` gives the lecture's steps 2–4 what the head payload
leaves out on purpose (it is dense): the head's queries ``q_i = W_Q x_i``, keys ``k_j = W_K x_j``
(both (n, d_head)) and the scaled scores ``S = Q Kᵀ / √d_head`` (n, n), *before* any mask, so the
page can show the causal mask being applied. Only for short texts (n ≤ 64), which is what a slide
can show anyway.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from ..deps import AnalysisId, Head, Layer, ServiceDep
from ..errors import documented
from ..render import lecture_page

router = APIRouter(tags=["lecture"])

ERRORS = documented(400, 404, 413, 422, _404="unknown or evicted analysis id")


@router.get("/lecture", response_class=HTMLResponse, include_in_schema=False)
def lecture(request: Request) -> HTMLResponse:
    """The lecture view; its state (step, text, alpha, causal, layer, head) is in the URL."""
    return lecture_page(request)


@router.get("/api/analyses/{analysis_id}/raw/{layer}/{head}", responses=ERRORS)
def raw_head(analysis_id: AnalysisId, layer: Layer, head: Head, service: ServiceDep) -> Response:
    """One head's raw queries, keys and unmasked scaled scores, for texts of at most 64 tokens.

    ``{"layer", "head", "n", "d_head", "d_model", "causal", "queries": [[d_head] x n],
    "keys": [[d_head] x n], "scores": [[n] x n]}``, values rounded to 6 significant digits.
    """
    return Response(service.raw(analysis_id, layer, head), media_type="application/json")
