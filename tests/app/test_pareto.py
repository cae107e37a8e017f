"""Per-text Pareto data: one head and the mean over heads, computed lazily once per analysis."""

from __future__ import annotations

import pytest

from sparse_core import pareto as P
from sparsescope.web.schemas import Pareto
from tests.app.test_api import assert_error


@pytest.fixture
def aid(art_client, sentence) -> str:
    return art_client.post("/api/analyze", json={"text": sentence}).json()["id"]


def test_head_and_mean_match_sparse_core(art_client, aid, tiny_model, tiny_artefact, sentence):
    from sparse_core import methods as M
    from sparse_core.methods import PredictContext

    head = Pareto.model_validate(
        art_client.get(f"/api/analyses/{aid}/pareto?layer=1&head=2").json()
    )
    mean = Pareto.model_validate(art_client.get(f"/api/analyses/{aid}/pareto").json())
    assert (head.scope, head.layer, head.head) == ("head", 1, 2)
    assert (mean.scope, mean.layer, mean.head) == ("mean", None, None)
    ctx = PredictContext.from_run(tiny_model.run(sentence), tiny_artefact)
    sweep = P.sweep_text(ctx, per_head=True)
    assert head.model_dump(exclude={"layer", "head"}) == Pareto.model_validate(
        sweep.points(1, 2)
    ).model_dump(exclude={"layer", "head"})
    assert mean.gold_sparsity == pytest.approx(float(sweep.gold_sparsity.mean()), abs=1e-6)
    # every method the artefact can run (no trained selectors on it: not indexer, seer)
    assert {p.method for p in head.points} == set(M.available(tiny_artefact))
    assert not {"indexer", "seer"} & {p.method for p in head.points}
    for name, idx in head.frontiers.items():
        front = [head.points[i] for i in idx]
        assert all(p.method == name for p in front)
        # along a frontier sparsity falls and recall rises strictly
        assert all(
            a.sparsity >= b.sparsity and a.recall < b.recall
            for a, b in zip(front, front[1:], strict=False)
        )


def test_sweep_runs_once_per_analysis(art_client, art_service, aid):
    for q in ("", "?layer=0&head=0", "?layer=1&head=3", "", "?layer=0&head=0"):
        assert art_client.get(f"/api/analyses/{aid}/pareto{q}").status_code == 200
    assert art_service.stats.pareto_runs == 1


@pytest.mark.parametrize(
    ("query", "status", "field", "needle"),
    [
        ("?layer=1", 400, "head", "head is missing"),
        ("?head=1", 400, "layer", "layer is missing"),
        ("?layer=5&head=0", 404, "layer", "layer must be in [0, 1]"),
        ("?layer=0&head=-1", 404, "head", "head must be in [0, 3]"),
        ("?layer=zero&head=0", 422, "layer", "layer must be a valid integer"),
        ("?x=tiles", 422, "x", "x must be"),
        ("?x=block&block=48", 400, "block", "block must be one of 16, 32, 64, 128"),
        ("?x=block&block=big", 422, "block", "block must be a valid integer"),
        ("?output_error=true", 400, "output_error", "output_error is measured per head"),
        ("?layer=0&head=0&output_error=maybe", 422, "output_error", "output_error"),
    ],
)
def test_pareto_bad_scope(art_client, aid, query, status, field, needle):
    assert_error(art_client.get(f"/api/analyses/{aid}/pareto{query}"), status, field, needle)


def test_pareto_without_artefact_has_the_other_methods(client, analysis):
    mean = client.get(f"/api/analyses/{analysis['id']}/pareto").json()
    names = {p["method"] for p in mean["points"]}
    assert names and not any(nm.startswith("sf-") for nm in names)


@pytest.mark.parametrize("block", [16, 32, 64, 128])
def test_pareto_over_block_sparsity(art_client, aid, block):
    """``x=block&block=B`` (the page's query string): frontiers over the block sparsity at B,
    the same points as over token sparsity."""
    url = f"/api/analyses/{aid}/pareto?layer=1&head=2"
    tokens = art_client.get(url).json()
    body = art_client.get(f"{url}&x=block&block={block}").json()
    assert (body["x"], body["block"]) == ("block", block)
    assert body["points"] == tokens["points"]
    assert all(set(p["block_sparsity"]) == {"16", "32", "64", "128"} for p in body["points"])
    for name, idx in body["frontiers"].items():
        front = [body["points"][i] for i in idx]
        xs = [p["block_sparsity"][str(block)] for p in front]
        assert all(
            a >= b and p["recall"] < q["recall"]
            for a, b, p, q in zip(xs, xs[1:], front, front[1:], strict=False)
        ), name
    default = art_client.get(f"{url}&x=block").json()
    assert default["block"] == P.DEFAULT_BLOCK


def test_pareto_points_carry_their_output_error(art_client, aid, tiny_model, tiny_artefact,
                                                 sentence):  # fmt: skip
    """``output_error=true`` on one head: every point's output error is sparse_core's for the
    point's own mask; a point that keeps every pair of the graph costs exactly 0."""
    from sparse_core.methods import METHODS, PredictContext
    from sparse_core.metrics import output_error

    body = art_client.get(f"/api/analyses/{aid}/pareto?layer=1&head=2&output_error=true").json()
    plain = art_client.get(f"/api/analyses/{aid}/pareto?layer=1&head=2").json()
    assert [p["recall"] for p in body["points"]] == [p["recall"] for p in plain["points"]]
    assert all(p.get("output_error") is None for p in plain["points"])
    ctx = PredictContext.from_run(tiny_model.run(sentence), tiny_artefact)
    for pt in body["points"][::7]:
        mask = METHODS[pt["method"]].predict(ctx, **pt["params"])[1, 2]
        assert pt["output_error"] == pytest.approx(output_error(ctx.out, 1, 2, mask), abs=2e-6)
    full = [p for p in body["points"] if p["exact"] == 1.0]
    assert full and all(p["output_error"] == 0.0 for p in full)
