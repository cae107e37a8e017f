"""The example gallery: its file and its precomputation at start-up.

The examples live in ``static/gallery/examples.json``, built (and their heads picked by measuring
the real model) by ``scripts/build_gallery.py``; each holds a
:class:`~sparsescope.web.schemas.ShareState`. Opening an example serves the main page with that
state in the ``shared-state`` JSON island, exactly as a share link does, so the page restores it
with the same code.

Instant opening: at start-up, after the model has loaded, a background thread (:class:`Warmer`)
analyses every example and prepares its open head and its Pareto sweep in the service's cache
(when the settings' ``warmup`` is on, as it is by default; off in most tests). ``/healthz`` and the
other routes never wait for it; an example opened before its turn (or after its analysis was
evicted from the cache) is analysed on the spot.
"""

from __future__ import annotations

import importlib.resources
import json
import logging
import threading
import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from pydantic import ValidationError

from ..engine.request import AnalysisRequest
from ..engine.service import AnalysisService
from .schemas import Example, Gallery

log = logging.getLogger(__name__)


def examples_path():
    """``static/gallery/examples.json`` inside the installed package."""
    return importlib.resources.files("sparsescope.static").joinpath("gallery", "examples.json")


@lru_cache(maxsize=1)
def load_gallery() -> Gallery:
    """The gallery file, validated (every state is a ShareState); an unreadable file gives an
    empty gallery and a logged error, never a failing server."""
    try:
        data = json.loads(examples_path().read_text(encoding="utf-8"))
        return Gallery.model_validate(data)
    except (OSError, json.JSONDecodeError, ValidationError) as exc:
        log.error("the example gallery %s cannot be read: %s", examples_path(), exc)
        return Gallery(version=0, model="", examples=[])


def get_example(slug: str) -> Example | None:
    return next((ex for ex in load_gallery().examples if ex.slug == slug), None)


def head_of(ex: Example, layers: int, heads: int) -> tuple[int, int]:
    """The example's head, clamped to the model (a smaller model in tests)."""
    s = ex.state
    return min(s.layer or 0, layers - 1), min(s.head or 0, heads - 1)


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

    def start(self, service: AnalysisService, examples: list[Example], enabled: bool) -> None:
        """Precompute ``examples`` in a daemon thread (the model is loaded already); with
        ``enabled`` off (the settings' ``warmup``) nothing runs and the warmer is done."""
        if not enabled or not examples or not service.ready:
            self.done.set()
            return
        self.thread = threading.Thread(
            target=self.run, args=(service, examples), name="sparsescope-gallery", daemon=True
        )
        self.thread.start()

    def run(self, service: AnalysisService, examples: list[Example]) -> None:
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

    def warm_head(self, service: AnalysisService, ex: Example) -> None:
        body = service.analyze(AnalysisRequest.of(ex.state))
        self.analyses[ex.slug] = body["id"]
        service.head(body["id"], *head_of(ex, body["layers"], body["heads"]))

    def warm_sweep(self, service: AnalysisService, ex: Example) -> None:
        body = service.analyze(AnalysisRequest.of(ex.state))  # cached (or re-run)
        service.pareto(body["id"], *head_of(ex, body["layers"], body["heads"]))
        self.ready.add(ex.slug)

    def analysis(self, service: AnalysisService, slug: str) -> str | None:
        """The id of the example's precomputed analysis while it is still cached, else None."""
        analysis_id = self.analyses.get(slug) if slug in self.ready else None
        return analysis_id if analysis_id is not None and service.cached(analysis_id) else None

    def listing(self, gallery: Gallery) -> dict[str, Any]:
        """The ``GET /api/gallery`` body: every example, its page and what is precomputed."""
        return {
            "model": gallery.model,
            "artefact": gallery.artefact,
            "precomputed": self.done.is_set() and len(self.ready) == len(gallery.examples),
            "examples": [
                {
                    **ex.model_dump(mode="json"),
                    "url": f"/gallery/{ex.slug}",
                    "analysis": self.analyses.get(ex.slug),
                    "ready": ex.slug in self.ready,
                }
                for ex in gallery.examples
            ],
        }
