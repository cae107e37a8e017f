"""Level of detail (app/engine/lod.py): the max-pooled pyramid never drops a gold edge, its
level-0 tiles are the dense head's slices, and the tile endpoint's contract and errors."""

from __future__ import annotations

import math

import pytest
import torch

from sparsescope.engine import lod


def sparse_probs(n: int, seed: int, density: float = 0.01) -> torch.Tensor:
    """A random (n, n) matrix of probabilities with exact zeros (a stand-in for one head's P)."""
    g = torch.Generator().manual_seed(seed)
    keep = torch.rand(n, n, generator=g) < density
    return torch.where(keep, torch.rand(n, n, generator=g) + 1e-7, torch.zeros(n, n))


def cells_of(body: dict) -> dict[tuple[int, int], tuple[float, int]]:
    return {
        (a, b): (p, c)
        for a, b, p, c in zip(body["i"], body["j"], body["p"], body["count"], strict=True)
    }


@pytest.mark.parametrize("n", [1, 7, 255, 256, 257, 600, 1100])
def test_levels_and_overview_size(n):
    info = lod.lod_info(n)
    top = info["top"]
    assert lod.side(n, top) <= lod.TILE  # the overview is one tile of ≤ 256 cells
    assert top == 0 or lod.side(n, top - 1) > lod.TILE  # … and the finest such level
    assert [lv["factor"] for lv in info["levels"]] == [1 << k for k in range(top + 1)]
    assert info["levels"][top]["tiles"] == 1
    assert info["levels"][0]["tiles"] == math.ceil(n / lod.TILE)


