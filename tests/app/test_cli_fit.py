"""``sparsescope fit``: end to end on the tiny model saved as a checkpoint directory."""

from __future__ import annotations

import json
import shutil

import pytest

from sparsescope.cli import main

PARAGRAPHS = [
    "The river ran past the old mill, and the miller watched it every morning.",
    "Children played near the water while their parents talked about the harvest.",
    "In winter the wheel froze, so the village ground its grain by hand.",
    "A travelling merchant brought salt, cloth and news from the capital.",
    "He said the king would visit in spring, which nobody quite believed.",
    "When the king did come, the miller baked bread for the whole court.",
    "Years later the mill burned down, but the story of that visit stayed.",
    "Now a museum stands there, and visitors read about the miller's bread.",
]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory, tiny_model):
    """The tiny random model written as a BERT checkpoint directory (config, weights, tokenizer)."""
    from safetensors.torch import save_file

    from sparse_core.model import default_model_path

    d = tmp_path_factory.mktemp("models") / "tiny-bert"
    d.mkdir()
    c = tiny_model.config
    cfg = {
        "model_type": "bert",
        "vocab_size": c.vocab_size,
        "hidden_size": c.hidden_size,
        "num_hidden_layers": c.num_layers,
        "num_attention_heads": c.num_heads,
        "intermediate_size": c.intermediate_size,
        "max_position_embeddings": c.max_positions,
        "type_vocab_size": c.type_vocab_size,
        "layer_norm_eps": c.layer_norm_eps,
        "hidden_act": c.hidden_act,
        "pad_token_id": c.pad_token_id,
    }
    (d / "config.json").write_text(json.dumps(cfg))
    state = {k: v.contiguous() for k, v in tiny_model.net.state_dict().items()}
    save_file(state, str(d / "model.safetensors"))
    shutil.copy(default_model_path() / "tokenizer.json", d / "tokenizer.json")
    return d


@pytest.fixture()
def corpus(tmp_path):
    p = tmp_path / "corpus.txt"
    p.write_text("\n\n".join(PARAGRAPHS) + "\n", encoding="utf-8")
    return p


def fit(tiny_dir, corpus, out, *extra: str) -> int:
    return main(
        [
            "fit",
            "--corpus",
            str(corpus),
            "--model",
            str(tiny_dir),
            "--device",
            "cpu",
            "--max-tokens",
            "24",
            "--out",
            str(out),
            *extra,
        ]
    )


def test_fit_writes_artefact_and_prints_figures(tiny_dir, corpus, tmp_path, capsys):
    from sparse_core.sparsefinder import load_artefact

    assert fit(tiny_dir, corpus, tmp_path / "out", "--limit", "6", "--seed", "1") == 0
    printed = capsys.readouterr().out
    assert "validation loss:" in printed
    assert "sf-distance t=" in printed and "recall" in printed and "sparsity" in printed
    st = tmp_path / "out" / "sparsefinder-tiny-bert-a1.5.safetensors"
    assert st.is_file() and st.with_suffix(".json").is_file()
    art = load_artefact(st, model_id="tiny-bert", alpha=1.5)
    m = art.meta
    assert m["sizes"]["inputs"] == 6 and m["limit"] == 6 and m["max_tokens"] == 24
    (c,) = m["corpus"]
    assert c["name"] == f"{corpus.parent.name}/corpus.txt" and c["format"] == "plain"
    assert c["inputs_used"] == 6 and c["inputs_total"] > 6
    # the held-out rule: documents from first_unseen_document on were not read by the fit
    assert 0 < c["documents_seen"] < len(PARAGRAPHS)
    assert c["first_unseen_document"]["index"] == c["documents_seen"]
    assert m["seed"] == 1 and m["validation"]["loss"] >= 0


