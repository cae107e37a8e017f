"""The per-text input of every method: one model run plus its projected queries and keys.

Sparsefinder's learned projections (SPEC §3) map each head's queries and keys to r dimensions,
``q̃ = q W_h``, ``k̃ = k W_h``; they are computed once per text here and shared by sf-*, Reformer and
Routing. Whatever a method derives from a text and would recompute for every slider value or
sweep point (bucket assignments, cluster members, packed text-independent patterns) is memoised
in :attr:`PredictContext.cache` with :meth:`PredictContext.memo`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

if TYPE_CHECKING:
    from ..model import RunOutput
    from ..sparsefinder import Artefact


@dataclass
class PredictContext:
    """One analysed text plus its projected queries / keys (computed once, SPEC §3)."""

    out: RunOutput
    artefact: Artefact | None
    proj_q: Tensor | None  # (L, H, n, r) float32
    proj_k: Tensor | None
    cache: dict = field(default_factory=dict, repr=False)  # small per-text intermediates

    @classmethod
    def from_run(cls, out: RunOutput, artefact: Artefact | None = None) -> PredictContext:
        if artefact is None:
            return cls(out, None, None, None)
        artefact.check_model(out.layers, out.heads, out.queries.shape[-1])
        with torch.inference_mode():
            return cls(out, artefact, artefact.project(out.queries), artefact.project(out.keys))

    @property
    def n(self) -> int:
        return self.out.n

    @property
    def layers(self) -> int:
        return self.out.layers

    @property
    def heads(self) -> int:
        return self.out.heads

    @property
    def causal(self) -> bool:
        return bool(self.out.causal)

    @property
    def projected(self) -> bool:
        """Whether projected queries and keys exist (an artefact fits this model and α)."""
        return self.proj_q is not None

    def hash_space(self) -> tuple[Tensor, Tensor]:
        """(queries, keys) (L, H, n, ·) that Reformer and Routing group: the projected ones
        (SPEC §3: the same footing as Sparsefinder) when an artefact fits, else the model's own
        queries and keys, so that both baselines work for every model without training."""
        if self.proj_q is not None:
            return self.proj_q, self.proj_k
        return self.out.queries.float(), self.out.keys.float()

    def seeds(self) -> Tensor:
        """(L, H) int64: ``grids.head_seed`` (``layer * 1000 + head``) of every head."""
        li = torch.arange(self.layers)[:, None]
        return li * 1000 + torch.arange(self.heads)[None, :]

    def memo(self, key: tuple, make: Callable[[], Any]) -> Any:
        """``cache[key]``, made once by ``make()``."""
        if key not in self.cache:
            self.cache[key] = make()
        return self.cache[key]
