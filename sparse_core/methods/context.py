"""The per-text input of every method: one model run plus its projected queries and keys.

Sparsefinder's learned projections (definitions §3) map each head's queries and keys to r
dimensions, ``q̃ = q W_h``, ``k̃ = k W_h``; they are computed once per text here and shared by sf-*,
Reformer and Routing. Whatever a method derives from a text and would recompute for every slider
value or sweep point (bucket assignments, cluster members, packed text-independent patterns) is
memoised in :attr:`PredictContext.cache` with :meth:`PredictContext.memo`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor

from ..cancel import checkpoint
from ..sparse_probs import SparseProbs

if TYPE_CHECKING:
    from ..model import RunOutput
    from ..sparsefinder import Artefact


def products(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ bᵀ`` over the last two axes, (…, m, d) x (…, k, d) -> (…, m, k), one 2-d BLAS
    product per leading index: a head's result does not depend on the heads beside it (numpy's
    stacked ``matmul`` of a transposed operand takes a slow non-BLAS loop besides)."""
    if a.ndim == 2:
        return a @ b.T
    lead = a.shape[:-2]
    aa = a.reshape(-1, *a.shape[-2:])
    bb = b.reshape(-1, *b.shape[-2:])
    out = np.empty((aa.shape[0], a.shape[-2], b.shape[-2]), dtype=np.result_type(a, b))
    for h in range(aa.shape[0]):
        np.dot(aa[h], bb[h].T, out=out[h])
    return out.reshape(*lead, a.shape[-2], b.shape[-2])


