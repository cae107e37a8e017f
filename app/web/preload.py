"""Data a page paints before it sends any request: the ``preload`` JSON island.

A page that opens on a known view (the first visit's example, a gallery example, a share link)
carries the analysis body, the open head's payload and (when already computed, or cheap) that
head's Pareto data, exactly as ``/api/analyze``, ``/api/analyses/{id}/heads/{l}/{h}`` and
``.../pareto?layer=&head=`` would answer them. The page (frontend/js/session.js ``adoptPreloaded``)
seeds its caches with them and paints the heatmap at once; later requests (other heads) use the
analysis id as usual (and analyse the text again when the server evicted it).

Bodies are the service's cached JSON bytes, spliced without re-encoding (app/web/render.py escapes
``<``, ``>``, ``&`` for the island).
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import Request

from sparse_core.errors import SparsescopeError
from sparse_core.view_codec import decode_query, share_patch

from ..engine.request import AnalysisRequest
from ..engine.service import AnalysisService
from .calls import client_of

log = logging.getLogger(__name__)

#: The island's element id.
PRELOAD_ID = "preload"
#: Heavier head payloads are fetched by the page instead (the HTML would wait for them).
MAX_PRELOAD_BYTES = 4_000_000
#: The fields of a view that choose its analysis: a page's query that changes one of them (a
#: share or gallery link with ``?alpha=1.3``) asks for a fresh analysis, as POST /api/analyze.
ANALYSIS_FIELDS = ("text", "alpha", "causal", "truncate", "model", "start")
#: Pareto sweeps are computed for the island only for texts up to this many tokens (short texts
#: sweep in milliseconds); longer ones are included only when already computed.
PARETO_INLINE_TOKENS = 64


def preload(
    service: AnalysisService,
    text: str,
    alpha: float,
    causal: bool,
    truncate: bool,
    layer: int | None,
    head: int | None,
    *,
    model: str | None = None,
    start: int = 0,
    pareto: bool = True,
) -> bytes | None:
    """The ``preload`` island (JSON bytes) of this view, or None when it cannot be made now (no
    model yet, a text the API refuses, a payload too heavy): the page then asks the API."""
    if not service.ready:
        return None
    try:
        entry = service.analyze_entry(
            AnalysisRequest(text, alpha, causal, truncate, model=model, start=start)
        )
        whole = service.analysis_json(entry.id)  # every summary, through the compute gate
        body = entry.body
        # the nearest layer and head the model has, as the page clamps them (session.js adopt)
        layer = min(max(layer, 0), body["layers"] - 1) if layer is not None else 0
        head = min(max(head, 0), body["heads"] - 1) if head is not None else 0
        head_json = service.head(body["id"], layer, head)
        if len(head_json) + len(whole) > MAX_PRELOAD_BYTES:
            return None
        parts = [
            b'{"analysis":',
            whole,
            b',"layer":%d,"head":%d,"payload":' % (layer, head),
            head_json,
        ]
        if pareto and body["n"] <= PARETO_INLINE_TOKENS:
            parts += [b',"pareto":', service.pareto(body["id"], layer, head)]
        parts.append(b"}")
        return b"".join(parts)
    except SparsescopeError as exc:
        log.info("view not preloaded: %s", exc)
        return None


def preload_view(service: AnalysisService, view: dict[str, Any]) -> bytes | None:
    """:func:`preload` of a view in the ShareState shape."""
    return preload(
        service, view["text"], view["alpha"], view["causal"], view.get("truncate", False),
        view.get("layer"), view.get("head"), model=view.get("model"), start=view.get("start", 0),
    )  # fmt: skip


def state_with_query(state: dict[str, Any], query: Any) -> dict[str, Any]:
    """A saved view with the overrides of a page's query string (``/s/{id}?layer=4&head=1``):
    the address bar of a share or gallery page is the truth, read as the page reads it
    (:func:`sparse_core.view_codec.decode_query`, frontend/js/view-state.js): values it does not
    allow are left out, numbers out of range clamped, as the page does. A text in the query is
    not applied (the page analyses it itself and uses no island)."""
    decoded = decode_query(query)
    if decoded.errors:
        log.info("query values left out: %s", "; ".join(decoded.errors.values()))
    if decoded.notices:
        log.info("query values clamped: %s", "; ".join(decoded.notices.values()))
    fields = {k: v for k, v in decoded.state.items() if k not in ("text", "id")}
    patch = share_patch(fields)
    out = {**state, **patch}
    if "view" in patch:
        out["view"] = {**(state.get("view") or {}), **patch["view"]}
    return out


def charge_query(request: Request, saved: dict[str, Any], view: dict[str, Any]) -> None:
    """Take one analysis from the client's rate (the limit of ``POST /api/analyze``) when the
    page's query changes the saved view's analysis (:data:`ANALYSIS_FIELDS`): a page that
    opens a share, a gallery example or the home example with a new ``?alpha=`` runs the model
    as an analyze request does, so it raises :class:`RateLimited` as that does (the routes
    answer with :func:`~sparsescope.web.render.rate_limited_page`). The saved view itself
    (cached, or warmed once) costs nothing."""
    if all(saved.get(k) == view.get(k) for k in ANALYSIS_FIELDS):
        return
    request.app.state.limits.analyses.take(client_of(request))
