"""The arena through the HTTP contract (definitions §8): parameter checks name the parameter (400),
the metrics carry mass recall, the head payload carries what the page's twins need (HeadPayload),
and GET /api/analyses/{id}/budgets."""

from __future__ import annotations

import re

import pytest

from sparse_core.methods import METHODS, PredictContext, evaluate
from sparsescope.web.schemas import Budgets, HeadPayload, Metrics

TEXT = (
    "The chef who ran to the store was out of food, so he went back home again. Later that "
    "evening the neighbours came over with bread and soup."
)

BAD = [
    ("streaming", {"sinks": "-1"}, "sinks"),
    ("streaming", {"recent": "x"}, "recent"),
    ("topk", {"k": "0"}, "k"),
    ("topk", {"k": "1000"}, "k"),
    ("topp", {"p": "1.5"}, "p"),
    ("h2o", {"k": "2.5"}, "k"),
    ("h2o", {"recent": "-3"}, "recent"),
    ("moba", {"block": "24"}, "block"),
    ("moba", {"topk": "0"}, "topk"),
    ("quest", {"page": "100"}, "page"),
    ("quest", {"block": "16"}, "block"),  # quest's block parameter is called page
    ("xattention", {"stride": "5"}, "stride"),
    ("xattention", {"tau": "nan"}, "tau"),
    ("vertical-slash", {"last": "0"}, "last"),
    ("vertical-slash", {"slashes": "-1"}, "slashes"),
    ("sparge", {"theta": "1.01"}, "theta"),
    ("sparge", {"tau": "0"}, "tau"),
]


@pytest.fixture
def arena(client):
    r = client.post("/api/analyze", json={"text": TEXT})
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize(("method", "params", "field"), BAD)
def test_a_bad_value_is_a_400_naming_the_parameter(client, arena, method, params, field):
    """Out of range: 400; not a number in the plain form ("x", "nan"): 422; both name it."""
    r = client.get(f"/api/analyses/{arena['id']}/metrics/1/2", params={"method": method, **params})
    plain = re.fullmatch(r"-?[0-9]+(\.[0-9]+)?", params[field]) is not None
    assert r.status_code == (400 if plain else 422), r.text
    body = r.json()
    assert body["field"] == field and field in body["detail"]


@pytest.mark.parametrize("method", ["streaming", "topk", "topp", "h2o", "moba", "quest",
                                    "xattention", "vertical-slash", "sparge"])  # fmt: skip
def test_metrics_carry_mass_recall(client, arena, method, tiny_model):
    r = client.get(f"/api/analyses/{arena['id']}/metrics/1/2", params={"method": method})
    assert r.status_code == 200, r.text
    got = Metrics.model_validate(r.json())
    ctx = PredictContext.from_run(tiny_model.run(TEXT), None)
    want = evaluate(ctx, method, METHODS[method].defaults(ctx.n))
    assert got.mass_recall == pytest.approx(float(want["mass_recall"][1, 2]), abs=1e-12)
    assert got.recall == float(want["recall"][1, 2])
    assert 0.0 <= got.mass_recall <= 1.0 + 1e-6


def test_the_head_payload_carries_the_arenas_parts(client, arena):
    r = client.get(f"/api/analyses/{arena['id']}/heads/1/2")
    assert r.status_code == 200
    body = HeadPayload.model_validate(r.json())
    n = arena["n"]
    assert body.topk is not None and body.topk.order.shape == [n, body.topk.k_max]
    assert sorted(body.moba, key=int) == ["16", "32", "64", "128"] == sorted(body.quest, key=int)
    assert body.moba["16"].shape == [n, -(-n // 16)]
    assert set(body.xattention["32"]) == {"2", "4", "8", "16"}
    assert len(body.sparge["16"].qsim) == -(-n // 16)
    # P exactly: each edge's p is the float32 the model computed
    import numpy as np

    for _, _, p in r.json()["edges"][:50]:
        assert float(np.float32(p)) == p or np.float32(p) == np.float32(float(p))


def test_budgets_endpoint(client, arena):
    aid = arena["id"]
    r = client.get(f"/api/analyses/{aid}/budgets")
    assert r.status_code == 200
    every = Budgets.model_validate(r.json())
    assert every.scope == "all" and len(every.heads) == arena["layers"] * arena["heads"]
    r = client.get(f"/api/analyses/{aid}/budgets", params={"layer": 1, "head": 2})
    one = Budgets.model_validate(r.json())
    assert one.scope == "head" and len(one.k["0.9"].values) == arena["n"]
    assert every.heads[1 * arena["heads"] + 2].k["0.99"].q == one.k["0.99"].q
    r = client.get(f"/api/analyses/{aid}/budgets", params={"layer": 1})
    assert r.status_code == 400 and r.json()["field"] == "head"
    r = client.get(f"/api/analyses/{aid}/budgets", params={"layer": 1, "head": 99})
    assert r.status_code == 404 and r.json()["field"] == "head"  # a head it lacks
    r = client.get("/api/analyses/0123456789abcdef0123/budgets")
    assert r.status_code == 404
