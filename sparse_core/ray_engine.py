"""The Ray engine of ``sparsescope fit|pareto --engine ray``: corpus work on Ray Data.

The local engine runs the model on every input in one process (``fit``) or a few processes
(``pareto --workers``). This engine hands the same work to a Ray cluster — the one named by
``RAY_ADDRESS``, or a local one started here — so that it scales over GPUs and nodes:

- the inputs (the packed model inputs the command chose, in corpus order) are cut into *shards*
  of consecutive inputs (:func:`shard_size`) and become a Ray Dataset, one row per shard;
- ``Dataset.map_batches`` runs a callable class in an actor pool: each actor loads the model once
  (``load_model(model_path)``: the path, or the shipped default, must exist on every node) on its
  GPU (``num_gpus=1`` per actor when the cluster has GPUs, a share of one when ``workers`` exceeds
  the GPUs) or on CPU (``num_cpus=threads``);
- ``pareto``: each actor sweeps every grid point on its shard where the graphs are
  (:func:`sparse_core.pareto.sweep_inputs`) and returns the shard's :class:`Totals` (per-head
  sums, a few kB to MB); ``fit``: each actor extracts its shard's queries, keys and graph edges
  (:func:`sparse_core.sparsefinder_fit.extract`, the same batches of ``extract_batch`` inputs as
  the local engine, so the same tensors) and the fit then trains on the driver exactly as locally;
- the driver writes every shard's result to ``<out>/.ray-shards/<run>/shard-NNNNNN.safetensors``
  as it arrives (atomic rename); a run interrupted at any point resumes from the shards on disk
  (``<run>`` is a digest of everything the result depends on: model, α, causal, grids, artefact,
  inputs, shard size; another run never reuses them). The folder is removed once every shard has
  been read back;
- shards are merged in shard order, as the local engine merges its per-process sums, so
  ``pareto.json`` is the local one up to float rounding (tests/core/test_ray_engine.py).

Ray is an optional extra (``pip install 'sparsescope[ray]'``); :func:`require_ray` turns its
absence into a one-line :class:`RayMissingError`. Nothing here imports the web app.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

from .errors import SparsescopeError

log = logging.getLogger(__name__)

SHARD_DIR = ".ray-shards"


class RayMissingError(SparsescopeError):
    """``--engine ray`` without Ray installed."""

    default_field = "engine"


def require_ray():
    """Import ``ray`` and ``ray.data`` or raise a one-line :class:`RayMissingError`."""
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as exc:
        raise RayMissingError(
            f"--engine ray needs Ray Data, which is not installed ({exc.name or exc}); "
            "install it with: pip install 'sparsescope[ray]'  (or: pip install 'ray[data]')"
        ) from None
    return ray


def connect(num_cpus: int | None = None) -> bool:
    """Connect to the cluster at ``RAY_ADDRESS`` or start a local one (``num_cpus`` CPUs, default
    all). Reuses a running connection. Returns True when this call started it (so the caller
    may ``ray.shutdown()``)."""
    ray = require_ray()
    if ray.is_initialized():
        return False
    address = os.environ.get("RAY_ADDRESS") or None
    # Ray's own INFO/WARNING lines (token auth on a local cluster, progress-bar notes) stay out
    # of the command's output; its errors still show
    kw = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    if address:
        log.info("connecting to the Ray cluster at %s", address)
        ray.init(address=address, **kw)
    else:
        log.info("starting a local Ray cluster (%s CPUs)", num_cpus or "all")
        ray.init(num_cpus=num_cpus, **kw)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False  # the engine shows its own tqdm bar over inputs
    logging.getLogger("ray.data").setLevel(logging.ERROR)
    return True


def shard_size(n_inputs: int, multiple: int = 2) -> int:
    """Inputs per shard: ~64 shards up to 2,048 inputs, then 32 inputs each (at least 2), a
    multiple of ``multiple`` (the fit's extraction batch, so shards batch their inputs as the
    local engine does). Depends on the input count only: a resumed run cuts the same shards."""
    size = max(2, min(32, math.ceil(n_inputs / 64)))
    return multiple * math.ceil(size / multiple)


def _digest(*parts) -> str:
    h = hashlib.sha256()
    for p in parts:
        if isinstance(p, str):
            h.update(p.encode())
        elif isinstance(p, bytes | bytearray | memoryview):
            h.update(p)
        else:
            h.update(json.dumps(p, sort_keys=True, default=str).encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def _texts_digest(texts: Sequence[str]) -> str:
    return _digest(*texts)


def _model_digest(model_path) -> str:
    """The model directory's files (name, size, modification time): a re-saved model with the
    same name does not reuse the old one's shards."""
    if model_path is None or not Path(model_path).is_dir():
        return str(model_path)
    files = sorted(Path(model_path).iterdir())
    return _digest(*[[f.name, f.stat().st_size, f.stat().st_mtime_ns] for f in files
                     if f.is_file()])  # fmt: skip


