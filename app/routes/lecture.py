"""Lecture mode: ``GET /lecture`` (the presentation page) and the raw vectors of one head.

``GET /api/analyses/{id}/raw/{layer}/{head}`` gives the lecture's steps 2–4 what the head payload
leaves out on purpose (it is dense): the head's queries ``q_i = W_Q x_i``, keys ``k_j = W_K x_j``
(both (n, d_head)) and the scaled scores ``S = Q Kᵀ / √d_head`` (n, n), *before* any mask, so the
page can show the causal mask being applied. Only for short texts (n ≤ :data:`MAX_RAW_TOKENS`),
which is what a slide can show anyway.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

import torch
from fastapi import APIRouter, Path, Request
from fastapi.responses import HTMLResponse, Response

from ..deps import ServiceDep
from ..errors import ApiError
from ..routes.analyses import ERRORS
from ..routes.pages import json_island
from ..service import dumps, sig6

router = APIRouter()

#: The vendored KaTeX under static/vendor/katex-<version>/ (see its README.md).
KATEX_VERSION = "0.19.1"
#: The lecture's sentence (CS224N lecture 9, "Self-Attention and Transformers").
DEFAULT_TEXT = "The chef who ran to the store was out of food."
DEFAULT_ALPHA = 1.5
#: Longest text whose raw vectors are served (a slide cannot show more rows anyway).
MAX_RAW_TOKENS = 64


@router.get("/lecture", response_class=HTMLResponse, include_in_schema=False)
def lecture_page(request: Request) -> HTMLResponse:
    """The lecture view. Its state (step, text, alpha, causal, layer, head) is read from the query
    string by the page itself; the server only hands over the defaults, as a JSON island."""
    config = {
        "default_text": DEFAULT_TEXT,
        "default_alpha": DEFAULT_ALPHA,
        "max_raw_tokens": MAX_RAW_TOKENS,
    }
    html = request.app.state.jinja.get_template("lecture.html").render(
        config=config,
        json_island=json_island,
        katex_version=KATEX_VERSION,
        static_url="/static",
        js_url="/js",
    )
    return HTMLResponse(html, headers={"Cache-Control": "no-cache"})


AnalysisId = Annotated[str, Path(description="the id returned by POST /api/analyze")]
Layer = Annotated[int, Path(description="layer index, from 0")]
Head = Annotated[int, Path(description="head index, from 0")]


@router.get("/api/analyses/{analysis_id}/raw/{layer}/{head}", tags=["lecture"], responses=ERRORS)
def raw_head(analysis_id: AnalysisId, layer: Layer, head: Head, service: ServiceDep) -> Response:
    """One head's raw queries, keys and unmasked scaled scores, for texts of at most 64 tokens.

    ``{"layer", "head", "n", "d_head", "d_model", "causal", "queries": [[d_head] x n],
    "keys": [[d_head] x n], "scores": [[n] x n]}``, values rounded to 6 significant digits.
    """
    entry = service.get(analysis_id)
    body = raw_payload(entry.out, layer, head, d_model=service.model.config.hidden_size)
    return Response(content=dumps(body), media_type="application/json")


@torch.inference_mode()
def raw_payload(out: Any, layer: int, head: int, *, d_model: int | None = None) -> dict:
    """The raw-vector body of head (layer, head) of a ``RunOutput``.

    Scores are recomputed exactly as the model does, ``S = Q Kᵀ / √d_head`` in float32
    (sparse_core.model.EntmaxSelfAttention), without the causal mask.
    """
    if not 0 <= layer < out.layers:
        raise ApiError(
            400, f"layer must be in [0, {out.layers - 1}] for this model, got {layer}", "layer"
        )
    if not 0 <= head < out.heads:
        raise ApiError(
            400, f"head must be in [0, {out.heads - 1}] for this model, got {head}", "head"
        )
    if out.n > MAX_RAW_TOKENS:
        raise ApiError(
            400,
            f"raw vectors are served for texts of at most {MAX_RAW_TOKENS} tokens; this one has "
            f"{out.n} (use a shorter text for the lecture view)",
            "id",
        )
    q = out.queries[layer, head].float()  # (n, d_head)
    k = out.keys[layer, head].float()  # (n, d_head)
    d_head = q.shape[-1]
    scores = (q @ k.T) / math.sqrt(d_head)  # (n, n)

    def rows(t: torch.Tensor) -> list[list[float]]:
        return [[sig6(v) for v in row] for row in t.tolist()]

    return {
        "layer": layer,
        "head": head,
        "n": out.n,
        "d_head": d_head,
        "d_model": d_model,
        "causal": bool(out.causal),
        "queries": rows(q),
        "keys": rows(k),
        "scores": rows(scores),
    }
