"""Benchmark: the information flow into one token (sparse_core/flow.py, GET …/flow) at n = 512
on the real model, against the full attention rollout of every token (Abnar & Zuidema's
``compute_joint_attention`` shape: (L, n, n) float64 products, ``flow.rollout``) plus the boolean
``flow.reachability``, side by side on the same run.

``token_flow`` walks backwards from one token, one layer and one head at a time (O(l · H · n²));
the full rollout multiplies n × n matrices (O(L · n³)). Both are timed interleaved (median and
minimum of ``--repeats``), one torch thread (the server's per-request work), and the load average
is printed before and after (the machine is shared).

Run: ``python bench/bench_flow.py --n 512 --repeats 5`` (figures in docs/benchmarks.md,
"Information flow").
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_entmax import bench, corpus_text, load  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--corpus", default=None, help="a text file (default: WikiText-2 valid)")
    args = ap.parse_args()

    from sparse_core import load_model
    from sparse_core.flow import reachability, rollout, token_flow

    torch.set_num_threads(1)
    print(load())
    model = load_model(device="cpu", max_tokens=args.n)
    text = " ".join(corpus_text(args.corpus).split()[: 2 * args.n])
    out = model.run(text, alpha=1.5, truncate=True)  # its first n tokens
    n, t = out.n, out.n // 2
    print(f"n = {n}, layers = {out.layers}, heads = {out.heads}, target token {t}")
    f = token_flow(out.probs, t)
    roll = rollout(out.probs)
    assert torch.equal(f.reachable, reachability(out.graph)[-1, t])
    assert torch.equal(roll[-1, t] > 0, f.reachable)
    print(f"reached at the last layer: {f.counts[0]} / {n}; per level: {f.counts}")
    print(f"reached after layer 0: {token_flow(out.probs, t, 0).counts[0]} / {n}")
    med, low = bench(
        {
            "token_flow (one token, last layer)": lambda: token_flow(out.probs, t),
            "rollout + reachability (every token)": lambda: (
                rollout(out.probs),
                reachability(out.graph),
            ),
        },
        args.repeats,
        "cpu",
    )
    for name in med:
        print(f"{name:40s} median {med[name]:8.1f} ms   min {low[name]:8.1f} ms")
    a, b = med.values()
    print(f"ratio full / one token: {b / a:.1f}x")
    print(load())


if __name__ == "__main__":
    main()
