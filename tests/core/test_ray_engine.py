"""``--engine ray`` (sparse_core.ray_engine) against the local engine, on a local 2-CPU Ray cluster.

The tiny random BERT is written as a checkpoint directory, so the Ray actors load it as a user's
model; the local engine runs the same weights in this process. The cluster is the Ray tests'
shared one (``ray_cluster``, tests/conftest.py); each engine run starts its own actor pool.
Skipped (with the reason) where Ray is not installed; the missing-Ray error is tested everywhere.
"""

from __future__ import annotations

import importlib.util
import json
import sys

import numpy as np
import pytest
import torch

from sparse_core import pareto as PA
from sparse_core.sparsefinder_fit import FitConfig, fit_artefact

HAVE_RAY = importlib.util.find_spec("ray") is not None
needs_ray = pytest.mark.skipif(
    not HAVE_RAY, reason="Ray is not installed (pip install 'sparsescope[ray]'): engine not tested"
)

TEXTS = [
    "The river ran past the old mill, and the miller watched it every morning.",
    "Children played near the water while their parents talked about the harvest.",
    "In winter the wheel froze, so the village ground its grain by hand.",
    "A travelling merchant brought salt, cloth and news from the capital city.",
    "He said the king would visit in spring, which nobody quite believed at all.",
    "When the king did come, the miller baked bread for the whole court.",
    "Years later the mill burned down, but the story of that visit stayed alive.",
    "Now a museum stands there, and visitors read about the miller's famous bread.",
    "Boats still pass the place where the wheel once turned in the cold water.",
]
METHODS = ["window", "bigbird", "sf-distance", "sf-kmeans"]
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # Ray Data's own

CFG = FitConfig(epochs=1, cluster_counts=(2, 4), kmeans_restarts=1, valid_fraction=0.25)


class Interrupted(Exception):
    pass


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from sparse_core.model import load_model
    from sparse_core.testing import write_tiny_checkpoint

    d = write_tiny_checkpoint(tmp_path_factory.mktemp("models") / "tiny-bert", "bert", seed=3)
    return d, load_model(d, device="cpu")


@pytest.fixture(scope="module")
def artefact(tiny):
    return fit_artefact(tiny[1], TEXTS, config=CFG)


@pytest.fixture(scope="module")
def local(tiny, artefact):
    """The local engine's sweep of TEXTS, which the Ray sweeps must equal."""
    return PA.sweep_corpus(tiny[1], TEXTS, artefact, methods=METHODS, progress=False)


def same_points(a: dict, b: dict) -> None:
    """pareto.json bodies equal to rounding (6 decimals): same points, params and frontiers."""
    assert {k: v for k, v in a.items() if k not in ("points", "gold_sparsity")} == {
        k: v for k, v in b.items() if k not in ("points", "gold_sparsity")
    }
    assert abs(a["gold_sparsity"] - b["gold_sparsity"]) <= 1e-6
    assert len(a["points"]) == len(b["points"]) > 20
    for p, q in zip(a["points"], b["points"], strict=True):
        assert (p["method"], p["params"]) == (q["method"], q["params"])
        for m in ("sparsity", "recall", "exact", "precision"):
            assert abs(p[m] - q[m]) <= 1e-6, (p, q, m)


