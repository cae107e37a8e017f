"""A long analysis on a GPU with P kept on the device.

For each n (WikiText-2 through the default model, positions tiled to n as in bench_triton.py),
on one CUDA device, side by side in one process:

1. ``[run]`` ``model.run(text, alpha)`` with the CSR store copied to the host after the run
   (``probs_on_device = False``, the behaviour before) at the chunked run's old budget of 2^24
   scores a chunk and at the GPU budget ``sparse_probs.CUDA_CHUNK_SCORES``, and kept on the GPU
   (``SparseProbs.host_reads``, now the default) at each budget of ``--chunks``; against a
   plain SDPA softmax forward of the same weights (and the text's encoding alone, which
   ``model.run`` includes);
2. ``[view]`` what a view then costs with P on the device: a 512-row tile of one head
   (``attn.rows``), one whole head (``attn.head``), every head's edge count (``attn.nnz``) and,
   for scale, every edge to the host (``attn.edges``, what the whole-run metrics read);
3. ``[profile]`` (``--profile``) torch.profiler's table of one run at each n: the top ops by
   CUDA time and by CPU time, into ``--out``/profile_N.txt.

Times: medians of CUDA-event-timed repeats after a warm-up (host work included). JSON lines in
``--out``/cuda_run.jsonl.

    OUT=$OUT python bench/bench_cuda_run.py --model /tmp/model --text /tmp/model/text.txt \\
        --out $OUT --n 4096 16384 --alphas 1.25 1.5 2.0 --profile
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
from pathlib import Path

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_gpu as G  # noqa: E402

import sparse_core  # noqa: E402
import sparse_core.sparse_probs as SP  # noqa: E402
from sparse_core.testing import tiled_positions  # noqa: E402

OUT: Path | None = None
OLD_CHUNK = 1 << 24  # the chunked run's budget on every device before
CHUNKS = [24, 28]  # --chunks: the GPU budgets (log2 scores) measured with P on the device


def emit(part: str, **row) -> None:
    print(f"  {part:<8} " + " ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    if OUT is not None:
        with open(OUT / "cuda_run.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps({"part": part, **row}) + "\n")


def run_part(model, text: str, n: int, alphas: list[float], repeats: int) -> None:
    ids = torch.tensor([model.encode(text, truncate=True).ids], device=G.DEV)
    sdpa = copy.deepcopy(model.net).eval()
    sdpa.set_attn_implementation("sdpa")
    with torch.inference_mode():
        ref = G.timed(lambda: sdpa(input_ids=ids), repeats, warmup=1)
    sdpa = None  # its weights off the device before the runs
    emit("run", n=n, what="sdpa", ms=round(ref, 2))
    new_chunk = SP.CUDA_CHUNK_SCORES
    t0 = time.perf_counter()
    model.encode(text, truncate=True)
    emit("run", n=n, what="encode", ms=round((time.perf_counter() - t0) * 1e3, 2))
    for a in alphas:
        configs = [(False, OLD_CHUNK), (False, new_chunk)] + [(True, 1 << c) for c in CHUNKS]
        for on_device, chunk in configs:
            model.probs_on_device, SP.CUDA_CHUNK_SCORES = on_device, chunk
            ms = G.timed(lambda a=a: model.run(text, alpha=a, truncate=True), repeats, 1)
            emit(
                "run",
                n=n,
                alpha=a,
                on_device=on_device,
                chunk_log2=chunk.bit_length() - 1,
                ms=round(ms, 2),
                vs_sdpa=round(ms / ref, 2),
            )
            G.free()
        model.probs_on_device, SP.CUDA_CHUNK_SCORES = True, new_chunk
        view_part(model, text, n, a, repeats)


def view_part(model, text: str, n: int, a: float, repeats: int) -> None:
    out = model.run(text, alpha=a, truncate=True)
    st = out.attn
    if st.is_dense:
        emit("view", n=n, alpha=a, note="dense store (small n): nothing to measure")
        return
    li, h = min(2, st.L - 1), min(5, st.H - 1)
    csr = st.nbytes()

    def fresh():  # a view on a store whose host cache is empty
        st._host.clear()

    tile = G.timed(lambda: (fresh(), st.rows(li, h, slice(0, min(512, st.n))))[1], repeats, 1)
    head = G.timed(lambda: (fresh(), st.head(li, h))[1], repeats, 1)
    cached = G.timed(lambda: st.rows(li, h, slice(0, min(512, st.n))), repeats, 1)
    nnz = G.timed(st.nnz, repeats, 1)
    all_ms = None
    if csr <= 1 << 30:  # beyond, the run's every edge to the host takes tens of seconds
        t0 = time.perf_counter()
        st.edges()
        all_ms = round((time.perf_counter() - t0) * 1e3, 1)
    emit(
        "view",
        n=n,
        alpha=a,
        csr_mb=round(csr / 2**20, 1),
        edges=int(st.nnz().sum()),
        tile512_ms=round(tile, 2),
        head_ms=round(head, 2),
        tile_cached_ms=round(cached, 2),
        nnz_ms=round(nnz, 2),
        all_edges_ms=all_ms,
    )
    out = st = None
    G.free()


def profile_part(model, text: str, n: int, a: float) -> None:
    from torch.profiler import ProfilerActivity, profile

    model.run(text, alpha=a, truncate=True)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        model.run(text, alpha=a, truncate=True)
        torch.cuda.synchronize()
    ka = prof.key_averages()
    txt = (
        f"model.run at n = {n}, alpha = {a}\n\nby CUDA time\n"
        + ka.table(sort_by="self_cuda_time_total", row_limit=22)
        + "\n\nby CPU time\n"
        + ka.table(sort_by="self_cpu_time_total", row_limit=22)
    )
    print(txt, flush=True)
    if OUT is not None:
        (OUT / f"profile_{n}.txt").write_text(txt, encoding="utf-8")


def main() -> None:
    global OUT, CHUNKS
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="model directory (bench/gpu_pack.py unpack)")
    ap.add_argument("--text", required=True)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--n", type=int, nargs="+", default=[4096, 16384])
    ap.add_argument("--alphas", type=float, nargs="+", default=[1.25, 1.5, 2.0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--chunks", type=int, nargs="+", default=CHUNKS, help="log2 GPU chunk budgets")
    ap.add_argument("--profile", action="store_true", help="torch.profiler of one run at each n")
    ap.add_argument("--device", default="cuda", help="cpu: a dry run of the script")
    a = ap.parse_args()
    OUT, G.DEV, CHUNKS = a.out, a.device, a.chunks
    if OUT:
        OUT.mkdir(parents=True, exist_ok=True)
    name = torch.cuda.get_device_name() if a.device == "cuda" else "cpu"
    print(f"torch {torch.__version__}, {name}", flush=True)
    text = Path(a.text).read_text(encoding="utf-8")
    base = sparse_core.load_model(a.model, device=a.device)
    for n in a.n:
        model = tiled_positions(base, n) if n > base.config.max_positions else base
        n_real = len(model.encode(text, truncate=True).ids)
        print(f"\n=== n = {n_real} ===", flush=True)
        run_part(model, text, n_real, a.alphas, a.repeats)
        if a.profile:
            profile_part(model, text, n_real, a.alphas[len(a.alphas) // 2])


if __name__ == "__main__":
    main()
