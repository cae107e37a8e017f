"""The corpus sweep with the arena's methods against the sweep without them (issue 24's floor: the
sweep of 200 × 512-token held-out inputs with every method ≤ 2.5 minutes on 2 cores), side by
side on the same inputs, so that the ratio holds on a shared, loaded machine.

    git -C /work/main archive main | tar -x -C /tmp/main-src     # the code before the arena
    python bench/bench_arena.py --base-src /tmp/main-src --texts 40 --rounds 2

Each round runs, in turn, ``pareto.sweep_corpus`` (the ``sparsescope pareto`` engine, 2 worker
processes, model extraction included) of the base code (``--base-src``: a tree whose
``sparse_core`` is the code before, every method it has) and of this checkout (every method, the
arena's included), each in a fresh interpreter; wall and CPU seconds (the interpreter and its
workers) are printed with the load average, and the ratio of the medians. With ``--stages``, the
CPU seconds of each of this checkout's methods on a few inputs (one process, one thread), so the
arena's share is seen method by method; ``--same-length`` takes those inputs of one length (as a
worker of the sweep gets them: BigBird's draws made once), ``--profile`` prints the top functions.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import resource
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))  # this checkout's sparse_core, not an installed copy (--stages)

from bench_pareto import CORPUS  # noqa: E402

RUN = r"""
import json, sys, time, torch
sys.path.insert(0, {src!r})
import sparse_core
assert sparse_core.__file__.startswith({src!r}), sparse_core.__file__
from sparse_core import load_model
from sparse_core.corpus import pack, read_corpus, token_counter
from sparse_core.pareto import sweep_corpus
from sparse_core.sparsefinder import load_artefact
torch.set_num_threads(1)
model = load_model(device="cpu")
art = load_artefact(model_id=model.model_id, alpha=1.5)
used = int(art.meta["corpus"][0]["inputs_used"])
inputs = pack(read_corpus({corpus!r}), token_counter(model.tokenizer), 512)[used:]
texts = [i.text for i in inputs if i.n_tokens >= 256][:{texts}]
t0 = time.perf_counter()
sweep = sweep_corpus(model, texts, art, workers={workers}, progress=False)
print(json.dumps({{"sweep_s": time.perf_counter() - t0, "texts": len(texts),
                   "points": sum(len(g) for g in sweep.grids.values()),
                   "methods": len(sweep.grids)}}))
