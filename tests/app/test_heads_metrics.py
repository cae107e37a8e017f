"""The per-head payload (what the page recomputes masks from) and the metrics route, against
sparse_core computed directly: projections bit for bit, Reformer / Routing assignments, seeds,
and every method's metrics at default and custom parameters."""

from __future__ import annotations

import pytest
import torch

import sparsescope.engine.derived
from sparse_core import methods as M
from sparse_core.methods import METHODS, PredictContext, evaluate
from sparse_core.metrics import output_error
from sparsescope.web.schemas import Analysis, HeadPayload, Metrics

LAYER, HEAD = 1, 2


@pytest.fixture
def art_analysis(art_client, sentence) -> dict:
    r = art_client.post("/api/analyze", json={"text": sentence})
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture
def ctx(tiny_model, tiny_artefact, sentence):
    return PredictContext.from_run(tiny_model.run(sentence), tiny_artefact)


def test_analysis_with_artefact_summarises_every_method(art_analysis, ctx):
    a = Analysis.model_validate(art_analysis)
    assert a.artefact == "tiny-test-artefact"
    assert [m.name for m in a.methods] == list(METHODS)
    kmeans = next(m for m in a.methods if m.name == "sf-kmeans")
    assert next(p for p in kmeans.params if p.name == "n_clusters").choices == [2, 4, 8]
    # the tiny artefact carries no trained selectors: indexer and seer are listed, not available
    usable = set(M.available(ctx.artefact))
    assert usable == set(METHODS) - {"indexer", "seer"}
    assert {m.name for m in a.methods if m.available} == usable
    for s in a.summary:
        assert set(s.methods) == usable
    for name in ("window", "sf-distance", "routing"):
        want = evaluate(ctx, name, METHODS[name].defaults(ctx.n, ctx.artefact))
        got = a.summary[LAYER * a.heads + HEAD].methods[name]
        assert got.recall == pytest.approx(float(want["recall"][LAYER, HEAD]), abs=1e-6)
        assert got.sparsity == pytest.approx(float(want["sparsity"][LAYER, HEAD]), abs=1e-6)


def test_analysis_at_another_alpha_has_no_artefact(art_client, sentence):
    a = art_client.post("/api/analyze", json={"text": sentence, "alpha": 2.0}).json()
    assert a["artefact"] is None
    assert not any(name.startswith("sf-") for name in a["summary"][0]["methods"])
    assert {"reformer", "routing"} <= set(a["summary"][0]["methods"])  # on the raw q, k
    head = art_client.get(f"/api/analyses/{a['id']}/heads/0/0").json()
    assert head["proj"] is None and head["reformer"] and head["routing"]


def test_head_payload_carries_exact_projections(art_client, art_analysis, ctx, tiny_artefact):
    r = art_client.get(f"/api/analyses/{art_analysis['id']}/heads/{LAYER}/{HEAD}")
    h = HeadPayload.model_validate(r.json())
    n = h.n
    # float32 values sent at full precision: the page's sf-* masks match Python's bit for bit
    assert torch.equal(torch.tensor(h.proj.queries, dtype=torch.float32), ctx.proj_q[LAYER, HEAD])
    assert torch.equal(torch.tensor(h.proj.keys, dtype=torch.float32), ctx.proj_k[LAYER, HEAD])
    assert sorted(h.centroids, key=int) == ["2", "4", "8"]
    c4 = torch.tensor(h.centroids["4"], dtype=torch.float32)
    assert torch.equal(c4, tiny_artefact.centroids[4][LAYER, HEAD])
    assert h.seed == M.head_seed(LAYER, HEAD)
    # Reformer: every bucket count, all rounds, as sparse_core computes them
    assert sorted(map(int, h.reformer)) == sorted(M.BUCKET_COUNTS)
    for b, rounds in h.reformer.items():
        want = M.reformer_buckets(ctx, int(b), M.REFORMER_MAX_ROUNDS)[LAYER, HEAD]
        assert rounds == want.tolist() and len(rounds) == M.REFORMER_MAX_ROUNDS
        assert all(len(r) == n and all(0 <= x < int(b) for x in r) for r in rounds)
    # Routing: per centroid, the query and key tokens it chose
    for c, members in h.routing.items():
        q, k = M.routing_members(ctx, int(c))
        assert len(members.queries) == int(c)
        for ci in range(int(c)):
            assert members.queries[ci] == q[LAYER, HEAD, ci].nonzero().flatten().tolist()
            assert members.keys[ci] == k[LAYER, HEAD, ci].nonzero().flatten().tolist()


def _q(params: dict) -> dict[str, str]:
    """Parameters as a query string carries them (booleans as true / false)."""
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in params.items()}


