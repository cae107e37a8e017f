"""Sparsefinder: predictors against their definitions, loss, training, determinism, artefacts."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch

from sparse_core.errors import ArtefactError, SparsescopeError
from sparse_core.sparsefinder import (
    SHIPPED_NAME,
    Artefact,
    artefact_name,
    balanced_buckets,
    load_artefact,
    nearest_centroids,
    save_artefact,
    sf_distance,
    sf_kmeans,
    sf_quantization,
    sq_distances,
)
from sparse_core.sparsefinder_fit import (
    FitConfig,
    edge_hinge_loss,
    fit_artefact,
    hinge_loss,
    kmeans,
    sample_negatives,
)

TEXTS = [
    "The cat sat on the mat because it was warm there.",
    "A dog barked at the mailman, who ran away quickly.",
    "Rain fell all night over the quiet little town.",
    "She wrote a letter to her brother in the city.",
    "Numbers like 3.14 and 2.71 show up in many formulas.",
    "The committee approved the plan after a long debate.",
]
SMALL = FitConfig(epochs=3, cluster_counts=(2, 4), kmeans_restarts=2, kmeans_max_iter=20, seed=3)


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ----------------------------------------------------------------------------- predictors


def test_sq_distances_and_sf_distance_strict_threshold():
    qp = torch.tensor([[[[0.0, 0.0], [1.0, 1.0]]]])  # (1, 1, 2, 2)
    kp = torch.tensor([[[[1.0, 0.0], [0.0, 0.0], [3.0, 1.0]]]])  # (1, 1, 3, 2)
    d = sq_distances(qp, kp)
    assert d.dtype == torch.float64 and d.shape == (1, 1, 2, 3)
    assert d[0, 0].tolist() == [[1.0, 0.0, 10.0], [1.0, 2.0, 4.0]]
    # strictly below t: a distance equal to t is not an edge
    assert sf_distance(qp, kp, 1.0)[0, 0].tolist() == [[False, True, False], [False, False, False]]
    assert sf_distance(qp, kp, 1.0 + 1e-9)[0, 0].tolist() == [
        [True, True, False],
        [True, False, False],
    ]


def test_sf_distance_matches_definition_batched():
    qp, kp = torch.randn(2, 3, 7, 4, generator=gen()), torch.randn(2, 3, 7, 4, generator=gen(1))
    m = sf_distance(qp, kp, 2.5)
    for li in range(2):
        for h in range(3):
            for i in range(7):
                for j in range(7):
                    d = sum(
                        (float(qp[li, h, i, c]) - float(kp[li, h, j, c])) ** 2 for c in range(4)
                    )
                    assert bool(m[li, h, i, j]) == (d < 2.5)


@pytest.mark.parametrize("n,b", [(10, 3), (12, 4), (7, 7), (5, 1), (9, 20)])
def test_balanced_buckets_hold_exactly_b_tokens_per_dim(n, b):
    x = torch.randn(2, 3, n, 4, generator=gen(n))
    bk = balanced_buckets(x, b)
    for li in range(2):
        for h in range(3):
            for c in range(4):
                col = bk[li, h, :, c]
                sizes = torch.bincount(col).tolist()
                assert sizes[:-1] == [b] * (len(sizes) - 1)
                assert sizes[-1] == (n % b or b) if n >= b else sizes == [n]  # last: the rest
                # buckets follow the value order: every value in bucket u <= every one in u + 1
                for u in range(len(sizes) - 1):
                    assert x[li, h, col == u, c].max() <= x[li, h, col == u + 1, c].min()


def test_balanced_buckets_ties_by_position_and_valid_mask():
    x = torch.tensor([[2.0], [1.0], [1.0], [1.0], [0.0]])  # (n=5, r=1)
    # ranks: 4 -> 0; then the three 1.0 in position order 1, 2, 3 -> 1, 2, 3; 0 -> 4
    assert balanced_buckets(x, 2)[:, 0].tolist() == [2, 0, 1, 1, 0]
    valid = torch.tensor([True, True, False, True, True])
    assert balanced_buckets(x, 2, valid)[:, 0].tolist() == [1, 0, -1, 1, 0]


def test_sf_quantization_matches_definition():
    n, r = 11, 3
    qp, kp = torch.randn(2, 2, n, r, generator=gen(5)), torch.randn(2, 2, n, r, generator=gen(6))
    b = 4
    m = sf_quantization(qp, kp, bucket_size=b)
    assert torch.equal(m, sf_quantization(qp, kp, n_buckets=3))  # ceil(11 / 3) = 4
    for li in range(2):
        for h in range(2):
            rq = [sorted(range(n), key=lambda i: (float(qp[li, h, i, c]), i)) for c in range(r)]
            rk = [sorted(range(n), key=lambda j: (float(kp[li, h, j, c]), j)) for c in range(r)]
            bq = [{t: p // b for p, t in enumerate(rq[c])} for c in range(r)]
            bk = [{t: p // b for p, t in enumerate(rk[c])} for c in range(r)]
            ref = [
                [any(bq[c][i] == bk[c][j] for c in range(r)) for j in range(n)] for i in range(n)
            ]
            assert m[li, h].tolist() == ref


def test_sf_quantization_valid_and_errors():
    qp = torch.randn(6, 2, generator=gen(7))
    valid = torch.tensor([True, True, True, True, False, False])
    m = sf_quantization(qp, qp, n_buckets=2, valid=valid)
    assert not m[4:].any() and not m[:, 4:].any()
    assert m[:4, :4].diagonal().all()  # same vector, same buckets
    with pytest.raises(SparsescopeError, match="exactly one"):
        sf_quantization(qp, qp)
    with pytest.raises(SparsescopeError, match="exactly one"):
        sf_quantization(qp, qp, bucket_size=2, n_buckets=2)
    with pytest.raises(SparsescopeError, match="bucket_size"):
        sf_quantization(qp, qp, bucket_size=0)


def test_nearest_centroids_ties_go_to_lower_index():
    cents = torch.tensor([[1.0, 0.0], [0.0, 5.0], [-1.0, 0.0], [0.0, 0.0]])
    x = torch.tensor([[0.0, 0.0], [0.0, 1.0]])
    top = nearest_centroids(x, cents, 3)
    # x0: centroid 3 (0), then 0 and 2 tie at 1 -> 0 before 2
    assert top[0].tolist() == [3, 0, 2]
    # x1: 3 (1), then 0 and 2 tie at 2 -> 0, 2
    assert top[1].tolist() == [3, 0, 2]
    with pytest.raises(SparsescopeError, match="top_k"):
        nearest_centroids(x, cents, 5)


def test_sf_kmeans_is_top_k_set_intersection():
    L, H, n, B, r = 2, 2, 9, 5, 3
    qp, kp = torch.randn(L, H, n, r, generator=gen(8)), torch.randn(L, H, n, r, generator=gen(9))
    cents = torch.randn(L, H, B, r, generator=gen(10))
    for k in (1, 2, 3):
        m = sf_kmeans(qp, kp, cents, k)
        for li in range(L):
            for h in range(H):

                def top(v, li=li, h=h, k=k):
                    d = [
                        sum((float(v[c]) - float(cents[li, h, b, c])) ** 2 for c in range(r))
                        for b in range(B)
                    ]
                    return set(sorted(range(B), key=lambda b: (d[b], b))[:k])

                tq = [top(qp[li, h, i]) for i in range(n)]
                tk = [top(kp[li, h, j]) for j in range(n)]
                ref = [[bool(tq[i] & tk[j]) for j in range(n)] for i in range(n)]
                assert m[li, h].tolist() == ref
    # k = B: every set is everything
    assert sf_kmeans(qp, kp, cents, B).all()


# ----------------------------------------------------------------------------- loss, sampling


def test_hinge_loss_hand_made():
    # one head, n = 3, r = 1: q = [0, 1, 3], k = [0, 2, 5]
    qp = torch.tensor([[0.0], [1.0], [3.0]])
    kp = torch.tensor([[0.0], [2.0], [5.0]])
    pos = torch.tensor([[1, 0, 0], [0, 1, 0], [0, 1, 1]], dtype=torch.bool)
    neg = torch.tensor([[0, 1, 0], [1, 0, 0], [1, 0, 0]], dtype=torch.bool)
    # i=0: 1 + 0 - 4 -> 0;  i=1: 1 + 1 - 1 = 1;  i=2: 1 + (1 + 4) - 9 -> 0
    assert hinge_loss(qp, kp, pos, neg).item() == pytest.approx(1 / 3)
    assert hinge_loss(qp, kp, pos, neg, margin=5.0).item() == pytest.approx((1 + 5 + 1) / 3)


def test_edge_loss_matches_dense_definition():
    L, H, n, r = 2, 3, 10, 4
    qp, kp = torch.randn(L, H, n, r, generator=gen(1)), torch.randn(L, H, n, r, generator=gen(2))
    pos = torch.rand(L, H, n, n, generator=gen(3)) < 0.2
    neg = sample_negatives(pos, gen(4))
    D = ((qp[..., :, None, :] - kp[..., None, :, :]) ** 2).sum(-1)
    ref = torch.relu(1 + (D * pos).sum(-1) - (D * neg).sum(-1)).sum(-1) / n
    got = hinge_loss(qp, kp, pos, neg)
    assert got.shape == (L, H)
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)
    idx = [m.flatten().nonzero().flatten().int() for m in (pos, neg)]
    torch.testing.assert_close(edge_hinge_loss(qp, kp, *idx), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n,p", [(12, 0.2), (200, 0.05), (80, 0.5), (40, 0.9)])
def test_sample_negatives_counts_and_disjoint(n, p):
    pos = torch.rand(3, n, n, generator=gen(n)) < p
    pos[0, 0] = True  # a row without non-edges
    pos[0, 1] = False  # a row without positives
    neg = sample_negatives(pos, gen(1))
    assert not (neg & pos).any()
    want = torch.minimum(pos.sum(-1), (~pos).sum(-1))
    assert torch.equal(neg.sum(-1), want)
    assert torch.equal(neg, sample_negatives(pos, gen(1)))  # seeded


def test_sample_negatives_uniform():
    pos = torch.zeros(4000, 6, dtype=torch.bool)
    pos[:, 0] = pos[:, 1] = True  # 2 positives; 4 non-edges, each drawn with probability 1/2
    freq = sample_negatives(pos, gen(2)).float().mean(0)
    assert freq[:2].tolist() == [0.0, 0.0]
    assert torch.allclose(freq[2:], torch.full((4,), 0.5), atol=0.04)


def test_kmeans_recovers_separated_clusters_deterministically():
    centres = torch.tensor([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    pts = centres.repeat_interleave(50, 0) + 0.1 * torch.randn(150, 2, generator=gen(3))
    x = torch.stack([pts, pts.flip(0)])  # two problems, P = 2
    c, inertia = kmeans(x, 3, restarts=3, generator=gen(0))
    c2, _ = kmeans(x, 3, restarts=3, generator=gen(0))
    assert torch.equal(c, c2)
    for p in range(2):
        got = sorted(tuple(round(v) for v in row) for row in c[p].tolist())
        assert got == [(0, 0), (0, 10), (10, 0)]
    assert (inertia < 150 * 0.1).all()


# ----------------------------------------------------------------------------- fit + artefact


@pytest.fixture(scope="module")
def tiny_art(tiny_model):
    return fit_artefact(tiny_model, TEXTS, alpha=1.5, config=SMALL, meta={"corpus": "test"})


def test_fit_shapes_meta_and_training_decreases_loss(tiny_model, tiny_art):
    c = tiny_model.config
    assert tiny_art.W.shape == (c.num_layers, c.num_heads, c.head_dim, 4)
    assert tiny_art.b.shape == (c.num_layers, c.num_heads, 4)
    assert sorted(tiny_art.centroids) == [2, 4]
    assert tiny_art.centroids[4].shape == (c.num_layers, c.num_heads, 4, 4)
    m = tiny_art.meta
    assert m["model_id"] == tiny_model.model_id and m["alpha"] == 1.5 and m["corpus"] == "test"
    assert m["sizes"]["inputs"] == 6 and m["sizes"]["valid_inputs"] == 1
    assert m["sizes"]["positive_pairs"] > m["sizes"]["train_positive_pairs"] > 0
    losses = m["training"]["loss_per_epoch"]
    assert len(losses) == 3 and losses[-1] < losses[0]
    v = m["validation"]
    assert v["loss"] < v["loss_initial"]
    assert 0 <= v["reference"]["recall"] <= 1 and 0 <= v["reference"]["sparsity"] <= 1
    # b centres the projected training tokens; it does not change any distance
    out = tiny_model.run(TEXTS[0])
    qp, kp = tiny_art.project(out.queries), tiny_art.project(out.keys)
    q0, k0 = out.queries @ tiny_art.W, out.keys @ tiny_art.W
    torch.testing.assert_close(sq_distances(qp, kp), sq_distances(q0, k0), rtol=1e-4, atol=1e-4)


def test_more_training_lowers_the_loss(tiny_model):
    cfg = FitConfig(epochs=1, cluster_counts=(2,), kmeans_restarts=1, seed=3)
    one = fit_artefact(tiny_model, TEXTS, config=cfg)
    six = fit_artefact(tiny_model, TEXTS, config=FitConfig(**{**cfg.__dict__, "epochs": 6}))
    assert six.meta["validation"]["loss"] < one.meta["validation"]["loss"]


def test_fit_is_deterministic_under_seed(tiny_model, tiny_art, tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    again = fit_artefact(tiny_model, TEXTS, alpha=1.5, config=SMALL, meta={"corpus": "test"})
    assert again.meta["created"] == "2023-11-14T22:13:20+00:00"
    assert torch.equal(again.W, tiny_art.W) and torch.equal(again.b, tiny_art.b)
    assert all(torch.equal(again.centroids[k], tiny_art.centroids[k]) for k in (2, 4))
    # same bytes once the creation date agrees (SOURCE_DATE_EPOCH fixes it in a real re-run)
    first = dataclasses.replace(tiny_art, meta={**tiny_art.meta, "created": again.meta["created"]})
    a, b = save_artefact(first, tmp_path / "a"), save_artefact(again, tmp_path / "b")
    assert a[0].read_bytes() == b[0].read_bytes() and a[1].read_bytes() == b[1].read_bytes()


def test_artefact_round_trip(tiny_art, tmp_path):
    st, js = save_artefact(tiny_art, tmp_path)  # a directory: the default file name
    assert st.name == artefact_name(tiny_art.model_id, 1.5) + ".safetensors"
    assert js.with_name(st.name.replace(".safetensors", ".json")) == js
    for where in (st, js, str(st)[: -len(".safetensors")], tmp_path):
        back = load_artefact(where, model_id=tiny_art.model_id, alpha=1.5)
        assert torch.equal(back.W, tiny_art.W) and torch.equal(back.b, tiny_art.b)
        assert back.centroids.keys() == tiny_art.centroids.keys()
        assert all(torch.equal(back.centroids[k], v) for k, v in tiny_art.centroids.items())
        assert (back.model_id, back.alpha, back.rank) == (tiny_art.model_id, 1.5, 4)
        assert back.meta == {**tiny_art.meta, "format": "sparsescope-sparsefinder",
                             "format_version": 1}  # fmt: skip
    assert json.loads(js.read_text())["alpha"] == 1.5


def test_artefact_name_keeps_the_alpha_dot(tmp_path, tiny_art):
    st, _ = save_artefact(tiny_art, tmp_path / "x-a1.5")
    assert st.name == "x-a1.5.safetensors"
    assert artefact_name("sparsescope/all-MiniLM-L6-v2-entmax1.5", 1.5) == SHIPPED_NAME
    name = artefact_name("sentence-transformers/all-MiniLM-L6-v2", 1.5)  # the original's
    assert name == "sparsefinder-all-minilm-l6-v2-a1.5"


def test_artefact_mismatch_and_file_errors(tiny_art, tmp_path):
    st, js = save_artefact(tiny_art, tmp_path / "art")
    with pytest.raises(ArtefactError) as e:
        load_artefact(st, model_id="other/model", alpha=2.0)
    msg = str(e.value)
    assert f"fitted for model {tiny_art.model_id} at alpha 1.5" in msg
    assert "but the model is other/model at alpha 2" in msg
    with pytest.raises(ArtefactError, match="at alpha 1.5, but the model is .* at alpha 1.25"):
        load_artefact(st, alpha=1.25)
    with pytest.raises(ArtefactError, match="missing.safetensors does not exist"):
        load_artefact(tmp_path / "missing")
    js.write_text("{not json")
    with pytest.raises(ArtefactError, match=str(js)):
        load_artefact(st)
    st.write_bytes(b"garbage")
    with pytest.raises(ArtefactError, match=str(st)):
        load_artefact(st)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ArtefactError, match="no Sparsefinder artefact"):
        load_artefact(tmp_path / "empty")


def test_project_checks_shape(tiny_art):
    L, H, d = tiny_art.layers, tiny_art.heads, tiny_art.head_dim
    x = torch.randn(L, H, 5, d, generator=gen())
    y = tiny_art.project(x)
    assert y.shape == (L, H, 5, 4)
    torch.testing.assert_close(y[1, 2], x[1, 2] @ tiny_art.W[1, 2] + tiny_art.b[1, 2])
    with pytest.raises(ArtefactError, match="projects"):
        tiny_art.project(torch.randn(L, H + 1, 5, d))
    tiny_art.check_model(L, H, d)
    with pytest.raises(ArtefactError, match="layers"):
        tiny_art.check_model(L + 1, H, d)


def test_artefact_dataclass_defaults():
    a = Artefact("m", 1.5, 2, torch.zeros(1, 1, 3, 2), torch.zeros(1, 1, 2))
    assert a.centroids == {} and a.meta == {}


# ----------------------------------------------------------------------------- shipped artefact


def test_shipped_artefact_matches_default_model():
    from sparse_core.model import DEFAULT_MODEL_ID, default_model_path

    cfg = json.loads((default_model_path() / "config.json").read_text())
    art = load_artefact()
    L, H = cfg["num_hidden_layers"], cfg["num_attention_heads"]
    assert art.model_id == DEFAULT_MODEL_ID and art.alpha == 1.5 and art.rank == 4
    assert art.W.shape == (L, H, cfg["hidden_size"] // H, 4)
    assert sorted(art.centroids) == [2, 4, 6, 8, 10, 12, 16, 20]
    assert all(c.shape == (L, H, k, 4) for k, c in art.centroids.items())
    assert torch.isfinite(art.W).all()
    assert load_artefact(model_id=DEFAULT_MODEL_ID, alpha=1.5).meta == art.meta
    with pytest.raises(ArtefactError, match="at alpha 1.5, but the model is .* at alpha 2"):
        load_artefact(model_id=DEFAULT_MODEL_ID, alpha=2.0)
    m = art.meta
    # fitted on the adapted model's training part of WikiText-2 (docs/results.md)
    assert m["corpus"][0]["name"] == "split/train.txt"
    assert m["validation"]["reference"]["recall"] > 0.3
    # the original all-MiniLM-L6-v2 keeps its own artefact (it is served beside the default)
    orig = load_artefact(model_id="sentence-transformers/all-MiniLM-L6-v2", alpha=1.5)
    assert orig.meta["corpus"][0]["name"] == "wikitext-2/valid.txt"
    assert orig.W.shape == art.W.shape and not torch.equal(orig.W, art.W)


@pytest.mark.real_model
def test_shipped_artefact_beats_chance_on_real_text(real_model, sentence):
    """On an unseen sentence, sf-distance at the reference t finds far more gold edges than a
    random mask of the same density would (recall > 1 - sparsity)."""
    from sparse_core.metrics import recall, sparsity
    from sparse_core.sparsefinder import REFERENCE_THRESHOLD

    art = load_artefact(model_id=real_model.model_id, alpha=1.5)
    out = real_model.run(sentence * 4, alpha=1.5)
    m = sf_distance(art.project(out.queries), art.project(out.keys), REFERENCE_THRESHOLD)
    rec, spa = float(recall(m, out.graph).mean()), float(sparsity(m).mean())
    assert rec > 1 - spa + 0.1
    assert not math.isnan(rec)
