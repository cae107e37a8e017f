"""The explorer page, ``GET /``, and the vendored Plotly bundle the pages load."""

from __future__ import annotations

import importlib.resources

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, HTMLResponse

from ..render import PLOTLY_URL, main_page

router = APIRouter(include_in_schema=False)


@router.get("/", response_class=HTMLResponse)
def index(request: Request) -> HTMLResponse:
    """The explorer; its state lives in the URL and is restored by the page itself."""
    return main_page(request)


@router.get(PLOTLY_URL)
def plotly_js() -> FileResponse:
    """The Plotly bundle shipped inside the installed ``plotly`` Python package (no CDN)."""
    path = importlib.resources.files("plotly").joinpath("package_data", "plotly.min.js")
    return FileResponse(
        str(path), media_type="text/javascript", headers={"Cache-Control": "public, max-age=86400"}
    )
