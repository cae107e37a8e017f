"""The example gallery: ``GET /gallery`` (cards), ``GET /api/gallery`` (the same as JSON) and
``GET /gallery/{slug}`` (the main page opened on one example).

The examples live in ``static/gallery/examples.json``, built (and their heads picked by measuring
the real model) by ``scripts/build_gallery.py``; each holds a :class:`ShareState`. Opening an
example serves the main page with that state in the ``shared-state`` JSON island, exactly as a
share link does (app/routes/share.py), so the page restores it with the same code.

Instant opening: at start-up, after the model has loaded, a background thread analyses every
example and prepares its open head and its Pareto sweep in the service's cache (when the
settings' ``warmup`` is on, as it is by default; off in most tests). ``/healthz`` and the other
routes never wait for it; an example opened before its turn (or after its analysis was evicted
from the cache) is analysed on the spot.
"""

from __future__ import annotations

import importlib.resources
import json
import logging
import threading
import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Annotated, Any

from fastapi import APIRouter, Request
from fastapi import Path as PathParam
from fastapi.responses import HTMLResponse
from markupsafe import escape
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..deps import ServiceDep
from ..errors import ApiError
from ..routes.pages import json_island
from ..routes.share import ISLAND_ID, ShareState, warm_analysis

log = logging.getLogger(__name__)

router = APIRouter(tags=["gallery"])

PAGE_HEADERS = {"Cache-Control": "no-cache"}


# ----------------------------------------------------------------------------- the examples


class Figure(BaseModel):
    """One measured number that justifies the example's choice of head."""

    label: str
    value: float | int | str


class Thumb(BaseModel):
    """A small picture of the head: ``m`` x ``m`` characters, row-major (see the build script):
    ``-`` exact zero, ``s`` predicted zero, ``1``-``f`` p > 0 on the √p ramp."""

    m: int = Field(ge=1, le=64)
    cells: str


class Example(BaseModel):
    model_config = ConfigDict(extra="forbid")

    slug: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,63}$")
    title: str
    summary: str
    explain: str = Field(description="what to look at, and why")
    how: str = Field(description="how the head was picked (measured with the real model)")
    state: ShareState
    figures: list[Figure] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    credit: str | None = None
    needs_artefact: bool = False
    thumb: Thumb | None = None


class Gallery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int
    model: str
    artefact: str | None = None
    built_by: str = ""
    examples: list[Example]


def examples_path():
    """``static/gallery/examples.json`` inside the installed package."""
    return importlib.resources.files("sparsescope.static").joinpath("gallery", "examples.json")


@lru_cache(maxsize=1)
def load_gallery() -> Gallery:
    """The gallery file, validated (every state is a :class:`ShareState`); an unreadable file
    gives an empty gallery and a logged error, never a failing server."""
    try:
        data = json.loads(examples_path().read_text(encoding="utf-8"))
        return Gallery.model_validate(data)
    except (OSError, json.JSONDecodeError, ValidationError) as exc:
        log.error("the example gallery %s cannot be read: %s", examples_path(), exc)
        return Gallery(version=0, model="", examples=[])


def get_example(slug: str) -> Example | None:
    return next((ex for ex in load_gallery().examples if ex.slug == slug), None)


# ----------------------------------------------------------------------------- warming


@dataclass
class Warmer:
    """Analyses the examples once, in a background thread, and remembers what is ready."""

    analyses: dict[str, str] = field(default_factory=dict)  # slug -> analysis id
    ready: set[str] = field(default_factory=set)  # slugs whose head and sweep are prepared
    errors: dict[str, str] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    seconds: float = 0.0

    def run(self, service: Any, examples: list[Example]) -> None:
        """Two passes, shortest texts first: every example's analysis and open head (quick: each
        example then opens without running the model), then the Pareto sweeps (slower)."""
        t0 = time.perf_counter()
        order = sorted(examples, key=lambda e: len(e.state.text))
        for step in (self.warm_head, self.warm_sweep):
            for ex in order:
                if self.stop.is_set() or ex.slug in self.errors:
                    continue
                try:
                    step(service, ex)
                except Exception as exc:  # an example must never take the server down
                    self.errors[ex.slug] = str(exc)
                    log.warning("gallery example %s not precomputed: %s", ex.slug, exc)
        self.seconds = time.perf_counter() - t0
        log.info(
            "gallery: %d of %d examples precomputed in %.1f s",
            len(self.ready),
            len(examples),
            self.seconds,
        )
        self.done.set()

    @staticmethod
    def _head_of(ex: Example, body: dict) -> tuple[int, int]:
        """The example's head, clamped to the model (a smaller model in tests)."""
        s = ex.state
        return min(s.layer or 0, body["layers"] - 1), min(s.head or 0, body["heads"] - 1)

    def warm_head(self, service: Any, ex: Example) -> None:
        s = ex.state
        body = service.analyze(s.text, s.alpha, s.causal, s.truncate)
        self.analyses[ex.slug] = body["id"]
        service.head(body["id"], *self._head_of(ex, body))

    def warm_sweep(self, service: Any, ex: Example) -> None:
        s = ex.state
        body = service.analyze(s.text, s.alpha, s.causal, s.truncate)  # cached (or re-run)
        try:
            service.pareto(body["id"], *self._head_of(ex, body))
        except ApiError as exc:  # no sweep engine: the page shows that itself
            log.info("gallery example %s: no Pareto sweep (%s)", ex.slug, exc.detail)
        self.ready.add(ex.slug)


