"""A head payload with only some methods' data (``GET …/heads/{layer}/{head}?method=…``):
the page's first request asks for the graph and the shown method's data, the rest after. Each
method's part is exactly what the whole payload holds for it; without ``method`` the payload is
today's, byte for byte; an unknown name is a 422 naming it."""

from __future__ import annotations

import pytest

from sparse_core.methods import METHODS
from sparsescope.engine.lod import lod_info
from sparsescope.engine.payloads import dumps, head_body

#: What every whole payload holds besides the methods' data.
BASE = {"layer", "head", "n", "gold_sparsity", "edges", "seed", "pos", "lod"}


@pytest.fixture(scope="module")
def client_and_id(tmp_path_factory):
    from fastapi.testclient import TestClient

    from sparse_core.testing import tiny_model
    from sparsescope.engine.service import AnalysisService
    from sparsescope.engine.settings import Settings
    from sparsescope.web.main import create_app

    model = tiny_model(layers=2, heads=2, max_positions=512)
    settings = Settings(data_dir=tmp_path_factory.mktemp("hm"), warmup=False)
    service = AnalysisService(settings, model=model)
    with TestClient(create_app(settings, service)) as client:
        text = " ".join(f"word{k % 37} tok{k % 7}" for k in range(90))
        body = client.post("/api/analyze", json={"text": text}).json()
        yield client, body["id"], service


def own_keys(name: str) -> set[str]:
    """The payload keys of method ``name`` (its ``payload_empty``: the keys it always gives)."""
    return set(METHODS[name].payload_empty)


def test_without_method_the_payload_is_todays(client_and_id):
    client, aid, service = client_and_id
    entry = service.get(aid)
    today = dumps({**head_body(entry, 1, 0), "lod": lod_info(entry.out.n)})
    assert client.get(f"/api/analyses/{aid}/heads/1/0").content == today
    assert client.get(f"/api/analyses/{aid}/heads/1/0?part=all").content == today


@pytest.mark.parametrize("name", ["topk", "reformer", "routing", "moba", "xattention", "sparge"])
def test_one_methods_data_is_the_whole_payloads(client_and_id, name):
    client, aid, _ = client_and_id
    url = f"/api/analyses/{aid}/heads/0/1"
    whole = client.get(url).json()
    r = client.get(f"{url}?method={name}")
    assert r.status_code == 200, r.text
    one = r.json()
    assert set(one) == BASE | own_keys(name), set(one) ^ (BASE | own_keys(name))
    for key in one:
        assert one[key] == whole[key], key
    assert len(r.content) < len(client.get(url).content)


def test_graph_with_the_shown_methods_data(client_and_id):
    client, aid, _ = client_and_id
    url = f"/api/analyses/{aid}/heads/1/1"
    whole = client.get(url).json()
    graph = client.get(f"{url}?part=graph").json()
    got = client.get(f"{url}?part=graph&method=topk").json()
    assert {k: v for k, v in got.items() if k != "topk"} == graph  # the graph, as before
    assert got["topk"] == whole["topk"] and whole["topk"] is not None
    # a method without data of its own adds nothing but the seed the graph already has
    assert client.get(f"{url}?part=graph&method=window").json() == graph


def test_methods_part_narrowed(client_and_id):
    client, aid, _ = client_and_id
    url = f"/api/analyses/{aid}/heads/0/0"
    whole = client.get(url).json()
    got = client.get(f"{url}?part=methods&method=topk&method=reformer").json()
    assert set(got) == {"layer", "head", "n", "seed", "topk", "reformer"}
    for key in ("seed", "topk", "reformer"):
        assert got[key] == whole[key], key
    # order and repeats do not matter: the same body (and one cache entry)
    again = client.get(f"{url}?part=methods&method=reformer&method=topk&method=topk")
    assert again.json() == got


def test_every_method_named_is_the_whole_methods_part(client_and_id):
    client, aid, _ = client_and_id
    url = f"/api/analyses/{aid}/heads/1/1"
    every = "&".join(f"method={m}" for m in METHODS)
    assert (
        client.get(f"{url}?part=methods&{every}").json() == client.get(f"{url}?part=methods").json()
    )


def test_an_unknown_method_is_refused_by_name(client_and_id):
    client, aid, _ = client_and_id
    r = client.get(f"/api/analyses/{aid}/heads/0/0?method=topk&method=nope")
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["field"] == "method.1"
    assert "'nope'" in body["detail"] and "'topk'" in body["detail"]


def test_the_service_checks_the_names(client_and_id):
    from sparse_core.errors import SparsescopeError

    _, aid, service = client_and_id
    with pytest.raises(SparsescopeError) as err:
        service.head(aid, 0, 0, "all", ["topk", "Top-K"])
    assert err.value.field == "method" and "Top-K" in str(err.value)


def test_the_openapi_schema_states_the_parameter(client_and_id):
    client, _, _ = client_and_id
    schema = client.get("/openapi.json").json()
    route = schema["paths"]["/api/analyses/{analysis_id}/heads/{layer}/{head}"]["get"]
    (param,) = [p for p in route["parameters"] if p["name"] == "method"]
    assert param["in"] == "query" and not param.get("required", False)
    assert param["schema"]["type"] == "array"
    assert param["schema"]["items"]["enum"] == list(METHODS)
    assert param["schema"]["maxItems"] == len(METHODS)
    assert "every method" in param["description"]
    assert "422" in route["responses"]


@pytest.mark.real_model
def test_real_model_shown_method_then_the_rest(real_client):
    """The real model with its artefact: the graph with sf-kmeans' data (projections and
    centroids), then the methods' part, hold what the whole payload does."""
    text = "The quick brown fox jumps over the lazy dog because it was bored."
    aid = real_client.post("/api/analyze", json={"text": text, "alpha": 1.5}).json()["id"]
    url = f"/api/analyses/{aid}/heads/2/3"
    whole = real_client.get(url).json()
    first = real_client.get(f"{url}?part=graph&method=sf-kmeans").json()
    assert first["proj"] is not None and first["proj"] == whole["proj"]
    assert first["centroids"] == whole["centroids"] and first["centroids"]
    assert "topk" not in first and "reformer" not in first
    rest = real_client.get(f"{url}?part=methods").json()
    assert {k: v for k, v in rest.items() if k in whole} == {
        k: whole[k] for k in rest if k in whole
    }
