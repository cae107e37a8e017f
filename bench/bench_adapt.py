"""Benchmark: one training step of ``sparsescope adapt`` (forward + backward), side by side.

The model is all-MiniLM-L6-v2 with its masked-LM head (``sparse_core.adapt.load_lm``), one batch
of ``--batch`` x ``--seq-len`` tokens of WikiText-2 masked by BERT's recipe, in train mode
(dropout on). One step = the forward of the body and of the head on the chosen positions, the
loss and ``backward()``; the optimiser is left out (the same for every variant). Variants, all
interleaved repeat by repeat so that load from other processes hits them alike:

- ``softmax (SDPA)``: the same weights loaded with transformers' ``sdpa`` attention (softmax);
- ``ours alpha=1.5``: our attention (:func:`sparse_core.attention._training_path`) with
  :func:`sparse_core.entmax.entmax` and its closed-form backward (definitions §7);
- ``ours learned alpha``: the same with a per-head α tensor that requires grad (the first step
  of ``--alpha learned``: every head at 1.5, so the fast closed form; ``--learned-spread`` gives
  the heads distinct α around 1.5, as after a few steps);
- ``entmax15 (package autograd)`` and ``entmax_bisect (package autograd)``: our attention with
  the ``entmax`` package's differentiable functions swapped in for ours (sort-based 1.5-entmax;
  bisection with ``n_iter`` 50, its default, and its α-gradient when α is learned).

A second figure, ``[op]``, times the attention's normalisation alone, forward + backward, on
one layer's scores of that batch ((16, 12, 128, 128), float32, from the model): ``torch.softmax``,
ours, ``entmax15`` and ``entmax_bisect`` (the package's autograd). It shows what the whole step
hides: the linear layers dominate a MiniLM step at n = 128.

``--baseline DIR`` (another checkout, e.g. ``git archive main | tar -x -C DIR``) adds its
training path (``_training_path``; ``_training_attention`` in older trees) and closed-form
backward (``sparse_core/attention.py``, ``sparse_core/entmax/grad.py``; the forward is this
tree's) as ``before:`` variants, interleaved
with the rest, in both figures: before/after in one run.

Prints median and minimum milliseconds (wall), the median process CPU time (all threads: less
sensitive to other processes on shared cores), the ratios to softmax and to ours, and the load
average before and after. Run: ``python bench/bench_adapt.py --threads 2 --repeats 5``
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from sparse_core import attention as A  # noqa: E402
from sparse_core import entmax as E  # noqa: E402
from sparse_core.adapt.alpha import LearnedAlpha  # noqa: E402
from sparse_core.adapt.data import Batches, split_corpus, token_sequences  # noqa: E402
from sparse_core.adapt.lm import head_logits, load_lm  # noqa: E402
from sparse_core.sources import ORIGINAL_MODEL_ID  # noqa: E402

WIKITEXT = Path(__file__).resolve().parents[2] / "shared" / "data" / "wikitext-2" / "valid.txt"


def load() -> str:
    return "load average {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


def load_baseline(root: Path) -> dict:
    """The baseline tree's training attention and entmax backward, as modules of this package
    (their relative imports resolve here: the forward and the helpers are this tree's)."""
    mods = {}
    places = {"entmax_grad": ("entmax/grad.py", "entmax_grad.py"), "attention": ("attention.py",)}
    for name, files in places.items():
        # the first that exists: a tree from before the entmax modules became a package has
        # entmax_grad.py beside attention.py
        path = next(
            (root / "sparse_core" / f for f in files if (root / "sparse_core" / f).is_file()),
            root / "sparse_core" / files[0],
        )
        if not path.is_file():
            sys.exit(f"bench_adapt: --baseline {root} has no {path.relative_to(root)}")
        spec = importlib.util.spec_from_file_location(f"sparse_core._baseline_{name}", path)
        mod = importlib.util.module_from_spec(spec)
        mod.__package__ = "sparse_core"
        sys.modules[spec.name] = mod  # dataclasses look their module up
        spec.loader.exec_module(mod)
        mods[name] = mod
    return mods


@contextlib.contextmanager
def swapped(base: dict | None):
    """Run the block with the baseline's training attention and entmax backward (if given)."""
    if base is None:
        yield
        return
    own_att, own_grad = A._training_path, E.entmax_with_grad
    A._training_path = baseline_training_path(base["attention"])
    E.entmax_with_grad = base["entmax_grad"].entmax_with_grad
    try:
        yield
    finally:
        A._training_path, E.entmax_with_grad = own_att, own_grad


def baseline_training_path(mod):
    """The baseline's training path as a path of this tree (``attention.Call`` -> output, P):
    its own ``_training_path``, or an older tree's ``_training_attention`` called with the
    call's fields."""
    if hasattr(mod, "_training_path"):
        return mod._training_path

    def path(c):
        return mod._training_attention(
            c.module, c.state, c.query, c.key, c.value, c.mask, c.scaling, c.dropout, c.softcap
        )

    return path


def package_op(kind: str):
    """The entmax package's differentiable α-entmax with our entmax's signature."""
    from entmax import entmax15, entmax_bisect

    def op(scores, alpha, dim=-1, **kw):
        if kind == "entmax15":
            return entmax15(scores, dim=dim)
        a = alpha
        if isinstance(a, torch.Tensor):
            a = a.to(scores.dtype).expand(*scores.shape[:-1], 1)
        return entmax_bisect(scores, a, dim=dim, n_iter=50)

    return op


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument(
        "--learned-spread",
        type=float,
        default=0.0,
        help="spread the learned alphas uniformly over 1.5 +- this (0: all 1.5)",
    )
    ap.add_argument("--skip-package", action="store_true")
    ap.add_argument("--skip-step", action="store_true", help="only the [op] figure")
    ap.add_argument(
        "--baseline",
        type=Path,
        help="another checkout whose training attention and entmax backward run as 'before:'",
    )
    args = ap.parse_args()
    base = load_baseline(args.baseline.resolve()) if args.baseline else None
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {platform.machine()}, {os.cpu_count()} CPUs, "
          f"torch threads {torch.get_num_threads()}, batch {args.batch} x {args.seq_len}, "
          f"repeats {args.repeats}, {load()}")  # fmt: skip
    torch.manual_seed(0)
    lm = load_lm(ORIGINAL_MODEL_ID, "cpu")
    tok = lm.sparse.tokenizer
    docs = split_corpus(WIKITEXT, 5).train
    seqs = token_sequences(docs[:20], tok, args.seq_len)
    data = Batches(seqs, tok, decoder=False, vocab_size=lm.sparse.config.vocab_size)
    batch = data.train_batch(0, args.batch, seed=0)
    L = lm.sparse.config.num_layers
    H = lm.sparse.config.num_heads

    from transformers import AutoModelForMaskedLM

    sdpa = AutoModelForMaskedLM.from_pretrained(
        str(lm.source.path), attn_implementation="sdpa", local_files_only=True
    )
    sdpa.load_state_dict(lm.lm.state_dict())  # the same (new) head
    sdpa.train()
    lm.lm.train()
    learned = LearnedAlpha(L, H, 1.5)
    if args.learned_spread:
        with torch.no_grad():
            a = 1.5 + args.learned_spread * (2 * torch.rand(L, H) - 1)
            learned.a.copy_(torch.logit(a - 1.0))
    chosen = batch.labels != -100

    def step_sdpa():
        h = sdpa.base_model(input_ids=batch.ids).last_hidden_state
        logits = head_logits(sdpa, "bert", h[chosen])
        torch.nn.functional.cross_entropy(logits, batch.labels[chosen]).backward()

    def ours(alphas_fn, op=None, old=None):
        def step():
            own = A.entmax
            if op is not None:
                A.entmax = op
            try:
                with swapped(old):
                    s, k = lm.loss_sums(batch, alphas_fn(), train=True)
                    (s / k).backward()
            finally:
                A.entmax = own

        return step

    fns = {
        "softmax (SDPA)": step_sdpa,
        "ours alpha=1.5": ours(lambda: [1.5] * L),
        "ours learned alpha": ours(learned.layer_alphas),
    }
    if base is not None:
        fns["before: ours alpha=1.5"] = ours(lambda: [1.5] * L, old=base)
        fns["before: ours learned alpha"] = ours(learned.layer_alphas, old=base)
    if not args.skip_package:
        fns["entmax15 (package autograd)"] = ours(lambda: [1.5] * L, package_op("entmax15"))
        fns["entmax_bisect (package autograd)"] = ours(lambda: [1.5] * L, package_op("bisect"))
        fns["entmax_bisect learned alpha (package)"] = ours(
            learned.layer_alphas, package_op("bisect")
        )
    op_figure(lm, batch, args, base)
    if args.skip_step:
        return
    for f in fns.values():  # warm-up
        f()
    before = load()
    times: dict[str, list[float]] = {k: [] for k in fns}
    cpu: dict[str, list[float]] = {k: [] for k in fns}  # process CPU time (all threads)
    for _ in range(args.repeats):
        for k, f in fns.items():
            lm.lm.zero_grad(set_to_none=True)
            sdpa.zero_grad(set_to_none=True)
            learned.zero_grad(set_to_none=True)
            t0, c0 = time.perf_counter(), time.process_time()
            f()
            times[k].append((time.perf_counter() - t0) * 1e3)
            cpu[k].append((time.process_time() - c0) * 1e3)
    med = {k: statistics.median(v) for k, v in times.items()}
    mins = {k: min(v) for k, v in times.items()}
    cmed = {k: statistics.median(v) for k, v in cpu.items()}
    soft, own = "softmax (SDPA)", "ours alpha=1.5"
    print(f"\none training step, forward + backward ({before}; after: {load()})")
    print(f"    {'':<40} {'median ms':>10} {'/softmax':>9} {'/ours':>7} {'min ms':>10} "
          f"{'/softmax':>9} {'cpu ms':>9} {'/softmax':>9}")  # fmt: skip
    for k in fns:
        print(f"    {k:<40} {med[k]:10.0f} {med[k] / med[soft]:8.2f}x {med[k] / med[own]:6.2f}x "
              f"{mins[k]:10.0f} {mins[k] / mins[soft]:8.2f}x {cmed[k]:9.0f} "
              f"{cmed[k] / cmed[soft]:8.2f}x")  # fmt: skip