def warmer(app: Any) -> Warmer:
    w = getattr(app.state, "gallery_warmer", None)
    if w is None:
        w = app.state.gallery_warmer = Warmer()
    return w


def on_startup(app: Any) -> None:
    """Start precomputing the examples (model already loaded by the lifespan). Off when the
    settings' ``warmup`` is off; the examples are then analysed when first opened."""
    w = warmer(app)
    service = app.state.service
    examples = load_gallery().examples
    if not app.state.settings.warmup or not examples or not getattr(service, "ready", False):
        w.done.set()
        return
    w.thread = threading.Thread(
        target=w.run, args=(service, examples), name="sparsescope-gallery", daemon=True
    )
    w.thread.start()


def on_shutdown(app: Any) -> None:
    w = getattr(app.state, "gallery_warmer", None)
    if w is not None:
        w.stop.set()


# ----------------------------------------------------------------------------- routes


class ExampleOut(Example):
    url: str = Field(description="the main page opened on this example")
    analysis: str | None = Field(None, description="its analysis id once precomputed")
    ready: bool = Field(False, description="analysis, open head and Pareto sweep are cached")


class GalleryOut(BaseModel):
    model: str = Field(description="the model the examples were measured on")
    artefact: str | None
    precomputed: bool = Field(description="every example has been precomputed")
    examples: list[ExampleOut]


def _listing(request: Request) -> dict[str, Any]:
    g = load_gallery()
    w = warmer(request.app)
    return {
        "model": g.model,
        "artefact": g.artefact,
        "precomputed": w.done.is_set() and len(w.ready) == len(g.examples),
        "examples": [
            {
                **ex.model_dump(mode="json"),
                "url": f"/gallery/{ex.slug}",
                "analysis": w.analyses.get(ex.slug),
                "ready": ex.slug in w.ready,
            }
            for ex in g.examples
        ],
    }


@router.get("/api/gallery", response_model=GalleryOut)
def gallery_api(request: Request) -> dict[str, Any]:
    """The curated examples: title, what to look at, how the head was picked (measured), the
    view state, and whether the example is precomputed."""
    return _listing(request)


@router.get("/gallery", response_class=HTMLResponse, include_in_schema=False)
def gallery_page(request: Request, service: ServiceDep) -> HTMLResponse:
    """The gallery: one card per example; a card opens the main page on it."""
    listing = _listing(request)
    health = service.health()
    # the island carries what the cards' canvases draw (thumbnails); the text is in the HTML
    island = {ex["slug"]: ex.get("thumb") for ex in listing["examples"]}
    html = request.app.state.jinja.get_template("gallery.html").render(
        gallery=listing,
        model=health["model"],
        version=health["version"],
        artefact=health["artefact"],
        thumbs=json_island("gallery-thumbs", island),
        static_url="/static",
        js_url="/js",
    )
    return HTMLResponse(html, headers=PAGE_HEADERS)


Slug = Annotated[str, PathParam(description="an example's slug, see /api/gallery")]


@router.get(
    "/gallery/{slug}",
    response_class=HTMLResponse,
    include_in_schema=False,
    responses={404: {"description": "no such example (an HTML page)"}},
)
def gallery_example(slug: Slug, request: Request, service: ServiceDep) -> HTMLResponse:
    """The main page opened on one example: its state in the ``shared-state`` island (what a
    share link carries), its analysis warmed (or found precomputed)."""
    from ..routes.pages import index

    ex = get_example(slug)
    if ex is None:
        return _not_found()
    w = warmer(request.app)
    analysis = w.analyses.get(slug) if slug in w.ready else None
    if analysis is None or not _cached(service, analysis):
        analysis = warm_analysis(service, ex.state)
    data = {
        "id": None,
        "state": ex.state.model_dump(mode="json"),
        "created": None,
        "analysis": analysis,
        "gallery": {"slug": ex.slug, "title": ex.title, "explain": ex.explain,
                    "credit": ex.credit},
    }  # fmt: skip
    page = index(request, service)
    html = _with_island(bytes(page.body).decode("utf-8"), str(json_island(ISLAND_ID, data)))
    return HTMLResponse(html, headers=PAGE_HEADERS)


def _not_found() -> HTMLResponse:
    known = ", ".join(ex.slug for ex in load_gallery().examples) or "none"
    html = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        "<title>sparsescope: no such example</title></head><body>"
        "<h1>There is no gallery example with that name</h1>"
        f"<p>The examples are: {escape(known)}.</p>"
        '<p><a href="/gallery">Open the gallery</a></p></body></html>'
    )
    return HTMLResponse(html, status_code=404, headers=PAGE_HEADERS)


def _cached(service: Any, analysis_id: str) -> bool:
    try:
        service.get(analysis_id)
    except ApiError:
        return False
    return True


def _with_island(html: str, island: str) -> str:
    """The island just before ``</body>`` (parsed before the deferred module scripts run)."""
    at = html.rfind("</body>")
    return html + island if at < 0 else html[:at] + island + "\n" + html[at:]
