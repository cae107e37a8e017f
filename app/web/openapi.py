"""The OpenAPI schema states every constraint the server enforces.

Three kinds of bound, each written once where the value is defined:

* **static** ones (a layer index is ≥ 0, ``block`` is one of the tile sizes, alpha is in [1, 2], a
  text has a non-space character) are JSON Schema keywords on the parameter or field itself
  (``json_schema_extra``), while the server keeps its own check and its own message (a 400 or 422
  naming the field);
* bounds set by **the served models** (the model ids, the largest layer and head index, the
  token limit) are known once the app has loaded them: the parameter carries a marker
  (:func:`served`, ``x-served``) that :func:`fill_served` replaces with ``enum`` or ``maximum``
  when ``/openapi.json`` is first built, after the lifespan started the service;
* bounds set by **one analysis** (a token below its n, a tile inside its pyramid, a layer below
  its own model's layers on a server of several models) cannot be stated: the description says
  so, and the server answers 404 naming the index (:class:`~sparsescope.engine.errors
  .NotInAnalysis`), never a 400 for a value the schema allows. Left to descriptions and a 400:
  what OpenAPI cannot say at all: a text blank by Unicode category or made only of tokens
  unknown to the model (:data:`NOT_BLANK`), Pareto's and budgets' "layer and head together", a
  method's parameters (a free query string).

schemathesis' ``positive_data_acceptance`` check (ST202, "schema-valid request rejected") holds
the API to this; tests/app/test_schemathesis.py runs it, docs/api.md ("The OpenAPI schema") has
the command and its figures.
"""

from __future__ import annotations

import copy
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse

#: ``x-served`` kinds: what each is filled with, from ``GET /api/models``' list of models.
SERVED_KINDS = ("model", "model-or-empty", "layer", "head", "n", "token")
MARKER = "x-served"
VALUE = "x-value"
OPENAPI_URL = "/openapi.json"


def served(kind: str | None, **schema: Any) -> dict[str, Any]:
    """``json_schema_extra`` of a value bounded by the served models (``kind``, one of
    :data:`SERVED_KINDS`; None: by nothing served), with any static keywords (``minimum=0``):
    :func:`fill_served` writes both onto the value's schema, or onto the non-null branches of an
    optional value's ``anyOf`` (an ``enum`` beside ``anyOf`` would refuse the null)."""
    if kind is not None and kind not in SERVED_KINDS:
        raise ValueError(f"unknown served bound {kind!r}; one of {SERVED_KINDS}")
    return {MARKER: kind or "", VALUE: schema}  # "": FastAPI's schema drops a None


def bounded(**schema: Any) -> dict[str, Any]:
    """``json_schema_extra`` of a value with static keywords only (see :func:`served`)."""
    return served(None, **schema)


#: ``json_schema_extra`` of a text that must not be blank: some character other than whitespace
#: (``\\S``). The analyser also counts control, format (zero-width), private-use and unassigned
#: characters and U+FFFD as blank (``is_blank``), and a text whose tokens are all unknown to the
#: model is refused too: the descriptions say so, a 400 naming ``text`` answers them. (An exact
#: pattern is a class of ~700 ranges, ~10 kB, that made schemathesis take minutes per run.)
NOT_BLANK = {"pattern": r"\S"}


def served_bounds(models: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per ``x-served`` kind, the keywords it stands for, from ``GET /api/models``' ``models``.
    With several models the bounds are the largest of any (the analysis' own model may have
    fewer layers: a 404 then)."""
    return {
        "model": {"enum": [m["id"] for m in models]},
        # a share's pane-B model (view.cmpModel): a served id, or "" for none chosen
        "model-or-empty": {"enum": ["", *(m["id"] for m in models)]},
        "layer": {"maximum": max(m["layers"] for m in models) - 1},
        "head": {"maximum": max(m["heads"] for m in models) - 1},
        "n": {"maximum": max(m["max_tokens"] for m in models)},
        "token": {"maximum": max(m["max_tokens"] for m in models) - 1},
    }


def fill_served(node: Any, bounds: dict[str, dict[str, Any]]) -> None:
    """Replace every ``x-served`` marker in the schema ``node`` (in place) by its keywords: on the
    node itself, or on the non-null branches of its ``anyOf`` (an optional value)."""
    if isinstance(node, list):
        for item in node:
            fill_served(item, bounds)
        return
    if not isinstance(node, dict):
        return
    if MARKER in node:
        kind, static = node.pop(MARKER), node.pop(VALUE)
        # the value's own branches: not null, not a named constant ("own" beside a number)
        alts = node.get("anyOf", [])
        branches = [b for b in alts if b.get("type") != "null" and "const" not in b] or [node]
        for b in branches:
            b.update(static)
            if kind:
                b.update(bounds[kind])
    for value in node.values():
        fill_served(value, bounds)


def install_openapi(app: FastAPI, models: Any) -> None:
    """Serve ``GET /openapi.json`` (make the app with ``openapi_url=None``): ``app.openapi``
    builds the schema once the models are loaded (``models()``: the body of ``GET /api/models``,
    or None before the service started), with their bounds filled in; a schema asked for before
    that is built without them and not kept."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        # a copy: the markers are popped, and some schemas are module-level dicts (ShareIn's)
        schema = copy.deepcopy(
            get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                openapi_version=app.openapi_version,
                routes=app.routes,
                separate_input_output_schemas=app.separate_input_output_schemas,
            )
        )
        info = models()
        if info is None:  # not kept: the models' bounds are missing
            fill_served(schema, {k: {} for k in SERVED_KINDS})
            return schema
        fill_served(schema, served_bounds(info["models"]))
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]

    # a plain ``def`` route (FastAPI's own is async): the build (a tenth of a second, more on
    # a busy machine) runs in the thread pool, never on the event loop that answers /healthz
    @app.get(OPENAPI_URL, include_in_schema=False)
    def openapi_json() -> JSONResponse:
        return JSONResponse(app.openapi())
