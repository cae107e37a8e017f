"""The page's view state, defined once: every field a view of the page has (the text, α, the open
head, the method and its sliders, the selection, the display flags), its type, default and allowed
values, its key in the address bar (frontend/js/url.js) and in a share link (``ShareState``).

Everything that reads or writes a view derives from :data:`VIEW_FIELDS`:

- the page (frontend/js/view-state.js: the store's defaults, the address codec, the share codec)
  reads it from frontend/js/view-schema.js, written from this table by :func:`js_module`
  (``python -m sparse_core.view_schema --write``; tests/test_view_schema.py fails while it is
  stale);
- the server types ``ShareState.view`` from it (app/web/view_state.py) and reads a page's query
  and a share's flags the page's way (:mod:`sparse_core.view_codec`; app/web/preload.py,
  app/web/shares.py);
- :func:`sparse_core.viz.to_share_state` checks its ``view`` flags with it.

Adding a view flag is one row here (then ``--write``): the store gets its default, the address its
key, the share link its ``view.<name>``, the server its type.

Two readings of a value, one set of rules, the same messages in Python and JavaScript:

- from the address (:func:`check_query_value`, a string): ``1``/``0`` for a flag, decimal digits
  for a count, a decimal number for α, one of the listed values, an empty value for "none";
- from a share (:func:`check_share_value`, a JSON value): a JSON boolean, number or string (a tile
  size may be the number 64 or the string ``"64"``; it is kept as the string).

A value that breaks them is left out (the saved view's or the default value stays) and reported as
``<key> must be <what is allowed>, got <the value as JSON>``.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .metrics import BLOCKS
from .outputs import ALPHA_MAX, ALPHA_MIN, DEFAULT_ALPHA

#: A text longer than this (characters) is not written into the address: the analysis id is, until
#: a permanent link (``/s/{id}``) replaces it (frontend/js/session.js).
MAX_TEXT_IN_URL = 1500
#: Query keys of the method's slider values: ``p.<name>``.
PARAM_PREFIX = "p."
#: A slider's name (as ShareState.params keys) and the longest value kept.
PARAM_NAME = r"^[A-Za-z][A-Za-z0-9_.-]{0,39}$"
PARAM_HINT = "a letter, then at most 39 of A-Z a-z 0-9 _ . -"
PARAM_MAX_CHARS = 200
MAX_PARAMS = 32
#: Longest raw value quoted back in a message.
SHOWN_CHARS = 40

KINDS = ("bool", "int", "float", "enum", "str", "params")
#: When the address codec writes a field: ``always``; ``changed`` from its default (every such
#: field, ``""`` for none, on a page opened on a saved view); ``set`` (not null); ``analysis``
#: (once the text is analysed); ``truncate`` (for a window of a long text); ``text`` (the text,
#: or the analysis id when it is too long); ``never``.
WRITES = ("always", "changed", "set", "analysis", "truncate", "text", "never")

_DECIMAL = re.compile(r"^-?[0-9]+(\.[0-9]+)?$")
_DIGITS = re.compile(r"^[0-9]+$")


@dataclass(frozen=True)
class ViewField:
    """One field of a view.

    ``key`` is the page store's name (frontend/js/state.js); ``query`` its address key (None: not
    in the address); ``share`` its ShareState key, ``view.<name>`` for a flag of
    ``ShareState.view`` (None: not shared). ``lo``/``hi`` bound a number, ``values`` list an enum
    (strings, as the address holds them), ``max_len``/``pattern`` (described by ``hint``) bound a
    string; ``nullable``: null is allowed (an empty address value). ``state=False``: read from the
    address but not a store field (the analysis id).
    """

    key: str
    kind: str
    default: Any
    query: str | None
    share: str | None
    write: str = "always"
    values: tuple[str, ...] = ()
    lo: int | None = None
    hi: int | None = None
    nullable: bool = False
    max_len: int | None = None
    pattern: str | None = None
    hint: str = ""
    state: bool = True
    doc: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS or self.write not in WRITES:
            raise ValueError(f"view field {self.key}: kind {self.kind!r}, write {self.write!r}")

    @property
    def flag(self) -> str | None:
        """The name in ``ShareState.view`` (None: a top-level ShareState field or not shared)."""
        return self.share[5:] if self.share and self.share.startswith("view.") else None


# fmt: off
#: Every field of a view, in the order the address writes them.
VIEW_FIELDS: tuple[ViewField, ...] = (
    ViewField("text", "str", "", "text", "text", write="text",
              doc="the analysed text (a long one: the analysis id, then a permanent link)"),
    ViewField("id", "str", None, "id", None, write="never", nullable=True, state=False,
              doc="a cached analysis to reopen (a text too long for the address)"),
    ViewField("model", "str", None, "model", "model", write="set", nullable=True, max_len=300,
              doc="the served model's id (null: the server's default)"),
    ViewField("alpha", "float", DEFAULT_ALPHA, "alpha", "alpha", lo=ALPHA_MIN, hi=ALPHA_MAX,
              values=("own",),
              doc="entmax α: 1 softmax, 1.5 entmax, 2 sparsemax; own: the model's own α "
                  "(one per head for a learned-α model)"),
    ViewField("causal", "bool", False, "causal", "causal", write="changed",
              doc="decoder-style mask (j ≤ i)"),
    ViewField("truncate", "bool", False, None, "truncate", write="never",
              doc="analyse a window of a text over the model's positions"),
    ViewField("start", "int", 0, "start", "start", write="truncate", lo=0, hi=10_000_000,
              doc="the window's first token (a text over the model's positions); sets truncate"),
    ViewField("layer", "int", 0, "layer", "layer", write="analysis", lo=0, hi=1023,
              doc="the open head's layer"),
    ViewField("head", "int", 0, "head", "head", write="analysis", lo=0, hi=1023,
              doc="the open head"),
    ViewField("method", "str", "window", "method", "method", pattern=r"^[a-z][a-z0-9-]{0,39}$",
              hint="a method name (a-z, 0-9 and -)", doc="the method whose mask is shown"),
    ViewField("params", "params", {}, PARAM_PREFIX, "params",
              doc="the method's slider values, add-ons included: p.<name>=<value>"),
    ViewField("lockedRow", "int", None, "row", "token", write="changed", lo=0, hi=100_000,
              nullable=True, doc="the locked query row (the selection)"),
    ViewField("cluster", "int", None, "cluster", "cluster", write="changed", lo=0, hi=100_000,
              nullable=True, doc="the selected k-means cluster (POS panel)"),
    ViewField("scope", "enum", "head", "scope", "view.scope", write="changed",
              values=("head", "mean"), doc="the Pareto plot: the open head or the mean of heads"),
    ViewField("gridColour", "enum", "gold", "grid", "view.grid", write="changed",
              values=("gold", "recall", "role"),
              doc="the head grid's colour: gold sparsity, recall or the head's role"),
    ViewField("hideSpecial", "bool", False, "hide", "view.hideSpecial", write="changed",
              doc="hide [CLS]/[SEP] rows and columns"),
    ViewField("block", "enum", "128", "block", "view.block", write="changed",
              values=tuple(str(b) for b in BLOCKS),
              doc="tile size B of the block sparsity shown (sparse_core.metrics.BLOCKS)"),
    ViewField("paretoX", "enum", "sparsity", "px", "view.paretoX", write="changed",
              values=("sparsity", "block"),
              doc="the Pareto plot's x: token sparsity or block sparsity at B"),
    ViewField("paretoPoints", "bool", False, "pts", "view.paretoPoints", write="changed",
              doc="the Pareto plot: every point of each method's sweep, not only its frontier"),
    ViewField("zoom", "str", "", "zoom", "view.zoom", write="changed", max_len=40,
              pattern=r"^$|^[0-9]{1,3}(\.[0-9]{1,2})?@[0-9]{1,6}(\.[0-9]{1,2})?,"
                      r"[0-9]{1,6}(\.[0-9]{1,2})?$",
              hint="z@row,column (the zoom, then the first row and column in view), or empty",
              doc="the heatmap's zoom and pan (frontend/js/heatmap-focus.js)"),
    # side by side (frontend/js/compare.js, docs/compare.md): pane B differs from A in one thing
    ViewField("compare", "enum", "off", "cmp", "view.compare", write="changed",
              values=("off", "head", "method", "alpha", "model"),
              doc="side by side: off, or what pane B changes (head, method, α or model)"),
    ViewField("cmpLayer", "int", 0, "cl", "view.cmpLayer", write="changed", lo=0, hi=1023,
              doc="pane B's layer (compare=head)"),
    ViewField("cmpHead", "int", 0, "ch", "view.cmpHead", write="changed", lo=0, hi=1023,
              doc="pane B's head (compare=head)"),
    ViewField("cmpMethod", "str", "", "cm", "view.cmpMethod", write="changed",
              pattern=r"^$|^[a-z][a-z0-9-]{0,39}$", hint="a method name (a-z, 0-9 and -) or empty",
              doc="pane B's method, at its default parameters (compare=method)"),
    ViewField("cmpAlpha", "float", 2.0, "ca", "view.cmpAlpha", write="changed", lo=ALPHA_MIN,
              hi=ALPHA_MAX, doc="pane B's entmax α (compare=alpha)"),
    ViewField("cmpModel", "str", "", "cmo", "view.cmpModel", write="changed", max_len=300,
              hint="a served model's id or empty", doc="pane B's model (compare=model)"),
    ViewField("resultsY", "enum", "recall", "ry", "view.resultsY", write="changed",
              values=("recall", "task"),
              doc="the corpus-results plot's y: recall or the task loss (pareto --task)"),
    ViewField("view", "enum", "head", "view", "view.view", write="changed",
              values=("head", "model"),
              doc="one head (the heatmap) or the whole model: every head at once "
                  "(frontend/js/model-view.js)"),
)
# fmt: on

FIELDS: dict[str, ViewField] = {f.key: f for f in VIEW_FIELDS}
#: The fields shared as ``ShareState.view`` flags, by flag name.
FLAGS: dict[str, ViewField] = {f.flag: f for f in VIEW_FIELDS if f.flag}


def defaults() -> dict[str, Any]:
    """The page store's view fields at their defaults (frontend/js/state.js)."""
    return {f.key: fresh(f.default) for f in VIEW_FIELDS if f.state}


