"""Today's learned selectors (definitions §12): the lightning indexer and SeerAttention's gate as
methods (valid masks, k / top-k semantics, the page's payload, the sweep engine), their fit (the
KL falls, deterministically) and their files (round trip, found beside the Sparsefinder
artefact)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sparse_core import methods as M
from sparse_core import patterns
from sparse_core.bitsets import METRICS, Gold
from sparse_core.errors import ArtefactError, SparsescopeError
from sparse_core.methods.selection import from_b64
from sparse_core.selectors import (
    index_scores,
    load_selector,
    save_selector,
    seer_gate,
    selector_name,
)
from sparse_core.selectors_fit import SelectorConfig, extract, mean_loss, train
from sparse_core.sparsefinder import Artefact, load_artefact, save_artefact
from sparse_core.testing import random_selectors

TEXT = (
    "The chef who ran to the store was out of food, so he went back home again. Later that "
    "evening the neighbours came over with bread, cheese and a large pot of soup."
)


def artefact(model, seed=0) -> Artefact:
    cfg = model.config
    L, H, d = cfg.num_layers, cfg.num_heads, cfg.head_dim
    g = torch.Generator().manual_seed(seed)
    art = Artefact(model.model_id, 1.5, 4, torch.randn(L, H, d, 4, generator=g) * 0.5,
                   torch.zeros(L, H, 4), {2: torch.randn(L, H, 2, 4, generator=g)}, {})  # fmt: skip
    art.learned = random_selectors(L, H, d, model.model_id, 1.5, seed)
    return art


@pytest.fixture(scope="module")
def art(tiny_model):
    return artefact(tiny_model)


@pytest.fixture(scope="module", params=[False, True], ids=["bidirectional", "causal"])
def ctx(request, tiny_model, art):
    return M.PredictContext.from_run(tiny_model.run(TEXT, causal=request.param), art)


def _indexer_reference(art, ctx, layer: int) -> np.ndarray:
    """I_ts of definitions §12 written out in float64 from the selector's weights."""
    t = {k: v.double().numpy() for k, v in art.learned["indexer"].tensors.items()}
    q = ctx.out.queries[layer].double().numpy()  # (H, n, d)
    k = ctx.out.keys[layer].double().numpy()
    xq = np.concatenate(list(q), axis=-1)  # (n, H·d): each token's heads side by side
    xk = np.concatenate(list(k), axis=-1)
    hi, di = t["ww"].shape[-1], t["wk"].shape[-1]
    qi = (xq @ t["wq"][layer] + t["bq"][layer]).reshape(-1, hi, di)
    ki = xk @ t["wk"][layer] + t["bk"][layer]
    ki = (ki - ki.mean(-1, keepdims=True)) / np.sqrt(ki.var(-1, keepdims=True) + 1e-5)
    ki = ki * t["k_gain"][layer] + t["k_bias"][layer]
    w = (xq @ t["ww"][layer] + t["bw"][layer]) / np.sqrt(hi * di)
    return sum(w[:, j, None] * np.maximum(qi[:, j] @ ki.T, 0) for j in range(hi))


def test_index_scores_are_the_definition(ctx, art):
    for layer in range(ctx.layers):
        got = index_scores(ctx.learned["indexer"], layer, ctx.causal)
        want = _indexer_reference(art, ctx, layer)
        v = patterns.valid_region(ctx.n, ctx.causal).numpy()
        assert np.allclose(got[v], want[v], rtol=1e-4, atol=1e-5)
        assert np.isneginf(got[~v]).all()  # causal: later keys never outrank a valid one


@pytest.mark.parametrize("k", [1, 3, 8])
def test_indexer_keeps_the_top_k_valid_keys_per_query(ctx, k):
    m = M.METHODS["indexer"]
    pred = m.predict(ctx, k=k)
    n, L, H = ctx.n, ctx.layers, ctx.heads
    assert pred.shape == (L, H, n, n) and pred.dtype == torch.bool
    v = patterns.valid_region(n, ctx.causal)
    assert not (pred & ~v).any()
    want_rows = torch.clamp(v.sum(-1), max=k)  # min(k, |V_i|)
    for layer in range(L):
        assert (pred[layer] == pred[layer, :1]).all()  # one mask per layer, every head alike
        s = index_scores(ctx.learned["indexer"], layer, ctx.causal)
        assert torch.equal(pred[layer, 0].sum(-1), want_rows)
        for i in range(n):
            order = sorted(range(n), key=lambda j: (-s[i, j], j))  # ties to the lower key
            keep = set(order[:k]) & set(np.flatnonzero(v[i].numpy()).tolist())
            assert set(np.flatnonzero(pred[layer, 0, i].numpy()).tolist()) == keep
    # nested in k, and the widest k the slider offers keeps at least as much
    assert (pred <= m.predict(ctx, k=k + 1)).all()


