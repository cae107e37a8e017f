"""The corpus sweep with the arena's methods against the sweep without them (the floor: the
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

With ``--summary``, the analyze body's summary instead (every method at its defaults
on all 72 heads, ``payloads.summary_texts`` of one fresh 512-token WikiText-2 window, one
thread, as a lone analysis' one-thread summary): the base tree and this checkout each in an
interpreter of its own, taking turns text by text, ``--rounds`` rounds; per tree the CPU ms of
each text's summary (min, median), of each method's part (medians) and the sha256 of each
text's JSON, which must be the same in both trees (exit 1 otherwise: a body changed):

    python bench/bench_arena.py --base-src /tmp/main-src --summary --rounds 3 --summary-texts 6

(the JSON formatting is this checkout's ``sparsescope.engine.payloads`` in both interpreters;
the methods are each tree's ``sparse_core``.) With ``--interleave``, the corpus sweep's work
(``Totals.add_text`` of each input, the model run included, one thread) of the base tree and
this checkout, each in its own interpreter, taking turns input by input (the inputs by length,
as a sweep worker gets them), so that a loaded machine's changes hit both alike:

    python bench/bench_arena.py --base-src /tmp/main-src --interleave --texts 40
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

from tests.checkout import use_the_checkout  # noqa: E402

use_the_checkout()  # ``import sparsescope``: this checkout's app/, not an installed copy

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


HELD_OUT = r"""
import sys, torch
sys.path.insert(0, {src!r})
import sparse_core
assert sparse_core.__file__.startswith({src!r}), sparse_core.__file__
from threadpoolctl import threadpool_limits
from sparse_core import load_model
from sparse_core.corpus import pack, read_corpus, token_counter
from sparse_core.sparsefinder import load_artefact
torch.set_num_threads(1)
threadpool_limits(1)
model = load_model(device="cpu")
art = load_artefact(model_id=model.model_id, alpha=1.5)
used = int(art.meta["corpus"][0]["inputs_used"])
inputs = pack(read_corpus({corpus!r}), token_counter(model.tokenizer), 512)[used:]
"""
"""The start of a child interpreter's script (``{src}`` first on sys.path, one thread): the
model, the shipped artefact and the held-out inputs of the corpus (also bench/sweep_exact.py)."""

SUMMARY = (
    HELD_OUT
    + r"""
import hashlib, json, time
from sparse_core import methods as M
from sparse_core.bitsets import Gold
from sparse_core.pareto.points import sweep_points
from sparsescope.engine.payloads import summary_texts
texts = [i.text for i in inputs if i.n_tokens == 512][:{texts}]
print("ready", flush=True)
for line in sys.stdin:  # one text a line
    with torch.inference_mode():
        out = model.run(texts[int(line)], truncate=True, hidden=False)
        ctx = M.PredictContext.from_run(out, art)
        c = time.process_time()
        body = summary_texts([ctx])[0]
        res = {{"ms": 1e3 * (time.process_time() - c), "methods": {{}},
                "sha": hashlib.sha256(body.encode()).hexdigest()[:16]}}
        ctx = M.PredictContext.from_run(out, art)  # the methods one by one, a fresh context
        c = time.process_time()
        gold = Gold.of(ctx)
        res["methods"]["gold"] = 1e3 * (time.process_time() - c)
        for name in M.available(art):
            m = M.METHODS[name]
            c = time.process_time()
            sweep_points(ctx, m, [m.defaults(ctx.n, art)], gold)
            res["methods"][name] = 1e3 * (time.process_time() - c)
    print(json.dumps(res), flush=True)
