"""Long texts on the CPU: peak RSS of ``model.run`` and of the server's analysis.

MiniLM's real weights with its positions tiled to n (``sparse_core.testing.tiled_positions`` /
``write_tiled_checkpoint``), real prose (WikiText-2's validation articles, concatenated, cut to n
tokens). Each measurement runs in a fresh process so that its peak RSS (VmHWM) is its own:

    PYTHONPATH=. .venv/bin/python bench/bench_long.py run 4096       # model.run at n = 4,096
    PYTHONPATH=. .venv/bin/python bench/bench_long.py run 16384      # n = 16,384
    PYTHONPATH=. .venv/bin/python bench/bench_long.py serve 4096     # POST /api/analyze, uvicorn

``serve`` starts ``sparsescope serve --model DIR --max-tokens n`` (a real uvicorn server on
127.0.0.1) and reads the server process's VmHWM after the answer. Prints one line per figure
with the load average (the machine is shared; figures in docs/benchmarks.md, "Long inputs").
PYTHONPATH=. matters: a global install of sparse_core would otherwise shadow the worktree's.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

CORPUS = Path("/work/shared/data/wikitext-2/valid.txt")


def prose(words: int) -> str:
    """WikiText-2's validation text from its start, ``words`` whitespace words (repeated if
    needed)."""
    text = CORPUS.read_text(encoding="utf-8").split()
    while len(text) < words:
        text = text + text
    return " ".join(text[:words])


def vm_hwm(pid: int | str = "self") -> float:
    """Peak resident set (GiB) of a process."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 2**20
    return float("nan")


def log_tail(path: Path, chars: int = 2000) -> str:
    """The end of the server's log."""
    return path.read_text(errors="replace")[-chars:] if path.exists() else ""


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def run(n: int, alpha: float, threads: int) -> None:
    import torch

    from sparse_core import load_model
    from sparse_core.testing import tiled_positions

    torch.set_num_threads(threads)
    model = tiled_positions(load_model(device="cpu"), n)
    text = prose(n)  # about 1.3 tokens per word: enough for n tokens
    before = vm_hwm()
    t = time.perf_counter()
    out = model.run(text, alpha=alpha, truncate=True)
    dt = time.perf_counter() - t
    nnz = int(out.attn.nnz().sum())
    pairs = out.layers * out.heads * out.n * out.n
    print(
        f"model.run n={out.n} alpha={alpha} threads={threads}: {dt:.1f} s, peak RSS "
        f"{vm_hwm():.2f} GiB (after loading {before:.2f}), P held "
        f"{'dense' if out.attn.is_dense else 'CSR'} {out.attn.nbytes() / 2**20:.0f} MiB, "
        f"{1 - nnz / pairs:.4f} of pairs zero; load {load()}",
        flush=True,
    )


def serve(n: int, alpha: float) -> None:
    from sparse_core.testing import write_tiled_checkpoint

    with tempfile.TemporaryDirectory() as tmp:
        model_dir = write_tiled_checkpoint(Path(tmp) / f"minilm-tiled{n}", n)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        exe = Path(sys.executable).with_name("sparsescope")
        cmd = [str(exe), "serve", "--model", str(model_dir), "--max-tokens", str(n),
               "--port", str(port), "--data-dir", str(Path(tmp) / "data")]  # fmt: skip
        # the server's log to a file: a pipe nobody reads fills up (64 KiB of progress bars and
        # log lines) and then blocks the server mid-analysis
        log_path = Path(tmp) / "serve.log"
        log_file = log_path.open("wb")
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log_file)
        try:
            base = f"http://127.0.0.1:{port}"
            for _ in range(600):
                try:
                    urllib.request.urlopen(base + "/healthz", timeout=2).read()
                    break
                except OSError:
                    if proc.poll() is not None:
                        raise SystemExit(log_tail(log_path)) from None
                    time.sleep(0.5)
            idle = vm_hwm(proc.pid)
            body = json.dumps({"text": prose(n), "alpha": alpha, "truncate": True}).encode()
            req = urllib.request.Request(
                base + "/api/analyze", body, {"Content-Type": "application/json"}
            )
            t = time.perf_counter()
            try:
                with urllib.request.urlopen(req, timeout=3600) as r:
                    got = json.loads(r.read())
            except urllib.error.HTTPError as err:  # the server's own words, and its log's end
                raise SystemExit(
                    f"POST /api/analyze failed after {time.perf_counter() - t:.0f} s: HTTP "
                    f"{err.code} {err.read().decode(errors='replace')[:500]}\n{log_tail(log_path)}"
                ) from None
            dt = time.perf_counter() - t
            print(
                f"POST /api/analyze n={got['n']} alpha={alpha}: {dt:.1f} s, server peak RSS "
                f"{vm_hwm(proc.pid):.2f} GiB (idle after warm-up {idle:.2f}); load {load()}",
                flush=True,
            )
        finally:
            proc.terminate()
            proc.wait(30)
            log_file.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=["run", "serve"])
    ap.add_argument("n", type=int)
    ap.add_argument("--alpha", type=float, default=1.5)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    if a.what == "run":
        run(a.n, a.alpha, a.threads)
    else:
        serve(a.n, a.alpha)


if __name__ == "__main__":
    main()
