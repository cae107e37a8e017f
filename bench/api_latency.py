"""Latency of the web API on the real model: analyze (fresh and cached), head payload, Pareto,
and a shared link opened once its share has warmed it.

    python bench/api_latency.py --n 128 512 --reps 5

The shared link (``--share``): a share of a fresh text is created (which warms its analysis and
its head in the background), and once that is done the link is opened as the page opens it: the
``/s/{id}`` page, ``POST /api/analyze`` of its state and the shared head; their wall time against
the fresh analyze's of the same n (tests/app/test_share.py checks that none of it runs the model).

Each analyze call uses a fresh text of exactly n tokens (cache misses), taken from WikiText-2;
the split model / POS / summary / body comes from the service's own timings of that call.
Runs in-process through FastAPI's TestClient (no network), on the CPU by default.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from tests.checkout import use_the_checkout  # noqa: E402

use_the_checkout()  # ``import sparsescope``: this checkout's app/, not an installed copy

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "data" / "wikitext-2" / "valid.txt"


def texts_of_n_tokens(model, n: int, count: int) -> list[str]:
    """``count`` distinct texts that tokenise to exactly n positions (specials included)."""
    words = CORPUS.read_text(encoding="utf-8").split()
    out, start = [], 0
    while len(out) < count:
        lo, hi = start + 1, start + n  # a word is at least one token
        while lo < hi:  # the longest prefix of words with at most n tokens
            mid = (lo + hi + 1) // 2
            if len(model.tokenizer.encode(" ".join(words[start:mid])).ids) <= n:
                lo = mid
            else:
                hi = mid - 1
        text = " ".join(words[start:lo])
        if len(model.tokenizer.encode(text).ids) == n:
            out.append(text)
        start = lo
    return out


CPU: list[float] = []  # process CPU seconds of the last timed() call (all threads)


def timed(fn) -> tuple[float, object]:
    """Wall seconds of ``fn()`` and its result; its CPU seconds go to ``CPU[-1]``. On a shared
    machine wall time includes waiting for a core; CPU time does not."""
    c0, t0 = time.process_time(), time.perf_counter()
    res = fn()
    dt = time.perf_counter() - t0
    CPU.append(time.process_time() - c0)
    return dt, res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, nargs="+", default=[128, 512])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--pareto", action="store_true", help="time the Pareto sweeps too")
    ap.add_argument("--share", action="store_true", help="time opening a warmed shared link too")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (SPARSESCOPE_THREADS)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)

    import torch
    from fastapi.testclient import TestClient

    from sparsescope.engine.service import AnalysisService
    from sparsescope.engine.settings import Settings
    from sparsescope.web.main import create_app

    settings = Settings(device=args.device, threads=args.threads)
    service = AnalysisService(settings)
    service.start()
    print(f"torch threads: {torch.get_num_threads()}, load average: {os.getloadavg()}")
    with TestClient(create_app(settings, service)) as client:
        # the gallery precomputes its examples at start-up: let it finish
        client.app.state.gallery_warmer.done.wait(timeout=600)
        model = service.model
        print(f"model {model.model_id} on {model.device}, artefact {service.health()['artefact']}")
        for n in args.n:
            texts = texts_of_n_tokens(model, n, args.reps + 2)  # the last: the shared link
            client.post("/api/analyze", json={"text": texts[-1]})  # warm this size
            walls, cpus, splits, hits, heads, heads2, sizes = [], [], [], [], [], [], []
            for text in texts[: args.reps]:
                dt, r = timed(lambda t=text: client.post("/api/analyze", json={"text": t}))
                assert r.status_code == 200 and r.json()["n"] == n, r.text[:300]
                walls.append(dt)
                cpus.append(CPU[-1])
                splits.append(dict(service.stats.timings))
                sizes.append(len(r.content))
                aid = r.json()["id"]
                hits.append(timed(lambda t=text: client.post("/api/analyze", json={"text": t}))[0])
                url = f"/api/analyses/{aid}/heads/2/3"
                dt, r = timed(lambda u=url: client.get(u))
                assert r.status_code == 200
                heads.append((dt, len(r.content)))
                heads2.append(timed(lambda u=url: client.get(u))[0])
            med = statistics.median
            print(f"\nn = {n}: POST /api/analyze (fresh text), median of {args.reps}")
            print(
                f"  wall {med(walls) * 1000:.0f} ms (min {min(walls) * 1000:.0f}), "
                f"CPU {med(cpus) * 1000:.0f} ms (min {min(cpus) * 1000:.0f})"
            )
            for k in splits[0]:
                print(f"    {k:8s} {med(s[k] for s in splits) * 1000:.1f} ms")
            print(f"  response {med(sizes) / 1024:.0f} KiB")
            print(f"  cached repeat {med(hits) * 1000:.1f} ms")
            print(
                f"  GET head 2/3: {med(h[0] for h in heads) * 1000:.0f} ms first, "
                f"{med(heads2) * 1000:.1f} ms cached, {med(h[1] for h in heads) / 1024:.0f} KiB"
            )
            if args.share:
                shared_link(client, texts[-2], med(walls))
            if args.pareto:
                dt, r = timed(lambda a=aid: client.get(f"/api/analyses/{a}/pareto"))
                cpu = CPU[-1]
                dt2, _ = timed(lambda a=aid: client.get(f"/api/analyses/{a}/pareto?layer=2&head=3"))
                print(
                    f"  GET pareto (mean, first = the sweep): {dt * 1000:.0f} ms wall, "
                    f"{cpu * 1000:.0f} ms CPU [{r.status_code}]; one head after it: "
                    f"{dt2 * 1000:.1f} ms"
                )


def shared_link(client, text: str, fresh_s: float) -> None:
    """Share ``text`` (layer 2, head 3), wait for the share's warm-up, then time
    opening the link as the page does; printed against ``fresh_s``, a fresh analyze's wall."""
    state = {"text": text, "alpha": 1.5, "causal": False, "layer": 2, "head": 3,
             "method": "window"}  # fmt: skip
    r = client.post("/api/share", json={"state": state})
    assert r.status_code in (200, 201), r.text[:300]
    sid = r.json()["id"]
    client.app.state.limits.warmups.join()

    def open_link():
        page = client.get(f"/s/{sid}")
        a = client.post("/api/analyze", json={"text": text, "alpha": 1.5})
        h = client.get(f"/api/analyses/{a.json()['id']}/heads/2/3")
        assert page.status_code == a.status_code == h.status_code == 200
        return h

    dt, _ = timed(open_link)
    print(
        f"  shared link opened warm (page, analyze, head): {dt * 1000:.0f} ms wall, "
        f"{CPU[-1] * 1000:.0f} ms CPU ({dt / fresh_s:.3f}x a fresh analyze)"
    )


if __name__ == "__main__":
    main()
