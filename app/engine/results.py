"""Corpus results served read-only (``sparsescope serve --results DIR``).

``sparsescope pareto --out DIR`` writes ``DIR/pareto.json`` (every method's sweep points on a
corpus, the mean over heads, and their frontiers) and ``DIR/pareto-heads.npz`` (the same points
per (layer, head): arrays ``"<method>/<metric>"`` of shape (points, L, H) and ``"gold_sparsity"``
(L, H); app/commands/pareto.py). This module reads both once, checks them, and gives the page

- ``summary()``: the pareto.json body (mean over heads) with the folder's name and the (L, H)
  of the per-head file, or null when there is none;
- ``head(layer, head)``: one head's corpus points and frontiers, the shape of
  ``GET /api/analyses/{id}/pareto?layer=&head=`` (``sparse_core.pareto.points_json``, frontiers
  over token sparsity), so that the page draws it beside the current text's.

With ``DIR/pareto-lengths.json`` (``sparsescope pareto --lengths``, sparse_core/pareto/lengths.py)
``summary()`` also carries ``lengths``: the lengths, the gold sparsity at each, and each method's
best recall at fixed sparsity and highest sparsity at fixed recall per length (the page's panel of
recall against length); each length's own points stay in the file.

Nothing is ever written to DIR. A file that is not what ``sparsescope pareto`` writes (another
program's JSON, a truncated file, a method this version does not know, points and per-head
arrays that disagree) is a :class:`ResultsError` naming the file and what is wrong; ``serve``
reports it on one line and exits 2 (app/cli.py).
"""

from __future__ import annotations

import json
import math
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sparse_core.bitsets import METRICS
from sparse_core.errors import SparsescopeError
from sparse_core.methods import METHODS
from sparse_core.pareto import points_json

#: Caps on what is read (a pareto.json of every grid is ~100 kB; its npz a few MB).
MAX_JSON_BYTES = 32 << 20
MAX_NPZ_BYTES = 512 << 20


class ResultsError(SparsescopeError):
    """A corpus results folder or file that cannot be shown (field ``results``)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, field="results")


def _share(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ResultsError(f"{what} must be a number in [0, 1], got {str(value)[:40]!r}")
    if not 0.0 <= value <= 1.0:
        raise ResultsError(f"{what} must be a number in [0, 1], got {value}")
    return float(value)


def _loss(value: Any) -> bool:
    """A task loss: a finite number ≥ 0 (not a bool)."""
    return (
        not isinstance(value, bool)
        and isinstance(value, (int, float))
        and math.isfinite(value)
        and value >= 0
    )


def _spearman(value: Any) -> bool:
    """An STS Spearman: a finite number in [-1, 1] (not a bool)."""
    return (
        not isinstance(value, bool)
        and isinstance(value, (int, float))
        and math.isfinite(value)
        and -1.0 <= value <= 1.0
    )


def _check_sts(body: dict, task: dict, source: str) -> None:
    """``pareto --task sts``: ``task.spearman_full`` and every point's ``task_spearman`` (null
    or) a number in [-1, 1]. The page's task axis plots losses only; the block is kept as is."""
    if not _spearman(task.get("spearman_full")):
        raise ResultsError(f"{source}: an STS task's spearman_full must be a number in [-1, 1]")
    for k, p in enumerate(body["points"]):
        v = p.get("task_spearman")
        if v is not None and not _spearman(v):
            raise ResultsError(
                f"{source}: point {k}'s task_spearman must be a number in [-1, 1] or null"
            )


def _check_task(body: dict, source: str) -> None:
    """The task axis (``sparsescope pareto --task``, definitions §9), when present:
    ``task.loss_full`` a number ≥ 0, every point's ``task_loss`` null or a number ≥ 0."""
    task = body.get("task")
    if task is None:
        return
    if isinstance(task, dict) and task.get("objective") == "sts":  # ``--task sts``: Spearman
        _check_sts(body, task, source)
        return
    if not isinstance(task, dict) or not _loss(task.get("loss_full")):
        raise ResultsError(f"{source}: task must be an object whose loss_full is a number ≥ 0 "
                           "(what `sparsescope pareto --task` writes)")  # fmt: skip
    for k, p in enumerate(body["points"]):
        v = p.get("task_loss")
        if v is not None and not _loss(v):
            raise ResultsError(f"{source}: point {k}'s task_loss must be a number ≥ 0 or null")


