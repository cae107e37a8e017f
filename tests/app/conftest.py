"""App fixtures: a FastAPI app on the session's tiny random model (fast), and on the real one."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.service import AnalysisService
from app.settings import Settings


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
    settings = Settings(data_dir=tmp_path_factory.mktemp("data"), warmup=True)
    service = AnalysisService(settings, model=real_model)
    with TestClient(create_app(settings, service)) as c:
        yield c
