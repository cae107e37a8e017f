"""Load test of a real ``sparsescope serve`` process on loopback: concurrent mixed requests.

    python -m bench.bench_load                 # the real default model (all-MiniLM-L6-v2)
    python -m bench.bench_load --tiny          # the tiny random model (what tests/app uses)

``--clients`` (8) concurrent clients each run ``--analyses`` (25) rounds. A round is
``POST /api/analyze`` of a text drawn from a pool of mixed texts (3 to 60 words, some drawn by
several clients: cache hits) followed by four requests on that analysis: two head payloads, one
metrics call (a method at its defaults) and either the Pareto data (mean or one head) or
``GET /api/analyses/{id}``: 8 x 25 x 5 = 1,000 requests. Like the page, a client whose analysis
was evicted between its requests (404) posts the text again; that is counted, not an error.

Prints p50 / p99 latency per kind and overall, the errors, and the server's resident memory
(VmRSS of /proc/<pid>/status) after the 100th and after the last request. The server is started
through the real CLI (``python -m sparsescope.cli serve --port P``, no ``--host``), so it binds the
default 127.0.0.1; every request goes to 127.0.0.1, each one bounded by ``--timeout``.
``tests/app/test_load.py`` and ``tests/app/test_slow_clients.py`` use :class:`LiveServer` and
:func:`run_load` from here.

A lecture hall at once (figures in docs/benchmarks.md, "A lecture hall"):

    python -m bench.bench_load hall                # (a), (b) and (c) on the real model
    python -m bench.bench_load hall --only a --rounds 3 --burst 48
    python -m bench.bench_load hall --only b --clients 16 --seconds 120
    python -m bench.bench_load hall --only c --shares 30

    python -m bench.bench_load hall --only f --rounds 3   # the forwards alone, in process

(a) 48 simultaneous short analyses, batched vs one by one (two servers, alternating bursts);
(b) 16 clients of mixed traffic with p50/p99 per route (429/503 counted) and RSS at start,
middle and end; (c) 30 long-text shares at once, then a short analysis, and the shutdown time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's sparse_core and tests.checkout

from tests.checkout import use_the_checkout, without_the_shim  # noqa: E402

#: this checkout's web app, here and in the servers it starts, not an installed copy
CHECKOUT = use_the_checkout()
HOST = "127.0.0.1"  # loopback only: the server and every request

#: Runs in the server process: ``sparsescope serve`` itself, on the tiny random model when asked
#: (sparse_core.load_model swapped before the service imports it at start-up).
LAUNCHER = """
import os, sys, time
if sys.argv[1] == "tiny":
    import sparse_core
    from sparse_core.testing import tiny_model
    delay = float(os.environ.get("BENCH_FORWARD_DELAY_S") or 0)
    def slowed(f):  # a slower model: every forward takes `delay` s more (analyses stay in flight)
        def run(*a, **k):
            time.sleep(delay)
            return f(*a, **k)
        return run
    def load(path=None, device="auto", **_):
        model = tiny_model(seed=0)
        if delay:
            model.run, model.run_batch = slowed(model.run), slowed(model.run_batch)
        return model
    sparse_core.load_model = load
