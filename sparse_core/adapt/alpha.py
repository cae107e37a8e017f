"""α while adapting: one fixed value, or learned per head (Correia et al. 2019, definitions §7).

Learned: ``α_{l,h} = 1 + sigmoid(a_{l,h})`` with a trained scalar ``a`` per (layer, head), so
α ∈ (1, 2); ``a`` starts at ``logit(α₀ − 1)`` (0 for α₀ = 1.5: every head starts at 1.5). This is
the parametrisation of "Adaptively Sparse Transformers" (Correia, Niculae and Martins, EMNLP
2019, §3.1: a sigmoid keeps each head's α strictly between 1 and 2). ``a`` is float32 (what
the optimiser updates); α is computed in float64, so the forward sees α exactly as recorded
(float32 would round 1 + sigmoid(a) to 1 for a < −17) and the config records the α used.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


class LearnedAlpha(torch.nn.Module):
    """Per (layer, head) α = 1 + sigmoid(a), a trained; ``start`` in (1, 2)."""

    def __init__(self, layers: int, heads: int, start: float = 1.5) -> None:
        super().__init__()
        if not 1.0 < start < 2.0:
            raise ValueError(f"a learned alpha starts in (1, 2), got {start}")
        p = start - 1.0
        self.a = torch.nn.Parameter(torch.full((layers, heads), math.log(p / (1.0 - p))))

    def table(self) -> Tensor:
        """α (L, H) float64, differentiable w.r.t. ``a``."""
        return 1.0 + torch.sigmoid(self.a.double())

    def layer_alphas(self) -> list[Tensor]:
        """Per layer α as a (1, H, 1, 1) tensor for the attention's RunState."""
        t = self.table()
        return [t[i].view(1, -1, 1, 1) for i in range(t.shape[0])]


def layer_alphas(alpha: float | LearnedAlpha, layers: int) -> list:
    """The per-layer α list a RunState takes, for a fixed or a learned α."""
    if isinstance(alpha, LearnedAlpha):
        return alpha.layer_alphas()
    return [float(alpha)] * layers


def alpha_record(alpha: float | LearnedAlpha) -> float | list[list[float]]:
    """What the config records: the number, or the (L, H) table as nested lists."""
    if isinstance(alpha, LearnedAlpha):
        with torch.no_grad():
            return [[float(v) for v in row] for row in alpha.table()]
    return float(alpha)


def alpha_stats(alpha: float | LearnedAlpha) -> dict:
    """min / mean / max / std of α over every (layer, head) (a fixed α: all equal)."""
    if not isinstance(alpha, LearnedAlpha):
        a = float(alpha)
        return {"min": a, "mean": a, "max": a, "std": 0.0}
    with torch.no_grad():
        t = alpha.table()
        return {
            "min": float(t.min()),
            "mean": float(t.mean()),
            "max": float(t.max()),
            "std": float(t.std(unbiased=False)),
        }
