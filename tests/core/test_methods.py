"""The method registry (definitions §2–§4, docs/architecture.md): specs, validation, grids,
predict."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sparse_core import baselines, metrics, patterns
from sparse_core import methods as M
from sparse_core import pareto as PA
from sparse_core.errors import SparsescopeError
from sparse_core.sparsefinder import (
    REFERENCE_THRESHOLD,
    Artefact,
    nearest_centroids,
    sf_distance,
    sf_kmeans,
    sf_quantization,
)
from sparse_core.testing import random_selectors

PAPER = ["window", "fixed", "strided", "bigbird", "longformer", "reformer", "routing",
         "sf-distance", "sf-quantization", "sf-kmeans"]  # fmt: skip
LEARNED = ["indexer", "seer"]  # today's learned selectors (definitions §12)
ARENA = ["streaming", "topk", "topp", "h2o", "moba", "quest", "xattention", "vertical-slash",
         "sparge"]  # fmt: skip
ORDER = PAPER + LEARNED + ARENA
TEXT = "The chef who ran to the store was out of food, so he went back to buy more bread."


def fake_artefact(L=2, H=4, d=8, seed=0, counts=(2, 4, 8)) -> Artefact:
    g = torch.Generator().manual_seed(seed)
    W = torch.randn(L, H, d, 4, generator=g) * 0.6
    cents = {b: torch.randn(L, H, b, 4, generator=g) for b in counts}
    art = Artefact("tiny", 1.5, 4, W, torch.zeros(L, H, 4), cents, {})
    art.learned = random_selectors(L, H, d, "tiny", 1.5, seed)
    return art


@pytest.fixture(scope="module")
def ctx(tiny_model):
    return M.PredictContext.from_run(tiny_model.run(TEXT), fake_artefact())


@pytest.fixture(scope="module")
def ctx_causal(tiny_model):
    return M.PredictContext.from_run(tiny_model.run(TEXT, causal=True), fake_artefact())


# ----------------------------------------------------------------------------- specs


def test_registry_order_and_labels():
    assert list(M.METHODS) == ORDER
    for name, m in M.METHODS.items():
        assert m.name == name and m.label
        # Reformer, Routing: no training; sf-*, indexer and seer: fitted per model and α
        assert m.needs_artefact == (name.startswith("sf-") or name in LEARNED)


def test_every_method_has_a_family_and_every_family_a_method():
    """The page groups its picker and colours its plots by family (sparse_core.methods.FAMILIES)."""
    families = {m.family for m in M.METHODS.values()}
    assert families == set(M.FAMILIES)
    assert {n for n, m in M.METHODS.items() if m.family == "sparse-transformer"} == {
        "window",
        "fixed",
        "strided",
    }
    assert {n for n, m in M.METHODS.items() if m.family == "learned"} == {
        "sf-distance",
        "sf-quantization",
        "sf-kmeans",
        "indexer",
        "seer",
    }
    assert {n for n, m in M.METHODS.items() if m.family == "oracles"} == {"topk", "topp"}


@pytest.mark.parametrize("name", ORDER)
def test_params_are_sliders_with_resolved_defaults(name):
    m = M.METHODS[name]
    for n in (1, 5, 128, 512):
        specs = m.params(n)
        assert [s.name for s in specs[-2:]] == ["window", "globals"]
        for s in specs:
            d = s.to_dict()
            assert set(d) == {"name", "label", "kind", "min", "max", "step", "choices",
                              "default", "help"}  # fmt: skip
            assert s.kind in ("int", "float", "choice", "bool") and s.help
            if s.kind == "choice":
                assert s.default in s.choices
            elif s.kind in ("int", "float"):
                assert s.min <= s.default <= s.max
        assert m.validate(n, {}) == m.defaults(n)  # defaults are valid


def test_documented_defaults():
    fixed = {"stride": 11, "c": 2, "part": "union", "spread": False, "window": 0, "globals": False}
    assert M.METHODS["fixed"].defaults(128) == fixed
    assert M.METHODS["strided"].defaults(512)["stride"] == 23
    assert M.METHODS["window"].defaults(3) == {"window": 5, "globals": True}  # min(11, 2n − 1)
    assert M.METHODS["bigbird"].defaults(128) == {"random_keys": 3, "window": 3, "globals": True}
    assert M.METHODS["sf-distance"].defaults(64)["t"] == REFERENCE_THRESHOLD


@pytest.mark.parametrize(
    ("name", "params", "field", "match"),
    [
        ("window", {"window": 300}, "window", r"window must be in \[0, 255\], got 300"),
        ("window", {"window": -1}, "window", r"window must be in \[0, 255\], got -1"),
        ("window", {"window": 2.5}, "window", r"window must be an integer in \[0, 255\], got 2.5"),
        ("window", {"globals": "maybe"}, "globals", r"globals must be true or false, got 'maybe'"),
        (
            "window",
            {"stride": 3},
            "stride",
            r"window has no parameter 'stride'; its parameters are window",
        ),
        ("fixed", {"stride": 4, "c": 5}, "c", r"c must be in \[1, stride = 4\], got 5"),
        ("fixed", {"part": "A3"}, "part", r"part must be one of A1, A2, union, got 'A3'"),
        ("strided", {"stride": 0}, "stride", r"stride must be in \[1, 128\], got 0"),
        (
            "reformer",
            {"n_buckets": 5},
            "n_buckets",
            r"n_buckets must be one of 2, 4, 6, 8, 10, 12, 16, 20",
        ),
        ("sf-distance", {"t": "abc"}, "t", r"t must be a number in \[0.0, 10.0\], .*got 'abc'"),
        ("sf-distance", {"t": float("nan")}, "t", r"t must be a number"),
        (
            "sf-kmeans",
            {"n_clusters": 4, "top_k": 5},
            "top_k",
            r"top_k must be in \[1, n_clusters = 4\]",
        ),
        (
            "sf-quantization",
            {"n_buckets": 129},
            "n_buckets",
            r"n_buckets must be in \[1, 128\], got 129",
        ),
        # the arena's parameters (definitions §8)
        ("streaming", {"recent": 128}, "recent", r"recent must be in \[0, 127\], got 128"),
        ("streaming", {"sinks": -1}, "sinks", r"sinks must be in \[0, 128\], got -1"),
        ("topk", {"k": 65}, "k", r"k must be in \[1, 64\], got 65"),
        ("topp", {"p": 0}, "p", r"p must be in \[0.01, 1.0\], got 0"),
        ("h2o", {"k": "x"}, "k", r"k must be an integer in \[0, 128\], .*got 'x'"),
        ("moba", {"block": 48}, "block", r"block must be one of 16, 32, 64, 128, got 48"),
        ("moba", {"topk": 9}, "topk", r"topk must be in \[1, 8\], got 9"),
        ("quest", {"page": 8}, "page", r"page must be one of 16, 32, 64, 128, got 8"),
        ("xattention", {"stride": 3}, "stride", r"stride must be one of 2, 4, 8, 16, got 3"),
        ("xattention", {"tau": 1.5}, "tau", r"tau must be in \[0.05, 1.0\], got 1.5"),
        ("vertical-slash", {"last": 0}, "last", r"last must be in \[1, 128\], got 0"),
        ("vertical-slash", {"slashes": 256}, "slashes", r"slashes must be in \[0, 255\], got 256"),
        ("sparge", {"theta": 2}, "theta", r"theta must be in \[0.0, 1.0\], got 2"),
    ],
)
def test_validation_errors_name_parameter_value_and_range(name, params, field, match):
    with pytest.raises(SparsescopeError, match=match) as err:
        M.METHODS[name].validate(128, params)
    assert err.value.field == field  # the app reports it as is, never parses the message


def test_validation_coerces_query_strings():
    got = M.METHODS["fixed"].validate(64, {"stride": "8", "c": "2.0", "spread": "true",
                                           "globals": "0", "window": "3"})  # fmt: skip
    assert got == {"stride": 8, "c": 2, "part": "union", "spread": True, "window": 3,
                   "globals": False}  # fmt: skip
    assert M.METHODS["reformer"].validate(64, {"n_buckets": "16"})["n_buckets"] == 16
    assert M.get_method("window") is M.METHODS["window"]
    with pytest.raises(SparsescopeError, match="unknown method 'nope'; methods are window"):
        M.get_method("nope")
    with pytest.raises(SparsescopeError, match="n .* must be an integer >= 1"):
        M.METHODS["window"].params(0)


# ----------------------------------------------------------------------------- grids


def test_grids_are_the_papers():
    art = fake_artefact(counts=(2, 4, 6, 8, 10, 12, 16, 20))
    n = 512
    ws = M.sweep_windows(n)
    assert ws == [0, 1, 3, 5, 7, 9, 11, 15, 19, 23, 27, 31, 41, 51, 75, 101, 125, 151, 175, 201,
                  251]  # fmt: skip
    assert M.sweep_windows(128) == [0, 1, 3, 5, 7, 9, 11, 15, 19, 23, 27]
    assert M.sweep_windows(5) == [0, 1, 3, 5, 7, 9]
    assert M.sweep_windows(2048) == ws
    # a long text: every second width, the same span (the one-head sweep's cost)
    assert M.sweep_windows(4096) == [0, 3, 7, 11, 19, 27, 41, 75, 125, 175, 251]
    assert len(M.METHODS["sf-kmeans"].grid(4096, art)) == 9 * 11
    sizes = {name: len(m.grid(n, art)) for name, m in M.METHODS.items()}
    # the paper's own grids, a few values and both ends (docs/methods.md "Sweep grids")
    assert sizes == {"window": 21, "fixed": 6 * 21, "strided": 3 * 21, "bigbird": 3 * 21,
                     "longformer": 3 * 21, "reformer": 3 * 21, "routing": 3 * 21,
                     "sf-distance": 5 * 21, "sf-quantization": 3 * 21,
                     "sf-kmeans": 9 * 21,
                     # today's learned selectors (methods.trained): as the arena, no window
                     "indexer": 6, "seer": 12,
                     # the arena (docs/methods.md "Sweep grids"): no window crossing
                     "streaming": 8, "topk": 3, "topp": 5, "h2o": 3, "moba": 9, "quest": 9,
                     "xattention": 12, "vertical-slash": 3, "sparge": 9}  # fmt: skip
    ts = sorted({p["t"] for p in M.METHODS["sf-distance"].grid(n)})
    assert ts == [0.5, 1.0, 2.0, 3.0, 5.0]
    assert sorted({p["random_keys"] for p in M.METHODS["bigbird"].grid(n)}) == [2, 8, 20]
    assert sorted({p["n_globals"] for p in M.METHODS["longformer"].grid(n)}) == [2, 8, 20]
    for name, key in (("reformer", "n_buckets"), ("sf-quantization", "n_buckets"),
                      ("routing", "n_clusters")):  # fmt: skip
        assert sorted({p[key] for p in M.METHODS[name].grid(n, art)}) == [2, 8, 20]
    km = {(p["n_clusters"], p["top_k"]) for p in M.METHODS["sf-kmeans"].grid(n, art)}
    assert km == {(b, k) for b in (4, 12, 20) for k in (1, 2, 3)}
    # an artefact fitted at none of the swept counts: every fitted count is swept
    other = fake_artefact(counts=(3, 5))
    assert {p["n_clusters"] for p in M.METHODS["sf-kmeans"].grid(n, other)} == {3, 5}
    # the sliders keep the paper's every value
    assert M.METHODS["routing"].params(n)[0].choices == [2, 4, 6, 8, 10, 12, 16, 20]
    assert sorted({p["stride"] for p in M.METHODS["strided"].grid(n)}) == [12, 23, 46]
    for name, m in M.METHODS.items():
        for p in m.grid(n, art):
            if name in ARENA + LEARNED:  # swept as published: no add-ons
                assert p["window"] == 0 and p["globals"] is False
            else:
                assert p["globals"] is True
            assert m.validate(n, p, art) == p  # every grid point is a clean parameter set


# ----------------------------------------------------------------------------- predict


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("name", ORDER)
def test_predict_is_finished(name, causal, ctx, ctx_causal):
    c = ctx_causal if causal else ctx
    n = c.n
    m = M.METHODS[name]
    for w, glob in ((0, False), (5, True), (1, False)):
        pred = m.predict(c, window=w, globals=glob)
        assert pred.shape == (c.layers, c.heads, n, n) and pred.dtype == torch.bool
        v = patterns.valid_region(n, causal)
        assert not (pred & ~v).any()  # AND the valid region last
        add = patterns.window(n, w, causal=causal)
        if glob:
            add = add | (patterns.global_tokens(n, (0, -1)) & v)
        assert (pred | ~add).all()  # the add-ons are always in
        if w == 0 and not glob and name not in ("bigbird", "longformer"):
            base = m.base(c, {k: v for k, v in m.defaults(n, c.artefact).items()
                              if k not in ("window", "globals")})  # fmt: skip
            assert torch.equal(pred, base.expand_as(pred) & v)


def test_predict_matches_the_definitions(ctx):
    n, qp, kp = ctx.n, ctx.proj_q, ctx.proj_k

    def fin(mask, w=3, g=True):
        return patterns.finish(mask.expand(2, 4, n, n), window=w, globals_=g, causal=False)

    kw = {"window": 3, "globals": True}
    assert torch.equal(
        M.METHODS["sf-distance"].predict(ctx, t=2.5, **kw), fin(sf_distance(qp, kp, 2.5))
    )
    assert torch.equal(M.METHODS["sf-quantization"].predict(ctx, n_buckets=4, **kw),
                       fin(sf_quantization(qp, kp, n_buckets=4)))  # fmt: skip
    cents = ctx.artefact.centroids[4]
    assert torch.equal(M.METHODS["sf-kmeans"].predict(ctx, n_clusters=4, top_k=2, **kw),
                       fin(sf_kmeans(qp, kp, cents, 2)))  # fmt: skip
    assert torch.equal(M.METHODS["fixed"].predict(ctx, stride=4, c=1, part="A2", **kw),
                       fin(patterns.fixed(n, 4, 1, causal=False, part="A2")))  # fmt: skip
    spread = torch.stack([patterns.fixed(n, 4, 2, causal=False, head=h) for h in range(4)])
    assert torch.equal(M.METHODS["fixed"].predict(ctx, stride=4, c=2, spread=True, **kw),
                       fin(spread[None]))  # fmt: skip
    assert torch.equal(M.METHODS["strided"].predict(ctx, stride=5, part="A1", **kw),
                       fin(patterns.strided(n, 5, causal=False, part="A1")))  # fmt: skip
    bb = M.METHODS["bigbird"].predict(ctx, random_keys=4, **kw)
    lf = M.METHODS["longformer"].predict(ctx, n_globals=3, **kw)
    for li in range(2):
        for hi in range(4):
            s = M.head_seed(li, hi)
            assert torch.equal(bb[li, hi], patterns.bigbird(n, random_keys=4, window=3, seed=s))
            want = patterns.longformer(n, width=3, n_globals=3, seed=s)
            assert torch.equal(lf[li, hi], want | patterns.global_tokens(n, (0, -1)))


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 40), w=st.integers(0, 9), glob=st.booleans(), causal=st.booleans(),
    k=st.integers(0, 12), seed=st.integers(0, 5000),
)  # fmt: skip
def test_bigbird_draws_equal_patterns_bigbird(n, w, glob, causal, k, seed):
    base = patterns.finish(torch.zeros(n, n, dtype=torch.bool), window=w, globals_=glob,
                           causal=causal)  # fmt: skip
    seeds = torch.tensor([seed, seed + 1])
    got = base | baselines.draws_mask(baselines.bigbird_draws(base, causal, seeds, k), n)
    for a, s in enumerate((seed, seed + 1)):
        want = patterns.bigbird(n, random_keys=k, window=w, globals_=(0, -1) if glob else (),
                                seed=s, causal=causal)  # fmt: skip
        assert torch.equal(got[a], want)


def test_assignments_equal_the_helpers(ctx):
    for b in (2, 4, 8):
        aq, ak = M.kmeans_assignments(ctx, b, min(3, b))
        assert torch.equal(aq, nearest_centroids(ctx.proj_q, ctx.artefact.centroids[b], min(3, b)))
        assert torch.equal(ak, nearest_centroids(ctx.proj_k, ctx.artefact.centroids[b], min(3, b)))
    with pytest.raises(SparsescopeError, match="n_clusters must be one of 2, 4, 8"):
        M.kmeans_assignments(ctx, 6, 1)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000), B=st.integers(1, 24), first=st.integers(1, 24),
    levels=st.integers(1, 3),
)  # fmt: skip
def test_nearest_order_is_a_stable_sort(seed, B, first, levels):
    """The first ranks by the compiled running minima (``_method_kernels.nearest_first``) equal
    a stable argsort of the squared distances (numpy's, the dims added in order), ties (points
    and centroids on a coarse grid) to the lower centroid; the leading dims broadcast."""
    from sparse_core.methods.learned import nearest_order

    rng = np.random.default_rng(seed)
    x = rng.integers(-levels, levels + 1, size=(2, 3, 11, 4)).astype(np.float64) / 2
    cent = rng.integers(-levels, levels + 1, size=(2, 3, B, 4)).astype(np.float64) / 2
    d = ((x[..., :, None, :] - cent[..., None, :, :]) ** 2).sum(-1)
    k = min(first, B)
    want = np.argsort(d, axis=-1, kind="stable")[..., :k]
    assert np.array_equal(nearest_order(x, cent, k), want)
    # one centroid set for every head (leading dims broadcast), real-valued distances
    x = rng.standard_normal((2, 3, 11, 4))
    cent = rng.standard_normal((1, 1, B, 4))
    d = ((x[..., :, None, :] - cent[..., None, :, :]) ** 2).sum(-1)
    want = np.argsort(d, axis=-1, kind="stable")[..., :k]
    assert np.array_equal(nearest_order(x, cent, k), want)


def test_needs_artefact(tiny_model):
    ctx = M.PredictContext.from_run(tiny_model.run(TEXT), None)
    with pytest.raises(SparsescopeError, match="sf-distance needs a Sparsefinder artefact"):
        M.METHODS["sf-distance"].predict(ctx)
    assert M.available(None) == [*PAPER[:7], *ARENA]
    assert set(PA.summary(ctx.out, None)) == set(M.available(None))


def test_reformer_and_routing_group_the_models_own_vectors_without_an_artefact(tiny_model, ctx):
    """No training needed: without an artefact they hash/cluster the raw queries and keys;
    with one, the projected ones (definitions §3), which gives other groups."""
    raw = M.PredictContext.from_run(tiny_model.run(TEXT), None)
    q, k = raw.hash_space()
    assert torch.equal(q, raw.out.queries.float()) and torch.equal(k, raw.out.keys.float())
    pq, pk = ctx.hash_space()
    assert pq.shape[-1] == ctx.artefact.rank and torch.equal(pq, ctx.proj_q)
    for name in ("reformer", "routing"):
        mask = M.METHODS[name].predict(raw)
        assert mask.shape == raw.out.graph.shape and mask.any()
        assert M.METHODS[name].predict(raw).equal(mask)  # deterministic (seeded rotations)


# ----------------------------------------------------------------------------- evaluation


def test_evaluate_and_summary(ctx):
    gold = ctx.out.graph
    for name in ORDER:
        m = M.METHODS[name]
        p = m.defaults(ctx.n, ctx.artefact)
        got = M.evaluate(ctx, name, p)
        pred = m.predict(ctx, **p)
        assert torch.equal(got["recall"], metrics.recall(pred, gold))
        assert torch.equal(got["sparsity"], metrics.sparsity(pred))
        assert torch.equal(got["exact"], metrics.exact(pred, gold))
        assert torch.equal(got["precision"], metrics.precision(pred, gold))
    s = PA.summary(ctx.out, ctx.artefact)
    assert list(s) == ORDER
    for name, v in s.items():
        want = M.evaluate(ctx, name, M.METHODS[name].defaults(ctx.n, ctx.artefact))
        assert set(v) == {"recall", "sparsity"}
        for k in v:
            assert v[k].shape == (2, 4)
            assert torch.allclose(v[k], want[k], atol=1e-12, rtol=0)


# ----------------------------------------------------------------------------- the page's data


def test_head_data_recomputes_every_mask(ctx):
    """head_data (GET …/heads/{layer}/{head}) carries what the page needs to rebuild each
    method's own mask for any slider value; rebuilt here from the JSON alone."""
    L, H, n = 1, 2, ctx.n
    d = M.head_data(ctx, L, H)
    assert set(d) == {"proj", "centroids", "reformer", "routing", "seed", "indexer", "seer",
                      "topk", "moba", "quest", "xattention", "sparge"}  # fmt: skip
    assert d == json.loads(json.dumps(d))  # plain JSON
    for name, m in M.METHODS.items():  # methods that give the same key give the same value
        for key, value in m.head_payload(ctx, L, H).items():
            assert d[key] == value, (name, key)
    # Reformer: every B, all rounds; a prefix of the rounds is the assignment for fewer
    assert list(d["reformer"]) == [str(b) for b in M.BUCKET_COUNTS]
    for b, rows in d["reformer"].items():
        assert len(rows) == M.REFORMER_MAX_ROUNDS and all(len(r) == n for r in rows)
        for rounds in (1, 3):
            bk = torch.tensor(rows[:rounds])
            mask = (bk[:, :, None] == bk[:, None, :]).any(0)
            pred = M.METHODS["reformer"].predict(ctx, n_buckets=int(b), rounds=rounds)[L, H]
            assert torch.equal(mask, pred)
    # Routing: per centroid, the queries and keys it took
    assert list(d["routing"]) == [str(c) for c in M.cluster_choices(n)]
    for c, mem in d["routing"].items():
        q = torch.zeros(int(c), n, dtype=torch.bool)
        k = torch.zeros(int(c), n, dtype=torch.bool)
        for i, (qi, ki) in enumerate(zip(mem["queries"], mem["keys"], strict=True)):
            q[i, qi], k[i, ki] = True, True
        pred = M.METHODS["routing"].predict(ctx, n_clusters=int(c))[L, H]
        assert torch.equal(baselines.members_mask(q, k), pred)
    # sf-*: the projections at full float32 precision, the centroids of every fitted B
    qp = torch.tensor(d["proj"]["queries"], dtype=torch.float32)
    kp = torch.tensor(d["proj"]["keys"], dtype=torch.float32)
    assert torch.equal(sf_distance(qp, kp, 1.5), M.METHODS["sf-distance"].predict(ctx, t=1.5)[L, H])
    assert torch.equal(sf_quantization(qp, kp, n_buckets=3),
                       M.METHODS["sf-quantization"].predict(ctx, n_buckets=3)[L, H])  # fmt: skip
    assert sorted(d["centroids"], key=int) == ["2", "4", "8"]
    cents = torch.tensor(d["centroids"]["4"], dtype=torch.float32)
    pred = M.METHODS["sf-kmeans"].predict(ctx, n_clusters=4, top_k=2)[L, H]
    assert torch.equal(sf_kmeans(qp, kp, cents, 2), pred)
    # BigBird and Longformer: the per-head seed of their draws
    assert d["seed"] == M.head_seed(L, H) == 1002
    want = patterns.bigbird(n, random_keys=5, window=3, seed=d["seed"])
    assert torch.equal(M.METHODS["bigbird"].predict(ctx, random_keys=5, window=3)[L, H], want)


