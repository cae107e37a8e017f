"""``sparse_core.adapt``: training with entmax attention on tiny random models (definitions §7).

Exact resume (an interrupted run continued with --resume gives the same losses, bit for bit, as
one never interrupted), the out-dir's model loads with its α as the default, learned α moves and
is recorded per (layer, head), every architecture trains (masked LM / next-token with a tied
head where the checkpoint has none).
"""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

import pytest
import torch

from sparse_core.adapt import AdaptConfig, Interrupted, adapt, load_lm, store
from sparse_core.adapt.data import batch_indices, mask_tokens, split_corpus, token_sequences
from sparse_core.testing import TINY_ARCHITECTURES, write_tiny_checkpoint

WIKI = Path(__file__).resolve().parents[3] / "shared" / "data" / "wikitext-2" / "valid.txt"


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny matrices: one thread (two spin-wait against each other on a loaded machine)."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """A WikiText file of 15 articles (the shared WikiText-2 file's first ones, or synthetic)."""
    p = tmp_path_factory.mktemp("corpus") / "wiki.txt"
    if WIKI.is_file():
        lines, titles = [], 0
        for line in WIKI.read_text(encoding="utf-8").splitlines():
            if line.startswith(" = ") and not line.startswith(" = = "):
                titles += 1
                if titles > 15:
                    break
            lines.append(line)
        p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    else:  # pragma: no cover - the shared data is part of the workspace
        body = " The {k} river ran past mill {k} . \n"
        arts = [f" = Article {k} = \n\n" + body.format(k=k) * 20 for k in range(15)]
        p.write_text("".join(arts), encoding="utf-8")
    return p


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    return write_tiny_checkpoint(tmp_path_factory.mktemp("m") / "tiny-bert", "bert")


def cfg(**kw) -> AdaptConfig:
    base = dict(alpha=1.5, steps=6, seq_len=32, batch=4, lr=1e-3, warmup=0.2, seed=3)
    base.update(kw)
    return AdaptConfig(**base)


def losses(out: Path) -> list[float]:
    return [r["loss"] for r in store.read_log(out)]


def test_split_by_article_is_deterministic(corpus: Path, tmp_path: Path) -> None:
    s = split_corpus(corpus, 5, tmp_path / "split")
    assert s.eval_indices == [4, 9, 14]
    assert len(s.train) == 12 and len(s.eval) == 3
    again = split_corpus(tmp_path / "split" / "eval.txt", 0)
    assert [d.title for d in again.train] == [d.title for d in s.eval]
    train_titles = [d.title for d in split_corpus(tmp_path / "split" / "train.txt", 0).train]
    assert train_titles == [d.title for d in s.train]


def test_masking_follows_the_bert_recipe() -> None:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1000, 2000, (64, 130))
    special = torch.zeros(130, dtype=torch.bool)
    special[[0, -1]] = True
    b = mask_tokens(ids, special, 103, 30522, g)
    chosen = b.labels != -100
    assert not chosen[:, [0, -1]].any() and chosen.any(dim=1).all()
    share = chosen.float().mean().item() * 130 / 128
    assert 0.13 < share < 0.17
    masked = (b.ids == 103) & chosen
    kept = (b.ids == ids) & chosen
    assert 0.75 < masked.sum() / chosen.sum() < 0.85
    assert 0.06 < kept.sum() / chosen.sum() < 0.15  # 10 % kept + random draws equal to the id
    assert torch.equal(b.ids[~chosen], ids[~chosen]) and torch.equal(b.labels[chosen], ids[chosen])


def test_batch_order_is_a_function_of_the_step() -> None:
    seen = torch.cat([batch_indices(10, 4, s, seed=1) for s in range(5)])
    assert sorted(seen[:10].tolist()) == list(range(10))  # the first epoch is a permutation
    assert torch.equal(batch_indices(10, 4, 3, seed=1), batch_indices(10, 4, 3, seed=1))
    assert not torch.equal(batch_indices(10, 4, 0, seed=1), batch_indices(10, 4, 0, seed=2))


def test_resume_continues_exactly(tiny_dir: Path, corpus: Path, tmp_path: Path) -> None:
    full = tmp_path / "full"
    adapt(str(tiny_dir), corpus, full, cfg(), device="cpu", progress=False)
    part = tmp_path / "part"

    def interrupt(rec):
        if rec["step"] == 3:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C: finish the step, checkpoint, stop

    with pytest.raises(Interrupted) as info:
        adapt(str(tiny_dir), corpus, part, cfg(), device="cpu", progress=False, on_step=interrupt)
    assert info.value.step == 3
    ck = store.checkpoint_dir(part)
    assert ck is not None and store.load_trainer_state(ck)["done"] == 3
    from sparse_core import load_model

    assert load_model(ck, device="cpu").default_alpha == 1.5  # the checkpoint loads
    with pytest.raises(Exception, match="already holds an adapt run"):
        adapt(str(tiny_dir), corpus, part, cfg(), device="cpu", progress=False)
    with pytest.raises(Exception, match="steps = 6, not 7"):
        adapt(str(tiny_dir), corpus, part, cfg(steps=7), resume=True, progress=False)
    meta = adapt(None, corpus, part, cfg(), resume=True, device="cpu", progress=False)
    assert losses(part) == losses(full)  # bit for bit
    assert [r["step"] for r in store.read_log(part)] == list(range(1, 7))
    assert meta["held_out"] == store.read_json(full / store.MARKER)["held_out"]
    a = load_lm(str(full), "cpu").lm.state_dict()
    b = load_lm(str(part), "cpu").lm.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert store.checkpoint_dir(part) is None  # removed once the run finished
    with pytest.raises(Exception, match="already finished"):
        adapt(None, corpus, part, cfg(), resume=True, progress=False)