def check_pareto(body: Any, source: str = "pareto.json") -> dict:
    """The pareto.json body, checked: model, alpha, texts, gold_sparsity, points (method known,
    params an object, sparsity and recall in [0, 1]) and frontiers (indices of their method's
    points). ResultsError saying what is wrong otherwise."""
    if not isinstance(body, dict):
        raise ResultsError(f"{source} must hold a JSON object (what `sparsescope pareto` writes)")
    missing = [k for k in ("model", "alpha", "texts", "gold_sparsity", "points", "frontiers")
               if k not in body]  # fmt: skip
    if missing:
        raise ResultsError(
            f"{source} is not a `sparsescope pareto` result: it lacks {', '.join(missing)}"
        )
    if not isinstance(body["model"], str):
        raise ResultsError(f"{source}: model must be a string")
    if not isinstance(body["texts"], int) or body["texts"] < 1:
        raise ResultsError(f"{source}: texts must be a whole number ≥ 1, got {body['texts']!r}")
    alpha = body["alpha"]
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 1 <= alpha <= 2:
        raise ResultsError(f"{source}: alpha must be a number in [1, 2], got {alpha!r}")
    _share(body["gold_sparsity"], f"{source}: gold_sparsity")
    points = body["points"]
    if not isinstance(points, list) or not points:
        raise ResultsError(f"{source}: points must be a non-empty list")
    for k, p in enumerate(points):
        if not isinstance(p, dict) or not isinstance(p.get("params"), dict):
            raise ResultsError(f"{source}: point {k} must be an object with params")
        if p.get("method") not in METHODS:
            raise ResultsError(
                f"{source}: point {k} has method {str(p.get('method'))[:40]!r}; known methods: "
                f"{', '.join(METHODS)}"
            )
        for m in ("sparsity", "recall"):
            _share(p.get(m), f"{source}: point {k}'s {m}")
    _check_task(body, source)
    fronts = body["frontiers"]
    if not isinstance(fronts, dict):
        raise ResultsError(f"{source}: frontiers must be an object of method -> point indices")
    for name, idx in fronts.items():
        ok = isinstance(idx, list) and all(
            isinstance(i, int) and 0 <= i < len(points) and points[i]["method"] == name for i in idx
        )
        if not ok:
            raise ResultsError(f"{source}: frontier {str(name)[:40]!r} must list indices of its "
                               "own method's points")  # fmt: skip
    return body


def check_lengths(body: Any, source: str = "pareto-lengths.json") -> dict:
    """The ``pareto --lengths`` body, checked and cut to what the page draws: ``lengths``
    (ascending whole numbers), ``gold_sparsity`` (one share per length), ``sparsity_levels``,
    ``recall_levels``, ``recall_at_sparsity`` and ``sparsity_at_recall`` (method -> level ->
    one share or null per length, methods this version knows)."""
    if not isinstance(body, dict):
        raise ResultsError(f"{source} must hold a JSON object (what `sparsescope pareto "
                           "--lengths` writes)")  # fmt: skip
    need = ("lengths", "gold_sparsity", "sparsity_levels", "recall_levels",
            "recall_at_sparsity", "sparsity_at_recall")  # fmt: skip
    missing = [k for k in need if k not in body]
    if missing:
        raise ResultsError(f"{source} is not a `sparsescope pareto --lengths` result: it lacks "
                           f"{', '.join(missing)}")  # fmt: skip
    lengths = body["lengths"]
    ok = (
        isinstance(lengths, list)
        and lengths
        and all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in lengths)
    )
    if not ok or lengths != sorted(set(lengths)):
        raise ResultsError(f"{source}: lengths must be ascending whole numbers ≥ 1")
    gold = body["gold_sparsity"]
    if not isinstance(gold, list) or len(gold) != len(lengths):
        raise ResultsError(f"{source}: gold_sparsity must hold one number per length")
    for g in gold:
        _share(g, f"{source}: gold_sparsity")
    for table, levels in (("recall_at_sparsity", "sparsity_levels"),
                          ("sparsity_at_recall", "recall_levels")):  # fmt: skip
        lv = body[levels]
        if not isinstance(lv, list) or not lv:
            raise ResultsError(f"{source}: {levels} must be a non-empty list")
        for v in lv:
            _share(v, f"{source}: {levels}")
        rows = body[table]
        if not isinstance(rows, dict):
            raise ResultsError(f"{source}: {table} must be an object of method -> level -> values")
        for name, by_level in rows.items():
            if name not in METHODS:
                raise ResultsError(f"{source}: {table} has method {str(name)[:40]!r}; known "
                                   f"methods: {', '.join(METHODS)}")  # fmt: skip
            want = {f"{v:g}" for v in lv}
            if not isinstance(by_level, dict) or set(by_level) != want:
                raise ResultsError(f"{source}: {table}[{name!r}] must have one entry per level "
                                   f"of {levels}")  # fmt: skip
            for values in by_level.values():
                if not isinstance(values, list) or len(values) != len(lengths):
                    raise ResultsError(f"{source}: {table}[{name!r}] must hold one value per "
                                       "length")  # fmt: skip
                for v in values:
                    if v is not None:
                        _share(v, f"{source}: {table}[{name!r}]")
    return {k: body[k] for k in need}


