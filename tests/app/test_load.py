"""Load and memory: the caches are bounded (entries, bytes, derived results per analysis, alphas),
and a real ``sparsescope serve`` process under 8 concurrent clients answers 1,000 mixed requests
without an error while its resident memory stays flat.

The live test uses the tiny random model and ``bench/bench_load.py`` (the same load as the
benchmark of the real model, whose figures are in docs/benchmarks.md, "Server load"). It asserts
zero errors and the memory bound, not latency (this machine is shared); p50 / p99 are recorded
as test properties and printed.
"""

from __future__ import annotations

import pytest

import sparsescope.engine.cache as cache_mod
import sparsescope.engine.slot as slot_mod
from bench.bench_load import listening_addresses, live_server, run_load, summary, text_pool
from sparsescope.engine.request import AnalysisRequest
from sparsescope.engine.service import AnalysisService
from tests.app.conftest import make_settings

# ----------------------------------------------------------------------------- cache bounds


def test_the_cache_is_bounded_in_entries(tmp_path, tiny_model):
    svc = AnalysisService(make_settings(tmp_path, cache_entries=3), model=tiny_model)
    ids = [svc.analyze(AnalysisRequest(t))["id"] for t in text_pool(7)]
    assert len(svc.cache) == 3 and svc.cache.evictions == 4
    assert [svc.cache.get(i) is not None for i in ids] == [False] * 4 + [True] * 3


def test_the_cache_is_bounded_in_bytes(tmp_path, tiny_model):
    svc = AnalysisService(make_settings(tmp_path, cache_bytes=1 << 20), model=tiny_model)
    for text in text_pool(16, seed=1):  # about 20 to 300 KiB each
        svc.analyze(AnalysisRequest(text))
        assert len(svc.cache) == 1 or svc.cache.nbytes <= svc.cache.max_bytes
    assert svc.cache.evictions > 0 and len(svc.cache) > 1


def test_derived_results_per_analysis_are_bounded(tmp_path, tiny_model, monkeypatch):
    """A stream of distinct metrics settings on one analysis cannot grow it without bound: past
    MAX_DERIVED results they are computed but not kept (and give the same numbers)."""
    monkeypatch.setattr(cache_mod, "MAX_DERIVED", 6)
    svc = AnalysisService(make_settings(tmp_path), model=tiny_model)
    entry = svc.analyze_entry(AnalysisRequest(" ".join(text_pool(3))))
    first = {w: svc.metrics(entry.id, 1, 2, "window", {"window": str(w)}) for w in range(0, 19)}
    assert len(entry.derived) <= 6 and len(entry.key_locks) <= 6
    size = entry.nbytes
    again = {w: svc.metrics(entry.id, 1, 2, "window", {"window": str(w)}) for w in range(0, 19)}
    assert again == first and entry.nbytes == size
    assert svc.head(entry.id, 0, 0) == svc.head(entry.id, 0, 0)  # still answers, not kept


def test_an_analysis_over_the_byte_bound_keeps_nothing_more(tmp_path, tiny_model):
    svc = AnalysisService(make_settings(tmp_path), model=tiny_model)
    entry = svc.analyze_entry(AnalysisRequest("The chef who ran to the store was out of food."))
    svc.cache.max_bytes = entry.nbytes  # as if this one analysis filled the whole budget
    svc.head(entry.id, 0, 1)
    size = entry.nbytes
    for layer in range(2):
        for head in range(4):
            svc.head(entry.id, layer, head)
    assert entry.nbytes == size and len(entry.derived) == 1


def test_artefact_lookups_are_bounded_in_alphas(tmp_path, tiny_model):
    svc = AnalysisService(make_settings(tmp_path), model=tiny_model)
    for k in range(300):
        svc.slot.artefact_for(1.0 + k / 300)
    assert len(svc.slot._artefacts) <= slot_mod.MAX_ALPHAS


