"""KV-cache-style token patterns (definitions §8): StreamingLLM, H2O and MInference's
vertical-slash.

Each keeps, for every query, keys chosen by position or by attention already paid, the way a
decoder's KV cache would keep them (docs/methods.md gives the exact forms and where they differ
from the authors' code). Notation: n tokens, V the valid region (causal: j ≤ i), P the entmax
probabilities, ties to the lower index.

- ``streaming`` (Xiao et al. 2024, StreamingLLM; mit-han-lab/streaming-llm,
  streaming_llm/kv_cache.py ``StartRecentKVCache``): M = {j < sinks} ∪ {|i − j| ≤ recent}.
- ``h2o`` (Zhang et al. 2023, H2O; FMInference/H2O, h2o_hf/utils_lm_eval/modify_llama.py
  ``local_heavy_hitter_mask`` and the recent band OR'd after it): M = HH_k ∪ {|i − j| ≤ recent},
  HH_k(i) the k keys with the largest accumulated mass A_ij — causal A_ij = Σ_{i' < i} P_i'j,
  bidirectional A_ij = Σ_{i' ≠ i} P_i'j = C_j − P_ij — in float32, added one query at a time
  (``PredictContext.column_mass``).
- ``vertical-slash`` (Jiang et al. 2024, MInference; microsoft/MInference,
  minference/modules/minference_forward.py ``vertical_and_slash_kernel``): from the last
  ``last`` queries' attention rows, the column masses c_j = Σ_i P_ij and the diagonal masses
  s_d = Σ_i P_{i, i − d} (float64, added row by row in order); the top ``verticals`` columns and
  the top ``slashes`` offsets d (causal d ∈ [0, n); bidirectional d ∈ (−n, n)) are kept for
  every query: M = {j ∈ cols} ∪ {i − j ∈ offsets}.

Defaults and own grids (every grid point with window 0 and globals off, ``base.ArenaMethod``):

==============  ==============================  ==============================================
method          defaults                        grid
==============  ==============================  ==============================================
streaming       sinks 4, recent 16              sinks 4 × recent {1, 2, 4, …, 128}
h2o             recent 8, k 16                  recent = k ∈ {2, 8, 32}
vertical-slash  last 64, verticals / slashes 16  last 64 × (verticals = slashes) {4, 16, 64}
==============  ==============================  ==============================================

(values clamped to n). StreamingLLM's and H2O's recent band is crossed in by the engine like the
window add-on (``Method.band``): one base per sinks / k serves every recent.
"""

from __future__ import annotations

import numpy as np
import torch

from .._method_kernels import h2o_largest
from ..bitsets import row_bits, selection_counts, words
from .base import ArenaMethod
from .context import PredictContext
from .selection import first_k_mask, stable_order, threshold_bits, threshold_counts
from .spec import ParamSpec

RECENTS = (1, 2, 4, 8, 16, 32, 64, 128)
#: H2O's grid: heavy hitters and recent keys in equal parts, as the paper's budgets
H2O_BUDGETS = (2, 8, 32)
VS_BUDGETS = (4, 16, 64)


def _band_mask(n: int, recent: int) -> torch.Tensor:
    d = torch.arange(n)[:, None] - torch.arange(n)[None, :]
    return d.abs() <= recent


class StreamingMethod(ArenaMethod):
    """StreamingLLM: attention sinks (the first ``sinks`` keys) and the recent band."""

    name, label = "streaming", "StreamingLLM (sinks + recent)"
    cost_rank = 3
    family = "predictors"
    text_independent = True

    def own_params(self, n, artefact=None):
        return [
            ParamSpec("sinks", "sink tokens", "int", min(4, n), 0, n, 1,
                      help="the first keys every query keeps (attention sinks)"),
            ParamSpec("recent", "recent window", "int", min(16, n - 1), 0, max(n - 1, 0), 1,
                      help="keys with |i − j| ≤ recent (causal: the last recent + 1)"),
        ]  # fmt: skip

    def own_grid(self, n, artefact=None):
        return [{"sinks": min(4, n), "recent": r} for r in RECENTS if r <= n - 1]

    def base(self, ctx, p):
        n = ctx.n
        sinks = torch.arange(n)[None, :] < p["sinks"]
        return sinks | _band_mask(n, p["recent"])

    def band(self, own):
        return own["recent"]

    def base_params(self, own):
        return {"sinks": own["sinks"]}

    def base_bits(self, ctx, own):
        key = ("bits", self.name, own["sinks"])
        n = ctx.n

        def make():
            cols = row_bits(n, np.arange(n) < own["sinks"])  # (W,)
            return np.broadcast_to(cols, (1, n, words(n))).copy()

        return ctx.memo(key, make)


