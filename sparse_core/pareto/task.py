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

**The model's own task: STS** (:func:`sts_task`, ``sparsescope pareto --task sts``). For a
sentence embedder (all-MiniLM-L6-v2 and its adaptations) the task it was trained for is
semantic similarity. Each sentence of the STS pairs runs once; every frontier point's method
predicts its masks from that run and the model re-runs with every head restricted to them
(entmax over the kept pairs only); the sentence's embedding is the mean of the restricted final
hidden states, a pair's score the cosine, and the point's figure the mean over the STS sets of
Spearman's correlation with the gold scores (:mod:`sparse_core.card`). The sweep then runs on
those very sentences, so the x-axis is the sparsity of the masks that were imposed. Points off
the frontiers get ``"task_spearman": null``.
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


#: frontier points restricted in one batched forward of a sentence (:func:`sts_task`)
STS_BATCH = 32


@torch.inference_mode()
def _restricted_means(model, out, masks: torch.Tensor) -> torch.Tensor:
    """(B, d_model) float32: the mean final hidden state of ``out``'s text re-run once per
    mask set, every head restricted to ``masks`` (L, B, H, n, n) bool; one forward of B copies
    (row b is ``model.forward_masked(out, masks[:, b])``)."""
    b = masks.shape[1]
    ids = torch.tensor([out.input_ids] * b, device=model._device)
    res = model._forward(ids, None, out.alpha, out.causal, masks.to(model._device), record=False)
    return res["hidden"].double().mean(1).float().cpu()


def sts_task(model, sets, artefact, grids: dict, body: dict, *, alpha, min_sparsity: float = 0.0,
             progress: bool = True) -> dict:  # fmt: skip
    """The STS Spearman (mean over ``sets``, :class:`sparse_core.card.StsSet`) of every
    frontier point of ``body`` with sparsity >= ``min_sparsity``, with every head restricted
    to the point's masks, and of the unrestricted model. One run per unique sentence; per
    point one restricted forward (batched by :data:`STS_BATCH` points)."""
    from tqdm.auto import tqdm

    from ..card import spearman

    todo = [t for t in frontier_points(body) if body["points"][t[2]]["sparsity"] >= min_sparsity]
    uniq = list(dict.fromkeys(t for s in sets for t in (*s.a, *s.b)))
    pos = {t: i for i, t in enumerate(uniq)}
    d = model.config.hidden_size
    full = torch.empty(len(uniq), d, dtype=torch.float64)
    emb = torch.empty(len(todo), len(uniq), d, dtype=torch.float32)
    bar = tqdm(total=len(uniq), desc="sts", unit="sentence", disable=not progress)
    with torch.inference_mode():
        for i, text in enumerate(uniq):
            out = model.run(text, alpha=alpha, truncate=True)
            full[i] = out.hidden.double().mean(0)
            ctx = PredictContext.from_run(out, artefact)
            shape = (out.layers, out.heads, out.n, out.n)
            for p0 in range(0, len(todo), STS_BATCH):  # points in one batched forward
                part = todo[p0 : p0 + STS_BATCH]
                masks = torch.stack([METHODS[name].predict(ctx, **grids[name][j]).expand(shape)
                                     for name, j, _ in part], 1)  # (L, B, H, n, n)  # fmt: skip
                emb[p0 : p0 + len(part), i] = _restricted_means(model, out, masks)
            bar.update(1)
    bar.close()

    def figure(e: torch.Tensor) -> tuple[float, dict]:
        e = torch.nn.functional.normalize(e.double(), dim=-1)
        per = {}
        for s in sets:
            ia = torch.tensor([pos[t] for t in s.a])
            ib = torch.tensor([pos[t] for t in s.b])
            per[s.name] = spearman((e[ia] * e[ib]).sum(-1), s.gold)
        return sum(per.values()) / len(per), per

    whole, whole_per = figure(full)
    points, per_point = {}, {}
    for p, (_, _, key) in enumerate(todo):
        points[key], per_point[key] = figure(emb[p])
    return {
        "objective": "sts",
        "spearman_full": whole,
        "per_set_full": whole_per,
        "points": points,
        "per_set": per_point,
        "sets": [{"name": s.name, "pairs": len(s), "sha256": s.sha256} for s in sets],
        "sentences": len(uniq),
        "subset": "the points of each method's token-sparsity frontier"
        + (f" with sparsity >= {min_sparsity:g}" if min_sparsity > 0 else ""),
    }


def attach_sts(body: dict, task: dict) -> dict:
    """Add the STS figures to a pareto.json body (``task_spearman`` per point, ``task``)."""
    for k, pt in enumerate(body["points"]):
        v = task["points"].get(k)
        pt["task_spearman"] = None if v is None else round(float(v), 6)
    body["task"] = {
        "objective": "sts",
        "metric": "STS Spearman",
        "key": "task_spearman",
        "spearman_full": round(float(task["spearman_full"]), 6),
        "per_set_full": {k: round(v, 6) for k, v in task["per_set_full"].items()},
        "sets": task["sets"],
        "sentences": task["sentences"],
        "subset": task["subset"],
    }
    return body


def attach(body: dict, task: dict) -> dict:
    """Add the task figures to a pareto.json body (``task_loss`` per point, ``task`` block)."""
    if task.get("objective") == "sts":
        return attach_sts(body, task)
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
    key = task.get("key", "task_loss")
    full = task["spearman_full"] if key == "task_spearman" else task["loss_full"]
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
        if pt.get(key) is not None:
            by_method.setdefault(pt["method"], []).append(pt)
    for name, pts in by_method.items():
        pts = sorted(pts, key=lambda p: p["sparsity"])
        colour = next((c for n, c in colours.items() if n and name in n.lower()), None)
        two.add_scatter(
            x=[p["sparsity"] for p in pts], y=[p[key] for p in pts],
            mode="lines+markers", name=f"{name} ({task['metric']})", legendgroup=name,
            line={"color": colour}, row=1, col=2,
        )  # fmt: skip
    two.add_hline(y=full, line_dash="dash", line_color="#555", row=1, col=2,
                  annotation_text=f"unrestricted {full:.3f}")  # fmt: skip
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
