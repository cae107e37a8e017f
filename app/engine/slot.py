"""One loaded model and what belongs to it: its id, its Sparsefinder artefacts, its worker.

The service holds one :class:`ModelSlot` per served model (``sparsescope serve --model A --model
B``), keyed by the model's id; analyses name their model and reach it only through its slot. The
slot owns the model's worker (:class:`~sparsescope.engine.batching.ModelWorker`, made from the
settings once the model is loaded): every forward, the warm-up's included, goes through it, under
the slot's ``lock``.

Sparsefinder's projections are learned on one model's graphs at one alpha (Treviso et al. 2022,
§3), so the slot looks up, per alpha, the artefact fitted for its model at that alpha: the one
given with ``--artefact`` (used only for its own model, at its own alpha), else one in the
artefact directory (``settings.artefacts_dir()``, where ``sparsescope fit --out`` may write),
else the shipped one (the default model at alpha 1.5), else none (the sf-* methods are then
unavailable and the page says how to fit one). At the model's own α (a request's ``"own"``)
the artefact is the one at that α when it is one value (1.5 for a softmax-trained model, the
adapted default's 1.5); a per-head own α (a learned-α model) has none: an artefact is fitted on
graphs of one α, so the sf-* methods are unavailable there.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from sparse_core import load_model
from sparse_core.errors import ArtefactError
from sparse_core.sparsefinder import artefact_name, load_artefact, shipped_dir

from .batching import ModelWorker
from .request import OWN_ALPHA, AnalysisRequest, api_wording
from .settings import Settings
from .summaries import tie_batch

log = logging.getLogger(__name__)

#: Distinct alphas whose artefact lookup is remembered (every alpha in [1, 2] may be asked).
MAX_ALPHAS = 64


class ModelSlot:
    """A model loaded once (:meth:`load`), its artefact lookup, and its worker and run lock.

    ``model``/``artefact`` preloaded (tests: a tiny model); otherwise :meth:`load` loads
    ``name`` (a directory or a cached model name; None: the default model) on
    ``settings.device``, or calls ``loader(settings)``. ``use_artefact=False`` runs without
    Sparsefinder.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        name: str | None = None,
        model: Any = None,
        artefact: Any = None,
        use_artefact: bool = True,
        loader: Callable[[Settings], Any] | None = None,
    ) -> None:
        self.settings = settings
        self.name = name
        self._model = model
        self._loader = loader
        self._use_artefact = use_artefact
        self._explicit_artefact = artefact
        self._artefacts: dict[float, tuple[Any, str | None]] = {}
        self._load_lock = threading.Lock()
        #: one forward at a time on this model (one CPU/GPU; spaCy tags beside it)
        self.lock = threading.Lock()
        self._worker: ModelWorker | None = None
        if model is not None:
            self._worker = self._make_worker()

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
                    self._model = load_model(
                        self.name, self.settings.device, max_tokens=self.settings.max_tokens
                    )
                log.info("model %s ready in %.1f s", self._model.model_id, time.perf_counter() - t0)
                self._worker = self._make_worker()

    # -- its worker ----------------------------------------------------------------------------

    def _make_worker(self) -> ModelWorker:
        s = self.settings
        return ModelWorker(
            self._model,
            self.lock,
            window_s=s.batch_window_ms / 1000.0,
            max_window_s=s.batch_window_max_ms / 1000.0,
            batch_tokens=s.batch_tokens,
            queue_tokens=s.queue_tokens,
            queue_jobs=s.queue_jobs,
            split=s.batch_split,
            after_batch=tie_batch,  # a batch's summaries are computed together
        )

    @property
    def worker(self) -> ModelWorker:
        """The one worker that runs this model's forwards."""
        if self._worker is None:
            raise RuntimeError("ModelSlot.load() has not run (the service's start does it)")
        return self._worker

    def submit(self, request: AnalysisRequest, n: int) -> Future:
        """Queue ``request`` (``n`` tokens) on the worker; the future of its ``RunOutput``."""
        return self.worker.submit_request(request, n)

    def run(self, request: AnalysisRequest) -> Any:
        """``request``'s ``RunOutput``, through the worker (it waits its turn like any other)."""
        with api_wording():
            n = len(
                self.model.encode(request.text, truncate=request.truncate, start=request.start).ids
            )
            return self.submit(request, n).result()

    def drop_background_work(self) -> int:
        """Drop the low-priority jobs still queued (the app's shutdown); how many."""
        return self._worker.drop_low() if self._worker is not None else 0

    def close(self) -> int:
        """The server is shutting down: queued and later jobs get 503 (``ModelWorker.close``);
        how many were refused."""
        return self._worker.close() if self._worker is not None else 0

    def use_explicit_artefact(self, art: Any) -> None:
        """Use ``art`` (the ``--artefact`` one, already loaded) at its own alpha (nothing, for a
        slot that runs without Sparsefinder)."""
        if not self._use_artefact:
            return
        self._check(art)
        self._explicit_artefact = art
        self._artefacts.clear()

    def _check(self, art) -> None:
        cfg = self.model.config
        art.check_model(cfg.num_layers, cfg.num_heads, cfg.head_dim)

    # -- artefacts -----------------------------------------------------------------------------

    def artefact_for(self, alpha: float | str) -> tuple[Any, str | None]:
        """(artefact, name) fitted for this model at ``alpha``, or (None, None). ``alpha``
        ``"own"``: the model's own α, when it is one value (none for a per-head α)."""
        if not self._use_artefact:
            return None, None
        if alpha == OWN_ALPHA:
            own = self.model.default_alpha
            if not isinstance(own, int | float):  # (L, H) per head: no one-α artefact fits
                return None, None
            alpha = float(own)
        key = round(float(alpha), 9)
        if key in self._artefacts:
            return self._artefacts[key]
        art = self._explicit_artefact
        if art is not None and abs(float(art.alpha) - float(alpha)) <= 1e-9:
            found = (art, artefact_label(art))
        else:
            found = (None, None)
            for where in (self.settings.artefacts_dir(), None):
                if where is not None and not any(where.glob("sparsefinder-*.safetensors")):
                    continue
                try:
                    art = load_artefact(where, model_id=self.id, alpha=alpha)
                    self._check(art)
                    found = (art, artefact_label(art))
                    break
                except (ArtefactError, OSError) as exc:
                    log.info("no Sparsefinder artefact for %s at alpha %g: %s", self.id, alpha, exc)
        if len(self._artefacts) < MAX_ALPHAS:
            self._artefacts[key] = found
        return found

    def artefact_alphas(self) -> list[float]:
        """The alphas at which an artefact fitted for this model is found (for /api/models)."""
        if not self._use_artefact:
            return []
        found: set[float] = set()
        if self._explicit_artefact is not None:
            found.add(round(float(self._explicit_artefact.alpha), 9))
        for folder in (self.settings.artefacts_dir(), shipped_dir()):
            try:
                metas = [f for f in folder.iterdir() if f.name.endswith(".json")]
            except OSError:
                continue
            for js in metas:
                try:
                    meta = json.loads(js.read_text(encoding="utf-8"))
                    if str(meta["model_id"]) == self.id:
                        found.add(round(float(meta["alpha"]), 9))
                except (OSError, ValueError, KeyError, TypeError):
                    continue
        return sorted(found)

    def info(self) -> dict[str, Any]:
        """What ``GET /api/models`` says of this model."""
        m = self.model
        cfg = m.config
        arch = getattr(m, "arch", None)
        return {
            "id": self.id,
            "architecture": getattr(arch, "label", None) or type(m).__name__,
            "model_type": getattr(arch, "model_type", None) or "bert",
            "layers": cfg.num_layers,
            "heads": cfg.num_heads,
            "kv_heads": getattr(cfg, "num_kv_heads", cfg.num_heads),
            "decoder": bool(getattr(cfg, "is_decoder", False)),
            "max_tokens": m.max_positions,
            "device": m.device,
            "artefacts": self.artefact_alphas(),
            # trained with entmax (an adapted model): its own α, one value or one per head
            "own_alpha": bool(getattr(m, "alpha_trained", False)),
            "card": self.card(),
        }

    def card(self) -> dict:
        """The model's card (``sparse_core.card.card_for``: what it is, from its config, and
        the figures ``sparsescope card`` measured and shipped for it), read once."""
        got = getattr(self, "_card", None)
        if got is None:
            from sparse_core.card import card_for

            got = self._card = card_for(self.model)
        return got


def artefact_label(art) -> str | None:
    """The name an artefact is known by (its ``meta["name"]``, else the file base name)."""
    if art is None:
        return None
    name = art.meta.get("name") if isinstance(art.meta, dict) else None
    return str(name) if name else artefact_name(art.model_id, art.alpha)
