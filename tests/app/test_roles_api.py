"""``GET /api/analyses/{id}/roles`` (definitions §11): the (L × H) roles of an analysis, its spaCy
parse kept from the tagging (spaCy not run again), and the 404 of an unknown id."""

from __future__ import annotations

import pytest

from sparse_core import pos, roles
from sparsescope.web.schemas import Roles
from tests.app.test_api import assert_error


def test_roles_shape_and_values(client, analysis, tiny_model):
    r = client.get(f"/api/analyses/{analysis['id']}/roles")
    assert r.status_code == 200, r.text
    body = r.json()
    Roles.model_validate(body)
    L, H = tiny_model.config.num_layers, tiny_model.config.num_heads
    assert len(body["roles"]) == L and all(len(layer) == H for layer in body["roles"])
    n_plain = sum(not t["special"] for t in analysis["tokens"])
    for layer in body["roles"]:
        for head in layer:
            assert head["role"] in roles.HEAD_ROLES and head["rows"] == n_plain
            assert set(head["shares"]) == set(roles.ROLES)
            assert sum(head["shares"].values()) <= 1 + 1e-3
            assert head["share"] == head["shares"][head["leading"]]
            big = head["share"] >= roles.MIN_SHARE
            assert head["role"] == (
                head["leading"] if big or head["leading"] == "broad" else "mixed"
            )
    assert client.get(f"/api/analyses/{analysis['id']}/roles").json() == body  # kept


def test_roles_use_the_parse_kept_from_tagging(client, service, analysis, sentence, monkeypatch):
    """The roles read the words and arcs the tagging kept; spaCy is not called again."""
    entry = service.get(analysis["id"])
    words = entry.out.extra["words"]
    assert words.arcs is not None and words == pos.word_tags(sentence)
    monkeypatch.setattr(pos, "tagger", lambda: pytest.fail("spaCy ran again"))
    body = client.get(f"/api/analyses/{analysis['id']}/roles").json()
    assert body["roles"] == roles.run_roles(entry.out, words)
    without = roles.run_roles(entry.out, pos.Words.of(list(words), None))
    # without the parse no row is syntactic; with it, some head of the random model has some
    assert all(h["shares"]["syntactic"] == 0 and h["syntax"] is None for l in without for h in l)
    assert any(h["shares"]["syntactic"] > 0 for layer in body["roles"] for h in layer)


def test_roles_of_an_unknown_analysis_is_a_404(client):
    r = client.get("/api/analyses/0123456789abcdef01234567/roles")
    assert_error(r, 404, "id", "no analysis with id", "POST the text to /api/analyze again")
