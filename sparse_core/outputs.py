"""What a run of the entmax transformer yields, the model's shape, and α's accepted forms.

:class:`RunOutput` carries one analysed text (definitions §1: queries and keys as they enter the
scores, the values, entmax probabilities P in float32 held sparse for long texts
(:mod:`sparse_core.sparse_probs`), the graph G = P > 0, the final hidden states); its
:meth:`RunOutput.scores` recomputes the model's own scores from them. :class:`ModelConfig` is the
shape of a loaded model. :func:`normalize_alpha` checks α: one value, one per head, or one per
(layer, head).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from .errors import SparsescopeError
from .sparse_probs import SparseProbs

AlphaLike = float | Sequence[float] | Sequence[Sequence[float]] | Tensor

#: α's range (definitions §1: 1 is softmax, 2 sparsemax) and the α of an analysis nobody chose: the
#: one definition the app's check (app/engine/request.py) and the page's view (view_schema) read.
ALPHA_MIN, ALPHA_MAX = 1, 2
DEFAULT_ALPHA = 1.5


@dataclass(frozen=True)
class ModelConfig:
    """The shape of a loaded model. Other attributes fall through to transformers' config
    (``model.config.intermediate_size`` is ``model.net.config.intermediate_size``)."""

    model_type: str
    num_layers: int
    num_heads: int
    num_kv_heads: int  # key/value heads (fewer than num_heads under grouped-query attention)
    head_dim: int
    hidden_size: int
    max_positions: int  # the token limit: the model's positions capped by max_tokens
    is_decoder: bool
    vocab_size: int
    pad_token_id: int
    hf: object = field(default=None, repr=False, compare=False)

    def __getattr__(self, name: str):
        if name.startswith("_") or name == "hf":
            raise AttributeError(name)
        return getattr(self.hf, name)


@dataclass
class RunOutput:
    """Everything one analysed text yields. Tensors live on the CPU, float32."""

    text: str
    tokens: list[str]
    offsets: list[tuple[int, int]]
    special: list[bool]
    input_ids: list[int]
    queries: Tensor  # (L, H, n, d_head), as they enter the scores (after rotary)
    keys: Tensor  # (L, H, n, d_head), one per query head (GQA: expanded)
    #: P of every head, dense for small n, else CSR (:class:`~sparse_core.sparse_probs.
    #: SparseProbs`); read it per head (``attn.head(layer, head)``) or through the
    #: ``PredictContext`` accessors. :attr:`probs` / :attr:`graph` densify it (small n only).
    attn: SparseProbs
    hidden: Tensor  # (n, d_model): final hidden states
    alpha: float | Tensor = 1.5
    causal: bool = False
    truncated: bool = False
    #: the text's tokens without specials, and the first one in this output (a window)
    total_tokens: int | None = None
    window_start: int = 0
    extra: dict = field(default_factory=dict)
    display: list[str] = field(default_factory=list)  # tokens as a person reads them
    continuation: list[bool] = field(default_factory=list)  # continues the previous word
    model_id: str = ""
    scaling: Tensor | None = None  # (L,) the score factor of each layer (default 1/√d_head)
    softcap: float | None = None  # logit cap c of S = c·tanh(S/c) (Gemma-2), else None
    #: (L, H, n, d_head) the values P multiplies, one per query head (GQA: expanded); None
    #: where a run did not record them (what a miss costs: ``metrics.output_error``)
    values: Tensor | None = None

    @property
    def n(self) -> int:
        return len(self.tokens)

    @property
    def layers(self) -> int:
        return self.attn.L

    @property
    def heads(self) -> int:
        return self.attn.H

    @property
    def probs(self) -> Tensor:
        """(L, H, n, n) float32 P, dense: the store itself for small n, else densified once
        (refused above ``sparse_probs.DENSIFY_MAX_BYTES``; read long runs per head)."""
        return self.attn.dense()

    @property
    def graph(self) -> Tensor:
        """(L, H, n, n) bool G = P > 0, dense (computed once; small n, as :attr:`probs`)."""
        return self.attn.dense_graph()

    def alpha_table(self) -> Tensor:
        """The α each head ran at, as an (L, H) float32 table (``alpha`` may be one value)."""
        if isinstance(self.alpha, Tensor):
            return self.alpha.float().reshape(self.layers, self.heads).clone()
        return torch.full((self.layers, self.heads), float(self.alpha))

    @property
    def valid(self) -> Tensor:
        """The valid region V (n, n): all pairs, or j <= i when causal (diagonal included)."""
        full = torch.ones(self.n, self.n, dtype=torch.bool)
        return full.tril() if self.causal else full

    def scores(self, layer: int | None = None) -> Tensor:
        """The model's own scores S before masking: (L, H, n, n), or (H, n, n) for one layer."""
        d = self.queries.shape[-1]
        scale = self.scaling if self.scaling is not None else torch.full((self.layers,), d**-0.5)
        if layer is None:
            s = (self.queries @ self.keys.transpose(-1, -2)) * scale.view(-1, 1, 1, 1)
        else:
            s = (self.queries[layer] @ self.keys[layer].transpose(-1, -2)) * scale[layer]
        if self.softcap is not None:
            s = torch.tanh(s / self.softcap) * self.softcap
        return s


def normalize_alpha(alpha: AlphaLike, layers: int, heads: int) -> float | Tensor:
    """Validate α: a float, H per-head values, or an (L, H) table; all in [1, 2]."""
    if isinstance(alpha, bool):
        raise SparsescopeError(f"alpha must be a number in [1, 2], got {alpha!r}", field="alpha")
    if isinstance(alpha, int | float):
        a = float(alpha)
        if not math.isfinite(a) or not 1.0 <= a <= 2.0:
            raise SparsescopeError(f"alpha must be in [1, 2], got {alpha}", field="alpha")
        return a
    try:
        t = torch.as_tensor(alpha, dtype=torch.float32).cpu()
    except (TypeError, ValueError, RuntimeError):
        raise SparsescopeError(
            f"alpha must be a number, {heads} per-head values or a ({layers}, {heads}) table",
            field="alpha",
        ) from None
    if t.dim() == 1 and t.numel() == heads:
        t = t[None].expand(layers, heads)
    if tuple(t.shape) != (layers, heads):
        raise SparsescopeError(
            f"a per-head alpha must have {heads} values (one per head) or shape "
            f"({layers}, {heads}) (per layer and head), got shape {tuple(t.shape)}",
            field="alpha",
        )
    if not torch.isfinite(t).all() or (t < 1).any() or (t > 2).any():
        raise SparsescopeError("every alpha must be in [1, 2]", field="alpha")
    if (t == t.flatten()[0]).all():
        return float(t.flatten()[0])
    return t.contiguous()
