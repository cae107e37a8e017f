"""Property-based fuzzing of the JSON API against its own OpenAPI schema (schemathesis), in process.

Every operation of ``/openapi.json`` gets schema-valid and schema-violating requests over the ASGI
transport (no socket), on the tiny random model with a tiny Sparsefinder artefact so that every
method and route has something to work on. Half of the generated path parameters are swapped for
ids that exist (an analysis of a short text, a share), with small layer / head numbers, and half
of the metrics route's ``method`` values for real method names, so the fuzzer reaches past the
404s and 400s into the real handlers.

Checks: no 5xx, every status documented, every body (errors included) matching its declared schema,
content types as declared, schema-violating requests rejected, and schema-valid requests accepted
(``positive_data_acceptance``, ST202): the schema states every bound the
server enforces (app/web/openapi.py), and a part that one analysis lacks (a token past its n, a
tile past its pyramid) is a 404. Filtered out, as the schema cannot state them (its descriptions
do): texts blank by Unicode category or of tokens unknown to the model, and a share's text over
the model's positions without truncate (the analyser's 400), and
Pareto / budgets queries with only one of layer and head (a 400 naming the missing one), and a
Pareto query for the output error of the mean over heads (a 400 naming output_error).

Bounded: ``SPARSESCOPE_FUZZ_EXAMPLES`` (default 15) examples per operation and mode, derandomised
(the same cases on every run, so CI is reproducible); raise it locally for a deeper search.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import hypothesis.strategies as st
import pytest
import schemathesis  # the test extra has it
from hypothesis import HealthCheck, settings
from schemathesis.config import SchemathesisConfig

from sparse_core.errors import (
    EmptyTextError,
    SparsescopeError,
    TextTooLongError,
    UnknownTokensError,
)
from sparse_core.methods import METHODS
from sparsescope.engine.request import AnalysisRequest, is_blank
from sparsescope.engine.service import AnalysisService
from sparsescope.engine.settings import Settings
from sparsescope.web.main import create_app

pytestmark = pytest.mark.slow

MAX_EXAMPLES = int(os.environ.get("SPARSESCOPE_FUZZ_EXAMPLES", "15"))

#: Shared by every operation: a short text (tiny model: 2 layers x 4 heads) and a share.
KNOWN: dict[str, Any] = {}


def _known_ids(params: dict[str, Any] | None) -> st.SearchStrategy[dict[str, Any] | None]:
    """The generated path parameters, or the same with real ids and in-range layer / head."""
    if not params:
        return st.just(params)
    real = dict(params)
    if "analysis_id" in real:
        real["analysis_id"] = KNOWN["analysis_id"]
    if "share_id" in real:
        real["share_id"] = KNOWN["share_id"]
    # layer and head redrawn in range only where the generated value is valid already: a
    # schema-violating one (a negative case) must stay what it is, or the case turns valid
    inner = st.fixed_dictionaries(
        {
            **{k: st.just(v) for k, v in real.items()},
            **({"layer": st.integers(0, 1)} if _index(real.get("layer"), 1) else {}),
            **({"head": st.integers(0, 3)} if _index(real.get("head"), 3) else {}),
        }
    )
    return st.one_of(st.just(params), inner)


def _index(value: Any, most: int) -> bool:
    """Whether ``value`` is a layer or head index the schema allows (0 to ``most``)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= most


