"""The loss-curve figure of an adaptation: a self-contained HTML file (Plotly inlined, no CDN).

Top panel: the training loss per step (faint) and its running mean over ``window`` steps, with
the held-out loss as a marker at the last step when it was measured; bottom panel: the gold
sparsity of each training batch and, for a learned α, the mean α and its min–max band.
"""

from __future__ import annotations

from pathlib import Path


def running_mean(values: list[float], window: int) -> list[float]:
    out, acc = [], 0.0
    for i, v in enumerate(values):
        acc += v
        if i >= window:
            acc -= values[i - window]
        out.append(acc / min(i + 1, window))
    return out


def loss_figure(records: list[dict], *, title: str, held_out: dict | None = None):
    """A Plotly figure of the log ``records`` (one dict per step)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    steps = [r["step"] for r in records]
    loss = [r["loss"] for r in records]
    window = max(1, min(50, len(loss) // 10 or 1))
    fig = make_subplots(
        rows=2, cols=1, shared_xaxes=True, row_heights=[0.65, 0.35], vertical_spacing=0.06,
        specs=[[{}], [{"secondary_y": True}]],
    )  # fmt: skip
    fig.add_trace(
        go.Scatter(x=steps, y=loss, mode="lines", name="loss (batch)",
                   line={"width": 1, "color": "rgba(31,119,180,0.35)"}),
        row=1, col=1,
    )  # fmt: skip
    fig.add_trace(
        go.Scatter(x=steps, y=running_mean(loss, window), mode="lines",
                   name=f"loss (mean of {window})", line={"width": 2, "color": "#1f77b4"}),
        row=1, col=1,
    )  # fmt: skip
    if held_out and held_out.get("loss") is not None and steps:
        fig.add_trace(
            go.Scatter(x=[steps[-1]], y=[held_out["loss"]], mode="markers+text",
                       name="held-out loss", text=[f"{held_out['loss']:.3f}"],
                       textposition="top left", marker={"size": 10, "color": "#d62728"}),
            row=1, col=1,
        )  # fmt: skip
    gold = [r.get("gold_sparsity") for r in records]
    if any(g is not None for g in gold):
        fig.add_trace(
            go.Scatter(x=steps, y=gold, mode="lines", name="gold sparsity (batch)",
                       line={"width": 1, "color": "#2ca02c"}),
            row=2, col=1, secondary_y=False,
        )  # fmt: skip
    alpha = [r.get("alpha") or {} for r in records]
    if any(a.get("std") for a in alpha):
        fig.add_trace(
            go.Scatter(x=steps + steps[::-1],
                       y=[a["max"] for a in alpha] + [a["min"] for a in alpha][::-1],
                       fill="toself", mode="none", name="α min–max",
                       fillcolor="rgba(148,103,189,0.2)"),
            row=2, col=1, secondary_y=True,
        )  # fmt: skip
        fig.add_trace(
            go.Scatter(x=steps, y=[a["mean"] for a in alpha], mode="lines", name="α mean",
                       line={"color": "#9467bd"}),
            row=2, col=1, secondary_y=True,
        )  # fmt: skip
    fig.update_layout(title=title, template="plotly_white", height=640,
                      legend={"orientation": "h", "y": -0.12})  # fmt: skip
    fig.update_yaxes(title_text="loss (nats / token)", row=1, col=1)
    fig.update_yaxes(title_text="gold sparsity", row=2, col=1, secondary_y=False)
    fig.update_yaxes(title_text="α", row=2, col=1, secondary_y=True)
    fig.update_xaxes(title_text="step", row=2, col=1)
    return fig


def write_loss_html(path: Path, records: list[dict], *, title: str, held_out=None) -> Path:
    import plotly.io as pio

    fig = loss_figure(records, title=title, held_out=held_out)
    path.write_text(pio.to_html(fig, include_plotlyjs=True, full_html=True))
    return path
