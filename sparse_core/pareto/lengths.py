"""Sparsity against length: every method's frontier at several lengths on the same texts.

The question of The Sparse Frontier (Nawrot et al. 2025, §4: "longer sequences tolerate higher
sparsity"), asked here of exact graphs: for each length n of ``lengths``, the same inputs are cut
to their first n tokens (specials included: the window from the input's start, as
``SparseModel.encode(truncate=True)`` cuts a text over the model's positions) and every method's
grid is swept on them (:func:`~sparse_core.pareto.corpus_sweep.sweep_corpus`; the grid is that of
length n). From each length's frontiers come two tables, one value per (method, level, length):

- ``recall_at_sparsity``: the best recall among the method's points of sparsity ≥ the level
  (the page's line chart: recall at fixed sparsity against length, one line per method);
- ``sparsity_at_recall``: the highest sparsity among its points of recall ≥ the level (does a
  longer text let a method drop more pairs at equal recall?).

Null where no point of the method reaches the level. The per-length bodies are those of
``pareto.json`` (``CorpusSweep.to_json``), so every length's frontier is there as well.

A model whose positions were extended without training (``sparse_core.testing.tiled_positions``,
the 4,096-position MiniLM) gives real entmax graphs of real scores beyond its trained length, but
its attention there is an extrapolation, not what a model trained on long texts attends to.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..errors import SparsescopeError
from .corpus_sweep import CorpusSweep, sweep_corpus

log = logging.getLogger(__name__)

#: The sparsity levels of ``recall_at_sparsity`` and the recall levels of ``sparsity_at_recall``.
SPARSITY_LEVELS = (0.5, 0.75, 0.9, 0.95, 0.98)
RECALL_LEVELS = (0.5, 0.6, 0.7, 0.8, 0.9)
#: Fewest tokens a length may have (a text of a few tokens has no sparsity to speak of).
MIN_LENGTH = 16


def parse_lengths(raw: str | Iterable[int], limit: int) -> list[int]:
    """``"512,1024,2048"`` (or ints) as sorted distinct lengths in [MIN_LENGTH, limit]; a
    :class:`SparsescopeError` naming ``lengths`` and what is allowed otherwise."""
    items = raw.split(",") if isinstance(raw, str) else list(raw)
    out: set[int] = set()
    for item in items:
        text = str(item).strip()
        if not text:
            continue
        try:
            n = int(text)
        except ValueError:
            raise SparsescopeError(
                f"lengths must be whole numbers separated by commas, e.g. 512,1024,2048; got "
                f"{text[:20]!r}",
                field="lengths",
            ) from None
        if not MIN_LENGTH <= n <= limit:
            raise SparsescopeError(
                f"each length must be in [{MIN_LENGTH}, {limit}] (the model's positions, or "
                f"--max-tokens), got {n}",
                field="lengths",
            )
        out.add(n)
    if not out:
        raise SparsescopeError("give at least one length, e.g. 512,1024,2048", field="lengths")
    return sorted(out)


def at_length(model, n: int):
    """``model`` with its token limit lowered to ``n`` (a shallow copy sharing every weight):
    its runs with ``truncate=True`` keep a text's first ``n`` tokens."""
    if n > model.config.max_positions:
        raise SparsescopeError(
            f"length {n} is over the model's limit of {model.config.max_positions} tokens",
            field="lengths",
        )
    short = copy.copy(model)
    short.config = dataclasses.replace(model.config, max_positions=n)
    return short


def _recall_at(points: list[dict], name: str, level: float) -> float | None:
    """The best recall among ``name``'s points of sparsity ≥ ``level`` (a frontier point)."""
    got = [p["recall"] for p in points if p["method"] == name and p["sparsity"] >= level]
    return max(got) if got else None


