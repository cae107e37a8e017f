"""Structured attention patterns as pure functions returning ``(n, n)`` ``torch.bool`` masks.

definitions §2. Rows are queries i, columns keys j, positions 0-based; ``mask[i, j]`` is True iff
query i may attend to key j. Every function is deterministic: the "random" patterns (BigBird,
Longformer) draw from the integer hash of :mod:`sparse_core.rng`, so the browser recomputes
identical masks.

Sparse Transformer patterns (Child et al. 2019), stride / block length l, c summary positions:

============  =========================================  ==========================================
pattern       causal (the paper's form, j <= i always)   bidirectional (project choice)
============  =========================================  ==========================================
strided A1    max(0, i - l) <= j <= i                    |i - j| <= l
strided A2    (i - j) mod l = 0, j <= i                  (i - j) mod l = 0
fixed A1      floor(j / l) = floor(i / l), j <= i        floor(j / l) = floor(i / l)
fixed A2      j mod l >= l - c, j <= i                   j mod l >= l - c  (every row)
============  =========================================  ==========================================

Project choice for fixed A2: the source page writes ``j mod l ∈ {l - c, ..., l}``; ``l`` can never
occur, so A2 is the *last c positions of each block* (as in OpenAI's and DeepSpeed's code).
``part="union"`` gives the paper's "merged head" A1 ∪ A2.

Add-ons and other patterns: window of width w (|i - j| <= floor(w / 2)), global tokens (full rows
and columns), BigBird (window + globals + r random keys per row), Longformer (window + g random
global tokens). :func:`finish` ORs the common window/global add-ons into any predicted mask and ANDs
the valid region (all pairs, or j <= i when causal), as every method does (docs/architecture.md).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Literal

import torch
from torch import Tensor

from .rng import BIGBIRD_STREAM, LONGFORMER_STREAM, hash_uniform_t

Part = Literal["A1", "A2", "union"]
PARTS = ("A1", "A2", "union")


# ----------------------------------------------------------------------------- validation


def _int(name: str, value: object, minimum: int) -> int:
    """``value`` as an int >= ``minimum``, else a ValueError naming the parameter."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    try:
        v = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}") from None
    if v < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {v}")
    return v


def _part(part: str) -> str:
    if part not in PARTS:
        raise ValueError(f"part must be one of 'A1', 'A2', 'union', got {part!r}")
    return part


def _grid(n: int) -> tuple[Tensor, Tensor]:
    ar = torch.arange(n)
    return ar[:, None], ar[None, :]  # i: (n, 1), j: (1, n)


def _positions(n: int, positions: Sequence[int], name: str) -> list[int]:
    """Resolve positions in [-n, n) (negative ones count from the end) to [0, n)."""
    out = []
    for p in positions:
        q = _int(name, p, -n)
        if q >= n:
            raise ValueError(f"{name} must lie in [-{n}, {n}) for n = {n}, got {q}")
        out.append(q % n)
    return out


# ----------------------------------------------------------------------------- basic regions


def valid_region(n: int, causal: bool) -> Tensor:
    """The valid region V (definitions §4): all n² pairs, or {(i, j) : j <= i} (n(n+1)/2) when
    causal."""
    n = _int("n", n, 1)
    full = torch.ones(n, n, dtype=torch.bool)
    return full.tril() if causal else full


def _band(n: int, width: int) -> Tensor:
    """Bidirectional window of width ``width`` (validated): |i - j| <= floor(w/2); w = 0 empty."""
    if width == 0:
        return torch.zeros(n, n, dtype=torch.bool)
    h = width // 2  # j − i ≥ −h and j − i ≤ h: two triangle cuts (no (n, n) int64 grid)
    return torch.ones(n, n, dtype=torch.bool).triu_(-h).tril_(h)


def window(n: int, width: int, *, causal: bool = False) -> Tensor:
    """Local window of width w (definitions §2): ``{(i, j) : |i - j| <= floor(w / 2)}``.

    Odd w is the definition (docs/definitions.md §2): w keys per interior row, centred on the
    diagonal. ``w = 0`` means "off" (the empty mask). Project choice for even w: the same formula,
    floor(w / 2), so an even width behaves like w + 1 (the mask stays symmetric; no side is
    privileged). Causal mode keeps j <= i, i.e. ``i - floor(w / 2) <= j <= i``.
    """
    n = _int("n", n, 1)
    width = _int("width", width, 0)
    m = _band(n, width)
    return m & valid_region(n, causal)


