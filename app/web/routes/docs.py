"""``GET /docs``: the OpenAPI schema in Swagger UI, offline and under the page's CSP.

FastAPI's own docs page loads Swagger UI from a CDN and starts it with an inline script; both
are blocked by the Content-Security-Policy (scripts from this origin only) and the CDN is not
reachable offline. So Swagger UI is vendored under static/vendor/ and started by a script served
from this origin, ``/docs/init.js``.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from ..render import render_page

router = APIRouter(include_in_schema=False)

SWAGGER_UI = "/static/vendor/swagger-ui-5.32.0"

INIT = """window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  deepLinking: true,
  presets: [SwaggerUIBundle.presets.apis],
  layout: "BaseLayout",
});
"""


@router.get("/docs", response_class=HTMLResponse)
def docs_page(request: Request) -> HTMLResponse:
    return render_page(request, "docs.html", swagger_ui=SWAGGER_UI)


@router.get("/docs/init.js")
def docs_init() -> Response:
    return Response(INIT, media_type="text/javascript")
