"""Test helpers shipped with sparse_core (used by the test suite and the benchmarks)."""

from __future__ import annotations

import torch
from torch import Tensor

from .entmax import _as_compute_dtype, _check_alpha

__all__ = ["entmax_reference"]


def entmax_reference(scores: Tensor, alpha: float | Tensor = 1.5, dim: int = -1) -> Tensor:
    """α-entmax computed by the ``entmax`` package (1.3), its pitfalls fixed: the test baseline.

    α = 1: ``torch.softmax``; α = 1.5: ``entmax15`` (sort); α = 2: ``sparsemax`` (sort); any
    other α, or a per-head α tensor: ``entmax_bisect`` (60 halvings). Fully ``-inf`` rows are
    filled with zeros before the call and zeroed after (the package raises or returns NaN on
    them); a per-head α is expanded to the batch shape with size 1 along ``dim``, which the
    package requires; rows whose α is 1 use softmax. Computes in the dtype of ``scores``.
    """
    from entmax import entmax15, entmax_bisect, sparsemax

    a = _check_alpha(alpha, scores, dim)
    with torch.no_grad():
        z = _as_compute_dtype(scores)
        dead = torch.isneginf(z).all(dim=dim, keepdim=True)
        zf = z.masked_fill(dead, 0.0)
        if isinstance(a, float):
            if a == 1.0:
                p = torch.softmax(zf, dim=dim)
            elif a == 1.5:
                p = entmax15(zf, dim=dim)
            elif a == 2.0:
                p = sparsemax(zf, dim=dim)
            else:
                p = entmax_bisect(zf, a, dim=dim, n_iter=60)
        else:
            shape = list(z.shape)
            shape[dim] = 1
            a_full = a.expand(*shape).to(z.dtype)
            p = entmax_bisect(zf, a_full.where(a_full > 1.0, 2.0), dim=dim, n_iter=60)
            soft = (a_full == 1.0).expand_as(z)
            if bool(soft.any()):
                p = torch.where(soft, torch.softmax(zf, dim=dim), p)
        return p.masked_fill(dead, 0.0)