def global_tokens(n: int, positions: Sequence[int]) -> Tensor:
    """Global tokens (definitions §2): each position p gets a full row (p attends to all) and a full
    column (all attend to p). Negative positions count from the end (-1 is the last token);
    positions must lie in [-n, n). The mask is bidirectional; :func:`finish` or the caller applies
    causality.
    """
    n = _int("n", n, 1)
    pos = _positions(n, positions, "positions")
    g = torch.zeros(n, dtype=torch.bool)
    if pos:
        g[torch.tensor(pos)] = True
    return g[:, None] | g[None, :]  # (n, n)


# ----------------------------------------------------------------------------- Sparse Transformer


def strided(n: int, stride: int, *, causal: bool = True, part: Part = "union") -> Tensor:
    """Strided attention (Child et al. 2019; definitions §2), stride l.

    Causal (the paper): ``A1 = {j : max(0, i - l) <= j <= i}`` (l + 1 positions),
    ``A2 = {j : (i - j) mod l = 0, j <= i}``.
    Bidirectional (project choice; no reference defines one): ``A1 = {j : |i - j| <= l}``,
    ``A2 = {j : (i - j) mod l = 0}`` in both directions.
    ``part`` selects A1, A2 or their union (the "merged head").
    """
    n = _int("n", n, 1)
    stride = _int("stride", stride, 1)
    part = _part(part)
    # both parts depend on d = i − j alone: decide each of the 2n − 1 offsets once and lay the
    # (n, n) mask out as a Toeplitz view (row i, column n − 1 − j reads offset i − j), no
    # (n, n) int64 grid
    d = torch.arange(-(n - 1), n)
    a1 = d.abs() <= stride
    a2 = d.remainder(stride) == 0
    keep = a1 if part == "A1" else a2 if part == "A2" else a1 | a2
    m = keep.as_strided((n, n), (1, 1)).flip(1)
    return m & valid_region(n, causal)


