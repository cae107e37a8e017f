"""An example of a modern block method (definitions §8): MoBA's gate choosing a few
key blocks per query from the mean key of each block, and what that costs the head whose
long-range edges fall outside the blocks it picks."""

from __future__ import annotations

import torch

from sparse_core.methods import METHODS, PredictContext

from .measure import Example, fig, head_metrics, state, with_thumb
from .texts import WIKI_CREDIT


def block_miss(model, text: str) -> Example:
    """The ~512-token Wikipedia passage (the same text as the ``wikipedia-*`` example), MoBA at
    its defaults for n (B = 32, top-3 blocks, no add-ons): among the 72 heads, the one where it
    drops the most *long-range* attention mass — the mean over queries of Σ P over the gold
    edges (i, j) between content tokens with |i − j| > B that its blocks leave out. The locked
    row holds that head's heaviest missed long-range edge."""
    out = model.run(text, alpha=1.5)
    ctx = PredictContext.from_run(out)
    method = METHODS["moba"]
    params = method.validate(out.n, method.defaults(out.n))
    b = int(params["block"])
    pred = method.predict(ctx, **params)  # (L, H, n, n)
    idx = torch.arange(out.n)
    content = ~torch.as_tensor(out.special, dtype=torch.bool)  # (n,)
    far = ((idx[:, None] - idx[None, :]).abs() > b) & content[:, None] & content[None, :]
    long = out.graph & far  # (L, H, n, n): the long-range gold edges
    missed = long & ~pred
    lost = (out.probs * missed).sum(-1).mean(-1)  # (L, H)
    layer, head = divmod(int(lost.argmax()), out.heads)
    n_long = int(long[layer, head].sum())
    kept_long = int((long[layer, head] & pred[layer, head]).sum()) / max(n_long, 1)
    long_mass = float((out.probs[layer, head] * long[layer, head]).sum(-1).mean())
    got = head_metrics(ctx, "moba", params, layer, head)
    pm = out.probs[layer, head] * missed[layer, head]
    i, j = divmod(int(pm.argmax()), out.n)
    p = float(pm[i, j])
    ex = Example(
        slug="block-misses",
        title="A block method misses the far edges",
        summary=f"MoBA keeps {params['topk']} blocks of {b} keys per query, chosen by mean key.",
        explain=(
            f"MoBA (Lu et al. 2025) cuts the keys into blocks of {b} and lets each query keep its "
            f"own block and the {params['topk'] - 1} others whose mean key scores highest. A "
            f"block's mean key blurs the few far tokens a query really attends to: in layer "
            f"{layer}, head {head}, {n_long} true edges reach more than {b} tokens away, MoBA "
            f"keeps only {kept_long:.0%} of them and drops {float(lost[layer, head]):.0%} of the "
            f"attention weight on average (recall {got['recall']:.2f} at sparsity "
            f"{got['sparsity']:.2f}). The heaviest miss is in the locked row: "
            f"“{out.tokens[i]}” → “{out.tokens[j]}” ({abs(i - j)} tokens apart) with p = "
            f"{p:.2f}. Raise the blocks per query, or try Quest's per-dimension bounds, and "
            f"watch which far edges come back."
        ),
        how=(
            f"argmax over 72 heads of the mean attention mass on the gold edges between content "
            f"tokens more than B = {b} apart that MoBA (defaults: B = {b}, top-{params['topk']}) "
            f"leaves out"
        ),
        state=state(out, layer, head, "moba", params, token=i),
        figures=[
            fig("recall", got["recall"]),
            fig(f"far edges (> {b} apart) kept", kept_long),
            fig("far attention mass", long_mass),
            fig("mass dropped", float(lost[layer, head])),
            fig("heaviest miss p", p),
        ],
        tags=["arena", "MoBA", "blocks", "misses"],
        credit=WIKI_CREDIT,
    )
    return with_thumb(ex, out, ctx)
