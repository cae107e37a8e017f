"""The head payload in parts (``GET …/heads/{layer}/{head}?part=graph|methods``): the graph's
packed CSR holds exactly the full payload's edges (float32 P to the bit), and the two parts
together are the full payload."""

from __future__ import annotations

import numpy as np
import pytest

from sparse_core.methods.selection import from_b64


@pytest.fixture(scope="module")
def client_and_id(tmp_path_factory):
    from fastapi.testclient import TestClient

    from sparse_core.testing import tiny_model
    from sparsescope.engine.service import AnalysisService
    from sparsescope.engine.settings import Settings
    from sparsescope.web.main import create_app

    model = tiny_model(layers=2, heads=2, max_positions=1024)
    settings = Settings(data_dir=tmp_path_factory.mktemp("parts"), warmup=False, max_tokens=1024)
    with TestClient(create_app(settings, AnalysisService(settings, model=model))) as client:
        text = " ".join(f"word{k % 89} tok{k % 11}" for k in range(400))
        body = client.post("/api/analyze", json={"text": text, "truncate": True}).json()
        assert body["n"] > 512, body
        yield client, body["id"]


def edges_of_csr(csr: dict) -> list[tuple[int, int, float]]:
    counts = from_b64(csr["counts"]).astype(np.int64)
    rows = np.repeat(np.arange(len(counts)), counts)
    cols = from_b64(csr["cols"])
    p = from_b64(csr["p"])
    assert p.dtype == np.float32 and len(rows) == len(cols) == len(p)
    return [(int(i), int(j), float(v)) for i, j, v in zip(rows, cols, p, strict=True)]


@pytest.mark.parametrize(("layer", "head"), [(0, 0), (1, 1)])
def test_parts_make_the_whole(client_and_id, layer, head):
    client, aid = client_and_id
    url = f"/api/analyses/{aid}/heads/{layer}/{head}"
    whole = client.get(url).json()
    graph = client.get(url + "?part=graph").json()
    methods = client.get(url + "?part=methods").json()
    # the graph: every edge, row-major, with the very float32 the JSON payload holds
    got = edges_of_csr(graph["csr"])
    want = [(i, j, float(np.float32(p))) for i, j, p in whole["edges"]]
    assert len(got) > 0 and got == want
    assert graph["edges"] == []
    for key in ("layer", "head", "n", "gold_sparsity", "pos", "seed", "lod"):
        assert graph[key] == whole[key], key
    # the methods' part: everything else of the full payload, the same values
    rest = set(whole) - {"edges", "pos", "gold_sparsity", "lod"}
    assert rest <= set(methods), rest - set(methods)
    for key in rest:
        assert methods[key] == whole[key], key
    assert "edges" not in methods and "csr" not in methods


def test_unknown_part_is_refused(client_and_id):
    client, aid = client_and_id
    r = client.get(f"/api/analyses/{aid}/heads/0/0?part=edges")
    assert r.status_code == 422, r.text
    assert "part" in r.text


def test_service_names_the_part_field(client_and_id):
    from sparse_core.errors import SparsescopeError

    client, aid = client_and_id
    service = client.app.state.service
    with pytest.raises(SparsescopeError) as err:
        service.head(aid, 0, 0, "edges")
    assert err.value.field == "part" and "graph" in str(err.value)
