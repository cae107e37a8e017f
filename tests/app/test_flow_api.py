"""GET /api/analyses/{id}/flow: the information flow into one token (sparse_core/flow.py), good
and bad input, and the real model end to end."""

from __future__ import annotations

import pytest
import torch

from sparse_core.flow import reachability, rollout


def test_flow_matches_the_rollout_of_the_cached_run(client, analysis, service):
    aid, n, layers = analysis["id"], analysis["n"], analysis["layers"]
    r = client.get(f"/api/analyses/{aid}/flow", params={"token": n - 2})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["token"] == n - 2 and body["layer"] == layers - 1 and body["n"] == n
    out = service.get(aid).out
    reach = reachability(out.graph)[layers - 1, n - 2]
    roll = rollout(out.probs)[layers - 1, n - 2]
    assert body["reachable"] == reach.tolist()
    assert body["reached"] == int(reach.sum()) == body["counts"][0]
    assert [m > 0 for m in body["mass"]] == body["reachable"]
    assert body["mass"] == pytest.approx(roll.tolist(), rel=1e-5, abs=1e-12)
    assert sum(body["mass"]) == pytest.approx(1.0, abs=1e-4)
    assert len(body["counts"]) == layers + 1 and body["counts"][-1] == 1
    assert [len(lv) for lv in body["levels"]] == body["counts"]
    assert body["levels"][-1] == [n - 2]
    assert body["levels"][0] == [j for j, r in enumerate(body["reachable"]) if r]


def test_flow_at_a_chosen_layer_and_cached(client, analysis, service):
    aid = analysis["id"]
    a = client.get(f"/api/analyses/{aid}/flow?token=1&layer=0")
    b = client.get(f"/api/analyses/{aid}/flow?token=1&layer=0")
    assert a.status_code == 200 and a.content == b.content
    body = a.json()
    assert body["layer"] == 0 and len(body["counts"]) == 2
    g = service.get(aid).out.graph[0].any(0)[1]  # layer 0: the heads' union, plus itself
    want = g.clone()
    want[1] = True
    assert body["reachable"] == want.tolist()


@pytest.mark.parametrize(
    ("query", "field", "status"),
    [
        ("token=999", "token", 404),
        ("token=-1", "token", 404),
        ("token=0&layer=9", "layer", 404),
        ("token=0&layer=-1", "layer", 404),
        ("token=abc", "token", 422),
        ("", "token", 422),
    ],
)
def test_bad_flow_input_names_its_field(client, analysis, query, field, status):
    r = client.get(f"/api/analyses/{analysis['id']}/flow?{query}")
    assert r.status_code == status, r.text
    body = r.json()
    assert body["field"] == field and body["detail"]


def test_flow_of_an_unknown_analysis_is_404(client):
    r = client.get("/api/analyses/" + "0" * 24 + "/flow?token=0")
    assert r.status_code == 404 and "POST the text" in r.json()["detail"]


@pytest.mark.real_model
def test_real_model_flow_is_sparse_at_entmax_and_full_at_softmax(real_client):
    """MiniLM at α = 1.5: the last layer's token 2 is reached through exact zeros, not by
    everything at layer 0; the rollout's support is the reachable set; softmax reaches all."""
    text = "The cat that the dog chased ran up the tall old tree behind the house."
    a = real_client.post("/api/analyze", json={"text": text, "alpha": 1.5}).json()
    first = real_client.get(f"/api/analyses/{a['id']}/flow?token=2&layer=0").json()
    last = real_client.get(f"/api/analyses/{a['id']}/flow?token=2").json()
    assert first["reached"] < a["n"]  # one entmax layer: a sparse receptive field
    assert [m > 0 for m in last["mass"]] == last["reachable"]
    assert last["reached"] >= first["reached"]
    assert last["counts"] == sorted(last["counts"], reverse=True)
    s = real_client.post("/api/analyze", json={"text": text, "alpha": 1.0}).json()
    soft = real_client.get(f"/api/analyses/{s['id']}/flow?token=2&layer=0").json()
    assert all(soft["reachable"]) and soft["reached"] == s["n"]
    assert torch.tensor(soft["mass"]).min() > 0
