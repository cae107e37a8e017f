"""Information flow across layers: which input tokens can reach a token, and with how much mass.

α-entmax gives exact zeros, so a head's graph G = {(i, j) : P_ij > 0} is exact (definitions §1), and
so is the question "is there a path from input token j to token t through the layers' graphs?".
With softmax every P_ij > 0, and the answer is always yes.

**Graph of one layer.** Position i of the residual stream after layer l reads position j of the
stream before it iff some head of layer l attends from i to j (the *union over heads*), or
j = i (the *residual connection*: x_i^(l+1) = x_i^(l) + Attn(x^(l))_i + …; the MLP acts on each
position alone and adds no edge):

    B_l = I ∨ ⋁_h G_{l,h}                          # (n, n) bool, rows i (reader), cols j

**Reachability.** Level k is the residual stream entering layer k (level 0: the input
embeddings, level L: the last layer's output). Token t at level l + 1 (the output of layer l)
is reachable from input j iff (B_l ∘ B_{l-1} ∘ … ∘ B_0)_tj, boolean matrix product.

**Mass: attention rollout** (Abnar & Zuidema 2020, "Quantifying Attention Flow in
Transformers", §3; reference code samiraabnar/attention_flow, attention_graph_util.py,
``compute_joint_attention``, read here as its stored copy
.ipynb_checkpoints/attention_graph_util-checkpoint.py). Per layer the heads are averaged and the
residual added as an identity, then rows are normalised; the layers are multiplied through:

    Ā_l = (1/H) Σ_h P_{l,h}       Â_l = D_l⁻¹ (Ā_l + I),  D_l = diag(rowsum(Ā_l + I))
    R_0 = Â_0,    R_l = Â_l R_{l-1}                 # (n, n); R_l[t] sums to 1

as the reference does (its ``att_mat`` is the per-layer mean over heads, ``add_residual=True``).
For a valid row, Σ_j P_ij = 1, so Â_l = (Ā_l + I) / 2.

**Exactness.** Every factor is non-negative and (X Y)_ij > 0 iff X_ik > 0 and Y_kj > 0 for some
k, so support(R_l) equals the boolean reachability exactly: the rollout over entmax graphs is
sparse, and its zeros are exact. In floating point this holds unless a path's mass falls below
the smallest double (≈ 5e-324); the mass is computed in float64 and the reachable set is
computed separately in booleans (tests/core/test_flow.py checks they agree).

**One token, streaming.** The page asks about one token t; its row of R_l is computed backwards,
one layer at a time and one head at a time (no (L, H, n, n) float64 copy, no n³ product):

    u_{l+1} = e_t,    u_k = u_{k+1} Â_k = mean_h (u_{k+1} / d_k) P_{k,h} + u_{k+1} / d_k

and the boolean r_k = r_{k+1} ∨ ⋁_h (r_{k+1} G_{k,h}); ``counts[k] = |r_k|`` is how many positions
of level k have a path to t (the receptive field, widening downwards). Cost O(l · H · n²).
Level k's set is row t of the reachability of layers k … l alone (tests/core/test_flow.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from .cancel import checkpoint
from .errors import SparsescopeError

#: One layer's probabilities, indexable by head: a (H, n, n) tensor, or a list of (n, n) ones
#: (dense or torch sparse), so that a caller holding P per head need not stack it.
Layer = Sequence[Tensor]


@dataclass(frozen=True)
class Flow:
    """What reaches token ``token`` at the output of layer ``layer``.

    ``mass`` (n,) float64: row t of the rollout R_layer (sums to 1); ``reachable`` (n,) bool:
    the inputs with a path to t (== mass > 0); ``levels[k]`` (n,) bool for k = 0 … layer + 1:
    the positions of level k (the stream entering layer k) with a path to t (levels[0] is
    ``reachable``, levels[layer + 1] is t alone); ``counts[k]`` their number.
    """

    token: int
    layer: int
    mass: Tensor  # (n,) float64
    reachable: Tensor  # (n,) bool
    levels: list[Tensor]  # layer + 2 of (n,) bool

    @property
    def counts(self) -> list[int]:
        return [int(r.sum()) for r in self.levels]


def _dense(p: Tensor) -> Tensor:
    return p.to_dense() if p.is_sparse else p


def _check(probs: Sequence[Layer], token: int, layer: int | None) -> tuple[int, int]:
    n_layers = len(probs)
    if n_layers == 0:
        raise SparsescopeError("the rollout needs at least one layer", field="layer")
    n = _dense(probs[0][0]).shape[-1]
    if layer is None:
        layer = n_layers - 1
    if not 0 <= layer < n_layers:
        raise SparsescopeError(
            f"layer must be in [0, {n_layers - 1}] for this model, got {layer}", field="layer"
        )
    if not 0 <= token < n:
        raise SparsescopeError(
            f"token must be a token index in [0, {n - 1}] for this text, got {token}",
            field="token",
        )
    return layer, n


def step_back(u: Tensor, r: Tensor, heads: Layer) -> tuple[Tensor, Tensor]:
    """One layer backwards: (u Â, r B) for a row vector of mass ``u`` (n,) float64 and of
    reach ``r`` (n,) bool, reading the layer's P one head at a time."""
    n_heads = len(heads)
    rowsum = torch.zeros_like(u)  # (n,)  Σ_j Ā_ij
    for h in range(n_heads):
        checkpoint()  # between heads: a cancelled computation stops here (sparse_core.cancel)
        rowsum += _dense(heads[h]).sum(-1, dtype=torch.float64)
    w = u / (1.0 + rowsum / n_heads)  # (n,)  u / d
    mass = w.clone()  # the residual: + (u / d) I
    reach = r.clone()
    # both rows in one product: P ≥ 0, so (r P)_j > 0 iff some P_ij > 0 with r_i (exact: a sum
    # of float32 positives never rounds to 0 in float64)
    rows = torch.stack([w, r.to(torch.float64)])  # (2, n)
    for h in range(n_heads):
        checkpoint()
        prod = rows @ _dense(heads[h]).to(torch.float64)  # (2, n)
        mass += prod[0] / n_heads
        reach |= prod[1] > 0
    return mass, reach


