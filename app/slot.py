"""One loaded model and what belongs to it: its id, its Sparsefinder artefacts, its run lock.

The service reaches "the model" only through a :class:`ModelSlot`, so that a registry of models
(several slots keyed by model id) can take its place without touching the analysis code.

Sparsefinder's projections are learned on one model's graphs at one alpha (Treviso et al. 2022,
§3), so the slot looks up, per alpha, the artefact fitted for its model at that alpha: the one
given with ``--artefact`` (used only at its own alpha), else the shipped one, else none (the sf-*
methods are then unavailable and the page says so).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from sparse_core import load_model
from sparse_core.errors import ArtefactError
from sparse_core.sparsefinder import artefact_name, load_artefact

from .settings import Settings

log = logging.getLogger(__name__)

#: Distinct alphas whose artefact lookup is remembered (every alpha in [1, 2] may be asked).
MAX_ALPHAS = 64


class ModelSlot:
    """A model loaded once (:meth:`load`), its artefact lookup and the lock of its forwards.

    ``model``/``artefact`` preloaded (tests: a tiny model); otherwise :meth:`load` loads
    ``settings.model_path`` (None: the default model) on ``settings.device``, or calls
    ``loader(settings)``. ``use_artefact=False`` runs without Sparsefinder.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        model: Any = None,
        artefact: Any = None,
        use_artefact: bool = True,
        loader: Callable[[Settings], Any] | None = None,
    ) -> None:
        self.settings = settings
        self._model = model
        self._loader = loader
        self._use_artefact = use_artefact
        self._explicit_artefact = artefact
        self._artefacts: dict[float, tuple[Any, str | None]] = {}
        self._load_lock = threading.Lock()
        #: one forward at a time on this model (one CPU/GPU; spaCy tags beside it)
        self.lock = threading.Lock()

    # -- the model -----------------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        return self._model is not None

    @property
    def model(self):
        if self._model is None:
            raise RuntimeError("ModelSlot.load() has not run (the service's start does it)")
        return self._model

    @property
    def id(self) -> str:
        return self.model.model_id

    def load(self) -> None:
        """Load the model (once) and the ``--artefact`` one, checked against the model: a
        mistake in either is the user's, reported at start-up."""
        with self._load_lock:
            if self._model is None:
                t0 = time.perf_counter()
                if self._loader is not None:
                    self._model = self._loader(self.settings)
                else:
                    self._model = load_model(self.settings.model_path, self.settings.device)
                log.info("model %s ready in %.1f s", self._model.model_id, time.perf_counter() - t0)
            if (
                self._use_artefact
                and self.settings.artefact_path is not None
                and self._explicit_artefact is None
            ):
                art = load_artefact(self.settings.artefact_path, model_id=self.id)
                self._check(art)
                self._explicit_artefact = art

    def _check(self, art) -> None:
        cfg = self.model.config
        art.check_model(cfg.num_layers, cfg.num_heads, cfg.head_dim)

    # -- artefacts -----------------------------------------------------------------------------

    def artefact_for(self, alpha: float) -> tuple[Any, str | None]:
        """(artefact, name) fitted for this model at ``alpha``, or (None, None)."""
        if not self._use_artefact:
            return None, None
        key = round(float(alpha), 9)
        if key in self._artefacts:
            return self._artefacts[key]
        art = self._explicit_artefact
        if art is not None:
            ok = abs(float(art.alpha) - float(alpha)) <= 1e-9
            found = (art, artefact_label(art)) if ok else (None, None)
        else:
            try:
                art = load_artefact(None, model_id=self.id, alpha=alpha)
                self._check(art)
                found = (art, artefact_label(art))
            except (ArtefactError, OSError) as exc:
                log.info("no Sparsefinder artefact for alpha %g: %s", alpha, exc)
                found = (None, None)
        if len(self._artefacts) < MAX_ALPHAS:
            self._artefacts[key] = found
        return found


def artefact_label(art) -> str | None:
    """The name an artefact is known by (its ``meta["name"]``, else the file base name)."""
    if art is None:
        return None
    name = art.meta.get("name") if isinstance(art.meta, dict) else None
    return str(name) if name else artefact_name(art.model_id, art.alpha)
