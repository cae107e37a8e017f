"""The page's view read and written by the server, by the rules of the view's one definition
(:mod:`sparse_core.view_schema`), as the page does it (frontend/js/view-state.js; the same
answers and messages on the same cases: tests/test_view_schema.py):

- :func:`decode_query`: a page address's query -> the store fields it names (app/web/preload.py: a
  share or gallery page's query overrides the saved view for the ``preload`` island);
- :func:`share_flags`, :func:`from_share`: a ShareState (its ``view`` flags checked) -> store
  fields (app/web/shares.py: a stored share whose flags no longer validate still opens);
- :func:`to_share`, :func:`share_patch`: store fields -> a ShareState, or the keys to update one.

A value a field does not allow is left out, with a message
``<key> must be <what is allowed>, got <the value as JSON>``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from . import view_schema as vs

# ----------------------------------------------------------------------------- the address


@dataclass(frozen=True)
class Decoded:
    """A page address read: the store fields it names, a message per value left out, and a
    notice per number clamped to its field's range."""

    state: dict[str, Any]
    errors: dict[str, str]
    notices: dict[str, str] = field(default_factory=dict)


def _pairs(query: str | Mapping[str, str] | Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    if isinstance(query, str):
        return parse_qsl(query[1:] if query.startswith("?") else query, keep_blank_values=True)
    multi = getattr(query, "multi_items", None)  # starlette's QueryParams: every value
    if multi is not None:
        return list(multi())
    if isinstance(query, Mapping):
        return list(query.items())
    return list(query)


def decode_query(query: str | Mapping[str, str] | Iterable[tuple[str, str]]) -> Decoded:
    """Read a page address's query as the page does (frontend/js/view-state.js ``decodeQuery``):
    the store fields its keys name (the first value of a repeated key), ``params`` only with
    a ``method`` read or a ``p.`` key (so that it can override a saved view), ``start`` with
    ``truncate: true``. Values a field does not allow are left out, each with a message keyed by
    its address key; numbers out of their field's range are clamped to it, each with a notice."""
    first: dict[str, str] = {}
    for k, v in _pairs(query):
        first.setdefault(k, v)
    state: dict[str, Any] = {}
    errors: dict[str, str] = {}
    notices: dict[str, str] = {}
    for f in vs.VIEW_FIELDS:
        if f.query is None:
            continue
        if f.kind == "params":
            keys = [k for k in first if k.startswith(vs.PARAM_PREFIX)]
            if keys or "method" in state:  # a method read (the field before)
                state[f.key] = _decode_params(first, keys, errors)
            continue
        if f.query not in first:
            continue
        try:
            state[f.key] = vs.check_query_value(f, first[f.query])
        except vs.Clamped as exc:
            state[f.key] = exc.value
            notices[f.query] = str(exc)
        except vs.Rejected as exc:
            errors[f.query] = str(exc)
            continue
        if f.write == "truncate":
            state["truncate"] = True
    return Decoded(state, errors, notices)


def _decode_params(first: dict[str, str], keys: list[str], errors: dict[str, str]) -> dict:
    out: dict[str, str] = {}
    for k in keys:
        name, raw = k[len(vs.PARAM_PREFIX) :], first[k]
        if not re.fullmatch(vs.PARAM_NAME, name):
            errors[k] = f"{vs.shown(k)} is not a slider: a name is {vs.PARAM_HINT}"
        elif len(raw) > vs.PARAM_MAX_CHARS:
            errors[k] = f"{k} must be at most {vs.PARAM_MAX_CHARS} characters, got {vs.shown(raw)}"
        elif len(out) >= vs.MAX_PARAMS:
            errors[k] = f"{k} is one slider too many: at most {vs.MAX_PARAMS}"
        else:
            out[name] = raw
    return out


# ----------------------------------------------------------------------------- share links


def share_flags(view: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The known flags of a ``ShareState.view`` checked (:func:`check_share_value`), a message per
    flag left out (keyed ``view.<name>``); other keys (another client's) pass unchanged."""
    out: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for name, value in view.items():
        f = vs.FLAGS.get(name)
        if f is None:
            out[name] = value
            continue
        try:
            out[name] = vs.check_share_value(f, value)
        except vs.Rejected as exc:
            errors[f"view.{name}"] = str(exc)
    return out, errors


def from_share(share: Mapping[str, Any]) -> Decoded:
    """The store fields of a saved view (a ShareState, already validated by the server): every
    shared field (its default where the share omits it or holds null, except where null is
    allowed) and the valid ``view`` flags (frontend/js/view-state.js ``fromShare``)."""
    state: dict[str, Any] = {}
    view = share.get("view") or {}
    flags, errors = share_flags(view if isinstance(view, Mapping) else {})
    for f in vs.VIEW_FIELDS:
        if f.share is None or not f.state:
            continue
        if f.flag:
            if f.flag in flags:
                state[f.key] = flags[f.flag]
            continue
        v = share.get(f.share)
        state[f.key] = vs.fresh(f.default) if v is None and not f.nullable else v
    state["truncate"] = bool(state["truncate"])
    return Decoded(state, errors)


def to_share(state: Mapping[str, Any]) -> dict[str, Any]:
    """The ShareState of store fields (frontend/js/view-state.js ``toShare``): every top-level
    field, ``start`` only for a window (``truncate`` and not 0), ``view`` flags only where they
    differ from their default, ``lecture_step`` null."""
    out: dict[str, Any] = {}
    view: dict[str, Any] = {}
    for f in vs.VIEW_FIELDS:
        if f.share is None or not f.state:
            continue
        v = state.get(f.key, f.default)
        if f.flag:
            if v != f.default:
                view[f.flag] = v
        elif f.write == "truncate":
            if state.get("truncate") and v:
                out[f.share] = v
        else:
            out[f.share] = vs.fresh(v)
    out["lecture_step"] = None
    out["view"] = view
    return out


def share_patch(state: Mapping[str, Any]) -> dict[str, Any]:
    """Store fields (e.g. :func:`decode_query`'s) as ShareState keys, to update a saved view:
    top-level ones, and ``view`` for the flags; fields a share does not hold are left out."""
    out: dict[str, Any] = {}
    view: dict[str, Any] = {}
    for key, v in state.items():
        f = vs.FIELDS.get(key)
        if f is None or f.share is None:
            continue
        if f.flag:
            view[f.flag] = v
        else:
            out[f.share] = vs.fresh(v)
    if view:
        out["view"] = view
    return out
