"""Metrics of predicted attention masks against the ground-truth entmax graph (definitions §4).

For one text, layer and head: M the predicted mask, G the gold graph ``{(i, j) : P_ij > 0}``, V the
valid region (all n² pairs, or the n(n+1)/2 pairs j <= i when causal, diagonal included)::

    sparsity(M)  = 1 - |M ∩ V| / |V|          gold sparsity = sparsity(G)
    recall(M)    = |M ∩ G| / |G|
    precision(M) = |M ∩ G| / |M ∩ V|
    exact(M)     = |{valid i : G_i ⊆ M_i}| / |{valid i}|
    mass_recall(M) = Σ_{(i, j) ∈ M} P_ij / n   (definitions §8: the attention mass kept, per query)
    output_error(M) = ‖(P̃ − P) V‖_F / ‖P V‖_F   (P̃: entmax over M ∩ V only; what the misses cost)
    block_sparsity_B(M) = |{counted tiles t : t ∩ M ∩ V = ∅}| / |{counted tiles}|

Block sparsity: kernels skip B × B tiles, not single pairs (FlashAttention /
FlexAttention tiles are 128 × 128), so a pattern saves time only in the tiles it leaves empty.
The n × n grid is cut into T × T tiles, T = ⌈n / B⌉, tile (a, b) holding the rows [aB,
min((a+1)B, n)) and the columns [bB, min((b+1)B, n)); when B does not divide n the last row and
column of tiles are ragged (smaller) and count like any other tile. A tile is *counted* iff it
holds at least one pair of V (every tile without a causal mask; the T(T+1)/2 tiles b <= a with
one), and *empty* iff it holds no pair of M ∩ V (predicted pairs outside V, e.g. above the
diagonal, never fill a tile). :data:`BLOCKS` are the tile sizes every metrics payload carries.

Every function takes bool masks with any leading dims ``(..., n, n)`` (typically (L, H, n, n)),
broadcasts them together and returns a float64 tensor of the leading shape (a 0-d tensor for a
single (n, n) mask). Degenerate ratios (the definitions leave them open; project choices):

- recall with |G| = 0 is 1.0 (nothing to find, nothing missed);
- precision with |M ∩ V| = 0 is 1.0 (an empty prediction makes no false claim);
- sparsity with |V| = 0 is 1.0 (cannot happen for n >= 1: the diagonal is always valid);
- exact with no valid query is 1.0 (vacuously true);
- block sparsity with no counted tile is 1.0 (cannot happen for n >= 1, as for sparsity).

Aggregation (:func:`aggregate`): per (layer, head) mean over texts, each text weighted equally, then
the overall figure is the plain mean over all (layer, head). :func:`pareto_front` and
:func:`output_fidelity` (the paper's "sparsity-accuracy") complete the set.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor

if TYPE_CHECKING:  # the model is only needed by output_fidelity, and only for typing here
    from .model import RunOutput, SparseModel


def _check_mask(name: str, m: Tensor) -> None:
    if not isinstance(m, Tensor) or m.dtype != torch.bool:
        got = m.dtype if isinstance(m, Tensor) else type(m).__name__
        raise ValueError(f"{name} must be a torch.bool mask (..., n, n), got {got}")
    if m.dim() < 2 or m.shape[-1] != m.shape[-2]:
        raise ValueError(f"{name} must have shape (..., n, n), got {tuple(m.shape)}")


def _count(m: Tensor) -> Tensor:
    """The True pairs of each (n, n) slice, int64 (...,). Summed in int32 lanes where a slice's
    count cannot overflow them (n² < 2³¹): the same integers, about twice as fast as int64
    lanes on a CPU, where the counts of an analysis' metrics are most of their time."""
    return m.sum(dim=(-2, -1), dtype=_count_dtype(m.shape[-2] * m.shape[-1])).to(torch.int64)


def _count_dtype(area: int) -> torch.dtype:
    """The narrowest lanes that hold a count of up to ``area`` pairs exactly."""
    return torch.int32 if area <= torch.iinfo(torch.int32).max else torch.int64


def _ratio(num: Tensor, den: Tensor, empty: float) -> Tensor:
    """num / den in float64, ``empty`` where den == 0."""
    num, den = num.to(torch.float64), den.to(torch.float64)
    return torch.where(den > 0, num / den.clamp(min=1), torch.full_like(den, empty))


