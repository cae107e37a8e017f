"""HTML pages: :func:`render_page` renders every page of the app from frontend/templates.

Server data reaches a page only as ``<script type="application/json" id="...">`` islands
(:func:`json_island`), never spliced into JavaScript; the Content-Security-Policy allows scripts
from this origin only, and Jinja2 escapes every other value (user text included). A page's
``islands`` (id -> data) are placed by its template just before ``</body>``, so they are parsed
before the deferred module scripts run.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
from fastapi import Request
from fastapi.responses import HTMLResponse
from markupsafe import Markup, escape

from sparse_core import __version__

from ..engine.payloads import MAX_RAW_TOKENS
from ..engine.request import DEFAULT_ALPHA

#: The Plotly bundle's URL (app/web/routes/pages.py serves :data:`PLOTLY_BUNDLE` there).
PLOTLY_URL = "/static/vendor/plotly.min.js"
#: The Plotly bundle the pages load, under static/: plotly.js's cartesian distribution, vendored
#: (its README says why and how to refresh it).
PLOTLY_BUNDLE = "vendor/plotly-cartesian-4.1.1/plotly-cartesian.min.js"


def plotly_bundle() -> Path:
    """The file of :data:`PLOTLY_BUNDLE` in the installed ``sparsescope.static`` package."""
    return Path(str(importlib.resources.files("sparsescope.static").joinpath(PLOTLY_BUNDLE)))


@lru_cache(maxsize=1)
def asset_version() -> str:
    """A short hash of every served asset (frontend/js, static/css, the Plotly bundle's name,
    which carries its version): the versioned URLs ``/v/<hash>/js/...`` change whenever a file
    does, so they are cached as immutable (app/web/main.py)."""
    h = hashlib.sha256(__version__.encode())
    h.update(PLOTLY_BUNDLE.encode())
    for package, folder in (("sparsescope.frontend", "js"), ("sparsescope.static", "css")):
        root = Path(str(importlib.resources.files(package).joinpath(folder)))
        for f in sorted(root.rglob("*")):
            if f.is_file():
                h.update(str(f.relative_to(root)).encode())
                h.update(f.read_bytes())
    return h.hexdigest()[:12]


def asset_urls() -> dict[str, str]:
    """The versioned asset URLs every template gets (``static_url``, ``js_url``, ``plotly_url``)."""
    base = f"/v/{asset_version()}"
    return {"static_url": f"{base}/static", "js_url": f"{base}/js",
            "plotly_url": f"{base}/plotly.min.js"}  # fmt: skip


#: The vendored KaTeX under static/vendor/katex-<version>/ (see its README.md).
KATEX_VERSION = "0.19.1"
#: The lecture's sentence (CS224N lecture 9, "Self-Attention and Transformers").
LECTURE_TEXT = "The chef who ran to the store was out of food."
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

    In the page: ``JSON.parse(document.getElementById(id).textContent)``. ``data`` given as
    ``bytes`` is JSON text already (a cached payload): it is escaped the same way, not re-encoded.
    """
    if isinstance(data, bytes | bytearray):
        text = bytes(data).decode("utf-8")
        text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    else:
        text = json_for_html(data)
    return Markup(f'<script type="application/json" id="{escape(element_id)}">{text}</script>')


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
        **asset_urls(),
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
        "plotly": asset_urls()["plotly_url"],
        # whether GET /api/results has corpus results to give (the page does not ask otherwise)
        "results": getattr(service, "results", None) is not None,
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


def rate_limited_page(
    request: Request, exc: Exception, headers: Mapping[str, str] | None = None
) -> HTMLResponse:
    """The 429 page (``Retry-After``) of a page whose address asks for a new analysis (a share,
    gallery or home link with its own ``?alpha=``) over the client's rate of analyses."""
    wait = max(1, int(getattr(exc, "retry_after", 1) or 1))
    return error_page(
        request,
        429,
        title="too many analyses",
        heading="Too many analyses from your address",
        message=f"{exc}. This page's address asks for a new analysis (its alpha, model or text "
        "window differ from the saved view's); open it without those to see the saved view.",
        headers={**(headers or {}), "Retry-After": str(wait)},
    )


def routing_error_page(request: Request, status_code: int, detail: str) -> HTMLResponse:
    """The styled page a browser gets for a path no route serves (404) or a method a page does
    not take (405); API clients get ``{detail, field}`` (errors.install_error_handlers)."""
    if status_code == 404:
        return error_page(
            request,
            404,
            title="page not found",
            heading="There is no page here",
            message=f"sparsescope has no page at {request.url.path}. The explorer, the lecture "
            "and the gallery are linked at the top; share links look like /s/<id>.",
        )
    return error_page(request, status_code, title="not allowed", heading="Not allowed",
                      message=detail)  # fmt: skip