from sparsescope.cli import main
sys.exit(main(["serve", "--port", sys.argv[2]]))
"""

WORDS = (
    "the chef who ran to store was out of food so he went back attention sparse entmax head "
    "layer token query key value softmax a model reads every word and some heads look only at "
    "their neighbours while others find the verb of a sentence München naïve café 東京 "
    "numbers 3.14 and 2026 punctuation ! ? ; — quotes \" ' (brackets) [CLS] <script> & done"
).split()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def rss_kib(pid: int) -> int:
    """Resident memory of process ``pid`` in KiB (VmRSS of /proc/<pid>/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS in /proc/{pid}/status")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds used so far by process ``pid`` (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def listening_addresses(port: int) -> list[str]:
    """Local IPv4 addresses with a socket listening on ``port`` (from /proc/net/tcp)."""
    found = []
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        addr, _, hex_port = local.partition(":")
        if state == "0A" and int(hex_port, 16) == port:  # 0A = LISTEN
            found.append(socket.inet_ntoa(bytes.fromhex(addr)[::-1]))
    return found


def python_of(root: Path) -> str:
    """The interpreter of checkout ``root``: its ``.venv``'s when it has one and is not this one
    (whose editable install is that checkout's code), else this one."""
    venv = Path(root) / ".venv" / "bin" / "python"
    return str(venv) if Path(root).resolve() != ROOT and venv.exists() else sys.executable


@dataclass
class LiveServer:
    """A ``sparsescope serve`` subprocess on 127.0.0.1:``port`` (the real CLI and uvicorn)."""

    proc: subprocess.Popen
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def rss_kib(self) -> int:
        return rss_kib(self.proc.pid)

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.proc.poll() is None


@contextmanager
def live_server(
    data_dir: Path,
    *,
    tiny: bool,
    env: dict[str, str] | None = None,
    start_timeout: float = 180,
    root: Path = ROOT,
) -> Iterator[LiveServer]:
    """Start the server, wait (bounded) until /healthz answers, stop it (SIGTERM, then SIGKILL).
    ``root``: the checkout whose code it runs (another one's with its own ``.venv`` when it has
    one: ``bench_open.py --against``)."""
    port = free_port()
    data_dir.mkdir(parents=True, exist_ok=True)
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("SPARSESCOPE_")}
    path = os.environ.get("PYTHONPATH", "")
    other = without_the_shim(path)  # another checkout's server imports its own web app
    full_env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        PYTHONPATH=str(root) + os.pathsep + (path if Path(root).resolve() == ROOT else other),
        SPARSESCOPE_DATA_DIR=str(data_dir),
    )
    if tiny:  # one model (the default would serve the tiny one twice: the same id, refused)
        full_env["SPARSESCOPE_MODELS"] = "tiny"
    full_env.update(env or {})  # the caller's settings win (e.g. another data directory)
    log_path = data_dir / f"server-{port}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [python_of(root), "-c", LAUNCHER, "tiny" if tiny else "real", str(port)],
            cwd=root,
            env=full_env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    server = LiveServer(proc, port, log_path)
    try:
        deadline = time.monotonic() + start_timeout
        while True:
            if not server.alive():
                raise RuntimeError(f"the server exited ({proc.returncode}):\n{server.log_tail()}")
            try:
                if httpx.get(server.url + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"no /healthz after {start_timeout} s:\n{server.log_tail()}")
            time.sleep(0.2)
        yield server
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)


# ----------------------------------------------------------------------------- the load


def text_pool(count: int, seed: int = 0) -> list[str]:
    """``count`` distinct texts of 3 to 60 words, mixed scripts and punctuation."""
    rng = random.Random(seed)
    pool: list[str] = []
    while len(pool) < count:
        words = rng.choices(WORDS, k=rng.randint(3, 60))
        text = " ".join(words).capitalize() + rng.choice([".", "!", "?", ""])
        if text not in pool:
            pool.append(text)
    return pool


@dataclass
class LoadResult:
    latencies: dict[str, list[float]] = field(default_factory=dict)  # kind -> seconds
    errors: list[str] = field(default_factory=list)
    reposts: int = 0
    requests: int = 0
    rss_kib: dict[int, int] = field(default_factory=dict)  # after request k -> VmRSS
    wall_s: float = 0.0
    server_cpu_s: float = 0.0  # the server's CPU time during the load (all threads)

    def all_latencies(self) -> list[float]:
        return [x for xs in self.latencies.values() for x in xs]


def percentile(xs: list[float], q: float) -> float:
    """The q-quantile (0..1) of ``xs``, nearest rank."""
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * len(s) + 0.5) - 1))]


