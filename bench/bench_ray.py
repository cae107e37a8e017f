"""Benchmark of the Ray engine (docs/benchmarks.md "Ray engine", docs/ray.md): inputs/s per worker.

On the first ``--texts`` held-out WikiText-2 inputs of ``--max-tokens`` tokens, side by side in
one run:

- ``pareto``: the local engine (``sweep_inputs`` in this process, 1 torch thread) and
  ``--engine ray`` (``ray_engine.sweep_corpus_ray``) on a local Ray cluster of 1 and of 2 CPU
  workers (one actor per CPU, 1 thread each);
- ``fit`` extraction: ``sparsefinder_fit.extract`` and ``ray_engine.extract_ray``, same clusters.

Ray's wall times include starting the cluster's actors and loading the model in each (a fixed
cost; the time to the first finished shard is printed too). As the machine is shared, the
per-worker figure is ``inputs_per_worker_cpu_s``: inputs per CPU second of the workers (this
process for the local engine, the actors' own ``process_time`` summed over shards for Ray), i.e.
inputs/s of one dedicated CPU worker; the wall figures depend on the other jobs.

``--shape roberta-base`` runs a random model of RoBERTa-base's shape (12 layers x 12 heads,
hidden 768, FFN 3072: the paper's model, whose weights are not shipped) instead of the shipped
all-MiniLM-L6-v2; its methods are those that need no Sparsefinder artefact. The load average is
printed with every figure::

    python bench/bench_ray.py --texts 16
    python bench/bench_ray.py --texts 8 --workers 1 --shape roberta-base --stages 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
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


def roberta_base_shape(directory: Path) -> Path:
    """A random checkpoint of RoBERTa-base's shape with the shipped WordPiece tokenizer."""
    from transformers import AutoModel, RobertaConfig

    from sparse_core.model import quiet_progress
    from sparse_core.sources import default_model_path
    from sparse_core.testing import TOKENIZER_FILES, randomize_

    cfg = RobertaConfig()  # the defaults are roberta-base's: 12 x 12, 768, 3072, 514 positions
    net = randomize_(AutoModel.from_config(cfg), 0)
    with quiet_progress():
        net.save_pretrained(str(directory))
    for name in TOKENIZER_FILES:
        if (default_model_path() / name).is_file():
            shutil.copy(default_model_path() / name, directory / name)
    return directory


def timed(fn) -> tuple[float, float, object]:
    t, c = time.perf_counter(), time.process_time()
    res = fn()
    return time.perf_counter() - t, time.process_time() - c, res


