"""Bit-for-bit check of the sweep engine across two trees: every method's
``pareto.sweep_points`` (every grid point, every metric, dtype included) on a few held-out
inputs, bidirectional and causal, dumped by one tree and compared with another's.

    git -C /work/main archive <commit> | tar -x -C /tmp/ref         # the code before a change
    python bench/sweep_exact.py dump --src /tmp/ref --out /tmp/ref.npz
    python bench/sweep_exact.py dump --out /tmp/new.npz            # this checkout
    python bench/sweep_exact.py compare /tmp/ref.npz /tmp/new.npz  # exit 1 on any difference

The inputs: the first ``--texts`` held-out inputs of the commonest length, one of another
length and a short text (n < 64: the grids' small-n branches), each bidirectional; the first and
the short one also causal. Each dump runs in a fresh interpreter with the tree first on
``sys.path`` (``--src``), one thread. The dump carries each method's grid (the points' params);
where the two trees' grids differ (a grid change), ``compare`` checks each metric on the points
both grids have and prints each changed grid's sizes.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from bench_arena import HELD_OUT  # noqa: E402
from bench_pareto import CORPUS  # noqa: E402

DUMP = (
    HELD_OUT
    + r"""
from collections import Counter
import json
import numpy as np
from sparse_core import methods as M
from sparse_core import pareto as PA
from sparse_core.bitsets import Gold
held = [i for i in inputs if i.n_tokens >= 256][:200]
common = Counter(i.n_tokens for i in held).most_common(1)[0][0]
same = [i.text for i in held if i.n_tokens == common][:{texts}]
other = next(i.text for i in held if i.n_tokens != common)
short = "The cat sat on the mat because it was warm, and the dog watched it from the door."
runs = [(t, False) for t in same + [other, short]] + [(same[0], True), (short, True)]
arrays = {{}}
with torch.inference_mode():
    for k, (text, causal) in enumerate(runs):
        out = model.run(text, causal=causal, truncate=True, hidden=False)
        ctx = M.PredictContext.from_run(out, art)
        gold = Gold.of(ctx)
        for name, m in M.METHODS.items():
            grid = m.grid(out.n, art)
            got = PA.sweep_points(ctx, m, grid, gold)
            for metric, v in got.items():
                arrays[f"{{k}}/{{int(causal)}}/{{name}}/{{metric}}"] = v.numpy()
            arrays[f"{{k}}/{{int(causal)}}/{{name}}/grid"] = np.array(
                [json.dumps(p, sort_keys=True) for p in grid])
np.savez({out!r}, **arrays)
print(len(arrays), "arrays,", len(runs), "runs")
"""
)


def dump(args) -> int:
    src = str((args.src or ROOT).resolve())
    code = DUMP.format(src=src, corpus=str(args.corpus), texts=args.texts, out=str(args.out))
    env = {**os.environ, "PYTHONPATH": ""}
    return subprocess.run([sys.executable, "-c", code], env=env).returncode


def _common(a, b, k: str) -> tuple[np.ndarray, np.ndarray] | None:
    """The rows of metric array ``k`` of both dumps at the grid points both grids have (in
    a's order), when both dumps carry the grids and they differ; else None."""
    g = k.rsplit("/", 1)[0] + "/grid"
    if g not in a.files or g not in b.files or list(a[g]) == list(b[g]):
        return None
    pos = {p: i for i, p in enumerate(b[g])}
    ia = [i for i, p in enumerate(a[g]) if p in pos]
    return a[k][ia], b[k][[pos[a[g][i]] for i in ia]]


def compare(args) -> int:
    """Every array bit for bit; where the two trees' grids of a method differ (a grid change),
    each metric on the points both grids have."""
    a, b = np.load(args.a), np.load(args.b)
    bad, sub = [], 0
    for k in sorted(set(a.files) | set(b.files)):
        if k.endswith("/grid"):
            continue
        if k not in a.files or k not in b.files or a[k].dtype != b[k].dtype:
            bad.append(k)
            continue
        pair = _common(a, b, k)
        sub += pair is not None
        x, y = pair if pair is not None else (a[k], b[k])
        if not np.array_equal(x, y):
            bad.append(k)
    for g in sorted(f for f in a.files if f.endswith("/grid") and f in b.files):
        if list(a[g]) != list(b[g]):
            kept = len(set(a[g]) & set(b[g]))
            print(f"grid {g[:-5]}: {len(a[g])} -> {len(b[g])} points, {kept} in both")
    for k in bad[:20]:
        if k in a.files and k in b.files and a[k].shape == b[k].shape:
            d = np.abs(a[k] - b[k]).max()
            print(f"differs: {k} (max |diff| {d:.3g})")
        else:
            print(f"differs: {k} (missing or shape)")
    n = sum(not f.endswith("/grid") for f in a.files)
    m = sum(not f.endswith("/grid") for f in b.files)
    print(f"{n} / {m} arrays, {len(bad)} differ ({sub} compared on the points both grids have)")
    return 1 if bad else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump", help="dump every method's sweep points of a tree")
    d.add_argument("--src", type=Path, default=None, help="the tree (default: this checkout)")
    d.add_argument("--out", type=Path, required=True)
    d.add_argument("--corpus", type=Path, default=CORPUS)
    d.add_argument("--texts", type=int, default=2, help="inputs of the commonest length")
    c = sub.add_parser("compare", help="compare two dumps bit for bit (exit 1 on a difference)")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    args = p.parse_args()
    return dump(args) if args.cmd == "dump" else compare(args)


if __name__ == "__main__":
    raise SystemExit(main())
