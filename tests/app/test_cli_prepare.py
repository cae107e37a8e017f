"""``sparsescope prepare`` (install.sh runs it) builds what a first start would: the compiled
kernels and the shipped adapted models, one printed line per step; and ``serve`` says what it
does while it loads and warms up."""

from __future__ import annotations

import pytest

from sparse_core.shipped import shipped_models
from sparsescope.cli import main
from sparsescope.engine.service import AnalysisService

from .conftest import make_settings


@pytest.mark.slow
def test_prepare_builds_the_shipped_models_into_the_cache(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SPARSESCOPE_CACHE", str(tmp_path / "cache"))
    assert shipped_models(), "the package ships at least one adapted model"
    assert main(["prepare"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("sparsescope prepare: compiling the CPU entmax kernel")
    assert out[-1] == "sparsescope prepare: ready"
    for model_id in shipped_models():
        assert any(line.startswith(f"sparsescope prepare: building {model_id}") for line in out)
    built = sorted((tmp_path / "cache" / "adapted").glob("*/model.safetensors"))
    assert len(built) == len(shipped_models())
    stamp = [p.stat().st_mtime_ns for p in built]
    assert main(["prepare"]) == 0  # again: found, not rebuilt
    assert [p.stat().st_mtime_ns for p in built] == stamp


def test_the_service_start_says_each_step(tmp_path, tiny_model):
    heard: list[str] = []
    service = AnalysisService(make_settings(tmp_path, warmup=True), model=tiny_model)
    service.start(step=heard.append)
    assert heard[0] == "loading the models" and heard[1].startswith("models loaded in ")
    assert heard[2].startswith("warming up") and heard[3].startswith("warm-up done in ")
    service.start(step=heard.append)  # started once: nothing more to say
    assert len(heard) == 4


def test_serve_warms_up_once_the_server_answers(tmp_path, tiny_model, monkeypatch):
    """``serve`` loads the models, starts answering, then warms up in a thread of its own and
    freezes the start-up objects: no warm-up before the server has started, one after (then the
    freeze), and neither when it stopped first."""
    import threading
    import types

    import sparsescope.engine.memory as memory
    from sparsescope.commands.serve import warm_when_serving

    froze: list[int] = []  # this test process's objects are not frozen for good
    monkeypatch.setattr(memory, "freeze_startup_objects", lambda: froze.append(1) or 1)

    heard: list[str] = []
    service = AnalysisService(make_settings(tmp_path, warmup=True), model=tiny_model)
    service.start(step=heard.append, warm=False)
    assert heard == [heard[0], heard[1]] and service.stats.warmups == 0
    server, stopped = types.SimpleNamespace(started=False), threading.Event()
    thread = warm_when_serving(server, service, heard.append, stopped)
    thread.join(0.3)
    assert thread.is_alive() and service.stats.warmups == 0 and froze == []  # waits for it
    server.started = True
    thread.join(120)
    assert not thread.is_alive() and service.stats.warmups == 1 and froze == [1]
    assert heard[2].startswith("warming up") and heard[3].startswith("warm-up done in ")

    later = AnalysisService(make_settings(tmp_path / "b", warmup=True), model=tiny_model)
    later.start(warm=False)
    stopped_first = threading.Event()
    thread = warm_when_serving(types.SimpleNamespace(started=False), later, print, stopped_first)
    stopped_first.set()
    thread.join(5)
    assert not thread.is_alive() and later.stats.warmups == 0 and froze == [1]
