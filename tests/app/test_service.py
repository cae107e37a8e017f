"""The analysis service on its own: lifespan loading, the LRU cache, ids, artefact choice."""

from __future__ import annotations

import pytest
import torch

from sparsescope.engine.cache import Entry, LruCache, tensor_nbytes
from sparsescope.engine.payloads import sig6
from sparsescope.engine.request import AnalysisRequest
from sparsescope.engine.service import AnalysisService
from tests.app.conftest import make_settings


def _entry(key: str, nbytes: int) -> Entry:
    e = Entry(key, None, None, None, None, {}, b"", [])
    e.nbytes = nbytes
    return e


def test_lru_evicts_least_recently_used_by_count():
    c = LruCache(max_entries=2, max_bytes=10**9)
    c.put(_entry("a", 1))
    c.put(_entry("b", 1))
    assert c.get("a") is not None  # a is now the most recent
    c.put(_entry("c", 1))
    assert c.get("b") is None and c.get("a") is not None and c.get("c") is not None
    assert c.evictions == 1


def test_lru_evicts_by_bytes_and_keeps_the_newest():
    c = LruCache(max_entries=100, max_bytes=100)
    for k in "abc":
        c.put(_entry(k, 40))
    assert len(c) == 2 and c.nbytes == 80 and c.get("a") is None
    c.put(_entry("huge", 500))  # over the bound on its own: kept alone
    assert len(c) == 1 and c.get("huge") is not None
    e = c.get("huge")
    c.grow(e, 10)
    assert c.nbytes == 510


def test_model_is_loaded_once_in_start(tmp_path, tiny_model):
    calls = []
    service = AnalysisService(
        make_settings(tmp_path), loader=lambda s: calls.append(s) or tiny_model
    )
    assert not service.ready
    with pytest.raises(RuntimeError, match="start"):
        service.model  # noqa: B018
    service.start()
    service.start()
    assert len(calls) == 1 and service.ready and service.model is tiny_model


def test_warmup_does_not_fill_the_cache(tmp_path, tiny_model):
    service = AnalysisService(make_settings(tmp_path, warmup=True), model=tiny_model)
    service.start()
    assert len(service.cache) == 0 and service.stats.runs == 0


def test_ids_are_stable_and_depend_on_every_input(service, tiny_model):
    service.start()
    k = service.key(AnalysisRequest("Hello.", 1.5, False, False))
    assert k == service.key(AnalysisRequest("Hello.", 1.5, False, False)) and len(k) == 24
    others = {
        service.key(AnalysisRequest("Hello!", 1.5, False, False)),
        service.key(AnalysisRequest("Hello.", 1.25, False, False)),
        service.key(AnalysisRequest("Hello.", 1.5, True, False)),
        service.key(AnalysisRequest("Hello.", 1.5, False, True)),
    }
    assert k not in others and len(others) == 4


def test_artefact_only_at_its_alpha(tmp_path, tiny_model, tiny_artefact):
    service = AnalysisService(make_settings(tmp_path), model=tiny_model, artefact=tiny_artefact)
    service.start()
    assert service.slot.artefact_for(1.5) == (tiny_artefact, "tiny-test-artefact")
    assert service.slot.artefact_for(1.7) == (None, None)
    no_art = AnalysisService(make_settings(tmp_path), model=tiny_model, use_artefact=False)
    no_art.start()
    assert no_art.slot.artefact_for(1.5) == (None, None)
    assert service.key(AnalysisRequest("x")) != no_art.key(AnalysisRequest("x"))


def test_bad_artefact_path_fails_at_start(tmp_path, tiny_model):
    from sparse_core.errors import ArtefactError

    settings = make_settings(tmp_path, artefact_path=str(tmp_path / "nothing.safetensors"))
    with pytest.raises(ArtefactError, match="does not exist"):
        AnalysisService(settings, model=tiny_model).start()


def test_helpers():
    assert sig6(0.123456789) == 0.123457 and sig6(1.23456789e-9) == 1.23457e-9
    t = torch.zeros(4, 4)
    assert tensor_nbytes({"a": t, "b": [t, torch.zeros(2, dtype=torch.bool)]}) == 64 + 2
    assert tensor_nbytes({"a": t}, exclude=[t]) == 0


def test_warm_up_runs_once_when_serve_has_started_the_service(tmp_path, tiny_model):
    """`sparsescope serve` starts the service before uvicorn (one-line load errors); the app's
    lifespan starts it again, which must not warm up a second time."""
    from fastapi.testclient import TestClient

    from sparsescope.web.main import create_app

    settings = make_settings(tmp_path, warmup=True)
    service = AnalysisService(settings, model=tiny_model)
    service.start()  # what serve does
    assert service.stats.warmups == 1
    with TestClient(create_app(settings, service)) as c:  # the lifespan's start
        assert c.get("/healthz").status_code == 200
    assert service.stats.warmups == 1


def test_method_lists_follow_the_artefact_not_its_address(service, tiny_model):
    """Artefacts come and go (one per alpha); a freed one's id() is reused by the next, so the
    method lists are remembered per artefact name, and each artefact gets its own k-means
    choices. (Each artefact is freed by its last reference going, no collector pass needed: a
    full gc.collect() in a worker's grown heap cost a second each.)"""
    from sparse_core.sparsefinder import Artefact

    service.start()
    cfg = tiny_model.config
    L, H, d, r = cfg.num_layers, cfg.num_heads, cfg.head_dim, 2
    seen: set[int] = set()
    for k in range(12):
        counts = (2 + k, 3 + k)
        art = Artefact(
            model_id=tiny_model.model_id,
            alpha=1.5,
            rank=r,
            W=torch.zeros(L, H, d, r),
            b=torch.zeros(L, H, r),
            centroids={b: torch.zeros(L, H, b, r) for b in counts},
            meta={"name": f"artefact-{k}"},
        )
        listed = {m["name"]: m for m in service._method_list(16, art)}
        (spec,) = [p for p in listed["sf-kmeans"]["params"] if p["name"] == "n_clusters"]
        assert spec["choices"] == list(counts), k
        seen.add(id(art))
        del art, listed
    assert len(seen) < 12, "no freed artefact's id() was reused: the case this test is for"
