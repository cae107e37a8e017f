"""HTML pages: :func:`render_page` renders every page of the app from frontend/templates.

Server data reaches a page only as ``<script type="application/json" id="...">`` islands
(:func:`json_island`), never spliced into JavaScript; the Content-Security-Policy allows scripts
from this origin only, and Jinja2 escapes every other value (user text included). A page's
``islands`` (id -> data) are placed by its template just before ``</body>``, so they are parsed
before the deferred module scripts run.
"""

from __future__ import annotations

import importlib.resources
import json
from collections.abc import Mapping
from typing import Any

import jinja2
from fastapi import Request
from fastapi.responses import HTMLResponse
from markupsafe import Markup, escape

from .payloads import MAX_RAW_TOKENS

#: The Plotly bundle, served from the installed ``plotly`` package (app/routes/pages.py).
PLOTLY_URL = "/static/vendor/plotly.min.js"
#: The vendored KaTeX under static/vendor/katex-<version>/ (see its README.md).
KATEX_VERSION = "0.19.1"
#: The lecture's sentence (CS224N lecture 9, "Self-Attention and Transformers").
LECTURE_TEXT = "The chef who ran to the store was out of food."
DEFAULT_ALPHA = 1.5
#: Every page is rendered per request from live state: never cached by the browser.
PAGE_HEADERS = {"Cache-Control": "no-cache"}


def template_env() -> jinja2.Environment:
    """Jinja2 over the installed frontend/templates, HTML autoescaping on, undefined is an error."""
    folder = importlib.resources.files("sparsescope.frontend").joinpath("templates")
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(folder)),
        autoescape=jinja2.select_autoescape(("html", "htm", "xml"), default=True),
        undefined=jinja2.StrictUndefined,
    )


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


def render_page(
    request: Request,
    template: str,
    *,
    islands: Mapping[str, Any] | None = None,
    status_code: int = 200,
    headers: Mapping[str, str] | None = None,
    **context: Any,
) -> HTMLResponse:
    """``frontend/templates/<template>`` as an HTML response.

    Every template gets the runtime facts (``model``, ``device``, ``version``, ``artefact``), the
    URLs (``static_url``, ``js_url``, ``plotly_url``), the ``json_island`` helper and
    ``islands``: the JSON islands of ``islands`` (element id -> data), in order; plus
    ``context``.
    """
    runtime = request.app.state.service.health()
    html = request.app.state.jinja.get_template(template).render(
        model=runtime["model"],
        device=runtime["device"],
        version=runtime["version"],
        artefact=runtime["artefact"],
        static_url="/static",
        js_url="/js",
        plotly_url=PLOTLY_URL,
        json_island=json_island,
        islands=Markup("\n").join(json_island(k, v) for k, v in (islands or {}).items()),
        **context,
    )
    return HTMLResponse(html, status_code=status_code, headers={**PAGE_HEADERS, **(headers or {})})


def main_page(
    request: Request,
    *,
    islands: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> HTMLResponse:
    """The main page (index.html) with its ``config`` island: the model's shape and the API."""
    service = request.app.state.service
    health = service.health()
    config = {
        **{k: health[k] for k in ("model", "device", "artefact", "version")},
        "layers": service.model.config.num_layers,
        "heads": service.model.config.num_heads,
        "max_tokens": service.model.max_positions,
        "models": service.models()["models"],
        "default_alpha": DEFAULT_ALPHA,
        "api": "/api",
        "plotly": PLOTLY_URL,
    }
    return render_page(request, "index.html", config=config, islands=islands, headers=headers)


def lecture_page(
    request: Request,
    *,
    islands: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> HTMLResponse:
    """The lecture page. Its state (step, text, alpha, causal, layer, head) is read from the
    query string by the page itself; the server hands over only the defaults."""
    config = {
        "models": request.app.state.service.models()["models"],
        "default_text": LECTURE_TEXT,
        "default_alpha": DEFAULT_ALPHA,
        "max_raw_tokens": MAX_RAW_TOKENS,
    }
    return render_page(
        request,
        "lecture.html",
        config=config,
        katex_version=KATEX_VERSION,
        islands=islands,
        headers=headers,
    )


def error_page(
    request: Request,
    status_code: int,
    *,
    title: str,
    heading: str,
    message: str,
    link: tuple[str, str] = ("/", "Open sparsescope"),
    headers: Mapping[str, str] | None = None,
) -> HTMLResponse:
    """A small page for a link that cannot be opened (a share 404 / 410, an unknown example)."""
    return render_page(
        request,
        "error.html",
        status_code=status_code,
        headers=headers,
        title=title,
        heading=heading,
        message=message,
        link_url=link[0],
        link_text=link[1],
    )
