"""The model card's measurements (sparse_core/card.py): Spearman, STS files, embeddings, the
unigram baseline, what a model is, and the shipped cards."""

from __future__ import annotations

import json
import math
import random

import pytest
import torch

from sparse_core import card
from sparse_core.errors import SparsescopeError


def ref_spearman(x, y) -> float:
    """Spearman written out here: average ranks by counting, then Pearson's formula."""

    def ranks(v):
        return [
            sum(1 for w in v if w < a) + (sum(1 for w in v if w == a) + 1) / 2 for a in v
        ]

    rx, ry = ranks(list(x)), ranks(list(y))
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    vx = sum((a - mx) ** 2 for a in rx)
    vy = sum((b - my) ** 2 for b in ry)
    return cov / math.sqrt(vx * vy)


def test_spearman_matches_a_reference_with_ties():
    rng = random.Random(3)
    for n in (2, 3, 7, 40):
        x = [rng.choice([0.0, 1.0, 1.5, 2.0, 3.25, 5.0]) for _ in range(n)]  # many ties
        y = [rng.random() for _ in range(n)]
        if len(set(x)) < 2:
            x[0] += 1
        assert card.spearman(x, y) == pytest.approx(ref_spearman(x, y), abs=1e-12)
    # a monotone map is 1, a reversed one -1, whatever the values
    assert card.spearman([1, 5, 9, 10], [0.1, 0.2, 7, 8]) == pytest.approx(1.0)
    assert card.spearman([1, 5, 9, 10], [8, 7, 0.2, 0.1]) == pytest.approx(-1.0)
    assert math.isnan(card.spearman([1, 1, 1], [1, 2, 3]))


def test_spearman_matches_scipy():
    stats = pytest.importorskip("scipy.stats")
    rng = random.Random(5)
    x = [round(rng.uniform(0, 5), 1) for _ in range(300)]
    y = [v + rng.gauss(0, 1.5) for v in x]
    assert card.spearman(x, y) == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)


def test_spearman_refuses_unequal_lengths():
    with pytest.raises(SparsescopeError, match="equally long"):
        card.spearman([1, 2, 3], [1, 2])


def test_read_sts_semeval_and_sick(tmp_path):
    sem = tmp_path / "sts-x.tsv"
    sem.write_text("4.2\tA man plays.\tA person plays.\n\tno score\there\n0.5\tOne.\tTwo.\n")
    s = card.read_sts(sem)
    assert (s.name, s.a, s.b, s.gold) == ("sts-x", ["A man plays.", "One."],
                                          ["A person plays.", "Two."], [4.2, 0.5])  # fmt: skip
    sick = tmp_path / "sick.tsv"
    sick.write_text("pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
                    "1\tKids play.\tChildren play.\t4.5\tNEUTRAL\n")  # fmt: skip
    t = card.read_sts(sick)
    assert (t.a, t.b, t.gold) == (["Kids play."], ["Children play."], [4.5])
    assert len(t.sha256) == 64
    empty = tmp_path / "empty.tsv"
    empty.write_text("hello\n")
    with pytest.raises(SparsescopeError, match="no STS pair"):
        card.read_sts(empty)
    with pytest.raises(SparsescopeError, match="does not exist"):
        card.read_sts(tmp_path / "missing.tsv")


SENTS = [
    "The chef cooked dinner.",
    "A cook made the evening meal for everyone at the table.",
    "Stocks fell sharply.",
    "The market dropped.",
    "Two dogs play with a ball in the park.",
    "Dogs are playing.",
]


def test_embed_is_each_texts_own_mean_pooled_state(tiny_model):
    """Padded batches give each text's single-run mean-pooled, normalised final states."""
    got = card.embed(tiny_model, SENTS, 1.5, batch=4)
    for i, t in enumerate(SENTS):
        h = tiny_model.run(t, alpha=1.5).hidden.double().mean(0)
        ref = h / h.norm()
        assert torch.allclose(got[i], ref, atol=1e-5), t


def test_sts_spearman_on_a_tiny_model_against_a_reference(tiny_model):
    s = card.StsSet("toy", SENTS[0::2], SENTS[1::2], [4.0, 3.5, 1.0])
    cos = []
    for a, b in zip(s.a, s.b, strict=True):
        ha = tiny_model.run(a, alpha=1.5).hidden.double().mean(0)
        hb = tiny_model.run(b, alpha=1.5).hidden.double().mean(0)
        cos.append(float(ha @ hb / (ha.norm() * hb.norm())))
    got = card.sts_spearman(tiny_model, [s, s], 1.5)
    assert got["per_set"]["toy"] == pytest.approx(ref_spearman(cos, s.gold), abs=1e-9)
    assert got["spearman"] == got["per_set"]["toy"]
    # restricted to the full pairs: the same scores (sparse-consistency, definitions §1)
    full = card.sts_scores(tiny_model, s, 1.5,
                           masks=lambda run: torch.ones(run.layers, run.heads, run.n, run.n,
                                                        dtype=torch.bool))  # fmt: skip
    assert torch.allclose(full, torch.tensor(cos, dtype=torch.float64), atol=1e-5)


