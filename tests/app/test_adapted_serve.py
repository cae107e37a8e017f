"""``sparsescope serve`` with nothing configured serves the adapted default and the original."""

from __future__ import annotations

import argparse

import pytest
from fastapi.testclient import TestClient

from sparse_core.sources import ADAPTED_MODEL_ID, DEFAULT_MODEL_ID, ORIGINAL_MODEL_ID
from sparsescope.engine.service import AnalysisService
from sparsescope.engine.settings import Settings, served_by_default
from sparsescope.web.main import create_app


def parse(*argv: str):
    from sparsescope.commands import serve as serve_cmd

    p = argparse.ArgumentParser()
    serve_cmd.add_parser(p.add_subparsers())
    return serve_cmd.settings_from_args(p.parse_args(["serve", *argv]))


def test_the_default_pair_unless_models_are_configured(monkeypatch) -> None:
    assert served_by_default() == (ADAPTED_MODEL_ID, ORIGINAL_MODEL_ID)
    assert DEFAULT_MODEL_ID == ADAPTED_MODEL_ID
    for var in ("SPARSESCOPE_MODELS", "SPARSESCOPE_MODEL_PATH"):
        monkeypatch.delenv(var, raising=False)
    assert parse().model_names() == [ADAPTED_MODEL_ID, ORIGINAL_MODEL_ID]
    assert parse("--model", "/m").model_names() == ["/m"]
    monkeypatch.setenv("SPARSESCOPE_MODEL_PATH", "/x")
    assert parse().model_names() == ["/x"]
    monkeypatch.delenv("SPARSESCOPE_MODEL_PATH")
    monkeypatch.setenv("SPARSESCOPE_MODELS", "/a,/b")
    assert parse().model_names() == ["/a", "/b"]
    assert Settings.from_env({}).model_names() == [None]  # the library default is unchanged


@pytest.mark.real_model
def test_both_minilms_are_served_side_by_side(tmp_path, sentence) -> None:
    settings = Settings(data_dir=tmp_path, models=served_by_default(), warmup=False)
    with TestClient(create_app(settings, AnalysisService(settings))) as c:
        got = c.get("/api/models").json()
        assert got["default"] == ADAPTED_MODEL_ID
        assert [m["id"] for m in got["models"]] == [ADAPTED_MODEL_ID, ORIGINAL_MODEL_ID]
        a = c.post("/api/analyze", json={"text": sentence}).json()
        b = c.post("/api/analyze", json={"text": sentence, "model": ORIGINAL_MODEL_ID}).json()
        assert a["model"] == ADAPTED_MODEL_ID and b["model"] == ORIGINAL_MODEL_ID
        assert a["tokens"] == b["tokens"]
        assert a["summary"] != b["summary"]  # other attention weights: other graphs
        for m in got["models"]:  # each has its own Sparsefinder artefact at 1.5
            assert 1.5 in m["artefacts"], m
        assert a["artefact"] != b["artefact"] and None not in (a["artefact"], b["artefact"])