def test_output_dir_loads_with_its_alpha(tiny_dir: Path, corpus: Path, tmp_path: Path) -> None:
    from sparse_core import load_model

    out = tmp_path / "a"
    meta = adapt(str(tiny_dir), corpus, out, cfg(alpha=1.25, steps=3), device="cpu",
                 progress=False)  # fmt: skip
    assert meta["status"] == "done" and meta["held_out"]["loss"] > 0
    cfg_json = json.loads((out / "config.json").read_text())
    assert cfg_json["entmax_alpha"] == 1.25
    html = (out / "loss.html").read_text()
    assert "Plotly.newPlot" in html and not re.search(r"<script[^>]*src=", html)  # inlined
    m = load_model(out, device="cpu")
    assert m.default_alpha == 1.25 and m.alpha_trained
    run = m.run("The river ran past the mill.")
    assert run.alpha == 1.25
    assert m.run("The river ran past the mill.", alpha=1.5).alpha == 1.5  # explicit wins
    before = load_lm(str(tiny_dir), "cpu")
    after = load_lm(str(out), "cpu")
    assert before.new_head and not after.new_head
    assert not torch.equal(
        before.lm.base_model.encoder.layer[0].attention.self.query.weight,
        after.lm.base_model.encoder.layer[0].attention.self.query.weight,
    )


def test_learned_alpha_moves_and_is_recorded(tiny_dir: Path, corpus: Path, tmp_path: Path) -> None:
    from sparse_core import load_model

    out = tmp_path / "l"
    meta = adapt(str(tiny_dir), corpus, out, cfg(alpha=None, steps=4, alpha_lr=0.1),
                 device="cpu", progress=False)  # fmt: skip
    table = torch.tensor(meta["alpha"], dtype=torch.float64)
    assert table.shape == (2, 4)
    assert ((table > 1) & (table < 2)).all() and (table != 1.5).all()
    assert len(set(table.flatten().tolist())) > 1
    log = store.read_log(out)
    assert log[0]["alpha"]["std"] > 0  # after one step the heads differ
    m = load_model(out, device="cpu")
    assert isinstance(m.default_alpha, torch.Tensor) and m.alpha_trained
    assert torch.allclose(m.default_alpha.double(), table, atol=1e-6)
    run = m.run("The river ran past the mill.")
    assert torch.equal(run.alpha, m.default_alpha)
    assert torch.equal(run.alpha_table(), m.alpha_table())
    # every head at its own α: head (l, h)'s P is entmax at α[l, h] of its own scores
    from sparse_core.entmax import entmax

    s = run.scores()  # (L, H, n, n)
    for li in range(2):
        for h in range(4):
            want = entmax(s[li, h], float(m.default_alpha[li, h]))
            torch.testing.assert_close(run.probs[li, h], want, atol=2e-6, rtol=0)
    fixed = m.run("The river ran past the mill.", alpha=1.5)
    assert fixed.alpha_table().eq(1.5).all() and not torch.equal(fixed.probs, run.probs)


@pytest.mark.parametrize("arch", TINY_ARCHITECTURES)
def test_every_architecture_trains(arch: str, corpus: Path, tmp_path: Path) -> None:
    d = write_tiny_checkpoint(tmp_path / arch, arch)
    lm = load_lm(str(d), "cpu")
    assert lm.objective == ("causal-lm" if lm.decoder else "masked-lm")
    emb = lm.lm.get_input_embeddings().weight
    assert lm.lm.get_output_embeddings().weight is emb  # tied to the input embeddings
    out = tmp_path / f"{arch}-out"
    meta = adapt(str(d), corpus, out, cfg(steps=2, seq_len=24), device="cpu", progress=False)
    assert all(torch.isfinite(torch.tensor(r["loss"])) for r in store.read_log(out))
    assert 0 < store.read_log(out)[0]["gold_sparsity"] < 1
    assert meta["held_out"]["loss"] > 0
    from sparse_core import load_model

    assert load_model(out, device="cpu").default_alpha == 1.5


def test_head_only_on_a_softmax_body(tiny_dir: Path, corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "h"
    adapt(str(tiny_dir), corpus, out, cfg(alpha=1.0, train="head", steps=2), device="cpu",
          progress=False)  # fmt: skip
    before = load_lm(str(tiny_dir), "cpu").lm.base_model.state_dict()
    after = load_lm(str(out), "cpu").lm.base_model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # the body is untouched
    assert json.loads((out / "config.json").read_text())["entmax_alpha"] == 1.0


def test_sequences_are_framed_by_specials(tiny_dir: Path, corpus: Path) -> None:
    lm = load_lm(str(tiny_dir), "cpu")
    seqs = token_sequences(split_corpus(corpus, 5).train, lm.sparse.tokenizer, 16)
    cls, sep = lm.sparse.tokenizer.token_to_id("[CLS]"), lm.sparse.tokenizer.token_to_id("[SEP]")
    assert (seqs[:, 0] == cls).all() and (seqs[:, -1] == sep).all()
    assert not ((seqs[:, 1:-1] == cls) | (seqs[:, 1:-1] == sep)).any()