def test_unigram_loss_against_counts():
    train = torch.tensor([[1, 1, 2], [1, 3, 3]])
    labels = torch.tensor([[-100, 1, -100], [3, 4, -100]])
    v = 5
    counts = [0, 3, 1, 2, 0]
    total = sum(counts) + v
    want = -(math.log(4 / total) + math.log(3 / total) + math.log(1 / total)) / 3
    assert card.unigram_loss(train, labels, v) == pytest.approx(want, abs=1e-12)


class _Net:
    def __init__(self, **cfg):
        self.config = type("C", (), cfg)()


class _Model:
    def __init__(self, model_id, alpha, trained, **cfg):
        self.model_id, self.default_alpha, self.alpha_trained = model_id, alpha, trained
        self.net = _Net(**cfg)


ADAPT = {"base": "minilm-head", "objective": "masked-lm", "corpus_sha256": "ab" * 32,
         "steps": 150, "train": "attention"}  # fmt: skip


def test_describe_labels_what_a_model_is():
    d = card.describe(_Model("x/all-MiniLM-L6-v2-entmax1.5", 1.5, True, sparsescope_adapt=ADAPT))
    assert d["label"] == "MiniLM, adapted with 1.5-entmax"
    assert (d["objective"], d["steps"], d["alpha"]) == ("masked-lm", 150,
                                                         {"per_head": False, "value": 1.5})
    table = torch.full((2, 3), 1.4)
    table[1, 2] = 1.6
    d = card.describe(_Model("x/all-MiniLM-L6-v2-entmax-learned", table, True,
                             sparsescope_adapt=ADAPT))  # fmt: skip
    assert d["label"] == "MiniLM, adapted with learned α per head"
    assert d["alpha"]["per_head"] and d["alpha"]["min"] == pytest.approx(1.4)
    d = card.describe(_Model("sentence-transformers/all-MiniLM-L6-v2", 1.5, False))
    assert d["label"] == "MiniLM, softmax-trained; entmax applied"
    assert (d["attention_training"], d["alpha"], d["alpha_trained"]) == ("softmax", None, False)


def test_card_for_reads_a_shipped_card_of_its_own_model_only(tmp_path):
    m = _Model("org/some-model", 1.5, False)
    got = card.card_for(m, tmp_path)
    assert got["measured"] is False and got["sts_spearman"] is None
    body = {"format": card.CARD_FORMAT, "model": "org/some-model",
            "what": {"objective": "contrastive"},
            "sts": {"spearman": 0.8, "alpha": 1.5, "per_set": {"a": 0.8},
                    "sets": [{"name": "a", "pairs": 10, "sha256": "0"}],
                    "softmax": {"spearman": 0.81, "per_set": {"a": 0.81}}},
            "mlm": None, "mlm_note": "no head"}  # fmt: skip
    card.card_path("org/some-model", tmp_path).write_text(json.dumps(body))
    got = card.card_for(m, tmp_path)
    assert got["measured"] and (got["sts_spearman"], got["sts_spearman_softmax"]) == (0.8, 0.81)
    assert got["objective"] == "contrastive" and got["mlm_loss"] is None
    assert got["sts_sets"] == [{"name": "a", "pairs": 10}]
    body["model"] = "org/other"  # a card of another model is not this one's
    card.card_path("org/some-model", tmp_path).write_text(json.dumps(body))
    assert card.card_for(m, tmp_path)["measured"] is False


@pytest.mark.parametrize("model_id", ["sparsescope/all-MiniLM-L6-v2-entmax1.5",
                                      "sparsescope/all-MiniLM-L6-v2-entmax-learned",
                                      "sentence-transformers/all-MiniLM-L6-v2"])  # fmt: skip
def test_the_served_models_ship_a_measured_card(model_id):
    body = card.load_card(model_id)
    assert body is not None, f"no card shipped for {model_id} (run sparsescope card)"
    sts = body["sts"]
    assert len(sts["sets"]) >= 2 and set(sts["per_set"]) == {s["name"] for s in sts["sets"]}
    assert sts["spearman"] == pytest.approx(sum(sts["per_set"].values()) / len(sts["per_set"]))
    assert 0 < sts["spearman"] <= 1 and 0 < sts["softmax"]["spearman"] <= 1
    if model_id.startswith("sparsescope/"):  # adapted: a trained MLM head, with its baseline
        assert body["mlm"]["loss"] > 0 and body["mlm"]["unigram_loss"] > 0
    else:
        assert body["mlm"] is None and body["mlm_note"]