def h2o_mass(ctx: PredictContext, layer: int) -> np.ndarray:
    """(H, n, n) float32: H2O's accumulated mass A_ij of every head of ``layer`` (module
    docstring): causal, the mass before query i; bidirectional, every other query's."""
    if ctx.causal:
        return ctx.column_mass(layer, None, prefix=True)
    total = ctx.column_mass(layer, None)  # (H, n)
    return total[:, None, :] - ctx.head_probs(layer)  # float32: C_j − P_ij


def h2o_top(col: np.ndarray, vals: np.ndarray, K: int) -> np.ndarray:
    """(H·n, K) float32: each row's K largest bidirectional masses A_ij = C_j − P_ij ascending
    (with repeats: ``np.sort(np.partition(vals, n − K)[:, n − K:])`` exactly), from col (H, n)
    the column masses C and vals (H·n, n) the masses: one descending order of C per head, a
    row's values differing from C only on its support (``_method_kernels.h2o_largest``)."""
    order = np.argsort(-col, axis=1, kind="stable")  # (H, n): keys by C descending
    return h2o_largest(np.ascontiguousarray(vals), np.ascontiguousarray(col), order, K)


class H2OMethod(ArenaMethod):
    """H2O: per query the k heavy hitters (largest accumulated mass) and the recent band."""

    name, label = "h2o", "H2O (heavy hitters + recent)"
    cost_rank = 10
    family = "predictors"

    def own_params(self, n, artefact=None):
        return [
            ParamSpec("recent", "recent window", "int", min(8, n - 1), 0, max(n - 1, 0), 1,
                      help="keys with |i − j| ≤ recent"),
            ParamSpec("k", "heavy hitters k", "int", min(16, n), 0, n, 1,
                      help="keys with the most attention mass accumulated from other queries"),
        ]  # fmt: skip

    def own_grid(self, n, artefact=None):
        return [{"recent": b, "k": b} for b in H2O_BUDGETS if b < n]

    def base(self, ctx, p):
        hh = [first_k_mask(h2o_mass(ctx, li), p["k"]) for li in range(ctx.layers)]
        return torch.stack(hh) | _band_mask(ctx.n, p["recent"])  # (L, H, n, n)

    def band(self, own):
        return own["recent"]

    def base_params(self, own):
        return {"k": own["k"]}

    def bases_bits(self, ctx, owns):
        # one sort of every layer's masses serves every k (selection.threshold_bits)
        n, H = ctx.n, ctx.heads
        ks = [own["k"] for own in owns]
        out = [np.empty((ctx.head_count(), n, words(n)), dtype=np.uint64) for _ in ks]
        for li in range(ctx.layers):
            rows = h2o_mass(ctx, li).reshape(H * n, n)
            for o, bits in zip(out, threshold_bits(rows, ks), strict=True):
                o[li * H : (li + 1) * H] = bits.reshape(H, n, -1)
        return iter(out)

    def base_bits(self, ctx, own):
        return next(self.bases_bits(ctx, [own]))

    def plain_counts(self, ctx, gold, owns):
        pairs = [(own["k"], own["recent"]) for own in owns]
        if not ctx.causal:  # A = C − P: each row's K largest from C's order (h2o_top)
            cols: dict[int, np.ndarray] = {}

            def values(li: int) -> np.ndarray:
                cols[li] = ctx.column_mass(li, None)  # (H, n)
                return cols[li][:, None, :] - ctx.head_probs(li)  # as h2o_mass

            return threshold_counts(
                gold, values, pairs, lambda li, v, K: h2o_top(cols.pop(li), v, K)
            )

        def values(li: int) -> np.ndarray:
            a = h2o_mass(ctx, li)  # −∞ outside V (selection.threshold_counts)
            return np.where(np.tri(ctx.n, dtype=bool), a, np.float32(-np.inf))

        return threshold_counts(gold, values, pairs)


