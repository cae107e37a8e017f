"""The task axis of a corpus sweep (definitions §9; the paper's Fig. 2 and 4, right panels).

For a model with an LM or MLM head, each method's predicted graph M replaces the full attention
of every head (entmax over the scores inside M, :attr:`RunState.restrict`) and the model's loss
is measured: the masked-LM loss on a fixed seeded masking (BERT's recipe, the same positions and
replacements for every point) for encoders, the next-token loss (and perplexity e^loss) for
decoders. Plotted against sparsity it is the paper's sparsity–perplexity trade-off.

Per input: the input is masked once (seed, input index); the model runs on the masked ids and
records its queries, keys and graph (:func:`sparse_core.adapt.evaluate.run_ids`); every method
predicts M from that run (as it would in deployment, from the model's actual input); the loss is
measured unrestricted and under each M. A mask M ⊇ G gives the unrestricted loss exactly
(sparse-consistency, definitions §1). The figure of a point is the token-weighted mean loss over the
inputs (sum of token losses / scored tokens).

Affordable subset (one restricted forward per point and input): the points of each method's
token-sparsity frontier (the points the figure's frontier lines join), on the first
``texts`` inputs of the sweep (default 4 in ``sparsescope pareto --task``). Points off the
frontiers get ``"task_loss": null``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ..methods import METHODS, PredictContext


def frontier_points(body: dict) -> list[tuple[str, int, int]]:
    """(method, index in the method's grid, index in body["points"]) of every frontier point."""
    firsts: dict[str, int] = {}
    for k, pt in enumerate(body["points"]):
        firsts.setdefault(pt["method"], k)
    out = []
    for name, front in body["frontiers"].items():
        out += [(name, k - firsts[name], k) for k in front]
    return out


def task_losses(
    lm, texts: Sequence[str], artefact, grids: dict, body: dict, *, alpha, seed: int = 0,
    progress: bool = True,
) -> dict:  # fmt: skip
    """The loss of every frontier point of ``body`` (a pareto.json body) on ``texts``."""
    from tqdm.auto import tqdm

    from ..adapt.evaluate import masked_input, restricted_loss, run_ids

    todo = frontier_points(body)
    sums = {key: 0.0 for key in todo}
    full, tokens = 0.0, 0
    bar = tqdm(total=len(todo) * len(texts), desc="task", unit="pass", disable=not progress)
    for t, text in enumerate(texts):
        enc = lm.sparse.encode(text, truncate=True)
        batch = masked_input(lm, enc.ids, seed, t)
        out = run_ids(lm.sparse, batch.ids[0].tolist(), enc.special, alpha)
        ctx = PredictContext.from_run(out, artefact)
        loss, k = restricted_loss(lm, batch, alpha, None)
        full += loss * k
        tokens += k
        shape = (out.layers, out.heads, out.n, out.n)
        for name, j, key in todo:
            mask = METHODS[name].predict(ctx, **grids[name][j]).expand(shape)
            lk, _ = restricted_loss(lm, batch, alpha, mask)
            sums[(name, j, key)] += lk * k
            bar.update(1)
    bar.close()
    return {
        "objective": lm.objective,
        "texts": len(texts),
        "tokens": tokens,
        "seed": seed,
        "loss_full": full / max(tokens, 1),
        "points": {key: v / max(tokens, 1) for (_, _, key), v in sums.items()},
        "subset": "the points of each method's token-sparsity frontier",
    }


def attach(body: dict, task: dict) -> dict:
    """Add the task figures to a pareto.json body (``task_loss`` per point, ``task`` block)."""
    for k, pt in enumerate(body["points"]):
        v = task["points"].get(k)
        pt["task_loss"] = None if v is None else round(float(v), 6)
    body["task"] = {
        "objective": task["objective"],
        "metric": "masked-LM loss" if task["objective"] == "masked-lm" else "next-token loss",
        "loss_full": round(float(task["loss_full"]), 6),
        "perplexity_full": round(math.exp(task["loss_full"]), 4),
        "texts": task["texts"],
        "tokens": task["tokens"],
        "seed": task["seed"],
        "subset": task["subset"],
    }
    return body


def with_task_panel(fig, body: dict):
    """The sparsity–recall figure with a second panel: sparsity against the task loss."""
    from plotly.subplots import make_subplots

    task = body["task"]
    two = make_subplots(
        rows=1, cols=2, horizontal_spacing=0.08,
        subplot_titles=("sparsity vs recall", f"sparsity vs {task['metric']}"),
    )  # fmt: skip
    for tr in fig.data:
        two.add_trace(tr, row=1, col=1)
    for shape in fig.layout.shapes or ():
        two.add_shape(shape, row=1, col=1)
    colours = {tr.name: getattr(tr.line, "color", None) for tr in fig.data if tr.name}
    by_method: dict[str, list[dict]] = {}
    for pt in body["points"]:
        if pt.get("task_loss") is not None:
            by_method.setdefault(pt["method"], []).append(pt)
    for name, pts in by_method.items():
        pts = sorted(pts, key=lambda p: p["sparsity"])
        colour = next((c for n, c in colours.items() if n and name in n.lower()), None)
        two.add_scatter(
            x=[p["sparsity"] for p in pts], y=[p["task_loss"] for p in pts],
            mode="lines+markers", name=f"{name} (loss)", legendgroup=name,
            line={"color": colour}, row=1, col=2,
        )  # fmt: skip
    two.add_hline(y=task["loss_full"], line_dash="dash", line_color="#555", row=1, col=2,
                  annotation_text=f"unrestricted {task['loss_full']:.3f}")  # fmt: skip
    lay = fig.layout
    two.update_layout(title=lay.title, template=lay.template, legend=lay.legend)
    two.update_xaxes(title_text=lay.xaxis.title.text, range=lay.xaxis.range, row=1, col=1)
    two.update_yaxes(title_text=lay.yaxis.title.text, range=lay.yaxis.range, row=1, col=1)
    two.update_xaxes(title_text="sparsity", row=1, col=2)
    two.update_yaxes(title_text=task["metric"], row=1, col=2)
    two.update_layout(width=None, height=560)
    return two


def check_lm(model_path) -> object:
    """The model with its LM head, or a one-line error when it has none."""
    from ..adapt.lm import load_lm
    from ..errors import SparsescopeError

    torch.manual_seed(0)
    lm = load_lm(model_path, "cpu")
    if lm.new_head:
        raise SparsescopeError(
            f"--task needs a model with an LM or masked-LM head; {lm.source.model_id} has none "
            "(adapt it, or train a head: sparsescope adapt --train head)",
            field="task",
        )
    return lm