def fresh(v: Any) -> Any:
    """A default as a new value (a dict is copied, never shared)."""
    return dict(v) if isinstance(v, dict) else v


# ----------------------------------------------------------------------------- messages


def shown(value: Any) -> str:
    """A value as a message quotes it: compact JSON (as ``JSON.stringify``), a long string cut to
    :data:`SHOWN_CHARS` characters, a longer integer named by its number of digits."""
    if isinstance(value, str) and len(value) > SHOWN_CHARS:
        return _json(value[:SHOWN_CHARS]) + "…"
    if isinstance(value, int) and not isinstance(value, bool):
        digits = str(abs(value))
        if len(digits) > SHOWN_CHARS:
            return f"an integer of {len(digits)} digits"
    return _json(value)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def allowed(f: ViewField, source: str) -> str:
    """What ``f`` allows, after "must be": from the address (``source="query"``) or a share."""
    empty = " or empty" if source == "query" else " or null"
    if f.kind == "bool":
        return "1 or 0" if source == "query" else "true or false"
    if f.kind == "int":
        return f"a whole number in [{f.lo}, {f.hi}]" + (empty if f.nullable else "")
    if f.kind == "float":
        return f"a number in [{f.lo}, {f.hi}]" + "".join(f" or {v}" for v in f.values)
    if f.kind == "enum":
        return "one of " + ", ".join(f.values)
    if f.kind == "params":
        return f"at most {MAX_PARAMS} values, each named {PARAM_HINT}"
    what = f.hint or "a string"
    if f.max_len is not None:
        what += f" of at most {f.max_len} characters"
    return what + (empty if f.nullable else "")


