"""``GET /docs``: the OpenAPI schema in Swagger UI, offline and under the page's CSP.

FastAPI's own docs page loads Swagger UI from a CDN and starts it with an inline script; both
are blocked by the Content-Security-Policy (scripts from this origin only) and the CDN is not
reachable offline. So Swagger UI is vendored under static/vendor/ and started by a script served
from this origin, ``/docs/init.js``.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response

router = APIRouter(include_in_schema=False)

SWAGGER_UI = "/static/vendor/swagger-ui-5.32.0"

PAGE = f"""<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>sparsescope API</title>
  <link rel="icon" href="data:,">
  <link rel="stylesheet" href="{SWAGGER_UI}/swagger-ui.css">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="{SWAGGER_UI}/swagger-ui-bundle.js"></script>
  <script src="/docs/init.js"></script>
</body>
</html>
"""

INIT = """window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  deepLinking: true,
  presets: [SwaggerUIBundle.presets.apis],
  layout: "BaseLayout",
});
"""


@router.get("/docs", response_class=HTMLResponse)
def docs_page() -> HTMLResponse:
    return HTMLResponse(PAGE)


@router.get("/docs/init.js")
def docs_init() -> Response:
    return Response(INIT, media_type="text/javascript")
