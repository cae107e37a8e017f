"""The Pareto sweeps (definitions §4): the bitset / window-crossing fast path equals explicit masks,
the per-text and corpus outputs have the documented shapes, pareto.json and its frontiers."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sparse_core import bitsets as B
from sparse_core import methods as M
from sparse_core import metrics, patterns
from sparse_core import pareto as PA
from sparse_core.errors import SparsescopeError
from sparse_core.sparsefinder import Artefact
from sparse_core.testing import random_selectors

TEXT = "The chef who ran to the store was out of food, so he went back."
TEXTS = [
    "A cat sat on the mat and looked at the bird outside the window for a long while.",
    "Sparse attention keeps only a few keys per query; the rest get exactly zero weight.",
    "He said that the river, which had flooded twice, was calm again by the end of May.",
]


def fake_artefact(L=2, H=4, d=8, seed=0, counts=(2, 4, 8)) -> Artefact:
    g = torch.Generator().manual_seed(seed)
    W = torch.randn(L, H, d, 4, generator=g) * 0.6
    cents = {b: torch.randn(L, H, b, 4, generator=g) for b in counts}
    art = Artefact("tiny", 1.5, 4, W, torch.zeros(L, H, 4), cents, {})
    art.learned = random_selectors(L, H, d, "tiny", 1.5, seed)  # indexer, seer (untrained)
    return art


def explicit(
    base: torch.Tensor, gold: torch.Tensor, w: int, causal: bool, probs: torch.Tensor | None = None
) -> dict:
    m = patterns.finish(base, window=w, globals_=False, causal=causal)
    mass = {} if probs is None else {"mass_recall": metrics.mass_recall(m, probs)}
    return {
        **mass,
        "sparsity": metrics.sparsity(m, causal=causal),
        "recall": metrics.recall(m, gold),
        "exact": metrics.exact(m, gold),
        "precision": metrics.precision(m, gold, causal=causal),
        **{f"block_{b}": v for b, v in metrics.block_sparsities(m, causal=causal).items()},
    }


# ----------------------------------------------------------------------------- bitsets


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 140), seed=st.integers(0, 10**6), causal=st.booleans())
def test_pack_roundtrip(n, seed, causal):
    g = torch.Generator().manual_seed(seed)
    m = torch.rand(3, n, n, generator=g) < 0.3
    bits = B.pack(m)
    assert bits.shape == (3, n, (n + 63) // 64) and bits.dtype == np.uint64
    assert np.array_equal(B.unpack(bits, n), m.numpy())
    assert np.array_equal(B.popcount(bits).sum(axis=(1, 2)), m.sum((1, 2)).numpy())


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(1, 130), seed=st.integers(0, 10**6), causal=st.booleans(),
    density=st.floats(0.0, 0.6), per_head=st.booleans(),
    windows=st.lists(st.sampled_from([0, 1, 2, 3, 5, 9, 27, 75, 251, 301]), min_size=1,
                     max_size=6),
)  # fmt: skip
def test_window_crossing_equals_explicit_masks(n, seed, causal, density, per_head, windows):
    """One pass over a base mask M gives the metrics of M ∪ W_w for every w (random cases)."""
    g = torch.Generator().manual_seed(seed)
    L, H = 2, 3
    v = patterns.valid_region(n, causal)
    gold = (torch.rand(L, H, n, n, generator=g) < 0.15) & v
    gold |= torch.eye(n, dtype=torch.bool)  # entmax keeps >= 1 key per row
    shape = (L, H, n, n) if per_head else (1, 1, n, n)
    base = (torch.rand(shape, generator=g) < density) & v
    # P: positive on the gold edges only, each row summing to 1 (as entmax's)
    probs = torch.where(gold, torch.rand(L, H, n, n, generator=g) + 0.01, 0.0)
    probs = probs / probs.sum(-1, keepdim=True)
    gd = B.Gold(gold, causal, probs)
    bits = B.pack(base.reshape(-1, n, n))[None]  # (1, A, n, W)
    got = B.evaluate_bits(gd, bits, windows)
    assert set(got) == set(B.METRICS)
    for q, w in enumerate(windows):
        want = explicit(base.expand(L, H, n, n), gold, w, causal, probs)
        for k in B.METRICS:
            assert np.allclose(got[k][0, q], want[k].flatten().numpy(), rtol=0, atol=1e-12), (k, w)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 200), seed=st.integers(0, 10**6))
def test_band_counts_brute_force(n, seed):
    g = torch.Generator().manual_seed(seed)
    m = torch.rand(2, n, n, generator=g) < 0.4
    hs = [-1, 0, 1, 5, 13, 40, 125, 300]
    got = B.band_counts(B.pack(m), n, hs)
    d = (torch.arange(n)[:, None] - torch.arange(n)[None, :]).abs()
    for q, h in enumerate(hs):
        assert np.array_equal(got[:, q], (m & (d <= h)).sum((1, 2)).numpy())


# ----------------------------------------------------------------------------- every method


@pytest.fixture(scope="module", params=[False, True], ids=["bidirectional", "causal"])
def ctx(request, tiny_model):
    out = tiny_model.run(TEXT, causal=request.param)
    return M.PredictContext.from_run(out, fake_artefact())


@pytest.mark.parametrize("name", list(M.METHODS))
def test_sweep_points_equal_evaluate_on_explicit_masks(name, ctx):
    method = M.METHODS[name]
    grid = method.grid(ctx.n, ctx.artefact)
    extra = [  # off-grid points: add-ons off / on, other own parameters
        {**method.defaults(ctx.n, ctx.artefact), "window": w, "globals": g}
        for w in (0, 2, 4) for g in (False, True)
    ]  # fmt: skip
    pts = grid[::3] + extra
    fast = PA.sweep_points(ctx, method, pts)
    for k, p in enumerate(pts):
        slow = M.evaluate(ctx, method, p)
        for metric in B.METRICS:
            assert torch.allclose(fast[metric][k], slow[metric], rtol=0, atol=1e-12), (p, metric)


@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
def test_summary_is_the_explicit_masks_figures_bit_for_bit(causal, tiny_model):
    """The analyze body's summary (every method at its defaults on every head, the fast
    engines: threshold counts, distance bins, tile maxima…) equals, to the last bit, the recall
    and sparsity of each method's explicit mask (``methods.evaluate``), on a text of several
    16-tiles with a ragged last one: a faster engine may not move one figure of the body."""
    out = tiny_model.run(" ".join([TEXT] * 4), causal=causal)
    ctx = M.PredictContext.from_run(out, fake_artefact())
    assert ctx.n % 16 and ctx.n > 64
    gold, tables = PA.summary_tables([ctx])[0]
    assert list(tables) == M.available(ctx.artefact)
    assert np.array_equal(gold, B.Gold.of(ctx).sparsity())
    for name, got in tables.items():
        want = M.evaluate(ctx, name, M.METHODS[name].defaults(ctx.n, ctx.artefact))
        for k in ("recall", "sparsity"):
            assert torch.equal(got[k], want[k].reshape(got[k].shape)), (name, k)


def test_tile_max16_is_maximum_reduceat():
    """``selection.tile_max16`` (torch's max_pool1d) is numpy's ``maximum.reduceat`` over the
    16-column tiles exactly: ragged last tiles, rows shorter than a tile, −∞ entries, ties."""
    from sparse_core.methods.selection import tile_max16

    rng = np.random.default_rng(0)
    for n in (1, 5, 15, 16, 17, 33, 70, 494):
        v = np.round(rng.standard_normal((9, n)), 1).astype(np.float32)  # many ties
        v[rng.random(v.shape) < 0.3] = -np.inf
        v[0] = -np.inf
        want = np.maximum.reduceat(v, np.arange(0, n, 16), axis=1)
        got = tile_max16(v)
        assert got.dtype == want.dtype and np.array_equal(got, want), n


def test_sweep_points_per_head_own_masks(ctx):
    """A text-independent own mask that differs per head (fixed with spread heads, shape
    (1, H, n, n)) is measured per head, for L > 1 layers too."""
    pts = [{"stride": 4, "c": c, "spread": True, "window": w, "globals": g}
           for c in (1, 2) for w in (0, 3) for g in (False, True)]  # fmt: skip
    fast = PA.sweep_points(ctx, "fixed", pts)
    for k, p in enumerate(pts):
        slow = M.evaluate(ctx, "fixed", p)
        for metric in B.METRICS:
            assert torch.allclose(fast[metric][k], slow[metric], rtol=0, atol=1e-12), (p, metric)


def test_sweep_points_errors(tiny_model):
    ctx = M.PredictContext.from_run(tiny_model.run(TEXT), None)
    with pytest.raises(SparsescopeError, match="sf-kmeans needs a Sparsefinder artefact") as err:
        PA.sweep_points(ctx, "sf-kmeans", [{}])
    assert err.value.field == "method"
    with pytest.raises(SparsescopeError, match=r"stride must be an integer in \[1, \d+\]") as err:
        PA.sweep_points(ctx, "strided", [{}, {"stride": "inf"}])
    assert err.value.field == "stride"
    empty = PA.sweep_points(ctx, "window", [])
    assert {k: v.shape for k, v in empty.items()} == {k: (0, 2, 4) for k in B.METRICS}


def test_distance_thresholds_exact_at_ties(tiny_model):
    out = tiny_model.run(TEXT)
    n = out.n
    ctx = M.PredictContext.from_run(out, fake_artefact())
    # keys whose squared distance to the (zero) queries is exactly a grid threshold or just off it
    qp = torch.zeros(2, 4, n, 4)
    kp = torch.zeros(2, 4, n, 4)
    vals = torch.tensor([0.5, 1.0, 2.0, 1.0000001, 0.9999999, 4.5, 5.0, 2.25])
    kp[..., 0] = vals.repeat(n // len(vals) + 1)[:n].sqrt()
    kp[..., 1] = 0.1 * torch.arange(n) % 1.0
    ctx = M.PredictContext(out, ctx.artefact, qp, kp)
    pts = [
        {"t": t, "window": w, "globals": False} for t in (0.5, 1.0, 2.0, 5.0, 0.3) for w in (0, 3)
    ]
    fast = PA.sweep_points(ctx, "sf-distance", pts)
    for k, p in enumerate(pts):
        slow = M.evaluate(ctx, "sf-distance", p)
        for metric in B.METRICS:
            assert torch.equal(fast[metric][k], slow[metric]), (p, metric)


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 10_000), n=st.integers(1, 40), scale=st.sampled_from([0.25, 1.0, 3.0]),
    ts=st.sampled_from([[0.5, 1.0, 2.0, 5.0], [0.0, 0.5, 10.0], [0.3, 1.7, 2.25]]),
)  # fmt: skip
def test_distance_bits_equal_sf_distance(seed, n, scale, ts):
    """The float32 distances by one matrix product plus the exact recount near a threshold give
    ``sparsefinder.sf_distance`` bit for bit: projections on a grid put many distances exactly
    on the thresholds, noise just off them; binned (every 2t whole) and plain thresholds."""
    from sparse_core.methods.distance_bits import distance_bits
    from sparse_core.sparsefinder import sf_distance

    g = torch.Generator().manual_seed(seed)
    grid = lambda: torch.randint(-4, 5, (2, 3, n, 4), generator=g).float() / 2  # noqa: E731
    qp, kp = grid() * scale, grid() * scale
    kp += (torch.rand(kp.shape, generator=g) < 0.2) * 1e-7
    got = distance_bits(qp, kp, ts)  # bits past column n are left undefined (∩ V later)
    for b, t in enumerate(ts):
        want = sf_distance(qp, kp, t).reshape(-1, n, n).numpy()
        assert np.array_equal(B.unpack(got[b], n), want), t


# ----------------------------------------------------------------------------- text sweep


POINT_KEYS = {
    "method",
    "params",
    "sparsity",
    "recall",
    "exact",
    "precision",
    "mass_recall",
    "block_sparsity",
}


def check_points_body(body: dict, scope: str, x: str = "sparsity", block=None) -> None:
    assert set(body) == {"scope", "gold_sparsity", "x", "block", "points", "frontiers"}
    assert body["scope"] == scope and 0 <= body["gold_sparsity"] <= 1
    assert (body["x"], body["block"]) == (x, block)
    pts = body["points"]
    for p in pts:
        assert set(p) == POINT_KEYS
        assert p["method"] in M.METHODS and isinstance(p["params"], dict)
        for k in ("sparsity", "recall", "exact", "precision"):
            assert isinstance(p[k], float) and 0.0 <= p[k] <= 1.0
        assert list(p["block_sparsity"]) == ["16", "32", "64", "128"]
        for v in p["block_sparsity"].values():
            assert isinstance(v, float) and 0.0 <= v <= 1.0
    assert list(body["frontiers"]) == list(dict.fromkeys(p["method"] for p in pts))
    xs = [p["sparsity"] if x == "sparsity" else p["block_sparsity"][str(block)] for p in pts]
    for name, front in body["frontiers"].items():
        idx = [k for k, p in enumerate(pts) if p["method"] == name]
        assert all(pts[k]["method"] == name for k in front)
        want = metrics.pareto_front([(xs[k], pts[k]["recall"]) for k in idx])
        assert front == [idx[k] for k in want]


def test_sweep_text_points(ctx):
    sw = PA.sweep_text(ctx)
    assert list(sw.grids) == list(M.METHODS)
    for name, grid in sw.grids.items():
        assert grid == M.METHODS[name].grid(ctx.n, ctx.artefact)
        assert sw.values[name]["recall"].shape == (len(grid), 2, 4)
    head = sw.points(1, 2)
    check_points_body(head, "head")
    mean = sw.points()
    check_points_body(mean, "mean")
    check_points_body(sw.points(1, 2, "block", 16), "head", "block", 16)
    check_points_body(sw.points(x="block"), "mean", "block", 64)
    assert [p for p in sw.points(x="block")["points"]] == mean["points"]  # only frontiers move
    with pytest.raises(SparsescopeError, match="block must be one of 16, 32, 64, 128") as err:
        sw.points(x="block", block=48)
    assert err.value.field == "block"
    with pytest.raises(SparsescopeError, match="x must be one of sparsity, block") as err:
        sw.points(x="tokens")
    assert err.value.field == "x"
    k = 5
    assert mean["points"][k]["recall"] == round(float(sw.values["window"]["recall"][k].mean()), 6)
    small = PA.sweep_text(ctx, methods=["window", "sf-distance"], per_head=False)
    assert list(small.grids) == ["window", "sf-distance"]
    assert small.points()["points"] == [
        p for p in mean["points"] if p["method"] in ("window", "sf-distance")
    ]


# ----------------------------------------------------------------------------- corpus sweep


def test_corpus_sweep_json_and_html(tiny_model, tmp_path):
    from sparsescope.commands.pareto import write_outputs

    art = fake_artefact()
    names = ["window", "bigbird", "sf-distance", "sf-kmeans"]  # fidelity: frontiers, 1 text
    sweep = PA.sweep_corpus(tiny_model, TEXTS, art, methods=names, progress=False,
                            fidelity_texts=1)  # fmt: skip
    body = sweep.to_json()
    assert list(body) == ["model", "alpha", "causal", "texts", "gold_sparsity", "x", "block",
                          "points", "frontiers"]  # fmt: skip
    assert body["model"] == tiny_model.model_id and body["alpha"] == 1.5
    assert body["causal"] is False and body["texts"] == 3
    for p in body["points"]:
        assert set(p) == POINT_KEYS | {"fidelity"}
    fronts = body["frontiers"]
    assert list(fronts) == names
    for name, front in fronts.items():
        idx = [k for k, p in enumerate(body["points"]) if p["method"] == name]
        pts = body["points"]
        want = metrics.pareto_front([(pts[k]["sparsity"], pts[k]["recall"]) for k in idx])
        assert front == [idx[k] for k in want]
        for k in idx:
            f = pts[k]["fidelity"]
            assert (f is not None) == (k in front)
            assert f is None or -1.0 <= f <= 1.0 + 1e-9
    # per head, the mean over texts (each text weighted equally), then over heads (definitions §4)
    per_text = []
    for t in TEXTS:
        ctx = M.PredictContext.from_run(tiny_model.run(t), art)
        per_text.append(PA.sweep_points(ctx, "sf-distance", sweep.grids["sf-distance"]))
    rec, _ = metrics.aggregate([x["recall"][3] for x in per_text])
    got = [p for p in body["points"] if p["method"] == "sf-distance"][3]["recall"]
    assert got == round(float(rec.mean()), 6)
    # block sparsity as the x-axis: same points, frontiers over (block sparsity at 128, recall)
    blk = sweep.to_json("block", 128)
    assert (blk["x"], blk["block"]) == ("block", 128)
    for name, front in blk["frontiers"].items():
        idx = [k for k, p in enumerate(blk["points"]) if p["method"] == name]
        pts = blk["points"]
        want = metrics.pareto_front(
            [(pts[k]["block_sparsity"]["128"], pts[k]["recall"]) for k in idx]
        )
        assert front == [idx[k] for k in want]
    js, html = write_outputs(sweep, tmp_path / "out", {"note": "test"})
    assert json.loads(js.read_text()) == json.loads(json.dumps(body))
    page = html.read_text()
    assert "plotly" in page.lower() and len(page) > 1_000_000  # plotly.js inlined
    assert '<script src="http' not in page and "<script src='http" not in page
    assert (tmp_path / "out" / "pareto-run.json").is_file()


def test_totals_merge_equals_one_pass(tiny_model):
    art = fake_artefact()
    grids = PA.corpus_grids(["window", "sf-quantization"], 40, 10, art)
    whole = PA.sweep_inputs(tiny_model, TEXTS, art, grids)
    part = PA.sweep_inputs(tiny_model, TEXTS[:1], art, grids)
    part.merge(PA.sweep_inputs(tiny_model, TEXTS[1:], art, grids))
    assert part.texts == whole.texts == 3
    for name in grids:
        for k in B.METRICS:
            assert np.allclose(part.sums[name][k], whole.sums[name][k], rtol=0, atol=1e-12)


def test_corpus_grids_keep_points_valid_for_the_shortest_input():
    g = PA.corpus_grids(["window", "strided"], 512, 10, None)
    assert max(p["window"] for p in g["window"]) == 19  # 2 * 10 - 1
    assert all(p["stride"] <= 10 for p in g["strided"])


# ----------------------------------------------------------------------------- the command


WIKI = """ = First article =

 The first article has a few sentences . It is about nothing in particular .

 = Second article =

 The second one talks about rivers , boats and the sea . Boats float .

 = Third article =

 A third article closes the corpus with one more paragraph of text .
"""


def test_select_inputs_held_out(tiny_model, tmp_path):
    import argparse

    from sparse_core.corpus import file_digest
    from sparsescope.commands.pareto import select_inputs

    f = tmp_path / "wiki.txt"
    f.write_text(WIKI)
    args = argparse.Namespace(corpus=[str(f)], format="auto", max_tokens=24, min_tokens=1,
                              held_out=False, skip=0, limit=None)  # fmt: skip
    every, _ = select_inputs(args, tiny_model.tokenizer, None)
    assert len(every) >= 3
    art = fake_artefact()
    fitted = {"sha256": file_digest(f), "inputs_used": 2, "documents_seen": 1}
    art.meta = {"max_tokens": 24, "corpus": [fitted]}
    args.held_out = True
    held, described = select_inputs(args, tiny_model.tokenizer, art)
    assert held == every[2:] and described[0]["first_input"] == 2
    args.max_tokens = 40  # another packing: inputs made only of documents the fit never read
    held2, _ = select_inputs(args, tiny_model.tokenizer, art)
    assert held2 and all("first article" not in t for t in held2)
    args.max_tokens, args.skip, args.limit = 24, 1, 1
    assert select_inputs(args, tiny_model.tokenizer, art)[0] == held[1:2]


@pytest.mark.real_model
@pytest.mark.slow
def test_pareto_command(tmp_path, capsys):
    from sparsescope.cli import main

    f = tmp_path / "wiki.txt"
    f.write_text(WIKI)
    out = tmp_path / "out"
    argv = ["pareto", "--corpus", str(f), "--max-tokens", "24", "--min-tokens", "8",
            "--methods", "window,fixed", "--workers", "1", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    body = json.loads((out / "pareto.json").read_text())
    assert list(body["frontiers"]) == ["window", "fixed"] and body["texts"] >= 3
    assert "best frontier recall" in capsys.readouterr().out
    heads = np.load(out / "pareto-heads.npz")
    n_points = sum(p["method"] == "window" for p in body["points"])
    assert heads["window/recall"].shape == (n_points, 6, 12)
    assert main([*argv[:-2], "--methods", "nope", "--out", str(out)]) == 2
    assert "unknown method 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize("causal", [False, True])
def test_gold_sparsity_from_edges(tiny_model, causal):
    out = tiny_model.run(TEXT, causal=causal)
    want = metrics.sparsity(out.graph, causal=causal).numpy()
    assert np.allclose(B.Gold(out.graph, causal).sparsity(), want, rtol=0, atol=1e-12)


def test_length_chunks_keep_a_length_together_longest_first():
    counts = [5] * 9 + [4] * 3 + [3] * 17 + [2]
    texts = [f"t{i}" for i in range(len(counts))]
    chunks = PA.corpus_sweep.length_chunks(texts, counts, workers=2)
    assert sorted(t for c in chunks for t in c) == sorted(texts)  # each text once
    lengths = [{counts[int(t[1:])] for t in c} for c in chunks]
    assert all(len(s) == 1 for s in lengths)  # one length per chunk
    order = [s.pop() for s in lengths]
    assert order == sorted(order, reverse=True)  # longest first
    assert max(map(len, chunks)) <= 4 and [len(c) for c in chunks[:3]] == [3, 3, 3]


@pytest.mark.slow
def test_corpus_sweep_with_a_worker_process_equals_one_process(tmp_path):
    """workers = 2: this process and one spawned worker share the chunks; the sums are merged in
    chunk order, so every per-head figure equals the one-process sweep's (same texts)."""
    from sparse_core.model import load_model
    from sparse_core.testing import write_tiny_checkpoint

    path = write_tiny_checkpoint(tmp_path / "tiny-bert", "bert", seed=2)
    model = load_model(path, device="cpu")
    texts = TEXTS * 3  # several chunks
    kw = dict(methods=["window", "bigbird", "reformer", "routing"], progress=False)
    one = PA.sweep_corpus(model, texts, None, **kw)
    two = PA.sweep_corpus(model, texts, None, workers=2, model_path=path, **kw)
    assert two.texts == one.texts == len(texts) and two.meta["tokens"] == one.meta["tokens"]
    assert two.to_json()["frontiers"] == one.to_json()["frontiers"]
    for name, acc in one.per_head.sums.items():
        for m, v in acc.items():
            assert np.allclose(two.per_head.sums[name][m], v, rtol=0, atol=1e-9), (name, m)


@pytest.mark.slow
def test_corpus_sweep_with_workers_started_ahead(tmp_path, monkeypatch):
    """``pool=``: workers started ahead (``corpus_sweep.Workers``, as ``sparsescope pareto``
    starts them before loading its model) run the chunks — no other pool is made — and the
    sums equal, bit for bit, those of the sweep that starts its own; a pool started for other
    settings (threads) is left alone and the sweep makes its own."""
    import concurrent.futures

    from sparse_core.model import load_model
    from sparse_core.testing import write_tiny_checkpoint

    path = write_tiny_checkpoint(tmp_path / "tiny-bert", "bert", seed=2)
    model = load_model(path, device="cpu")
    texts = TEXTS * 3
    kw = dict(methods=["window", "bigbird"], progress=False, workers=2, model_path=path)
    own = PA.sweep_corpus(model, texts, None, **kw)
    made = []
    real = concurrent.futures.ProcessPoolExecutor

    def counted(*a, **k):
        made.append(1)
        return real(*a, **k)

    with PA.corpus_sweep.Workers(2, 1, path, False, 1.5) as pool:
        monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", counted)
        ahead = PA.sweep_corpus(model, texts, None, pool=pool, **kw)
        assert made == []
        other = PA.sweep_corpus(model, texts, None, pool=pool, threads=2, **kw)
        assert made == [1]
    assert other.texts == ahead.texts == own.texts and ahead.to_json() == own.to_json()
    for name, acc in own.per_head.sums.items():
        for m, v in acc.items():
            assert np.array_equal(ahead.per_head.sums[name][m], v), (name, m)


@pytest.mark.slow
def test_corpus_sweep_worker_failure_is_raised(tiny_model, tmp_path):
    """A worker that cannot start (no model at model_path) fails the sweep, not a silent gap."""
    from concurrent.futures.process import BrokenProcessPool

    with pytest.raises((BrokenProcessPool, SparsescopeError, OSError)):
        PA.sweep_corpus(tiny_model, TEXTS * 3, None, methods=["window"], workers=2,
                        model_path=tmp_path / "missing", progress=False)  # fmt: skip
