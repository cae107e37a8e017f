"""Fixed-pattern methods (definitions §2): window, the Sparse Transformer's fixed and strided,
Longformer.

None of them looks at the text's queries or keys: the masks are ``sparse_core.patterns``
functions of n, causality and the parameters (Longformer's random globals also of the per-head
seed, ``grids.head_seed``). Defaults (n tokens, s(n) = ``grids.stride_default``):

=============  ===========================================================  ====================
method         own parameters (default)                                     window / globals
=============  ===========================================================  ====================
window         —                                                            min(11, 2n − 1), on
fixed          stride l = s(n), c = max(1, l // 4), part union, spread off  0, off
strided        stride l = s(n), part union                                  0, off
longformer     n_globals g = 4 random global tokens (per-head seed)         min(11, 2n − 1), on
=============  ===========================================================  ====================

Own sweep grids: window —; fixed l ∈ ``grids.strides(n)`` × c ∈ {1, l // 4}, part union;
strided l ∈ ``grids.strides(n)``, part union; longformer g ∈ ``grids.RANDOM_COUNTS`` (≤ n).
"""

from __future__ import annotations

import numpy as np
import torch

from .. import baselines, patterns
from ..bitsets import row_bits, words
from ..errors import SparsescopeError
from .base import Method
from .grids import random_counts, stride_default, strides
from .spec import ParamSpec


class WindowMethod(Method):
    name, label = "window", "Window (+ globals)"
    cost_rank = 1
    family = "sparse-transformer"
    window_default, globals_default = 11, True
    text_independent = True


class FixedMethod(Method):
    """Fixed factorized attention (``patterns.fixed``): A1 the own block, A2 the last c
    positions of every block; ``spread`` gives head h the c-wide summary chunk h mod (l / c)."""

    name, label = "fixed", "Sparse Transformer: fixed"
    cost_rank = 12
    family = "sparse-transformer"
    text_independent = True

    def own_params(self, n, artefact=None):
        s = stride_default(n)
        return [
            ParamSpec("stride", "block length l", "int", s, 1, n, 1,
                      help="A1: each query sees the keys of its own block of l tokens"),
            ParamSpec(
                "c", "summary width c", "int", max(1, s // 4), 1, n, 1,
                help="A2: the last c positions of every block (c ≤ l)",
            ),
            ParamSpec("part", "part", "choice", "union", choices=list(patterns.PARTS),
                      help="A1 (own block), A2 (summary columns) or their union"),
            ParamSpec("spread", "spread heads", "bool", False,
                      help="head h takes the c-wide summary chunk h mod (l / c)"),
        ]  # fmt: skip

    def check(self, n, p):
        if p["c"] > p["stride"]:
            raise SparsescopeError(
                f"c must be in [1, stride = {p['stride']}], got {p['c']}", field="c"
            )

    def own_grid(self, n, artefact=None):
        return [
            {"stride": s, "c": c, "part": "union", "spread": False}
            for s in strides(n)
            for c in sorted({1, max(1, s // 4)})
        ]

    def base(self, ctx, p):
        n, causal = ctx.n, ctx.causal
        if not p["spread"]:
            return patterns.fixed(n, p["stride"], p["c"], causal=causal, part=p["part"])
        per_head = [
            patterns.fixed(n, p["stride"], p["c"], causal=causal, part=p["part"], head=h)
            for h in ctx.head_index().tolist()
        ]
        return torch.stack(per_head)[None]  # (1, H, n, n)


class StridedMethod(Method):
    """Strided attention (``patterns.strided``): A1 the last l positions, A2 every l-th."""

    name, label = "strided", "Sparse Transformer: strided"
    cost_rank = 11
    family = "sparse-transformer"
    text_independent = True

    def own_params(self, n, artefact=None):
        return [
            ParamSpec("stride", "stride l", "int", stride_default(n), 1, n, 1,
                      help="A1 looks back l positions, A2 at every l-th key (Child et al. §4.2)"),
            ParamSpec("part", "part", "choice", "union", choices=list(patterns.PARTS),
                      help="A1 (the last l positions), A2 (every l-th) or their union"),
        ]  # fmt: skip

    def own_grid(self, n, artefact=None):
        return [{"stride": s, "part": "union"} for s in strides(n)]

    def base(self, ctx, p):
        return patterns.strided(ctx.n, p["stride"], causal=ctx.causal, part=p["part"])


class LongformerMethod(Method):
    """Longformer: window w + g random global tokens per text (``patterns.longformer_globals``,
    seed ``grids.head_seed``): full rows and columns."""

    name, label = "longformer", "Longformer"
    cost_rank = 14
    family = "baselines"
    window_default, globals_default = 11, True

    def own_params(self, n, artefact=None):
        return [
            ParamSpec("n_globals", "random globals g", "int", min(4, n), 0, n, 1,
                      help="random global tokens (full rows and columns) per text"),
        ]  # fmt: skip

    def own_grid(self, n, artefact=None):
        return [{"n_globals": g} for g in random_counts(n)]

    def base(self, ctx, p):
        pos = baselines.longformer_positions(ctx.n, p["n_globals"], ctx.seeds())  # (L, H, n)
        return pos[..., :, None] | pos[..., None, :]

    def base_bits(self, ctx, own):
        # a global row is all ones, any other row holds the global columns: no n × n mask
        n = ctx.n
        pos = baselines.longformer_positions(n, own["n_globals"], ctx.seeds()).numpy()
        pos = pos.reshape(-1, n)  # (L·H, n)
        cols = row_bits(n, pos)  # (L·H, W)
        full = np.full(words(n), np.uint64(0xFFFFFFFFFFFFFFFF))  # bits past n: cleared by ∩ V
        return np.where(pos[..., None], full, cols[:, None, :])  # (L·H, n, W)

    def head_payload(self, ctx, layer, head):
        return {"seed": int(ctx.seeds()[layer, head])}  # the head's own (also in a view)
