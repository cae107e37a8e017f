"""Today's learned selectors (definitions §12): DeepSeek's lightning indexer, SeerAttention's gate.

Both are small networks trained (:mod:`sparse_core.selectors_fit`) to predict where the exact
entmax attention P of the model goes, then used to keep a few keys (or key blocks) per query.
This module holds their weights on disk (:class:`Selector`), the per-text inputs the methods
read (:class:`IndexerInput`, :class:`SeerInput`, made once per text by
``PredictContext.from_run``) and the scores the masks are cut from.

**indexer** (DeepSeek-V3.2-Exp, "DeepSeek Sparse Attention"; reference code
deepseek-ai/DeepSeek-V3.2-Exp, inference/model.py, class ``Indexer``): per layer, H_I small heads
of width d_I. Query token t gives q^I_tj (j = 1..H_I) and a weight w_tj, key token s one shared
key k^I_s (LayerNorm'd, as the reference's ``k_norm``); the index score is::

    I_ts = Σ_j w_tj · ReLU(q^I_tj · k^I_s) · H_I^(-1/2) · d_I^(-1/2)

(the reference's ``weights_proj(x) * n_heads ** -0.5`` and ``softmax_scale``), and each query
keeps its top-k keys. The mask is the same for every head of the layer (the reference shares
one index across its heads). Differences from the reference, all said in docs/methods.md:

- input: the reference reads the layer's hidden states x (keys, weights) and the query latent
  (queries); here the query side reads the layer's queries of all heads concatenated (n, H·d)
  and the key side its keys, which are affine maps of the layer input x, so nothing beyond the
  recorded run is needed (sparsescope records queries and keys, not hidden states);
- no rotary part, no Hadamard rotation and no FP8 (precision tricks of the kernel; the model
  here has absolute positions, already in x);
- the scores are computed in float64 from float32 features (:func:`index_scores`), so that the
  page's order (sent by the server) and the Pareto engine's masks agree to the bit.

**seer** (SeerAttention, Gao et al. 2024; reference code microsoft/SeerAttention,
seer_attn/attn_gate.py ``AttnGate`` / ``MultiHeadLinear``, and the gate loss in
seer_attn/llama/modeling_llama_seerattn.py): per head, Q and K are pooled in blocks of B tokens
(average and max, concatenated: the reference's ``Qavgmax_Kavgmax`` gate type), each through a
per-head linear map (2·d → h, no bias, as ``MultiHeadLinear``), and the gate score of query
block a and key block b is ``q̃_a · k̃_b / √h`` (causal: key blocks after a are −∞, the
reference's block mask). Each query block keeps its top-k key blocks (ties to the lower block).
Differences: no RoPE on the pooled blocks (absolute positions); one gate serves every block size
of the slider (trained on B = 16, 32 and 64 together); the threshold variant is not offered.

Weights on disk: ``<kind>-<model>-a<alpha>.safetensors`` (float16 tensors, loaded as float32)
beside ``<kind>-<model>-a<alpha>.json`` (metadata: sizes, training, held-out figures), in the
same folder as the model's Sparsefinder artefact; ``sparsefinder.load_artefact`` attaches the
ones fitted for the same model and α (``Artefact.learned``). Shipped for the default model at
α = 1.5 in ``sparse_core/data/``.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from .errors import ArtefactError

FORMAT = "sparsescope-selector"
FORMAT_VERSION = 1
KINDS = ("indexer", "seer")
#: tensors each kind must have, with their leading dims: L = layers, H = heads
TENSORS = {
    "indexer": ("wq", "bq", "wk", "bk", "k_gain", "k_bias", "ww", "bw"),
    "seer": ("wq", "wk"),
}
LN_EPS = 1e-5


@dataclass
class Selector:
    """A fitted indexer or AttnGate for one model and α: its tensors (float32) and metadata."""

    kind: str
    model_id: str
    alpha: float
    tensors: dict[str, Tensor]
    meta: dict = field(default_factory=dict)

    @property
    def layers(self) -> int:
        return self.tensors["wq"].shape[0]

    def check_model(self, layers: int, heads: int, head_dim: int) -> None:
        """Raise :class:`ArtefactError` unless the selector fits a model of this shape."""
        wq = self.tensors["wq"]
        if self.kind == "indexer":
            ok = wq.shape[0] == layers and wq.shape[1] == heads * head_dim
        else:
            ok = tuple(wq.shape[:3]) == (layers, heads, 2 * head_dim)
        if not ok:
            raise ArtefactError(
                f"the {self.kind} has weights of shape {tuple(wq.shape)}, which do not fit a "
                f"model of {layers} layers x {heads} heads of dim {head_dim}"
            )


def model_slug(model_id: str) -> str:
    """The model's part of an artefact's file name: ``minilm`` for the default model, else the
    id's last part, lower case, other characters than ``a-z0-9._-`` as ``-``."""
    from .sources import DEFAULT_MODEL_ID

    slug = "minilm" if model_id == DEFAULT_MODEL_ID else model_id.rstrip("/").split("/")[-1]
    return re.sub(r"[^a-z0-9._-]+", "-", slug.lower()).strip("-") or "model"