def _metrics(client, aid, method, **params):
    q = {"method": method, **_q(params)}
    return client.get(f"/api/analyses/{aid}/metrics/{LAYER}/{HEAD}", params=q)


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("window", {}),
        ("window", {"window": 5, "globals": False}),
        ("fixed", {"stride": 4, "c": 2, "part": "A1"}),
        ("strided", {"stride": 3}),
        ("bigbird", {"random_keys": 5}),
        ("longformer", {"n_globals": 2, "window": 3}),
        ("reformer", {"n_buckets": 4, "rounds": 2}),
        ("routing", {"n_clusters": 4}),
        ("sf-distance", {"t": 2.5}),
        ("sf-quantization", {"n_buckets": 3}),
        ("sf-kmeans", {"n_clusters": 4, "top_k": 2}),
    ],
)
def test_metrics_match_sparse_core(art_client, art_analysis, ctx, method, params):
    r = _metrics(art_client, art_analysis["id"], method, **params)
    assert r.status_code == 200, r.text
    got = Metrics.model_validate(r.json())
    clean = METHODS[method].validate(ctx.n, _q(params), ctx.artefact)
    want = evaluate(ctx, method, clean)
    for k in ("recall", "sparsity", "exact", "precision"):
        assert getattr(got, k) == float(want[k][LAYER, HEAD]), k
    # what the misses cost this head: sparse_core's figure for the method's own mask
    mask = METHODS[method].predict(ctx, **clean)[LAYER, HEAD]
    err = r.json()["output_error"]
    assert err == pytest.approx(output_error(ctx.out, LAYER, HEAD, mask), rel=1e-9)
    assert (err == 0.0) == bool(float(want["exact"][LAYER, HEAD]) == 1.0)


def test_metrics_output_error_of_the_gold_graph_is_zero(art_client, art_analysis):
    """top-p at p = 1 keeps every pair of the graph: its misses cost nothing, exactly."""
    r = _metrics(art_client, art_analysis["id"], "topp", p=1.0)
    assert r.status_code == 200, r.text
    assert r.json()["recall"] == 1.0 and r.json()["output_error"] == 0.0


def test_metrics_are_computed_once_per_setting(art_client, art_analysis, monkeypatch):
    calls = []
    real = sparsescope.engine.derived.evaluate
    monkeypatch.setattr(
        sparsescope.engine.derived, "evaluate", lambda *a, **k: calls.append(a) or real(*a, **k)
    )
    aid = art_analysis["id"]
    for head in (0, 1, 2):
        url = f"/api/analyses/{aid}/metrics/0/{head}"
        assert art_client.get(url, params={"method": "strided", "stride": 3}).status_code == 200
    assert len(calls) == 1


@pytest.mark.parametrize(
    ("method", "params", "field", "needles"),
    [
        ("sf-distance", {"t": -1}, "t", ["t must be in [0.0, 10.0]", "-1"]),
        ("sf-distance", {"t": "11"}, "t", ["t must be in [0.0, 10.0]", "11"]),
        ("window", {"window": 10000}, "window", ["window must be in [0,"]),
        ("window", {"globals": "perhaps"}, "globals", ["true or false"]),
        ("sf-kmeans", {"n_clusters": 3}, "n_clusters", ["one of 2, 4, 8", "3"]),
        ("sf-kmeans", {"n_clusters": 2, "top_k": 3}, "top_k", ["top_k must be in [1,"]),
        ("fixed", {"stride": 2, "c": 3}, "c", ["c must be in [1, stride = 2]"]),
        ("strided", {"colour": 1}, "colour", ["no parameter 'colour'", "stride"]),
        ("nope", {}, "method", ["method must be one of", "window", "sf-kmeans"]),
    ],
)
def test_metrics_bad_params_are_400(art_client, art_analysis, method, params, field, needles):
    from tests.app.test_api import assert_error

    assert_error(_metrics(art_client, art_analysis["id"], method, **params), 400, field, *needles)


def test_metrics_method_is_required(art_client, art_analysis):
    from tests.app.test_api import assert_error

    r = art_client.get(f"/api/analyses/{art_analysis['id']}/metrics/0/0")
    assert_error(r, 422, "method", "method is required")


def test_metrics_sf_method_without_artefact(client, analysis):
    from tests.app.test_api import assert_error

    r = _metrics(client, analysis["id"], "sf-distance")
    assert_error(r, 404, "method", "needs a Sparsefinder artefact", "window")


def test_metrics_head_out_of_range(art_client, art_analysis):
    from tests.app.test_api import assert_error

    r = art_client.get(
        f"/api/analyses/{art_analysis['id']}/metrics/0/9", params={"method": "window"}
    )
    assert_error(r, 404, "head", "head must be in [0, 3]")
