"""The OpenAPI schema states the constraints the server enforces
(app/web/openapi.py): static ranges and enums, the served models' bounds filled in when the app has
loaded them, a non-blank text pattern that the analyser never contradicts, and 404 (not 400) for a
part that one analysis lacks. tests/app/test_schemathesis.py fuzzes the same promises."""

from __future__ import annotations

import json
import re

import pytest

from sparse_core.methods import METHODS
from sparse_core.metrics import BLOCKS
from sparsescope.engine.request import is_blank
from sparsescope.web.openapi import NOT_BLANK, fill_served, served

ANALYSES = "/api/analyses/{analysis_id}"


@pytest.fixture
def schema(client) -> dict:
    r = client.get("/openapi.json")
    assert r.status_code == 200
    return r.json()


def param(schema: dict, path: str, name: str) -> dict:
    """The schema of one parameter; an optional one's non-null branch."""
    (p,) = [p for p in schema["paths"][path]["get"]["parameters"] if p["name"] == name]
    s = p["schema"]
    return next((b for b in s.get("anyOf", []) if b.get("type") != "null"), s)


def test_no_marker_is_left_in_the_served_schema(schema):
    text = json.dumps(schema)
    assert "x-served" not in text and "x-value" not in text and "x-not-blank" not in text
    # pydantic's own names leak when a validator wraps a bounded type: JSON Schema ignores them
    assert '"ge":' not in text and '"le":' not in text


def test_layer_and_head_are_bounded_by_the_served_model(schema, service):
    cfg = service.model.config  # the tiny model: 2 layers x 4 heads
    for path in (f"{ANALYSES}/heads/{{layer}}/{{head}}", f"{ANALYSES}/metrics/{{layer}}/{{head}}"):
        layer = param(schema, path, "layer")
        assert (layer["type"], layer["minimum"], layer["maximum"]) == (
            "integer", 0, cfg.num_layers - 1,
        )  # fmt: skip
        assert param(schema, path, "head")["maximum"] == cfg.num_heads - 1
    for path in (f"{ANALYSES}/pareto", f"{ANALYSES}/budgets"):
        assert param(schema, path, "layer")["maximum"] == cfg.num_layers - 1
        assert param(schema, path, "head")["minimum"] == 0
    token = param(schema, f"{ANALYSES}/flow", "token")
    assert (token["minimum"], token["maximum"]) == (0, service.model.max_positions - 1)


def test_enums_of_methods_blocks_and_served_models(schema, service):
    metrics = f"{ANALYSES}/metrics/{{layer}}/{{head}}"
    assert param(schema, metrics, "method")["enum"] == list(METHODS)
    assert param(schema, f"{ANALYSES}/pareto", "block")["enum"] == list(BLOCKS)
    ids = [service.slot.id]
    assert param(schema, "/api/methods", "model")["enum"] == ids
    n = param(schema, "/api/methods", "n")
    assert (n["minimum"], n["maximum"]) == (1, service.model.max_positions)
    body = schema["components"]["schemas"]["AnalyzeRequest"]["properties"]
    assert body["model"]["anyOf"][0]["enum"] == ids
    number = next(b for b in body["alpha"]["anyOf"] if b.get("type") == "number")
    assert (number["minimum"], number["maximum"]) == (1, 2)  # beside "own" and null
    assert body["text"]["minLength"] == 1 and body["text"]["pattern"] == NOT_BLANK["pattern"]
    state = schema["components"]["schemas"]["ShareIn"]["properties"]["state"]["properties"]
    assert state["model"]["anyOf"][0]["enum"] == ids
    assert state["text"]["pattern"] == NOT_BLANK["pattern"]


def test_a_text_the_pattern_refuses_is_refused(client):
    """The pattern (a non-space character) is a necessary condition: whatever it refuses, the
    analyser and the share check refuse too (the converse is left to the description)."""
    assert re.search(NOT_BLANK["pattern"], " \t\n\u3000") is None
    for c in map(chr, range(0x110000)):
        if c.isspace():
            assert is_blank(c)
    r = client.post("/api/analyze", json={"text": " \u3000\n"})
    assert (r.status_code, r.json()["field"]) == (400, "text")
    r = client.post("/api/share", json={"state": {"text": " \u3000\n"}})
    assert r.status_code == 400 and r.json()["field"] == "state.text"


def test_fill_served_writes_the_bounds_on_the_non_null_branch():
    node = {"anyOf": [{"type": "integer"}, {"type": "null"}], **served("layer", minimum=0)}
    fill_served(node, {"layer": {"maximum": 5}})
    assert node == {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 5}, {"type": "null"}]}
    with pytest.raises(ValueError, match="unknown served bound"):
        served("colour")


def test_a_part_the_analysis_lacks_is_a_404_naming_it(client, analysis):
    aid, n = analysis["id"], analysis["n"]
    for url, field in (
        (f"/api/analyses/{aid}/flow?token={n}", "token"),
        (f"/api/analyses/{aid}/heads/0/0/tiles/3/0/0", "level"),
        (f"/api/analyses/{aid}/heads/0/{analysis['heads']}", "head"),
    ):
        r = client.get(url)
        assert (r.status_code, r.json()["field"]) == (404, field), r.text


@pytest.mark.parametrize(("start", "status"), [(0.0, 200), (2.0, 200), (2.5, 422), ("2", 422)])
def test_a_whole_number_is_an_integer_as_json_schema_says(client, start, status):
    r = client.post("/api/analyze", json={"text": "The cat sat.", "start": start})
    assert r.status_code == status, r.text
    r = client.post("/api/share", json={"state": {"text": "The cat sat.", "layer": start}})
    assert r.status_code == status, r.text