def _valid(n: int, causal: bool, valid: Tensor | None, device: torch.device) -> Tensor:
    if valid is not None:
        _check_mask("valid", valid)
        return valid.to(device)
    v = torch.ones(n, n, dtype=torch.bool, device=device)
    return v.tril() if causal else v


def sparsity(mask: Tensor, causal: bool = False, valid: Tensor | None = None) -> Tensor:
    """``1 - |M ∩ V| / |V|`` over the last two dims (definitions §4).

    ``valid`` (broadcastable to mask, e.g. a padding-aware region) overrides ``causal``; by default
    V is all pairs, or j <= i when causal. 1.0 where |V| = 0.
    """
    _check_mask("mask", mask)
    v = _valid(mask.shape[-1], causal, valid, mask.device)
    mv, v = torch.broadcast_tensors(mask & v, v)
    return 1.0 - _ratio(_count(mv), _count(v), 0.0)


#: The tile sizes of block sparsity in every metrics payload (``"block_sparsity": {"16": …}``).
BLOCKS = (16, 32, 64, 128)


def _tiles(m: Tensor, block: int) -> Tensor:
    """(..., n, n) bool -> (..., T, T) bool: whether each B × B tile (ragged last ones) holds a
    True pair."""
    n = m.shape[-1]
    T = -(-n // block)
    pad = T * block - n
    if pad:
        m = torch.cat([m, m.new_zeros(*m.shape[:-1], pad)], dim=-1)
        m = torch.cat([m, m.new_zeros(*m.shape[:-2], pad, T * block)], dim=-2)
    return m.reshape(*m.shape[:-2], T, block, T, block).any(dim=-1).any(dim=-2)


def block_sparsity(
    mask: Tensor, block: int, causal: bool = False, valid: Tensor | None = None
) -> Tensor:
    """Share of the counted B × B tiles (``block`` = B) that hold no pair of M ∩ V (module
    docstring: ragged last tiles count like the others; a tile counts iff it holds a pair of V).

    ``valid`` (broadcastable to mask) overrides ``causal`` as in :func:`sparsity`. 1.0 where no
    tile counts. Returns float64 of the leading shape.
    """
    _check_mask("mask", mask)
    if isinstance(block, bool) or not isinstance(block, int) or block < 1:
        raise ValueError(f"block must be an integer >= 1 (the tile side), got {block!r}")
    v = _valid(mask.shape[-1], causal, valid, mask.device)
    mv, v = torch.broadcast_tensors(mask & v, v)
    counted = _tiles(v, block)
    full = _tiles(mv, block)
    return _ratio(_count(counted & ~full), _count(counted), 1.0)


def block_sparsities(
    mask: Tensor, causal: bool = False, valid: Tensor | None = None
) -> dict[str, Tensor]:
    """:func:`block_sparsity` at every size of :data:`BLOCKS`: ``{"16": …, …, "128": …}``.

    The same figures as :func:`block_sparsity` size by size, with one pass over the pairs: each
    size's tiles are the smaller size's tiles taken two by two (a 2B tile holds a pair iff one
    of its four B tiles does; the ragged last ones too, as the pairs past n are all False)."""
    _check_mask("mask", mask)
    v = _valid(mask.shape[-1], causal, valid, mask.device)
    mv, v = torch.broadcast_tensors(mask & v, v)
    out, prev, counted, full = {}, None, v, mv
    for b in BLOCKS:
        step = 2 if prev is not None and b == 2 * prev else b  # else from the pairs
        if step == b:
            counted, full = v, mv
        counted, full = _tiles(counted, step), _tiles(full, step)
        out[str(b)] = _ratio(_count(counted & ~full), _count(counted), 1.0)
        prev = b
    return out


def recall(pred: Tensor, gold: Tensor) -> Tensor:
    """``|M ∩ G| / |G|`` (definitions §4); 1.0 where |G| = 0 (nothing to find, nothing missed)."""
    _check_mask("pred", pred)
    _check_mask("gold", gold)
    hit, gold = torch.broadcast_tensors(pred & gold, gold)
    return _ratio(_count(hit), _count(gold), 1.0)


def mass_recall(pred: Tensor, probs: Tensor) -> Tensor:
    """``Σ_{(i, j) ∈ M} P_ij / n`` (definitions §8): the share of the attention mass the mask keeps,
    averaged over the n queries (each row of P sums to 1). ``probs`` (…, n, n) float, P = 0 off
    the graph (and outside V), so pairs of M outside V add nothing. Summed in float64."""
    _check_mask("pred", pred)
    if not isinstance(probs, Tensor) or not probs.is_floating_point():
        raise ValueError("probs must be a float tensor (..., n, n) of attention probabilities")
    kept, p = torch.broadcast_tensors(pred, probs)
    if kept.is_contiguous() and p.is_contiguous():  # in place on the float64 copy: the same
        # values in the same layout as the torch.where below, so the same sums, 1.5x faster
        mass = p.to(torch.float64, copy=True).masked_fill_(~kept, 0.0).sum(dim=(-2, -1))
    else:
        mass = torch.where(kept, p.to(torch.float64), 0.0).sum(dim=(-2, -1))
    n = probs.shape[-1]
    return mass / n if n else torch.ones_like(mass)


def precision(
    pred: Tensor, gold: Tensor, causal: bool = False, valid: Tensor | None = None
) -> Tensor:
    """``|M ∩ G| / |M ∩ V|`` (definitions §4); 1.0 where |M ∩ V| = 0 (no prediction, no false
    claim).

    Predicted pairs outside V (e.g. j > i in causal mode) are not counted as false positives.
    """
    _check_mask("pred", pred)
    _check_mask("gold", gold)
    v = _valid(pred.shape[-1], causal, valid, pred.device)
    hit, kept = torch.broadcast_tensors(pred & gold & v, pred & v)
    return _ratio(_count(hit), _count(kept), 1.0)


def exact(pred: Tensor, gold: Tensor, valid_rows: Tensor | None = None) -> Tensor:
    """Share of valid queries i whose whole support lies in the prediction, ``G_i ⊆ M_i``
    (definitions §4).

    For those rows entmax over the restricted scores returns exactly P_i (sparse-consistency).
    ``valid_rows`` is a bool (..., n) broadcastable to the queries (e.g. non-padding rows); default
    every row. 1.0 where no row is valid.
    """
    _check_mask("pred", pred)
    _check_mask("gold", gold)
    covered = ~(gold & ~pred).any(dim=-1)  # (..., n): no gold key of row i is missing from M_i
    if valid_rows is None:
        rows = torch.ones_like(covered)
    else:
        if valid_rows.dtype != torch.bool:
            raise ValueError(f"valid_rows must be a torch.bool tensor, got {valid_rows.dtype}")
        rows = valid_rows.to(covered.device)
    covered, rows = torch.broadcast_tensors(covered & rows, rows)
    return _ratio(covered.sum(-1), rows.sum(-1), 1.0)


def aggregate(per_text: Sequence[Tensor]) -> tuple[Tensor, float]:
    """Aggregate one (L, H) figure per text (definitions §4).

    ``per_head[l, h] = (1 / T) Σ_t x_t[l, h]`` — each text weighted equally, whatever its length —
    and ``overall = (1 / (L H)) Σ_{l, h} per_head[l, h]``, the plain mean over heads.
    Returns ``(per_head (L, H) float64, overall)``.
    """
    if len(per_text) == 0:
        raise ValueError("per_text must hold at least one (L, H) tensor, got an empty sequence")
    shapes = {tuple(t.shape) for t in per_text}
    if len(shapes) != 1:
        raise ValueError(f"per_text tensors must all have the same (L, H) shape, got {shapes}")
    stacked = torch.stack([t.to(torch.float64) for t in per_text])  # (T, L, H)
    per_head = stacked.mean(dim=0)  # (L, H)
    return per_head, float(per_head.mean())


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the sparsity-recall Pareto frontier of ``points`` = [(sparsity, recall), ...].

    definitions §4: sort by sparsity descending, keep a point iff its recall is strictly above every
    recall kept before it. Ties: among equal sparsity the higher recall comes first, so at most one
    point per sparsity value is kept (the best); exact duplicates keep the lowest original index.
    Points with a NaN coordinate are never kept. Returns the kept indices (into ``points``) in
    order of descending sparsity (so recall ascends along the list).
    """
    order = sorted(
        (k for k, (s, r) in enumerate(points) if not (math.isnan(s) or math.isnan(r))),
        key=lambda k: (-points[k][0], -points[k][1], k),
    )
    kept: list[int] = []
    best = -math.inf
    for k in order:
        if points[k][1] > best:
            kept.append(k)
            best = points[k][1]
    return kept


def output_fidelity(
    model: SparseModel,
    text_or_out: str | RunOutput,
    masks: Tensor,
    *,
    alpha: float = 1.5,
    causal: bool = False,
) -> float:
    """Mean cosine similarity of the final hidden states, restricted vs unrestricted (definitions
    §4).

    ``(1 / n) Σ_i cos(h_i^M, h_i)`` where h is the entmax model's final hidden state and h^M the
    same model re-run with every head's attention restricted to its mask (``model.forward_masked``).
    ``masks`` is a bool mask broadcastable to (L, H, n, n) (an (n, n) mask applies to every head).
    ``text_or_out`` is a text (run here with ``alpha`` and ``causal``) or a RunOutput (its own alpha
    and causal are used). By sparse-consistency (definitions §1) masks ⊇ out.graph give 1 up to
    rounding.
    """
    if isinstance(text_or_out, str):
        out = model.run(text_or_out, alpha=alpha, causal=causal)
    else:
        out = text_or_out
    _check_mask("masks", masks)
    shape = (out.layers, out.heads, out.n, out.n)
    try:
        full = masks.expand(shape)
    except RuntimeError:
        raise ValueError(
            f"masks must be broadcastable to (L, H, n, n) = {shape}, got {tuple(masks.shape)}"
        ) from None
    restricted = model.forward_masked(out, full.contiguous())  # (n, d_model)
    cos = F.cosine_similarity(restricted.double(), out.hidden.double(), dim=-1)  # (n,)
    return float(cos.mean())


#: Query rows per block of :func:`output_error` (one head's scores are never all held at once).
OUTPUT_ERROR_ROWS = 256


def output_error(out: RunOutput, layer: int, head: int, mask: Tensor, *,
                 rows: int = OUTPUT_ERROR_ROWS) -> float:  # fmt: skip
    """What a mask's misses cost one head: ``‖(P̃ − P) V‖_F / ‖P V‖_F`` (definitions §4).

    P is the head's recorded entmax attention and V its values; P̃ is α-entmax of the head's
    own scores (``out.scores``: its scaling rule and logit cap) over the pairs of ``mask`` (an
    (n, n) bool, or any shape that squeezes to it) inside the valid region only, −∞ elsewhere,
    at the head's α; a row with no kept key is zeros. A row whose mask keeps every pair of its
    P's support has P̃ = P exactly (entmax restricted to a superset of its support is itself:
    sparse-consistency, definitions §1), so the gold mask G = P > 0 gives exactly 0. Computed
    in blocks of ``rows`` query rows of the one head (no (n, n) scores held; P read per block
    from the run's store, dense or CSR), summed in float64. Needs the run's values
    (``out.values``; a :class:`ValueError` when it has none).
    """
    from .entmax import entmax

    if out.values is None:
        raise ValueError("this run recorded no values (RunOutput.values): no output error")
    n = out.n
    m = mask.reshape(-1, n, n) if isinstance(mask, Tensor) else None
    if m is None or m.dtype != torch.bool or m.shape[0] != 1:
        raise ValueError(f"mask must be one head's (n, n) bool mask, n = {n}")
    m = m[0]
    q = out.queries[layer, head].float()  # (n, d)
    k = out.keys[layer, head].float()
    v = out.values[layer, head].double()
    d = q.shape[-1]
    scale = float(out.scaling[layer]) if out.scaling is not None else d**-0.5
    alpha = float(out.alpha_table()[layer, head])
    num = den = 0.0
    for r0 in range(0, n, rows):
        r1 = min(n, r0 + rows)
        s = (q[r0:r1] @ k.T) * scale  # (r, n)
        if out.softcap is not None:
            s = torch.tanh(s / out.softcap) * out.softcap
        kept = m[r0:r1].to(s.device)
        if out.causal:
            kept = kept & torch.ones(r1 - r0, n, dtype=torch.bool).tril(r0)
        p = out.attn.rows(layer, head, slice(r0, r1)).to("cpu", torch.float32)  # (r, n)
        pt = entmax(s.masked_fill(~kept, -math.inf), alpha)
        whole = ~((p > 0) & ~kept).any(dim=1)  # the row's support is all kept: P̃ = P
        pt[whole] = p[whole]
        pv = p.double() @ v
        num += float(((pt.double() - p.double()) @ v).pow(2).sum())
        den += float(pv.pow(2).sum())
    if den == 0.0:
        return 0.0 if num == 0.0 else math.inf
    return math.sqrt(num / den)
