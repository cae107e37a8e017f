"""Parameter coercion (sparse_core/methods/spec.py): every value either comes out clean and of the
spec's kind or is refused with a SparsescopeError naming the parameter (``field``) and what is
allowed. Never another exception (a 500 in the app), never a silent rounding."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparse_core import methods as M
from sparse_core.errors import MalformedValueError, SparsescopeError
from sparse_core.methods.spec import ParamSpec

N = 128
ALL_SPECS = [(name, s) for name, m in M.METHODS.items() for s in m.params(N)]

BAD_NUMBERS = [
    math.inf, -math.inf, math.nan, "inf", "-inf", "nan", "1e400", "-1e400", 1e400,
    "8.9", 8.9, "8.5", True, None, [8], "", "eight",
]  # fmt: skip


@pytest.mark.parametrize("value", BAD_NUMBERS, ids=repr)
@pytest.mark.parametrize(
    ("method", "param", "allowed"),
    [
        ("reformer", "n_buckets", "one of 2, 4, 6, 8, 10, 12, 16, 20"),
        ("routing", "n_clusters", "one of 2, 4, 6, 8, 10, 12, 16, 20"),
        ("sf-kmeans", "n_clusters", "one of 2, 4, 6, 8, 10, 12, 16, 20"),
        ("fixed", "stride", "an integer in [1, 128]"),
        ("reformer", "rounds", "an integer in [1, 4]"),
    ],
)
def test_non_integral_or_non_finite_values_are_refused(method, param, allowed, value):
    with pytest.raises(SparsescopeError) as err:
        M.METHODS[method].validate(N, {param: value})
    assert err.value.field == param
    if isinstance(value, str) and not re.fullmatch(r"-?[0-9]+(\.[0-9]+)?", value):
        # not in the plain form: a MalformedValueError (the web's 422)
        assert isinstance(err.value, MalformedValueError)
        assert str(err.value).startswith(f"{param} must be {allowed}, written as plain ASCII")
        assert str(err.value).endswith(f", got {value!r}")
    else:
        assert str(err.value) == f"{param} must be {allowed}, got {value!r}"


@pytest.mark.parametrize("value", [10**400, -(10**400), 2**64])
def test_huge_integers_are_out_of_range_not_overflow(value):
    for method, param in (("fixed", "stride"), ("reformer", "n_buckets")):
        with pytest.raises(SparsescopeError, match=f"^{param} must be ") as err:
            M.METHODS[method].validate(N, {param: value})
        assert err.value.field == param


@pytest.mark.parametrize(
    ("method", "param", "value", "want"),
    [
        ("reformer", "n_buckets", "16", 16),
        ("reformer", "n_buckets", "16.0", 16),
        ("reformer", "n_buckets", 16.0, 16),
        ("fixed", "stride", "10", 10),
        ("sf-distance", "t", "-0", 0.0),
        ("sf-distance", "t", "2.5", 2.5),
        ("sf-distance", "t", 3, 3.0),
        ("fixed", "part", "A2", "A2"),
        ("fixed", "spread", "ON", True),
        ("window", "globals", 0, False),
    ],
)
def test_accepted_spellings_come_out_of_the_spec_kind(method, param, value, want):
    got = M.METHODS[method].validate(N, {param: value})[param]
    assert got == want and type(got) is type(want)


@pytest.mark.parametrize("value", [" 16", "16 ", "+16", "1_6", "1e1", "１６", "١٦", "16\n", "--16"])
def test_integer_strings_outside_the_plain_form_are_malformed(value):
    with pytest.raises(MalformedValueError, match="plain ASCII digits") as err:
        M.METHODS["reformer"].validate(N, {"n_buckets": value})
    assert err.value.field == "n_buckets"


@pytest.mark.parametrize("value", ["+2.5", " 2.5", "2_5", "2.5e0", ".5", "2.", "--2", "２.5"])
def test_float_strings_take_one_minus_sign_and_ascii_digits(value):
    with pytest.raises(MalformedValueError, match="'-' sign") as err:
        M.METHODS["sf-distance"].validate(N, {"t": value})
    assert err.value.field == "t"


@settings(max_examples=300, deadline=None)
@given(
    spec=st.sampled_from(ALL_SPECS),
    value=st.one_of(
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(-(10**500), 10**500),
        st.booleans(),
        st.none(),
        st.text(max_size=12),
        st.from_regex(r"\A-?[0-9]{1,4}(\.[0-9]{0,3})?(e[+-]?[0-9]{1,3})?\Z"),
        st.sampled_from(["inf", "-inf", "nan", "1e400", "true", "off", "A1", "union"]),
    ),
)
def test_every_value_is_clean_or_a_named_refusal(spec, value):
    """Property: clean() returns a value of the spec's kind inside its range / choices, or raises
    a SparsescopeError whose field is the parameter; never anything else."""
    _, s = spec
    try:
        v = s.clean(value)
    except SparsescopeError as exc:
        assert exc.field == s.name and str(exc).startswith(f"{s.name} must be ")
        return
    if s.kind == "choice":
        assert v in s.choices and type(v) is type(s.choices[0])
    elif s.kind == "bool":
        assert type(v) is bool
    else:
        assert type(v) is (int if s.kind == "int" else float)
        assert math.isfinite(v) and s.min <= v <= s.max
        if s.kind == "int":  # nothing was rounded to get there
            assert float(str(value).strip()) == v if isinstance(value, str) else value == v


@settings(max_examples=100, deadline=None)
@given(x=st.floats(0.0, 40.0).filter(lambda x: not x.is_integer()))
def test_a_non_integral_value_never_rounds_to_a_choice(x):
    spec = ParamSpec("n_buckets", "B", "choice", 8, choices=list(range(41)))
    for value in (x, repr(x)):
        with pytest.raises(SparsescopeError, match=r"^n_buckets must be one of 0, 1, 2"):
            spec.clean(value)


def test_unknown_parameter_and_bad_n_name_their_field():
    with pytest.raises(SparsescopeError, match="sf-kmeans has no parameter 'k'") as err:
        M.METHODS["sf-kmeans"].validate(N, {"k": 2})
    assert err.value.field == "k"
    with pytest.raises(SparsescopeError) as err:
        M.get_method("nope")
    assert err.value.field == "method"
    with pytest.raises(SparsescopeError) as err:
        M.METHODS["window"].params(0)
    assert err.value.field == "n"
