"""The example gallery: ``GET /api/gallery`` (the examples as JSON), ``GET /gallery`` (cards) and
``GET /gallery/{slug}`` (the main page opened on one example, as a share link opens it).
app/web/gallery.py has the file and its precomputation."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from ...engine.errors import RateLimited
from ..deps import ServiceDep, Slug
from ..gallery import get_example, load_gallery
from ..preload import PRELOAD_ID, charge_query, preload_view, state_with_query
from ..render import error_page, main_page, rate_limited_page, render_page
from ..schemas import GalleryOut
from ..shares import ISLAND_ID, warm_analysis

router = APIRouter(tags=["gallery"])


@router.get("/api/gallery", response_model=GalleryOut)
def gallery_api(request: Request) -> dict[str, Any]:
    """The curated examples: title, what to look at, how the head was picked (measured), the
    view state, and whether the example is precomputed."""
    return request.app.state.gallery_warmer.listing(load_gallery())


@router.get("/gallery", response_class=HTMLResponse, include_in_schema=False)
def gallery_page(request: Request) -> HTMLResponse:
    """The gallery: one card per example; a card opens the main page on it. The island carries
    what the cards' canvases draw (thumbnails); the text is in the HTML."""
    listing = request.app.state.gallery_warmer.listing(load_gallery())
    thumbs = {ex["slug"]: ex.get("thumb") for ex in listing["examples"]}
    return render_page(request, "gallery.html", gallery=listing, islands={"gallery-thumbs": thumbs})


@router.get(
    "/gallery/{slug}",
    response_class=HTMLResponse,
    include_in_schema=False,
    responses={404: {"description": "no such example (an HTML page)"}},
)
def gallery_example(slug: Slug, request: Request, service: ServiceDep) -> HTMLResponse:
    """The main page opened on one example: its state in the ``shared-state`` island (what a
    share link carries), its analysis found precomputed (or warmed now)."""
    ex = get_example(slug)
    if ex is None:
        known = ", ".join(e.slug for e in load_gallery().examples) or "none"
        return error_page(
            request,
            404,
            title="no such example",
            heading="There is no gallery example with that name",
            message=f"The examples are: {known}.",
            link=("/gallery", "Open the gallery"),
        )
    analysis = request.app.state.gallery_warmer.analysis(service, slug)
    data = {
        "id": None,
        "state": ex.state.model_dump(mode="json"),
        "created": None,
        "analysis": analysis if analysis is not None else warm_analysis(service, ex.state),
        "gallery": {"slug": ex.slug, "title": ex.title, "explain": ex.explain,
                    "credit": ex.credit},
    }  # fmt: skip
    islands = {ISLAND_ID: data}
    view = state_with_query(data["state"], request.query_params)
    try:
        charge_query(request, data["state"], view)
    except RateLimited as exc:
        return rate_limited_page(request, exc)
    pre = preload_view(service, view)
    if pre is not None:
        islands[PRELOAD_ID] = pre
    return main_page(request, islands=islands)
