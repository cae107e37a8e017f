"""Sparsefinder (Treviso et al. 2022; definitions §3): learned projections and three graph
predictors.

Per head (layer l, head h) a linear map ``g(x) = x W + b`` from d_head to r dims (r = 4) is
shared by queries and keys: ``q̃_i = g(q_i)``, ``k̃_j = g(k_j)``. It is trained
(:func:`sparse_core.sparsefinder_fit.fit_artefact`) so that the keys of the entmax graph G lie
close to their query, with the hinge loss of paper Eq. 7 (definitions §3) per valid query i::

    ℓ_i = max(0, ω + Σ_{j∈Pos_i} ‖q̃_i − k̃_j‖² − Σ_{j∈Neg_i} ‖q̃_i − k̃_j‖²),   ω = 1

Pos_i = G_i; Neg_i = |Pos_i| keys drawn uniformly without replacement from the valid non-edges of
i (all of them if there are fewer), redrawn at every step. Per text and head Σ_i ℓ_i / n, then the
mean over texts and heads. Predictors, each ``(..., n, r) x (..., m, r) -> (..., n, m) bool``,
batched over any leading dims (typically (L, H)):

- :func:`sf_distance`      (i, j) ∈ Ĝ iff ‖q̃_i − k̃_j‖² < t (strict);
- :func:`sf_quantization`  balanced bins per dimension, edge iff a shared bin in some dimension;
- :func:`sf_kmeans`        top-k nearest of B offline centroids, edge iff the top-k sets intersect.

Window / global add-ons and the causal mask are applied by the caller (``patterns.finish``).
The predictors have a JavaScript twin, so their tie rules are exact and written in each docstring.
Training and k-means live in :mod:`sparse_core.sparsefinder_fit`; this module holds the artefact
and the predictors.

Project choices (beyond docs/definitions.md):

- b cancels in every q̃ − k̃, so the loss does not train it; the fit sets b = −mean(x W) over the
  training queries and keys (centred coordinates for k-means and the page's scatter plots).
- Artefact on disk: ``<base>.safetensors`` (tensors ``W`` (L, H, d, r), ``b`` (L, H, r),
  ``centroids.<B>`` (L, H, B, r), float32) beside ``<base>.json`` (the metadata); the shipped one is
  ``sparse_core/data/sparsefinder-minilm-a1.5.{safetensors,json}``.
"""

from __future__ import annotations

import importlib.resources
import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor

from .errors import ArtefactError, SparsescopeError

log = logging.getLogger(__name__)

FORMAT = "sparsescope-sparsefinder"
FORMAT_VERSION = 1
SHIPPED_NAME = "sparsefinder-minilm-a1.5"
#: Sweep grids (paper §5 / App. C): distance thresholds t and bucket / cluster counts B.
DISTANCE_THRESHOLDS = (0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0)
CLUSTER_COUNTS = (2, 4, 6, 8, 10, 12, 16, 20)
KMEANS_TOP_K = (1, 2, 3)
#: The reference setting reported after a fit: sf-distance at this t, no window, no globals.
REFERENCE_THRESHOLD = 2.0


# ----------------------------------------------------------------------------- artefact


@dataclass
class Artefact:
    """A fitted Sparsefinder: per-head projections and k-means centroids for one model and α."""

    model_id: str
    alpha: float
    rank: int
    W: Tensor  # (L, H, d, r)
    b: Tensor  # (L, H, r)
    centroids: dict[int, Tensor] = field(default_factory=dict)  # B -> (L, H, B, r)
    meta: dict = field(default_factory=dict)
    #: today's learned selectors fitted for the same model and α, found beside the artefact
    #: (definitions §12, :mod:`sparse_core.selectors`): kind ("indexer", "seer") -> Selector
    learned: dict = field(default_factory=dict, repr=False)

    @property
    def layers(self) -> int:
        return self.W.shape[0]

    @property
    def heads(self) -> int:
        return self.W.shape[1]

    @property
    def head_dim(self) -> int:
        return self.W.shape[2]

    def project(self, x: Tensor) -> Tensor:
        """``x W + b`` per head: (..., L, H, n, d) -> (..., L, H, n, r), float32."""
        if x.shape[-4:-2] != self.W.shape[:2] or x.shape[-1] != self.head_dim:
            raise ArtefactError(
                f"the artefact projects (L, H, n, d) = ({self.layers}, {self.heads}, n, "
                f"{self.head_dim}) vectors, got shape {tuple(x.shape)}"
            )
        y = torch.einsum("...lhnd,lhdr->...lhnr", x.float(), self.W)
        return y + self.b[:, :, None, :]

    def check_model(self, layers: int, heads: int, head_dim: int) -> None:
        """Raise :class:`ArtefactError` unless the artefact fits a model of this shape."""
        if (self.layers, self.heads, self.head_dim) != (layers, heads, head_dim):
            raise ArtefactError(
                f"artefact has {self.layers} layers x {self.heads} heads of dim {self.head_dim}, "
                f"but the model has {layers} x {heads} of dim {head_dim}"
            )


