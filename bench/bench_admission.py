"""Bounded memory under load: one long analysis plus concurrent derived requests on it.

A real ``sparsescope serve --model DIR --max-tokens N`` on 127.0.0.1 (the 4,096-position MiniLM,
``sparse_core.testing.write_tiled_checkpoint``, by default). The bench

1. posts one long analysis (WikiText-2's validation text cut to the model's length, the page's
   summary only: ``"summary": ["window"]``) and waits for it;
2. sends, at once, ``--clients`` derived requests on it (metrics of several methods, flow, one
   head's and every head's budgets, one head's Pareto sweep), each client looping over its list
   until every request has answered or ``--seconds`` have passed;
3. meanwhile samples the server's resident memory every 50 ms (its peak is also read from
   VmHWM) and, at the end, checks that the server is still up.

Every answer must be 200, or 503 with a ``Retry-After``: anything else (a 500, a cut connection)
is reported. Prints one JSON line: the peak RSS, answers by status, the Retry-After values, the
gate's counters (``/healthz`` ``compute``) and the request times.

    python bench/bench_admission.py --n 4096 --clients 8 --seconds 600
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_load import ROOT, LiveServer, free_port, python_of, rss_kib  # noqa: E402

CORPUS = Path("/work/shared/data/wikitext-2/valid.txt")

SERVE = """
import sys
from sparsescope.cli import main
model, max_tokens, port = sys.argv[1:4]
sys.exit(main(["serve", "--model", model, "--max-tokens", max_tokens, "--port", port]))
"""


@contextmanager
def serve_model(
    model_dir: Path, max_tokens: int, data_dir: Path, env: dict[str, str] | None = None,
    start_timeout: float = 300,
) -> Iterator[LiveServer]:  # fmt: skip
    """``sparsescope serve --model DIR --max-tokens N`` on a free port of 127.0.0.1, until
    ``/healthz`` answers (bounded); stopped at the end (SIGTERM, then SIGKILL)."""
    port = free_port()
    data_dir.mkdir(parents=True, exist_ok=True)
    full = {k: v for k, v in os.environ.items() if not k.startswith("SPARSESCOPE_")}
    full.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        SPARSESCOPE_DATA_DIR=str(data_dir),
        SPARSESCOPE_WARMUP="0",
    )
    full.update(env or {})
    log_path = data_dir / f"server-{port}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [python_of(ROOT), "-c", SERVE, str(model_dir), str(max_tokens), str(port)],
            cwd=ROOT, env=full, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    server = LiveServer(proc, port, log_path)
    try:
        deadline = time.monotonic() + start_timeout
        while True:
            if proc.poll() is not None:
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
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)


def vm_hwm_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def prose(words: int) -> str:
    text = CORPUS.read_text(encoding="utf-8").split()
    return " ".join(text[:words])


def derived_paths(aid: str, n: int) -> list[str]:
    """The derived requests the clients share out: every kind the page and the API compute."""
    a = f"/api/analyses/{aid}"
    return [
        f"{a}/metrics/2/3?method=window&window=3",
        f"{a}/metrics/0/1?method=topk&k=25",
        f"{a}/metrics/5/7?method=h2o",
        f"{a}/metrics/3/3?method=streaming",
        f"{a}/flow?token={n // 2}",
        f"{a}/budgets?layer=1&head=2",
        f"{a}/pareto?layer=4&head=5",
        f"{a}/budgets",
        f"{a}/metrics/1/9?method=vertical-slash",
        f"{a}/flow?token=3&layer=2",
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=4096, help="the model's positions (default 4096)")
    ap.add_argument("--model-dir", type=Path, default=None, help="default: the tiled MiniLM")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=600, help="bound on the whole load")
    ap.add_argument("--words", type=int, default=4000, help="words of prose posted")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = args.model_dir
        if model_dir is None:
            from sparse_core.testing import write_tiled_checkpoint

            model_dir = write_tiled_checkpoint(Path(tmp) / f"minilm-tiled{args.n}", args.n)
        with serve_model(model_dir, args.n, Path(tmp) / "data") as server:
            run_load(server, args)


def run_load(server: LiveServer, args) -> None:
    peak = [0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            try:
                peak[0] = max(peak[0], rss_kib(server.pid))
            except (OSError, RuntimeError):
                return
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    t0 = time.perf_counter()
    timeout = httpx.Timeout(args.seconds, connect=30)
    with httpx.Client(base_url=server.url, timeout=timeout) as c:
        r = c.post("/api/analyze", json={"text": prose(args.words), "truncate": True,
                                         "summary": ["window"]})  # fmt: skip
        if r.status_code != 200:
            raise SystemExit(f"analysis: {r.status_code} {r.text[:300]}")
        body = r.json()
    analysis_s = time.perf_counter() - t0
    aid, n = body["id"], len(body["tokens"])
    paths = derived_paths(aid, n)
    statuses: Counter = Counter()
    retry: list[int] = []
    times: dict[str, float] = {}
    problems: list[str] = []
    lock = threading.Lock()
    deadline = time.monotonic() + args.seconds

    def client(k: int) -> None:
        mine = [paths[k % len(paths)]]  # one request per client, retried after a 503
        with httpx.Client(base_url=server.url, timeout=timeout) as c:
            for p in mine:
                while time.monotonic() < deadline:
                    t = time.perf_counter()
                    try:
                        r = c.get(p)
                    except httpx.HTTPError as exc:
                        with lock:
                            problems.append(f"{p}: {type(exc).__name__}")
                        break
                    with lock:
                        statuses[r.status_code] += 1
                        if r.status_code == 503:
                            ra = r.headers.get("retry-after")
                            if ra is None:
                                problems.append(f"{p}: 503 without Retry-After")
                            else:
                                retry.append(int(ra))
                        elif r.status_code != 200:
                            problems.append(f"{p}: {r.status_code} {r.text[:200]}")
                    if r.status_code == 503:  # wait as told (bounded by the deadline), then retry
                        time.sleep(min(float(r.headers.get("retry-after", 1)),
                                       max(0.0, deadline - time.monotonic())))  # fmt: skip
                        continue
                    with lock:
                        times[p] = time.perf_counter() - t
                    break

    t1 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    load_s = time.perf_counter() - t1
    stop.set()
    sampler.join()
    alive = server.proc.poll() is None
    health = httpx.get(server.url + "/healthz", timeout=30).json() if alive else {}
    hwm = vm_hwm_kib(server.pid) if alive else 0
    out = {
        "n": n,
        "clients": args.clients,
        "analysis_s": round(analysis_s, 1),
        "load_s": round(load_s, 1),
        "peak_rss_gib": round(max(peak[0], hwm) / 2**20, 2),
        "statuses": dict(statuses),
        "retry_after": sorted(retry)[:50],
        "answered": len(times),
        "asked": args.clients,
        "median_s": round(statistics.median(times.values()), 2) if times else None,
        "times_s": {p.split(aid)[1]: round(v, 2) for p, v in times.items()},
        "problems": problems,
        "server_alive": alive,
        "compute": health.get("compute"),
        "load": " ".join(f"{x:.1f}" for x in os.getloadavg()),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