def run_load(
    server: LiveServer,
    *,
    clients: int = 8,
    analyses: int = 25,
    pool: list[str] | None = None,
    timeout: float = 120.0,
    rss_at: tuple[int, ...] = (100,),
    seed: int = 0,
) -> LoadResult:
    """``clients`` threads, each ``analyses`` rounds of 5 requests (module doc)."""
    pool = pool or text_pool(24, seed)
    res = LoadResult()
    lock = threading.Lock()
    layers, heads, methods = _shape(server, timeout)

    def record(kind: str, dt: float) -> None:
        with lock:
            res.latencies.setdefault(kind, []).append(dt)
            res.requests += 1
            if res.requests in rss_at and server.alive():
                res.rss_kib[res.requests] = server.rss_kib()

    def client(c: int) -> None:
        rng = random.Random(seed * 1000 + c)
        with httpx.Client(base_url=server.url, timeout=timeout) as http:

            def call(kind: str, fn: Callable[[], httpx.Response]) -> httpx.Response | None:
                t0 = time.perf_counter()
                try:
                    r = fn()
                except httpx.HTTPError as exc:
                    with lock:
                        res.errors.append(f"{kind}: {type(exc).__name__}: {exc}")
                    return None
                record(kind, time.perf_counter() - t0)
                if r.status_code != 200 and r.status_code != 404:
                    with lock:
                        res.errors.append(f"{kind}: {r.status_code} {r.text[:200]}")
                return r

            for k in range(analyses):
                # the first rounds walk the pool (every text length seen early), then at random
                first = k * clients + c
                text = pool[first] if first < len(pool) else rng.choice(pool)
                body = {
                    "text": text,
                    "alpha": rng.choice([1.5, 1.5, 1.5, 1.25, 2.0]),
                    "causal": rng.random() < 0.2,
                }
                r = call("analyze", lambda b=body: http.post("/api/analyze", json=b))
                if r is None or r.status_code != 200:
                    continue
                aid = r.json()["id"]
                li, hi = rng.randrange(layers), rng.randrange(heads)
                method = rng.choice(methods)
                follow: list[tuple[str, str, dict[str, Any]]] = [
                    ("head", f"/api/analyses/{aid}/heads/{li}/{hi}", {}),
                    ("metrics", f"/api/analyses/{aid}/metrics/{li}/{hi}", {"method": method}),
                    ("head", f"/api/analyses/{aid}/heads/{rng.randrange(layers)}/{hi}", {}),
                ]
                if k % 2 == 0:
                    scope = {} if rng.random() < 0.5 else {"layer": li, "head": hi}
                    follow.append(("pareto", f"/api/analyses/{aid}/pareto", scope))
                else:
                    follow.append(("analysis", f"/api/analyses/{aid}", {}))
                for kind, url, params in follow:
                    r = call(kind, lambda u=url, p=params: http.get(u, params=p))
                    if r is not None and r.status_code == 404:  # evicted: post again, as the page
                        with lock:
                            res.reposts += 1
                        again = call("analyze", lambda b=body: http.post("/api/analyze", json=b))
                        if again is None or again.status_code != 200:
                            continue
                        r = call(kind, lambda u=url, p=params: http.get(u, params=p))
                        if r is not None and r.status_code == 404:
                            with lock:
                                res.errors.append(f"{kind}: 404 right after a re-post: {url}")

    cpu0, t0 = cpu_seconds(server.pid), time.perf_counter()
    threads = [threading.Thread(target=client, args=(c,), daemon=True) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout * analyses * 6)
        if t.is_alive():
            res.errors.append("a client did not finish in time")
    res.wall_s = time.perf_counter() - t0
    if server.alive():
        res.rss_kib[res.requests] = server.rss_kib()
        res.server_cpu_s = cpu_seconds(server.pid) - cpu0
    else:
        res.errors.append(f"the server died:\n{server.log_tail()}")
    return res


