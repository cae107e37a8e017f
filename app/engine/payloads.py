"""Tensors -> the JSON bodies of the API (docs/architecture.md, "Web contract").

Pure shaping, under ``torch.inference_mode()``: the analysis body and its per-head summary, the
method registry as sliders, one head's payload (its entmax edges and what the page needs to
recompute every method's mask), the lecture's raw vectors. Checking the request is the service's
job; these functions assume valid layer / head indices.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import torch

from sparse_core.methods import FAMILIES, METHODS, PredictContext, head_data
from sparse_core.methods.selection import b64_floats, b64_ints
from sparse_core.pareto import summary_tables

from .thumbs import head_thumbs

#: Longest text whose raw vectors are served (a slide cannot show more rows anyway).
MAX_RAW_TOKENS = 64


def f32_exact(values) -> list[float]:
    """float32 values as the shortest decimals that read back, as a double rounded to float32
    (JavaScript's ``Math.fround`` / a Float32Array), to the very same float32: the page then
    holds P exactly (its top-p, H2O and mass-recall sums are Python's to the bit)."""
    v = np.asarray(values, dtype=np.float32)
    short = v.astype(str).astype(np.float64)
    return np.where(short.astype(np.float32) == v, short, v.astype(np.float64)).tolist()


def sig6(x: float) -> float:
    """``x`` rounded to 6 significant digits (the edge weights sent to the page)."""
    return float(f"{x:.6g}")


def dumps(data: Any) -> bytes:
    """Compact JSON bytes (what the heavy routes send as is, without re-validation)."""
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


# ----------------------------------------------------------------------------- methods


def param_json(p) -> dict:
    """A ``sparse_core.methods.ParamSpec`` as the API's ``ParamSpecOut``."""
    return {
        "name": p.name,
        "label": p.label or p.name,
        "kind": p.kind,
        "min": p.min,
        "max": p.max,
        "step": p.step,
        "choices": list(p.choices) if p.choices is not None else None,
        "default": p.default,
        "help": p.help or "",
    }


def methods_json(n: int, artefact: Any = None) -> list[dict]:
    """Every method of the registry with its sliders, defaults resolved for length ``n`` (and,
    for sf-kmeans, the cluster counts of ``artefact`` when one is given), and whether it can run
    with ``artefact`` (``available``: ``Method.usable``, as the summary and the sweeps decide)."""
    return [
        {
            "name": name,
            "label": method.label,
            "family": method.family,
            "family_label": FAMILIES.get(method.family, ""),
            "needs_artefact": bool(method.needs_artefact),
            "available": bool(method.usable(artefact)),
            "payload": method.payload,
            "params": [param_json(p) for p in method.params(n, artefact)],
        }
        for name, method in METHODS.items()
    ]


# ----------------------------------------------------------------------------- the analysis


@torch.inference_mode()
def summary_rows(out, artefact, ctx=None) -> list[dict]:
    """Per head (layer-major): gold sparsity and every available method's recall / sparsity at
    its defaults (``sparse_core.pareto.summary``), rounded to 6 decimals. ``ctx``: the text's
    ``PredictContext`` when already built (its projections are reused)."""
    return summaries([ctx if ctx is not None else PredictContext.from_run(out, artefact)])[0]


@torch.inference_mode()
def summaries(ctxs) -> list[list[dict]]:
    """:func:`summary_rows` of several texts' contexts; texts of one length are computed
    together (``sparse_core.pareto.summary_tables``), each exactly as alone."""
    return [_rows(gold, tables) for gold, tables in summary_tables(list(ctxs))]


@torch.inference_mode()
def summary_texts(ctxs) -> list[str]:
    """:func:`summaries` as JSON text (:func:`summary_json`), the analyze body's part."""
    return [summary_json(gold, tables) for gold, tables in summary_tables(list(ctxs))]


def summary_json(gold, tables: dict) -> str:
    """The JSON text of ``_rows(gold, tables)`` (what :func:`dumps` makes of it, byte for byte)
    without building its ~800 dicts: each row is one ``%`` format. ``%r`` of a float is its
    ``repr``, which is how the json module writes a float; a non-finite value (which
    :func:`dumps` refuses) goes through :func:`dumps` itself."""
    L, H = gold.shape
    k = L * H
    cols = [np.asarray(gold, dtype=np.float64).ravel()]
    for m in tables.values():
        cols += [np.asarray(m["recall"], dtype=np.float64).ravel(),
                 np.asarray(m["sparsity"], dtype=np.float64).ravel()]  # fmt: skip
    stacked = np.stack(cols)
    if not np.isfinite(stacked).all():
        return dumps(_rows(gold, tables)).decode()
    flat = round6(stacked)  # the same rounding as _rows
    per = [flat[j * k : (j + 1) * k] for j in range(len(cols))]
    names = ",".join(
        json.dumps(nm, ensure_ascii=False).replace("%", "%%") + ':{"recall":%r,"sparsity":%r}'
        for nm in tables
    )
    row = '{"layer":%d,"head":%d,"gold_sparsity":%r,"methods":{' + names + "}}"
    heads = [(i // H, i % H) for i in range(k)]
    return "[" + ",".join(row % (*lh, *v) for lh, *v in zip(heads, *per, strict=True)) + "]"


def _rows(gold, tables: dict) -> list[dict]:
    L, H = gold.shape
    names = list(tables)
    cols = [np.asarray(gold, dtype=np.float64).ravel()]
    for m in tables.values():
        cols += [np.asarray(m["recall"], dtype=np.float64).ravel(),
                 np.asarray(m["sparsity"], dtype=np.float64).ravel()]  # fmt: skip
    flat = round6(np.stack(cols))  # one call: each value exactly round(x, 6)
    k = L * H
    g = flat[:k]
    per = [(nm, flat[(2 * j + 1) * k : (2 * j + 2) * k], flat[(2 * j + 2) * k : (2 * j + 3) * k])
           for j, nm in enumerate(names)]  # fmt: skip
    return [
        {
            "layer": i // H,
            "head": i % H,
            "gold_sparsity": g[i],
            "methods": {nm: {"recall": rec[i], "sparsity": spa[i]} for nm, rec, spa in per},
        }
        for i in range(k)
    ]


def round6(values) -> list[float]:
    """``[round(x, 6) for x in values]`` (flattened), exactly, vectorised: ``rint(x·10⁶) / 10⁶``
    is the same double wherever x·10⁶ is not within rounding error of a half (there, and for
    anything outside [−1000, 1000] or not finite, Python's ``round`` decides)."""
    a = np.asarray(values, dtype=np.float64).ravel()
    y = a * 1e6
    k = np.rint(y)
    out = (k / 1e6).tolist()
    with np.errstate(invalid="ignore"):
        unsure = ~(np.abs(np.abs(y - np.floor(y)) - 0.5) > 1e-6) | ~(np.abs(a) <= 1e3)
    for i in np.flatnonzero(unsure).tolist():
        out[i] = round(float(a[i]), 6)
    return out


def analysis_body(
    analysis_id: str,
    out,
    *,
    model_id: str,
    device: str,
    alpha: float,
    causal: bool,
    artefact_name: str | None,
    pos: list[str | None],
    decoder: bool = False,
    summary: list[dict],
    methods: list[dict],
    own_alpha: list[list[float]] | None = None,
) -> dict:
    """The body of ``POST /api/analyze`` and ``GET /api/analyses/{id}``. ``own_alpha``: the
    model's own α per (layer, head) when it was trained with entmax (:func:`own_alpha_rows`)."""
    return {
        "id": analysis_id,
        "n": out.n,
        "layers": out.layers,
        "heads": out.heads,
        "model": model_id,
        "device": device,
        "alpha": alpha,
        "causal": bool(causal),
        "decoder": bool(decoder),
        "truncated": bool(out.truncated),
        "total_tokens": _total(out),
        "window_start": int(out.window_start),
        "window_end": int(out.window_start) + sum(1 for sp in out.special if not sp),
        "artefact": artefact_name,
        "own_alpha": own_alpha,
        "tokens": [
            {"text": tok, "start": s, "end": e, "pos": p, "special": sp}
            for tok, (s, e), p, sp in zip(out.tokens, out.offsets, pos, out.special, strict=True)
        ],
        "summary": summary,
        "methods": methods,
        "thumbs": head_thumbs(out),  # every head's graph, pooled (app/engine/thumbs.py)
    }


def own_alpha_rows(model) -> list[list[float]] | None:
    """The model's own α as (L, H) rows of floats (4 decimals) when it was trained with entmax
    (``SparseModel.alpha_trained``: an adapted model, a SparseModernBERT), else None."""
    if not getattr(model, "alpha_trained", False):
        return None
    return [[round(float(a), 4) for a in row] for row in model.alpha_table().tolist()]


def analysis_json(body: dict, summary_text: str) -> bytes:
    """``dumps(body)`` with ``body["summary"]`` (left out of ``body``: any placeholder) replaced
    by the JSON text ``summary_text`` (:func:`summary_json`), byte for byte the same as
    :func:`dumps` of the body with the rows themselves."""
    items = list(body.items())
    at = [k for k, _ in items].index("summary")
    head, tail = dumps(dict(items[:at])), dumps(dict(items[at + 1 :]))
    mid = b'"summary":' + summary_text.encode()
    return b"".join([head[:-1], b"," if at else b"", mid, b"," if tail != b"{}" else b"", tail[1:]])


def _total(out) -> int:
    """The text's tokens without specials (all of them, not only the window's)."""
    if out.total_tokens is not None:
        return int(out.total_tokens)
    return sum(1 for sp in out.special if not sp)


# ----------------------------------------------------------------------------- one head


def methods_data(ctx, methods: list[str] | None = None) -> dict:
    """The methods' part of one head's payload: ``sparse_core.methods.head_data`` of the head's
    view (every method: today's bytes), or, with ``methods``, only those methods' data plus
    ``seed`` first (the draws' per-head seed: the page's ``HeadData.seed``, one integer)."""
    if methods is None:
        return head_data(ctx, 0, 0)
    return {"seed": int(ctx.seeds()[0, 0]), **head_data(ctx, 0, 0, methods)}


@torch.inference_mode()
def head_body(entry, layer: int, head: int, methods: list[str] | None = None) -> dict:
    """``GET /api/analyses/{id}/heads/{layer}/{head}``: every edge ``[i, j, p]`` with p > 0
    (p exactly, :func:`f32_exact`), plus what the page needs to recompute every method's mask for
    any slider value (the registry's ``head_payload`` hooks: ``sparse_core.methods.head_data``);
    with ``methods`` (``?method=``), only those methods' data (:func:`methods_data`)."""
    out = entry.out
    # this head's edges, row-major, straight from the store (no dense (n, n) head when sparse)
    i, j, p = out.attn.row_edges(layer, head, slice(0, out.n))
    vals = f32_exact(p.numpy())
    rows, cols = i.tolist(), j.tolist()
    return {
        "layer": layer,
        "head": head,
        "n": out.n,
        "gold_sparsity": entry.gold_sparsity(layer, head),
        "edges": [list(e) for e in zip(rows, cols, vals, strict=True)],
        # computed on the head alone (PredictContext.view: the same payload, 1/(L·H) the work)
        **methods_data(entry.ctx.view(layer, head), methods),
        "pos": entry.pos,
    }


#: The parts of a head payload (``?part=``): everything (the default), the graph alone (packed
#: CSR, what the heatmap needs; the page's first request), or the methods' data. ``?method=``
#: narrows the methods' data of ``all`` and ``methods`` to the named methods, and adds the named
#: methods' data to ``graph`` (the page's first request: the graph and the shown method's data).
HEAD_PARTS = ("all", "graph", "methods")


@torch.inference_mode()
def head_graph_body(entry, layer: int, head: int, methods: list[str] | None = None) -> dict:
    """``…/heads/{layer}/{head}?part=graph``: the head's graph as packed CSR (``csr``): per query
    its count of edges (``counts``, n), then every edge's key (``cols``) and exact float32 P
    (``p``), row-major, each a base64 little-endian array (``selection.b64_ints`` /
    ``b64_floats``); plus ``pos``, ``gold_sparsity`` and ``seed``. At n = 4,096 that is
    8 bytes an edge instead of ~30 of JSON, and no method's data (``?part=methods``) but the
    ``methods`` named (``?method=``: :func:`methods_data`, after ``seed``)."""
    out = entry.out
    if out.n > 0xFFFF:  # counts and columns are sent as u16
        raise ValueError(f"packed head payloads hold n <= 65535 tokens, got {out.n}")
    i, j, p = out.attn.row_edges(layer, head, slice(0, out.n))  # this head only, row-major
    vals = p.numpy().astype(np.float32)
    counts = np.bincount(i.numpy(), minlength=out.n)  # (n,)
    return {
        "layer": layer,
        "head": head,
        "n": out.n,
        "gold_sparsity": entry.gold_sparsity(layer, head),
        "edges": [],
        "csr": {
            "counts": b64_ints(counts),
            "cols": b64_ints(j.numpy()),
            "p": b64_floats(vals),
        },
        "seed": int(entry.ctx.seeds()[layer, head]),
        **(methods_data(entry.ctx.view(layer, head), methods) if methods else {}),
        "pos": entry.pos,
    }


@torch.inference_mode()
def head_methods_body(entry, layer: int, head: int, methods: list[str] | None = None) -> dict:
    """``…/heads/{layer}/{head}?part=methods``: what ``head_body`` adds to the graph (every
    method's ``head_payload``, or the ``methods`` named), fetched by the page after it drew the
    graph."""
    data = methods_data(entry.ctx.view(layer, head), methods)  # the head alone (1/(L·H) the work)
    return {"layer": layer, "head": head, "n": entry.out.n, **data}


@torch.inference_mode()
def raw_body(out, layer: int, head: int, *, d_model: int | None = None) -> dict:
    """The lecture's raw vectors of one head: queries, keys (both (n, d_head)) and the scaled
    scores ``S = Q Kᵀ / √d_head`` (n, n) recomputed in float32 exactly as the model does, *before*
    any mask (so the page can show the causal mask being applied); 6 significant digits."""
    q = out.queries[layer, head].float()  # (n, d_head)
    k = out.keys[layer, head].float()  # (n, d_head)
    d_head = q.shape[-1]
    scores = (q @ k.T) / math.sqrt(d_head)  # (n, n)

    def rows(t: torch.Tensor) -> list[list[float]]:
        return [[sig6(v) for v in row] for row in t.tolist()]

    return {
        "layer": layer,
        "head": head,
        "n": out.n,
        "d_head": d_head,
        "d_model": d_model,
        "causal": bool(out.causal),
        "queries": rows(q),
        "keys": rows(k),
        "scores": rows(scores),
    }
