"""The served models: one :class:`~sparsescope.engine.slot.ModelSlot` each, keyed by model id.

``sparsescope serve --model A --model B`` serves several models, the first being the default; a
request names its model by id (or by the name it was served under) and reaches it only through
its slot. :meth:`ModelRegistry.load` loads every model once (and the ``--artefact`` one, used
for the model it was fitted for), refusing two models with one id.
"""

from __future__ import annotations

import logging

from sparse_core.errors import SparsescopeError
from sparse_core.sparsefinder import load_artefact

from .errors import UnknownModel
from .settings import Settings
from .slot import ModelSlot

log = logging.getLogger(__name__)


class ModelRegistry:
    """The slots of the served models, in order (the first is the default)."""

    def __init__(self, settings: Settings, slots: list[ModelSlot]) -> None:
        self.settings = settings
        self.all = list(slots)
        #: model id -> slot, once loaded (:meth:`load`)
        self.by_id: dict[str, ModelSlot] = {}

    @property
    def default(self) -> ModelSlot:
        return self.all[0]

    @property
    def ready(self) -> bool:
        return all(s.ready for s in self.all)

    def load(self) -> None:
        """Load every model, then the ``--artefact`` one (for the model it was fitted for)."""
        by_id: dict[str, ModelSlot] = {}
        for s in self.all:
            s.load()
            if s.id in by_id:
                raise SparsescopeError(
                    f"two served models have the id {s.id!r} (a directory's id is its name); "
                    "serve each model once, or rename one directory",
                    field="model",
                )
            by_id[s.id] = s
        self.by_id = by_id
        if self.settings.artefact_path is not None:
            self._explicit_artefact()

    def _explicit_artefact(self) -> None:
        """``--artefact``: used for the served model it was fitted for, at its own alpha."""
        art = load_artefact(self.settings.artefact_path)
        slot = self.by_id.get(art.model_id)
        if slot is None:
            raise SparsescopeError(
                f"artefact {self.settings.artefact_path} was fitted for model {art.model_id}, "
                f"which is not served (served: {', '.join(self.by_id)})",
                field="artefact_path",
            )
        slot.use_explicit_artefact(art)

    def loaded(self) -> list[ModelSlot]:
        """The loaded slots (before :meth:`load`: the default one, given a model)."""
        return list(self.by_id.values()) if self.by_id else [self.default]

    def slot_for(self, model: str | None) -> ModelSlot:
        """The slot of model ``model`` (its id, or the name it was served by; None: the
        default); an unknown one is an error naming the served ids."""
        if model is None:
            return self.default
        slots = self.by_id or {s.id: s for s in self.all if s.ready}
        found = slots.get(model)
        if found is None:
            found = next((s for s in self.all if s.name is not None and s.name == model), None)
        if found is None:
            shown = model if len(model) <= 80 else model[:80] + "…"
            raise UnknownModel(
                f"model {shown!r} is not served here; served models: {', '.join(slots)} "
                "(start the server with --model NAME_OR_DIR for another)",
                field="model",
            )
        return found

    def info(self) -> dict:
        """``GET /api/models``: every served model, the default first."""
        return {"default": self.default.id, "models": [s.info() for s in self.all]}

    def drop_background_work(self) -> None:
        """Drop the low-priority model work still queued on every model's worker."""
        for slot in self.all:
            if slot.drop_background_work():
                log.info("shutdown: low-priority work of %s dropped", slot.name or "the model")

    def close(self) -> None:
        """Shutdown begins: every worker refuses its queued and later jobs (503)."""
        for slot in self.all:
            if n := slot.close():
                name = slot.name or "the model"
                log.info("shutdown: %d queued analyses on %s answered 503", n, name)
