"""Slow and vanishing clients do not hold up the others, and the shared model is safe.

Against a real ``sparsescope serve`` subprocess (tiny model, loopback only), with raw sockets: a
client that trickles its request body a byte at a time, idle half-sent requests, and clients that
hang up mid-body, mid-headers or while their analysis runs. Meanwhile and afterwards, ordinary
requests must complete promptly. Then, in process: concurrent analyses (and head, metrics and
Pareto requests) of different texts give exactly what sequential ones give, and the model is
never entered by two threads at once.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from bench.bench_load import HOST, LiveServer, live_server, text_pool
from sparsescope.engine.request import AnalysisRequest
from sparsescope.engine.service import AnalysisService
from sparsescope.web.main import create_app
from tests.app.conftest import make_settings

pytestmark = pytest.mark.slow

#: Every ordinary request made while others misbehave must finish within this (a generous bound
#: on a shared 2-core machine: the tiny model answers in tens of milliseconds).
PROMPT_S = 10.0


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[LiveServer]:
    with live_server(tmp_path_factory.mktemp("slow-clients"), tiny=True, start_timeout=120) as s:
        yield s


def raw(server: LiveServer) -> socket.socket:
    sock = socket.create_connection((HOST, server.port), timeout=PROMPT_S)
    sock.settimeout(PROMPT_S)
    return sock


def request_head(body_len: int, path: str = "/api/analyze") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {body_len}\r\nConnection: close\r\n\r\n"
    ).encode()


def read_response(sock: socket.socket) -> tuple[int, bytes]:
    """Status and body of the (Connection: close) response on ``sock``."""
    data = b""
    deadline = time.monotonic() + PROMPT_S
    while time.monotonic() < deadline:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def ordinary_requests(server: LiveServer, text: str) -> list[float]:
    """A normal client's session; the seconds each request took (all must succeed)."""
    took = []
    with httpx.Client(base_url=server.url, timeout=PROMPT_S) as http:
        for call in (
            lambda: http.get("/healthz"),
            lambda: http.post("/api/analyze", json={"text": text}),
        ):
            t0 = time.perf_counter()
            r = call()
            took.append(time.perf_counter() - t0)
            assert r.status_code == 200, r.text[:300]
        aid = r.json()["id"]
        t0 = time.perf_counter()
        r = http.get(f"/api/analyses/{aid}/heads/1/2")
        took.append(time.perf_counter() - t0)
        assert r.status_code == 200, r.text[:300]
    return took


def test_a_trickling_body_does_not_block_others(server):
    body = json.dumps({"text": "Slowly, one byte at a time. " * 4}).encode()  # about 5 s
    sock = raw(server)
    sock.sendall(request_head(len(body)))
    stop = threading.Event()
    hurry = threading.Event()
    sent = 0

    def trickle() -> None:  # one byte every 50 ms, leaving the last one for later
        nonlocal sent
        while sent < len(body) - 1 and not stop.is_set():
            if hurry.is_set():  # the others have been served: the rest of it at once
                sock.sendall(body[sent:-1])
                sent = len(body) - 1
                break
            sock.sendall(body[sent : sent + 1])
            sent += 1
            time.sleep(0.05)

    t = threading.Thread(target=trickle, daemon=True)
    t.start()
    try:
        for k, text in enumerate(text_pool(4, seed=3)):
            took = ordinary_requests(server, text)
            assert max(took) < PROMPT_S, took
            assert t.is_alive() or k > 0, "the trickle ended before the others were tested"
        hurry.set()  # no need to wait out the trickle (it idled a worker for seconds)
        t.join(timeout=30)
        assert sent == len(body) - 1
        sock.sendall(body[-1:])  # the slow client finishes, and is answered too
        status, answer = read_response(sock)
        assert status == 200 and json.loads(answer)["n"] > 2
    finally:
        stop.set()
        sock.close()


def test_idle_half_sent_requests_do_not_block_others(server):
    socks = []
    try:
        for k in range(16):  # half-sent headers, and headers with an unsent body
            s = raw(server)
            if k % 2:
                s.sendall(b"POST /api/analyze HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le")
            else:
                s.sendall(request_head(1000))
            socks.append(s)
        took = ordinary_requests(server, "Sixteen idle connections wait.")
        assert max(took) < PROMPT_S, took
    finally:
        for s in socks:
            s.close()
    assert ordinary_requests(server, "They are gone now.")


