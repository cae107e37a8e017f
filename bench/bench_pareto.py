"""Benchmark of the Pareto sweeps (docs/benchmarks.md, "Corpus sweep").

Figures:

1. the corpus sweep, ``sparsescope pareto`` on the first ``--texts`` WikiText-2 inputs held out
   from the shipped artefact's fit (model extraction included), wall and CPU seconds;
2. ours against the plain dense-mask evaluation of the same grid, side by side in this process
   on the same ``--dense-texts`` inputs (1 torch thread, CPU seconds): ours is
   ``pareto.sweep_inputs`` (extraction included); the dense reference is the Sparsefinder
   reference code's approach, one boolean (L, H, n, n) mask per grid point
   (``method.predict``) with recall and sparsity computed from it (numpy ``count_nonzero`` per
   head: ``metrics.recall`` + ``metrics.sparsity`` take ~20x longer on such a mask, so the
   reference is the fast plain form; extraction included, once per text). The dense side runs every
   ``--dense-stride``-th point of each method's grid and is extrapolated per grid point
   (method by method: mean seconds per point x grid size); its figures are checked against
   ours at every point it runs;
3. ``pareto.sweep_text`` (every method's grid, per head) on one ``--short``-token text;
4. ``pareto.summary`` (every method at its defaults, the web API's analyze summary) on it.

Plus a per-stage split of the corpus cost on a few inputs (extraction vs each method's sweep),
in CPU seconds of one thread. The machine is shared, so the load average is printed with every
figure, and CPU time is reported next to wall time::

    python bench/bench_pareto.py                       # 200 x 512 tokens, 2 workers
    python bench/bench_pareto.py --texts 20 --skip-corpus-run
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: the shared WikiText-2 validation split, found from a checkout or a worktree below /work
CORPUS = next(
    (
        p / "shared" / "data" / "wikitext-2" / "valid.txt"
        for p in ROOT.parents
        if (p / "shared" / "data" / "wikitext-2" / "valid.txt").is_file()
    ),
    ROOT.parent / "shared" / "data" / "wikitext-2" / "valid.txt",
)


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def corpus_run(args) -> dict:
    out = Path(tempfile.mkdtemp(prefix="bench-pareto-"))
    cmd = [sys.executable, "-m", "sparsescope.cli", "pareto", "--corpus", str(args.corpus),
           "--held-out", "--limit", str(args.texts), "--max-tokens", str(args.max_tokens),
           "--out", str(out), "--workers", str(args.workers)]  # fmt: skip
    before, cpu0, t0 = load(), children_cpu(), time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    wall, cpu = time.perf_counter() - t0, children_cpu() - cpu0
    body = json.loads((out / "pareto.json").read_text())
    return {
        "command": "sparsescope " + " ".join(cmd[3:]).replace(str(out), "OUT"),
        "texts": body["texts"],
        "points": len(body["points"]),
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "load_before": before,
        "load_after": load(),
    }


def per_stage(model, art, texts) -> dict:
    import torch

    from sparse_core import methods as M
    from sparse_core import pareto as PA
    from sparse_core.bitsets import Gold

    stages: dict[str, list[float]] = {"extraction": []}
    with torch.inference_mode():
        for text in texts:
            t = time.process_time()
            out = model.run(text, hidden=False)  # as the sweep (no final hidden states)
            stages["extraction"].append(time.process_time() - t)
            ctx = M.PredictContext.from_run(out, art)
            gold = Gold(out.graph, out.causal)
            for name, method in M.METHODS.items():
                t = time.process_time()
                PA.sweep_points(ctx, method, method.grid(out.n, art), gold)
                stages.setdefault(name, []).append(time.process_time() - t)
    return {k: round(statistics.mean(v), 3) for k, v in stages.items()}


def dense_compare(model, art, texts, stride: int) -> dict:
    """Ours vs one dense mask per grid point, same inputs, same process (module docstring)."""
    import numpy as np
    import torch

    from sparse_core import methods as M
    from sparse_core import pareto as PA
    from sparse_core.methods import bigbird

    names = M.available(art)
    n_tok = [len(model.tokenizer.encode(t).ids) for t in texts]
    grids = PA.corpus_grids(names, max(n_tok), min(n_tok), art)
    with torch.inference_mode():
        model.run(texts[0], truncate=True)  # warm-up
        bigbird._DRAWS.clear()  # no draws kept from earlier figures (each input its own n)
        c0, w0 = time.process_time(), time.perf_counter()
        PA.sweep_inputs(model, texts, art, grids)
        ours_cpu, ours_wall = time.process_time() - c0, time.perf_counter() - w0
        extract, per_method, checked, worst = 0.0, {nm: [0.0, 0] for nm in names}, 0, 0.0
        for text in texts:
            c = time.process_time()
            out = model.run(text, truncate=True)
            ctx = M.PredictContext.from_run(out, art)
            extract += time.process_time() - c
            LH, n = out.layers * out.heads, out.n
            gold = out.graph.numpy().reshape(LH, n * n)
            g_count = np.count_nonzero(gold, axis=1)
            n_valid = n * (n + 1) // 2 if out.causal else n * n
            mine = PA.Totals(grids)  # ours again, for the check, on a context of its own
            mine.add_text(M.PredictContext.from_run(out, art))
            for nm in names:
                method = M.METHODS[nm]
                for k in range(0, len(grids[nm]), stride):
                    c = time.process_time()
                    mask = method.predict(ctx, **grids[nm][k]).numpy().reshape(LH, n * n)
                    hit = np.count_nonzero(mask & gold, axis=1)
                    rec = np.where(g_count > 0, hit / np.maximum(g_count, 1), 1.0)
                    spa = 1.0 - np.count_nonzero(mask, axis=1) / n_valid  # predict is ∩ V
                    per_method[nm][0] += time.process_time() - c
                    per_method[nm][1] += 1
                    for want, got in ((mine.sums[nm]["recall"][k], rec),
                                      (mine.sums[nm]["sparsity"][k], spa)):  # fmt: skip
                        worst = max(worst, float(np.abs(want.reshape(-1) - got).max()))
                    checked += 1
    per_point = {nm: t / max(c, 1) for nm, (t, c) in per_method.items()}
    dense_per_text = extract / len(texts) + sum(
        per_point[nm] * len(grids[nm]) for nm in names
    )  # fmt: skip
    ours_per_text = ours_cpu / len(texts)
    return {
        "texts": len(texts),
        "tokens": int(sum(n_tok)),
        "grid_points": sum(len(g) for g in grids.values()),
        "dense_points_run": checked,
        "dense_max_abs_diff_vs_ours": worst,
        "ours_cpu_s_per_text": round(ours_per_text, 3),
        "ours_wall_s_per_text": round(ours_wall / len(texts), 3),
        "dense_cpu_s_per_text_extrapolated": round(dense_per_text, 2),
        "dense_ms_per_point": {nm: round(1000 * v, 2) for nm, v in per_point.items()},
        "dense_extraction_cpu_s_per_text": round(extract / len(texts), 3),
        "speedup": round(dense_per_text / ours_per_text, 1),
        "load": load(),
    }


def text_figures(model, art, text, repeat: int) -> dict:
    import torch

    from sparse_core import methods as M
    from sparse_core import pareto as PA

    out = model.run(text, truncate=True)
    ctx = M.PredictContext.from_run(out, art)
    res = {"n": out.n}
    for name, fn in (("sweep_text", lambda: PA.sweep_text(ctx)),
                     ("summary", lambda: PA.summary(out, art))):  # fmt: skip
        walls, cpus = [], []
        with torch.inference_mode():
            fn()
            for _ in range(repeat):
                t, c = time.perf_counter(), time.process_time()
                fn()
                walls.append(time.perf_counter() - t)
                cpus.append(time.process_time() - c)
        res[name] = {"wall_s": round(statistics.median(walls), 4),
                     "cpu_s": round(statistics.median(cpus), 4)}  # fmt: skip
    res["load"] = load()
    return res


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpus", type=Path, default=CORPUS)
    p.add_argument("--texts", type=int, default=200)
    p.add_argument("--max-tokens", type=int, default=512)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--short", type=int, default=128, help="tokens of the sweep_text input")
    p.add_argument("--stage-texts", type=int, default=3)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--threads", type=int, default=1, help="torch threads (in-process figures)")
    p.add_argument("--skip-corpus-run", action="store_true")
    p.add_argument("--dense-texts", type=int, default=2, help="inputs of the dense comparison")
    p.add_argument("--dense-stride", type=int, default=3, help="dense: every k-th grid point")
    p.add_argument("--skip-dense", action="store_true")
    p.add_argument("--skip-text", action="store_true", help="skip figures 3-4 and the stages")
    args = p.parse_args()
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, str(args.threads))  # as the sweep's workers (numpy not loaded)

    import torch

    torch.set_num_threads(args.threads)
    sys.path.insert(0, str(ROOT))
    from sparse_core import load_model
    from sparse_core.corpus import pack, read_corpus, token_counter
    from sparse_core.sparsefinder import load_artefact

    model = load_model(device="cpu")
    art = load_artefact(model_id=model.model_id, alpha=1.5)
    docs = read_corpus(args.corpus)
    used = int(art.meta["corpus"][0]["inputs_used"])
    inputs = pack(docs, token_counter(model.tokenizer), args.max_tokens)[used:]
    packed = pack(docs, token_counter(model.tokenizer), args.short)
    short = max(packed[:20], key=lambda i: i.n_tokens).text  # a full-length input
    report = {
        "machine": f"{os.cpu_count()} CPUs, torch {torch.__version__}, "
        f"{args.threads} torch thread(s) in-process",
    }
    if not args.skip_text:
        report["text"] = text_figures(model, art, short, args.repeat)
        texts = [i.text for i in inputs[: args.stage_texts]]
        report["per_stage_cpu_s"] = per_stage(model, art, texts)
    if not args.skip_dense:
        texts = [i.text for i in inputs[: args.dense_texts]]
        report["dense"] = dense_compare(model, art, texts, args.dense_stride)
    if not args.skip_corpus_run:
        report["corpus"] = corpus_run(args)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
