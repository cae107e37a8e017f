"""SIGTERM with analyses in flight: every analysis gets an answer.

At shutdown the model workers answer what they still queue, and anything submitted later, 503
with ``Retry-After`` (app/engine/batching.py ``ModelWorker.close``); the forward already running
finishes; ``sparsescope serve`` calls this on the first exit signal (app/web/connections.py
``DrainingServer``). No timing assertions: the tests wait for states with bounded polls.
"""

from __future__ import annotations

import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from fastapi.testclient import TestClient

from sparsescope.engine.batching import Job, ModelWorker
from sparsescope.engine.errors import Busy
from sparsescope.engine.limits import LOW, NORMAL, JobContext
from sparsescope.engine.request import AnalysisRequest
from sparsescope.engine.service import AnalysisService
from sparsescope.web.main import create_app
from tests.app.conftest import make_settings

WAIT_S = 30.0


def wait_for(cond, what: str, bound: float = WAIT_S) -> None:
    deadline = time.monotonic() + bound
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.01)


def test_close_answers_the_queue_503_and_finishes_the_running_forward(tiny_model):
    ran: list[str] = []
    worker = ModelWorker(tiny_model, window_s=0, run_one=lambda j: ran.append(j.request.text))
    worker.lock.acquire()  # the model is busy: the first job's forward waits for the lock
    running = Job(AnalysisRequest("running"), 400, JobContext(priority=NORMAL))
    worker.submit(running)
    wait_for(lambda: worker.waiting == 0, "the worker to take the first job")
    queued = [Job(AnalysisRequest(f"q {i}"), 3, JobContext(priority=NORMAL)) for i in range(5)]
    low = Job(AnalysisRequest("warm-up"), 3, JobContext(priority=LOW))
    for job in [*queued, low]:
        worker.submit(job)
    assert worker.close() == 6
    for job in [*queued, low]:  # answered now, while the running forward still waits
        with pytest.raises(Busy, match="shutting down") as info:
            job.future.result(timeout=WAIT_S)
        assert info.value.retry_after >= 1
    assert not running.future.done()
    later = Job(AnalysisRequest("later"), 3, JobContext(priority=NORMAL))
    with pytest.raises(Busy, match="shutting down"):
        worker.submit(later)
    worker.lock.release()
    running.future.result(timeout=WAIT_S)
    assert ran == ["running"] and worker.waiting_tokens == 0


def test_analyses_after_shutdown_began_are_503_with_retry_after(tmp_path, tiny_model):
    settings = make_settings(tmp_path)
    svc = AnalysisService(settings, model=tiny_model)
    with TestClient(create_app(settings, svc)) as c:
        assert c.post("/api/analyze", json={"text": "Before the signal."}).status_code == 200
        svc.begin_shutdown()
        r = c.post("/api/analyze", json={"text": "After the signal."})
        assert r.status_code == 503, r.text
        assert "shutting down" in r.json()["detail"]
        assert int(r.headers["retry-after"]) >= 1
        # what was analysed before is still answered (from the cache, no forward)
        assert c.post("/api/analyze", json={"text": "Before the signal."}).status_code == 200


@pytest.mark.slow
def test_sigterm_answers_all_40_analyses_in_flight(tmp_path):
    """The real ``sparsescope serve`` (tiny model, each forward 0.5 s slower, one text a
    forward: 40 analyses take ~20 s, twice uvicorn's old 10 s grace): SIGTERM while they are in
    flight; each gets 200, or 503 with Retry-After, and the server exits."""
    from bench.bench_load import live_server

    env = {
        "SPARSESCOPE_WARMUP": "0",
        "SPARSESCOPE_BATCH_TOKENS": "1",  # one text a forward
        "SPARSESCOPE_QUEUE_JOBS": "100",
        "SPARSESCOPE_QUEUE_TOKENS": "100000",
        "BENCH_FORWARD_DELAY_S": "0.5",
    }
    texts = [f"Analysis number {i} of a lecture hall, in flight at SIGTERM." for i in range(40)]
    with live_server(tmp_path / "log", tiny=True, env=env) as server:
        sent = threading.Barrier(len(texts) + 1)

        def post(text: str):
            with httpx.Client(timeout=120) as client:
                sent.wait()
                try:
                    return client.post(f"{server.url}/api/analyze", json={"text": text})
                except httpx.HTTPError as exc:  # cut off without an answer
                    return exc

        with ThreadPoolExecutor(len(texts)) as pool:
            futures = [pool.submit(post, t) for t in texts]
            sent.wait()
            wait_for(lambda: any(f.done() for f in futures), "a first answer", bound=60)
            server.proc.send_signal(signal.SIGTERM)
            answers = [f.result(timeout=120) for f in futures]
        server.proc.wait(timeout=60)
        log = server.log_tail()
    cut = [a for a in answers if isinstance(a, Exception)]
    assert not cut, f"{len(cut)} of 40 cut off without an answer: {cut[:3]}\n{log}"
    codes = [a.status_code for a in answers]
    assert set(codes) <= {200, 503}, codes
    assert 200 in codes and 503 in codes, codes  # some finished, the queue was refused
    for a in answers:
        if a.status_code == 503:
            assert int(a.headers["retry-after"]) >= 1 and "shutting down" in a.json()["detail"]