def test_head_data_without_an_artefact(tiny_model):
    ctx = M.PredictContext.from_run(tiny_model.run(TEXT), None)
    d = M.head_data(ctx, 1, 3)
    assert (d["seed"], d["proj"], d["centroids"]) == (1003, None, {})
    # Reformer and Routing group the model's own queries and keys: their groups still come
    buckets = M.reformer_buckets(ctx, 4, 2)[1, 3].tolist()
    assert d["reformer"]["4"][:2] == buckets
    q, _ = M.routing_members(ctx, 2)
    assert d["routing"]["2"]["queries"] == [r.nonzero().flatten().tolist() for r in q[1, 3]]


class DiagonalMethod(M.Method):
    """A method written only as its class: the registry derives everything else from it."""

    name, label = "diagonal", "Diagonal (test)"

    def own_params(self, n, artefact=None):
        return [M.ParamSpec("offset", "offset", "int", 1, 0, n, 1, help="keys i − o … i")]

    def own_grid(self, n, artefact=None):
        return [{"offset": o} for o in (0, 2)]

    def base(self, ctx, p):
        d = torch.arange(ctx.n)[:, None] - torch.arange(ctx.n)[None, :]
        return (d >= 0) & (d <= p["offset"])


def test_a_new_method_needs_only_its_class(ctx, monkeypatch):
    """Registering a class is enough: specs, validation, the sweep engine (generic bitset path),
    the text sweep, the summary and the page's data all pick it up."""
    monkeypatch.setitem(M.METHODS, "diagonal", DiagonalMethod())
    assert M.available(None)[-1] == "diagonal"
    with pytest.raises(SparsescopeError) as err:
        M.get_method("diagonal").validate(ctx.n, {"offset": "1.5"})
    assert err.value.field == "offset"
    sweep = PA.sweep_text(ctx, methods=["diagonal"])
    grid = sweep.grids["diagonal"]
    assert len(grid) == 2 * len(M.sweep_windows(ctx.n))
    for k in (0, 7, len(grid) - 1):
        want = M.evaluate(ctx, "diagonal", grid[k])
        for metric, v in want.items():
            assert np.allclose(sweep.values["diagonal"][metric][k], v.numpy(), rtol=0, atol=1e-12)
    assert "diagonal" in PA.summary(ctx.out, ctx.artefact)
    assert set(M.head_data(ctx, 0, 0)) >= {"proj", "centroids", "reformer", "routing", "seed"}


def test_every_help_text_says_more_than_its_label():
    """A help text that repeats its label tells the reader nothing."""
    for method in M.METHODS.values():
        for s in method.params(64, None):
            assert s.help.strip().lower() != s.label.strip().lower(), (method.name, s.name)
            assert len(s.help) > len(s.label), (method.name, s.name)