def fixed(
    n: int,
    stride: int,
    c: int,
    *,
    causal: bool = True,
    part: Part = "union",
    head: int | None = None,
) -> Tensor:
    """Fixed factorized attention (Child et al. 2019; definitions §2), block length l, c summary
    positions.

    ``A1 = {j : floor(j / l) = floor(i / l)}`` (the block of i),
    ``A2 = {j : j mod l >= l - c}``: project choice, the last c positions of every block (the
    page's ``{l - c, ..., l}`` cannot contain l). Causal (the paper) intersects both with j <= i;
    bidirectional (project choice) keeps the whole block and lets every row see every summary
    column.

    ``head = h`` spreads heads over distinct summary sub-blocks as the paper recommends: head h
    takes the c-wide chunk ``q = h mod (l // c)`` counted back from the block end,
    ``A2 = {j : l - (q + 1) c <= j mod l < l - q c}``; ``head=None`` (or any h with q = 0) is the
    last c positions. Requires 1 <= c <= l.
    """
    n = _int("n", n, 1)
    stride = _int("stride", stride, 1)
    c = _int("c", c, 1)
    if c > stride:
        raise ValueError(f"c must be <= stride ({stride}), got {c}")
    part = _part(part)
    q = 0 if head is None else _int("head", head, 0) % (stride // c)
    i, j = _grid(n)
    a1 = (i // stride) == (j // stride)  # (n, n)
    r = (j % stride).expand(n, n)  # position of key j inside its block
    a2 = (r >= stride - (q + 1) * c) & (r < stride - q * c)
    m = a1 if part == "A1" else a2 if part == "A2" else a1 | a2
    return m & valid_region(n, causal)


# ----------------------------------------------------------------------------- random patterns


def _sample_rows(free: Tensor, k: int, seed: int, stream: int) -> Tensor:
    """Draw min(k, m_i) of the m_i True columns of each row of ``free`` (n, n), without replacement.

    The JS-portable procedure, per row i (a partial Fisher-Yates shuffle)::

        cand = [j for j in 0..n-1 if free[i][j]]        # ascending; m = len(cand)
        for t in 0 .. min(k, m) - 1:
            p = t + floor(hash_uniform(seed, stream, i, t) * (m - t))
            swap(cand[t], cand[p])
        chosen = cand[0 .. min(k, m) - 1]

    Vectorised here over rows: step t is applied to every row with m_i > t.
    """
    n = free.shape[0]
    cols = torch.arange(n)
    m = free.sum(1)  # (n,) number of candidates per row
    # free columns first, ascending, then the others: cand[i, :m_i] is row i's candidate list
    cand = torch.where(free, cols, cols + n).argsort(dim=1)  # (n, n)
    rows = torch.arange(n)
    steps = min(k, n)
    for t in range(steps):
        active = m > t  # (n,)
        u = hash_uniform_t(seed, stream, rows, t)  # (n,) float64
        span = (m - t).clamp(min=1).to(torch.float64)
        p = (t + torch.floor(u * span).to(torch.int64)).clamp(max=n - 1)[:, None]  # (n, 1)
        a = cand[:, t].clone()
        b = cand.gather(1, p)[:, 0]
        cand[:, t] = torch.where(active, b, a)
        cand.scatter_(1, p, torch.where(active, a, b)[:, None])
    chosen = torch.zeros(n, n, dtype=torch.bool)
    take = cols[None, :steps] < m[:, None].clamp(max=steps)  # (n, steps)
    chosen.scatter_(1, cand[:, :steps], take)
    return chosen


def bigbird(
    n: int,
    *,
    random_keys: int,
    window: int = 3,
    globals_: Sequence[int] = (0, -1),
    seed: int = 0,
    causal: bool = False,
) -> Tensor:
    """BigBird (definitions §2): window of width ``window`` + global tokens ``globals_`` + r random
    keys.

    Row i gets ``B_i = window ∪ globals`` (global positions have full rows and columns), then
    ``r = random_keys`` random keys drawn uniformly *without replacement* among the valid keys not
    in B_i (causal: among j <= i); if fewer than r such keys remain the row takes them all. So
    every row holds ``|B_i ∩ V| + min(r, |V_i \\ B_i|)`` keys.

    The draw is the partial Fisher-Yates procedure of ``_sample_rows`` with
    ``hash_uniform(seed, BIGBIRD_STREAM = 1, i, t)``; ``seed`` is the caller's per-head value
    (e.g. ``layer * 1000 + head``). The result is ANDed with the valid region.
    """
    n = _int("n", n, 1)
    r = _int("random_keys", random_keys, 0)
    width = _int("window", window, 0)
    seed = operator.index(seed)
    v = valid_region(n, causal)
    base = (_band(n, width) | global_tokens(n, _positions(n, globals_, "globals_"))) & v
    if r == 0:
        return base
    return base | _sample_rows(v & ~base, r, seed, BIGBIRD_STREAM)


def longformer_globals(n: int, n_globals: int, seed: int = 0) -> list[int]:
    """The g = min(n_globals, n) random global positions of :func:`longformer`, in draw order.

    Partial Fisher-Yates over ``cand = [0, 1, ..., n - 1]``: for t = 0 .. g - 1,
    ``p = t + floor(hash_uniform(seed, LONGFORMER_STREAM = 2, t) * (n - t))``, swap cand[t] and
    cand[p]; the globals are cand[0 .. g - 1].
    """
    n = _int("n", n, 1)
    g = min(_int("n_globals", n_globals, 0), n)
    seed = operator.index(seed)
    cand = list(range(n))
    if g == 0:
        return []
    u = hash_uniform_t(seed, LONGFORMER_STREAM, torch.arange(g)).tolist()
    for t in range(g):
        p = t + int(u[t] * (n - t))  # floor: the product is >= 0
        cand[t], cand[p] = cand[p], cand[t]
    return cand[:g]


def longformer(
    n: int, *, width: int, n_globals: int, seed: int = 0, causal: bool = False
) -> Tensor:
    """Longformer (definitions §2): window of width ``width`` + g random global tokens for the text.

    The g = min(n_globals, n) global positions (project choice: drawn uniformly without replacement
    among all n positions, see :func:`longformer_globals`; more than n is clamped to n) get full
    rows and columns. The result is ANDed with the valid region.
    """
    n = _int("n", n, 1)
    width = _int("width", width, 0)
    pos = longformer_globals(n, n_globals, seed)
    return (_band(n, width) | global_tokens(n, pos)) & valid_region(n, causal)


# ----------------------------------------------------------------------------- finishing


def finish(
    mask: Tensor, *, window: int = 0, globals_: bool = False, causal: bool = False
) -> Tensor:
    """Finish a predicted mask ``(..., n, n)`` (definitions §3, docs/architecture.md).

    ``M' = (M ∪ W_w ∪ Glob) ∩ V``: OR in the window of width ``window`` (0 = off) and, if
    ``globals_``, full rows and columns for the first and last token; then AND the valid region
    (causal: j <= i). Returns a new bool tensor; ``mask`` is not modified.
    """
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must be a torch.bool tensor, got dtype {mask.dtype}")
    if mask.dim() < 2 or mask.shape[-1] != mask.shape[-2]:
        raise ValueError(f"mask must have shape (..., n, n), got {tuple(mask.shape)}")
    n = mask.shape[-1]
    width = _int("window", window, 0)
    add = _band(n, width)
    if globals_:
        add = add | global_tokens(n, (0, -1))
    add = add.to(mask.device)
    return (mask | add) & valid_region(n, causal).to(mask.device)
