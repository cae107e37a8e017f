"""Benchmark of the Pareto sweeps (docs/benchmarks.md, "Corpus Pareto sweep").

Three figures:

1. the corpus sweep, ``sparsescope pareto`` on the first ``--texts`` WikiText-2 inputs held out
   from the shipped artefact's fit (model extraction included), wall and CPU seconds;
2. ``pareto.sweep_text`` (every method's grid, per head) on one ``--short``-token text;
3. ``pareto.summary`` (every method at its defaults, the web API's analyze summary) on it.

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
            out = model.run(text)
            stages["extraction"].append(time.process_time() - t)
            ctx = M.PredictContext.from_run(out, art)
            gold = Gold(out.graph, out.causal)
            for name, method in M.METHODS.items():
                t = time.process_time()
                PA.sweep_points(ctx, method, method.grid(out.n, art), gold)
                stages.setdefault(name, []).append(time.process_time() - t)
    return {k: round(statistics.mean(v), 3) for k, v in stages.items()}


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
    args = p.parse_args()

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
        "text": text_figures(model, art, short, args.repeat),
        "per_stage_cpu_s": per_stage(model, art, [i.text for i in inputs[: args.stage_texts]]),
    }
    if not args.skip_corpus_run:
        report["corpus"] = corpus_run(args)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