"""


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def one(src: Path, args) -> dict:
    code = RUN.format(src=str(src), corpus=str(args.corpus), texts=args.texts,
                      workers=args.workers)  # fmt: skip
    load0, cpu0, t0 = os.getloadavg()[0], children_cpu(), time.perf_counter()
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": ""})  # fmt: skip
    out = json.loads(res.stdout.strip().splitlines()[-1])
    out.update(wall_s=round(time.perf_counter() - t0, 1), cpu_s=round(children_cpu() - cpu0, 1),
               load_before=round(load0, 1), load_after=round(os.getloadavg()[0], 1))  # fmt: skip
    out["sweep_s"] = round(out["sweep_s"], 1)
    return out


def together(srcs: dict[str, Path], args) -> dict[str, dict]:
    """One round with every tree's sweep running at the same time, each its own interpreter
    (its CPU seconds from ``os.wait4``: the process and its reaped workers): on a machine
    loaded by others, the trees then share the same conditions."""
    procs, t0 = {}, time.perf_counter()
    load0 = os.getloadavg()[0]
    for name, src in srcs.items():
        code = RUN.format(src=str(src), corpus=str(args.corpus), texts=args.texts,
                          workers=args.workers)  # fmt: skip
        procs[name] = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                                       text=True, env={**os.environ, "PYTHONPATH": ""})  # fmt: skip
    out = {}
    pending = {p.pid: name for name, p in procs.items()}
    while pending:
        pid, status, ru = os.wait4(-1, 0)
        name = pending.pop(pid, None)
        if name is None:
            continue
        if status != 0:
            raise SystemExit(f"{name}: the sweep failed (status {status})")
        res = json.loads(procs[name].stdout.read().strip().splitlines()[-1])
        res.update(wall_s=round(time.perf_counter() - t0, 1),
                   cpu_s=round(ru.ru_utime + ru.ru_stime, 1), load_before=round(load0, 1),
                   load_after=round(os.getloadavg()[0], 1),
                   sweep_s=round(res["sweep_s"], 1))  # fmt: skip
        res["cpu_s_per_text"] = round(res["cpu_s"] / res["texts"], 3)
        out[name] = res
    return out


def stages(args) -> dict:
    import torch
    from threadpoolctl import threadpool_limits

    from sparse_core import load_model
    from sparse_core import methods as M
    from sparse_core import pareto as PA
    from sparse_core.bitsets import Gold
    from sparse_core.corpus import pack, read_corpus, token_counter
    from sparse_core.sparsefinder import load_artefact

    torch.set_num_threads(1)
    threadpool_limits(1)  # one BLAS thread, as the sweep's workers (two spin on a loaded machine)
    model = load_model(device="cpu")
    art = load_artefact(model_id=model.model_id, alpha=1.5)
    used = int(art.meta["corpus"][0]["inputs_used"])
    inputs = pack(read_corpus(args.corpus), token_counter(model.tokenizer), 512)[used:]
    held = [i for i in inputs if i.n_tokens >= 256][:200]
    if args.same_length:  # inputs of the commonest length: BigBird's draws made once, as the sweep
        lengths = Counter(i.n_tokens for i in held)
        held = [i for i in held if i.n_tokens == lengths.most_common(1)[0][0]]
    texts = [i.text for i in held][: args.stage_texts]
    per: dict[str, list[float]] = {"extraction": [], "gold": []}
    prof = cProfile.Profile() if args.profile else None
    with torch.inference_mode():
        for text in texts:
            c = time.process_time()
            out = model.run(text, hidden=False)
            per["extraction"].append(time.process_time() - c)
            ctx = M.PredictContext.from_run(out, art)
            c = time.process_time()
            gold = Gold.of(ctx)
            per["gold"].append(time.process_time() - c)
            for name, m in M.METHODS.items():
                c = time.process_time()
                if prof:
                    prof.enable()
                PA.sweep_points(ctx, m, m.grid(out.n, art), gold)
                if prof:
                    prof.disable()
                per.setdefault(name, []).append(time.process_time() - c)
    if prof:  # where the methods' time goes, function by function (the leaf costs first)
        pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(25)
    return {k: round(statistics.mean(v), 3) for k, v in per.items()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base-src", type=Path, required=True, help="a tree with the code before")
    p.add_argument("--corpus", type=Path, default=CORPUS)
    p.add_argument("--texts", type=int, default=40)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--rounds", type=int, default=2, help="0: only --stages")
    p.add_argument("--stages", action="store_true", help="per-method CPU seconds of this tree")
    p.add_argument("--stage-texts", type=int, default=3)
    p.add_argument(
        "--same-length",
        action="store_true",
        help="--stages on inputs of one length (BigBird's draws made once, as in the sweep)",
    )
    p.add_argument("--profile", action="store_true", help="--stages under cProfile: top functions")
    p.add_argument(
        "--also", type=Path, action="append", default=[],
        help="another tree to time beside base and this checkout (e.g. the branch before a change)",
    )  # fmt: skip
    p.add_argument(
        "--together",
        action="store_true",
        help="run each round's trees at the same time (a loaded machine: the same conditions)",
    )
    args = p.parse_args()
    srcs = {"base": args.base_src, **{f"also{k}": s for k, s in enumerate(args.also)},
            "arena": ROOT}  # fmt: skip
    runs: dict[str, list[dict]] = {k: [] for k in srcs}
    for _ in range(args.rounds):
        if args.together:
            for name, res in together(srcs, args).items():
                runs[name].append(res)
                print(name, json.dumps(res), flush=True)
            continue
        for name, src in srcs.items():
            runs[name].append(one(src, args))
            print(name, json.dumps(runs[name][-1]), flush=True)
    report: dict = {"runs": runs}
    if args.rounds:
        med = {k: {m: statistics.median(r[m] for r in v) for m in ("sweep_s", "cpu_s")}
               for k, v in runs.items()}  # fmt: skip
        report.update(
            median=med,
            ratio_sweep_wall=round(med["arena"]["sweep_s"] / med["base"]["sweep_s"], 3),
            ratio_cpu=round(med["arena"]["cpu_s"] / med["base"]["cpu_s"], 3),
            **{f"ratio_cpu_{k}": round(med[k]["cpu_s"] / med["base"]["cpu_s"], 3)
               for k in srcs if k.startswith("also")},
        )  # fmt: skip
    if args.stages:
        report["stages_cpu_s_per_text"] = stages(args)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
