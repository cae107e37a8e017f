"""The paper's sweep grids, default strides and per-head seeds (definitions §2–§4; paper §5–§6).

Every method's sweep grid (``Method.grid``) crosses its own grid with the window widths
:func:`sweep_windows` = {0, 1, 3, 5, 7, 9, 11, 15, 19, 23, 27} (paper §5, MT), plus for n ≥ 256
the masked-LM widths {31, 41, 51, 75, 101, 125, 151, 175, 201, 251} (§6); widths above 2n − 1
(wider than any text of n tokens needs) are dropped. Above ``COARSE_N`` tokens (a long text)
every second width is swept, {0, 3, 7, 11, 19, 27, 41, 75, 125, 175, 251}: about
half the points (a one-head sweep at n = 4,096 took 112 s), the same span of widths.

The paper methods' own grids are a few values of the paper's, both ends kept
(``SWEEP_BUCKETS``, ``RANDOM_COUNTS``, ``SWEEP_KMEANS``, ``SWEEP_THRESHOLDS``; docs/methods.md
"Sweep grids": the frontiers they trace, against the fuller grids); the sliders keep every value.
"""

from __future__ import annotations

import math

from ..sparsefinder import CLUSTER_COUNTS

#: Window widths of the paper's MT sweep (§5) and, added for n >= 256, of its masked-LM sweep (§6).
WINDOWS_MT = (0, 1, 3, 5, 7, 9, 11, 15, 19, 23, 27)
WINDOWS_MLM = (31, 41, 51, 75, 101, 125, 151, 175, 201, 251)
#: Above this many tokens the window widths are swept coarser (every second one).
COARSE_N = 2048
#: Bucket / cluster counts the sliders offer (Reformer, Routing; the artefact's k-means fits).
BUCKET_COUNTS = (2, 4, 6, 8, 10, 12, 16, 20)
#: The sweeps' own grids (docs/methods.md "Sweep grids"): a few values of the paper's grids
#: and both ends, chosen for cost (the corpus sweep of every method within
#: 2.5 minutes; the page's one-head sweep and summary) — the points these drop were
#: rarely on a method's frontier over sparsity 0.5–0.98 (≤ 0.015 recall below it on held-out
#: WikiText-2) and lie between the points kept.
SWEEP_BUCKETS = (2, 8, 20)  # Reformer B, sf-quantization B, Routing C (8 values, then 5)
RANDOM_COUNTS = (2, 8, 20)  # BigBird keys, Longformer globals (2, 4, …, 20, then 5 values)
SWEEP_KMEANS = (4, 12, 20)  # sf-kmeans B, those of them the artefact fitted (all, then 4)
SWEEP_THRESHOLDS = (0.5, 1.0, 2.0, 3.0, 5.0)  # sf-distance t (was 0.5, 1.0, …, 5.0)
#: Most Reformer hash rounds a slider offers (the page receives every round up to this).
REFORMER_MAX_ROUNDS = 4
#: Largest sf-distance threshold a slider offers.
SF_DISTANCE_MAX = 10.0


def head_seed(layer: int, head: int) -> int:
    """The per-head seed of BigBird's random keys and Longformer's random globals:
    ``layer * 1000 + head`` (the browser uses the same, docs/architecture.md)."""
    return int(layer) * 1000 + int(head)


def stride_default(n: int) -> int:
    """``s(n) = max(2, round(√n))`` clamped to n: the default Sparse Transformer stride."""
    return max(1, min(n, max(2, round(math.sqrt(n)))))


def strides(n: int) -> list[int]:
    """The swept strides l ∈ {s/2, s, 2s} (s = :func:`stride_default`, rounded, ≥ 2, ≤ n)."""
    s = stride_default(n)
    return sorted({max(1, min(n, max(2, round(s * f)))) for f in (0.5, 1.0, 2.0)})


def sweep_windows(n: int) -> list[int]:
    """Window widths swept for length n (module docstring): every second one above COARSE_N."""
    ws = list(WINDOWS_MT) + (list(WINDOWS_MLM) if n >= 256 else [])
    if n > COARSE_N:
        ws = ws[::2]  # 21 widths -> 11, from 0 to 251 still
    return [w for w in ws if w <= 2 * n - 1]


def random_counts(n: int) -> list[int]:
    """BigBird's random keys / Longformer's random globals swept for length n:
    :data:`RANDOM_COUNTS` clamped to n (at most n per row or per text), without repeats."""
    return sorted({min(r, n) for r in RANDOM_COUNTS})


def cluster_choices(n: int, counts: tuple[int, ...] = BUCKET_COUNTS) -> list[int]:
    """Routing's cluster counts for length n: ``counts`` (the sliders' :data:`BUCKET_COUNTS`,
    or the sweep's :data:`SWEEP_BUCKETS`) up to max(n, 2)."""
    ch = [c for c in counts if c <= max(n, 2)]
    return ch or [counts[0]]


def kmeans_choices(artefact) -> list[int]:
    """sf-kmeans's cluster counts: the artefact's fitted centroid counts (sorted), or the
    default :data:`sparse_core.sparsefinder.CLUSTER_COUNTS` without one."""
    if artefact is not None and artefact.centroids:
        return sorted(int(b) for b in artefact.centroids)
    return list(CLUSTER_COUNTS)


def kmeans_sweep(artefact) -> list[int]:
    """sf-kmeans's swept cluster counts: the fitted ones in :data:`SWEEP_KMEANS`, or every
    fitted one when none of them is (an artefact fitted at other counts)."""
    ch = kmeans_choices(artefact)
    return [b for b in ch if b in SWEEP_KMEANS] or ch
