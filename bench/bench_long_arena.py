"""The arena at n ≈ 4,096 through the engine (AnalysisService), interleaved with a plain SDPA
softmax forward of the same weights on the same text: the page's analysis (graph + the shown
method's summary), every method's summary, one head's metrics of every method, the flow into
one token, one head's oracle budgets and one head's Pareto sweep.

    PYTHONPATH=. .venv/bin/python bench/bench_long_arena.py --model minilm --n 4096
    PYTHONPATH=. .venv/bin/python bench/bench_long_arena.py --model modernbert --n 4096

``minilm``: all-MiniLM-L6-v2's weights with positions tiled to n (``testing.tiled_positions``);
``modernbert``: a tiny random ModernBERT-style entmax model (``testing_modernbert``: 4 layers
x 4 heads, every third layer global, the others local with 128 tokens) with n positions. The
text is WikiText-2's validation text cut to exactly n tokens. Each round runs
the SDPA forward, then a fresh service's analysis and requests (nothing cached between
rounds, after one untimed round on a 300-token text: numba's loops compiled); the figures are
medians over ``--rounds`` with the ratio to the same round's SDPA forward. Prints each figure as
it is measured, then the medians, with the load average (the machine may be shared).
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from tests.checkout import use_the_checkout  # noqa: E402

use_the_checkout()  # ``import sparsescope``: this checkout's app/, not an installed copy

CORPUS = Path("/work/shared/data/wikitext-2/valid.txt")


def build(kind: str, n: int):
    import torch

    if kind == "minilm":
        from sparse_core import load_model
        from sparse_core.testing import tiled_positions

        return tiled_positions(load_model(device="cpu"), n)
    from sparse_core import load_model
    from sparse_core.testing_modernbert import write_modernbert_checkpoint

    torch.manual_seed(0)
    path = write_modernbert_checkpoint(
        Path(tempfile.mkdtemp()) / "modernbert-tiny", layers=4, heads=4, hidden=64, every=3,
        local_attention=128, max_positions=n, seed=0,
    )  # fmt: skip
    return load_model(str(path), device="cpu", max_tokens=n)


#: Print each figure as it is measured (a loaded machine may not let the run finish).
LIVE = {"on": False, "sdpa": 1.0}


def timed(fn, label: str | None = None):
    t = time.perf_counter()
    got = fn()
    dt = time.perf_counter() - t
    if LIVE["on"] and label:
        print(f"  {label:36s} {dt:8.2f} s  {dt / LIVE['sdpa']:6.1f}x SDPA", flush=True)
    return dt, got


def one_round(model, text: str, sdpa, ids, methods: list[str], layer: int, head: int) -> dict:
    import torch

    from sparsescope.engine.request import AnalysisRequest
    from sparsescope.engine.service import AnalysisService
    from sparsescope.engine.settings import Settings

    out: dict[str, float] = {}
    with torch.inference_mode():
        out["sdpa"] = LIVE["sdpa"] = timed(lambda: sdpa(input_ids=ids), "SDPA forward")[0]
    settings = Settings(
        data_dir=Path(tempfile.mkdtemp()), warmup=False, max_tokens=model.config.max_positions
    )
    svc = AnalysisService(settings, model=model)
    svc.start()
    req = AnalysisRequest(text=text, alpha=1.5)
    out["page analysis (window summary)"] = timed(
        lambda: svc.analyze_json(req, ["window"]), "page analysis (window summary)"
    )[0]
    aid = svc.key(req)
    out["every method's summary (more)"] = timed(
        lambda: svc.summary(aid, None), "every method's summary (more)"
    )[0]
    out["page analysis + every summary"] = (
        out["page analysis (window summary)"] + out["every method's summary (more)"]
    )
    worst = 0.0
    for nm in methods:
        dt = timed(lambda nm=nm: svc.metrics(aid, layer, head, nm, {}), f"metrics {nm}")[0]
        out[f"metrics {nm}"] = dt
        worst = max(worst, dt)
    out["metrics, slowest method"] = worst
    n = svc.get(aid).out.n
    out["flow of one token"] = timed(lambda: svc.flow(aid, n // 2), "flow")[0]
    out["budgets of one head"] = timed(lambda: svc.budgets(aid, layer, head), "budgets")[0]
    out["Pareto sweep of one head"] = timed(lambda: svc.pareto(aid, layer, head), "pareto")[0]
    out["n"] = n
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=["minilm", "modernbert"], default="minilm")
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--layer", type=int, default=2)
    ap.add_argument("--head", type=int, default=3)
    args = ap.parse_args()

    import api_latency
    import torch

    from sparse_core.methods import available

    api_latency.CORPUS = CORPUS
    torch.set_num_threads(2)
    model = build(args.model, args.n)
    text = api_latency.texts_of_n_tokens(model, args.n, 1)[0]
    ids = torch.tensor([model.encode(text).ids])
    sdpa = copy.deepcopy(model.net).eval()
    sdpa.set_attn_implementation("sdpa")
    layer = min(args.layer, model.config.num_layers - 1)
    head = min(args.head, model.config.num_heads - 1)
    methods = available(None)
    # warm-up (numba's compiled loops, the tagger): one untimed round on a short text
    short = api_latency.texts_of_n_tokens(model, 300, 1)[0]
    short_ids = torch.tensor([model.encode(short).ids])
    one_round(model, short, sdpa, short_ids, methods, layer, head)
    LIVE["on"] = True
    print(f"model {model.model_id}, n = {args.n}; each round's figures as measured:", flush=True)
    rounds = [one_round(model, text, sdpa, ids, methods, layer, head) for _ in range(args.rounds)]
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"model {model.model_id}, n = {rounds[0]['n']}, {args.rounds} rounds, load {load}")
    for key in rounds[0]:
        if key in ("n", "sdpa"):
            continue
        secs = statistics.median(r[key] for r in rounds)
        ratio = statistics.median(r[key] / r["sdpa"] for r in rounds)
        print(f"{key:36s} {secs:8.2f} s  {ratio:6.1f}x SDPA")
    print(f"{'SDPA forward':36s} {statistics.median(r['sdpa'] for r in rounds):8.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
