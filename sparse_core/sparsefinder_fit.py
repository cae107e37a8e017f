"""Fitting Sparsefinder (definitions §3): graph extraction, the hinge loss, batched training,
k-means.

:func:`fit_artefact` runs the whole fit: extract Q, K, G of every head from the entmax model on the
inputs (:func:`extract`), train the 72 projections at once as one parameter tensor W (L, H, d, r)
(:func:`train_projections`), centre b, fit k-means centroids for every B of the grid
(:func:`kmeans`), and evaluate on the held-out inputs (:func:`evaluate`). See
:mod:`sparse_core.sparsefinder` for the math; the choices made here:

- Adam (lr 1e-3) on W only (b gets no gradient: it cancels in q̃ − k̃); gradient clipping to norm
  1.0 *per head* (each head is an independent problem; a global norm would let one head's large
  gradient shrink every other head's step). The objective is the sum over heads of each head's
  mean loss, so each head gets exactly its own gradient; the reported loss is the mean over heads.
- One optimiser step per ``batch_size`` inputs (default 1), inputs shuffled every epoch.
- Negatives: for every valid query, |Pos_i| keys drawn uniformly without replacement from its
  valid non-edges (:func:`sample_negatives`), redrawn at every step; the
  validation loss uses a fixed draw (seed + 1) so that losses are comparable.
- W starts as U(−1/√d, 1/√d) (as ``nn.Linear``); b = −mean(x W) over the training queries and keys.
- k-means per (layer, head), batched over heads: k-means++ init, ``restarts`` runs (default 3),
  Lloyd iterations until no assignment changes (at most ``max_iter`` = 30), the run with the
  lowest inertia kept per head; ties in assignment go to the lower centroid index; an empty
  cluster keeps its previous centroid. Fitted on at most ``kmeans_points`` (4096) points per
  head drawn uniformly from the union of the projected training queries and keys.
- Everything draws from ``torch.Generator`` s seeded from ``seed``: the same arguments give the
  same artefact bytes on the same machine (thread count included).

The graphs are stored as edge lists (int32 flat indices) and the loss is computed on the edges
only (O(|Pos| + |Neg|) per head, no n x n tensors); queries and keys stay float32.
"""

from __future__ import annotations

import datetime as _dt
import logging
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor
from tqdm.auto import tqdm

