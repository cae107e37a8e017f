"""sparse_core.viz: the notebook figures have the expected traces, the gold-edge marks count |G|
exactly, and to_share_state gives what the app's share route accepts."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from sparse_core import metrics, pos, viz
from sparse_core.methods import PredictContext, get_method
from sparse_core.pareto import sweep_text

TEXT = "The chef who ran to the store was out of food, so he went back."


@pytest.fixture(scope="module")
def out(tiny_model):
    return tiny_model.run(TEXT, alpha=1.5)


def _by_name(fig):
    return {t.name: t for t in fig.data}


def _points(trace) -> list[tuple[int, int]]:
    return list(zip(trace.y, trace.x, strict=True))


def test_show_head_without_a_method_stars_every_gold_edge(out):
    fig = viz.show_head(out, 1, 2)
    traces = _by_name(fig)
    assert [t.type for t in fig.data] == ["heatmap", "scatter"]
    gold = out.graph[1, 2]
    stars = _points(traces["gold edges"])
    assert len(stars) == int(gold.sum())
    assert all(gold[i, j] for i, j in stars)
    assert traces["gold edges"].marker.symbol == "star"
    # exact zeros are transparent (None), p > 0 cells carry √p
    z = traces["p > 0"].z
    p = out.probs[1, 2]
    for i in range(out.n):
        for j in range(out.n):
            assert (z[i][j] is None) == (float(p[i, j]) == 0.0)
    assert fig.layout.yaxis.range[0] > fig.layout.yaxis.range[1]  # query 0 on top


@pytest.mark.parametrize("method,params", [("window", {"window": 3, "globals": False}),
                                           ("strided", {"stride": 3}),
                                           ("fixed", {})])  # fmt: skip
def test_show_head_marks_kept_and_missed_edges(out, method, params):
    layer, head = 0, 3
    fig = viz.show_head(out, layer, head, method=method, params=params)
    traces = _by_name(fig)
    assert set(traces) == {
        "predicted, p = 0",
        "p > 0",
        "p > 0, missed",
        "gold edge kept (★)",
        "gold edge missed (×)",
    }
    ctx = PredictContext.from_run(out)
    m = get_method(method)
    mask = m.predict(ctx, **m.validate(out.n, params))[layer, head]
    gold = out.graph[layer, head]
    kept = _points(traces["gold edge kept (★)"])
    missed = _points(traces["gold edge missed (×)"])
    assert len(kept) + len(missed) == int(gold.sum())  # every gold edge marked once
    assert set(kept) == {tuple(e) for e in (mask & gold).nonzero().tolist()}
    assert set(missed) == {tuple(e) for e in (gold & ~mask).nonzero().tolist()}

    def count(name):
        return sum(v is not None for row in traces[name].z for v in row)

    assert count("predicted, p = 0") == int((mask & ~gold).sum())
    assert count("p > 0") == len(kept) and count("p > 0, missed") == len(missed)
    rec = float(metrics.recall(mask, gold))
    assert f"recall {rec:.3f}" in fig.layout.title.text


def test_show_head_escapes_token_labels(tiny_model):
    o = tiny_model.run("a <b> & c")
    fig = viz.show_head(o, 0, 0)
    ticks = fig.layout.xaxis.ticktext
    assert "&lt;" in ticks and "<" not in ticks


def test_show_head_rejects_a_head_out_of_range(out):
    with pytest.raises(ValueError, match="layer must be in"):
        viz.show_head(out, 9, 0)


def test_pareto_figure_from_a_sweep_and_from_the_api_body(tiny_model):
    out = tiny_model.run(" ".join([TEXT] * 3))  # n > 20: every grid point fits
    sweep = sweep_text(PredictContext.from_run(out), per_head=True)
    body = sweep.points(0, 1)
    for fig in (viz.pareto_figure(body), viz.pareto_figure(body["points"])):
        names = {t.name for t in fig.data}
        methods = {p["method"] for p in body["points"]}
        assert len(fig.data) == 2 * len(methods)  # sweep markers + frontier per method
        assert all(t.type == "scatter" for t in fig.data)
        fronts = [t for t in fig.data if t.mode == "lines+markers"]
        assert len(fronts) == len(methods) and all(t.showlegend is not False for t in fronts)
        assert "Window (+ globals)" in names
    # the frontier drawn is the server's: recall rises as sparsity falls
    fig = viz.pareto_figure(body)
    for t in fig.data:
        if t.mode == "lines+markers":
            assert list(t.y) == sorted(t.y) and list(t.x) == sorted(t.x, reverse=True)
    assert any(s.x0 == body["gold_sparsity"] for s in fig.layout.shapes)
    mean = viz.pareto_figure(sweep)  # a TextSweep: the mean over heads
    assert len(mean.data) == len(fig.data)
    # y-axis buttons: recall, or mass recall with its own frontiers (definitions §8)
    recall_b, mass_b = fig.layout.updatemenus[0].buttons
    assert (recall_b.label, mass_b.label) == ("recall", "mass recall")
    ys = mass_b.args[0]["y"]
    pts = body["points"]
    by = {}
    for p in pts:
        by.setdefault(p["method"], []).append(p["mass_recall"])
    for t, y in zip(fig.data, ys, strict=True):
        if t.mode == "markers":  # the sweep's points: their mass recall
            assert sorted(y) == sorted(by[t.legendgroup])
        else:  # the mass-recall frontier rises as its sparsity falls
            assert list(y) == sorted(y)
    assert mass_b.args[1] == {"yaxis.title.text": "mass recall"}


def test_pos_figure_stacks_shares_per_cluster():
    breakdown = {
        "layer": 2,
        "head": 3,
        "clusters": [
            {"cluster": 0, "queries": {"VERB": 3, "AUX": 1}, "keys": {"NOUN": 2}},
            {"cluster": 1, "queries": {"NOUN": 0.5, "DET": 0.5}, "keys": {"shares": {"VERB": 1.0}}},
        ],
    }
    fig = viz.pos_figure(breakdown)
    assert fig.layout.barmode == "stack"
    tags = {t.name for t in fig.data}
    assert tags == {"VERB", "AUX", "NOUN", "DET"}
    verb_q = next(t for t in fig.data if t.name == "VERB" and t.xaxis == "x")
    assert list(verb_q.y) == [0.75, 0.0]
    # each cluster's bar sums to 1 on both sides
    for axis in ("x", "x2"):
        side = [t for t in fig.data if t.xaxis == axis]
        for c in range(2):
            assert sum(t.y[c] for t in side) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="queries"):
        viz.pos_figure({"clusters": [{"cluster": 0}]})


def test_pos_figure_of_a_real_cluster_breakdown(out):
    from sparse_core.sparsefinder import Artefact

    cfg_l, cfg_h, d = out.layers, out.heads, out.queries.shape[-1]
    gen = torch.Generator().manual_seed(0)
    cents = {4: torch.randn(cfg_l, cfg_h, 4, 4, generator=gen)}
    W = torch.randn(cfg_l, cfg_h, d, 4, generator=gen)
    art = Artefact("tiny", 1.5, 4, W, torch.zeros(cfg_l, cfg_h, 4), cents, {})
    tags = ["NOUN"] * out.n  # no tagger needed: the shape is what matters here
    breakdown = pos.cluster_breakdown(out, art, 1, 2, 4, pos_tags=tags)
    fig = viz.pos_figure(breakdown)
    assert {t.name for t in fig.data} == {"NOUN"}
    labels = [str(c["id"]) for c in breakdown["clusters"]]
    assert all(list(t.x) == labels for t in fig.data)
    assert "layer 1, head 2" in fig.layout.title.text


def test_to_share_state_validates_as_the_apps_share_state(out):
    from sparsescope.web.schemas import ShareState

    state = viz.to_share_state(out, 1, 2, method="strided", params={"stride": 3}, token=4)
    parsed = ShareState.model_validate(state)
    assert parsed.text == TEXT and parsed.layer == 1 and parsed.head == 2
    assert parsed.method == "strided" and parsed.params["stride"] == 3
    assert set(parsed.params) == {"stride", "part", "window", "globals"}  # defaults filled in
    assert parsed.token == 4 and parsed.alpha == 1.5
    with pytest.raises(Exception, match="stride"):
        viz.to_share_state(out, method="strided", params={"stride": 0})


def test_to_share_state_of_a_causal_run(tiny_model):
    from sparsescope.web.schemas import ShareState

    o = tiny_model.run(TEXT, alpha=2.0, causal=True)
    state = ShareState.model_validate(viz.to_share_state(o, view={"scope": "mean"}))
    assert state.causal and state.alpha == 2.0 and state.view == {"scope": "mean"}


def test_sparse_core_imports_without_plotly():
    code = (
        "import sys; sys.modules['plotly'] = None; import sparse_core, sparse_core.viz; print('ok')"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert res.returncode == 0 and "ok" in res.stdout, res.stderr


def test_a_per_head_alpha_cannot_be_shared(out):
    from dataclasses import replace

    o = replace(out, alpha=torch.tensor([[1.5, 2.0]]))
    with pytest.raises(ValueError, match="per-head alpha"):
        viz.to_share_state(o)