def _error(where: str, f: ViewField, value: Any, source: str) -> str:
    return f"{where} must be {allowed(f, source)}, got {shown(value)}"


# ----------------------------------------------------------------------------- one value


class Rejected(ValueError):
    """A value a field does not allow; ``str(exc)`` says what is allowed and what came."""


class Clamped(ValueError):
    """An address number outside its field's range; ``value`` is the nearest allowed one and
    ``str(exc)`` the notice ``<key>=<raw> is above the maximum <hi>: using <hi>``."""

    def __init__(self, message: str, value: int | float) -> None:
        super().__init__(message)
        self.value = value


_SIGNED = re.compile(r"^-?[0-9]+$")


def _clamp_of(f: ViewField, raw: str) -> Clamped | None:
    """The clamp of an address number out of ``f``'s range (frontend/js/view-state.js
    ``clampOf``), or None (not a number of its kind, or in range)."""
    if f.kind == "int" and _SIGNED.fullmatch(raw):
        v: int | float = int(raw)
    elif f.kind == "float" and _DECIMAL.fullmatch(raw):
        v = float(raw)
    else:
        return None
    where = f.query or f.key
    lo, hi = _js_number(f.lo), _js_number(f.hi)
    if v > f.hi:  # type: ignore[operator]
        return Clamped(f"{where}={raw} is above the maximum {hi}: using {hi}", f.hi)  # type: ignore[arg-type]
    if v < f.lo:  # type: ignore[operator]
        return Clamped(f"{where}={raw} is below the minimum {lo}: using {lo}", f.lo)  # type: ignore[arg-type]
    return None


