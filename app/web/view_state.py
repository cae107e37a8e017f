"""``ShareState.view`` as a typed pydantic model, made from the view's one definition
(:data:`sparse_core.view_schema.VIEW_FIELDS`): one field per display flag of a share (``scope``,
``grid``, ``hideSpecial``, ``block``, ``paretoX``, ``zoom``, side by side's ``compare`` and
``cmp*``), its type (a ``Literal`` of the allowed values, a bool, an int, a float, a string),
its default and description, checked by
:func:`sparse_core.view_schema.check_share_value`, the page's own rule (frontend/js/view-state.js),
strictly as the JSON schema says (a tile size is the string ``"64"``; the page also reads the
number 64, which shares saved before this model may hold: app/web/shares.py).

Keys of no flag are kept as they are (another client's, e.g. a lecture tab), typed by the caller
(``extra``: a short scalar); at most ``max_flags`` keys in all. A view dumps the flags it was
given, not the defaults of the others, so that a share reads back as it was saved
(``{"hideSpecial": true}``). It compares equal to that dict, as the untyped dict it replaces did.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    Field,
    PlainValidator,
    create_model,
    model_serializer,
    model_validator,
)

from sparse_core import view_schema
from sparse_core.methods import METHODS
from sparse_core.view_schema import Rejected, ViewField, allowed, check_share_value

from .openapi import served


class ViewBase(BaseModel):
    """What every view model shares: the flags it was given dump as given; equal to their dict."""

    #: at most this many keys (flags and others)
    max_flags: ClassVar[int] = 32

    @model_validator(mode="before")
    @classmethod
    def _not_too_many(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and len(data) > cls.max_flags:
            raise ValueError(f"a view holds at most {cls.max_flags} flags, got {len(data)}")
        return data

    @model_serializer(mode="wrap")
    def _given(self, handler: Any) -> dict[str, Any]:
        out = handler(self)
        given = self.model_fields_set | set(self.__pydantic_extra__ or {})
        return {k: v for k, v in out.items() if k in given}

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: Any, handler: Any) -> Any:
        """Its fields' schema in both modes (the serializer above only leaves out flags not
        given; without this, the response schema would be an untyped object)."""
        schema = dict(core_schema)
        schema.pop("serialization", None)
        return handler(schema)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self.model_dump(mode="json") == dict(other)
        return super().__eq__(other)


def inline_defs(schema: dict[str, Any]) -> dict[str, Any]:
    """A JSON schema with its ``$defs`` written in where they are referred to (a schema placed
    inside another document, e.g. ``WithJsonSchema`` in OpenAPI, cannot refer to its own
    ``#/$defs``). For schemas without recursion, as ShareState's."""
    defs = schema.get("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref", "")
            if ref.startswith("#/$defs/"):
                return walk(defs[ref[len("#/$defs/") :]])
            return {k: walk(v) for k, v in node.items() if k != "$defs"}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(schema)


def _flag_type(f: ViewField) -> Any:
    """The annotated type of one flag: its JSON type, checked by the page's rule."""

    def check(value: Any) -> Any:
        if f.kind == "enum" and not isinstance(value, str):  # as its JSON schema says
            raise ValueError(f"must be {allowed(f, 'share')} (a JSON string)")
        try:
            return check_share_value(f, value)
        except Rejected:
            raise ValueError(f"must be {allowed(f, 'share')}") from None

    json_type: Any = {"bool": bool, "int": int, "float": float}.get(f.kind, str)
    if f.values:
        json_type = Literal[f.values]
    return Annotated[json_type, PlainValidator(check, json_schema_input_type=json_type)]


def flag_keywords(f: ViewField) -> dict[str, Any]:
    """The JSON Schema keywords of one flag's bounds (its range, length, pattern), so that the
    OpenAPI schema states what :func:`check_share_value` enforces (a
    schema-valid share is never refused)."""
    out: dict[str, Any] = {}
    if f.key == "cmpMethod":  # pane B's method: a name of the registry, or "" (none chosen)
        out["enum"] = ["", *METHODS]
    if f.kind in ("int", "float") and not f.values:
        if f.lo is not None:
            out["minimum"] = f.lo
        if f.hi is not None:
            out["maximum"] = f.hi
    if f.kind == "str":
        if f.max_len is not None:
            out["maxLength"] = f.max_len
        if f.pattern is not None:
            out["pattern"] = f.pattern
    return out


def _flag_extra(f: ViewField) -> dict[str, Any] | None:
    """A flag's ``json_schema_extra``: its static keywords, and for pane B's model the served
    ids (filled in when the schema is built, app/web/openapi.py)."""
    if f.key == "cmpModel":
        return served("model-or-empty", **flag_keywords(f))
    return flag_keywords(f) or None


def view_flags_model(base: type[ViewBase]) -> type[ViewBase]:
    """The ``ShareState.view`` model: ``base`` (its config types the other keys: a subclass of
    :class:`ViewBase` with ``extra="allow"`` and ``__pydantic_extra__: dict[Key, Scalar]``)
    with one field per flag of :data:`~sparse_core.view_schema.FLAGS`."""
    fields: dict[str, Any] = {
        name: (
            _flag_type(f),
            Field(f.default, description=f.doc, json_schema_extra=_flag_extra(f)),
        )
        for name, f in view_schema.FLAGS.items()
    }
    return create_model(  # type: ignore[call-overload,no-any-return]
        "ViewFlags",
        __base__=base,
        __doc__="Display flags of a shared view (sparse_core/view_schema.py VIEW_FIELDS).",
        **fields,
    )