def stages(model, art, texts, names) -> dict:
    """CPU seconds per input of the extraction and of each method's sweep, and the gold sparsity
    (the sweep's cost grows with the graph's edges)."""
    import statistics

    import torch

    from sparse_core import methods as M
    from sparse_core import pareto as PA
    from sparse_core.bitsets import Gold

    got: dict[str, list[float]] = {"extraction": [], "gold_sparsity": []}
    with torch.inference_mode():
        for text in texts:
            t = time.process_time()
            out = model.run(text, truncate=True)
            got["extraction"].append(time.process_time() - t)
            ctx = M.PredictContext.from_run(out, art)
            gold = Gold(out.graph, out.causal)
            got["gold_sparsity"].append(float(gold.sparsity().mean()))
            for name in M.available(art, names):
                method = M.METHODS[name]
                t = time.process_time()
                PA.sweep_points(ctx, method, method.grid(out.n, art), gold)
                got.setdefault(name, []).append(time.process_time() - t)
    return {k: round(statistics.mean(v), 3) for k, v in got.items()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpus", type=Path, default=CORPUS)
    p.add_argument("--texts", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=512)
    p.add_argument("--workers", default="1,2", help="Ray cluster sizes (CPU workers) to time")
    p.add_argument("--shape", choices=("minilm", "roberta-base"), default="minilm")
    p.add_argument("--skip-fit", action="store_true")
    p.add_argument("--skip-pareto", action="store_true")
    p.add_argument(
        "--stages",
        type=int,
        default=0,
        metavar="N",
        help="also split the per-input cost (extraction, each method) on N inputs",
    )
    args = p.parse_args()

    import ray
    import torch

    torch.set_num_threads(1)
    sys.path.insert(0, str(ROOT))
    from sparse_core import load_model
    from sparse_core.corpus import pack, read_corpus, token_counter
    from sparse_core.pareto import corpus_grids, sweep_inputs
    from sparse_core.ray_engine import extract_ray, sweep_corpus_ray
    from sparse_core.sparsefinder import load_artefact
    from sparse_core.sparsefinder_fit import extract

    tmp = Path(tempfile.mkdtemp(prefix="bench-ray-"))
    model_path = None
    if args.shape == "roberta-base":
        model_path = roberta_base_shape(tmp / "roberta-base-shape")
    model = load_model(model_path, device="cpu")
    art = None
    if args.shape == "minilm":
        art = load_artefact(None, model_id=model.model_id, alpha=1.5)
    # held-out inputs: after the ones the shipped artefact was fitted on (as bench_pareto.py)
    inputs = pack(read_corpus(args.corpus), token_counter(model.tokenizer), args.max_tokens)
    start = 0
    for c in ((art.meta or {}).get("corpus") or []) if art is not None else []:
        start = max(start, int(c.get("inputs_used") or 0))
    chosen = [i for i in inputs[start:] if i.n_tokens >= args.max_tokens // 2][: args.texts]
    texts = [i.text for i in chosen]
    tokens = sum(i.n_tokens for i in chosen)
    sizes = [int(x) for x in args.workers.split(",")]
    res: dict = {"model": model.model_id, "shape": args.shape, "texts": len(texts),
                 "tokens": tokens, "cpus": os.cpu_count(), "ray": ray.__version__}  # fmt: skip
    print(json.dumps(res), flush=True)

    def row(name: str, wall: float, cpu: float, workers: int, first: float | None = None):
        r = {"what": name, "workers": workers, "wall_s": round(wall, 1),
             "inputs_per_s": round(len(texts) / wall, 3), "worker_cpu_s": round(cpu, 1),
             "inputs_per_worker_cpu_s": round(len(texts) / cpu, 3),
             "load": load()}  # fmt: skip
        if first is not None:
            r["first_shard_s"] = round(first, 1)
        res.setdefault("rows", []).append(r)
        print(json.dumps(r), flush=True)

    def on_ray(fn, n: int, name: str) -> None:
        ray.init(num_cpus=n, include_dashboard=False, log_to_driver=False,
                 logging_level="WARNING")  # fmt: skip
        ray.data.DataContext.get_current().enable_progress_bars = False
        t0, first = time.perf_counter(), []

        def mark(_k: int) -> None:
            if not first:
                first.append(time.perf_counter() - t0)

        try:
            wall, _, cpu = timed(lambda: fn(mark))
        finally:
            ray.shutdown()
        row(name, wall, cpu, n, first[0] if first else None)

    names = None if art is not None else ["window", "strided", "fixed", "bigbird", "longformer"]
    if not args.skip_pareto:
        counts = [min(len(e.ids), model.config.max_positions)
                  for e in model.tokenizer.encode_batch(texts)]  # fmt: skip
        from sparse_core.methods import available

        grids = corpus_grids(available(art, names), max(counts), min(counts), art)
        res["points"] = sum(map(len, grids.values()))
        wall, cpu, _ = timed(lambda: sweep_inputs(model, texts, art, grids))
        row("pareto local (1 process, 1 thread)", wall, cpu, 1)
        for n in sizes:
            on_ray(lambda mark: sweep_corpus_ray(
                model, texts, art, methods=names, model_path=model_path, progress=False,
                checkpoint_dir=tmp, on_shard=mark).meta["worker_cpu_seconds"],
                n, "pareto ray")  # fmt: skip
    if not args.skip_fit:
        wall, cpu, _ = timed(lambda: extract(model, texts, 1.5))
        row("fit extraction local (1 thread)", wall, cpu, 1)

        def fit_ray(mark) -> float:
            stats: dict = {}
            extract_ray(model.model_id, texts, 1.5, model_path=model_path, progress=False,
                        checkpoint_dir=tmp, on_shard=mark, stats=stats)  # fmt: skip
            return stats["worker_cpu_seconds"]

        for n in sizes:
            on_ray(fit_ray, n, "fit extraction ray")
    if args.stages:
        res["stages_cpu_s_per_input"] = stages(model, art, texts[: args.stages], names)
        print(json.dumps({"stages": res["stages_cpu_s_per_input"]}), flush=True)
    shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