def _shape(server: LiveServer, timeout: float) -> tuple[int, int, list[str]]:
    """(layers, heads, methods usable without an artefact at every alpha) of the served model."""
    with httpx.Client(base_url=server.url, timeout=timeout) as http:
        a = http.post("/api/analyze", json={"text": "Shape probe."}).json()
    usable = [m["name"] for m in a["methods"] if not m["needs_artefact"]]
    return a["layers"], a["heads"], usable


def summary(res: LoadResult) -> dict[str, Any]:
    lat = res.all_latencies()
    out: dict[str, Any] = {
        "requests": res.requests,
        "errors": len(res.errors),
        "reposts": res.reposts,
        "wall_s": round(res.wall_s, 1),
        "server_cpu_s": round(res.server_cpu_s, 1),
        "throughput_rps": round(res.requests / res.wall_s, 1) if res.wall_s else None,
        "p50_ms": round(1000 * percentile(lat, 0.5), 1) if lat else None,
        "p99_ms": round(1000 * percentile(lat, 0.99), 1) if lat else None,
        "per_kind": {
            k: {
                "n": len(v),
                "p50_ms": round(1000 * percentile(v, 0.5), 1),
                "p99_ms": round(1000 * percentile(v, 0.99), 1),
                "mean_ms": round(1000 * statistics.fmean(v), 1),
            }
            for k, v in sorted(res.latencies.items())
        },
        "rss_mib": {k: round(v / 1024, 1) for k, v in sorted(res.rss_kib.items())},
    }
    return out


# ----------------------------------------------------------------------------- a lecture hall


def short_texts(count: int, seed: int) -> list[str]:
    """``count`` distinct short texts (6 to 14 words: a sentence a student types)."""
    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < count:
        text = " ".join(rng.choices(WORDS, k=rng.randint(6, 14))).capitalize() + "."
        if text not in out:
            out.append(text)
    return out


def long_text(seed: int, words: int = 400) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choices(WORDS, k=words)).capitalize() + "."