@dataclass
class PredictContext:
    """One analysed text plus its projected queries / keys (computed once, definitions §3)."""

    out: RunOutput
    artefact: Artefact | None
    proj_q: Tensor | None  # (L, H, n, r) float32
    proj_k: Tensor | None
    cache: dict = field(default_factory=dict, repr=False)  # small per-text intermediates
    #: the model's layer / head of each row of the tensors: None for a whole run (0..L−1,
    #: 0..H−1); set on a view of some heads (:meth:`view`) or a stack of texts (:meth:`stack`),
    #: so that whatever is drawn per head (seeds, rotations) is that head's own draw
    layer_ids: Tensor | None = field(default=None, repr=False)
    head_ids: Tensor | None = field(default=None, repr=False)
    #: the memo of the context this one is a view of: what :meth:`memo` makes that holds for
    #: every head (a packed text-independent pattern, ``_shared``) is kept there too, so the
    #: next head's view finds it (a long text's summary works one head view at a time)
    parent_cache: dict | None = field(default=None, repr=False)
    #: the inputs of the learned selectors the artefact carries (definitions §12,
    #: ``sparse_core.selectors``): kind -> IndexerInput / SeerInput, each with ``select(ls, hs)``
    #: (a view's rows) and ``cat(parts)`` (a stack of texts)
    learned: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_run(cls, out: RunOutput, artefact: Artefact | None = None) -> PredictContext:
        if artefact is None:
            return cls(out, None, None, None)
        from ..selectors import inputs_for

        artefact.check_model(out.layers, out.heads, out.queries.shape[-1])
        with torch.inference_mode():
            pq, pk = artefact.project(out.queries), artefact.project(out.keys)
        return cls(out, artefact, pq, pk, learned=inputs_for(artefact, out.queries, out.keys))

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
        (definitions §3: the same footing as Sparsefinder) when an artefact fits, else the model's
        own queries and keys, so that both baselines work for every model without training."""
        if self.proj_q is not None:
            return self.proj_q, self.proj_k
        return self.out.queries.float(), self.out.keys.float()

    # -- P, G and the scores, per head or per layer (the seam that lets P be held sparse:
    # docs/architecture.md, "P and G access"). Method code reads them only through these, never
    # ``out.probs`` / ``out.graph`` over every head at once. ``layer`` and ``head`` index this
    # context's own rows (0, 0 in a view); ``head=None`` is every head of the layer (a leading (H,)
    # axis).

    def head_count(self) -> int:
        """L·H: the heads of this context, flat index ``a = layer * H + head``."""
        return self.layers * self.heads

    def head_probs(self, layer: int, head: int | None = None) -> np.ndarray:
        """(n, n) float32 (or (H, n, n)): the entmax probabilities P (0 off the graph); a
        read-only view of a run kept dense (small n), a new array from a sparse one."""
        checkpoint()  # between heads: a cancelled computation stops here (sparse_core.cancel)
        a = self.out.attn
        return (a.layer(layer) if head is None else a.head(layer, head)).numpy()

    def head_graph(self, layer: int, head: int | None = None) -> np.ndarray:
        """(n, n) bool (or (H, n, n)): the gold graph G = P > 0."""
        a = self.out.attn
        if a.is_dense:  # the run's dense graph, computed once
            g = self.out.graph
            return (g[layer] if head is None else g[layer, head]).numpy()
        return self.head_probs(layer, head) > 0

    def probs_rows(self, layer: int, head: int | None, rows: slice) -> np.ndarray:
        """(len(rows), n) float32 (or (H, len(rows), n)): the rows ``rows`` (step 1) of P."""
        a = self.out.attn
        if head is None:
            if a.is_dense:
                return a.layer(layer)[:, rows].numpy()
            return np.stack([a.rows(layer, h, rows).numpy() for h in range(self.heads)])
        return a.rows(layer, head, rows).numpy()

    def head_edges(self, layer: int, head: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One head's gold edges, row-major: query i and key j int64, P float32 (E,) each, read
        from the sparse store's rows (no (n, n) array for a long text)."""
        i, j, p = self.out.attn.row_edges(layer, head, slice(0, self.n))
        return i.numpy(), j.numpy(), p.numpy()

    def head_qk(self, layer: int, head: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(queries, keys), (n, d) float32 each (or (H, n, d)), as they enter the scores."""
        checkpoint()  # between heads (sparse_core.cancel)
        q, k = self.out.queries[layer], self.out.keys[layer]
        if head is not None:
            q, k = q[head], k[head]
        return q.float().numpy(), k.float().numpy()

    def head_scale(self, layer: int) -> float:
        """The score factor of ``layer`` (the model's own ``scaling``; 1/√d_head by default)."""
        sc = self.out.scaling
        return float(sc[layer]) if sc is not None else self.out.queries.shape[-1] ** -0.5

    def head_scores(self, layer: int, head: int | None = None) -> np.ndarray:
        """(n, n) float32 (or (H, n, n)): the scores S = scaling · q_i · k_j (softcapped where
        the model caps them), before any mask, recomputed from the recorded queries and keys.
        numpy's product takes one head at a time, so a head's scores are the same whether it
        is asked for alone or with its layer (predict, the sweep and the page's payload agree
        to the bit)."""
        q, k = self.head_qk(layer, head)
        s = products(q, k)
        s *= np.float32(self.head_scale(layer))
        if self.out.softcap is not None:
            c = np.float32(self.out.softcap)
            s = np.tanh(s / c) * c
        return s

    def column_mass(self, layer: int, head: int | None = None, prefix: bool = False) -> np.ndarray:
        """The attention mass each key received, float32, added one query at a time in order
        i = 0, 1, … (float32 additions: the page repeats them exactly).

        ``prefix=False``: (n,) C_j = Σ_i P_ij; ``prefix=True``: (n, n) A with A_ij = Σ_{i' < i}
        P_i'j, the mass key j received from the queries before i (row 0 is 0). With
        ``head=None`` every head of the layer: (H, n) / (H, n, n)."""
        from .._method_kernels import column_sums  # numba: imported when first needed

        p = self.head_probs(layer, head)  # (…, n, n) float32
        n = p.shape[-1]
        # one compiled loop: row i of every head added in order, the same float32 additions
        got = column_sums(np.ascontiguousarray(p, dtype=np.float32).reshape(-1, n, n), prefix)
        return got.reshape(p.shape) if prefix else got.reshape(p.shape[:-2] + (n,))

    def gold_edges(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every head's gold edges: (a, i, j) int64 and p float32, each (E,), sorted by (a, i, j)
        with a = layer · H + head (``bitsets.Gold`` of the sweeps is built from them); read
        from the sparse store without densifying it."""
        return self.out.attn.edges()

    def prob_values(self, a: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        """P at the pairs (a, i, j) (flat head index a, query i, key j), float32 (0 off G)."""
        return self.out.attn.values_at(a, i, j)

    def layer_index(self) -> Tensor:
        """(L,) int64: the model's layer of each row of the tensors (0..L−1 for a whole run)."""
        return torch.arange(self.layers) if self.layer_ids is None else self.layer_ids

    def head_index(self) -> Tensor:
        """(H,) int64: the model's head of each column of the tensors (0..H−1 for a whole run)."""
        return torch.arange(self.heads) if self.head_ids is None else self.head_ids

    def seeds(self) -> Tensor:
        """(L, H) int64: ``grids.head_seed`` (``layer * 1000 + head``) of every head."""
        return self.layer_index()[:, None] * 1000 + self.head_index()[None, :]

    def view(self, layer: int, head: int) -> PredictContext:
        """Head (``layer``, ``head``) alone: a context of one layer and one head on which every
        method gives exactly that head's figures and payload of the whole context (tested), at
        a fraction of the cost (the page opens one head; the Pareto data of one head).

        Its tensors are slices of this one's; what is drawn per head (seeds, Reformer's
        rotations, Fixed's spread chunk) uses the head's own indices (:meth:`layer_index`).
        Packed patterns shared by every head are taken from this context's memo."""
        ls, hs = slice(layer, layer + 1), slice(head, head + 1)
        out = self.out
        sub = dataclasses.replace(
            out,
            queries=out.queries[ls, hs],
            keys=out.keys[ls, hs],
            values=None if out.values is None else out.values[ls, hs],
            attn=out.attn.select(layer, head),
            scaling=None if out.scaling is None else out.scaling[ls],
        )
        art = self.artefact
        if art is not None:
            art = dataclasses.replace(
                art,
                W=art.W[ls, hs],
                b=art.b[ls, hs],
                centroids={k: c[ls, hs] for k, c in art.centroids.items()},
            )
        # a copy first (one C call): another request may be memoising into this context
        shared = {k: v for k, v in dict(self.cache).items() if _shared(k, v)}
        if self.parent_cache is not None:  # where this context's memo writes them through
            shared.update((k, v) for k, v in dict(self.parent_cache).items() if _shared(k, v))
        return PredictContext(
            sub,
            art,
            None if self.proj_q is None else self.proj_q[ls, hs],
            None if self.proj_k is None else self.proj_k[ls, hs],
            shared,
            self.layer_index()[ls],
            self.head_index()[hs],
            self.cache if self.parent_cache is None else self.parent_cache,
            learned={k: v.select(ls, hs) for k, v in self.learned.items()},
        )

    @classmethod
    def stack(cls, ctxs: Sequence[PredictContext]) -> PredictContext:
        """Several texts of the same length (and causality, artefact) as one context whose
        layers are every text's layers in turn: each method computes all their heads at once,
        and each head's figures are exactly its own text's (tested). Split results with
        ``reshape(len(ctxs), L, H)``."""
        first = ctxs[0]
        if len(ctxs) == 1:
            return first
        n, causal, art = first.n, first.causal, first.artefact
        if any(c.n != n or c.causal != causal or c.artefact is not art for c in ctxs):
            raise ValueError("stacked contexts must share n, causality and artefact")

        def cat(name: str) -> Tensor:
            return torch.cat([getattr(c.out, name) for c in ctxs])

        out = dataclasses.replace(
            first.out,
            queries=cat("queries"),
            keys=cat("keys"),
            attn=SparseProbs.cat([c.out.attn for c in ctxs]),
            scaling=None if first.out.scaling is None else cat("scaling"),
            extra={},
        )
        if art is not None:
            k = len(ctxs)
            art = dataclasses.replace(
                art,
                W=art.W.repeat(k, 1, 1, 1),
                b=art.b.repeat(k, 1, 1),
                centroids={b: c.repeat(k, 1, 1, 1) for b, c in art.centroids.items()},
            )
        proj = first.proj_q is not None
        return cls(
            out,
            art,
            torch.cat([c.proj_q for c in ctxs]) if proj else None,
            torch.cat([c.proj_k for c in ctxs]) if proj else None,
            {k: v for k, v in dict(first.cache).items() if _shared(k, v)},
            torch.cat([c.layer_index() for c in ctxs]),
            first.head_index(),
            learned={
                k: type(v).cat([c.learned[k] for c in ctxs]) for k, v in first.learned.items()
            },
        )

    def memo(self, key: tuple, make: Callable[[], Any]) -> Any:
        """``cache[key]``, made once by ``make()``."""
        if key not in self.cache:
            value = self.cache[key] = make()
            if self.parent_cache is not None and _shared(key, value):
                self.parent_cache.setdefault(key, value)  # for the other heads' views
        return self.cache[key]


def _shared(key: Any, value: Any) -> bool:
    """Whether a memo entry holds for every head: a packed pattern that is the same for all
    (``("bits", …)`` of shape (1, n, W))."""
    return isinstance(key, tuple) and key[:1] == ("bits",) and getattr(value, "shape", (0,))[0] == 1
