"""``create_app(settings)``: the FastAPI app of sparsescope (API, page, static files).

The model is loaded in the lifespan (``AnalysisService.start``), never at import; tests pass a
service built on ``tiny_model``. See docs/api.md for the routes and docs/architecture.md for the
contract they implement.
"""

from __future__ import annotations

import importlib.resources
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import jinja2
from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool
from starlette.staticfiles import StaticFiles

from .errors import install_error_handlers
from .middleware import BodySizeLimit, SecurityHeaders
from .routes import ROUTERS, SHUTDOWN, STARTUP
from .schemas import ErrorOut
from .service import AnalysisService
from .settings import Settings, get_settings

log = logging.getLogger(__name__)

#: Every route's 422 is our {detail, field} body (app/errors.py), not FastAPI's default
#: ``HTTPValidationError`` list: the OpenAPI schema must describe what is really sent.
SCHEMA_ERROR: dict[int | str, dict] = {
    422: {"model": ErrorOut, "description": "the request does not match the schema"}
}


def _package_dir(package: str, *parts: str) -> str:
    """A folder inside an installed package (works from a wheel install, not only a checkout)."""
    return str(importlib.resources.files(package).joinpath(*parts))


def template_env() -> jinja2.Environment:
    """Jinja2 over frontend/templates, HTML autoescaping on."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(_package_dir("sparsescope.frontend", "templates")),
        autoescape=jinja2.select_autoescape(("html", "htm", "xml"), default=True),
        undefined=jinja2.StrictUndefined,
    )


def create_app(settings: Settings | None = None, service: AnalysisService | None = None) -> FastAPI:
    """The app. ``settings`` default to :func:`get_settings` (the environment); ``service``
    defaults to one that loads ``settings.model_path`` on ``settings.device`` at start-up."""
    from sparse_core import __version__

    settings = settings or get_settings()
    service = service or AnalysisService(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await run_in_threadpool(service.start)
        for hook in STARTUP:
            hook(app)
        try:
            yield
        finally:
            for hook in SHUTDOWN:
                hook(app)

    app = FastAPI(
        title="sparsescope",
        version=__version__,
        description="See, teach and measure sparse (alpha-entmax) attention. "
        "Errors are {detail, field}; see docs/api.md.",
        lifespan=lifespan,
        docs_url=None,  # served by app/routes/docs.py: vendored Swagger UI, no CDN, no inline JS
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.service = service
    app.state.jinja = template_env()
    install_error_handlers(app)
    for router in ROUTERS:  # every module of app/routes, found by itself (app/routes/__init__)
        app.include_router(router, responses=SCHEMA_ERROR)
    # after the routes, so /static/vendor/plotly.min.js (a route) wins over the mount
    app.mount(
        "/static",
        StaticFiles(directory=_package_dir("sparsescope.static"), check_dir=False),
        name="static",
    )
    app.mount(
        "/js",
        StaticFiles(directory=_package_dir("sparsescope.frontend", "js"), check_dir=False),
        name="js",
    )
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(SecurityHeaders)
    return app