from . import __version__
from .corpus import split_indices
from .errors import SparsescopeError
from .metrics import aggregate, recall, sparsity
from .sparsefinder import (
    CLUSTER_COUNTS,
    DISTANCE_THRESHOLDS,
    KMEANS_TOP_K,
    REFERENCE_THRESHOLD,
    Artefact,
    sq_distances,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FitConfig:
    """Hyper-parameters of a fit (definitions §3 values by default)."""

    rank: int = 4
    epochs: int = 3
    lr: float = 1e-3
    margin: float = 1.0  # ω
    grad_clip: float = 1.0
    batch_size: int = 1
    valid_fraction: float = 0.2
    seed: int = 0
    cluster_counts: tuple[int, ...] = CLUSTER_COUNTS
    kmeans_restarts: int = 3
    kmeans_max_iter: int = 30
    kmeans_points: int = 4096
    reference_threshold: float = REFERENCE_THRESHOLD
    extract_batch: int = 2


@dataclass
class GraphData:
    """Per input: queries, keys (L, H, n, d) float32 and G as the sorted flat indices of its edges
    in (L, H, n, n) (int32; ~1.5 MB per 512-token input for 72 heads instead of 19 MB of bools)."""

    queries: list[Tensor]
    keys: list[Tensor]
    edges: list[Tensor]
    lengths: list[int]
    causal: bool = False  # a decoder's graphs: the valid region is j <= i

    def __len__(self) -> int:
        return len(self.lengths)

    def graph(self, i: int) -> Tensor:
        """G of input i, (L, H, n, n) bool."""
        L, H, n, _ = self.queries[i].shape
        g = torch.zeros(L * H * n * n, dtype=torch.bool)
        return g.index_fill_(0, self.edges[i].long(), True).view(L, H, n, n)

    def positive_pairs(self, idx: Sequence[int] | None = None) -> int:
        idx = range(len(self)) if idx is None else idx
        return int(sum(self.edges[i].numel() for i in idx))


def extract(
    model, texts: Sequence[str], alpha: float = 1.5, *, batch_size: int = 2, progress: bool = False
) -> GraphData:
    """Run the entmax model on every text and keep Q, K and G's edge list (bidirectional for
    an encoder; a decoder is always causal)."""
    data = GraphData([], [], [], [], causal=bool(model.config.is_decoder))
    bar = tqdm(total=len(texts), desc="extracting graphs", unit="input", disable=not progress)
    for s in range(0, len(texts), batch_size):
        for out in model.run_batch(list(texts[s : s + batch_size]), alpha=alpha, causal=False):
            if out.layers * out.heads * out.n * out.n >= 2**31:
                raise SparsescopeError("input too large for int32 edge indices")
            data.queries.append(out.queries.float().clone())
            data.keys.append(out.keys.float().clone())
            a, i, j, _ = out.attn.edges()  # sorted: the flat (L·H, n, n) order
            flat = torch.from_numpy((a * out.n + i) * out.n + j)
            data.edges.append(flat.to(torch.int32))
            data.lengths.append(out.n)
        bar.update(min(batch_size, len(texts) - s))
    bar.close()
    return data


def _negative_edges(g: Tensor, counts: Tensor, generator: torch.Generator | None) -> Tensor:
    """Flat indices into g (R, n) bool of min(counts[row], #non-edges) uniform non-edges per row.

    32 keys per row are drawn uniformly with replacement and the first ``counts`` distinct
    non-edges among them are kept (sequential rejection sampling: a uniform subset); rows where
    that falls short draw afresh as the ``counts`` smallest of i.i.d. U(0, 1) values over their
    non-edges (also uniform). The first path is ~10x cheaper than ranking every row's n keys.
    """
    R, n = g.shape
    C = min(n, 32)
    cand = torch.randint(n, (R, C), generator=generator)
    ok = ~g.gather(1, cand)
    srt, order = torch.sort(cand, dim=1, stable=True)
    first = torch.ones_like(ok)  # the first occurrence of each key in draw order
    first.scatter_(1, order[:, 1:], srt[:, 1:] != srt[:, :-1])
    ok &= first
    take = ok & (ok.cumsum(1) <= counts[:, None])
    short = take.sum(1) < counts  # too few distinct non-edges drawn: these rows draw afresh
    take &= ~short[:, None]
    r, c = take.nonzero(as_tuple=True)
    flat = [r * n + cand[r, c]]
    short = short.nonzero().flatten()
    if short.numel():
        u = torch.rand(short.numel(), n, generator=generator).masked_fill_(g[short], 2.0)
        k = min(n, int(counts[short].max()))
        vals, idx = u.topk(k, dim=1, largest=False, sorted=True)
        keep = (torch.arange(k) < counts[short, None]) & (vals < 2.0)
        r2, c2 = keep.nonzero(as_tuple=True)
        flat.append(short[r2] * n + idx[r2, c2])
    return torch.cat(flat)


def sample_negatives(pos: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """Neg_i: min(|Pos_i|, #non-edges) keys drawn uniformly without replacement from the
    non-edges of each query i (definitions §3). pos (..., n, n) bool -> (..., n, n) bool,
    disjoint."""
    n = pos.shape[-1]
    rows = pos.reshape(-1, n)
    idx = _negative_edges(rows, rows.sum(-1), generator)
    return torch.zeros(pos.numel(), dtype=torch.bool).index_fill_(0, idx, True).view(pos.shape)


def _edge_distances(q: Tensor, k: Tensor, idx: Tensor, n: int) -> tuple[Tensor, Tensor]:
    """For flat indices into (P, n, n): the query row in (P * n) and ‖q̃_i − k̃_j‖² per edge."""
    row = idx // n
    krow = (idx // (n * n)) * n + idx % n
    return row, ((q[row] - k[krow]) ** 2).sum(-1)


def edge_hinge_loss(
    qp: Tensor, kp: Tensor, pos_idx: Tensor, neg_idx: Tensor, margin: float = 1.0
) -> Tensor:
    """:func:`hinge_loss` from flat edge indices into (..., n, n): O(|Pos| + |Neg|), no n x n."""
    *lead, n, r = qp.shape
    q, k = qp.reshape(-1, r), kp.reshape(-1, r)  # (P * n, r)
    pos_idx, neg_idx = pos_idx.long(), neg_idx.long()
    rp, dp = _edge_distances(q, k, pos_idx, n)
    rn, dn = _edge_distances(q, k, neg_idx, n)
    s = torch.zeros(q.shape[0], dtype=qp.dtype).index_add(0, rp, dp).index_add(0, rn, -dn)
    return torch.relu(margin + s).view(*lead, n).sum(-1) / n


def hinge_loss(qp: Tensor, kp: Tensor, pos: Tensor, neg: Tensor, margin: float = 1.0) -> Tensor:
    """Σ_i max(0, ω + Σ_{j∈Pos_i} ‖q̃_i − k̃_j‖² − Σ_{j∈Neg_i} ‖q̃_i − k̃_j‖²) / n (definitions §3).

    qp, kp (..., n, r) projected queries and keys of one text per leading index; pos, neg
    (..., n, n) bool. Every query of the text is valid. Returns (...) (e.g. (L, H) per head).
    """
    idx = [m.flatten().nonzero().flatten() for m in (pos, neg)]
    return edge_hinge_loss(qp, kp, idx[0], idx[1], margin)


def _text_loss(data: GraphData, i: int, W: Tensor, margin: float, gen) -> Tensor:
    """Loss (L, H) of input i under projection W, with fresh negatives."""
    L, H, n, _ = data.queries[i].shape
    g = data.graph(i)
    if data.causal:  # future keys are not valid non-edges: never drawn as negatives
        g = g | torch.ones(n, n, dtype=torch.bool).triu_(1)
    g = g.view(-1, n)
    counts = torch.bincount(data.edges[i].long() // n, minlength=L * H * n)
    neg = _negative_edges(g, counts, gen)
    qp, kp = data.queries[i] @ W, data.keys[i] @ W  # (L, H, n, r)
    return edge_hinge_loss(qp, kp, data.edges[i], neg, margin)


def _clip_per_head(grad: Tensor, max_norm: float) -> None:
    norms = grad.flatten(2).norm(dim=2)  # (L, H)
    grad.mul_((max_norm / (norms + 1e-6)).clamp(max=1.0)[:, :, None, None])


def init_weights(data: GraphData, cfg: FitConfig) -> Tensor:
    """W (L, H, d, r) ~ U(−1/√d, 1/√d) from ``torch.Generator().manual_seed(cfg.seed)``."""
    L, H, _, d = data.queries[0].shape
    gen = torch.Generator().manual_seed(cfg.seed)
    return (torch.rand(L, H, d, cfg.rank, generator=gen) * 2 - 1) / math.sqrt(d)


def train_projections(
    data: GraphData, train_idx: Sequence[int], cfg: FitConfig, *, progress: bool = False
) -> tuple[Tensor, list[float]]:
    """Train W (L, H, d, r) on the training inputs; returns W and the mean loss of each epoch."""
    if not train_idx:
        raise SparsescopeError("no training inputs: give more text or a smaller valid fraction")
    W = init_weights(data, cfg).requires_grad_()
    gen = torch.Generator().manual_seed(cfg.seed + 3)  # epoch order and negatives
    opt = torch.optim.Adam([W], lr=cfg.lr)
    bs = max(1, cfg.batch_size)
    steps = math.ceil(len(train_idx) / bs)
    bar = tqdm(total=cfg.epochs * steps, desc="training", unit="step", disable=not progress)
    history = []
    for epoch in range(cfg.epochs):
        perm = torch.randperm(len(train_idx), generator=gen).tolist()
        total = 0.0
        for s in range(0, len(perm), bs):
            batch = [train_idx[p] for p in perm[s : s + bs]]
            per = torch.stack([_text_loss(data, i, W, cfg.margin, gen) for i in batch])  # (B,L,H)
            opt.zero_grad(set_to_none=True)
            per.mean(0).sum().backward()
            _clip_per_head(W.grad, cfg.grad_clip)
            opt.step()
            total += float(per.detach().mean(dim=(1, 2)).sum())
            bar.update(1)
            bar.set_postfix(epoch=epoch + 1, loss=f"{total / min(s + bs, len(perm)):.3f}")
        history.append(total / len(perm))
        log.info("epoch %d: training loss %.4f", epoch + 1, history[-1])
    bar.close()
    return W.detach(), history


def validation_loss(data: GraphData, idx: Sequence[int], W: Tensor, cfg: FitConfig) -> float:
    """Mean hinge loss over the inputs ``idx`` and all heads, negatives drawn with seed + 1."""
    gen = torch.Generator().manual_seed(cfg.seed + 1)
    with torch.no_grad():
        total = sum(float(_text_loss(data, i, W, cfg.margin, gen).mean()) for i in idx)
    return total / max(1, len(idx))


def evaluate(
    data: GraphData, idx: Sequence[int], W: Tensor, thresholds: Sequence[float]
) -> tuple[list[dict], float]:
    """sf-distance (no window, no globals) at each t on the inputs ``idx``: recall and sparsity
    per head averaged over inputs, then over heads (definitions §4); and the mean gold sparsity."""
    rec: dict[float, list[Tensor]] = {t: [] for t in thresholds}
    spa: dict[float, list[Tensor]] = {t: [] for t in thresholds}
    gold = []
    with torch.no_grad():
        for i in idx:
            G = data.graph(i)
            D = sq_distances(data.queries[i] @ W, data.keys[i] @ W)  # (L, H, n, n)
            gold.append(sparsity(G, data.causal))
            for t in thresholds:
                M = D < t
                rec[t].append(recall(M, G))
                spa[t].append(sparsity(M, data.causal))
    curve = [
        {"threshold": t, "recall": aggregate(rec[t])[1], "sparsity": aggregate(spa[t])[1]}
        for t in thresholds
    ]
    return curve, aggregate(gold)[1]


# ----------------------------------------------------------------------------- k-means


def _assign(x: Tensor, c: Tensor) -> Tensor:
    """Nearest centroid of each point, (P, M, r), (P, B, r) -> (P, M): the argmin over centroids
    of ‖c‖² − 2 x·c (‖x‖² is the same for every centroid); ties go to the lower index."""
    return ((c * c).sum(-1)[:, None, :] - 2 * torch.bmm(x, c.transpose(1, 2))).argmin(-1)


def _inertia(x: Tensor, c: Tensor) -> Tensor:
    """Σ over points of the squared distance to the nearest centroid, (P,) float64."""
    d = torch.stack([((x - c[:, b, None]) ** 2).sum(-1) for b in range(c.shape[1])], -1)
    return d.min(-1).values.double().sum(-1)


def _kmeanspp(x: Tensor, k: int, gen: torch.Generator) -> Tensor:
    P, M, _ = x.shape
    rows = torch.arange(P)
    first = torch.randint(M, (P,), generator=gen)
    cents = [x[rows, first]]  # each (P, r)
    d2 = ((x - cents[0][:, None]) ** 2).sum(-1)  # (P, M)
    for _ in range(1, k):
        w = torch.where(d2.sum(-1, keepdim=True) > 0, d2, torch.ones_like(d2))
        nxt = torch.multinomial(w, 1, generator=gen)[:, 0]
        cents.append(x[rows, nxt])
        d2 = torch.minimum(d2, ((x - cents[-1][:, None]) ** 2).sum(-1))
    return torch.stack(cents, 1)  # (P, k, r)


def kmeans(
    x: Tensor,
    n_clusters: int,
    *,
    restarts: int = 3,
    max_iter: int = 30,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """Batched k-means: x (P, M, r) -> centroids (P, B, r) and inertia (P,), float32.

    k-means++ init, Lloyd until no assignment changes (per problem) or ``max_iter``; argmin ties
    go to the lower centroid index; an empty cluster keeps its centroid; best of ``restarts``
    runs per problem (the earlier run on equal inertia).
    """
    gen = generator if generator is not None else torch.Generator().manual_seed(0)
    x = x.float()
    P, M, r = x.shape
    if M < n_clusters:
        raise SparsescopeError(f"k-means needs at least {n_clusters} points, got {M}")
    best_c = best_i = None
    for _ in range(max(1, restarts)):
        c = _kmeanspp(x, n_clusters, gen)
        prev = torch.full((P, M), -1)
        live = torch.arange(P)  # problems whose assignment still changes
        for _ in range(max_iter):
            xa, ca = x[live], c[live]
            a = _assign(xa, ca)  # (P', M)
            moved = (a != prev[live]).any(-1)
            live, xa, ca, a = live[moved], xa[moved], ca[moved], a[moved]
            if live.numel() == 0:
                break
            prev[live] = a
            k = live.numel()
            sums = torch.zeros(k, n_clusters, r).scatter_add_(1, a[..., None].expand(-1, -1, r), xa)
            counts = torch.zeros(k, n_clusters).scatter_add_(1, a, torch.ones(k, M))[..., None]
            c[live] = torch.where(counts > 0, sums / counts.clamp(min=1), ca)
        inertia = _inertia(x, c)  # (P,)
        if best_c is None:
            best_c, best_i = c, inertia
        else:
            better = inertia < best_i
            best_c = torch.where(better[:, None, None], c, best_c)
            best_i = torch.where(better, inertia, best_i)
    return best_c, best_i


def _kmeans_points(data, train_idx, W, b, m, gen) -> Tensor:
    """Up to m points per head drawn uniformly from the projected training queries and keys."""
    lens = [data.lengths[i] for i in train_idx]
    total = 2 * sum(lens)
    pick = torch.randperm(total, generator=gen)[: min(m, total)].sort().values
    pts, at = [], 0
    for i, n in zip(train_idx, lens, strict=True):
        sel = pick[(pick >= at) & (pick < at + 2 * n)] - at
        both = torch.cat([data.queries[i], data.keys[i]], dim=2)  # (L, H, 2n, d)
        pts.append(both[:, :, sel] @ W + b[:, :, None])
        at += 2 * n
    return torch.cat(pts, dim=2)  # (L, H, M, r)


# ----------------------------------------------------------------------------- the whole fit


def _r(x: float) -> float:
    return float(f"{float(x):.6g}")


def _created() -> str:
    epoch = os.environ.get("SOURCE_DATE_EPOCH")  # reproducible builds convention
    when = (
        _dt.datetime.fromtimestamp(int(epoch), _dt.timezone.utc)
        if epoch
        else _dt.datetime.now(_dt.timezone.utc)
    )
    return when.replace(microsecond=0).isoformat()


def fit_artefact(
    model,
    texts: Sequence[str],
    *,
    alpha: float = 1.5,
    config: FitConfig | None = None,
    meta: dict | None = None,
    progress: bool = False,
    data: GraphData | None = None,
) -> Artefact:
    """Fit a Sparsefinder artefact for ``model`` at ``alpha`` on the model inputs ``texts``.

    ``meta`` (e.g. the corpus description) is merged into the artefact's metadata, which also
    records sizes, training and validation figures, the k-means settings, grids, seed, library
    version and creation date (``SOURCE_DATE_EPOCH`` if set, for byte-identical re-fits).
    ``data``: the graphs of ``texts`` already extracted (e.g. ``ray_engine.extract_ray``);
    None extracts them here.
    """
    cfg = config or FitConfig()
    if not texts:
        raise SparsescopeError("no inputs to fit on")
    if not 1 <= cfg.rank:
        raise SparsescopeError(f"rank must be >= 1, got {cfg.rank}")
    if data is None:
        data = extract(model, texts, alpha, batch_size=cfg.extract_batch, progress=progress)
    elif len(data) != len(texts):
        raise SparsescopeError(f"{len(data)} extracted inputs for {len(texts)} texts")
    train_idx, valid_idx = split_indices(len(texts), cfg.valid_fraction, cfg.seed)
    L, H, _, d = data.queries[0].shape
    W, history = train_projections(data, train_idx, cfg, progress=progress)

    # b = −mean(x W) over the training queries and keys (mean(x W) = mean(x) W)
    xsum = sum(data.queries[i].sum(2) + data.keys[i].sum(2) for i in train_idx)  # (L, H, d)
    ntok = 2 * sum(data.lengths[i] for i in train_idx)
    b = -torch.einsum("lhd,lhdr->lhr", xsum / ntok, W)

    gen = torch.Generator().manual_seed(cfg.seed + 2)
    pts = _kmeans_points(data, train_idx, W, b, cfg.kmeans_points, gen).flatten(0, 1)
    centroids, inertia = {}, {}
    for nb in tqdm(cfg.cluster_counts, desc="k-means", unit="B", disable=not progress):
        c, ine = kmeans(
            pts, nb, restarts=cfg.kmeans_restarts, max_iter=cfg.kmeans_max_iter, generator=gen
        )
        centroids[int(nb)] = c.view(L, H, nb, cfg.rank)
        inertia[str(nb)] = _r(ine.mean() / pts.shape[1])

    validation = None
    if valid_idx:
        thresholds = sorted({*DISTANCE_THRESHOLDS, cfg.reference_threshold})
        curve, gold = evaluate(data, valid_idx, W, thresholds)
        ref = next(p for p in curve if p["threshold"] == cfg.reference_threshold)
        validation = {
            "loss_initial": _r(validation_loss(data, valid_idx, init_weights(data, cfg), cfg)),
            "loss": _r(validation_loss(data, valid_idx, W, cfg)),
            "gold_sparsity": _r(gold),
            "reference": {
                "method": "sf-distance",
                "threshold": cfg.reference_threshold,
                "window": 0,
                "globals": False,
                "recall": _r(ref["recall"]),
                "sparsity": _r(ref["sparsity"]),
            },
            "distance_curve": [{k: _r(v) for k, v in p.items()} for p in curve],
        }
        log.info(
            "validation loss %.4f (initial %.4f); sf-distance t=%g: recall %.4f sparsity %.4f",
            validation["loss"], validation["loss_initial"], cfg.reference_threshold,
            ref["recall"], ref["sparsity"],
        )  # fmt: skip
    full_meta = {
        **(meta or {}),
        "model_id": model.model_id,
        "alpha": float(alpha),
        "rank": cfg.rank,
        "causal": data.causal,
        "shape": {"layers": L, "heads": H, "head_dim": d},
        "sizes": {
            "inputs": len(texts),
            "train_inputs": len(train_idx),
            "valid_inputs": len(valid_idx),
            "tokens": sum(data.lengths),
            "train_tokens": sum(data.lengths[i] for i in train_idx),
            "positive_pairs": data.positive_pairs(),
            "train_positive_pairs": data.positive_pairs(train_idx),
        },
        "split": {"valid_fraction": cfg.valid_fraction, "valid_inputs": valid_idx},
        "training": {
            "loss": "hinge, margin omega, |Neg_i| = |Pos_i| uniform valid non-edges "
            "(definitions §3)",
            "margin": cfg.margin,
            "optimizer": "adam",
            "lr": cfg.lr,
            "grad_clip": cfg.grad_clip,
            "grad_clip_scope": "per head",
            "epochs": cfg.epochs,
            "batch_size": cfg.batch_size,
            "init": "W ~ U(-1/sqrt(d), 1/sqrt(d)); b = -mean(xW) over training queries and keys",
            "loss_per_epoch": [_r(x) for x in history],
        },
        "validation": validation,
        "kmeans": {
            "cluster_counts": [int(x) for x in cfg.cluster_counts],
            "init": "k-means++",
            "restarts": cfg.kmeans_restarts,
            "max_iter": cfg.kmeans_max_iter,
            "points_per_head": int(pts.shape[1]),
            "points": "uniform sample of the projected training queries and keys (union)",
            "inertia_per_point": inertia,
        },
        "grids": {
            "distance_thresholds": list(DISTANCE_THRESHOLDS),
            "quantization_buckets": [int(x) for x in cfg.cluster_counts],
            "quantization_bucket_size": "b = ceil(n / B) tokens per bucket, per dimension",
            "kmeans_clusters": sorted(centroids),
            "kmeans_top_k": list(KMEANS_TOP_K),
        },
        "seed": cfg.seed,
        "version": __version__,
        "torch": torch.__version__.split("+")[0],
        "created": _created(),
    }
    return Artefact(model.model_id, float(alpha), cfg.rank, W.contiguous(), b, centroids, full_meta)
