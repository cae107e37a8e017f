"""What every example is made of: the card (:class:`Example`), its measured figures, its view
state and its thumbnail, and the measurements the picks share (one head's metrics, the window of
the same sparsity as a pattern, POS tags)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from sparse_core import pos
from sparse_core.methods import METHODS, evaluate

THUMB = 40  # thumbnails are at most THUMB x THUMB cells


@dataclass
class Example:
    """One gallery example as written to static/gallery/examples.json (its schema is
    ``sparsescope.web.schemas.Example``)."""

    slug: str
    title: str
    summary: str
    explain: str
    state: dict
    figures: list[dict]
    how: str
    tags: list[str] = field(default_factory=list)
    credit: str | None = None
    needs_artefact: bool = False
    thumb: dict | None = None

    def to_json(self) -> dict:
        return {k: v for k, v in vars(self).items() if v is not None}


def fig(label: str, value: float | int | str, digits: int = 3) -> dict:
    """One measured figure shown on the card."""
    if isinstance(value, float):
        value = round(value, digits)
    return {"label": label, "value": value}


def state(out, layer: int, head: int, method: str, params: dict | None = None, artefact=None,
          **extra: Any) -> dict:  # fmt: skip
    """A ShareState dict (app/web/routes/share.py) with the method's parameters completed."""
    clean = METHODS[method].validate(out.n, dict(params or {}), artefact)
    s = {
        "text": out.text,
        "alpha": float(out.alpha),
        "causal": bool(out.causal),
        "truncate": False,
        "layer": layer,
        "head": head,
        "method": method,
        "params": {k: (v.item() if hasattr(v, "item") else v) for k, v in clean.items()},
        "token": None,
        "cluster": None,
        "lecture_step": None,
        "view": {},
    }
    s.update(extra)
    return s


def find(tokens: list[str], word: str, start: int = 0) -> int:
    for k in range(start, len(tokens)):
        if tokens[k] == word:
            return k
    raise KeyError(f"token {word!r} not found after position {start} in {tokens}")


def head_metrics(ctx, method: str, params: dict, layer: int, head: int) -> dict[str, float]:
    got = evaluate(ctx, method, METHODS[method].validate(ctx.n, params, ctx.artefact))
    return {k: float(v[layer, head]) for k, v in got.items()}


def thumbnail(out, layer: int, head: int, mask: torch.Tensor | None) -> dict:
    """A small picture of the head for the card: ``m`` x ``m`` cells (block-max pooling of P),
    one character each, row-major: ``-`` exact zero, ``s`` a zero inside the method's mask,
    ``1``–``f`` p > 0 on the √p ramp (1 = the faintest tint, f = p ≈ 1)."""
    n = out.n
    m = min(n, THUMB)
    edges = [round(k * n / m) for k in range(m + 1)]
    p = out.probs[layer, head]  # (n, n)
    chars = []
    for a in range(m):
        rows = slice(edges[a], edges[a + 1])
        for b in range(m):
            cols = slice(edges[b], edges[b + 1])
            v = float(p[rows, cols].max())
            if v > 0:
                chars.append("0123456789abcdef"[max(1, min(15, math.ceil(math.sqrt(v) * 15)))])
            elif mask is not None and bool(mask[rows, cols].any()):
                chars.append("s")
            else:
                chars.append("-")
    return {"m": m, "cells": "".join(chars)}


def predicted(ctx, method: str, params: dict, layer: int, head: int) -> torch.Tensor:
    m = METHODS[method]
    return m.predict(ctx, **m.validate(ctx.n, params, ctx.artefact))[layer, head]


def with_thumb(ex: Example, out, ctx) -> Example:
    s = ex.state
    mask = predicted(ctx, s["method"], s["params"], s["layer"], s["head"])
    ex.thumb = thumbnail(out, s["layer"], s["head"], mask)
    return ex


def matched_window(ctx, target: float, layer: int, head: int, globals_: bool) -> dict:
    """The widest odd window (globals as given) whose sparsity is still >= ``target``, and its
    recall on the head: the window baseline at the same sparsity as a pattern."""
    lo, hi = 0, ctx.n  # half widths; sparsity decreases as the width grows
    best = {"window": 1, "recall": 0.0, "sparsity": 1.0}
    while lo <= hi:
        h = (lo + hi) // 2
        got = head_metrics(ctx, "window", {"window": 2 * h + 1, "globals": globals_}, layer, head)
        if got["sparsity"] >= target:
            best = {"window": 2 * h + 1, **got}
            lo = h + 1
        else:
            hi = h - 1
    return best


def matched_window_all(ctx, target: float) -> dict:
    """``matched_window`` for every head at once (window sparsity is the same on every head)."""
    lo, hi = 0, ctx.n
    best = None
    while lo <= hi:
        h = (lo + hi) // 2
        got = evaluate(ctx, "window", {"window": 2 * h + 1, "globals": True})
        if float(got["sparsity"][0, 0]) >= target:
            best = {"window": 2 * h + 1, **got}
            lo = h + 1
        else:
            hi = h - 1
    if best is None:
        best = {"window": 1, **evaluate(ctx, "window", {"window": 1, "globals": True})}
    return best


def pos_tags(out) -> list[str | None]:
    """Universal POS of every token (special tokens None), as the app tags them."""
    tags = pos.tag_tokens(out.text, out.offsets, out.special)
    return [None if sp else t for t, sp in zip(tags, out.special, strict=True)]
