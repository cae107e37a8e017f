"""``adapt --engine ray``: Ray Train (TorchTrainer) on a local 2-CPU cluster, tiny model.

One worker reproduces the local run's loss curve (bit for bit, one thread each); two workers
train data-parallel to the same kind of result (dropout masks differ per worker). The cluster is
the Ray tests' shared one (``ray_cluster``, tests/conftest.py): ``train_ray`` connects to it as
to a user's ``RAY_ADDRESS`` cluster, so each run pays for Ray Train's actors only."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from sparse_core.adapt import AdaptConfig, adapt, store
from sparse_core.testing import write_tiny_checkpoint

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed"),
]

ARTICLE = (
    " = Mill {k} = \n\n The {k} river ran past the old mill , and the miller watched it every "
    "morning while children played near the water . In winter the wheel froze , so the village "
    "ground its grain by hand , and a merchant brought salt , cloth and news . \n\n"
)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("ray")
    corpus = d / "wiki.txt"
    corpus.write_text("".join(ARTICLE.format(k=k) for k in range(40)))
    model = write_tiny_checkpoint(d / "tiny-bert", "bert")
    return model, corpus


def cfg(**kw) -> AdaptConfig:
    return AdaptConfig(**{"alpha": 1.5, "steps": 4, "seq_len": 32, "batch": 4, "lr": 1e-3,
                          "seed": 5, **kw})  # fmt: skip


def losses(out: Path) -> list[float]:
    return [r["loss"] for r in store.read_log(out)]


@pytest.fixture
def no_preemption_watcher(monkeypatch):
    """Ray Train's preemption watcher (an actor polling for cloud spot-instance notices, one more
    process to start per run) is off: a local cluster is not preempted. Its controller polls the
    workers every 0.2 s instead of every 2 s: a run of 4 steps ends that much sooner."""
    monkeypatch.setenv("RAY_TRAIN_ENABLE_PREEMPTION_WATCHER", "0")
    monkeypatch.setenv("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.2")


def test_one_worker_reproduces_the_local_run(
    ray_cluster, no_preemption_watcher, setup, tmp_path
) -> None:
    model, corpus = setup
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        local = adapt(str(model), corpus, tmp_path / "local", cfg(), device="cpu", progress=False)
    finally:
        torch.set_num_threads(old)
    ray1 = adapt(str(model), corpus, tmp_path / "ray1", cfg(), device="cpu", progress=False,
                 engine="ray", workers=1)  # fmt: skip
    assert losses(tmp_path / "ray1") == losses(tmp_path / "local")
    assert ray1["held_out"] == local["held_out"]
    assert (
        not (tmp_path / "ray1" / ".ray").exists()
        and store.checkpoint_dir(tmp_path / "ray1") is None
    )


def test_two_workers_train_data_parallel(
    ray_cluster, no_preemption_watcher, setup, tmp_path
) -> None:
    model, corpus = setup
    meta = adapt(str(model), corpus, tmp_path / "ray2", cfg(alpha=None), device="cpu",
                 progress=False, engine="ray", workers=2)  # fmt: skip
    log = store.read_log(tmp_path / "ray2")
    assert [r["step"] for r in log] == [1, 2, 3, 4]
    assert all(r["tokens"] > 0 and torch.isfinite(torch.tensor(r["loss"])) for r in log)
    assert meta["status"] == "done" and meta["held_out"]["loss"] > 0
    table = torch.tensor(meta["alpha"])
    assert table.shape == (2, 4) and (table != 1.5).any()  # learned alpha, all-reduced grads
    from sparse_core import load_model

    m = load_model(tmp_path / "ray2", device="cpu")
    assert torch.allclose(m.default_alpha.double(), table.double(), atol=1e-6)
