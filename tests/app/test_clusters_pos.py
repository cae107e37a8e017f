"""POS tags of the tokens and the k-means cluster breakdown of one head (definitions §5)."""

from __future__ import annotations

import pytest

from sparse_core import pos
from sparsescope.web.schemas import Clusters
from tests.app.test_api import assert_error


@pytest.fixture
def art_analysis(art_client, sentence) -> dict:
    return art_client.post("/api/analyze", json={"text": sentence}).json()


def test_tokens_carry_upos_tags(analysis, sentence):
    toks = analysis["tokens"]
    assert all(t["pos"] is None for t in toks if t["special"])
    tags = {t["text"]: t["pos"] for t in toks if not t["special"]}
    assert tags["chef"] == "NOUN" and tags["ran"] == "VERB" and tags["the"] == "DET"
    assert tags["."] == "PUNCT"


def test_head_payload_pos_matches_tokens(client, analysis):
    head = client.get(f"/api/analyses/{analysis['id']}/heads/0/0").json()
    assert head["pos"] == [t["pos"] for t in analysis["tokens"]]


def test_cluster_breakdown(art_client, art_analysis, tiny_model, tiny_artefact, sentence):
    url = f"/api/analyses/{art_analysis['id']}/clusters/1/2"
    r = art_client.get(url, params={"clusters": 4, "top_k": 1})
    assert r.status_code == 200, r.text
    body = r.json()
    out = tiny_model.run(sentence)
    assert body == pos.cluster_breakdown(out, tiny_artefact, 1, 2, 4, top_k=1)
    Clusters.model_validate(body)
    assert (body["layer"], body["head"]) == (1, 2) and len(body["clusters"]) == 4
    assert sum(c["n_queries"] for c in body["clusters"]) == out.n  # top-1: each token once
    for c in body["clusters"]:
        if c["n_queries"]:
            assert sum(c["queries"].values()) == pytest.approx(1.0, abs=1e-3)
    default = art_client.get(url).json()  # B defaults to 8, top_k to 1
    assert len(default["clusters"]) == 8


@pytest.mark.parametrize(
    ("params", "field", "needle"),
    [
        ({"clusters": 3}, "clusters", "clusters must be one of 2, 4, 8"),
        ({"clusters": 4, "top_k": 5}, "top_k", "top_k must be in [1, 4]"),
        ({"clusters": 4, "top_k": 0}, "top_k", "top_k must be in [1, 4]"),
        ({"clusters": "many"}, "clusters", "clusters must be a valid integer"),
    ],
)
def test_cluster_breakdown_bad_params(art_client, art_analysis, params, field, needle):
    url = f"/api/analyses/{art_analysis['id']}/clusters/0/0"
    # a fit (or a top_k beyond it) that the analysis' artefact lacks: 404; top_k < 1: 400
    status = (
        422 if isinstance(params.get("clusters"), str) else 400 if params.get("top_k") == 0 else 404
    )
    assert_error(art_client.get(url, params=params), status, field, needle)


def test_cluster_breakdown_needs_an_artefact(client, analysis):
    r = client.get(f"/api/analyses/{analysis['id']}/clusters/0/0")
    assert_error(r, 404, "clusters", "needs a Sparsefinder artefact")


def test_cluster_breakdown_head_out_of_range(art_client, art_analysis):
    r = art_client.get(f"/api/analyses/{art_analysis['id']}/clusters/2/0")
    assert_error(r, 404, "layer", "layer must be in [0, 1]")


def test_truncated_text_tags_only_what_the_model_sees(client, service, monkeypatch):
    tagged = []
    real = pos.word_tags
    monkeypatch.setattr(pos, "word_tags", lambda text: tagged.append(len(text)) or real(text))
    text = "The cat sat on the mat. " * 20000  # 480 000 characters, far over 512 tokens
    r = client.post("/api/analyze", json={"text": text, "truncate": True})
    assert r.status_code == 200, r.text
    a = r.json()
    assert a["truncated"] and a["n"] == 512
    assert tagged and max(tagged) < 5000  # the ~510 tokens' span, not the whole text
    assert [t["pos"] for t in a["tokens"][1:4]] == ["DET", "NOUN", "VERB"]
