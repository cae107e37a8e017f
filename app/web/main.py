"""``create_app(settings)``: the FastAPI app of sparsescope (API, pages, static files).

The lifespan starts the service (the model is loaded there, never at import; tests pass a
service on a tiny model), opens the share database and starts the gallery's precomputation, and
closes them at shutdown. See docs/architecture.md for the layout and docs/api.md for the routes.
"""

from __future__ import annotations

import importlib.resources
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response
from starlette.staticfiles import StaticFiles

from sparse_core import __version__

from ..engine.limits import Limits
from ..engine.service import AnalysisService
from ..engine.settings import Settings, get_settings
from ..engine.store import ShareStore
from .calls import start_model_threads
from .compress import Compress
from .deps import known_query
from .errors import documented, install_error_handlers
from .gallery import Warmer, load_gallery
from .middleware import BodySizeLimit, CatchBugs, HeadAsGet, HostAllowlist, SecurityHeaders
from .openapi import install_openapi
from .render import asset_version, routing_error_page, template_env
from .routes import analyses, docs, gallery, lecture, meta, pages, results, share

log = logging.getLogger(__name__)

#: Every router, in the order it is included.
ROUTERS = (
    meta.router,
    analyses.router,
    docs.router,
    gallery.router,
    lecture.router,
    share.router,
    results.router,
    pages.router,
)


def _package_dir(package: str, *parts: str) -> str:
    """A folder inside an installed package (works from a wheel install, not only a checkout)."""
    return str(importlib.resources.files(package).joinpath(*parts))


class ImmutableFiles(StaticFiles):
    """Static files under a versioned URL: cached for a year and never revalidated."""

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers["Cache-Control"] = "public, max-age=31536000, immutable"
        return response


def create_app(settings: Settings | None = None, service: AnalysisService | None = None) -> FastAPI:
    """The app. ``settings`` default to :func:`get_settings` (the environment); ``service``
    defaults to one that loads ``settings.model_path`` on ``settings.device`` at start-up."""
    settings = settings or get_settings()
    service = service or AnalysisService(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await run_in_threadpool(service.start)  # does nothing when `serve` has started it
        start_model_threads()  # off the event loop, before the first analysis (calls.py)
        # an unreadable share database is reported now, naming the file
        app.state.share_store = ShareStore.in_dir(
            settings.data_dir,
            max_shares=settings.share_max_count,
            max_bytes=settings.share_max_bytes,
        )
        warmer = app.state.gallery_warmer = Warmer()
        warmer.start(service, load_gallery().examples, enabled=settings.warmup)
        try:
            yield
        finally:
            # nothing low-priority is waited for: queued warm-ups are dropped
            warmer.stop.set()
            app.state.limits.warmups.stop()
            service.drop_background_work()
            app.state.share_store.close()

    app = FastAPI(
        title="sparsescope",
        version=__version__,
        description="See, teach and measure sparse (alpha-entmax) attention. "
        "Errors are {detail, field}; see docs/api.md.",
        lifespan=lifespan,
        docs_url=None,  # app/web/routes/docs.py serves it: vendored Swagger UI, no CDN or inline JS
        redoc_url=None,
        openapi_url=None,  # install_openapi serves it, with the served models' bounds
    )
    app.state.settings = settings
    app.state.service = service
    app.state.jinja = template_env()
    app.state.limits = Limits.from_settings(settings)
    install_error_handlers(app, routing_error_page)
    install_openapi(app, lambda: service.models() if service.ready else None)
    for router in ROUTERS:
        # every route's 422 is our {detail, field} body (app/web/errors.py), not FastAPI's default
        # HTTPValidationError list: the OpenAPI schema describes what is really sent
        # and every /api/ route refuses a query key it does not take (deps.known_query)
        app.include_router(router, responses=documented(422), dependencies=[Depends(known_query)])
    # versioned asset URLs (render.asset_urls): the hash changes with any file, so a year, immutable
    version = asset_version()
    app.mount(
        f"/v/{version}/static",
        ImmutableFiles(directory=_package_dir("sparsescope.static"), check_dir=False),
        name="static-versioned",
    )
    app.mount(
        f"/v/{version}/js",
        ImmutableFiles(directory=_package_dir("sparsescope.frontend", "js"), check_dir=False),
        name="js-versioned",
    )
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
    # the last added is the outermost: CatchBugs innermost, so the others wrap its 500
    app.add_middleware(CatchBugs)
    app.add_middleware(Compress)  # gzip (app/web/compress.py), inside HEAD's body dropping
    app.add_middleware(
        BodySizeLimit, max_bytes=settings.max_body_bytes, timeout_s=settings.header_timeout
    )
    app.add_middleware(HeadAsGet)
    app.add_middleware(HostAllowlist, names=settings.host_allowlist())
    app.add_middleware(SecurityHeaders)
    return app