def op_figure(lm, batch, args, base: dict | None = None) -> None:
    """[op]: one layer's normalisation, forward + backward, on the model's own scores."""
    from entmax import entmax15, entmax_bisect

    from sparse_core.entmax import entmax

    with torch.no_grad():
        out = lm.sparse.run(" ".join(["the"] * 4), alpha=1.5)  # warm the model
        h = lm.lm.base_model.embeddings(input_ids=batch.ids)
        layer = lm.lm.base_model.encoder.layer[0].attention.self
        b, n, _ = h.shape
        H, d = out.heads, out.queries.shape[-1]
        q = layer.query(h).view(b, n, H, d).transpose(1, 2)
        k = layer.key(h).view(b, n, H, d).transpose(1, 2)
        scores = (q @ k.transpose(-1, -2)) * d**-0.5  # (B, H, n, n)
    g = torch.randn_like(scores)
    learned = torch.full((1, H, 1, 1), 1.5, dtype=torch.float64, requires_grad=True)

    ops = {
        "torch.softmax": lambda x: torch.softmax(x, -1),
        "ours alpha=1.5": lambda x: entmax(x, 1.5),
        "ours learned alpha (1.5)": lambda x: entmax(x, learned),
        "entmax15 (package)": lambda x: entmax15(x, -1),
        "entmax_bisect (package)": lambda x: entmax_bisect(x, 1.5, -1, 50),
    }
    if base is not None:
        ops["before: ours alpha=1.5"] = ops["ours alpha=1.5"]  # run under swapped(base)
        ops["before: ours learned alpha (1.5)"] = ops["ours learned alpha (1.5)"]
    times: dict[str, list[float]] = {k: [] for k in ops}
    cpu: dict[str, list[float]] = {k: [] for k in ops}
    for r in range(args.repeats + 1):
        for name, f in ops.items():
            x = scores.clone().requires_grad_()
            t0, c0 = time.perf_counter(), time.process_time()
            with swapped(base) if name.startswith("before") else contextlib.nullcontext():
                f(x).backward(g)
            if r:
                times[name].append((time.perf_counter() - t0) * 1e3)
                cpu[name].append((time.process_time() - c0) * 1e3)
    med = {k: statistics.median(v) for k, v in times.items()}
    cmed = {k: statistics.median(v) for k, v in cpu.items()}
    print(f"\n[op] one layer's scores {tuple(scores.shape)}, forward + backward ({load()})")
    print(f"    {'':<34} {'median ms':>10} {'/softmax':>9} {'/ours':>7} {'min ms':>10} "
          f"{'cpu ms':>9} {'/ours':>7}")  # fmt: skip
    for k, v in med.items():
        print(f"    {k:<34} {v:10.1f} {v / med['torch.softmax']:8.2f}x "
              f"{v / med['ours alpha=1.5']:6.2f}x {min(times[k]):10.1f} {cmed[k]:9.1f} "
              f"{cmed[k] / cmed['ours alpha=1.5']:6.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
