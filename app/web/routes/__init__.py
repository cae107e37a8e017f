"""HTTP routes, one module per area, each exposing ``router`` (an APIRouter).

:data:`sparsescope.web.main.ROUTERS` lists them, in the order they are included. A route is a thin
typed function: it parses its input (pydantic, :mod:`sparsescope.web.schemas`), calls the service
and returns its bytes; HTML pages go through :func:`sparsescope.web.render.render_page`.
"""