def token_flow(probs: Sequence[Layer], token: int, layer: int | None = None) -> Flow:
    """The inputs reaching ``token`` at the output of ``layer`` (default: the last), and the
    rollout mass of each; ``probs[l][h]`` is head h's P (n, n) of layer l (definitions §1)."""
    layer, n = _check(probs, token, layer)
    u = torch.zeros(n, dtype=torch.float64)
    u[token] = 1.0
    r = torch.zeros(n, dtype=torch.bool)
    r[token] = True
    levels = [r]
    for k in range(layer, -1, -1):
        u, r = step_back(u, r, probs[k])
        levels.append(r)
    return Flow(token=token, layer=layer, mass=u, reachable=r, levels=levels[::-1])


def token_flow_sparse(attn, token: int, layer: int | None = None) -> Flow:
    """:func:`token_flow` read from a sparse store (``sparse_probs.SparseProbs``) one head's
    edges at a time: ``u Â`` and ``r B`` as sums over the head's edges (i, j, p), O(|G|) per
    head and no (n, n) array. Equal to :func:`token_flow` on the dense P up to float64
    summation order (tests/core/test_sparse_metrics.py)."""
    import numpy as np

    n_layers, n_heads, n = attn.L, attn.H, attn.n
    if layer is None:
        layer = n_layers - 1
    if not 0 <= layer < n_layers:
        raise SparsescopeError(
            f"layer must be in [0, {n_layers - 1}] for this model, got {layer}", field="layer"
        )
    if not 0 <= token < n:
        raise SparsescopeError(
            f"token must be a token index in [0, {n - 1}] for this text, got {token}",
            field="token",
        )
    u = np.zeros(n)
    u[token] = 1.0
    r = np.zeros(n, dtype=bool)
    r[token] = True
    levels = [torch.from_numpy(r.copy())]
    for k in range(layer, -1, -1):
        heads = []
        rowsum = np.zeros(n)
        for h in range(n_heads):
            i, j, p = (x.numpy() for x in attn.row_edges(k, h, slice(0, n)))
            p = p.astype(np.float64)
            rowsum += np.bincount(i, weights=p, minlength=n)
            heads.append((i, j, p))
        w = u / (1.0 + rowsum / n_heads)
        mass, reach = w.copy(), r.copy()
        for i, j, p in heads:
            mass += np.bincount(j, weights=w[i] * p, minlength=n) / n_heads
            reach[j[r[i]]] = True
        u, r = mass, reach
        levels.append(torch.from_numpy(r.copy()))
    return Flow(
        token=token, layer=layer, mass=torch.from_numpy(u), reachable=levels[-1],
        levels=levels[::-1],
    )  # fmt: skip


def rollout(probs: Tensor) -> Tensor:
    """Abnar & Zuidema's rollout of every layer, R (L, n, n) float64, R[l] = Â_l … Â_0, from
    P (L, H, n, n): the reference's ``compute_joint_attention`` on the mean over heads."""
    a = probs.to(torch.float64).mean(1)  # (L, n, n)
    eye = torch.eye(a.shape[-1], dtype=torch.float64)
    aug = a + eye
    aug = aug / aug.sum(-1, keepdim=True)
    out = torch.empty_like(aug)
    out[0] = aug[0]
    for k in range(1, aug.shape[0]):
        out[k] = aug[k] @ out[k - 1]
    return out


def reachability(graph: Tensor) -> Tensor:
    """Boolean reachability of every layer, (L, n, n) bool, from the graphs (L, H, n, n):
    [l][t, j] iff input j has a path to t at the output of layer l (union of heads, residual)."""
    b = graph.any(1) | torch.eye(graph.shape[-1], dtype=torch.bool)  # (L, n, n)
    out = torch.empty_like(b)
    out[0] = b[0]
    for k in range(1, b.shape[0]):
        out[k] = (b[k].to(torch.float64) @ out[k - 1].to(torch.float64)) > 0
    return out
