"""``sparsescope adapt`` end to end on a tiny checkpoint: the out-dir works with ``analyze``,
``fit`` and ``pareto --task``; bad input is one line on stderr, exit 2, nothing written."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from sparse_core.testing import write_tiny_checkpoint
from sparsescope.cli import main

ARTICLE = (
    " = {title} = \n\n The {k} river ran past the old mill , and the miller watched it every "
    "morning while children played near the water . In winter the wheel froze , so the village "
    "ground its grain by hand , and a merchant brought salt , cloth and news from the capital . "
    "He said the king would visit in spring , which nobody quite believed . \n\n"
)


@pytest.fixture(autouse=True)
def one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("c") / "wiki.txt"
    p.write_text("".join(ARTICLE.format(title=f"Mill {k}", k=k) * 1 for k in range(40)))
    return p


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    return write_tiny_checkpoint(tmp_path_factory.mktemp("m") / "tiny-bert", "bert")


@pytest.fixture(scope="module")
def adapted(tiny_dir, corpus, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("a") / "adapted"
    torch.set_num_threads(1)
    code = main(["adapt", "--model", str(tiny_dir), "--corpus", str(corpus), "--steps", "3",
                 "--seq-len", "32", "--batch", "4", "--out", str(out), "--device", "cpu",
                 "--quiet"])  # fmt: skip
    assert code == 0
    return out


def adapt(tiny_dir, corpus, out, *extra: str) -> int:
    return main(
        [
            "adapt",
            "--model",
            str(tiny_dir),
            "--corpus",
            str(corpus),
            "--out",
            str(out),
            "--device",
            "cpu",
            "--quiet",
            "--seq-len",
            "32",
            "--batch",
            "4",
            *extra,
        ]
    )


def test_adapt_prints_and_writes(adapted: Path) -> None:
    meta = json.loads((adapted / "adapt.json").read_text())
    assert meta["status"] == "done" and meta["objective"] == "masked-lm"
    assert meta["corpus"]["eval_documents"] == 8 and meta["corpus"]["train_documents"] == 32
    assert (adapted / "split" / "eval.txt").read_text().count(" = Mill ") == 8
    log = [json.loads(x) for x in (adapted / "adapt-log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2, 3]
    assert {"loss", "lr", "gold_sparsity", "alpha"} <= set(log[0])


def test_analyze_and_evaluate_accept_the_out_dir(adapted: Path, corpus, capsys) -> None:
    assert main(["analyze", "--model", str(adapted), "--json", "The miller baked bread."]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["model"] == "adapted" and report["alpha"] == 1.5
    assert main(["adapt", "--evaluate", "--model", str(adapted), "--corpus", str(corpus),
                 "--seq-len", "32", "--gold-texts", "2", "--device", "cpu"]) == 0  # fmt: skip
    res = json.loads(capsys.readouterr().out)
    assert res["alpha"] == 1.5 and res["alpha_trained"] is True
    assert math.isfinite(res["loss"]["loss"]) and res["loss"]["tokens"] > 0
    assert 0 < res["gold_n128"]["gold_sparsity"] < 1


def test_fit_and_pareto_task_accept_the_out_dir(adapted: Path, corpus, tmp_path, capsys) -> None:
    assert (
        main(
            [
                "fit",
                "--model",
                str(adapted),
                "--corpus",
                str(corpus),
                "--limit",
                "6",
                "--max-tokens",
                "48",
                "--epochs",
                "1",
                "--out",
                str(tmp_path / "art"),
            ]
        )
        == 0
    )
    art = next((tmp_path / "art").glob("*.safetensors"))
    capsys.readouterr()
    code = main(["pareto", "--model", str(adapted), "--corpus", str(corpus), "--artefact",
                 str(art), "--limit", "3", "--max-tokens", "48", "--min-tokens", "8",
                 "--methods", "window,sf-distance", "--task", "--task-texts", "2",
                 "--workers", "1", "--out", str(tmp_path / "p")])  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    assert "masked-LM loss with every head restricted" in printed
    body = json.loads((tmp_path / "p" / "pareto.json").read_text())
    task = body["task"]
    assert task["objective"] == "masked-lm" and task["texts"] == 2 and task["tokens"] > 0
    front = {k for f in body["frontiers"].values() for k in f}
    for k, pt in enumerate(body["points"]):
        assert (pt["task_loss"] is not None) == (k in front)
    losses = [pt["task_loss"] for pt in body["points"] if pt["task_loss"] is not None]
    assert all(math.isfinite(v) and v > 0 for v in losses)
    assert math.isfinite(task["loss_full"]) and task["perplexity_full"] > 1
    html = (tmp_path / "p" / "pareto.html").read_text()
    assert "masked-LM loss" in html


def test_restricted_loss_is_sparse_consistent(adapted: Path) -> None:
    """definitions §9 on one masked input: M = G gives the unrestricted loss (Proposition 1), the
    diagonal alone does not."""
    from sparse_core.adapt import load_lm
    from sparse_core.adapt.evaluate import masked_input, restricted_loss, run_ids

    lm = load_lm(str(adapted), "cpu")
    enc = lm.sparse.encode("The miller watched the river while the children played by the mill.")
    batch = masked_input(lm, enc.ids, seed=0, index=0)
    out = run_ids(lm.sparse, batch.ids[0].tolist(), enc.special, 1.5)
    full, k = restricted_loss(lm, batch, 1.5, None)
    same, _ = restricted_loss(lm, batch, 1.5, out.graph)
    assert k > 0 and same == pytest.approx(full, abs=1e-5)
    diag = torch.eye(out.n, dtype=torch.bool).expand_as(out.graph)
    assert restricted_loss(lm, batch, 1.5, diag)[0] != pytest.approx(full, abs=1e-3)
    again = run_ids(lm.sparse, enc.ids, enc.special, 1.5)  # unmasked ids: run's recordings
    ref = lm.sparse.run("The miller watched the river while the children played by the mill.")
    assert torch.equal(again.probs, ref.probs) and torch.equal(again.queries, ref.queries)


def test_pareto_task_needs_a_head(tiny_dir, corpus, tmp_path, capsys) -> None:
    code = main(["pareto", "--model", str(tiny_dir), "--corpus", str(corpus), "--limit", "2",
                 "--max-tokens", "32", "--task", "--out", str(tmp_path / "p")])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert "needs a model with an LM or masked-LM head" in err and err.count("\n") == 1
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize(
    "extra,message",
    [
        (("--steps", "0"), "--steps must be an integer >= 1"),
        (("--steps", "2", "--alpha", "2.5"), "--alpha must be in (1, 2] or 'learned'"),
        (("--steps", "2", "--alpha", "1"), "--alpha must be in (1, 2]"),
        (("--steps", "2", "--alpha", "sparse"), "--alpha must be a number in (1, 2]"),
        (("--steps", "2", "--batch", "100000"), "at least --batch (100000) are needed"),
        (("--steps", "2", "--seq-len", "4"), "--seq-len must be >= 8"),
        (("--steps", "2", "--resume"), "holds no adapt run to resume"),
        (("--steps", "2", "--eval-every", "1"), "--eval-every must be 0"),
        (("--alpha", "1.5"), "--steps is required"),
    ],
)
def test_bad_input_is_one_line(tiny_dir, corpus, tmp_path, capsys, extra, message) -> None:
    out = tmp_path / "o"
    assert adapt(tiny_dir, corpus, out, *extra) == 2
    err = capsys.readouterr().err
    assert err.startswith("sparsescope adapt: error: ") and message in err, err
    assert err.count("\n") == 1
    assert not out.exists()  # nothing written


def test_bad_corpus_and_out_dir(tiny_dir, corpus, tmp_path, capsys) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("\n \n")
    assert adapt(tiny_dir, empty, tmp_path / "o1", "--steps", "2") == 2
    assert "holds no text" in capsys.readouterr().err
    small = tmp_path / "small.txt"
    small.write_text("A short text . \n\nAnother one .\n")
    assert adapt(tiny_dir, small, tmp_path / "o2", "--steps", "2") == 2
    assert "sequence(s) of 32 tokens" in capsys.readouterr().err
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("keep me")
    assert adapt(tiny_dir, corpus, busy, "--steps", "2") == 2
    assert "holds something else" in capsys.readouterr().err
    assert [p.name for p in busy.iterdir()] == ["notes.txt"]
    assert adapt(tiny_dir, tmp_path / "missing.txt", tmp_path / "o3", "--steps", "2") == 2
    assert "does not exist" in capsys.readouterr().err


def test_not_enough_memory(tiny_dir, corpus, tmp_path, monkeypatch, capsys) -> None:
    import sparse_core.adapt.run as R

    monkeypatch.setattr(R, "available_memory", lambda device: 1 << 20)  # 1 MiB free
    assert adapt(tiny_dir, corpus, tmp_path / "o", "--steps", "2") == 2
    err = capsys.readouterr().err
    assert "training needs about" in err and "GiB is free" in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_a_model_without_input_embeddings(tiny_dir, corpus, tmp_path, monkeypatch, capsys):
    from transformers import BertForMaskedLM

    monkeypatch.setattr(BertForMaskedLM, "get_input_embeddings", lambda self: None)
    assert adapt(tiny_dir, corpus, tmp_path / "o", "--steps", "2") == 2
    err = capsys.readouterr().err
    assert "no input embeddings to tie" in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()