@pytest.mark.parametrize("where", ["mid-headers", "mid-body", "while analysing", "reset"])
def test_a_client_that_hangs_up_leaves_the_server_serving(server, where):
    text = " ".join(text_pool(8, seed=5))  # a longer text: the analysis is still running
    body = json.dumps({"text": text, "alpha": 1.25}).encode()
    s = raw(server)
    if where == "mid-headers":
        s.sendall(b"POST /api/analyze HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl")
    elif where == "mid-body":
        s.sendall(request_head(len(body)) + body[: len(body) // 2])
    else:
        s.sendall(request_head(len(body)) + body)
    if where == "reset":  # RST instead of FIN
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    time.sleep(0.05)
    s.close()
    took = ordinary_requests(server, f"Still serving after a hang-up {where}.")
    assert max(took) < PROMPT_S, took
    assert server.alive(), server.log_tail()
    assert "Traceback" not in server.log_tail(20000), server.log_tail()


# ----------------------------------------------------------------------------- shared model


class CountingModel:
    """The tiny model, counting how many threads are inside ``run`` or ``run_batch`` at once
    (the model worker runs texts that arrive together as one ``run_batch``)."""

    def __init__(self, model: Any) -> None:
        self._model = model
        self._lock = threading.Lock()
        self.inside = 0
        self.most = 0

    def run(self, *args: Any, **kwargs: Any) -> Any:
        return self._counted(self._model.run, *args, **kwargs)

    def run_batch(self, *args: Any, **kwargs: Any) -> Any:
        return self._counted(self._model.run_batch, *args, **kwargs)

    def _counted(self, call: Any, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            self.inside += 1
            self.most = max(self.most, self.inside)
        try:
            time.sleep(0.01)  # widen the window a second thread would have to get in
            return call(*args, **kwargs)
        finally:
            with self._lock:
                self.inside -= 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)


def _session(client: httpx.AsyncClient, text: str) -> Any:
    async def go() -> dict[str, Any]:
        r = await client.post("/api/analyze", json={"text": text})
        assert r.status_code == 200, r.text[:300]
        aid = r.json()["id"]
        head = await client.get(f"/api/analyses/{aid}/heads/1/3")
        metrics = await client.get(
            f"/api/analyses/{aid}/metrics/0/1", params={"method": "bigbird", "window": 3}
        )
        pareto = await client.get(f"/api/analyses/{aid}/pareto", params={"layer": 1, "head": 0})
        return {
            "analysis": r.json(),
            "head": head.json(),
            "metrics": metrics.json(),
            "pareto": pareto.json(),
        }

    return go()


async def _run_all(app: Any, texts: list[str], concurrent: bool) -> list[dict[str, Any]]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        if concurrent:
            return list(await asyncio.gather(*(_session(client, t) for t in texts)))
        return [await _session(client, t) for t in texts]


@pytest.mark.parametrize("split", [1, 2])
def test_concurrent_analyses_equal_sequential_ones(tmp_path, tiny_model, split):
    """8 different texts through the app (its thread pool, its locks) at once and one by one,
    each on a fresh service: the same bodies, and never two model runs at the same time but
    the parts of one large batched forward (``BATCH_SPLIT``, run side by side)."""
    texts = text_pool(8, seed=11)
    results = {}
    for mode in (False, True):
        model = CountingModel(tiny_model)
        settings = make_settings(tmp_path / f"{mode}-{split}", batch_split=split)
        service = AnalysisService(settings, model=model)
        service.start()
        app = create_app(settings, service)
        results[mode] = asyncio.run(_run_all(app, texts, concurrent=mode))
        assert model.most <= split, f"{model.most} threads ran the model at once"
        if not mode:
            assert model.most == 1  # one by one: one forward at a time
        assert service.stats.runs == len(texts)
    assert results[True] == results[False]


def test_the_same_text_at_once_runs_the_model_once(tmp_path, tiny_model):
    model = CountingModel(tiny_model)
    service = AnalysisService(make_settings(tmp_path), model=model)
    with ThreadPoolExecutor(max_workers=8) as pool:
        bodies = list(
            pool.map(lambda _: service.analyze(AnalysisRequest("Eight at once.")), range(8))
        )
    assert all(b == bodies[0] for b in bodies)
    assert service.stats.runs == 1 and model.most == 1