@pytest.mark.parametrize(("n", "seed"), [(37, 0), (300, 1), (600, 2), (1030, 3)])
def test_no_gold_edge_is_dropped_at_any_level(n, seed):
    """Property: every gold edge (P_ij > 0) lies in a listed cell of every level whose p is at
    least P_ij; every listed cell holds a gold edge; p is the block's max and count its edges."""
    p = sparse_probs(n, seed, density=0.004 if n > 500 else 0.05)
    gold = p.nonzero().tolist()
    for level in range(lod.top(n) + 1):
        f = 1 << level
        k = lod.tiles(n, level)
        cells = {}
        for ti in range(k):
            for tj in range(k):
                body = lod.tile_body(p, level, ti, tj)
                base_r, base_c = ti * lod.TILE, tj * lod.TILE
                for (a, b), v in cells_of(body).items():
                    cells[(base_r + a, base_c + b)] = v
        for i, j in gold:
            got = cells.get((i // f, j // f))
            assert got is not None, f"gold edge ({i}, {j}) dropped at level {level}"
            assert torch.tensor(got[0], dtype=torch.float32) >= p[i, j]  # p sent exactly
        for (a, b), (pmax, count) in cells.items():
            block = p[a * f : (a + 1) * f, b * f : (b + 1) * f]
            assert count == int((block > 0).sum()) > 0
            assert torch.tensor(pmax, dtype=torch.float32) == block.max()


def test_level_zero_tiles_are_the_dense_slices():
    n = 600
    p = sparse_probs(n, 5, density=0.02)
    for ti in range(lod.tiles(n, 0)):
        for tj in range(lod.tiles(n, 0)):
            body = lod.tile_body(p, 0, ti, tj)
            r0, r1 = body["rows"]
            c0, c1 = body["cols"]
            dense = torch.zeros(r1 - r0, c1 - c0)
            for a, b, v in zip(body["i"], body["j"], body["p"], strict=True):
                dense[a, b] = v
            want = p[r0:r1, c0:c1]
            assert torch.equal(dense > 0, want > 0)
            assert torch.equal(dense, want)
            assert set(body["count"]) <= {1}


@pytest.mark.parametrize(
    ("level", "ti", "tj", "field"),
    [(-1, 0, 0, "level"), (3, 0, 0, "level"), (0, 3, 0, "ti"), (0, 0, -1, "tj"), (2, 1, 0, "ti")],
)
def test_bad_tile_index_names_its_field(level, ti, tj, field):
    from sparse_core.errors import SparsescopeError

    with pytest.raises(SparsescopeError) as err:
        lod.check_tile(600, level, ti, tj)  # levels 0..2, tiles a side 3, 2, 1
    assert err.value.field == field
    assert "must be in" in str(err.value)


# ----------------------------------------------------------------------------- the endpoint


@pytest.fixture(scope="module")
def long_client(tmp_path_factory):
    """The app on a tiny model with 1,024 positions (its default cap raised to match)."""
    from fastapi.testclient import TestClient

    from sparse_core.testing import tiny_model
    from sparsescope.engine.service import AnalysisService
    from sparsescope.engine.settings import Settings
    from sparsescope.web.main import create_app

    model = tiny_model(layers=1, heads=2, max_positions=1024)
    settings = Settings(data_dir=tmp_path_factory.mktemp("lod"), warmup=False, max_tokens=1024)
    service = AnalysisService(settings, model=model)
    with TestClient(create_app(settings, service)) as client:
        text = " ".join(f"word{k % 97} tok{k % 13}" for k in range(400))
        body = client.post("/api/analyze", json={"text": text, "truncate": True}).json()
        assert body["n"] > 512, body["n"]
        yield client, body, service


def test_tile_endpoint_matches_the_head(long_client):
    client, body, service = long_client
    aid, n = body["id"], body["n"]
    head = client.get(f"/api/analyses/{aid}/heads/0/1").json()
    assert head["lod"] == lod.lod_info(n)
    edges = {(i, j): p for i, j, p in head["edges"]}
    # level 0: the union of the tiles is exactly the head's edges
    got = {}
    for ti in range(head["lod"]["levels"][0]["tiles"]):
        for tj in range(head["lod"]["levels"][0]["tiles"]):
            r = client.get(f"/api/analyses/{aid}/heads/0/1/tiles/0/{ti}/{tj}")
            assert r.status_code == 200
            t = r.json()
            for a, b, p in zip(t["i"], t["j"], t["p"], strict=True):
                got[(t["rows"][0] + a, t["cols"][0] + b)] = p
    assert got == edges
    # the overview: one tile, ≤ 256 cells a side, every gold edge's block listed
    top = head["lod"]["top"]
    ov = client.get(f"/api/analyses/{aid}/heads/0/1/tiles/{top}/0/0").json()
    f = ov["factor"]
    assert max(ov["cells"]) <= 256 and f > 1
    listed = set(zip(ov["i"], ov["j"], strict=True))
    assert {(i // f, j // f) for i, j in edges} == listed
    assert sum(ov["count"]) == len(edges)


@pytest.mark.parametrize(
    ("path", "status", "field"),
    [
        # a tile (or head) this analysis does not have: 404 naming it
        ("heads/0/0/tiles/9/0/0", 404, "level"),
        ("heads/0/0/tiles/0/7/0", 404, "ti"),
        ("heads/0/0/tiles/0/0/-1", 404, "tj"),
        ("heads/0/5/tiles/0/0/0", 404, "head"),
        ("heads/0/0/tiles/x/0/0", 422, None),
    ],
)
def test_tile_endpoint_bad_input(long_client, path, status, field):
    client, body, _ = long_client
    r = client.get(f"/api/analyses/{body['id']}/{path}")
    assert r.status_code == status, r.text
    if field:
        assert r.json()["field"] == field
        assert "must be in" in r.json()["detail"]


def test_tile_endpoint_unknown_id(long_client):
    client, _, _ = long_client
    r = client.get("/api/analyses/" + "0" * 32 + "/heads/0/0/tiles/0/0/0")
    assert r.status_code == 404
    assert r.json()["detail"]


@pytest.mark.parametrize(("n", "seed", "dense"), [(37, 4, False), (600, 5, False), (1030, 6, True)])
def test_tiles_from_a_sparse_store_s_row_edges_equal_the_dense_head_s(n, seed, dense):
    """A long text's tile is made from the edges of its rows (``SparseProbs.row_edges``), never
    a dense head: every tile of every level equals ``tile_body`` on the dense head, body for
    body (a dense store's row edges too)."""
    from sparse_core.sparse_probs import SparseProbs

    heads = torch.stack([sparse_probs(n, seed + h, density=0.01) for h in range(2)])[None]
    store = SparseProbs.from_dense(heads) if dense else SparseProbs.csr_from_dense(heads)
    for level in range(lod.top(n) + 1):
        k = lod.tiles(n, level)
        for ti in range(k):
            r0, r1, _, _ = lod.tile_span(n, level, ti, 0)
            i, j, p = store.row_edges(0, 1, slice(r0, r1))
            assert i.dtype == j.dtype == torch.int64 and p.dtype == torch.float32
            for tj in range(k):
                want = lod.tile_body(heads[0, 1], level, ti, tj)
                assert lod.tile_from_edges(i, j, p, n, level, ti, tj) == want
    with pytest.raises(lod.NotInAnalysis, match="ti"):
        lod.tile_from_edges(*store.row_edges(0, 0, slice(0, 0)), n, 0, 99, 0)