@pytest.fixture(scope="module")
def api_schema(tmp_path_factory, tiny_model, tiny_artefact):
    # the per-client rate limits off: the fuzzer is one client sending hundreds of requests
    settings_ = Settings(
        data_dir=tmp_path_factory.mktemp("fuzz-data"),
        warmup=False,
        cache_entries=4096,
        rate_per_s=0,
        share_rate_per_s=0,
    )
    service = AnalysisService(settings_, model=tiny_model, artefact=tiny_artefact)
    app = create_app(settings_, service)
    config = SchemathesisConfig.from_dict(
        {
            "seed": 20260101,
            "generation": {"max-examples": MAX_EXAMPLES, "deterministic": True},
            # a schema-violating request is refused with 400 or 422, or 413 when its body is
            # over the server's limit (schemathesis' own list leaves 413 out), or 404 for an id
            # or a part the analysis lacks; 429/503 never come (the limits are off)
            "checks": {
                "negative_data_rejection": {
                    "expected-statuses": ["400", "404", "409", "413", "415", "422", "429"]
                }
            },
        }
    )
    schema = schemathesis.openapi.from_asgi("/openapi.json", app, config=config)

    @schema.hook
    def flatmap_path_parameters(ctx: Any, path_parameters: dict[str, Any] | None):
        return _known_ids(path_parameters)

    @schema.hook
    def flatmap_query(ctx: Any, query: dict[str, Any] | None):
        if not query or "method" not in query:
            return st.just(query)
        given = query["method"] if isinstance(query["method"], list) else [query["method"]]
        if not all(isinstance(m, str) and m in METHODS for m in given):
            return st.just(query)  # a negative case stays one
        names = st.sampled_from(list(METHODS))  # the metrics route: also real method names
        one = not isinstance(query["method"], list)
        return st.one_of(
            st.just(query), names.map(lambda m: {**query, "method": m if one else [m]})
        )

    @schema.hook
    def filter_query(ctx: Any, query: dict[str, Any] | None) -> bool:
        # both-or-neither of layer and head (Pareto, budgets): OpenAPI cannot tie two
        # parameters together; the route's description says it and the answer is a 400 naming
        # the missing one (tests/app/test_bad_input.py)
        if ctx.operation.path.endswith(("/pareto", "/budgets")) and query:
            if ("layer" in query) != ("head" in query):
                return False
            # output error is one head's (a 400 naming output_error for the mean over heads)
            asked = str(query.get("output_error", "")).lower() in {"true", "1", "yes", "on"}
            return "layer" in query or not asked
        return True

    @schema.hook
    def filter_body(ctx: Any, body: Any) -> bool:
        # a text the analyser refuses though the schema cannot say so: blank by Unicode
        # category (zero-width, control...) or only tokens unknown to the model; the schema's
        # description says it, the answer is a 400 naming text (tests/app/test_bad_input.py)
        # A share is checked as an analysis (app/web/shares.py check_openable): its text also
        # within the model's positions unless truncate, a 400 naming state.text otherwise.
        text = body.get("text") if isinstance(body, dict) else None
        truncate, start = True, 0
        if isinstance(body, dict) and isinstance(body.get("state"), dict):
            state = body["state"]
            text = state.get("text")
            if isinstance(text, str) and is_blank(text):
                return False
            truncate = state.get("truncate") is True
            start = state.get("start") if isinstance(state.get("start"), int) else 0
        if not isinstance(text, str):
            return True
        try:
            tiny_model.encode(text, truncate=truncate, start=start)
        except (EmptyTextError, UnknownTokensError, TextTooLongError):
            return False
        except SparsescopeError:  # a start the schema refuses anyway (bool, negative)
            return True
        return True

    from fastapi.testclient import TestClient

    # the app's lifespan (model, share store) stays up while schemathesis calls it
    with TestClient(app) as client:
        text = "The chef who ran to the store."
        KNOWN["analysis_id"] = service.analyze(AnalysisRequest(text))["id"]
        r = client.post("/api/share", json={"state": {"text": "The chef ran.", "layer": 1}})
        assert r.status_code == 200, r.text
        KNOWN["share_id"] = r.json()["id"]  # a real share, made through the API
        yield schema


schema = schemathesis.pytest.from_fixture("api_schema")

#: Cases answered, by status class (2 for 2xx...), over the module: printed at its end (``-s``).
ANSWERED: Counter[int] = Counter()


@pytest.fixture(scope="module", autouse=True)
def answered_cases():
    yield
    total = sum(ANSWERED.values())
    by_class = ", ".join(f"{k}xx {v}" for k, v in sorted(ANSWERED.items()))
    print(f"\nschemathesis: {total} cases answered ({by_class})")


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_api_conforms_to_its_schema(case) -> None:
    response = case.call_and_validate()
    ANSWERED[response.status_code // 100] += 1
    assert response.status_code < 500
    if response.status_code >= 400:
        body = response.json()
        assert set(body) == {"detail", "field"}, body
        assert "Traceback" not in body["detail"] and "site-packages" not in body["detail"]