def _artefact_digest(artefact) -> str:
    if artefact is None:
        return "none"
    parts = [artefact.model_id, float(artefact.alpha), artefact.W.numpy().tobytes(),
             artefact.b.numpy().tobytes()]  # fmt: skip
    parts += [c.numpy().tobytes() for _, c in sorted(artefact.centroids.items())]
    return _digest(*parts)


class ShardStore:
    """The checkpoint folder of one run: one safetensors file per finished shard."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def path(self, k: int) -> Path:
        return self.root / f"shard-{k:06d}.safetensors"

    def done(self, k: int) -> bool:
        return self.path(k).is_file()

    def write(self, k: int, payload: bytes) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f".shard-{k:06d}.tmp"
        tmp.write_bytes(payload)
        os.replace(tmp, self.path(k))  # atomic: a killed run leaves whole shards only

    def read(self, k: int) -> dict[str, torch.Tensor]:
        from safetensors.torch import load

        return load(self.path(k).read_bytes())

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        try:
            self.root.parent.rmdir()  # .ray-shards/ when no other run's shards are left
        except OSError:
            pass


# ----------------------------------------------------------------------------- actors


class _Worker:
    """Base of the map_batches callable classes: loads the model once per actor."""

    def __init__(self, model_path, device: str, threads: int):
        torch.set_num_threads(max(1, threads))
        from .model import load_model

        self.model = load_model(model_path, device=device)

    def __call__(self, batch: dict) -> dict:
        from safetensors.torch import save

        shards, payloads = [], []
        for k, texts in zip(batch["shard"], batch["texts"], strict=True):
            cpu = time.process_time()
            t = self.work([str(t) for t in texts])
            t["cpu_s"] = torch.tensor([time.process_time() - cpu], dtype=torch.float64)
            shards.append(int(k))
            payloads.append(save(t))
        return {"shard": np.array(shards, dtype=np.int64), "payload": payloads}

    def work(self, texts: list[str]) -> dict[str, torch.Tensor]:  # pragma: no cover
        raise NotImplementedError


class SweepWorker(_Worker):
    """``pareto``: every grid point on a shard (the model runs here, so does the sweep)."""

    def __init__(self, model_path, device, threads, artefact, grids, alpha, causal):
        super().__init__(model_path, device, threads)
        self.artefact, self.grids, self.alpha, self.causal = artefact, grids, alpha, causal

    def work(self, texts: list[str]) -> dict[str, torch.Tensor]:
        from .pareto import sweep_inputs

        tot = sweep_inputs(self.model, texts, self.artefact, self.grids, alpha=self.alpha,
                           causal=self.causal)  # fmt: skip
        return totals_to_tensors(tot)


class ExtractWorker(_Worker):
    """``fit``: queries, keys and graph edges of every input of a shard."""

    def __init__(self, model_path, device, threads, alpha, extract_batch):
        super().__init__(model_path, device, threads)
        self.alpha, self.extract_batch = alpha, extract_batch

    def work(self, texts: list[str]) -> dict[str, torch.Tensor]:
        from .sparsefinder_fit import extract

        data = extract(self.model, texts, self.alpha, batch_size=self.extract_batch)
        return graphs_to_tensors(data)


# ----------------------------------------------------------------------------- payloads


def totals_to_tensors(tot) -> dict[str, torch.Tensor]:
    t = {f"sums/{nm}/{m}": torch.from_numpy(np.ascontiguousarray(v))
         for nm, acc in tot.sums.items() for m, v in acc.items()}  # fmt: skip
    if tot.gold is not None:
        t["gold"] = torch.from_numpy(np.ascontiguousarray(tot.gold))
    t["counts"] = torch.tensor([tot.texts, tot.tokens], dtype=torch.int64)
    return t


def totals_from_tensors(t: dict[str, torch.Tensor], grids: dict):
    from .pareto import Totals

    tot = Totals(grids)
    for key, v in t.items():
        if key.startswith("sums/"):
            _, nm, m = key.split("/", 2)
            tot.sums.setdefault(nm, {})[m] = v.numpy()
    tot.sums = {nm: tot.sums[nm] for nm in grids if nm in tot.sums}  # the grids' method order
    tot.gold = t["gold"].numpy() if "gold" in t else None
    tot.texts, tot.tokens = (int(x) for x in t["counts"].tolist())
    return tot


def graphs_to_tensors(data) -> dict[str, torch.Tensor]:
    t = {"lengths": torch.tensor(data.lengths, dtype=torch.int64),
         "causal": torch.tensor([int(data.causal)], dtype=torch.int64)}  # fmt: skip
    for i in range(len(data)):
        t[f"q/{i}"] = data.queries[i].contiguous()
        t[f"k/{i}"] = data.keys[i].contiguous()
        t[f"e/{i}"] = data.edges[i].contiguous()
    return t


# ----------------------------------------------------------------------------- the driver


def _actors(ray, workers: int | None, threads: int, todo: int) -> tuple[int, dict, str]:
    """(pool size, resources per actor, model device) for this cluster.

    With GPUs: one actor per GPU by default; ``workers`` more actors than GPUs share them
    (``num_gpus`` = GPUs / workers each), since the sweep part of the work runs on the actor's
    CPUs. Without: ``CPUs // threads`` actors of ``threads`` CPUs each."""
    res = ray.cluster_resources()
    gpus = int(res.get("GPU", 0))
    if gpus > 0:
        n = workers or gpus
        per = {"num_gpus": min(1.0, gpus / n), "num_cpus": threads}
        device = "cuda"
    else:
        cpus = max(1, int(res.get("CPU", 1)))
        n, per, device = workers or max(1, cpus // threads), {"num_cpus": threads}, "cpu"
    return max(1, min(n, todo)), per, device


def run_shards(
    worker_cls,
    worker_kwargs: dict,
    shards: list[list[str]],
    store: ShardStore,
    *,
    workers: int | None = None,
    threads: int = 1,
    desc: str = "ray",
    progress: bool = True,
    on_shard: Callable[[int], None] | None = None,
) -> None:
    """Run ``worker_cls`` over every shard not yet in ``store``, writing each result as it comes.

    ``on_shard(k)`` is called after shard k is written (tests use it to simulate an interruption).
    An exception in the loop ends the Ray Data execution (its actors) before it propagates.
    """
    from tqdm.auto import tqdm

    ray = require_ray()
    todo = [k for k in range(len(shards)) if not store.done(k)]
    done_inputs = sum(map(len, shards)) - sum(len(shards[k]) for k in todo)
    bar = tqdm(total=sum(map(len, shards)), initial=done_inputs, desc=desc, unit="input",
               disable=not progress)  # fmt: skip
    if done_inputs:
        log.info("resuming: %d of %d shards already in %s", len(shards) - len(todo), len(shards),
                 store.root)  # fmt: skip
    if todo:
        n, per, device = _actors(ray, workers, threads, len(todo))
        log.info("%d shards of %d inputs on %d %s actor(s)", len(todo), len(shards[0]), n, device)
        ds = ray.data.from_items(
            [{"shard": k, "texts": list(shards[k])} for k in todo], override_num_blocks=len(todo)
        )
        out = ds.map_batches(
            worker_cls,
            fn_constructor_kwargs={**worker_kwargs, "device": device, "threads": threads},
            batch_size=1,
            compute=ray.data.ActorPoolStrategy(size=n),
            **per,
        )
        rows = iter(out.iter_rows())
        try:
            for row in rows:
                k = int(row["shard"])
                store.write(k, bytes(row["payload"]))
                bar.update(len(shards[k]))
                if on_shard is not None:
                    on_shard(k)
        finally:
            # a driver that stops early (an exception here: a failed write, an interruption the
            # caller catches) shuts the execution down now and frees the actors' CPUs/GPUs; left
            # open, it ran on until the traceback that holds the iterator was collected
            rows.close()
    bar.close()


def _cut(texts: Sequence[str], size: int) -> list[list[str]]:
    return [list(texts[i : i + size]) for i in range(0, len(texts), size)]


def sweep_corpus_ray(
    model,
    texts: Sequence[str],
    artefact=None,
    *,
    alpha: float = 1.5,
    causal: bool = False,
    methods=None,
    workers: int | None = None,
    threads: int = 1,
    model_path=None,
    artefact_path=None,  # noqa: ARG001 - the artefact object itself is shipped to the actors
    fidelity_texts: int = 0,
    progress: bool = True,
    checkpoint_dir: str | os.PathLike = ".",
    num_cpus: int | None = None,
    on_shard: Callable[[int], None] | None = None,
):
    """:func:`sparse_core.pareto.sweep_corpus` on Ray: the same arguments, the same result.

    ``model`` (loaded on the driver) gives the tokenizer for the grids and runs the fidelity
    passes (few texts); the actors load ``model_path``. Shard results go to
    ``checkpoint_dir/.ray-shards/``. ``num_cpus``: the local cluster's size when none runs.
    """
    from .methods import available
    from .pareto import CorpusSweep, Totals, corpus_grids
    from .pareto.corpus_sweep import _fidelity

    t0 = time.perf_counter()
    names = available(artefact, None if methods is None else list(methods))
    counts = [len(e.ids) for e in model.tokenizer.encode_batch(list(texts))]
    counts = [min(c, model.config.max_positions) for c in counts]
    grids = corpus_grids(names, max(counts), min(counts), artefact)
    size = shard_size(len(texts))
    run = _digest("pareto", model.model_id, _model_digest(model_path), float(alpha),
                  bool(causal), grids, size, _artefact_digest(artefact),
                  _texts_digest(texts))  # fmt: skip
    store = ShardStore(Path(checkpoint_dir) / SHARD_DIR / f"pareto-{run}")
    shards = _cut(texts, size)
    started = connect(num_cpus)
    try:
        run_shards(SweepWorker,
                   dict(model_path=None if model_path is None else str(model_path),
                        artefact=artefact, grids=grids, alpha=float(alpha), causal=bool(causal)),
                   shards, store, workers=workers, threads=threads, desc="pareto (ray)",
                   progress=progress, on_shard=on_shard)  # fmt: skip
    finally:
        if started:
            require_ray().shutdown()
    tot, cpu = Totals(grids), 0.0
    for k in range(len(shards)):  # shard order: the merge does not depend on arrival order
        t = store.read(k)
        cpu += float(t["cpu_s"][0])
        tot.merge(totals_from_tensors(t, grids))
    store.remove()
    sweep = CorpusSweep(
        model=model.model_id,
        alpha=float(alpha),
        causal=bool(causal) or bool(model.config.is_decoder),  # a decoder is always causal
        texts=tot.texts,
        gold_sparsity=float((tot.gold / tot.texts).mean()),
        grids=grids,
        values=tot.means(),
        per_head=tot,
        meta={"tokens": tot.tokens, "sweep_seconds": time.perf_counter() - t0, "engine": "ray",
              "shards": len(shards), "shard_size": size, "worker_cpu_seconds": round(cpu, 1)},
    )  # fmt: skip
    if fidelity_texts > 0:  # a handful of masked passes: on the driver, as the local engine
        t1 = time.perf_counter()
        sweep.fidelity = _fidelity(model, texts[:fidelity_texts], artefact, sweep, alpha, causal,
                                   progress)  # fmt: skip
        sweep.meta["fidelity_seconds"] = time.perf_counter() - t1
        sweep.meta["fidelity_texts"] = min(fidelity_texts, len(texts))
    return sweep


def extract_ray(
    model_id: str,
    texts: Sequence[str],
    alpha: float = 1.5,
    *,
    model_path=None,
    batch_size: int = 2,
    workers: int | None = None,
    threads: int = 1,
    progress: bool = True,
    checkpoint_dir: str | os.PathLike = ".",
    num_cpus: int | None = None,
    on_shard: Callable[[int], None] | None = None,
    stats: dict | None = None,
):
    """:func:`sparse_core.sparsefinder_fit.extract` on Ray: the same :class:`GraphData`.

    Shards are a multiple of ``batch_size`` inputs, so every actor pads and batches exactly the
    inputs the local engine batches together. ``stats`` (a dict) receives the shard count and
    size and the workers' CPU seconds (summed over shards, resumed ones included)."""
    from .sparsefinder_fit import GraphData

    size = shard_size(len(texts), multiple=max(1, batch_size))
    run = _digest("fit", model_id, _model_digest(model_path), float(alpha), batch_size, size,
                  _texts_digest(texts))  # fmt: skip
    store = ShardStore(Path(checkpoint_dir) / SHARD_DIR / f"fit-{run}")
    shards = _cut(texts, size)
    started = connect(num_cpus)
    try:
        run_shards(ExtractWorker,
                   dict(model_path=None if model_path is None else str(model_path),
                        alpha=float(alpha), extract_batch=batch_size),
                   shards, store, workers=workers, threads=threads, desc="extracting graphs (ray)",
                   progress=progress, on_shard=on_shard)  # fmt: skip
    finally:
        if started:
            require_ray().shutdown()
    data, cpu = GraphData([], [], [], []), 0.0
    for k in range(len(shards)):
        t = store.read(k)
        cpu += float(t["cpu_s"][0])
        data.causal = bool(t["causal"][0])
        for i, n in enumerate(t["lengths"].tolist()):
            data.queries.append(t[f"q/{i}"])
            data.keys.append(t[f"k/{i}"])
            data.edges.append(t[f"e/{i}"])
            data.lengths.append(int(n))
    store.remove()
    if stats is not None:
        stats.update(shards=len(shards), shard_size=size, worker_cpu_seconds=round(cpu, 1))
    log.info("extracted %d inputs in %d shards, %.1f worker CPU seconds", len(data), len(shards),
             cpu)  # fmt: skip
    return data