def wait_gallery(url: str, timeout: float = 600) -> None:
    """Wait (bounded) until the server's start-up gallery precomputation is done: it runs in the
    background and would otherwise share the cores with what is measured."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/api/gallery", timeout=30).json().get("precomputed"):
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)


def burst(url: str, bodies: list[dict], path: str = "/api/analyze", timeout: float = 600):
    """Post every body at the same moment (one thread each); (statuses, latencies, wall)."""
    results: list[tuple[int, float]] = [(0, 0.0)] * len(bodies)
    gate = threading.Barrier(len(bodies) + 1)

    def one(i: int) -> None:
        with httpx.Client(base_url=url, timeout=timeout) as http:
            gate.wait()
            t0 = time.perf_counter()
            try:
                r = http.post(path, json=bodies[i])
                results[i] = (r.status_code, time.perf_counter() - t0)
            except httpx.HTTPError:
                results[i] = (-1, time.perf_counter() - t0)

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(len(bodies))]
    for t in threads:
        t.start()
    gate.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    return [c for c, _ in results], [d for _, d in results], wall


def scenario_batch(tiny: bool, rounds: int, clients: int) -> None:
    """(a) ``clients`` simultaneous short analyses: batched (the default worker) vs one by one
    (``SPARSESCOPE_BATCH_TOKENS=1``, no gathering window), ``rounds`` bursts of fresh texts each,
    the two servers alternating."""
    modes = {
        "batched": {},
        "one by one": {"SPARSESCOPE_BATCH_TOKENS": "1", "SPARSESCOPE_BATCH_WINDOW_MS": "0"},
    }
    walls: dict[str, list[float]] = {m: [] for m in modes}
    lats: dict[str, list[float]] = {m: [] for m in modes}
    cpus: dict[str, list[float]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        servers = {
            m: stack.enter_context(
                live_server(Path(tmp) / str(i), tiny=tiny, env=env, start_timeout=600)
            )
            for i, (m, env) in enumerate(modes.items())
        }
        for server in servers.values():  # the start-up gallery precomputation is done
            wait_gallery(server.url)
        for r in range(rounds + 1):  # round 0 warms both up (not counted)
            for m, server in servers.items():
                texts = short_texts(clients, seed=1000 * r + (0 if m == "batched" else 500))
                cpu0 = cpu_seconds(server.pid)
                codes, lat, wall = burst(server.url, [{"text": t} for t in texts])
                if r > 0:
                    cpus[m].append(cpu_seconds(server.pid) - cpu0)
                bad = [c for c in codes if c != 200]
                if bad:
                    print(f"  {m}: {len(bad)} answers were not 200: {sorted(set(bad))}")
                if r > 0:
                    walls[m].append(wall)
                    lats[m] += lat
    print(f"(a) {clients} simultaneous short analyses, {rounds} rounds (median wall):")
    for m in modes:
        w, lt = statistics.median(walls[m]), lats[m]
        print(
            f"  {m:10s} wall {w:6.2f} s ({clients / w:5.1f} analyses/s), latency p50 "
            f"{1000 * percentile(lt, 0.5):7.0f} ms, p99 {1000 * percentile(lt, 0.99):7.0f} ms"
        )
    ratio = statistics.median(walls["one by one"]) / statistics.median(walls["batched"])
    print(f"  throughput batched / one by one: {ratio:.2f}x")
    cpu = {m: statistics.median(v) for m, v in cpus.items()}
    print(
        "  server CPU per burst (user + system, all threads; independent of other load): "
        + ", ".join(
            f"{m} {c:.2f} s ({1000 * c / clients:.0f} ms an analysis)" for m, c in cpu.items()
        )
        + f"; one by one / batched {cpu['one by one'] / cpu['batched']:.2f}x"
    )


def scenario_mixed(tiny: bool, clients: int, seconds: float) -> None:
    """(b) ``clients`` clients for ``seconds`` of mixed traffic: short and long analyses, heads,
    metrics, Pareto, shares. p50/p99 per route, 429/503 counted, RSS at start/middle/end."""
    shorts, longs = short_texts(64, seed=7), [long_text(s, 300) for s in range(8)]
    lat: dict[str, list[float]] = {}
    codes: dict[str, dict[int, int]] = {}
    lock = threading.Lock()
    with tempfile.TemporaryDirectory() as tmp:
        with live_server(Path(tmp), tiny=tiny, start_timeout=600) as server:
            layers, heads, methods = _shape(server, 600)
            rss = {"start": server.rss_kib()}
            stop = time.monotonic() + seconds

            def note(kind: str, r: httpx.Response | None, dt: float) -> None:
                with lock:
                    code = -1 if r is None else r.status_code
                    codes.setdefault(kind, {}).setdefault(code, 0)
                    codes[kind][code] += 1
                    if code == 200:
                        lat.setdefault(kind, []).append(dt)

            def call(http: httpx.Client, kind: str, method: str, url: str, **kw):
                t0 = time.perf_counter()
                try:
                    r = http.request(method, url, **kw)
                except httpx.HTTPError:
                    r = None
                note(kind, r, time.perf_counter() - t0)
                return r

            def client(c: int) -> None:
                rng = random.Random(c)
                with httpx.Client(base_url=server.url, timeout=600) as http:
                    while time.monotonic() < stop:
                        is_long = rng.random() < 0.15
                        text = rng.choice(longs if is_long else shorts)
                        kind = "analyze long" if is_long else "analyze short"
                        r = call(http, kind, "POST", "/api/analyze", json={"text": text})
                        if r is None or r.status_code != 200:
                            time.sleep(1)
                            continue
                        aid = r.json()["id"]
                        li, hi = rng.randrange(layers), rng.randrange(heads)
                        call(http, "head", "GET", f"/api/analyses/{aid}/heads/{li}/{hi}")
                        m = rng.choice(methods)
                        call(http, "metrics", "GET", f"/api/analyses/{aid}/metrics/{li}/{hi}",
                             params={"method": m})  # fmt: skip
                        if rng.random() < 0.2:
                            call(http, "pareto", "GET", f"/api/analyses/{aid}/pareto")
                        if rng.random() < 0.1:
                            share = {"state": {"text": text}}
                            call(http, "share", "POST", "/api/share", json=share)
                        call(http, "healthz", "GET", "/healthz")

            threads = [threading.Thread(target=client, args=(c,), daemon=True)
                       for c in range(clients)]  # fmt: skip
            for t in threads:
                t.start()
            time.sleep(seconds / 2)
            rss["middle"] = server.rss_kib()
            for t in threads:
                t.join()
            rss["end"] = server.rss_kib()
    print(f"(b) {clients} clients x {seconds:g} s of mixed traffic:")
    for kind in sorted(codes):
        xs = lat.get(kind, [])
        p = (f"p50 {1000 * percentile(xs, 0.5):7.0f} ms, p99 {1000 * percentile(xs, 0.99):7.0f} ms"
             if xs else "no 200s")  # fmt: skip
        print(f"  {kind:14s} {dict(sorted(codes[kind].items()))}  {p}")
    print("  RSS: " + ", ".join(f"{k} {v / 1024:.0f} MiB" for k, v in rss.items()))


def scenario_shares(tiny: bool, shares: int) -> None:
    """(c) ``shares`` long-text shares at once, then one short analysis: how long it waits, the
    memory, and how long shutdown takes."""
    with tempfile.TemporaryDirectory() as tmp:
        with live_server(Path(tmp), tiny=tiny, start_timeout=600) as server:
            rss0 = server.rss_kib()
            bodies = [{"state": {"text": long_text(100 + i, 1500)[:19000], "truncate": True}}
                      for i in range(shares)]  # fmt: skip
            codes, _, wall = burst(server.url, bodies, path="/api/share")
            t0 = time.perf_counter()
            r = httpx.post(server.url + "/api/analyze", json={"text": "A short question."},
                           timeout=600)  # fmt: skip
            short = time.perf_counter() - t0
            rss1 = server.rss_kib()
            t0 = time.perf_counter()
            server.proc.terminate()
            server.proc.wait(timeout=120)
            down = time.perf_counter() - t0
    print(f"(c) {shares} long-text shares at once, then a short analysis:")
    print(f"  shares: {dict((c, codes.count(c)) for c in sorted(set(codes)))} in {wall:.2f} s")
    print(f"  the short analysis: {r.status_code} in {1000 * short:.0f} ms")
    print(f"  RSS {rss0 / 1024:.0f} -> {rss1 / 1024:.0f} MiB; shutdown took {down:.1f} s")


def scenario_forwards(clients: int, rounds: int) -> None:
    """(f) The forwards alone, in process, one torch thread: ``clients`` short texts run one by
    one vs as the worker runs a round of them (packed forwards of up to ``batch_tokens``), the
    same round with its forward in 2 parts side by side (``BATCH_SPLIT``, the server's default)
    vs one run_batch of all (packed: each text bit for bit its single run); the modes
    alternate, ``rounds`` times each (medians)."""
    import torch

    from sparse_core import load_model
    from sparsescope.engine.batching import Job, ModelWorker
    from sparsescope.engine.limits import JobContext
    from sparsescope.engine.request import AnalysisRequest

    torch.set_num_threads(1)
    model = load_model(None, "cpu")
    timing: dict[str, list[float]] = {
        "one by one": [],
        "worker round": [],
        "round in 2 parts": [],
        "one run_batch": [],
    }
    groups_seen = 0

    def jobs_of(texts: list[str]) -> list[Job]:
        return [Job(AnalysisRequest(t), len(model.encode(t).ids), JobContext()) for t in texts]

    for r in range(rounds + 1):
        texts = short_texts(clients, seed=50 + r)
        worker = ModelWorker(model, window_s=0)
        split = ModelWorker(model, window_s=0, split=2)  # the server's default (BATCH_SPLIT)
        jobs = jobs_of(texts)
        t0 = time.perf_counter()
        for t in texts:
            model.run(t)
        one = time.perf_counter() - t0
        t0 = time.perf_counter()
        worker._run_round(jobs)  # what the worker does with a round of these jobs
        grouped = time.perf_counter() - t0
        groups_seen = worker.stats.batches
        parts_jobs = jobs_of(texts)
        t0 = time.perf_counter()
        split._run_round(parts_jobs)  # the same round, its forward in 2 parts side by side
        in_parts = time.perf_counter() - t0
        t0 = time.perf_counter()
        model.run_batch(texts, truncate=False)
        padded = time.perf_counter() - t0
        if r > 0:
            timing["one by one"].append(one)
            timing["worker round"].append(grouped)
            timing["round in 2 parts"].append(in_parts)
            timing["one run_batch"].append(padded)
    print(f"(f) forwards of {clients} short texts, one torch thread ({groups_seen} forwards):")
    base = statistics.median(timing["one by one"])
    for k, v in timing.items():
        m = statistics.median(v)
        print(f"  {k:16s} {m:6.2f} s  ({base / m:4.2f}x)")


#: (h)'s prober: GET /healthz every 50 ms until the file argv[2] exists; "status:seconds" lines.
PROBER = """
import os, sys, time, httpx
with httpx.Client(base_url=sys.argv[1], timeout=60) as http:
    while not os.path.exists(sys.argv[2]):
        t0 = time.perf_counter()
        code = http.get("/healthz").status_code
        print(f"{code}:{time.perf_counter() - t0:.6f}", flush=True)
        time.sleep(0.05)
"""


def scenario_health(tiny: bool, burst_size: int, rounds: int) -> None:
    """(h) ``/healthz`` while a burst of ``burst_size`` simultaneous analyses arrives: one prober
    asks every 50 ms from just before the burst until it is answered (the
    target: under 1 s during a burst of 300). p50/p99/max of the probes, and of probes with no
    burst."""
    with tempfile.TemporaryDirectory() as tmp:
        with live_server(Path(tmp), tiny=tiny, start_timeout=600) as server:
            wait_gallery(server.url)
            idle: list[float] = []
            with httpx.Client(base_url=server.url, timeout=60) as http:
                for _ in range(40):
                    t0 = time.perf_counter()
                    http.get("/healthz")
                    idle.append(time.perf_counter() - t0)
                    time.sleep(0.05)
            probes: list[float] = []
            codes: list[int] = []
            for r in range(rounds):
                # the prober is a process of its own: the burst's 300 client threads must not
                # delay its clock (they share this process's GIL)
                stop = Path(tmp) / f"stop-{r}"
                prober = subprocess.Popen(
                    [sys.executable, "-c", PROBER, server.url, str(stop)],
                    stdout=subprocess.PIPE,
                    text=True,
                )
                time.sleep(0.5)
                texts = short_texts(burst_size, seed=5000 + r)
                statuses, _, wall = burst(server.url, [{"text": t} for t in texts])
                stop.touch()
                out, _ = prober.communicate(timeout=120)
                for line in out.split():
                    code, secs = line.split(":")
                    codes.append(int(code))
                    probes.append(float(secs))
                print(
                    f"  round {r}: burst of {burst_size} in {wall:.1f} s, answers "
                    f"{dict(sorted(Counter(statuses).items()))}",
                    flush=True,
                )
    print(f"(h) /healthz during bursts of {burst_size} analyses ({rounds} rounds):")
    for name, xs in (("idle", idle), ("during bursts", probes)):
        print(
            f"  {name:14s} n={len(xs):4d}  p50 {1000 * percentile(xs, 0.5):7.1f} ms  p99 "
            f"{1000 * percentile(xs, 0.99):7.1f} ms  max {1000 * max(xs):7.1f} ms"
        )
    print(f"  probe answers: {dict(Counter(codes))}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "hall":
        ap = argparse.ArgumentParser(description="a lecture hall at once")
        ap.add_argument("hall")
        ap.add_argument("--tiny", action="store_true")
        ap.add_argument(
            "--only", choices=("a", "b", "c", "f", "h"), nargs="+", default=["a", "b", "c"]
        )
        ap.add_argument("--rounds", type=int, default=3, help="(a) bursts per mode")
        ap.add_argument("--burst", type=int, default=48, help="(a) simultaneous analyses")
        ap.add_argument("--clients", type=int, default=16, help="(b) clients")
        ap.add_argument("--seconds", type=float, default=120, help="(b) seconds of traffic")
        ap.add_argument("--shares", type=int, default=30, help="(c) long-text shares")
        args = ap.parse_args()
        print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}", flush=True)
        if "a" in args.only:
            scenario_batch(args.tiny, args.rounds, args.burst)
        if "b" in args.only:
            scenario_mixed(args.tiny, args.clients, args.seconds)
        if "c" in args.only:
            scenario_shares(args.tiny, args.shares)
        if "f" in args.only:
            scenario_forwards(args.burst, args.rounds)
        if "h" in args.only:
            scenario_health(args.tiny, args.burst, args.rounds)
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiny", action="store_true", help="the tiny random model (fast)")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--analyses", type=int, default=25, help="rounds per client (5 requests)")
    ap.add_argument("--texts", type=int, default=24, help="distinct texts in the pool")
    ap.add_argument("--cache-entries", type=int, default=None, help="SPARSESCOPE_CACHE_ENTRIES")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per request")
    ap.add_argument(
        "--rss-at", type=int, nargs="+", default=[100], help="sample RSS after these requests"
    )
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = ap.parse_args()

    env = {"SPARSESCOPE_CACHE_ENTRIES": str(args.cache_entries)} if args.cache_entries else {}
    with (
        tempfile.TemporaryDirectory() as tmp,
        live_server(Path(tmp), tiny=args.tiny, env=env, start_timeout=600) as server,
    ):
        health = httpx.get(server.url + "/healthz", timeout=30).json()
        bound = ", ".join(listening_addresses(server.port))
        print(
            f"server pid {server.pid} on {server.url} (listening on {bound}), model "
            f"{health['model']} on {health['device']}, artefact {health['artefact']}; "
            f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}",
            flush=True,
        )
        print(f"RSS at start: {server.rss_kib() / 1024:.0f} MiB", flush=True)
        res = run_load(
            server,
            clients=args.clients,
            analyses=args.analyses,
            pool=text_pool(args.texts),
            timeout=args.timeout,
            rss_at=tuple(args.rss_at),
        )
    s = summary(res)
    if args.json:
        print(json.dumps(s, indent=2))
        return
    print(
        f"{s['requests']} requests from {args.clients} clients in {s['wall_s']} s "
        f"({s['throughput_rps']} req/s; server CPU {s['server_cpu_s']} s), {s['errors']} errors, "
        f"{s['reposts']} re-posts after eviction"
    )
    print(f"all: p50 {s['p50_ms']} ms, p99 {s['p99_ms']} ms")
    for kind, k in s["per_kind"].items():
        print(f"  {kind:9s} n={k['n']:4d}  p50 {k['p50_ms']:8.1f} ms  p99 {k['p99_ms']:8.1f} ms")
    rss = s["rss_mib"]
    print("RSS: " + ", ".join(f"after {k} requests {v} MiB" for k, v in rss.items()))
    if len(rss) >= 2:
        first, last = list(rss.values())[0], list(rss.values())[-1]
        print(f"RSS growth from the first to the last sample: {100 * (last / first - 1):+.1f} %")
    for e in res.errors[:20]:
        print("error:", e)


if __name__ == "__main__":
    main()
