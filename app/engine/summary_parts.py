"""An analysis' per-head summary, method by method (what the first view needs, first).

The analyze body's ``summary`` holds, per head (layer-major), the gold sparsity and every
available method's recall and sparsity at its defaults (``sparse_core.pareto.summary_tables``).
The page shows one method at a time (the head grid reads ``summary[k].methods[<shown>]``), so it
asks ``POST /api/analyze`` for that method's figures only (the request's ``summary`` field) and
fetches the others later (``GET /api/analyses/{id}/summary``). :class:`SummaryParts` keeps what
has been computed for one cached analysis: the gold sparsity (always: the grid colours by it and
the head payload sends it) and a table per method computed so far; a method is computed the
first time any request needs it, and never twice.

Each method's figures are exactly those of the whole summary: ``sweep_points`` of one method at
its defaults against the text's gold edges, whatever other methods are swept beside it (the
premise of ``summary_tables`` and of the two-core split, tests/app/test_lone.py). A whole body
put together from parts is byte for byte the one computed at once (``payloads.summary_json`` of
the same tables; tests/app/test_summary_parts.py).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

import numpy as np
import torch

from sparse_core.errors import SparsescopeError
from sparse_core.methods import METHODS, PredictContext, available
from sparse_core.pareto.text_sweep import summary_tables

from .errors import NotInAnalysis
from .payloads import analysis_json, round6, summary_json
from .two_cores import side_worker, splits_summary, summary_tables_on_two_cores

#: Tables of one method: {"recall": (L, H), "sparsity": (L, H)}.
Table = dict[str, Any]


def check_methods(names: Iterable[str], field: str) -> list[str]:
    """``names`` checked against the registry (a 400 naming ``field`` otherwise), in the
    registry's order, each once."""
    names = list(names)
    bad = [nm for nm in names if not isinstance(nm, str) or nm not in METHODS]
    if bad:
        raise SparsescopeError(
            f"{field} must list method names of {', '.join(METHODS)}; got {str(bad[0])[:40]!r}",
            field=field,
        )
    return [nm for nm in METHODS if nm in set(names)]


class SummaryParts:
    """The gold sparsity and the per-method tables of one analysis computed so far.

    ``gold``: (L, H) array; ``tables``: method name -> table, a subset of ``names`` (the methods
    available on the analysis' artefact, in the registry's order, as the whole summary lists
    them). :meth:`ensure` computes missing methods, under one lock.
    """

    def __init__(self, ctx: PredictContext, gold: np.ndarray, tables: dict[str, Table]) -> None:
        self.ctx = ctx
        self.names = available(ctx.artefact)
        self.gold = np.asarray(gold, dtype=np.float64)
        self.tables = dict(tables)
        self.lock = threading.Lock()
        self._gold_rows: list[float] | None = None

    @classmethod
    def of(cls, ctx: PredictContext, names: list[str] | None) -> SummaryParts:
        """Compute ``names`` (None: every available method, as the whole summary) of ``ctx``
        (a long text held sparse: head by head, ``summary_tables``)."""
        with torch.inference_mode():
            gold, tables = summary_tables([ctx], names)[0]
        return cls(ctx, gold, tables)

    @property
    def complete(self) -> bool:
        return all(nm in self.tables for nm in self.names)

    def gold_sparsity(self, layer: int, head: int) -> float:
        """The head's gold sparsity as the summary rows send it (6 decimals)."""
        if self._gold_rows is None:
            self._gold_rows = round6(self.gold)
        return self._gold_rows[layer * self.gold.shape[1] + head]

    def ensure(self, names: list[str] | None) -> None:
        """Compute the methods of ``names`` (None: every one) not computed yet; a text of two
        layers or more on both cores (half of the layers on the side worker)."""
        want = self.names if names is None else [nm for nm in names if nm in self.names]
        with self.lock:
            todo = [nm for nm in want if nm not in self.tables]
            if not todo:
                return
            side = side_worker()
            if side is not None and splits_summary(self.ctx):
                got = summary_tables_on_two_cores(self.ctx, side, todo)[1]
            else:
                with torch.inference_mode():
                    got = summary_tables([self.ctx], todo)[0][1]
            self.tables.update(got)

    def rows_json(self, names: list[str] | None) -> str:
        """The summary rows (JSON text) with the methods of ``names`` (None: every available
        one) that are available, in the registry's order; computes what is missing."""
        self.ensure(names)
        keep = self.names if names is None else [nm for nm in self.names if nm in names]
        return summary_json(self.gold, {nm: self.tables[nm] for nm in keep})

    def body_json(self, core: dict, names: list[str] | None) -> bytes:
        """The analyze body ``core`` (``payloads.analysis_json``'s: its summary left out) with
        the summary rows of ``names`` (:meth:`rows_json`), as JSON bytes."""
        return analysis_json(core, self.rows_json(names))

    def methods_for(self, names: list[str], field: str = "method") -> list[str]:
        """``names`` that this analysis has (the sf-* ones need its artefact): a 404 naming
        ``field`` for a method it lacks."""
        missing = [nm for nm in names if nm not in self.names]
        if missing:
            m = METHODS.get(missing[0])
            what = m.needs() if m is not None else "a Sparsefinder artefact"
            raise NotInAnalysis(
                f"method {missing[0]} needs {what}, and this analysis has none; "
                f"its methods: {', '.join(self.names)}",
                field=field,
            )
        return names