def vs_scores(
    ctx: PredictContext, layer: int, head: int | None, last: int
) -> tuple[np.ndarray, np.ndarray]:
    """(column masses (…, n), diagonal masses (…, 2n − 1) at index d + n − 1) of the last
    ``last`` queries' rows of P (every head of the layer when ``head`` is None), float64, added
    row by row in order (the page repeats the sums)."""
    n = ctx.n
    rows = ctx.probs_rows(layer, head, slice(n - last, n))  # (…, last, n) float32
    cols = np.zeros((*rows.shape[:-2], n))
    diag = np.zeros((*rows.shape[:-2], 2 * n - 1))
    for r, i in enumerate(range(n - last, n)):
        row = rows[..., r, :]
        cols += row
        diag[..., i : i + n] += row[..., ::-1]  # key j -> offset i − j at index i − j + n − 1
    return cols, diag


def vs_sets(cols: np.ndarray, diag: np.ndarray, verticals: int, slashes: int,
            causal: bool) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """(kept columns (…, n) bool, kept offsets (…, 2n − 1) bool): the top ``verticals`` columns
    and the top ``slashes`` offsets (causal: d >= 0 only), ties to the lower index."""
    n = cols.shape[-1]
    ckeep = first_k_mask(cols, verticals).numpy()
    cand = np.arange(2 * n - 1) >= (n - 1 if causal else 0)
    dkeep = first_k_mask(np.where(cand, diag, -np.inf), min(slashes, int(cand.sum()))).numpy()
    return ckeep, dkeep


