"""``sparsescope pareto --task sts``: the model's own task (STS Spearman) with every head restricted
to each frontier point's graph, end to end on a tiny checkpoint; bad input is one line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from sparse_core import card
from sparse_core.model import load_model
from sparse_core.testing import write_tiny_checkpoint
from sparsescope.cli import main

PAIRS = [
    (4.6, "The old miller watched the river run past the mill every single morning.",
     "Every morning the old miller watched the river running past his mill."),
    (0.4, "A merchant brought salt and cloth and news from the distant capital city.",
     "The children played near the cold water while their parents talked for hours."),
    (3.1, "In the winter the wheel froze so the whole village ground its grain by hand.",
     "When the wheel froze in winter the village had to grind the grain by hand."),
    (1.2, "He said the king would visit in the spring, which nobody quite believed.",
     "The river froze over in the winter and the mill wheel stopped turning."),
    (2.5, "When the king did come the miller baked fresh bread for the whole court.",
     "The miller baked bread for the king and his court when they finally came."),
    (0.8, "Stocks fell sharply on Monday as investors worried about rising rates.",
     "The village ground its grain by hand because the wheel of the mill was frozen."),
]  # fmt: skip


@pytest.fixture(autouse=True)
def one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    return write_tiny_checkpoint(tmp_path_factory.mktemp("m") / "tiny-bert", "bert")


@pytest.fixture(scope="module")
def sts_file(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("s") / "sts-toy.tsv"
    p.write_text("".join(f"{g}\t{a}\t{b}\n" for g, a, b in PAIRS))
    return p


def test_pareto_task_sts_end_to_end(tiny_dir, sts_file, tmp_path, capsys) -> None:
    out = tmp_path / "p"
    code = main(["pareto", "--model", str(tiny_dir), "--task", "sts", "--sts", str(sts_file),
                 "--task-texts", "6", "--min-tokens", "8", "--methods", "window,topk",
                 "--workers", "1", "--out", str(out)])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert "STS Spearman with every head restricted" in printed
    body = json.loads((out / "pareto.json").read_text())
    task = body["task"]
    assert task["objective"] == "sts" and task["sets"][0]["pairs"] == 6
    assert task["sentences"] == 12 and body["texts"] == 12  # the sweep ran on the sentences
    # the unrestricted figure is the card's measurement of the same model and pairs
    model = load_model(str(tiny_dir), device="cpu")
    want = card.sts_spearman(model, [card.read_sts(sts_file)], 1.5)["spearman"]
    assert task["spearman_full"] == pytest.approx(want, abs=1e-6)
    front = {k for f in body["frontiers"].values() for k in f}
    for k, pt in enumerate(body["points"]):
        assert (pt["task_spearman"] is not None) == (k in front)
        if pt["task_spearman"] is not None and pt["recall"] == 1.0:
            # every pair of the graph kept in every head and text: the unrestricted model
            assert pt["task_spearman"] == pytest.approx(task["spearman_full"], abs=1e-6)
    assert "STS Spearman" in (out / "pareto.html").read_text()
    # --task-sparsity S: only the frontier points at least that sparse are measured
    capsys.readouterr()
    assert (
        main(
            [
                "pareto",
                "--model",
                str(tiny_dir),
                "--task",
                "sts",
                "--sts",
                str(sts_file),
                "--task-texts",
                "6",
                "--min-tokens",
                "8",
                "--methods",
                "window,topk",
                "--task-sparsity",
                "0.5",
                "--workers",
                "1",
                "--out",
                str(tmp_path / "q"),
            ]
        )
        == 0
    )
    again = json.loads((tmp_path / "q" / "pareto.json").read_text())
    for pt, was in zip(again["points"], body["points"], strict=True):
        want = was["task_spearman"] if pt["sparsity"] >= 0.5 else None
        assert pt["task_spearman"] == (None if want is None else pytest.approx(want, abs=1e-9))


@pytest.mark.parametrize(
    "extra,message",
    [
        (("--task", "sts"), "--task sts needs --sts FILE"),
        (("--task", "sts", "--sts", "{sts}", "--corpus", "{sts}"), "drop --corpus"),
        (("--sts", "{sts}"), "--sts goes with --task sts"),
        (("--task", "sts", "--sts", "{missing}"), "does not exist"),
        ((), "--corpus PATH [PATH ...] is required"),
        (
            ("--task", "sts", "--sts", "{sts}", "--task-sparsity", "1.5"),
            "--task-sparsity must be in",
        ),
    ],
)
def test_pareto_task_sts_bad_input(tiny_dir, sts_file, tmp_path, capsys, extra, message) -> None:
    args = [a.format(sts=sts_file, missing=tmp_path / "nope.tsv") for a in extra]
    code = main(["pareto", "--model", str(tiny_dir), *args, "--out", str(tmp_path / "p")])
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "p").exists()