def test_memory_helpers_are_best_effort(monkeypatch):
    from sparsescope.engine.memory import limit_malloc_arenas, release_free_memory

    release_free_memory()  # glibc: trims; elsewhere: nothing, and no error
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert limit_malloc_arenas() is False  # the environment's choice wins


# ----------------------------------------------------------------------------- a live server


@pytest.mark.slow
def test_concurrent_mixed_load_no_errors_and_flat_memory(tmp_path, record_property):
    """8 clients x 25 rounds x 5 requests (analyze, 2 heads, metrics, Pareto or the analysis
    again) on loopback; 16 cached analyses, so evictions happen all along.

    Flat memory: the second half of the requests adds at most 10 % to the RSS after the first
    half. Not from the 100th request on: the server's malloc arenas (one per model-call thread,
    capped) and the library pages it touches fill up over the first few hundred requests, and
    how fast depends on the machine (measured on one with transformers 5.24: 734 MiB after 100
    requests, 797 after 500, 835 after 1,000, 864 after 2,000, 869 after 2,400: converging,
    +4.8 % from the 500th to the 1,000th); a leak grows in the second half as in the first."""
    # no start-up warm-up: it would also precompute the gallery in the background, CPU taken
    # from the clients' requests (and the warm-up's own analysis is not what is measured)
    env = {"SPARSESCOPE_CACHE_ENTRIES": "16", "SPARSESCOPE_WARMUP": "0"}
    with live_server(tmp_path / "data", tiny=True, env=env, start_timeout=120) as server:
        # the CLI's default: this machine only
        assert listening_addresses(server.port) == ["127.0.0.1"]
        res = run_load(server, clients=8, analyses=25, timeout=60, rss_at=(500,))
        assert server.alive(), server.log_tail()
    s = summary(res)
    for key in ("p50_ms", "p99_ms", "wall_s", "server_cpu_s", "reposts"):
        record_property(key, s[key])
    print(f"\nload: {s}")
    assert res.errors == [], res.errors[:10]
    assert res.requests >= 1000
    rss_half, rss_end = res.rss_kib[500], res.rss_kib[res.requests]
    record_property("rss_mib", s["rss_mib"])
    assert rss_end <= 1.10 * rss_half, (
        f"RSS {rss_half} KiB after 500 requests, {rss_end} at the end"
    )


def test_trimmer_trims_once_a_busy_spell():
    """memory.Trimmer: overlapping pieces of work trim once, when the last one ends; with
    ``every_s=0`` every piece trims (sustained load is still trimmed)."""
    from sparsescope.engine.memory import Trimmer

    calls = []
    t = Trimmer(every_s=3600, trim=lambda: calls.append(1))
    with t.work():
        with t.work():
            pass
        with t.work():
            pass
        assert calls == []  # others still running
    assert calls == [1] and t.trims == 1
    with t.work():
        pass
    assert calls == [1, 1]
    eager = Trimmer(every_s=0, trim=lambda: calls.append(2))
    with eager.work():
        with eager.work():
            pass
        assert calls[-1] == 2  # it was time
    assert calls[-2:] == [2, 2]


def test_start_up_objects_are_frozen_for_the_collector():
    """memory.freeze_startup_objects (called by ``serve`` once it answers and has warmed up):
    what is alive now leaves the collector's walks; the objects stay usable."""
    import gc

    from sparsescope.engine.memory import freeze_startup_objects

    keep = {"a": [1, 2, 3]}
    try:
        frozen = freeze_startup_objects()
        # at most what was frozen: a frozen object freed meanwhile (by a thread an earlier test
        # left running in this worker) leaves the count (seen in CI: 25 of 1.4 M gone)
        assert frozen > 0 and 0.99 * frozen <= gc.get_freeze_count() <= frozen
        assert not any(o is keep for o in gc.get_objects())  # out of every generation
        assert keep["a"] == [1, 2, 3]
    finally:
        gc.unfreeze()
    assert any(o is keep for o in gc.get_objects())
