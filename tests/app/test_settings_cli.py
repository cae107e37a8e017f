"""Settings from SPARSESCOPE_* variables, and ``sparsescope serve`` (the default command)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparse_core.errors import SparsescopeError
from sparsescope.engine.settings import Settings, get_settings


def test_defaults_bind_localhost():
    s = Settings.from_env({})
    assert (s.host, s.port, s.device, s.model_path, s.artefact_path) == (
        "127.0.0.1",
        8000,
        "auto",
        None,
        None,
    )
    assert s.cache_entries >= 1 and s.cache_bytes >= 1 << 20 and s.max_body_bytes >= 1024


def test_environment_is_read():
    env = {
        "SPARSESCOPE_HOST": "0.0.0.0",
        "SPARSESCOPE_PORT": "9001",
        "SPARSESCOPE_DEVICE": "cpu",
        "SPARSESCOPE_MODEL_PATH": "/models/bert",
        "SPARSESCOPE_DATA_DIR": "/tmp/ss",
        "SPARSESCOPE_CACHE_ENTRIES": "3",
        "SPARSESCOPE_MAX_BODY_BYTES": "4096",
        "SPARSESCOPE_WARMUP": "false",
    }
    s = Settings.from_env(env)
    assert (s.host, s.port, s.device, s.model_path) == ("0.0.0.0", 9001, "cpu", "/models/bert")
    assert s.data_dir == Path("/tmp/ss") and s.cache_entries == 3 and s.max_body_bytes == 4096
    assert s.warmup is False
    # flags win over the environment; None means "not given"
    s = Settings.from_env(env, port=7000, host=None)
    assert (s.port, s.host) == (7000, "0.0.0.0")


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"SPARSESCOPE_PORT": "eighty"}, "SPARSESCOPE_PORT"),
        ({"SPARSESCOPE_PORT": "70000"}, "65535"),
        ({"SPARSESCOPE_DEVICE": "tpu"}, "'auto', 'cpu' or 'cuda'"),
    ],
)
def test_bad_environment_is_a_clear_error(env, needle):
    with pytest.raises(SparsescopeError, match="SPARSESCOPE_") as info:
        Settings.from_env(env)
    assert needle in str(info.value)


def test_bad_flag_names_the_flag():
    with pytest.raises(SparsescopeError, match="--port"):
        Settings.from_env({}, port=0)


def test_get_settings_is_cached_and_overridable(monkeypatch):
    get_settings.cache_clear()
    monkeypatch.setenv("SPARSESCOPE_PORT", "8123")
    try:
        assert get_settings().port == 8123 and get_settings() is get_settings()
    finally:
        get_settings.cache_clear()


class FakeService:
    """Stands in for AnalysisService: records start() instead of loading a model, and reports
    one start-up step through ``step`` as the real one does for each of its steps."""

    started = 0
    warm_at_start: list[bool] = []

    def __init__(self, settings):
        self.settings = settings

    def start(self, step=None, *, warm=True):
        FakeService.started += 1
        FakeService.warm_at_start.append(warm)
        if step is not None:
            step("loading the fake model")

    def warm_up(self, step=None):  # `serve` runs it in a thread once the server has started
        return False

    def begin_shutdown(self):
        pass


@pytest.fixture
def fake_serve(monkeypatch):
    import uvicorn

    import sparsescope.engine.service
    import sparsescope.web.connections
    import sparsescope.web.main

    calls = {}
    monkeypatch.setattr(sparsescope.engine.service, "AnalysisService", FakeService)
    monkeypatch.setattr(sparsescope.web.main, "create_app", lambda s, svc: ("app", s, svc))

    class FakeServer:  # `serve` runs web.connections.DrainingServer(config).run()
        def __init__(self, config, on_shutdown=None):
            self.config, self.started = config, True

        def run(self):
            calls.update(app=self.config.app, host=self.config.host, port=self.config.port)

    monkeypatch.setattr(sparsescope.web.connections, "DrainingServer", FakeServer)
    monkeypatch.setattr(uvicorn, "run", lambda a, **kw: calls.update(app=a, **kw))
    monkeypatch.delenv("SPARSESCOPE_HOST", raising=False)
    monkeypatch.delenv("SPARSESCOPE_PORT", raising=False)
    FakeService.started = 0
    FakeService.warm_at_start = []
    return calls


def test_bare_sparsescope_serves_on_localhost(fake_serve, capsys):
    from sparsescope.cli import main

    assert main([]) == 0
    assert fake_serve["host"] == "127.0.0.1" and fake_serve["port"] == 8000
    assert FakeService.started == 1  # the model is loaded before uvicorn starts
    assert FakeService.warm_at_start == [False]  # the warm-up waits for the server
    out = capsys.readouterr().out
    assert "http://127.0.0.1:8000" in out
    assert "sparsescope: loading the fake model\n" in out  # each start-up step, one line


def test_serve_flags(fake_serve, tmp_path):
    from sparsescope.cli import main

    argv = ["serve", "--host", "0.0.0.0", "--port", "9002", "--device", "cpu"]
    argv += ["--model", "/m", "--artefact", "/a.safetensors", "--data-dir", str(tmp_path)]
    assert main(argv) == 0
    _, settings, _ = fake_serve["app"]
    assert (fake_serve["host"], fake_serve["port"]) == ("0.0.0.0", 9002)
    assert (settings.device, settings.models, settings.artefact_path) == (
        "cpu",
        ("/m",),
        "/a.safetensors",
    )
    assert settings.model_names() == ["/m"]
    assert settings.data_dir == tmp_path


def test_serve_bad_model_is_one_line(capsys, tmp_path):
    from sparsescope.cli import main

    rc = main(["serve", "--model", str(tmp_path / "missing"), "--device", "cpu"])
    err = capsys.readouterr().err
    assert rc == 2 and "does not exist" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_threads_setting_sets_torch_threads(tmp_path, tiny_model):
    import torch

    from sparsescope.engine.service import AnalysisService

    before = torch.get_num_threads()
    try:
        settings = Settings.from_env({"SPARSESCOPE_THREADS": "1"}, data_dir=tmp_path, warmup=False)
        AnalysisService(settings, model=tiny_model).start()
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_default_threads_leave_a_core_free(monkeypatch):
    import os

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert Settings.from_env({}).torch_threads() == 1
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    assert Settings.from_env({}).torch_threads() == 8
    assert Settings.from_env({"SPARSESCOPE_THREADS": "3"}).torch_threads() == 3