def _js_number(v: Any) -> str:
    """``String(v)`` of JavaScript for a bound (2.0 is "2")."""
    return _js_string(v) if isinstance(v, float) else str(v)


def check_query_value(f: ViewField, raw: str) -> Any:
    """The value of the address string ``raw`` for field ``f`` (the page's reading,
    frontend/js/view-state.js ``queryValue``); :class:`Rejected` when it does not fit."""
    if f.nullable and raw == "":
        return None
    ok: Any = _MISSING
    if f.kind == "bool":
        ok = {"1": True, "0": False}.get(raw, _MISSING)
    elif f.kind == "int":
        if _DIGITS.fullmatch(raw) and f.lo <= int(raw) <= f.hi:  # type: ignore[operator]
            ok = int(raw)
    elif f.kind == "float":
        if _DECIMAL.fullmatch(raw) and f.lo <= float(raw) <= f.hi:  # type: ignore[operator]
            ok = float(raw)
        elif raw in f.values:  # a word beside the numbers (alpha "own")
            ok = raw
    elif f.kind == "enum":
        ok = raw if raw in f.values else _MISSING
    elif f.kind == "str":
        ok = raw if _string_fits(f, raw) else _MISSING
    if ok is _MISSING:
        raise _clamp_of(f, raw) or Rejected(_error(f.query or f.key, f, raw, "query"))
    return ok


def check_share_value(f: ViewField, value: Any, where: str | None = None) -> Any:
    """The value of the JSON value ``value`` for field ``f`` in a share (frontend/js/view-state.js
    ``shareValue``): a tile size given as a number becomes its string; :class:`Rejected` when it
    does not fit."""
    where = where or f.share or f.key
    ok: Any = _MISSING
    if value is None:
        ok = None if f.nullable else _MISSING
    elif f.kind == "bool":
        ok = value if isinstance(value, bool) else _MISSING
    elif f.kind == "int":
        # an int as is: float() of one of 309 digits and more overflows (it is out of range)
        whole = isinstance(value, int) or (_is_number(value) and float(value).is_integer())
        if _is_number(value) and whole and f.lo <= value <= f.hi:  # type: ignore[operator]
            ok = int(value)
    elif f.kind == "float":
        if _is_number(value) and f.lo <= value <= f.hi:  # type: ignore[operator]
            ok = float(value)
        elif isinstance(value, str) and value in f.values:
            ok = value
    elif f.kind == "enum":
        text = _js_string(value) if _is_number(value) else value
        ok = text if isinstance(text, str) and text in f.values else _MISSING
    elif f.kind == "str":
        ok = value if isinstance(value, str) and _string_fits(f, value) else _MISSING
    if ok is _MISSING:
        raise Rejected(_error(where, f, value, "share"))
    return ok