"""
)


def summary_runs(srcs: dict[str, Path], args) -> int:
    """``--summary``: the trees' summaries text by text in turn, ``args.rounds`` rounds over
    ``args.summary_texts`` texts (module docstring)."""
    procs = {}
    for name, src in srcs.items():
        code = SUMMARY.format(src=str(src), corpus=str(args.corpus), texts=args.summary_texts)
        procs[name] = _child(code)
    got: dict[str, dict] = {k: {"ms": [], "sha": [], "methods": {}} for k in srcs}
    load0 = os.getloadavg()[0]
    for r in range(max(1, args.rounds)):
        for i in range(args.summary_texts):
            order = list(srcs) if (r + i) % 2 == 0 else list(srcs)[::-1]  # who goes first
            for name in order:
                one = _ask(procs[name], i)
                g = got[name]
                g["ms"].append(one["ms"])
                if r == 0:
                    g["sha"].append(one["sha"])
                elif g["sha"][i] != one["sha"]:
                    g["sha"][i] = "changed"
                for m, v in one["methods"].items():
                    g["methods"].setdefault(m, []).append(v)
    for p in procs.values():
        p.stdin.close()
        p.wait()
    print(f"{len(got['base']['ms'])} summaries a tree, load average {load0:.1f} -> "
          f"{os.getloadavg()[0]:.1f}")  # fmt: skip
    print(f"{'CPU ms of a 512-token summary':36s}" + "".join(f"{k:>16s}" for k in srcs))
    for label, f in (("summary min", min), ("summary median", statistics.median)):
        print(f"{label:36s}" + "".join(f"{f(got[k]['ms']):16.1f}" for k in srcs))
    names = sorted(got["arena"]["methods"], key=lambda m: -statistics.median(
        got["base"]["methods"].get(m, [0])))  # fmt: skip
    for m in names:
        print(
            f"  {m + ' (median)':34s}"
            + "".join(
                f"{statistics.median(got[k]['methods'].get(m, [float('nan')])):16.1f}" for k in srcs
            )
        )
    base, new = got["base"], got["arena"]
    per = sorted(b / a for a, b in zip(base["ms"], new["ms"], strict=True))
    print(f"ratio (this / base): min {min(new['ms']) / min(base['ms']):.3f}, median "
          f"{statistics.median(new['ms']) / statistics.median(base['ms']):.3f}, per summary "
          f"median {statistics.median(per):.3f}")  # fmt: skip
    same = all(got[k]["sha"] == base["sha"] for k in srcs) and "changed" not in base["sha"]
    print(
        f"summary JSON sha256 per text {'identical' if same else 'DIFFERENT'}: "
        + " ".join(base["sha"])
    )
    return 0 if same else 1


def _child(code: str) -> subprocess.Popen:
    """A bench interpreter that answers one JSON line for each index it reads."""
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": ""})  # fmt: skip
    if p.stdout.readline().strip() != "ready":
        raise SystemExit("a bench interpreter failed to start")
    return p


def _ask(p: subprocess.Popen, i: int) -> dict:
    p.stdin.write(f"{i}\n")
    p.stdin.flush()
    return json.loads(p.stdout.readline())


STEP = (
    HELD_OUT
    + r"""
import json, time
from sparse_core.methods import PredictContext, available
from sparse_core.pareto.corpus_sweep import Totals, corpus_grids
held = sorted([i for i in inputs if i.n_tokens >= 256][:{texts}], key=lambda i: i.n_tokens)
counts = [i.n_tokens for i in held]
tot = Totals(corpus_grids(available(art), max(counts), min(counts), art))
print("ready", flush=True)
for line in sys.stdin:  # one input a line, in the sweep's order (by length)
    i = int(line)
    c = time.process_time()
    with torch.inference_mode():
        out = model.run(held[i].text, truncate=True, hidden=False)
        tot.add_text(PredictContext.from_run(out, art))
    print(json.dumps({{"cpu_s": time.process_time() - c, "n": out.n}}), flush=True)
"""
)


def interleaved(srcs: dict[str, Path], args) -> int:
    """``--interleave``: each tree's sweep (``Totals.add_text`` of each input, model run
    included, one thread) in an interpreter of its own, the trees taking turns input by input
    (one runs while the other waits), so that both see the same load; CPU seconds per input."""
    procs = {name: _child(STEP.format(src=str(src), corpus=str(args.corpus), texts=args.texts))
             for name, src in srcs.items()}  # fmt: skip
    cpu: dict[str, list[float]] = {k: [] for k in srcs}
    load0 = os.getloadavg()[0]
    for i in range(args.texts):
        for name in srcs if i % 2 == 0 else list(srcs)[::-1]:  # alternate who goes first
            cpu[name].append(_ask(procs[name], i)["cpu_s"])
    for p in procs.values():
        p.stdin.close()
        p.wait()
    base, new = cpu["base"], cpu["arena"]
    per = sorted(b / a for a, b in zip(base, new, strict=True))
    print(f"{len(base)} inputs, load average {load0:.1f} -> {os.getloadavg()[0]:.1f}")
    for k, v in cpu.items():
        print(f"{k:8s} CPU s: total {sum(v):.1f}, per input min {min(v):.3f} "
              f"median {statistics.median(v):.3f}")  # fmt: skip
    print(f"ratio this / base: total {sum(new) / sum(base):.4f}, per input median "
          f"{statistics.median(per):.4f} (quartiles {per[len(per) // 4]:.4f} "
          f"{per[3 * len(per) // 4]:.4f})")  # fmt: skip
    return 0


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
    p.add_argument(
        "--summary",
        action="store_true",
        help="time the analyze summary of a 512-token text instead",
    )
    p.add_argument("--summary-texts", type=int, default=6, help="texts a --summary run")
    p.add_argument(
        "--interleave",
        action="store_true",
        help="base and this tree's sweeps input by input in turn (--texts inputs)",
    )
    args = p.parse_args()
    srcs = {"base": args.base_src, **{f"also{k}": s for k, s in enumerate(args.also)},
            "arena": ROOT}  # fmt: skip
    if args.summary:
        return summary_runs(srcs, args)
    if args.interleave:
        return interleaved(srcs, args)
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
