"""Sparsity–recall sweeps and Pareto frontiers (definitions §4; paper §5–§6, Figures 2 and 4).

For one text (:func:`sweep_text`, the page's live plot; :func:`summary`, every method at its
defaults) or a corpus (:func:`sweep_corpus`, the ``sparsescope pareto`` command) every method of
the registry is evaluated at every point of its grid (``Method.grid``): sparsity, recall, exact
and precision per (layer, head), aggregated as definitions §4 says (per head: the mean over texts,
each text weighted equally; overall: the plain mean over heads); each method's frontier is
``metrics.pareto_front`` of its (sparsity, recall) points.

No (L, H, n, n) mask is built per grid point: :func:`sweep_points` asks each method's ``measure``
hook (``sparse_core.methods.base``), which builds its base masks straight as row bitsets and
crosses every window width into them at once (``sparse_core.bitsets``). Every figure equals
``methods.evaluate`` on the explicit mask (tests/core/test_pareto.py).

Modules: ``points`` (sweep_points, the JSON of points and frontiers), ``text_sweep`` (TextSweep,
sweep_text, summary), ``corpus_sweep`` (Totals, sweep_inputs, CorpusSweep, sweep_corpus).
"""

from __future__ import annotations

from .corpus_sweep import CorpusSweep, Totals, corpus_grids, sweep_corpus, sweep_inputs
from .points import DEFAULT_BLOCK, X_AXES, check_axis, frontier, points_json, rounded, sweep_points
from .text_sweep import TextSweep, summary, summary_tables, sweep_text

__all__ = [
    "DEFAULT_BLOCK",
    "X_AXES",
    "check_axis",
    "CorpusSweep",
    "TextSweep",
    "Totals",
    "corpus_grids",
    "frontier",
    "points_json",
    "rounded",
    "summary",
    "summary_tables",
    "sweep_corpus",
    "sweep_inputs",
    "sweep_points",
    "sweep_text",
]
