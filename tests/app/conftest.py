"""App fixtures: a FastAPI app on the session's tiny random model (fast), and on the real one."""

from __future__ import annotations

import pytest
import torch
from fastapi.testclient import TestClient

from sparsescope.engine.service import AnalysisService
from sparsescope.engine.settings import Settings
from sparsescope.web.main import create_app


def make_settings(tmp_path, **kw) -> Settings:
    kw.setdefault("warmup", False)
    return Settings(data_dir=tmp_path, **kw)


@pytest.fixture
def app_settings(tmp_path) -> Settings:
    return make_settings(tmp_path)


@pytest.fixture
def service(app_settings, tiny_model) -> AnalysisService:
    """A fresh service (empty cache, zero counters) over the session's tiny model."""
    return AnalysisService(app_settings, model=tiny_model)


@pytest.fixture
def client(app_settings, service):
    """TestClient of the app; entering it runs the lifespan (service.start)."""
    with TestClient(create_app(app_settings, service)) as c:
        yield c


@pytest.fixture
def analysis(client, sentence) -> dict:
    r = client.post("/api/analyze", json={"text": sentence})
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture(scope="session")
def real_client(tmp_path_factory, real_model):
    # no start-up warm-up: it would also precompute the gallery in the background
    settings = Settings(data_dir=tmp_path_factory.mktemp("data"), warmup=False)
    service = AnalysisService(settings, model=real_model)
    service.warmup()  # the model's own warm-up (tagger load, first forward), uncached
    with TestClient(create_app(settings, service)) as c:
        yield c


@pytest.fixture(scope="session")
def tiny_artefact(tiny_model):
    """A Sparsefinder artefact shaped for the tiny model (random projections, not fitted: the
    API only carries it, the fitting is tested in tests/core)."""
    from sparse_core.sparsefinder import Artefact

    cfg = tiny_model.config
    gen = torch.Generator().manual_seed(1)
    L, H, d, r = cfg.num_layers, cfg.num_heads, cfg.head_dim, 4
    return Artefact(
        model_id=tiny_model.model_id,
        alpha=1.5,
        rank=r,
        W=torch.randn(L, H, d, r, generator=gen) * 0.5,
        b=torch.zeros(L, H, r),
        centroids={b: torch.randn(L, H, b, r, generator=gen) for b in (2, 4, 8)},
        meta={"name": "tiny-test-artefact"},
    )


@pytest.fixture
def art_service(app_settings, tiny_model, tiny_artefact) -> AnalysisService:
    return AnalysisService(app_settings, model=tiny_model, artefact=tiny_artefact)


@pytest.fixture
def art_client(app_settings, art_service):
    with TestClient(create_app(app_settings, art_service)) as c:
        yield c
