"""The head grid's thumbnails in the analysis body (app/engine/thumbs.py): max pooling over exact
blocks, the √p states, the two-cells-per-character strings, and the body's ``thumbs`` field."""

from __future__ import annotations

import pytest
import torch

from sparsescope.engine.thumbs import (
    ALPHABET,
    THUMB,
    bounds,
    decode,
    encode,
    encode_rows,
    head_thumbs,
    pool_max,
    states,
)


def reference_pool(p: torch.Tensor, k: int) -> torch.Tensor:
    """Max over each block, one block at a time, with the page's block edges written out
    (thumbImage, frontend/js/grid.js: rows ⌊a·n/k⌋ up to ⌊(a+1)·n/k⌋, at least one)."""
    n = p.shape[-1]
    out = torch.empty(k, k)
    for a in range(k):
        i0 = (a * n) // k
        i1 = max(i0 + 1, ((a + 1) * n) // k)
        for b in range(k):
            j0 = (b * n) // k
            j1 = max(j0 + 1, ((b + 1) * n) // k)
            best = 0.0
            for i in range(i0, i1):
                for j in range(j0, j1):
                    best = max(best, float(p[i, j]))
            out[a, b] = best
    return out


def sparse_probs(shape, seed: int) -> torch.Tensor:
    """Random non-negative maps with about half the entries exactly 0."""
    g = torch.Generator().manual_seed(seed)
    p = torch.rand(*shape, generator=g)
    return torch.where(torch.rand(*shape, generator=g) < 0.5, torch.zeros_like(p), p)


@pytest.mark.parametrize(
    ("n", "k"),
    [(50, 24), (31, 24), (25, 24), (48, 24), (7, 7), (9, 4), (13, 5), (1, 1), (24, 24), (23, 3)],
)
def test_pool_max_is_the_max_over_each_block(n, k):
    p = sparse_probs((2, 3, n, n), seed=n * 100 + k)
    got = pool_max(p, k)
    assert got.shape == (2, 3, k, k)
    for li in range(2):
        for hi in range(3):
            assert torch.equal(got[li, hi], reference_pool(p[li, hi], k)), (li, hi)


def test_pool_max_at_512_tokens_matches_the_reference_on_every_block():
    p = sparse_probs((1, 1, 512, 512), seed=7)
    # a single non-zero in the last row and column: the last block must hold it, alone
    p[0, 0, -1, -1] = 0.0
    p[0, 0, -1, :] = 0.0
    p[0, 0, :, -1] = 0.0
    p[0, 0, 510:, 510:] = 0.0
    p[0, 0, 511, 511] = 0.25
    got = pool_max(p, 24)[0, 0]
    assert torch.equal(got, reference_pool(p[0, 0], 24))
    assert got[-1, -1] >= 0.25


def test_blocks_partition_the_tokens_and_the_last_one_ends_at_n():
    for n in (1, 5, 24, 25, 47, 49, 100, 511, 512):
        k = min(n, THUMB)
        b = bounds(n, k)
        assert len(b) == k
        covered = [i for lo, hi in b for i in range(lo, hi)]
        assert covered == list(range(n)), n  # every token once, in order
        sizes = {hi - lo for lo, hi in b}
        assert max(sizes) - min(sizes) <= 1, (n, sizes)  # ragged by at most one row
        assert b[-1][1] == n
    assert {hi - lo for lo, hi in bounds(512, 24)} == {21, 22}


def test_pool_max_rejects_bad_shapes():
    with pytest.raises(ValueError, match="square"):
        pool_max(torch.zeros(3, 4), 2)
    with pytest.raises(ValueError, match="k must be"):
        pool_max(torch.zeros(3, 3), 4)


def test_states_keep_every_nonzero_visible_and_zero_white():
    p = torch.tensor([0.0, 1e-30, 1e-4, 1 / 36, 0.25, 0.5, 0.99, 1.0])
    s = states(p).tolist()
    assert s[0] == 0  # exact zero only
    assert s[1] == 1 and s[2] == 1  # the smallest p > 0 still gets the lightest tint
    assert s[3] == 2  # √p = 1/6: the second stop
    assert s[4] == 4  # √p = 1/2
    assert s[-1] == 7 and s[-2] == 7
    assert all(0 <= v <= 7 for v in s)


@pytest.mark.parametrize("count", [1, 2, 25, 576])
def test_encode_decode_round_trip(count):
    g = torch.Generator().manual_seed(count)
    cells = torch.randint(0, 8, (count,), generator=g, dtype=torch.uint8)
    text = encode(cells)
    assert len(text) == (count + 1) // 2
    assert set(text) <= set(ALPHABET)
    assert decode(text, count) == cells.tolist()


@pytest.mark.parametrize(("rows", "count"), [(1, 1), (72, 25), (3, 576), (5, 2), (0, 4)])
def test_encode_rows_is_encode_of_each_row(rows, count):
    g = torch.Generator().manual_seed(rows * 1000 + count)
    cells = torch.randint(0, 8, (rows, count), generator=g, dtype=torch.uint8)
    assert encode_rows(cells) == [encode(row) for row in cells]


def test_head_thumbs_of_a_run(tiny_model):
    out = tiny_model.run("The chef who ran to the store was out of food.", alpha=1.5)
    th = head_thumbs(out)
    k = min(out.n, THUMB)
    assert th["k"] == k
    assert len(th["cells"]) == out.layers * out.heads
    want = states(pool_max(out.probs, k))
    for idx, text in enumerate(th["cells"]):
        li, hi = divmod(idx, out.heads)
        assert decode(text, k * k) == want[li, hi].flatten().tolist()
        # every query attends somewhere: every row of the thumbnail has a coloured cell
        grid = torch.tensor(decode(text, k * k)).view(k, k)
        assert bool((grid > 0).any(1).all()), (li, hi)


def test_analysis_body_carries_every_heads_thumbnail(client):
    text = " ".join(f"word{k}" for k in range(400))  # over the limit: a 512-token window
    r = client.post("/api/analyze", json={"text": text, "truncate": True})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["n"] == 512
    th = body["thumbs"]
    assert th["k"] == min(body["n"], THUMB) == 24
    assert len(th["cells"]) == body["layers"] * body["heads"]
    assert all(len(c) == 24 * 24 // 2 for c in th["cells"])
    # the same body from the cache
    again = client.get(f"/api/analyses/{body['id']}").json()
    assert again["thumbs"] == th


@pytest.mark.parametrize("k", [3, 7, 24])
def test_thumbs_of_a_sparse_run_equal_the_dense_ones(tiny_model, k):
    """A long run's store is CSR (sparse_core.sparse_probs): its thumbnails are pooled from the
    edges alone and equal those of the same run kept dense."""
    from sparse_core.sparse_probs import SparseProbs

    out = tiny_model.run("The chef who ran to the store was out of food, so he went back.")
    dense = head_thumbs(out, k)
    import dataclasses

    csr = dataclasses.replace(out, attn=SparseProbs.csr_from_dense(out.probs))
    assert not csr.attn.is_dense
    assert head_thumbs(csr, k) == dense
