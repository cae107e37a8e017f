"""Notebook figures (Plotly): one head's attention, the sparsity–recall plot, cluster POS shares.

The same pictures as the web page, for a notebook::

    from sparse_core import load_model, viz
    out = load_model().run("The chef who ran to the store was out of food.")
    viz.show_head(out, 2, 3, method="strided", params={"stride": 4})   # a plotly Figure
    state = viz.to_share_state(out, 2, 3, method="strided", params={"stride": 4})
    # requests.post("http://127.0.0.1:8000/api/share", json={"state": state}).json()["url"]

Plotly is imported inside each figure function, so ``sparse_core`` imports without it.
Colours follow the page (frontend/js/colours.js): exact zeros white, p > 0 a blue ramp on √p that
starts at a visible tint (small is not zero), predicted zero cells sand, gold edges ★ when the
method keeps them and a red × when it misses them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from .metrics import pareto_front

if TYPE_CHECKING:
    from plotly.graph_objects import Figure

    from .model import RunOutput
    from .sparsefinder import Artefact

#: ColorBrewer "Blues" from its 3rd stop (frontend/js/colours.js), applied to √p.
BLUES = ("#c6dbef", "#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#08519c", "#08306b")
#: ColorBrewer "Reds" from its 3rd stop: p > 0 on a gold edge the method misses.
REDS = ("#fcae91", "#fb6a4a", "#ef3b2c", "#cb181d", "#a50f15", "#67000d")
SHADE = "#f2dfb5"  # an exact zero inside the predicted mask
CAUGHT = "#f59e0b"  # a gold edge the method keeps
CAUGHT_STROKE = "#7c2d12"
MISSED = "#dc2626"  # a gold edge the method misses
#: One colour per method, in the registry's order (frontend/js/pareto.js).
PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#1f2937",
    "#a0cbe8",
    "#ffbe7d",
    "#8cd17d",
    "#b6992d",
    "#499894",
    "#86bcb6",
    "#d37295",
    "#fabfd2",
    "#79706e",
    "#d4a6c8",
)  # fmt: skip  (Tableau 10, then 10 of Tableau 20: one colour per method of the registry)
#: The 17 Universal POS tags with the page's colours (frontend/js/pos.js).
UPOS = (
    ("NOUN", "#4e79a7"), ("PROPN", "#a0cbe8"), ("PRON", "#86bcb6"), ("VERB", "#e15759"),
    ("AUX", "#ff9d9a"), ("ADJ", "#59a14f"), ("ADV", "#8cd17d"), ("ADP", "#f28e2b"),
    ("DET", "#ffbe7d"), ("CCONJ", "#b6992d"), ("SCONJ", "#f1ce63"), ("PART", "#d37295"),
    ("NUM", "#fabfd2"), ("PUNCT", "#79706e"), ("SYM", "#bab0ac"), ("INTJ", "#b07aa1"),
    ("X", "#d4a6c8"),
)  # fmt: skip
#: Above this many gold edges the marks use WebGL (``scattergl``).
GL_EDGES = 20_000
FONT = {"family": "system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif"}


def _go():
    try:
        import plotly.graph_objects as go
    except ImportError:  # pragma: no cover - plotly is a dependency of the app
        raise ImportError("sparse_core.viz needs plotly: pip install plotly") from None
    return go


def _label(text: str) -> str:
    """A token as a Plotly label: Plotly renders a subset of HTML in tick and hover text."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _check_head(out: RunOutput, layer: int, head: int) -> None:
    if not 0 <= layer < out.layers:
        raise ValueError(f"layer must be in [0, {out.layers - 1}] for this model, got {layer}")
    if not 0 <= head < out.heads:
        raise ValueError(f"head must be in [0, {out.heads - 1}] for this model, got {head}")


def _predict(out: RunOutput, layer: int, head: int, method: Any, params: dict, artefact):
    """(mask (n, n) bool, the method's label, its cleaned parameters) of one head."""
    from .methods import Method, PredictContext, get_method

    m = method if isinstance(method, Method) else get_method(str(method))
    ctx = PredictContext.from_run(out, artefact)
    clean = m.validate(out.n, dict(params), artefact)
    with torch.inference_mode():
        mask = m.predict(ctx, **clean)[layer, head]  # (n, n)
    return mask, m.label, clean


