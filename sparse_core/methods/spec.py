"""Parameter specs: the sliders the page draws and the coercion every value goes through.

A :class:`ParamSpec` is served as JSON (``GET /api/methods``, docs/architecture.md "Web contract")
and checks one value: :meth:`ParamSpec.clean` accepts Python values and query strings, coerces
them to the spec's kind and checks the range or the choices. Every failure is a
:class:`~sparse_core.errors.SparsescopeError` whose ``field`` is the parameter's name and whose
message says what was given and what is allowed, e.g. ``n_buckets must be one of 2, 4, 6, 8, 10,
12, 16, 20, got '8.9'``.

Coercion, by kind:

- ``bool``: True / False, 0 / 1, or the strings true / false / 1 / 0 / yes / on (any case);
- ``int``: an integer, a float with an integral finite value (``8.0``), or a string in the
  plain form with an integral value (``"8"``, ``"8.0"``); ``8.9``, ``inf``, ``nan``, ``1e400``
  and booleans are refused;
- ``float``: any finite number, or a string in the plain form;
- ``choice``: the value as is when the choices are strings, else as ``int`` (integer choices) or
  ``float`` (other numbers), then it must be one of the choices. A non-integral value never
  rounds to a choice.

Strings (query strings, a share's saved values) are read in the plain form only, the one the page
writes and reads (frontend/js/params.js ``plainNumber``): one optional ``-`` sign, ASCII digits,
an optional fraction (``"-0.25"``, ``"3"``); no whitespace, ``+`` sign, ``_`` separator,
exponent, ``inf``/``nan`` or non-ASCII digit (``"３"``, ``"٣"``), each of which Python's
``float()`` would take. Integers take the sign too: no integer parameter is negative, but
``"-4"`` is a well-formed number out of range (the 400 of a bad value, and the page clamps it to
the minimum, as the address does its own numbers), not a malformed one. A string outside the
form is a :class:`~sparse_core.errors.MalformedValueError` (the web's 422) naming the parameter
and the form.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import MalformedValueError, SparsescopeError

KINDS = ("int", "float", "choice", "bool")
#: a number string in the plain form: an optional "-", ASCII digits, an optional fraction (an
#: integer's must be zeros, checked after reading)
_PLAIN = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")
_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0")


@dataclass(frozen=True)
class ParamSpec:
    """One slider: ``kind`` is "int", "float", "choice" or "bool"; ``default`` resolved for n."""

    name: str
    label: str
    kind: str
    default: Any
    min: float | None = None
    max: float | None = None
    step: float | None = None
    choices: list | None = None
    help: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

    def error(self, message: str) -> SparsescopeError:
        """A SparsescopeError about this parameter (``field`` = its name)."""
        return SparsescopeError(message, field=self.name)

    def clean(self, value: Any) -> Any:
        """``value`` coerced to this kind (query strings accepted) and range-checked."""
        v = coerce(self, value)
        if self.kind == "choice":
            if v not in self.choices:
                raise self.error(
                    f"{self.name} must be one of {', '.join(map(str, self.choices))}, got {value!r}"
                )
        elif self.kind in ("int", "float"):
            lo, hi = self.min, self.max
            if (lo is not None and v < lo) or (hi is not None and v > hi):
                raise self.error(f"{self.name} must be in [{lo}, {hi}], got {value!r}")
        return v


def coerce(spec: ParamSpec, value: Any) -> Any:
    """``value`` as the spec's kind (module docstring); no range or choice check yet."""
    bad = spec.error(f"{spec.name} must be {kind_words(spec)}, got {value!r}")
    if spec.kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in _TRUE + _FALSE:
            return value.lower() in _TRUE
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise bad
    if spec.kind == "choice" and (not spec.choices or isinstance(spec.choices[0], str)):
        return value  # string choices: compared as given
    as_int = spec.kind == "int" or (spec.kind == "choice" and isinstance(spec.choices[0], int))
    if isinstance(value, str) and not _PLAIN.fullmatch(value):  # "$" would match before a "\n"
        raise MalformedValueError(
            f"{spec.name} must be {kind_words(spec)}, written as plain ASCII digits with an "
            f"optional '-' sign and fraction (e.g. 3, 0.25), got {value!r}",
            field=spec.name,
        )
    number = _number(value)
    if number is None:
        raise bad
    if not as_int:
        try:
            return float(number)
        except OverflowError:  # an int beyond 1.8e308: no float holds it, no range has it
            raise bad from None
    if isinstance(number, float):
        if not number.is_integer():  # 8.9 is not 8; inf and nan never got here
            raise bad
        return int(number)
    return number


def _number(value: Any) -> int | float | None:
    """A finite int or float from a number or a numeric string; None for anything else.

    Python ints are kept as ints (arbitrarily large ones too: they are finite, and ``float()`` of
    one beyond 1.8e308 would overflow); floats and strings must be finite (a string of 400
    digits is inf). Strings must be in the plain form (module docstring).
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        if not _PLAIN.fullmatch(value):  # fullmatch: "$" would also match before a final "\n"
            return None
        value = float(value)
    if isinstance(value, float) and math.isfinite(value):
        return value
    return None


def kind_words(spec: ParamSpec) -> str:
    """What the spec accepts, in words: "an integer in [1, 128]", "one of A1, A2, union" …"""
    if spec.kind == "choice":
        return f"one of {', '.join(map(str, spec.choices or []))}"
    if spec.kind == "bool":
        return "true or false"
    return f"{'an integer' if spec.kind == 'int' else 'a number'} in [{spec.min}, {spec.max}]"


def window_spec(n: int, default: int) -> ParamSpec:
    """The window add-on every method has (definitions §3): width w in [0, 2n − 1], 0 = off."""
    return ParamSpec(
        "window", "window width", "int", min(default, 2 * n - 1), 0, 2 * n - 1, 1,
        help="local window add-on: keys with |i − j| ≤ ⌊w/2⌋ (odd w; 0 = off)",
    )  # fmt: skip


def globals_spec(default: bool) -> ParamSpec:
    """The global add-on every method has (definitions §3): first and last token global."""
    return ParamSpec(
        "globals", "global first/last", "bool", default,
        help="global add-on: the first and last token attend to and are attended by all",
    )  # fmt: skip


def check_n(n: int) -> int:
    """``n`` (the number of tokens) if it is an integer >= 1, else a SparsescopeError."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise SparsescopeError(
            f"n (the number of tokens) must be an integer >= 1, got {n!r}", field="n"
        )
    return n
