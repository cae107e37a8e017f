"""Peak memory of a ModernBERT-base-shaped model run as an entmax transformer.

A random checkpoint of ModernBERT-base's shape (22 layers x 12 heads, d = 768, GLU 1152, 50,368
embeddings, every 3rd layer global, local window 128; ModernBertForMaskedLM weights and a
ModernBERT-style tokenizer, as sparse_core.testing_modernbert writes them) is loaded with
load_model and run once on an n-token text, each n in its own process. Printed per n: the
estimate of sources.estimate_bytes, the peak RSS (VmHWM) after loading and after the run, and
the run's own arrays (P, graph, queries, keys). Nothing is downloaded.

    .venv/bin/python bench/bench_modernbert.py --tokens 512 1024
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path


def _vm(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return 0


def child(model_dir: str, n: int) -> None:
    import torch

    from sparse_core import load_model
    from sparse_core.sources import estimate_bytes, weight_elements

    torch.set_num_threads(2)
    m = load_model(model_dir, device="cpu", max_tokens=n)
    loaded = _vm("VmHWM")
    words = "the chef who ran to the store was out of food so he went back".split()
    text = " ".join(words[i % len(words)] for i in range(4 * n))
    out = m.run(text, alpha=1.5, truncate=True)
    c = m.config
    _, est = estimate_bytes(
        weight_elements(Path(model_dir), {}), 4, c.num_layers, c.num_heads, c.head_dim, out.n
    )
    own = sum(t.numel() * t.element_size() for t in (out.probs, out.graph, out.queries, out.keys))
    print(json.dumps({"n": out.n, "estimate_attention_gib": est / 2**30,
                      "rss_loaded_gib": loaded / 2**30, "rss_peak_gib": _vm("VmHWM") / 2**30,
                      "run_output_gib": own / 2**30,
                      "local_zero_outside_window": bool(not out.graph[1][..., (
                          torch.arange(out.n)[:, None] - torch.arange(out.n)[None]).abs() > 64
                      ].any())}))  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, nargs="+", default=[512, 1024])
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]))
        return
    from sparse_core.testing_modernbert import write_modernbert_checkpoint

    with tempfile.TemporaryDirectory() as d:
        path = write_modernbert_checkpoint(
            Path(d) / "modernbert-base-shaped", layers=22, heads=12, hidden=768, every=3,
            local_attention=128, intermediate=1152, vocab_size=50368, seed=0,
        )  # fmt: skip
        for n in args.tokens:
            subprocess.run([sys.executable, __file__, "--child", str(path), str(n)], check=True)
    with open("/proc/loadavg") as fh:
        print("load average:", fh.read().split()[:3])


if __name__ == "__main__":
    main()