@needs_ray
@pytest.mark.slow
def test_pareto_equals_local(ray_cluster, tiny, artefact, local, tmp_path):
    from sparse_core.ray_engine import SHARD_DIR, shard_size, sweep_corpus_ray

    path, model = tiny
    got = sweep_corpus_ray(model, TEXTS, artefact, methods=METHODS, model_path=path,
                           progress=False, checkpoint_dir=tmp_path)  # fmt: skip
    assert got.meta["shards"] == -(-len(TEXTS) // shard_size(len(TEXTS))) > 1
    same_points(got.to_json(), local.to_json())
    assert got.texts == local.texts == len(TEXTS) and got.meta["tokens"] == local.meta["tokens"]
    for name in local.per_head.sums:  # per head too (pareto-heads.npz)
        for m, v in local.per_head.sums[name].items():
            assert np.allclose(got.per_head.sums[name][m], v, rtol=0, atol=1e-9)
    assert not (tmp_path / SHARD_DIR).exists()  # checkpoints removed after a complete run


@needs_ray
@pytest.mark.slow
def test_pareto_equals_local_for_a_decoder(ray_cluster, tmp_path):
    from sparse_core.model import load_model
    from sparse_core.ray_engine import sweep_corpus_ray
    from sparse_core.testing import write_tiny_checkpoint

    path = write_tiny_checkpoint(tmp_path / "tiny-gpt2", "gpt2", seed=1)
    model = load_model(path, device="cpu")
    kw = dict(methods=["window", "strided"], progress=False)
    local = PA.sweep_corpus(model, TEXTS[:4], None, **kw)
    got = sweep_corpus_ray(model, TEXTS[:4], None, model_path=path, checkpoint_dir=tmp_path,
                           workers=1, **kw)  # fmt: skip
    assert got.causal is local.causal is True  # a decoder is always causal
    same_points(got.to_json(), local.to_json())


@needs_ray
@pytest.mark.slow
def test_pareto_resumes_after_interruption(ray_cluster, tiny, artefact, local, tmp_path):
    from sparse_core.ray_engine import SHARD_DIR, sweep_corpus_ray

    path, model = tiny
    kw = dict(methods=METHODS, model_path=path, progress=False, checkpoint_dir=tmp_path)
    seen: list[int] = []

    def stop(k: int) -> None:  # the driver dies right after the first shard is on disk
        seen.append(k)
        raise Interrupted

    with pytest.raises(Interrupted):  # one actor: one shard is all this run has to finish
        sweep_corpus_ray(model, TEXTS, artefact, on_shard=stop, workers=1, **kw)
    files = list((tmp_path / SHARD_DIR).glob("pareto-*/shard-*.safetensors"))
    assert len(files) == 1 and files[0].name == f"shard-{seen[0]:06d}.safetensors"
    again: list[int] = []  # one actor again (two actors: test_pareto_equals_local)
    got = sweep_corpus_ray(model, TEXTS, artefact, on_shard=again.append, workers=1, **kw)
    assert seen[0] not in again and len(again) == got.meta["shards"] - 1  # only the rest ran
    same_points(got.to_json(), local.to_json())
    # another run (other inputs: one shard) never picks up nor removes another run's folder
    (tmp_path / SHARD_DIR / "pareto-0000").mkdir(parents=True)
    other = sweep_corpus_ray(model, TEXTS[:2], artefact, **kw)
    assert other.texts == 2 and (tmp_path / SHARD_DIR / "pareto-0000").is_dir()


@needs_ray
@pytest.mark.slow
def test_fit_equals_local_and_passes_the_checks(ray_cluster, tiny, artefact, tmp_path):
    from sparse_core.ray_engine import SHARD_DIR, extract_ray
    from sparse_core.sparsefinder import load_artefact, save_artefact
    from sparse_core.sparsefinder_fit import extract

    path, model = tiny
    # one actor (two: the CLI's fit below, the pareto sweep above)
    data = extract_ray(model.model_id, TEXTS, 1.5, model_path=path, progress=False,
                       checkpoint_dir=tmp_path, workers=1)  # fmt: skip
    want = extract(model, TEXTS, 1.5)
    assert data.lengths == want.lengths and data.causal == want.causal
    for i in range(len(TEXTS)):  # the same batches of 2 inputs: the same graphs
        assert torch.equal(data.edges[i], want.edges[i])
        assert torch.allclose(data.queries[i], want.queries[i], rtol=0, atol=1e-6)
    art = fit_artefact(model, TEXTS, config=CFG, data=data)
    assert torch.allclose(art.W, artefact.W, rtol=0, atol=1e-5)
    assert torch.allclose(art.b, artefact.b, rtol=0, atol=1e-5)
    drop = ("created",)
    assert {k: v for k, v in art.meta.items() if k not in drop} == {
        k: v for k, v in artefact.meta.items() if k not in drop
    }
    st, _ = save_artefact(art, tmp_path / "out")
    back = load_artefact(st, model_id=model.model_id, alpha=1.5)  # the loader's checks
    back.check_model(model.config.num_layers, model.config.num_heads,
                     model.config.hidden_size // model.config.num_heads)  # fmt: skip
    assert not (tmp_path / SHARD_DIR).exists()
    with pytest.raises(Exception, match="extracted inputs"):
        fit_artefact(model, TEXTS[:3], config=CFG, data=data)


def corpus_file(tmp_path):
    f = tmp_path / "corpus.txt"
    f.write_text("\n\n".join(TEXTS) + "\n", encoding="utf-8")
    return f


@needs_ray
@pytest.mark.slow
def test_cli_pareto_and_fit_on_ray(ray_cluster, tiny, tmp_path, monkeypatch, capsys):
    from sparsescope.cli import main

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    path, _ = tiny
    f = corpus_file(tmp_path)
    common = ["--corpus", str(f), "--model", str(path), "--max-tokens", "24"]
    outs = {}
    for engine in ("local", "ray"):
        out = tmp_path / engine
        assert main(["fit", *common, "--device", "cpu", "--epochs", "1", "--limit", "8",
                     "--out", str(out), "--engine", engine]) == 0  # fmt: skip
        assert main(["pareto", *common, "--min-tokens", "4", "--methods", "window,sf-distance",
                     "--artefact", str(out / "sparsefinder-tiny-bert-a1.5.json"),
                     "--workers", "1", "--out", str(out), "--engine", engine]) == 0  # fmt: skip
        outs[engine] = out
        assert f"{engine} engine" in capsys.readouterr().out
    arts = [json.loads((o / "sparsefinder-tiny-bert-a1.5.json").read_text()) for o in outs.values()]
    assert arts[0] == arts[1]  # the fits' metadata (figures, sizes, losses) agree
    bodies = [json.loads((o / "pareto.json").read_text()) for o in outs.values()]
    assert bodies[0]["texts"] >= 2
    same_points(bodies[1], bodies[0])
    run = json.loads((outs["ray"] / "pareto-run.json").read_text())
    assert run["engine"] == "ray" and run["shards"] >= 1


def test_missing_ray_is_one_line_exit_2(monkeypatch, tmp_path, capsys):
    from sparse_core.ray_engine import RayMissingError, require_ray
    from sparsescope.cli import main

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    monkeypatch.setitem(sys.modules, "ray.data", None)
    with pytest.raises(RayMissingError, match=r"pip install 'sparsescope\[ray\]'"):
        require_ray()
    f = corpus_file(tmp_path)
    for cmd in ("pareto", "fit"):
        assert main([cmd, "--corpus", str(f), "--engine", "ray", "--out", str(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--engine ray needs Ray Data" in err
