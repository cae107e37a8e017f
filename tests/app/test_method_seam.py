"""One place to add a method (docs/architecture.md, "Adding a method"): a method's class is all
the Python side needs. A throwaway method, registered only for this test, is listed by
/api/methods with its sliders and its payload flag, gets a place in the engine's cost order,
is evaluated in an analysis' summary and its Pareto sweep, and its head data passes the head
schema, with no other file naming it."""

from __future__ import annotations

import pytest
import torch

from sparse_core.methods import METHODS, ArenaMethod, ParamSpec, PredictContext, evaluate
from sparsescope.engine import two_cores
from sparsescope.web.schemas import HeadPayload, MethodsOut

TEXT = "The cat sat on the mat because the mat was warm and the cat was tired."


class DiagonalBand(ArenaMethod):
    """Throwaway: each query keeps the keys within ``reach`` of it, and the page gets every
    query's largest score's key (``band_peaks``) as its head data."""

    name, label = "test-diagonal", "Test: diagonal band"
    payload_empty = {"band_peaks": []}
    cost_rank = None  # unmeasured: swept first

    def own_params(self, n, artefact=None):
        return [ParamSpec("reach", "reach", "int", 1, 0, max(n - 1, 0), 1, "keys either side")]

    def own_grid(self, n, artefact=None):
        return [{"reach": r} for r in (0, 1, 2)]

    def base(self, ctx: PredictContext, p: dict) -> torch.Tensor:
        i = torch.arange(ctx.n)
        return (i[:, None] - i[None, :]).abs() <= p["reach"]

    def head_payload(self, ctx, layer, head):
        return {"band_peaks": ctx.out.probs[layer, head].argmax(-1).tolist()}


@pytest.fixture
def registered(monkeypatch):
    m = DiagonalBand()
    monkeypatch.setitem(METHODS, m.name, m)
    return m


def test_api_methods_lists_it_with_its_payload_flag(client, registered):
    r = client.get("/api/methods", params={"n": 17})
    assert r.status_code == 200, r.text
    listed = {m.name: m for m in MethodsOut.model_validate(r.json()).methods}
    assert list(listed)[-1] == "test-diagonal"
    mine = listed["test-diagonal"]
    assert mine.label == "Test: diagonal band" and mine.payload
    assert [p.name for p in mine.params] == ["reach", "window", "globals"]
    assert listed["topk"].payload and not listed["window"].payload  # the flags of today's ones


def test_it_gets_a_cost_rank_unmeasured_first(registered):
    order = two_cores.cost_order(list(METHODS))
    assert order[0] == "test-diagonal" and order[-1] == "window"
    registered.cost_rank = 0.5  # cheaper than every measured one: last
    assert two_cores.cost_order(list(METHODS))[-1] == "test-diagonal"


def test_it_is_evaluated_in_the_analysis_summary(client, registered, tiny_model):
    r = client.post("/api/analyze", json={"text": TEXT})
    assert r.status_code == 200, r.text
    body = r.json()
    assert "test-diagonal" in [m["name"] for m in body["methods"]]
    ctx = PredictContext.from_run(tiny_model.run(TEXT), None)
    want = evaluate(ctx, "test-diagonal", registered.defaults(ctx.n))
    s = client.get(f"/api/analyses/{body['id']}/summary")
    assert s.status_code == 200, s.text
    rows = s.json()["heads"] if isinstance(s.json(), dict) else s.json()
    got = [row["methods"]["test-diagonal"]["recall"] for row in rows]
    assert got == pytest.approx(want["recall"].flatten().tolist(), abs=1e-6)


def test_its_head_data_passes_the_head_schema(client, registered, tiny_model):
    a = client.post("/api/analyze", json={"text": TEXT}).json()
    r = client.get(f"/api/analyses/{a['id']}/heads/1/2")
    assert r.status_code == 200, r.text
    head = HeadPayload.model_validate(r.json())
    out = tiny_model.run(TEXT)
    assert head.model_extra["band_peaks"] == out.probs[1, 2].argmax(-1).tolist()
    with pytest.raises(ValueError, match="no method's payload has the keys"):
        HeadPayload.model_validate({**r.json(), "bogus": 1})