def selector_name(kind: str, model_id: str, alpha: float) -> str:
    """``<kind>-<model>-a<alpha>``: named as the Sparsefinder artefact, with the kind's prefix."""
    return f"{kind}-{model_slug(model_id)}-a{float(alpha):g}"


def is_selector_file(name: str) -> bool:
    """Whether a file name in an artefact folder is a selector's (not a Sparsefinder artefact)."""
    return any(name.startswith(f"{k}-") for k in KINDS)


def save_selector(sel: Selector, folder: str | Path) -> tuple[Path, Path]:
    """Write ``<folder>/<name>.safetensors`` (float16) and ``.json``; returns the two paths."""
    from safetensors.torch import save_file

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    base = out / selector_name(sel.kind, sel.model_id, sel.alpha)
    head = {"format": FORMAT, "kind": sel.kind, "model_id": sel.model_id, "alpha": sel.alpha}
    tensors = {k: v.to(torch.float16).contiguous() for k, v in sorted(sel.tensors.items())}
    st, js = Path(f"{base}.safetensors"), Path(f"{base}.json")
    save_file(tensors, str(st), metadata={FORMAT: json.dumps(head, sort_keys=True)})
    meta = {**sel.meta, **head, "format_version": FORMAT_VERSION, "stored_as": "float16"}
    js.write_text(json.dumps(meta, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    return st, js


def load_selector(path: str | Path) -> Selector:
    """Load ``<base>.safetensors`` + ``<base>.json`` (``path``: either file or the base)."""
    from safetensors.torch import load as load_bytes

    s = str(path)
    for ext in (".safetensors", ".json"):
        if s.endswith(ext):
            s = s[: -len(ext)]
    st, js = Path(f"{s}.safetensors"), Path(f"{s}.json")
    try:
        raw, text = st.read_bytes(), js.read_text(encoding="utf-8")
    except OSError as exc:
        raise ArtefactError(f"cannot read selector {st}: {exc.strerror}") from None
    try:
        tensors = {k: v.float() for k, v in load_bytes(raw).items()}
        meta = json.loads(text)
        kind, model_id, alpha = str(meta["kind"]), str(meta["model_id"]), float(meta["alpha"])
    except Exception as exc:  # safetensors and json raise their own types
        raise ArtefactError(f"selector {st} is corrupt or incomplete ({exc})") from None
    if kind not in KINDS or any(t not in tensors for t in TENSORS[kind]):
        raise ArtefactError(f"selector {st} lacks the tensors of a {kind!r} selector")
    return Selector(kind, model_id, alpha, tensors, meta)


def find_selectors(folder, model_id: str, alpha: float) -> dict[str, Selector]:
    """The selectors in ``folder`` (a Path or an importlib Traversable) fitted for this model
    and α, by kind."""
    found: dict[str, Selector] = {}
    for kind in KINDS:
        name = selector_name(kind, model_id, alpha)
        st = folder.joinpath(name + ".safetensors")
        if st.is_file() and folder.joinpath(name + ".json").is_file():
            sel = load_selector(Path(str(st)))
            if sel.model_id == model_id and abs(sel.alpha - float(alpha)) <= 1e-9:
                found[kind] = sel
    return found


# ----------------------------------------------------------------------------- initial weights


def init_indexer(layers: int, width: int, heads: int = 2, dim: int = 16, seed: int = 0) -> dict:
    """An indexer's initial weights, as ``nn.Linear`` (U(±1/√fan_in), biases 0) and the
    LayerNorm (gain 1, bias 0): ``width`` = H·d inputs, ``heads`` = H_I, ``dim`` = d_I."""
    gen = torch.Generator().manual_seed(seed)

    def lin(*shape):
        return (torch.rand(*shape, generator=gen) * 2 - 1) / math.sqrt(width)

    L = layers
    return {
        "wq": lin(L, width, heads * dim), "bq": torch.zeros(L, heads * dim),
        "wk": lin(L, width, dim), "bk": torch.zeros(L, dim),
        "k_gain": torch.ones(L, dim), "k_bias": torch.zeros(L, dim),
        "ww": lin(L, width, heads), "bw": torch.zeros(L, heads),
    }  # fmt: skip


def init_seer(layers: int, heads: int, head_dim: int, dim: int = 16, seed: int = 0) -> dict:
    """An AttnGate's initial weights: per head wq, wk (2·d -> h), U(±1/√(2d)) as ``nn.Linear``."""
    gen = torch.Generator().manual_seed(seed)

    def lin():
        shape = (layers, heads, 2 * head_dim, dim)
        return (torch.rand(*shape, generator=gen) * 2 - 1) / math.sqrt(2 * head_dim)

    return {"wq": lin(), "wk": lin()}


# ----------------------------------------------------------------------------- the indexer


def layer_features(x: Tensor) -> Tensor:
    """(…, L, H, n, d) queries or keys -> (…, L, n, H·d): each token's heads side by side."""
    return x.movedim(-3, -2).flatten(-2)


def indexer_project(t: dict[str, Tensor], q: Tensor, k: Tensor, heads: int):
    """The indexer's small vectors from a run's queries and keys (L, H, n, d), float32, torch
    (differentiable: the fit uses it too): q^I (L, n, H_I, d_I), k^I (L, n, d_I) after
    LayerNorm, w (L, n, H_I) with the reference's H_I^(-1/2) · d_I^(-1/2) folded in."""
    xq, xk = layer_features(q.float()), layer_features(k.float())  # (L, n, D)
    d_i = t["wk"].shape[-1]
    qi = torch.einsum("lnd,lde->lne", xq, t["wq"]) + t["bq"][:, None]
    qi = qi.unflatten(-1, (heads, d_i))
    ki = torch.einsum("lnd,lde->lne", xk, t["wk"]) + t["bk"][:, None]
    ki = torch.nn.functional.layer_norm(ki, (d_i,), eps=LN_EPS)
    ki = ki * t["k_gain"][:, None] + t["k_bias"][:, None]
    w = torch.einsum("lnd,lde->lne", xq, t["ww"]) + t["bw"][:, None]
    return qi, ki, w * (heads**-0.5 * d_i**-0.5)


def index_logits(qi: Tensor, ki: Tensor, w: Tensor) -> Tensor:
    """I (…, n, n) from q^I (…, n, H_I, d_I), k^I (…, n, d_I), w (…, n, H_I), torch (the fit)."""
    dots = torch.einsum("...tjd,...sd->...tjs", qi, ki)
    return (w[..., None] * torch.relu(dots)).sum(-2)


@dataclass
class IndexerInput:
    """One text's indexer vectors (float32): q (L, n, H_I, d_I), k (L, n, d_I), w (L, n, H_I)."""

    q: Tensor
    k: Tensor
    w: Tensor

    @classmethod
    def of(cls, sel: Selector, queries: Tensor, keys: Tensor) -> IndexerInput:
        heads = sel.tensors["ww"].shape[-1]
        with torch.inference_mode():
            q, k, w = indexer_project(sel.tensors, queries, keys, heads)
        return cls(q.contiguous(), k.contiguous(), w.contiguous())

    def select(self, ls: slice, hs: slice) -> IndexerInput:  # per layer: every head shares it
        return IndexerInput(self.q[ls], self.k[ls], self.w[ls])

    @staticmethod
    def cat(parts: list[IndexerInput]) -> IndexerInput:
        return IndexerInput(*(torch.cat([getattr(p, a) for p in parts]) for a in ("q", "k", "w")))


def index_scores(inp: IndexerInput, layer: int, causal: bool) -> np.ndarray:
    """(n, n) float64: I_ts of one layer (module docstring), causal keys s > t at −∞.

    From the float32 vectors in float64, head j = 0, 1, … added in order (one BLAS product per
    head: the same numbers whether a layer is scored alone or with others)."""
    q = inp.q[layer].numpy().astype(np.float64)  # (n, H_I, d_I)
    k = inp.k[layer].numpy().astype(np.float64)  # (n, d_I)
    w = inp.w[layer].numpy().astype(np.float64)  # (n, H_I)
    n = k.shape[0]
    out = np.zeros((n, n))
    for j in range(q.shape[1]):
        out += w[:, j, None] * np.maximum(q[:, j] @ k.T, 0.0)
    if causal:
        out[~np.tri(n, dtype=bool)] = -np.inf
    return out


# ----------------------------------------------------------------------------- the AttnGate


def pool_blocks(x: Tensor, block: int) -> Tensor:
    """(…, n, d) -> (…, T, 2d): each block's mean and max (the last block ragged), side by side."""
    n = x.shape[-2]
    T = math.ceil(n / block)
    pad = T * block - n
    xs = torch.nn.functional.pad(x, (0, 0, 0, pad))
    mean = xs.unflatten(-2, (T, block)).sum(-2)
    sizes = torch.full((T,), float(block), dtype=x.dtype)
    sizes[-1] = n - (T - 1) * block
    mean = mean / sizes[:, None]
    xm = torch.nn.functional.pad(x, (0, 0, 0, pad), value=-torch.inf)
    mx = xm.unflatten(-2, (T, block)).amax(-2)
    return torch.cat([mean, mx], dim=-1)


def gate_logits(wq: Tensor, wk: Tensor, q: Tensor, k: Tensor, block: int) -> Tensor:
    """Gate scores (…, T, T) = pool(Q) Wq · (pool(K) Wk)ᵀ / √h, torch (the fit and the methods):
    q, k (…, n, d), wq, wk (…, 2d, h) broadcast over the leading dims."""
    qg = pool_blocks(q.float(), block) @ wq
    kg = pool_blocks(k.float(), block) @ wk
    return (qg @ kg.transpose(-1, -2)) * wq.shape[-1] ** -0.5


@dataclass
class SeerInput:
    """The AttnGate weights of the heads of a context: wq, wk (L, H, 2d, h) float32."""

    wq: Tensor
    wk: Tensor

    @classmethod
    def of(cls, sel: Selector) -> SeerInput:
        return cls(sel.tensors["wq"], sel.tensors["wk"])

    def select(self, ls: slice, hs: slice) -> SeerInput:
        return SeerInput(self.wq[ls, hs], self.wk[ls, hs])

    @staticmethod
    def cat(parts: list[SeerInput]) -> SeerInput:
        return SeerInput(torch.cat([p.wq for p in parts]), torch.cat([p.wk for p in parts]))


def seer_gate(inp: SeerInput, q: np.ndarray, k: np.ndarray, layer: int, head: int, block: int,
              causal: bool) -> np.ndarray:  # fmt: skip
    """(T, T) float32 gate of one head (its queries and keys (n, d)), causal future blocks −∞."""
    with torch.inference_mode():
        g = gate_logits(inp.wq[layer, head], inp.wk[layer, head], torch.from_numpy(q),
                        torch.from_numpy(k), block).numpy()  # fmt: skip
    if causal:
        g = np.where(np.tri(g.shape[0], dtype=bool), g, np.float32(-np.inf))
    return g


def inputs_for(artefact, queries: Tensor, keys: Tensor) -> dict:
    """``PredictContext.learned`` of one run: the inputs of each selector the artefact carries."""
    out: dict = {}
    for kind, sel in (getattr(artefact, "learned", None) or {}).items():
        L, H, _, d = queries.shape
        sel.check_model(L, H, d)
        out[kind] = IndexerInput.of(sel, queries, keys) if kind == "indexer" else SeerInput.of(sel)
    return out