def _read_json(path: Path) -> Any:
    if path.stat().st_size > MAX_JSON_BYTES:
        raise ResultsError(f"{path.name} is over {MAX_JSON_BYTES >> 20} MB: not a pareto.json")
    try:
        return json.loads(path.read_bytes())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ResultsError(f"{path.name} is not valid JSON ({exc})") from None


def _read_heads(path: Path, body: dict) -> dict[str, np.ndarray]:
    """pareto-heads.npz, checked against the points of ``body``."""
    if path.stat().st_size > MAX_NPZ_BYTES:
        raise ResultsError(f"{path.name} is over {MAX_NPZ_BYTES >> 20} MB")
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: np.asarray(z[k], dtype=np.float64) for k in z.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise ResultsError(f"{path.name} is not a readable .npz file ({exc})") from None
    bad = [k for k, a in arrays.items() if not np.isfinite(a).all()]
    if bad:
        raise ResultsError(f"{path.name}: {bad[0]} holds values that are not finite numbers")
    gold = arrays.get("gold_sparsity")
    if gold is None or gold.ndim != 2:
        raise ResultsError(f"{path.name} lacks a (layers, heads) gold_sparsity array")
    counts: dict[str, int] = {}
    for p in body["points"]:
        counts[p["method"]] = counts.get(p["method"], 0) + 1
    for name, count in counts.items():
        for m in ("sparsity", "recall"):
            a = arrays.get(f"{name}/{m}")
            if a is None or a.shape != (count, *gold.shape):
                got = "missing" if a is None else f"shaped {a.shape}"
                raise ResultsError(
                    f"{path.name}: {name}/{m} is {got}; pareto.json has {count} points of {name} "
                    f"on {gold.shape[0]} x {gold.shape[1]} heads (files of different runs?)"
                )
    return arrays


@dataclass(frozen=True)
class CorpusResults:
    """One results folder, read and checked once (``load``); read only."""

    name: str
    body: dict
    heads: dict[str, np.ndarray] | None  # None: no pareto-heads.npz
    lengths: dict | None = None  # pareto-lengths.json's tables (check_lengths), or None

    @classmethod
    def load(cls, folder: Path | str) -> CorpusResults:
        folder = Path(folder)
        if not folder.is_dir():
            raise ResultsError(f"--results {folder}: no such folder")
        js = folder / "pareto.json"
        if not js.is_file():
            raise ResultsError(
                f"--results {folder}: no pareto.json in it (write one with `sparsescope pareto "
                f"--corpus … --out {folder}`)"
            )
        body = check_pareto(_read_json(js))
        npz = folder / "pareto-heads.npz"
        heads = _read_heads(npz, body) if npz.is_file() else None
        lj = folder / "pareto-lengths.json"
        lengths = check_lengths(_read_json(lj)) if lj.is_file() else None
        return cls(folder.resolve().name, body, heads, lengths)

    @property
    def shape(self) -> tuple[int, int] | None:
        return None if self.heads is None else self.heads["gold_sparsity"].shape

    def summary(self) -> dict:
        shape = self.shape
        return {
            **self.body,
            "name": self.name,
            "heads": None if shape is None else {"layers": shape[0], "heads": shape[1]},
            "lengths": self.lengths,
        }

    def head(self, layer: int, head: int) -> dict:
        """One head's corpus points and frontiers (the per-text Pareto body's shape)."""
        shape = self.shape
        if shape is None:
            raise ResultsError(
                "these corpus results have no per-head figures (pareto-heads.npz is not in the "
                "folder); only the mean over heads is shown"
            )
        if not 0 <= layer < shape[0]:
            raise SparsescopeError(
                f"layer must be in [0, {shape[0] - 1}] for these results, got {layer}",
                field="layer",
            )
        if not 0 <= head < shape[1]:
            raise SparsescopeError(
                f"head must be in [0, {shape[1] - 1}] for these results, got {head}", field="head"
            )
        grids: dict[str, list[dict]] = {}
        for p in self.body["points"]:
            grids.setdefault(p["method"], []).append(p["params"])
        assert self.heads is not None
        values = {
            name: {
                m: self.heads[f"{name}/{m}"][:, layer, head]
                for m in METRICS
                if f"{name}/{m}" in self.heads
            }
            for name in grids
        }
        got = points_json(grids, values)
        return {
            "scope": "head",
            "layer": layer,
            "head": head,
            "gold_sparsity": round(float(self.heads["gold_sparsity"][layer, head]), 6),
            **got,
        }