class _Missing:
    pass


_MISSING: Any = _Missing()


def _is_number(v: Any) -> bool:
    """A finite JSON number (not a boolean). An int is finite at any size (``math.isfinite``
    of one of 309 digits and more would overflow converting it to a float)."""
    if isinstance(v, bool):
        return False
    return isinstance(v, int) or (isinstance(v, float) and math.isfinite(v))


def _js_string(v: int | float) -> str:
    """``String(v)`` of JavaScript, for the numbers a tile size can be (64.0 is "64")."""
    return str(int(v)) if isinstance(v, float) and v.is_integer() and abs(v) < 2**53 else str(v)


def _string_fits(f: ViewField, s: str) -> bool:
    if f.max_len is not None and len(s) > f.max_len:
        return False
    return f.pattern is None or re.fullmatch(f.pattern, s) is not None


# ----------------------------------------------------------------------------- the JS module

JS_PATH = "frontend/js/view-schema.js"


def schema() -> dict[str, Any]:
    """The table as JSON (what frontend/js/view-schema.js exports)."""
    fields = []
    for f in VIEW_FIELDS:
        d: dict[str, Any] = {"key": f.key, "kind": f.kind, "default": f.default,
                             "query": f.query, "share": f.share, "write": f.write}  # fmt: skip
        for name in ("values", "lo", "hi", "max_len", "pattern", "hint"):
            v = getattr(f, name)
            if v or (name in ("lo", "hi") and v is not None):
                d[{"max_len": "maxLen"}.get(name, name)] = list(v) if name == "values" else v
        if f.nullable:
            d["nullable"] = True
        if not f.state:
            d["state"] = False
        d["doc"] = f.doc
        fields.append(d)
    return {
        "maxTextInUrl": MAX_TEXT_IN_URL,
        "paramPrefix": PARAM_PREFIX,
        "paramName": PARAM_NAME,
        "paramHint": PARAM_HINT,
        "paramMaxChars": PARAM_MAX_CHARS,
        "maxParams": MAX_PARAMS,
        "shownChars": SHOWN_CHARS,
        "fields": fields,
    }


def js_module() -> str:
    """frontend/js/view-schema.js: the table for the page (a plain ES module, no logic; one field
    a line)."""
    table = schema()
    fields = table.pop("fields")
    lines = [f"  {_json(k)}: {_json(v)}," for k, v in table.items()]
    lines.append('  "fields": [')
    lines += [f"    {json.dumps(f, ensure_ascii=False)}," for f in fields]
    lines.append("  ],")
    return (
        "// The page's view state, one definition: GENERATED from sparse_core/view_schema.py by\n"
        "//     python -m sparse_core.view_schema --write\n"
        "// Do not edit; edit VIEW_FIELDS there (tests/test_view_schema.py checks this file).\n"
        "export const VIEW_SCHEMA = Object.freeze({\n" + "\n".join(lines) + "\n});\n"
    )


def main(argv: list[str] | None = None) -> int:
    """``--write``: (re)write frontend/js/view-schema.js in this checkout; ``--check``: exit 1 when
    it is stale; neither: print it."""
    ap = argparse.ArgumentParser(prog="python -m sparse_core.view_schema", description=main.__doc__)
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    path = Path(__file__).resolve().parents[1] / JS_PATH
    text = js_module()
    if args.write:
        path.write_text(text, encoding="utf-8")
    elif args.check:
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            print(f"{JS_PATH} is stale: run python -m sparse_core.view_schema --write",
                  file=sys.stderr)  # fmt: skip
            return 2
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