def test_fit_is_byte_deterministic_under_seed(tiny_dir, corpus, tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    args = ("--limit", "5", "--epochs", "2", "--seed", "7")
    assert fit(tiny_dir, corpus, tmp_path / "a", *args) == 0
    assert fit(tiny_dir, corpus, tmp_path / "b", *args) == 0
    for ext in (".safetensors", ".json"):
        name = "sparsefinder-tiny-bert-a1.5" + ext
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


@pytest.mark.parametrize(
    "extra,message",
    [
        (("--alpha", "3"), "alpha must be in [1, 2]"),
        (("--valid-fraction", "1"), "--valid-fraction must be in [0, 1)"),
        (("--max-tokens", "4"), "--max-tokens must be in [8, 512]"),
        (("--limit", "0"), "--limit must be >= 1"),
        (("--limit", "1"), "need at least 2"),
    ],
)
def test_fit_user_errors_are_one_line(tiny_dir, corpus, tmp_path, capsys, extra, message):
    assert fit(tiny_dir, corpus, tmp_path / "o", *extra) == 2
    err = capsys.readouterr().err
    assert err.startswith("sparsescope fit: error: ") and message in err
    assert err.count("\n") == 1


def test_fit_missing_corpus(tiny_dir, tmp_path, capsys):
    assert fit(tiny_dir, tmp_path / "nope.txt", tmp_path / "o") == 2
    assert "nope.txt" in capsys.readouterr().err


@pytest.mark.parametrize("method", ["indexer", "seer"])
def test_fit_method_trains_a_selector_beside_the_artefact(tiny_dir, corpus, tmp_path, capsys,
                                                          method):  # fmt: skip
    """``fit --method indexer|seer`` (definitions §12): the selector's files, named like the
    artefact, its held-out KL printed and its training KL falling, byte-deterministic under
    the seed, attached to the Sparsefinder artefact fitted into the same folder."""
    from sparse_core.selectors import load_selector
    from sparse_core.sparsefinder import load_artefact

    args = ("--limit", "6", "--seed", "2", "--epochs", "3", "--lr", "0.01")
    assert fit(tiny_dir, corpus, tmp_path / "a", "--method", method, *args) == 0
    printed = capsys.readouterr().out
    assert f"fitted the {method} for tiny-bert" in printed and "held-out KL:" in printed
    st = tmp_path / "a" / f"{method}-tiny-bert-a1.5.safetensors"
    sel = load_selector(st)
    v = sel.meta["validation"]
    hist = sel.meta["training"]["kl_per_epoch"]
    assert sel.kind == method and v["kl"] >= 0 and hist[-1] < hist[0]
    assert sel.meta["sizes"]["inputs"] == 6 and sel.meta["training"]["epochs"] == 3
    # the same seed: the same bytes (the date fixed by SOURCE_DATE_EPOCH)
    import os

    os.environ["SOURCE_DATE_EPOCH"] = "1700000000"
    try:
        for d in ("b", "c"):
            assert fit(tiny_dir, corpus, tmp_path / d, "--method", method, *args) == 0
    finally:
        del os.environ["SOURCE_DATE_EPOCH"]
    for ext in (".safetensors", ".json"):
        name = f"{method}-tiny-bert-a1.5{ext}"
        assert (tmp_path / "b" / name).read_bytes() == (tmp_path / "c" / name).read_bytes()
    assert fit(tiny_dir, corpus, tmp_path / "a", "--limit", "6", "--epochs", "1") == 0
    art = load_artefact(tmp_path / "a", model_id="tiny-bert", alpha=1.5)
    assert set(art.learned) == {method}


@pytest.mark.parametrize(
    "extra,message",
    [
        (("--method", "indexer", "--index-heads", "0"), "--index-heads must be in [1, 64]"),
        (("--method", "seer", "--gate-dim", "100"), "--gate-dim must be in [1, 64]"),
        (("--method", "seer", "--lr", "0"), "--lr must be in (0, 1]"),
        (("--method", "indexer", "--engine", "ray"), "runs on the local engine only"),
    ],
)
def test_fit_method_user_errors_are_one_line(tiny_dir, corpus, tmp_path, capsys, extra, message):
    assert fit(tiny_dir, corpus, tmp_path / "o", *extra) == 2
    err = capsys.readouterr().err
    assert err.startswith("sparsescope fit: error: ") and message in err
