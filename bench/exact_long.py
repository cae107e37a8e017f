"""Exactness at long n (the long-text exactness floor): the CPU entmax kernel against float64.

MiniLM's real weights with its positions tiled to n (``sparse_core.testing.tiled_positions``),
n tokens of WikiText-2's validation prose, one ``model.run`` per α to record Q and K; then, for
the chosen layers and every ``--head-step``-th head, the float32 scores ``(q kᵀ) / √d`` go
through ``sparse_core.entmax.entmax`` (the compiled CPU kernel) and through
``sparse_core.testing.entmax_reference`` (the float64 reference). Prints, per α, the
support entries checked and how many differ (entries whose exact value is under float32's
smallest normal number are flushed by design and not counted), and the largest value error;
exits 1 if any support entry differs or a value is off by more than 1e-6.

    PYTHONPATH=. .venv/bin/python bench/exact_long.py --n 4096 --alphas 1.05 1.15 1.3 1.45 2.0

Figures in docs/benchmarks.md ("Entmax", "Exactness"). ~80 s an α
at n = 4,096 on two cores (the reference dominates).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sparse_core.entmax import entmax  # noqa: E402
from sparse_core.model import load_model  # noqa: E402
from sparse_core.testing import entmax_reference, tiled_positions  # noqa: E402

TINY32 = torch.finfo(torch.float32).tiny


def check(
    model, text: str, alpha: float, layers: list[int], head_step: int
) -> tuple[int, int, float]:
    """(support entries of the reference, entries that differ, largest value error) at α."""
    with torch.inference_mode():
        out = model.run(text, alpha=alpha, truncate=True, hidden=False)
    n = out.queries[0].shape[-2]
    total = differing = 0
    worst = 0.0
    for li in layers:
        q = out.queries[li].reshape(-1, n, out.queries[li].shape[-1]).float()
        k = out.keys[li].reshape(-1, n, out.keys[li].shape[-1]).float()
        scale = q.shape[-1] ** -0.5
        for h in range(0, q.shape[0], head_step):
            z = (q[h] @ k[h].T) * scale
            ref = entmax_reference(z.double(), alpha)
            got = entmax(z, alpha)
            diff = ((ref > 0) != (got > 0)) & (torch.maximum(got.double(), ref) >= TINY32)
            differing += int(diff.sum())
            total += int((ref > 0).sum())
            worst = max(worst, float((got.double() - ref).abs().max()))
    return total, differing, worst


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=4096, help="tokens (positions tiled to it)")
    ap.add_argument("--alphas", type=float, nargs="+", default=[1.15, 1.3, 1.45, 1.5, 2.0])
    ap.add_argument("--layers", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--head-step", type=int, default=3)
    ap.add_argument("--text-file", default="/work/shared/data/wikitext-2/valid.txt")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    path = Path(args.text_file)
    if not path.is_file():
        sys.exit(f"exact_long: no text file {path} (give --text-file)")
    base = load_model(None, device="cpu")
    model = tiled_positions(base, args.n) if args.n > base.config.max_positions else base
    text = path.read_text(encoding="utf-8")[: args.n * 6]
    bad = False
    for alpha in args.alphas:
        t = time.perf_counter()
        total, differing, worst = check(model, text, alpha, args.layers, args.head_step)
        bad |= differing > 0 or worst > 1e-6
        print(
            f"alpha={alpha} n={args.n} support entries {total:,}, differing {differing}, "
            f"largest value error {worst:.1e}, {time.perf_counter() - t:.1f} s",
            flush=True,
        )
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
