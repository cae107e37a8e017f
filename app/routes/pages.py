"""The page: ``GET /`` (rendered from frontend/templates/index.html) and the vendored Plotly.

Server data reaches the page only as ``<script type="application/json">`` islands (see
:func:`json_island`), never spliced into JavaScript; the Content-Security-Policy allows scripts
from this origin only.
"""

from __future__ import annotations

import importlib.resources
import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, HTMLResponse
from markupsafe import Markup, escape

from ..deps import ServiceDep

router = APIRouter(include_in_schema=False)

PLOTLY_URL = "/static/vendor/plotly.min.js"


def json_for_html(data: Any) -> str:
    """JSON text that is safe inside an HTML element: ``<``, ``>``, ``&`` become ``\\u003c``...

    So a value containing ``</script>`` or ``<!--`` cannot end the island early; JSON.parse
    reads the escapes back as the same characters.
    """
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def json_island(element_id: str, data: Any) -> Markup:
    """``<script type="application/json" id="...">JSON</script>`` for a template.

    In the page: ``JSON.parse(document.getElementById(id).textContent)``.
    """
    return Markup(
        f'<script type="application/json" id="{escape(element_id)}">{json_for_html(data)}</script>'
    )


def plotly_path():
    """The Plotly bundle shipped inside the installed ``plotly`` Python package (no CDN)."""
    return importlib.resources.files("plotly").joinpath("package_data", "plotly.min.js")


def plotly_version() -> str | None:
    try:
        import plotly

        return getattr(plotly, "__version__", None)
    except ImportError:  # pragma: no cover - plotly is a dependency
        return None


@router.get("/", response_class=HTMLResponse)
def index(request: Request, service: ServiceDep) -> HTMLResponse:
    health = service.health()
    model = service.model
    config = {
        **{k: health[k] for k in ("model", "device", "artefact", "version")},
        "layers": model.config.num_layers,
        "heads": model.config.num_heads,
        "max_tokens": model.max_positions,
        "default_alpha": 1.5,
        "api": "/api",
        "plotly": PLOTLY_URL,
    }
    template = request.app.state.jinja.get_template("index.html")
    html = template.render(
        model=health["model"],
        device=health["device"],
        version=health["version"],
        artefact=health["artefact"],
        config=config,
        json_island=json_island,
        plotly_url=PLOTLY_URL,
        static_url="/static",
        js_url="/js",
    )
    return HTMLResponse(html, headers={"Cache-Control": "no-cache"})


@router.get(PLOTLY_URL)
def plotly_js() -> FileResponse:
    return FileResponse(
        str(plotly_path()),
        media_type="text/javascript",
        headers={"Cache-Control": "public, max-age=86400"},
    )