def show_head(
    out: RunOutput,
    layer: int,
    head: int,
    method: Any = None,
    params: Mapping[str, Any] | None = None,
    artefact: Artefact | None = None,
) -> Figure:
    """The attention of head (layer, head) as a heatmap, rows = queries i, columns = keys j.

    - p > 0: a blue ramp on √p (the colour bar is labelled in p), red on the gold edges the
      method misses; exact zeros p = 0 stay white.
    - With ``method`` (a name of ``sparse_core.methods.METHODS`` or a Method, ``params`` its
      slider values, missing ones default; ``artefact`` for the sf-* methods): zero cells inside
      the predicted mask M are shaded sand, and each gold edge (i, j) ∈ G = {P_ij > 0} is marked
      ★ when M keeps it (trace "kept") or × when M misses it (trace "missed"). The title gives
      recall |M∩G| / |G| and sparsity 1 − |M∩V| / |V| (definitions §4).
    - Without a method every gold edge is a ★ (trace "gold edges").

    The ★ and × traces hold exactly |G| points between them.
    """
    from . import metrics

    go = _go()
    _check_head(out, layer, head)
    n = out.n
    p = out.attn.head(layer, head).float()  # (n, n)
    gold = p > 0  # (n, n)
    mask = None
    title = f"layer {layer} · head {head} · n = {n} · α = {_alpha_text(out.alpha)}"
    if method is not None:
        mask, label, clean = _predict(out, layer, head, method, params or {}, artefact)
        rec = float(metrics.recall(mask, gold))
        spa = float(metrics.sparsity(mask, causal=bool(out.causal)))
        title += f"<br>{_label(label)}: recall {rec:.3f} · sparsity {spa:.3f}"
    gs = float(metrics.sparsity(gold, causal=bool(out.causal)))
    title += f" · gold sparsity {gs:.3f}"

    def cells(values: torch.Tensor, keep: torch.Tensor) -> list[list[float | None]]:
        """Rows of ``values`` with None (drawn transparent) where ``keep`` is False."""
        v = values.tolist()
        k = keep.tolist()
        return [
            [x if on else None for x, on in zip(vr, kr, strict=True)]
            for vr, kr in zip(v, k, strict=True)
        ]

    traces = []
    if mask is not None:
        shaded = mask & ~gold  # predicted, p = 0
        traces.append(
            go.Heatmap(
                z=cells(torch.ones(n, n), shaded),
                name="predicted, p = 0",
                colorscale=[[0, SHADE], [1, SHADE]],
                showscale=False,
                hovertemplate="query %{y} · key %{x}<br>predicted, p = 0<extra></extra>",
            )
        )
    ticks = [0.01, 0.05, 0.2, 0.5, 1.0]
    shown = gold if mask is None else gold & mask  # blue: p > 0 kept (or no method)
    traces.append(
        go.Heatmap(
            z=cells(p.sqrt(), shown),
            customdata=cells(p, shown),
            name="p > 0",
            zmin=0.0,
            zmax=1.0,
            colorscale=[[k / (len(BLUES) - 1), c] for k, c in enumerate(BLUES)],
            colorbar={
                "title": {"text": "p"},
                "tickvals": [math.sqrt(t) for t in ticks],
                "ticktext": [f"{t:g}" for t in ticks],
                "thickness": 12,
            },
            hovertemplate="query %{y} · key %{x}<br>p = %{customdata:.4f}<extra></extra>",
        )
    )
    if mask is not None:  # red: p > 0 on an edge the method misses
        traces.append(
            go.Heatmap(
                z=cells(p.sqrt(), gold & ~mask),
                customdata=cells(p, gold & ~mask),
                name="p > 0, missed",
                zmin=0.0,
                zmax=1.0,
                colorscale=[[k / (len(REDS) - 1), c] for k, c in enumerate(REDS)],
                showscale=False,
                hovertemplate="query %{y} · key %{x}<br>p = %{customdata:.4f}, missed"
                "<extra></extra>",
            )
        )
    ij = gold.nonzero().tolist()  # gold edges, row-major
    kept_flags = [True] * len(ij) if mask is None else [bool(mask[i, j]) for i, j in ij]
    scatter = go.Scattergl if len(ij) > GL_EDGES else go.Scatter
    size = max(4.0, min(14.0, 520.0 / max(n, 1)))
    kept = [e for e, k in zip(ij, kept_flags, strict=True) if k]
    missed = [e for e, k in zip(ij, kept_flags, strict=True) if not k]
    traces.append(
        scatter(
            x=[j for _, j in kept],
            y=[i for i, _ in kept],
            mode="markers",
            name="gold edges" if mask is None else "gold edge kept (★)",
            marker={
                "symbol": "star",
                "size": size,
                "color": CAUGHT,
                "line": {"color": CAUGHT_STROKE, "width": 0.5},
            },
            hovertemplate="query %{y} · key %{x}<br>gold edge"
            + ("" if mask is None else ", kept")
            + "<extra></extra>",
        )
    )
    if mask is not None:
        traces.append(
            scatter(
                x=[j for _, j in missed],
                y=[i for i, _ in missed],
                mode="markers",
                name="gold edge missed (×)",
                marker={
                    "symbol": "x",
                    "size": size,
                    "color": MISSED,
                    "line": {"color": "#ffffff", "width": 1},
                },
                hovertemplate="query %{y} · key %{x}<br>gold edge, missed<extra></extra>",
            )
        )
    labels = [_label(t) for t in out.tokens]
    step = max(1, math.ceil(n / 64))  # at most ~64 labels per axis
    tickvals = list(range(0, n, step))
    axis = {
        "tickvals": tickvals,
        "ticktext": [labels[k] for k in tickvals],
        "showgrid": False,
        "zeroline": False,
        "range": [-0.5, n - 0.5],
        "tickfont": {"size": 10 if n > 32 else 12},
    }
    side = max(480, min(900, 24 * n + 120))
    title += "<br>rows: queries i · columns: keys j"
    fig = go.Figure(traces)
    fig.update_layout(
        title={
            "text": title,
            "font": {"size": 14},
            "x": 0.01,
            "y": 1,
            "yref": "container",
            "yanchor": "top",
            "pad": {"t": 14},
        },
        font=FONT,
        width=side + 200,
        height=side + 230,
        plot_bgcolor="#ffffff",
        xaxis={**axis, "side": "top", "tickangle": -60},
        yaxis={**axis, "range": [n - 0.5, -0.5], "scaleanchor": "x"},  # row 0 on top
        legend={"orientation": "h", "x": 0, "y": -0.02, "yanchor": "top"},
        margin={"t": 170, "l": 110, "r": 40, "b": 60},
    )
    return fig


