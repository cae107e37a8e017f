"""Shipped adapted models as deltas over their base (sparse_core.adapt.delta writes them,
sparse_core.shipped rebuilds them), tiny models."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from sparse_core.adapt import AdaptConfig, adapt, load_lm
from sparse_core.adapt.delta import save_delta
from sparse_core.errors import ModelLoadError
from sparse_core.shipped import materialize, read_meta
from sparse_core.testing import write_tiny_checkpoint

TOKENIZER = ("tokenizer.json", "vocab.txt", "tokenizer_config.json")
ARTICLE = (
    " = Mill {k} = \n\n The {k} river ran past the old mill , and the miller watched it every "
    "morning while children played near the water . In winter the wheel froze , so the village "
    "ground its grain by hand , and a merchant brought salt , cloth and news . \n\n"
)


@pytest.fixture(scope="module")
def adapted(tmp_path_factory):
    torch.set_num_threads(1)
    d = tmp_path_factory.mktemp("delta")
    corpus = d / "wiki.txt"
    corpus.write_text("".join(ARTICLE.format(k=k) for k in range(30)))
    base = write_tiny_checkpoint(d / "tiny-bert", "bert")
    cfg = AdaptConfig(alpha=1.25, steps=2, seq_len=32, batch=4, lr=1e-3, train="attention")
    adapt(str(base), corpus, d / "out", cfg, device="cpu", progress=False)
    return base, d / "out"


def test_delta_holds_only_what_training_changed(adapted, tmp_path, monkeypatch) -> None:
    base, out = adapted
    info = save_delta(out, tmp_path / "d.safetensors", str(base))
    from safetensors import safe_open

    with safe_open(str(tmp_path / "d.safetensors"), "pt") as fh:
        keys = list(fh.keys())
        deltas = [k for k in keys if k.startswith("delta.")]
        assert all(fh.get_tensor(k).dtype == torch.float16 for k in deltas)
    assert info["changed"] == len(deltas) and info["unchanged"] > 0
    assert all(("attention" in k or "LayerNorm" in k) for k in deltas)  # --train attention
    assert not any("intermediate" in k or "word_embeddings" in k for k in keys)
    assert all(k.startswith("value.cls.") for k in keys if k.startswith("value."))  # new head
    meta = read_meta(tmp_path / "d.safetensors")
    assert meta["base"] == str(base) and meta["config"]["entmax_alpha"] == 1.25

    monkeypatch.setenv("SPARSESCOPE_CACHE", str(tmp_path / "cache"))
    built = materialize("test/tiny-adapted", base, TOKENIZER, tmp_path / "d.safetensors")
    assert (
        materialize("test/tiny-adapted", base, TOKENIZER, tmp_path / "d.safetensors") == built
    )  # cached
    assert json.loads((built / "config.json").read_text())["entmax_alpha"] == 1.25
    assert any((built / f).is_file() for f in TOKENIZER)
    want = load_lm(str(out), "cpu").lm.state_dict()
    got = load_lm(str(built), "cpu").lm.state_dict()
    for k, v in want.items():
        err = float((got[k] - v).abs().max())
        assert err <= 1e-3 * float(v.abs().max()) + 1e-6, k  # float16 deltas only
    from sparse_core import load_model

    m = load_model(built, device="cpu")
    assert m.default_alpha == 1.25 and m.alpha_trained


def test_a_delta_over_other_base_weights_is_refused(adapted, tmp_path, monkeypatch) -> None:
    base, out = adapted
    save_delta(out, tmp_path / "d.safetensors", str(base))
    monkeypatch.setenv("SPARSESCOPE_CACHE", str(tmp_path / "cache"))
    from safetensors.torch import load_file, save_file

    w = load_file(str(base / "model.safetensors"))
    name = next(iter(w))
    w[name] = w[name] + 1
    save_file(w, str(base / "model.safetensors"))
    try:
        with pytest.raises(ModelLoadError, match="installed ones differ"):
            materialize("test/tiny-adapted", base, TOKENIZER, tmp_path / "d.safetensors")
    finally:
        w[name] = w[name] - 1
        save_file(w, str(base / "model.safetensors"))


def test_missing_delta_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="is not installed"):
        materialize("test/none", tmp_path, TOKENIZER, tmp_path / "missing.safetensors")