@pytest.mark.parametrize(("block", "topk"), [(16, 1), (16, 2), (16, 3), (32, 1), (32, 2), (64, 1)])
def test_seer_keeps_the_top_k_key_blocks_per_query_block(ctx, block, topk):
    m = M.METHODS["seer"]
    pred = m.predict(ctx, block=block, topk=topk)
    n = ctx.n
    T = -(-n // block)
    v = patterns.valid_region(n, ctx.causal)
    assert not (pred & ~v).any()
    for layer in range(ctx.layers):
        for h in range(ctx.heads):
            q, k = ctx.head_qk(layer, h)
            g = seer_gate(ctx.learned["seer"], q, k, layer, h, block, ctx.causal)
            assert g.shape == (T, T)
            for a in range(T):
                chosen = sorted(range(T), key=lambda b: (-g[a, b], b))[: min(topk, T)]
                want = torch.zeros(n, dtype=torch.bool)
                for b in chosen:
                    want[b * block : (b + 1) * block] = True
                rows = pred[layer, h, a * block : (a + 1) * block]
                assert torch.equal(rows, want[None] & v[a * block : (a + 1) * block])
    most = m.params(n)[1].max  # ⌈n / 16⌉
    assert (pred <= m.predict(ctx, block=block, topk=min(topk + 1, most))).all()
    if topk >= T:  # every block: the whole valid region
        assert torch.equal(pred, v.expand_as(pred))


def test_seer_gate_is_the_definition(ctx):
    """Average and max pooling in blocks, the per-head maps, q̃ · k̃ / √h (float64 reference)."""
    inp, block, layer, h = ctx.learned["seer"], 16, 1, 2
    q, k = ctx.head_qk(layer, h)
    n, T = ctx.n, -(-ctx.n // 16)

    def pool(x):
        parts = [x[b * block : min(n, (b + 1) * block)].astype(np.float64) for b in range(T)]
        return np.stack([np.concatenate([p.mean(0), p.max(0)]) for p in parts])

    wq, wk = inp.wq[layer, h].double().numpy(), inp.wk[layer, h].double().numpy()
    want = (pool(q) @ wq) @ (pool(k) @ wk).T / np.sqrt(wq.shape[-1])
    got = seer_gate(inp, q, k, layer, h, block, False)
    assert np.allclose(got, want, rtol=1e-4, atol=1e-5)


def test_bad_parameters_name_the_parameter(ctx):
    km = M.METHODS["indexer"].params(ctx.n)[0].max
    for name, params, field in (("indexer", {"k": 0}, "k"), ("indexer", {"k": km + 1}, "k"),
                                ("indexer", {"k": 2.5}, "k"), ("seer", {"block": 24}, "block"),
                                ("seer", {"topk": 0}, "topk")):  # fmt: skip
        with pytest.raises(SparsescopeError) as e:
            M.METHODS[name].predict(ctx, **params)
        assert e.value.field == field and field in str(e.value)


def test_without_selectors_the_methods_are_not_available(tiny_model, art):
    bare = Artefact(art.model_id, art.alpha, art.rank, art.W, art.b, art.centroids, {})
    assert "indexer" not in M.available(bare) and "seer" not in M.available(bare)
    assert {"indexer", "seer"} <= set(M.available(art))
    ctx = M.PredictContext.from_run(tiny_model.run(TEXT), bare)
    for name in ("indexer", "seer"):
        with pytest.raises(SparsescopeError, match=f"fit --method {name}") as e:
            M.METHODS[name].predict(ctx)
        assert e.value.field == "method"
    assert M.head_data(ctx, 0, 0)["indexer"] is None and M.head_data(ctx, 0, 0)["seer"] == {}


def test_the_page_payload_recomputes_the_masks(ctx):
    """The orders sent to the page give Python's masks by cutting them at k (one head alone:
    the payload is computed on its view)."""
    n, layer, head = ctx.n, 1, 3
    v = patterns.valid_region(n, ctx.causal)
    d = M.head_data(ctx.view(layer, head), 0, 0)
    order = from_b64(d["indexer"]["order"])
    assert order.shape == (n, d["indexer"]["k_max"])
    for k in (1, 2, 5):
        mask = torch.zeros(n, n, dtype=torch.bool)
        for i in range(n):
            mask[i, order[i, :k].astype(np.int64)] = True
        assert torch.equal(mask & v, M.METHODS["indexer"].predict(ctx, k=k)[layer, head])
    for b in ("16", "32"):
        B, o = int(b), from_b64(d["seer"][b])
        T = o.shape[0]
        for k in (1, 2):
            sel = np.zeros((T, T), dtype=bool)
            np.put_along_axis(sel, o[:, :k].astype(np.int64), True, axis=-1)
            mask = torch.from_numpy(sel.repeat(B, 0).repeat(B, 1)[:n, :n])
            pred = M.METHODS["seer"].predict(ctx, block=B, topk=k)[layer, head]
            assert torch.equal(mask & v, pred)


def test_the_sweep_engine_equals_evaluate(ctx):
    gold = Gold.of(ctx)
    for name in ("indexer", "seer"):
        m = M.METHODS[name]
        points = m.grid(ctx.n, ctx.artefact) + [{**m.grid(ctx.n, ctx.artefact)[0], "window": 3,
                                                  "globals": True}]  # fmt: skip
        got = m.measure(ctx, gold, points)
        for p, point in enumerate(points):
            want = M.evaluate(ctx, name, point)
            for metric in ("recall", "sparsity", "exact", "precision"):
                assert np.allclose(got[metric][p], want[metric].flatten().numpy(), atol=1e-12), (
                    name, point, metric)  # fmt: skip
        assert set(got) == set(METRICS)


# ----------------------------------------------------------------------------- the fit


@pytest.fixture(scope="module")
def data(tiny_model):
    texts = [
        TEXT,
        "They all sat in the kitchen talking about the storm that closed the road.",
        "The river rose over the old bridge, and the town was cut off for two days.",
    ]
    return extract(tiny_model, texts, 1.5, keep_graph=[2])


@pytest.mark.parametrize("kind", ["indexer", "seer"])
def test_a_few_steps_lower_the_kl_deterministically(tiny_model, data, kind):
    from sparse_core.selectors_fit import initial

    cfg = SelectorConfig(kind=kind, epochs=4, lr=1e-2, seed=3)
    L, H, _, d = data.queries[0].shape
    t0 = initial(cfg, L, H, d)
    before = mean_loss(data, [0, 1], t0, cfg)
    t1, hist = train(data, [0, 1], t0, cfg)
    after = mean_loss(data, [0, 1], t1, cfg)
    assert after < 0.9 * before, (before, after)
    assert len(hist) == 4 and hist[-1] < hist[0]
    again, _ = train(data, [0, 1], t0, cfg)  # the same seed: the same weights, bit for bit
    assert all(torch.equal(t1[k], again[k]) for k in t1)


def test_targets_are_distributions(data):
    n = data.queries[0].shape[2]
    assert torch.allclose(data.layer_target[0].sum(-1), torch.ones(2, n), atol=1e-5)
    for b, t in data.block_target[0].items():
        assert t.shape[-1] == -(-n // b)
        assert torch.allclose(t.sum(-1), torch.ones(t.shape[:-1]), atol=1e-5)
    assert 2 in data.graph and 0 not in data.graph  # the gold graph of held-out inputs only


# ----------------------------------------------------------------------------- files


def test_round_trip_and_found_beside_the_artefact(tmp_path, tiny_model, art):
    save_artefact(art, tmp_path)
    for kind, sel in art.learned.items():
        st, js = save_selector(sel, tmp_path)
        assert st.name == selector_name(kind, art.model_id, 1.5) + ".safetensors"
        back = load_selector(st)
        assert back.kind == kind and back.model_id == art.model_id and back.alpha == 1.5
        for k, v in sel.tensors.items():  # stored as float16
            assert torch.equal(back.tensors[k], v.half().float())
    # the folder holds the Sparsefinder artefact and two selectors: the artefact is picked, the
    # selectors are attached to it
    got = load_artefact(tmp_path, model_id=art.model_id, alpha=1.5)
    assert set(got.learned) == {"indexer", "seer"}
    ctx = M.PredictContext.from_run(tiny_model.run(TEXT), got)
    assert M.METHODS["indexer"].predict(ctx, k=4).any()
    # fitted for another α: not attached
    other = random_selectors(2, 4, 8, art.model_id, 2.0)["seer"]
    save_selector(other, tmp_path / "x")
    save_artefact(Artefact(art.model_id, 2.0, 4, art.W, art.b, {}, {}), tmp_path / "x")
    assert set(load_artefact(tmp_path / "x", model_id=art.model_id, alpha=2.0).learned) == {"seer"}
    (tmp_path / "x" / (selector_name("seer", art.model_id, 2.0) + ".json")).write_text("{")
    with pytest.raises(ArtefactError, match="corrupt"):
        load_selector(tmp_path / "x" / selector_name("seer", art.model_id, 2.0))


def test_the_shipped_selectors_fit_the_default_model():
    from sparse_core.sources import DEFAULT_MODEL_ID

    art = load_artefact(model_id=DEFAULT_MODEL_ID, alpha=1.5)
    assert set(art.learned) == {"indexer", "seer"}
    for sel in art.learned.values():
        sel.check_model(6, 12, 32)
        v = sel.meta["validation"]
        assert v["kl"] < v["kl_initial"]  # the fit learned something on held-out text
