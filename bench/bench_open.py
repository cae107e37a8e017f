"""Benchmark: opening a fresh 512-token text on the server against a plain softmax forward
(issue 15, goal 2: at most 7×).

"Opening" is what the page asks for when a text is analysed: ``POST /api/analyze``, then the
first head's payload (``GET /api/analyses/{id}/heads/0/0``) and that head's Pareto data
(``GET /api/analyses/{id}/pareto?layer=0&head=0``), one after the other, through the real app
(``sparsescope.web.main.create_app``: every middleware, gzip included, in process through
Starlette's TestClient) on the real default model with its shipped artefact. The reference is a
plain ``transformers.BertModel`` forward of the same weights (eager attention, softmax) on the
same tokens (``bench_entmax.hf_bert``), with the torch thread count the server uses.

Every repeat takes a fresh window of WikiText-2 (a cache miss), trimmed to 512 tokens, and runs
the two side by side (interleaved); medians, minima and the per-request split are printed, with
the bytes each response sends gzipped and plain, and the load average before and after.

Run: ``python bench/bench_open.py --repeats 5`` (figures in docs/benchmarks.md, "Opening a long
text"). ``--n 128`` for a shorter text.

``--server``: through a real server instead (issue 26): ``sparsescope serve`` in a process of its
own on 127.0.0.1 (``bench_load.live_server``: the real CLI, uvicorn, its own torch threads; no
start-up warm-up of the gallery), every request over HTTP with httpx (gzip accepted, as a
browser does), against the plain forward in this process on ``--ref-threads`` (2) torch threads:
the "lone analysis on both cores" floor is open ≤ 4x a 2-thread softmax forward.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_entmax import corpus_text, hf_bert, load, prefix_with_tokens  # noqa: E402

STEPS = ("analyze", "head", "pareto")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--n", type=int, default=512, help="tokens of each text (specials in)")
    ap.add_argument("--alpha", type=float, default=1.5)
    ap.add_argument("--text-file", help="plain text to take the windows from (default WikiText-2)")
    ap.add_argument("--server", action="store_true", help="through a real uvicorn server")
    ap.add_argument("--ref-threads", type=int, default=2, help="--server: the forward's threads")
    args = ap.parse_args()
    if args.server:
        with tempfile.TemporaryDirectory() as tmp:
            from bench_load import live_server

            # no gallery precomputation beside the measurement
            env = {"SPARSESCOPE_WARMUP": "0"}
            with live_server(Path(tmp), tiny=False, env=env, start_timeout=600) as server:
                import httpx

                torch.set_num_threads(args.ref_threads)
                with httpx.Client(base_url=server.url, timeout=600) as client:
                    health = client.get("/healthz").json()
                    label = f"server pid {server.pid} {server.url}, model {health['model']}"
                    run(args, client, label, None)
        return

    from fastapi.testclient import TestClient

    from sparsescope.engine.service import AnalysisService
    from sparsescope.engine.settings import Settings
    from sparsescope.web.main import create_app

    tmp = tempfile.TemporaryDirectory()
    # no start-up warm-up: it would also precompute the gallery in the background
    settings = Settings(data_dir=Path(tmp.name), warmup=False)
    service = AnalysisService(settings)
    service.start()  # the model, its thread count (settings.torch_threads)
    service.warmup()
    label = f"model {service.slot.id}, artefact {service.slot.artefact_for(args.alpha)[1]}"
    with TestClient(create_app(settings, service)) as client:
        run(args, client, label, service)
    tmp.cleanup()


def run(args, client, label: str, service) -> None:
    """The interleaved repeats through ``client`` (in process, or httpx to a real server) and the
    table; ``service`` (in process only) gives the server's stage timings."""
    tok, bert = hf_bert("cpu")
    words = corpus_text(args.text_file).split()
    count = lambda s: len(tok(s)["input_ids"])  # noqa: E731

    print(
        f"torch {torch.__version__}, {os.cpu_count()} CPUs, torch threads "
        f"{torch.get_num_threads()} (the forward), n = {args.n}, alpha {args.alpha}, repeats "
        f"{args.repeats}, {label}, {load()}"
    )
    times: dict[str, list[float]] = {k: [] for k in ("softmax", *STEPS, "open")}
    sizes: dict[str, tuple[int, int]] = {}
    for rep in range(args.repeats + 1):  # repeat 0 warms both up, not counted
        text = prefix_with_tokens(" ".join(words[400 * rep + 7 :]), args.n, count)
        ids = tok(text, return_tensors="pt")["input_ids"]
        with torch.inference_mode():
            t0 = time.perf_counter()
            bert(input_ids=ids)
            soft = time.perf_counter() - t0
        got = {}
        t0 = time.perf_counter()
        r = client.post("/api/analyze", json={"text": text, "alpha": args.alpha})
        got["analyze"] = time.perf_counter() - t0
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["n"] == ids.shape[1], (body["n"], ids.shape)
        aid = body["id"]
        urls = {
            "analyze": None,
            "head": f"/api/analyses/{aid}/heads/0/0",
            "pareto": f"/api/analyses/{aid}/pareto?layer=0&head=0",
        }
        for step in ("head", "pareto"):
            t0 = time.perf_counter()
            r = client.get(urls[step])
            got[step] = time.perf_counter() - t0
            assert r.status_code == 200, r.text
        if rep == 0:
            continue
        times["softmax"].append(soft)
        for k, v in got.items():
            times[k].append(v)
        times["open"].append(sum(got.values()))
        if rep == 1:  # what each response sends, gzipped and plain (cached by now)
            for step, url in urls.items():
                url = url or f"/api/analyses/{aid}"
                plain = client.get(url, headers={"Accept-Encoding": "identity"})
                with client.stream("GET", url, headers={"Accept-Encoding": "gzip"}) as z:
                    packed = b"".join(z.iter_raw())
                sizes[step] = (len(packed), len(plain.content))
    med = {k: statistics.median(v) for k, v in times.items()}
    lo = {k: min(v) for k, v in times.items()}
    print(f"    {'':<34} {'median ms':>10} {'x softmax':>9} {'min ms':>9} {'x softmax':>9}")
    rows = [("plain softmax forward (BertModel)", "softmax")]
    rows += [(f"  {k}", k) for k in STEPS] + [("open (analyze + head + pareto)", "open")]
    for label, k in rows:
        print(
            f"    {label:<34} {1e3 * med[k]:10.1f} {med[k] / med['softmax']:8.2f}x "
            f"{1e3 * lo[k]:9.1f} {lo[k] / lo['softmax']:8.2f}x"
        )
    print("    open / softmax per repeat: " + ", ".join(
        f"{o / s:.2f}x" for o, s in zip(times["open"], times["softmax"], strict=True)
    ))  # fmt: skip
    for step, (z, p) in sizes.items():
        print(f"    {step:<8} sends {z / 1024:8.1f} KiB gzipped ({p / 1024:8.1f} KiB plain)")
    if service is not None:
        t = service.stats.timings
        print(
            "    last analyze, server stages: "
            + ", ".join(f"{k} {1e3 * v:.0f} ms" for k, v in t.items())
        )
    print(f"    {load()}")


if __name__ == "__main__":
    main()
