"""HTTP routes, one module per area, each exposing ``router`` (an APIRouter).

:data:`sparsescope.main.ROUTERS` lists them, in the order they are included. A route is a thin
typed function: it parses its input (pydantic, :mod:`sparsescope.schemas`), calls the service and
returns its bytes; HTML pages go through :func:`sparsescope.render.render_page`.
"""