@dataclass
class LengthSweep:
    """Each length's corpus sweep (:class:`CorpusSweep`) on the same inputs."""

    lengths: list[int]
    sweeps: list[CorpusSweep]
    meta: dict = field(default_factory=dict)

    def tables(self, bodies: list[dict]) -> dict[str, dict]:
        names = list(dict.fromkeys(nm for b in bodies for nm in b["frontiers"]))
        rs: dict[str, dict[str, list]] = {}
        sr: dict[str, dict[str, list]] = {}
        for nm in names:
            rs[nm] = {
                f"{lv:g}": [_r(_recall_at(b["points"], nm, lv)) for b in bodies]
                for lv in SPARSITY_LEVELS
            }
            sr[nm] = {
                f"{lv:g}": [_r(_sparsity_at(b["points"], nm, lv)) for b in bodies]
                for lv in RECALL_LEVELS
            }
        return {"recall_at_sparsity": rs, "sparsity_at_recall": sr}

    def to_json(self) -> dict:
        bodies = [s.to_json() for s in self.sweeps]
        first = bodies[0]
        per_length = [
            {"n": n, "tokens": s.meta.get("tokens"), **b}
            for n, s, b in zip(self.lengths, self.sweeps, bodies, strict=True)
        ]
        return {
            "model": first["model"],
            "alpha": first["alpha"],
            "causal": first["causal"],
            "texts": first["texts"],
            "lengths": list(self.lengths),
            "gold_sparsity": [b["gold_sparsity"] for b in bodies],
            "sparsity_levels": list(SPARSITY_LEVELS),
            "recall_levels": list(RECALL_LEVELS),
            **self.tables(bodies),
            "per_length": per_length,
        }

    def csv_rows(self) -> list[list]:
        """``method, length, measure, level, value`` rows (``value`` empty where null)."""
        body = self.to_json()
        rows: list[list] = [["method", "length", "measure", "level", "value"]]
        for measure in ("recall_at_sparsity", "sparsity_at_recall"):
            for nm, by_level in body[measure].items():
                for lv, values in by_level.items():
                    for n, v in zip(body["lengths"], values, strict=True):
                        rows.append([nm, n, measure, lv, "" if v is None else v])
        for n, g in zip(body["lengths"], body["gold_sparsity"], strict=True):
            rows.append(["gold", n, "sparsity", "", g])
        return rows


def _r(v: float | None) -> float | None:
    return None if v is None else round(float(v), 6)


def _sparsity_at(points: list[dict], name: str, level: float) -> float | None:
    got = [
        p["sparsity"]
        for p in points
        if p["method"] == name and p.get("recall") is not None and p["recall"] >= level
    ]
    return max(got) if got else None


def sweep_lengths(
    model, texts: Sequence[str], artefact, lengths: Sequence[int], *, alpha: float = 1.5,
    causal: bool = False, methods: Iterable[str] | None = None, progress: bool = True,
) -> LengthSweep:  # fmt: skip
    """Every method's grid swept on ``texts`` cut to each of ``lengths`` (module docstring).

    Every text must have at least ``max(lengths)`` tokens (specials included), so that each
    length sees the same texts; a shorter one is a :class:`SparsescopeError`.
    """
    lengths = sorted(set(lengths))
    top = lengths[-1]
    counts = [len(e.ids) for e in model.tokenizer.encode_batch(list(texts))]
    short = [k for k, c in enumerate(counts) if c < top]
    if short:
        raise SparsescopeError(
            f"{len(short)} of the {len(texts)} inputs have fewer than {top} tokens (the longest "
            f"length), e.g. input {short[0]} has {counts[short[0]]}: every length must see the "
            "same texts; lower the longest length or pick longer inputs",
            field="lengths",
        )
    methods = None if methods is None else list(methods)
    sweeps, seconds = [], {}
    for n in lengths:
        t0 = time.perf_counter()
        sweeps.append(
            sweep_corpus(
                at_length(model, n),
                texts,
                artefact,
                alpha=alpha,
                causal=causal,
                methods=methods,
                workers=1,
                progress=progress,
            )  # fmt: skip
        )
        seconds[str(n)] = round(time.perf_counter() - t0, 1)
        log.info("length %d: %d texts swept in %.0f s", n, len(texts), seconds[str(n)])
    return LengthSweep(lengths, sweeps, {"seconds": seconds})