class VerticalSlashMethod(ArenaMethod):
    """MInference's vertical-slash pattern: top columns and top diagonals of the last queries'
    attention, kept for every query."""

    name, label = "vertical-slash", "MInference vertical-slash"
    cost_rank = 5
    family = "predictors"

    def own_params(self, n, artefact=None):
        return [
            ParamSpec("last", "last queries", "int", min(64, n), 1, n, 1,
                      help="the queries whose attention estimates the pattern (the last ones)"),
            ParamSpec("verticals", "vertical lines", "int", min(16, n), 0, n, 1,
                      help="key columns kept for every query (most mass from the last queries)"),
            ParamSpec("slashes", "slash lines", "int", min(16, n), 0, 2 * n - 1, 1,
                      help="diagonals i − j kept for every query (most mass from the last ones)"),
        ]  # fmt: skip

    def own_grid(self, n, artefact=None):
        return [{"last": min(64, n), "verticals": b, "slashes": b} for b in VS_BUDGETS if b <= n]

    def scores(self, ctx: PredictContext, last: int) -> tuple[np.ndarray, np.ndarray]:
        """(L·H, n), (L·H, 2n − 1): :func:`vs_scores` of every head (memoised per text)."""

        def make():
            got = [vs_scores(ctx, li, None, last) for li in range(ctx.layers)]
            return np.concatenate([g[0] for g in got]), np.concatenate([g[1] for g in got])

        return ctx.memo((self.name, last), make)

    def sets(self, ctx, p) -> tuple[np.ndarray, np.ndarray]:
        cols, diag = self.scores(ctx, p["last"])
        return vs_sets(cols, diag, p["verticals"], p["slashes"], ctx.causal)

    def base(self, ctx, p):
        n = ctx.n
        ckeep, dkeep = self.sets(ctx, p)
        idx = np.arange(n)[:, None] - np.arange(n)[None, :] + n - 1  # offset index of (i, j)
        m = dkeep[:, idx] | ckeep[:, None, :]
        return torch.from_numpy(m).view(ctx.layers, ctx.heads, n, n)

    def sorted_sets(self, ctx, last: int) -> tuple[np.ndarray, np.ndarray, int]:
        """(columns (L·H, n), offsets (L·H, 2n − 1) each by :func:`vs_scores` descending, ties
        to the lower index; the valid offsets' count): :func:`vs_sets` of a budget is the first
        ``verticals`` / ``slashes`` of these (``first_k_mask``'s stable order), one sort of each
        per text serving every budget (memoised)."""

        def make():
            cols, diag = self.scores(ctx, last)
            n = ctx.n
            cand = np.arange(2 * n - 1) >= (n - 1 if ctx.causal else 0)
            return stable_order(cols), stable_order(np.where(cand, diag, -np.inf)), int(cand.sum())

        return ctx.memo((self.name, "sorted", last), make)

    def plain_counts(self, ctx, gold, owns):
        n, LH, causal = ctx.n, ctx.head_count(), ctx.causal
        T = -(-n // 16)
        r0 = np.arange(T) * 16
        r1 = np.minimum(r0 + 16, n) - 1
        rows = np.arange(n)
        held, size, occ = [], [], []
        # each gold edge's column and offset in the flat (L·H, n) / (L·H, 2n − 1) choices
        e_col = gold.e_lh * n + gold.e_j
        e_off = gold.e_lh * (2 * n - 1) + (gold.e_i - gold.e_j + n - 1)
        # column j meets the offsets of rows lo_j … n − 1 (lo_j = j causal, else 0): indices
        # lo_j − j + n − 1 … 2n − 2 − j of the offsets, a range of their prefix sums
        start = (rows if causal else np.zeros(n, dtype=np.int64)) - rows + n - 1
        stop = 2 * n - 1 - rows
        for own in owns:
            corder, dorder, ncand = self.sorted_sets(ctx, own["last"])
            ckeep = np.zeros((LH, n), dtype=bool)  # vs_sets: the first k of the stable orders
            np.put_along_axis(ckeep, corder[:, : max(0, min(own["verticals"], n))], True, axis=1)
            dkeep = np.zeros((LH, 2 * n - 1), dtype=bool)
            ks = max(0, min(own["slashes"], ncand, 2 * n - 1))
            np.put_along_axis(dkeep, dorder[:, :ks], True, axis=1)
            held.append(np.take(ckeep.reshape(-1), e_col) | np.take(dkeep.reshape(-1), e_off))
            cs = np.zeros((LH, 2 * n))
            np.cumsum(dkeep, axis=1, out=cs[:, 1:])
            if causal:  # valid keys j <= i: columns up to i, offsets d >= 0
                cv = np.cumsum(ckeep, axis=1)
                dv = cs[:, rows + n] - cs[:, n - 1 : n]
            else:
                cv = np.broadcast_to(ckeep.sum(axis=1, keepdims=True), (LH, n))
                dv = cs[:, rows + n] - cs[:, rows]
            # the pairs held twice (a kept column on a kept offset), per kept column: its kept
            # offsets over its valid rows (integers: the same sums in any order)
            both = ((cs[:, stop] - cs[:, start]) * ckeep).sum(axis=1)
            size.append((cv + dv).sum(axis=1) - both)
            # 16-tiles: a kept column reaches tile (a, c) if a row of a may see it; a kept offset
            # if it lies in the range of i − j over the tile (its pairs' offsets are contiguous)
            cpad = np.pad(np.where(ckeep, rows, n), ((0, 0), (0, T * 16 - n)), constant_values=n)
            first_col = cpad.reshape(LH, T, 16).min(axis=2)  # (LH, T) the lowest kept column
            ctile = first_col[:, None, :] <= (r1[None, :, None] if causal else n - 1)
            lo = r0[:, None] - r1[None, :]
            hi = r1[:, None] - r0[None, :]
            if causal:
                lo = np.maximum(lo, 0)
            ok = hi >= lo
            lo_i, hi_i = np.clip(lo + n - 1, 0, 2 * n - 1), np.clip(hi + n, 0, 2 * n - 1)
            dtile = ok & ((cs[:, hi_i] - cs[:, lo_i]) > 0)
            occ.append((ctile | dtile) & gold.tiles[16][0])
        return selection_counts(gold, np.stack(held), np.stack(size), np.stack(occ))
