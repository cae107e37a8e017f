"""``alpha: "own"`` (or null): an analysis at the model's own α."""

from __future__ import annotations

import pytest
import torch
from fastapi.testclient import TestClient

from sparse_core.outputs import normalize_alpha
from sparsescope.engine.request import OWN_ALPHA, AnalysisRequest
from sparsescope.engine.service import AnalysisService
from sparsescope.web.main import create_app
from sparsescope.web.schemas import Analysis
from tests.app.test_api import assert_error


@pytest.fixture(scope="module")
def learned_model():
    """A tiny model with its own α per (layer, head), as a learned-α adaptation has."""
    from sparse_core.testing import tiny_model

    m = tiny_model(seed=3)
    table = torch.tensor([[1.1, 1.5, 1.9, 2.0], [1.3, 1.7, 1.2, 1.6]])  # (L, H)
    m.default_alpha = normalize_alpha(table, m.config.num_layers, m.config.num_heads)
    m.alpha_trained = True
    return m


@pytest.fixture
def learned_client(app_settings, learned_model, tiny_artefact):
    service = AnalysisService(app_settings, model=learned_model)
    with TestClient(create_app(app_settings, service)) as c:
        yield c, service


def test_request_normalises_own_and_null_to_one_key() -> None:
    own = AnalysisRequest("Hi there.", alpha="own").checked()
    null = AnalysisRequest("Hi there.", alpha=None).checked()
    assert own.alpha == null.alpha == OWN_ALPHA and own.run_alpha is None
    assert own.key("m", None) == null.key("m", None)
    assert own.key("m", None) != AnalysisRequest("Hi there.", alpha=1.5).checked().key("m", None)


def test_own_alpha_runs_each_head_at_its_own_alpha(learned_client, learned_model, sentence):
    c, _ = learned_client
    r = c.post("/api/analyze", json={"text": sentence, "alpha": "own"})
    assert r.status_code == 200, r.text
    a = r.json()
    Analysis.model_validate(a)
    assert a["alpha"] == "own"
    assert a["own_alpha"] == [[1.1, 1.5, 1.9, 2.0], [1.3, 1.7, 1.2, 1.6]]
    assert a["artefact"] is None  # no one-α Sparsefinder artefact fits a per-head α
    # the graphs are those of model.run(alpha=None): each head at its own α, not one α for all
    want = learned_model.run(sentence)
    for layer, head in ((0, 3), (1, 2)):
        got = c.get(f"/api/analyses/{a['id']}/heads/{layer}/{head}").json()
        assert len(got["edges"]) == int((want.probs[layer, head] > 0).sum())
    null = c.post("/api/analyze", json={"text": sentence, "alpha": None}).json()
    assert null["id"] == a["id"]  # null is the same request
    at15 = c.post("/api/analyze", json={"text": sentence, "alpha": 1.5}).json()
    assert at15["id"] != a["id"] and at15["alpha"] == 1.5
    # head (0, 3) runs at 2.0 (sparsemax) when own, at 1.5 otherwise: other supports
    s_own = {(h["layer"], h["head"]): h for h in a["summary"]}
    s_15 = {(h["layer"], h["head"]): h for h in at15["summary"]}
    assert s_own[0, 1] == s_15[0, 1]  # its own α is 1.5
    assert s_own[0, 3] != s_15[0, 3]


def test_own_alpha_of_a_scalar_model_keeps_its_artefact(art_client, sentence):
    a = art_client.post("/api/analyze", json={"text": sentence, "alpha": "own"}).json()
    b = art_client.post("/api/analyze", json={"text": sentence, "alpha": 1.5}).json()
    assert a["alpha"] == "own" and a["artefact"] is not None and a["artefact"] == b["artefact"]
    assert a["summary"] == b["summary"]  # a softmax-trained model's own α is 1.5


def test_own_is_checked_where_the_request_is_built() -> None:
    from sparse_core.errors import SparsescopeError

    with pytest.raises(SparsescopeError, match='or "own"') as e:
        AnalysisRequest("Hi there.", alpha="mine").checked()
    assert e.value.field == "alpha"


@pytest.mark.parametrize("alpha", ["mine", "OWN", "1.5", True])
def test_bad_alpha_words(client, sentence, alpha):
    r = client.post("/api/analyze", json={"text": sentence, "alpha": alpha})
    assert_error(r, 422, "alpha", 'alpha must be a number in [1, 2] or "own"', f"got {alpha!r}")


def test_a_share_carries_own_alpha(client, sentence):
    good = client.post("/api/share", json={"state": {"text": sentence, "alpha": "own"}})
    assert good.status_code == 200, good.text
    back = client.get(f"/api/share/{good.json()['id']}").json()
    assert back["state"]["alpha"] == "own"
    r = client.post("/api/share", json={"state": {"text": sentence, "alpha": "mine"}})
    assert r.status_code in (400, 422) and r.json()["field"].startswith("state.alpha"), r.text
