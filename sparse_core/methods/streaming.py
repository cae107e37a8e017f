"""KV-cache-style token patterns (SPEC §8): StreamingLLM, H2O and MInference's vertical-slash.

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
streaming       sinks 4, recent 16              sinks {1, 4} × recent {1, 2, 4, …, 128}
h2o             recent 8, k 16                  k {4, 8, 16, 32, 64} × recent {2, 8, 32}
vertical-slash  last 64, verticals / slashes 16  last 64 × (verticals = slashes) {4, 8, …, 128}
==============  ==============================  ==============================================

(values clamped to n). StreamingLLM's and H2O's recent band is crossed in by the engine like the
window add-on (``Method.band``): one base per sinks / k serves every recent.
"""

from __future__ import annotations

import numpy as np
import torch

from ..bitsets import pack, row_bits, words
from .base import ArenaMethod
from .context import PredictContext
from .selection import first_k_mask, stable_order, threshold_bits
from .spec import ParamSpec

RECENTS = (1, 2, 4, 8, 16, 32, 64, 128)
H2O_KS = (4, 8, 16, 32, 64)
H2O_RECENTS = (2, 8, 32)
VS_BUDGETS = (4, 8, 16, 32, 64, 128)


def _band_mask(n: int, recent: int) -> torch.Tensor:
    d = torch.arange(n)[:, None] - torch.arange(n)[None, :]
    return d.abs() <= recent


class StreamingMethod(ArenaMethod):
    """StreamingLLM: attention sinks (the first ``sinks`` keys) and the recent band."""

    name, label = "streaming", "StreamingLLM (sinks + recent)"
    text_independent = True

    def own_params(self, n, artefact=None):
        return [
            ParamSpec("sinks", "sink tokens", "int", min(4, n), 0, n, 1,
                      help="the first keys every query keeps (attention sinks)"),
            ParamSpec("recent", "recent window", "int", min(16, n - 1), 0, max(n - 1, 0), 1,
                      help="keys with |i − j| ≤ recent (causal: the last recent + 1)"),
        ]  # fmt: skip

    def own_grid(self, n, artefact=None):
        return [{"sinks": min(s, n), "recent": r} for s in (1, 4) for r in RECENTS if r <= n - 1]

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
    return total[:, None, :] - ctx.head_probs(layer).numpy()  # float32: C_j − P_ij


class H2OMethod(ArenaMethod):
    """H2O: per query the k heavy hitters (largest accumulated mass) and the recent band."""

    name, label = "h2o", "H2O (heavy hitters + recent)"

    def own_params(self, n, artefact=None):
        return [
            ParamSpec("recent", "recent window", "int", min(8, n - 1), 0, max(n - 1, 0), 1,
                      help="keys with |i − j| ≤ recent"),
            ParamSpec("k", "heavy hitters k", "int", min(16, n), 0, n, 1,
                      help="keys with the most attention mass accumulated from other queries"),
        ]  # fmt: skip

    def own_grid(self, n, artefact=None):
        return [{"recent": r, "k": k} for k in H2O_KS if k <= n for r in H2O_RECENTS if r < n]

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


def vs_scores(ctx: PredictContext, layer: int, head: int, last: int) -> tuple[np.ndarray, ...]:
    """(column masses (n,), diagonal masses (2n − 1,) at index d + n − 1) of the last ``last``
    queries' rows of P, float64, added row by row in order (the page repeats the sums)."""
    n = ctx.n
    rows = ctx.probs_rows(layer, head, slice(n - last, n)).numpy()  # (last, n) float32
    cols = np.zeros(n)
    diag = np.zeros(2 * n - 1)
    for r, i in enumerate(range(n - last, n)):
        cols += rows[r]
        diag[i : i + n] += rows[r][::-1]  # j = 0..n−1 -> offset i − j at index i − j + n − 1
    return cols, diag


class VerticalSlashMethod(ArenaMethod):
    """MInference's vertical-slash pattern: top columns and top diagonals of the last queries'
    attention, kept for every query."""

    name, label = "vertical-slash", "MInference vertical-slash"

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

    def head_sets(self, ctx, layer, head, p) -> tuple[np.ndarray, np.ndarray]:
        """(kept columns (n,) bool, kept offsets (2n − 1,) bool at index d + n − 1)."""
        n = ctx.n
        cols, diag = vs_scores(ctx, layer, head, p["last"])
        ckeep = first_k_mask(cols, p["verticals"]).numpy()
        cand = np.arange(2 * n - 1) >= (n - 1 if ctx.causal else 0)  # causal: d >= 0 only
        order = stable_order(np.where(cand, diag, -np.inf))
        dkeep = np.zeros(2 * n - 1, dtype=bool)
        dkeep[order[: min(p["slashes"], int(cand.sum()))]] = True
        return ckeep, dkeep

    def _head_mask(self, ctx, layer, head, p) -> np.ndarray:
        n = ctx.n
        ckeep, dkeep = self.head_sets(ctx, layer, head, p)
        idx = np.arange(n)[:, None] - np.arange(n)[None, :] + n - 1  # offset index of (i, j)
        return dkeep[idx] | ckeep[None, :]

    def base(self, ctx, p):
        L, H = ctx.layers, ctx.heads
        m = [[self._head_mask(ctx, li, hi, p) for hi in range(H)] for li in range(L)]
        return torch.from_numpy(np.array(m, dtype=bool))  # (L, H, n, n)

    def base_bits(self, ctx, own):
        L, H = ctx.layers, ctx.heads
        return np.stack([pack(self._head_mask(ctx, li, hi, own)) for li in range(L)
                         for hi in range(H)])  # fmt: skip  # (L·H, n, W)