def _alpha_text(alpha: Any) -> str:
    if isinstance(alpha, torch.Tensor):
        return "per head" if alpha.numel() > 1 else f"{float(alpha):g}"
    return f"{float(alpha):g}"


# ----------------------------------------------------------------------------- Pareto


def _method_labels() -> dict[str, str]:
    from .methods import METHODS

    return {name: m.label for name, m in METHODS.items()}


def pareto_figure(
    points_or_sweep: Any,
    frontiers: Mapping[str, Sequence[int]] | None = None,
    gold_sparsity: float | None = None,
) -> Figure:
    """Sparsity (x) against recall (y) of every method's sweep, with each method's frontier.

    A body with ``"x": "block"`` (``sparse_core.pareto.check_axis``) is drawn against the block
    sparsity at its ``"block"`` tile size (no gold line: that is a token sparsity).
    ``points_or_sweep`` is one of: a ``sparse_core.pareto.TextSweep`` (drawn for the mean over
    heads; call ``sweep.points(layer, head)`` and pass that for one head), the
    ``GET /api/analyses/{id}/pareto`` body (``{"points", "frontiers", "gold_sparsity"}``), or a
    list of point dicts ``{"method", "params", "sparsity", "recall", ...}``. Missing frontiers
    are computed per method with ``metrics.pareto_front`` (definitions §4); ``gold_sparsity`` draws
    a dotted vertical line (the sparsity of the entmax graph itself).
    """
    go = _go()
    body: Mapping[str, Any]
    if hasattr(points_or_sweep, "points") and callable(points_or_sweep.points):
        body = points_or_sweep.points()
    elif isinstance(points_or_sweep, Mapping):
        body = points_or_sweep
    else:
        body = {"points": list(points_or_sweep)}
    points = list(body.get("points", []))
    fronts = dict(frontiers if frontiers is not None else body.get("frontiers") or {})
    gold = gold_sparsity if gold_sparsity is not None else body.get("gold_sparsity")
    block = body.get("block") if body.get("x") == "block" else None
    xname = "sparsity" if block is None else f"block sparsity ({block} × {block} tiles)"
    if block is not None:
        gold = None  # the gold line is a token sparsity

    def xv(pt: Mapping[str, Any]) -> float:
        if block is None:
            return pt["sparsity"]
        v = pt["block_sparsity"][str(block)]
        return math.nan if v is None else v

    by_method: dict[str, list[int]] = {}
    for k, pt in enumerate(points):
        by_method.setdefault(str(pt["method"]), []).append(k)
    has_mass = any(pt.get("mass_recall") is not None for pt in points)

    def mass(pt: Mapping[str, Any]) -> float:
        v = pt.get("mass_recall")
        return math.nan if v is None else v

    mfronts = {}
    for name, idx in by_method.items():
        if name not in fronts:
            front = pareto_front([(xv(points[k]), points[k]["recall"]) for k in idx])
            fronts[name] = [idx[f] for f in front]
        front = pareto_front([(xv(points[k]), mass(points[k])) for k in idx])
        mfronts[name] = [idx[f] for f in front]
    labels = _method_labels()
    order = {name: k for k, name in enumerate(labels)}
    traces = []
    # per trace: (x, y) with y = recall and with y = mass recall (the y-axis buttons)
    views: list[tuple[list, list, list, list]] = []
    texts: list[tuple[list[str], list[str]]] = []  # per trace: hover texts in either view
    for name in sorted(by_method, key=lambda nm: order.get(nm, len(order))):
        idx = by_method[name]
        colour = PALETTE[order.get(name, len(traces) // 2) % len(PALETTE)]
        label = _label(labels.get(name, name))

        def hover(ks: Sequence[int], label: str = label) -> list[str]:
            return [
                f"<b>{label}</b><br>{_label(_params_text(points[k].get('params', {})))}"
                f"<br>{xname} {xv(points[k]):.3f} · recall {points[k]['recall']:.3f}"
                + (f" · mass recall {mass(points[k]):.3f}" if has_mass else "")
                for k in ks
            ]

        front = list(fronts.get(name, []))
        mfront = mfronts.get(name, [])
        views.append(([xv(points[k]) for k in idx], [points[k]["recall"] for k in idx],
                      [xv(points[k]) for k in idx], [mass(points[k]) for k in idx]))  # fmt: skip
        texts.append((hover(idx), hover(idx)))
        traces.append(
            go.Scatter(
                x=views[-1][0],
                y=views[-1][1],
                mode="markers",
                name=f"{label} (sweep)",
                legendgroup=name,
                showlegend=False,
                marker={"color": colour, "size": 6, "opacity": 0.35},
                text=hover(idx),
                hoverinfo="text",
            )
        )
        views.append((
            [xv(points[k]) for k in front], [points[k]["recall"] for k in front],
            [xv(points[k]) for k in mfront], [mass(points[k]) for k in mfront],
        ))  # fmt: skip
        texts.append((hover(front), hover(mfront)))
        traces.append(
            go.Scatter(
                x=views[-1][0],
                y=views[-1][1],
                mode="lines+markers",
                name=label,
                legendgroup=name,
                line={"color": colour, "width": 2},
                marker={"color": colour, "size": 7},
                text=hover(front),
                hoverinfo="text",
            )
        )
    fig = go.Figure(traces)
    xs = [x for x in map(xv, points) if not math.isnan(x)] + ([gold] if gold is not None else [])
    lo = min(xs) if xs else 0.0
    fig.update_layout(
        font=FONT,
        width=760,
        height=520,
        plot_bgcolor="#ffffff",
        xaxis={"title": {"text": xname}, "range": [max(0.0, lo - 0.04) - 0.01, 1.01],
               "gridcolor": "#eef0f3", "zeroline": False},
        yaxis={"title": {"text": "recall"}, "range": [-0.02, 1.04], "gridcolor": "#eef0f3",
               "zeroline": False},
        legend={"orientation": "h", "x": 0, "y": -0.14, "yanchor": "top"},
        hovermode="closest",
        margin={"t": 30, "l": 60, "r": 20},
    )  # fmt: skip
    if gold is not None:
        fig.add_vline(
            x=float(gold),
            line={"color": "#6b7280", "width": 1, "dash": "dot"},
            annotation_text="gold sparsity",
            annotation_position="top",
        )
    if has_mass:  # y: recall or mass recall (each with its own frontiers)
        buttons = []
        for k, (title, ys) in enumerate((("recall", 1), ("mass recall", 3))):
            buttons.append({
                "label": title,
                "method": "update",
                "args": [{"x": [v[ys - 1] for v in views], "y": [v[ys] for v in views],
                          "text": [t[k] for t in texts]},
                         {"yaxis.title.text": title}],
            })  # fmt: skip
        fig.update_layout(
            updatemenus=[
                {
                    "type": "buttons",
                    "direction": "right",
                    "x": 1.0,
                    "y": 1.08,
                    "xanchor": "right",
                    "yanchor": "bottom",
                    "buttons": buttons,
                    "showactive": True,
                }
            ]  # fmt: skip
        )
    return fig


def _params_text(params: Mapping[str, Any]) -> str:
    return ", ".join(
        f"{k}={v:.2f}" if isinstance(v, float) and not v.is_integer() else f"{k}={v}"
        for k, v in params.items()
    )


# ----------------------------------------------------------------------------- POS


def _shares(side: Any) -> dict[str, float]:
    """Tag -> share from a cluster's query or key side, given as tag -> share or count, as
    ``{"shares": {...}}`` / ``{"counts": {...}}`` / ``{"pos": {...}}``, or as [tag, value] pairs."""
    if isinstance(side, Mapping):
        for key in ("shares", "counts", "pos", "tags"):
            if isinstance(side.get(key), Mapping | list):
                return _shares(side[key])
        raw = {str(k): float(v) for k, v in side.items() if isinstance(v, int | float)}
    elif isinstance(side, list):
        raw = {str(t): float(v) for t, v in side}
    else:
        raise ValueError(f"a cluster side must map POS tags to shares or counts, got {side!r}")
    total = sum(raw.values())
    return {t: v / total for t, v in raw.items()} if total > 0 else {}


def _clusters(breakdown: Any) -> list[tuple[str, dict[str, float], dict[str, float]]]:
    """[(cluster label, query shares, key shares)] from the breakdown's cluster records."""
    recs = breakdown.get("clusters", breakdown) if isinstance(breakdown, Mapping) else breakdown
    if isinstance(recs, Mapping):
        items = [(str(c), rec) for c, rec in recs.items()]
    else:
        items = [(str(rec.get("id", rec.get("cluster", k))), rec) for k, rec in enumerate(recs)]
    out = []
    for label, rec in items:
        if not isinstance(rec, Mapping) or "queries" not in rec or "keys" not in rec:
            raise ValueError(
                f"cluster {label}: each cluster needs 'queries' and 'keys' (POS tag -> share or "
                f"count), got {sorted(rec) if isinstance(rec, Mapping) else type(rec).__name__}"
            )
        out.append((label, _shares(rec["queries"]), _shares(rec["keys"])))
    return out


def pos_figure(breakdown: Any) -> Figure:
    """The part-of-speech make-up of a head's k-means clusters (paper Figure 6, definitions §5).

    ``breakdown`` holds one record per cluster — ``{"clusters": [{"id": c, "queries": {tag:
    share or count}, "keys": {...}}, ...]}``, the ``sparsescope clusters --json`` shape of
    ``sparse_core.pos.cluster_breakdown`` (a list of records, or a dict keyed by cluster, also
    works; counts are normalised to shares; tags outside UPOS, e.g. "[CLS]", are grey).
    Two panels, queries and keys, with one stacked bar per cluster and one colour per Universal
    POS tag (the page's colours).
    """
    go = _go()
    from plotly.subplots import make_subplots

    clusters = _clusters(breakdown)
    labels = [c for c, _, _ in clusters]
    fig = make_subplots(
        rows=1, cols=2, shared_yaxes=True, subplot_titles=("Queries", "Keys"),
        horizontal_spacing=0.06,
    )  # fmt: skip
    known = {t for t, _ in UPOS}
    seen = {t for _, q, k in clusters for t in (*q, *k)}
    tags = [(t, c) for t, c in UPOS if t in seen] + [(t, "#9ca3af") for t in sorted(seen - known)]
    for tag, colour in tags:
        for col, side in ((1, 1), (2, 2)):
            fig.add_trace(
                go.Bar(
                    x=labels,
                    y=[(q if side == 1 else k).get(tag, 0.0) for _, q, k in clusters],
                    name=tag,
                    legendgroup=tag,
                    showlegend=col == 1,
                    marker={"color": colour},
                    hovertemplate=f"cluster %{{x}} · {tag}: %{{y:.0%}}<extra></extra>",
                ),
                row=1,
                col=col,
            )
    title = "k-means clusters by part of speech"
    if isinstance(breakdown, Mapping) and "layer" in breakdown and "head" in breakdown:
        title += f" · layer {breakdown['layer']}, head {breakdown['head']}"
    fig.update_layout(
        barmode="stack",
        font=FONT,
        title={"text": title, "font": {"size": 14}},
        width=820,
        height=420,
        plot_bgcolor="#ffffff",
        bargap=0.25,
    )
    fig.update_xaxes(title_text="cluster", type="category")
    fig.update_yaxes(range=[0, 1], tickformat=".0%", gridcolor="#eef0f3", row=1, col=1)
    return fig


# ----------------------------------------------------------------------------- share


def to_share_state(
    out: RunOutput,
    layer: int = 0,
    head: int = 0,
    method: str = "window",
    params: Mapping[str, Any] | None = None,
    *,
    artefact: Artefact | None = None,
    token: int | None = None,
    view: Mapping[str, bool | int | float | str] | None = None,
) -> dict[str, Any]:
    """A ShareState dict (app/web/routes/share.py) for this text and view, ready for
    ``POST /api/share {"state": ...}``: text, α, causal, truncate, layer, head, method and its
    parameters (validated and completed with the defaults for this n; ``artefact`` for the
    sf-kmeans cluster counts), the locked query row ``token`` and the page's ``view`` flags
    (``{"scope": "mean", "grid": "recall", "hideSpecial": True, "block": "64"}``), checked by the
    page's rules (:mod:`sparse_core.view_schema`: the one definition of a view).
    """
    from .methods import get_method
    from .view_codec import share_flags
    from .view_schema import FLAGS

    flags, errors = share_flags(view or {})
    unknown = sorted(k for k in flags if k not in FLAGS)
    if errors or unknown:
        raise ValueError(
            next(iter(errors.values()), None)
            or f"view flag {unknown[0]!r} is not one the page reads; the flags are "
            + ", ".join(FLAGS)
        )

    _check_head(out, layer, head)
    alpha = out.alpha
    if isinstance(alpha, torch.Tensor):
        if alpha.numel() != 1 or not torch.all(alpha == alpha.flatten()[0]):
            raise ValueError("a share link holds one alpha; this output has a per-head alpha")
        alpha = float(alpha.flatten()[0])
    if token is not None and not 0 <= token < out.n:
        raise ValueError(f"token must be in [0, {out.n - 1}], got {token}")
    m = get_method(method)
    clean = m.validate(out.n, dict(params or {}), artefact)
    return {
        "text": out.text,
        "alpha": float(alpha),
        "causal": bool(out.causal),
        "truncate": bool(getattr(out, "truncated", False)),
        "layer": int(layer),
        "head": int(head),
        "method": m.name,
        "params": {k: _plain(v) for k, v in clean.items()},
        "token": token,
        "cluster": None,
        "lecture_step": None,
        "view": flags,
    }


def _plain(v: Any) -> bool | int | float | str:
    """A JSON scalar (numpy / torch numbers become Python ones)."""
    if isinstance(v, bool | int | float | str):
        return v
    if hasattr(v, "item"):
        return v.item()
    return str(v)


__all__ = ["pareto_figure", "pos_figure", "show_head", "to_share_state"]
