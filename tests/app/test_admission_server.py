"""Derived work under a real ``sparsescope serve`` on 127.0.0.1 (app/engine/admission.py): past
the compute gate's bound a request gets 503 with Retry-After; a request whose client hangs up
stops computing (the gate's counters, and the heads it reads, stop moving) and frees the slot for
the next; SIGTERM with an abandoned long computation in flight exits without waiting for it.

The model is a tiny SparseModernBERT-style checkpoint with 2,048 positions
(sparse_core.testing_modernbert); the long computation is the Pareto sweep of every method on
every head of a 2,048-token analysis (minutes on this model, far past the bounds below). No
timing assertions: states are awaited with bounded polls.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import time

import httpx
import pytest

from bench.bench_admission import serve_model
from sparse_core.testing_modernbert import write_modernbert_checkpoint

pytestmark = pytest.mark.slow

N = 2048
WAIT_S = 120.0
WORDS = (
    "the river rose through the night and by morning the low fields were under water while "
    "farmers moved their cattle to the ridge where the old church stood above the town"
).split()


def wait_for(cond, what: str, bound: float = WAIT_S) -> None:
    deadline = time.monotonic() + bound
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return write_modernbert_checkpoint(
        tmp_path_factory.mktemp("long-mb") / "SparseModernBERT-alpha1.5",
        seed=5, sparse={"initial_alpha": 1.5}, max_positions=N,
    )  # fmt: skip


def gate(server) -> dict:
    return httpx.get(server.url + "/healthz", timeout=30).json()["compute"]


def analyse(server) -> str:
    text = " ".join(WORDS[k % len(WORDS)] for k in range(3 * N))
    r = httpx.post(server.url + "/api/analyze", timeout=600,
                   json={"text": text, "truncate": True, "summary": ["window"]})  # fmt: skip
    assert r.status_code == 200, r.text
    assert len(r.json()["tokens"]) == N
    return r.json()["id"]


def abandoned(server, path: str) -> socket.socket:
    """A GET of ``path`` sent on a raw connection whose answer nobody will read."""
    s = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n\r\n".encode())
    return s


ENV = {
    "SPARSESCOPE_COMPUTE_SLOTS": "1",
    "SPARSESCOPE_COMPUTE_QUEUE_JOBS": "0",  # nothing waits: the second request is refused
}


def test_bound_503_then_hang_up_stops_the_work_and_frees_the_slot(tmp_path, model_dir):
    with serve_model(model_dir, N, tmp_path / "data", ENV) as server:
        aid = analyse(server)
        sweep = abandoned(server, f"/api/analyses/{aid}/pareto")  # every head: minutes
        wait_for(lambda: gate(server)["running"] == 1, "the sweep to run")
        r = httpx.get(f"{server.url}/api/analyses/{aid}/budgets?layer=0&head=0", timeout=60)
        assert r.status_code == 503, r.text
        assert int(r.headers["retry-after"]) >= 1 and "busy computing" in r.json()["detail"]
        first = gate(server)["checkpoints"]
        wait_for(lambda: gate(server)["checkpoints"] > first, "the sweep to read heads")
        sweep.close()  # the client goes away
        wait_for(lambda: gate(server)["cancelled"] == 1, "the sweep to be cancelled")
        g = gate(server)
        assert g["running"] == 0 and g["completed"] == 0
        time.sleep(1.0)  # no computation is running: no head is read any more
        assert gate(server)["checkpoints"] == g["checkpoints"]
        # the slot is free: the next request is computed and answered
        r = httpx.get(f"{server.url}/api/analyses/{aid}/budgets?layer=0&head=0", timeout=WAIT_S)
        assert r.status_code == 200, r.text
        assert gate(server)["completed"] == 1
        assert "Traceback" not in server.log_tail(20000)


def test_sigterm_does_not_wait_for_abandoned_work(tmp_path, model_dir):
    with serve_model(model_dir, N, tmp_path / "data", ENV) as server:
        aid = analyse(server)
        sweep = abandoned(server, f"/api/analyses/{aid}/pareto")
        wait_for(lambda: gate(server)["running"] == 1, "the sweep to run")
        sweep.close()
        server.proc.send_signal(signal.SIGTERM)
        try:  # the sweep alone would take minutes: the server exits long before
            server.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the server still runs 60 s after SIGTERM:\n{server.log_tail()}")
        log = server.log_tail(20000)
        # it ended on its own: uvicorn did not have to give up on the request after its grace
        # period (connections.GRACEFUL_SHUTDOWN_S), which is what waiting for the sweep meant
        assert "graceful shutdown exceeded" not in log, log
        assert server.proc.returncode in (0, -signal.SIGTERM), log