def artefact_name(model_id: str, alpha: float) -> str:
    """File base name of an artefact: ``sparsefinder-<model>-a<alpha>`` (the default: minilm)."""
    from .selectors import model_slug

    return f"sparsefinder-{model_slug(model_id)}-a{float(alpha):g}"


def _base(path: str | Path) -> Path:
    """``x.safetensors`` / ``x.json`` / ``x`` -> ``x`` (never Path.suffix: "a1.5" has a dot)."""
    s = str(path)
    for ext in (".safetensors", ".json"):
        if s.endswith(ext):
            return Path(s[: -len(ext)])
    return Path(s)


def save_artefact(art: Artefact, path: str | Path) -> tuple[Path, Path]:
    """Write ``<path>.safetensors`` and ``<path>.json``; a directory ``path`` gets the file name
    :func:`artefact_name`. Bytes depend only on the content (sorted JSON keys, one safetensors
    metadata entry). Returns the two paths."""
    from safetensors.torch import save_file

    p = Path(path)
    base = p / artefact_name(art.model_id, art.alpha) if p.is_dir() else _base(p)
    base.parent.mkdir(parents=True, exist_ok=True)
    tensors = {"W": art.W.float().contiguous(), "b": art.b.float().contiguous()}
    for nb, c in sorted(art.centroids.items()):
        tensors[f"centroids.{int(nb)}"] = c.float().contiguous()
    head = {"format": FORMAT, "model_id": art.model_id, "alpha": art.alpha, "rank": art.rank}
    st, js = Path(f"{base}.safetensors"), Path(f"{base}.json")
    # a single metadata entry: safetensors writes several in a random order
    save_file(tensors, str(st), metadata={FORMAT: json.dumps(head, sort_keys=True)})
    meta = {**art.meta, **head, "format_version": FORMAT_VERSION}
    js.write_text(json.dumps(meta, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    return st, js


def shipped_dir():
    """The package's data folder (an importlib.resources Traversable)."""
    return importlib.resources.files("sparse_core").joinpath("data")


def _candidates(folder) -> list:
    from .selectors import is_selector_file  # the learned selectors live beside: not candidates

    return sorted(
        (
            f
            for f in folder.iterdir()
            if f.name.endswith(".safetensors") and not is_selector_file(f.name)
        ),
        key=lambda f: f.name,
    )


def _pick(folder, model_id: str | None, alpha: float | None, default: str | None):
    """The artefact base in ``folder`` that matches (model_id, alpha), else ``default``, else the
    only one; raise ArtefactError when none or an ambiguous set is found."""
    names = [f.name[: -len(".safetensors")] for f in _candidates(folder)]
    if not names:
        raise ArtefactError(f"no Sparsefinder artefact (*.safetensors + *.json) in {folder}")
    if model_id is not None and alpha is not None:
        for nm in names:
            try:
                meta = json.loads(folder.joinpath(nm + ".json").read_text())
            except (OSError, ValueError):
                continue
            if meta.get("model_id") == model_id and _same_alpha(meta.get("alpha"), alpha):
                return folder.joinpath(nm)
    if default in names:
        return folder.joinpath(default)
    if len(names) == 1:
        return folder.joinpath(names[0])
    raise ArtefactError(f"{folder} holds several artefacts ({', '.join(names)}); name one")


def _same_alpha(a, b) -> bool:
    try:
        return abs(float(a) - float(b)) <= 1e-9
    except (TypeError, ValueError):
        return False


def load_artefact(
    path: str | Path | None = None, *, model_id: str | None = None, alpha: float | None = None
) -> Artefact:
    """Load an artefact: ``path`` a base, either file of the pair, or a folder; None = shipped.

    With ``model_id`` / ``alpha`` the artefact must have been fitted for them, else
    :class:`ArtefactError` names both ("artefact ... was fitted for model X at alpha 1.5, but the
    model is Y at alpha 2.0"). A missing or corrupt file raises ArtefactError naming the path.
    """
    if path is None:
        base = _pick(shipped_dir(), model_id, alpha, SHIPPED_NAME)
    else:
        p = Path(path).expanduser()
        base = _pick(p, model_id, alpha, None) if p.is_dir() else _base(p)
    st, js = (
        base.parent.joinpath(base.name + ".safetensors"),
        base.parent.joinpath(base.name + ".json"),
    )
    art = _read(st, js)
    if model_id is not None or alpha is not None:
        want_model = art.model_id if model_id is None else model_id
        want_alpha = art.alpha if alpha is None else alpha
        if want_model != art.model_id or not _same_alpha(want_alpha, art.alpha):
            raise ArtefactError(
                f"artefact {st} was fitted for model {art.model_id} at alpha {art.alpha:g}, "
                f"but the model is {want_model} at alpha {_fmt_alpha(want_alpha)}"
            )
    from .selectors import find_selectors

    art.learned = find_selectors(base.parent, art.model_id, art.alpha)
    return art


def _fmt_alpha(a) -> str:
    try:
        return f"{float(a):g}"
    except (TypeError, ValueError):
        return "(per-head values)"


def _read(st, js) -> Artefact:
    from safetensors.torch import load as load_bytes

    try:
        raw, text = st.read_bytes(), js.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ArtefactError(f"artefact file {exc.filename or st} does not exist") from None
    except OSError as exc:
        raise ArtefactError(f"cannot read artefact {st}: {exc.strerror}") from None
    try:
        tensors = load_bytes(raw)
    except Exception as exc:  # safetensors raises its own error types
        raise ArtefactError(f"artefact {st} is not a valid safetensors file ({exc})") from None
    try:
        meta = json.loads(text)
        model_id, alpha, rank = str(meta["model_id"]), float(meta["alpha"]), int(meta["rank"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ArtefactError(f"artefact metadata {js} is corrupt or incomplete ({exc})") from None
    W, b = tensors.get("W"), tensors.get("b")
    if W is None or b is None or W.dim() != 4 or tuple(b.shape) != (*W.shape[:2], W.shape[3]):
        raise ArtefactError(f"artefact {st} lacks W (L, H, d, r) and b (L, H, r) of matching shape")
    if W.shape[3] != rank:
        raise ArtefactError(f"artefact {st}: W has rank {W.shape[3]} but {js} says {rank}")
    cents = {}
    for k, v in tensors.items():
        if k.startswith("centroids."):
            nb = int(k.split(".", 1)[1])
            if tuple(v.shape) != (W.shape[0], W.shape[1], nb, rank):
                raise ArtefactError(f"artefact {st}: {k} has shape {tuple(v.shape)}")
            cents[nb] = v
    return Artefact(model_id, alpha, rank, W, b, dict(sorted(cents.items())), meta)


# ----------------------------------------------------------------------------- predictors


def sq_distances(qp: Tensor, kp: Tensor) -> Tensor:
    """``D_ij = Σ_c (q̃_ic − k̃_jc)²``: (..., n, r) x (..., m, r) -> (..., n, m) float64.

    Computed in float64 from the given values, adding the r squared differences in dimension
    order c = 0, 1, ..., r − 1 (the JavaScript twin does the same in doubles, same bits).
    """
    q, k = qp.double(), kp.double()
    d = torch.zeros(
        torch.broadcast_shapes(q.shape[:-2], k.shape[:-2]) + (q.shape[-2], k.shape[-2]),
        dtype=torch.float64,
        device=q.device,
    )
    for c in range(q.shape[-1]):
        d += (q[..., :, None, c] - k[..., None, :, c]) ** 2
    return d


def sf_distance(qp: Tensor, kp: Tensor, t: float) -> Tensor:
    """Sparsefinder distance (paper §4.3, definitions §3): ``Ĝ = {(i, j) : ‖q̃_i − k̃_j‖² < t}``.

    qp (..., n, r), kp (..., m, r) -> (..., n, m) bool. Strictly less than t (docs/definitions.md
    §3; the paper writes ≤, which differs only on exact ties), with ‖·‖² from :func:`sq_distances`.
    """
    return sq_distances(qp, kp) < float(t)


def balanced_buckets(x: Tensor, bucket_size: int, valid: Tensor | None = None) -> Tensor:
    """Balanced bins per dimension: (..., n, r) -> (..., n, r) long bucket ids, −1 if not valid.

    For each dimension c separately, the valid tokens are ranked by x[..., c] ascending with a
    stable sort, so equal values are ranked by position (JS: ``(a, b) => x[a] - x[b] || a - b``);
    bucket = rank // bucket_size. Every bucket thus holds exactly ``bucket_size`` tokens except
    possibly the last (n_valid mod bucket_size). ``valid`` (n,) bool selects the tokens that take
    part (default all); the others get −1.
    """
    n = x.shape[-2]
    keep = torch.arange(n, device=x.device) if valid is None else valid.nonzero().flatten()
    xv = x[..., keep, :]  # (..., nv, r)
    order = torch.sort(xv, dim=-2, stable=True).indices
    ranks = torch.empty_like(order)
    ar = torch.arange(xv.shape[-2], device=x.device).view(-1, 1).expand_as(order)
    ranks.scatter_(-2, order, ar.contiguous())
    out = torch.full(x.shape, -1, dtype=torch.long, device=x.device)
    out[..., keep, :] = ranks // bucket_size
    return out


def sf_quantization(
    qp: Tensor,
    kp: Tensor,
    *,
    bucket_size: int | None = None,
    n_buckets: int | None = None,
    valid: Tensor | None = None,
) -> Tensor:
    """Sparsefinder quantization with balanced bins (paper §4.4, definitions §3).

    Queries and keys are bucketed separately per dimension by :func:`balanced_buckets` with
    b = ``bucket_size``, or b = ⌈n_valid / n_buckets⌉ when ``n_buckets`` (B) is given.
    ``(i, j) ∈ Ĝ`` iff ∃ c : bucket_q[i, c] = bucket_k[j, c] (both valid).
    qp (..., n, r), kp (..., n, r) -> (..., n, n) bool; ``valid`` (n,) bool, default all tokens.
    """
    if (bucket_size is None) == (n_buckets is None):
        raise SparsescopeError("give exactly one of bucket_size (b) and n_buckets (B)")
    n_valid = qp.shape[-2] if valid is None else int(valid.sum())
    if bucket_size is not None:
        if int(bucket_size) < 1:
            raise SparsescopeError(f"bucket_size must be >= 1, got {bucket_size}")
        b = int(bucket_size)
    else:
        if int(n_buckets) < 1:
            raise SparsescopeError(f"n_buckets must be >= 1, got {n_buckets}")
        b = max(1, math.ceil(n_valid / int(n_buckets)))
    bq, bk = balanced_buckets(qp, b, valid), balanced_buckets(kp, b, valid)
    shape = torch.broadcast_shapes(bq.shape[:-2], bk.shape[:-2]) + (qp.shape[-2], kp.shape[-2])
    m = torch.zeros(shape, dtype=torch.bool, device=qp.device)
    for c in range(qp.shape[-1]):
        m |= bq[..., :, None, c] == bk[..., None, :, c]
    ok_q, ok_k = bq[..., 0] >= 0, bk[..., 0] >= 0
    return m & ok_q[..., :, None] & ok_k[..., None, :]


def nearest_centroids(x: Tensor, centroids: Tensor, top_k: int) -> Tensor:
    """The ``top_k`` nearest centroids of every token: (..., n, r), (..., B, r) -> (..., n, k).

    Squared Euclidean distances as in :func:`sq_distances` (float64); centroids are ordered by
    distance ascending with a stable sort, so equal distances go to the lower centroid index.
    """
    nb = centroids.shape[-2]
    if not 1 <= int(top_k) <= nb:
        raise SparsescopeError(f"top_k must be in [1, {nb}] (the number of clusters), got {top_k}")
    d = sq_distances(x, centroids)  # (..., n, B)
    return torch.sort(d, dim=-1, stable=True).indices[..., : int(top_k)]


def sf_kmeans(qp: Tensor, kp: Tensor, centroids: Tensor, top_k: int = 1) -> Tensor:
    """Sparsefinder k-means (paper §4.5, definitions §3).

    Each query and key goes to its ``top_k`` nearest centroids (:func:`nearest_centroids`);
    ``(i, j) ∈ Ĝ`` iff the two top-k sets intersect (project choice: set intersection, not a
    position-wise comparison). qp (..., n, r), kp (..., m, r), centroids (..., B, r).
    """
    nb = centroids.shape[-2]

    def member(x: Tensor) -> Tensor:  # (..., n, B) 0/1 membership
        idx = nearest_centroids(x, centroids, top_k)
        z = torch.zeros(idx.shape[:-1] + (nb,), dtype=torch.float32, device=x.device)
        return z.scatter_(-1, idx, 1.0)

    return (member(qp) @ member(kp).transpose(-1, -2)) > 0
