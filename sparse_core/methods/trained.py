"""Today's learned selectors as methods (definitions §12): ``indexer`` and ``seer``.

Both need weights fitted for the model and α (``sparsescope fit --method indexer|seer``;
:mod:`sparse_core.selectors`), which ``sparsefinder.load_artefact`` attaches to the model's
artefact; without them the method is not available (like the sf-* methods without an artefact).

- ``indexer`` (DeepSeek's lightning indexer; deepseek-ai/DeepSeek-V3.2-Exp inference/model.py
  ``Indexer``): per query the k valid keys with the highest index score I_ts
  (``selectors.index_scores``, float64), ties to the lower key; one mask per layer, shared by
  its heads. k in [1, K_MAX(n)] (``oracle.k_max``: the page receives each row's order up to it),
  default min(16, K_MAX); grid k ∈ {2, 4, 8, 16, 32, 64} (k ≤ K_MAX).
- ``seer`` (SeerAttention's AttnGate; microsoft/SeerAttention seer_attn/attn_gate.py): per query
  block of B tokens the top-k key blocks by the head's gate score (``selectors.seer_gate``),
  ties to the lower block; causal: later blocks score −∞ (and the mask is ∩ V). B one of
  ``selection.BLOCK_CHOICES`` (default 32), k in [1, ⌈n / 16⌉] (default min(4, ·)); grid
  B ∈ {16, 32, 64} × k ∈ {1, 2, 4, 8} (k ≤ T).

Swept like the arena (window 0, globals off). The page receives the orders (``head_payload``):
``{"indexer": {"k_max", "order"}}`` (n × K_MAX keys) and ``{"seer": {"<B>": order}}`` (T × T
key blocks per query block), so its masks are Python's exactly.
"""

from __future__ import annotations

import numpy as np
import torch

from ..bitsets import words
from ..errors import SparsescopeError
from ..selectors import index_scores, seer_gate
from .base import ArenaMethod
from .block_scores import _dense
from .context import PredictContext
from .oracle import k_max
from .selection import (
    BLOCK_CHOICES,
    b64_ints,
    block_bits,
    block_count,
    block_counts,
    first_k_mask,
    regroup,
    stable_order,
    stable_top,
    threshold_bits,
)
from .spec import ParamSpec

INDEXER_KS = (2, 4, 8, 16, 32, 64)
SEER_BLOCKS = (16, 32, 64)
SEER_TOPK = (1, 2, 4, 8)


class _Selected(ArenaMethod):
    """A method that needs a fitted selector of kind ``self.name`` (``Artefact.learned``)."""

    needs_artefact = True
    family = "learned"

    def usable(self, artefact):
        return artefact is not None and self.name in getattr(artefact, "learned", {})

    def needs(self) -> str:
        return f"a trained {self.name} (sparsescope fit --method {self.name})"

    def runs_on(self, ctx: PredictContext) -> bool:
        return self.name in ctx.learned

    def require(self, ctx: PredictContext) -> None:
        if not self.runs_on(ctx):
            raise SparsescopeError(
                f"{self.name} needs a trained {self.name} for this model and alpha (sparsescope "
                f"fit --method {self.name}); none is loaded",
                field="method",
            )


class IndexerMethod(_Selected):
    """Lightning indexer: per query the top-k keys by the learned index score."""

    name, label = "indexer", "Lightning indexer (DeepSeek DSA, learned)"
    #: one head's sweep at n = 479 (median of 3, loaded machine): 192 ms, against sf-distance's
    #: 85, topk's 115 and sf-quantization's 26 in the same run (the float64 index scores)
    cost_rank = 15.5
    payload_empty = {"indexer": None}

    def own_params(self, n, artefact=None):
        km = k_max(n)
        return [
            ParamSpec("k", "keys per query k", "int", min(16, km), 1, km, 1,
                      help="the k keys with the highest learned index score (one mask per layer)"),
        ]  # fmt: skip

    def own_grid(self, n, artefact=None):
        return [{"k": k} for k in INDEXER_KS if k <= k_max(n)]

    def scores(self, ctx: PredictContext, layer: int) -> np.ndarray:
        """(n, n) float64 index scores of one layer of ``ctx`` (memoised per text)."""
        return ctx.memo(
            ("indexer", layer), lambda: index_scores(ctx.learned["indexer"], layer, ctx.causal)
        )

    def base(self, ctx, p):
        rows = [first_k_mask(self.scores(ctx, li), p["k"]) for li in range(ctx.layers)]
        return torch.stack(rows)[:, None]  # (L, 1, n, n): every head of a layer alike

    def bases_bits(self, ctx, owns):
        n, H = ctx.n, ctx.heads
        ks = [own["k"] for own in owns]
        out = [np.empty((ctx.head_count(), n, words(n)), dtype=np.uint64) for _ in ks]
        for li in range(ctx.layers):
            for o, bits in zip(out, threshold_bits(self.scores(ctx, li), ks), strict=True):
                o[li * H : (li + 1) * H] = bits[None]
        return iter(out)

    def base_bits(self, ctx, own):
        return next(self.bases_bits(ctx, [own]))

    def head_payload(self, ctx, layer, head):
        """``{"indexer": {"k_max", "order"}}``: each row's keys by index score, the first
        K_MAX(n) (``selection.b64_ints``, n × K_MAX); the mask is the first k of a row."""
        km = k_max(ctx.n)
        return {
            "indexer": {"k_max": km, "order": b64_ints(stable_top(self.scores(ctx, layer), km))}
        }


