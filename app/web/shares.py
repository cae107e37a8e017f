"""Share links: a view of the page (:class:`~sparsescope.web.schemas.ShareState`) saved under an id.

A state is checked on the way in (its size, then its schema) and again on the way out (a state
saved by an older version may no longer be valid), and stored in the SQLite database of
:mod:`sparsescope.engine.store`. Opening a link warms the analysis of its text and its open head, so
that the page's own requests find them in the service's cache.
"""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import urlencode

from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from sparse_core.errors import SparsescopeError
from sparse_core.methods import METHODS
from sparse_core.view_codec import share_flags
from sparse_core.view_schema import shown

from ..engine.errors import Gone, Invalid, NotFound, TooLarge, UnknownModel
from ..engine.request import AnalysisRequest, api_wording, check_not_blank
from ..engine.service import AnalysisService
from ..engine.store import ShareRecord, ShareStore, is_valid_id
from .errors import validation_message
from .schemas import MAX_TEXT_CHARS, ShareState

log = logging.getLogger(__name__)

#: A share's state, serialised as compact UTF-8 JSON, may be at most this large.
MAX_STATE_BYTES = 64 * 1024
#: The id of the JSON island that carries a shared (or gallery) view into the main page.
ISLAND_ID = "shared-state"
#: Longest lecture URL query a share redirects to (uvicorn's h11 takes request heads of 16 KiB).
MAX_REDIRECT_QUERY = 8000


def check_state(state: dict[str, Any]) -> ShareState:
    """A posted state as a :class:`ShareState`: :class:`TooLarge` over :data:`MAX_STATE_BYTES`,
    :class:`Invalid` (naming ``state.<field>``) when it does not match the schema."""
    text = json.dumps(state, ensure_ascii=False, separators=(",", ":"))
    size = len(text.encode("utf-8", "surrogatepass"))  # lone surrogates: Invalid below
    if size > MAX_STATE_BYTES:
        raise TooLarge(
            f"the shared state is {size} bytes of JSON; at most {MAX_STATE_BYTES} bytes "
            f"(64 KiB) can be shared: shorten the text (at most {MAX_TEXT_CHARS} characters)",
            field="state",
        )
    try:
        checked = ShareState.model_validate(state)
    except ValidationError as exc:
        errors = [{**e, "loc": ("state", *e["loc"])} for e in exc.errors()]
        detail, field = validation_message(RequestValidationError(errors))
        raise Invalid(detail, field=field) from None
    check_not_blank(checked.text, field="state.text")  # a 400, as /api/analyze answers it
    return checked


def check_openable(service: AnalysisService, state: ShareState) -> ShareState:
    """``state`` if opening it would work, with its model's id (None: the default's): its text
    analysable as ``POST /api/analyze`` would analyse it (not blank, some token in the model's
    vocabulary, within its positions unless ``truncate``: a 400 naming ``state.text``), its
    models served and pane B's method in the registry (a 422 naming ``state.model``,
    ``state.view.cmpModel`` or ``state.view.cmpMethod``). Shares saved before these checks still
    open (:func:`load_share` only validates the schema)."""
    try:
        slot = service.slot_for(state.model)
    except UnknownModel as exc:
        raise UnknownModel(str(exc), field="state.model") from None
    view = state.view.model_dump()
    cmp_method = view.get("cmpMethod")
    if cmp_method and cmp_method not in METHODS:
        raise Invalid(
            f"state.view.cmpMethod must be a method of GET /api/methods ({', '.join(METHODS)}) "
            f"or empty, got {shown(cmp_method)}",
            field="state.view.cmpMethod",
        )
    cmp_model = view.get("cmpModel")
    if cmp_model:
        try:
            service.slot_for(cmp_model)
        except UnknownModel:
            served = ", ".join(m["id"] for m in service.models()["models"])
            raise Invalid(
                f"state.view.cmpModel must be a served model's id ({served}) or empty, got "
                f"{shown(cmp_model)}",
                field="state.view.cmpModel",
            ) from None
    try:
        with api_wording():
            slot.model.encode(state.text, truncate=state.truncate, start=state.start)
    except SparsescopeError as exc:
        exc.field = f"state.{exc.field or 'text'}"
        raise
    # a share names its model: the default of today may not be the default of tomorrow
    return state.model_copy(update={"model": slot.id})


def load_share(store: ShareStore, share_id: str) -> tuple[ShareRecord, ShareState]:
    """The record and its re-checked state; :class:`NotFound` when the id is unknown,
    :class:`Gone` when the saved state no longer validates."""
    rec = store.get(share_id)
    if rec is None:
        if not is_valid_id(share_id):  # never echo arbitrary input back
            raise NotFound(
                "no such share: a share id is 12 characters of A-Z, a-z, 0-9, - and _ "
                "(check that the link was copied whole)"
            )
        raise NotFound(f"no share with id {share_id!r}: the link is mistyped or was never created")
    try:
        state = _stored_state(share_id, rec.state_json)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "state"
        log.warning("share %s no longer validates: %s", share_id, exc)
        raise Gone(
            f"share {share_id!r} was saved in a form this version of sparsescope cannot open "
            f"({where}: {err['msg']}); open the page and share the view again",
            field="state",
        ) from None
    return rec, state


def _stored_state(share_id: str, state_json: str) -> ShareState:
    """A saved state as a :class:`ShareState`. Flags saved before ``view`` was typed are read as
    the page reads them: a tile size given as a number is its string, a flag that does not
    validate (e.g. ``{"scope": "foo"}``) is left out with a warning, as the page always ignored
    it (the share opens with that flag's default)."""
    try:
        return ShareState.model_validate_json(state_json)
    except ValidationError as exc:
        try:
            raw = json.loads(state_json)
        except ValueError:
            raise exc from None
        view = raw.get("view") if isinstance(raw, dict) else None
        if not isinstance(view, dict):
            raise
        flags, errors = share_flags(view)  # the page's reading: a tile size 64 is "64"
        if flags == view:
            raise
        if errors:
            log.warning("share %s: view flags left out: %s", share_id, "; ".join(errors.values()))
        return ShareState.model_validate({**raw, "view": flags})


def share_body(rec: ShareRecord, state: ShareState) -> dict[str, Any]:
    """The ``GET /api/share/{id}`` body, also what the pages' JSON island holds."""
    return {"id": rec.id, "state": state.model_dump(mode="json"), "created": rec.created}


def warm_analysis(service: AnalysisService, state: ShareState) -> str | None:
    """Analyse the shared text and prepare its open head now (or find both cached), so the view
    opens at once; the analysis id, or None when the text cannot be analysed (the page then
    shows the same error when it analyses)."""
    if not service.ready:
        return None
    try:
        body = service.analyze(AnalysisRequest.of(state))
    except SparsescopeError as exc:
        log.info("shared text not analysed: %s", exc)
        return None
    if state.layer is not None and state.head is not None:
        try:
            service.head(body["id"], state.layer, state.head)
        except SparsescopeError as exc:  # e.g. a head this model does not have: the page clamps
            log.info("shared head not prepared: %s", exc)
    return body["id"]


def lecture_query(state: ShareState) -> str:
    """The lecture page's own URL state (frontend/js/lecture/state.js) of a lecture share."""
    q: dict[str, str | int | float] = {"step": state.lecture_step or 0, "text": state.text}
    q.update(alpha=state.alpha, causal="1" if state.causal else "0")
    if state.model is not None:
        q["model"] = state.model
    q.update({k: v for k, v in (("layer", state.layer), ("head", state.head)) if v is not None})
    return urlencode(q)