class SeerMethod(_Selected):
    """SeerAttention's AttnGate: per query block the top-k key blocks by the learned gate."""

    name, label = "seer", "SeerAttention gate (learned)"
    #: one head's sweep in the same run: 29 ms (h2o 28, moba 56)
    cost_rank = 9.5
    payload_empty = {"seer": {}}

    def own_params(self, n, artefact=None):
        most = max(1, block_count(n, BLOCK_CHOICES[0]))
        return [
            ParamSpec("block", "block size B", "choice", 32, choices=BLOCK_CHOICES,
                      help="queries and keys pooled in blocks of B tokens (a block kernel's tile)"),
            ParamSpec("topk", "key blocks per query block k", "int", min(4, most), 1, most, 1,
                      help="the k key blocks with the highest learned gate (at most ⌈n / B⌉)"),
        ]  # fmt: skip

    def own_grid(self, n, artefact=None):
        return [
            {"block": b, "topk": k}
            for b in SEER_BLOCKS
            for k in SEER_TOPK
            if k <= block_count(n, b)
        ]

    def gates(self, ctx: PredictContext, layer: int, block: int, head: int | None = None):
        """(H, T, T) float32 gate scores of a layer's heads (or (T, T) of one head)."""
        inp = ctx.learned["seer"]
        heads = range(ctx.heads) if head is None else [head]
        got = []
        for h in heads:
            q, k = ctx.head_qk(layer, h)
            got.append(seer_gate(inp, q, k, layer, h, block, ctx.causal))
        return np.stack(got) if head is None else got[0]

    def order(self, ctx: PredictContext, block: int) -> np.ndarray:
        """(L·H, T, T): every query block's key blocks, best first (memoised per text and B)."""

        def make():
            got = [stable_order(self.gates(ctx, li, block)) for li in range(ctx.layers)]
            return np.concatenate(got)

        return ctx.memo(("seer", "order", block), make)

    def selected(self, ctx: PredictContext, p: dict) -> np.ndarray:
        """(L·H, T, T) bool: the key blocks each query block keeps."""
        order = self.order(ctx, p["block"])
        k = min(p["topk"], order.shape[-1])
        sel = np.zeros(order.shape, dtype=bool)
        np.put_along_axis(sel, order[..., :k], True, axis=-1)
        return sel

    def base(self, ctx, p):
        return _dense(ctx, self.selected(ctx, p), p["block"])

    def base_bits(self, ctx, own):
        return block_bits(self.selected(ctx, own), ctx.n, own["block"])

    def plain_counts(self, ctx, gold, owns):
        groups: dict[int, list[int]] = {}
        for k, own in enumerate(owns):
            groups.setdefault(own["block"], []).append(k)
        parts = {b: block_counts(gold, [self.selected(ctx, owns[k]) for k in ks], b)
                 for b, ks in groups.items()}  # fmt: skip
        return regroup(parts, groups, len(owns))

    def head_payload(self, ctx, layer, head):
        """``{"seer": {"<B>": order}}``: per query block its key blocks by gate score (T × T,
        ``selection.b64_ints``) for every B of the slider; the mask is the first k of a row."""
        return {
            "seer": {
                str(b): b64_ints(stable_order(self.gates(ctx, layer, b, head)))
                for b in BLOCK_CHOICES
            }
        }
