"""Fitting today's learned selectors (definitions §12): the lightning indexer and the AttnGate.

:func:`extract` runs the entmax model on the inputs and keeps what both fits read: each input's
queries and keys (L, H, n, d), the indexer's target (P averaged over the heads of each layer:
rows sum to 1, the report's "summed over heads and L1-normalised") and the gate's targets (for
each B of ``SEER_BLOCKS``, P max-pooled over B × B blocks, each query block's row renormalised:
the reference's pooled ground truth). :func:`fit_selector` trains one kind on the training
inputs and measures it on the held-out ones.

Losses (both per row, then the mean over valid rows, inputs and layers or heads):

- indexer: KL(P̄_t ‖ softmax(I_t)) over the valid keys of query t (DeepSeek-V3.2's warm-up
  stage: the indexer alone, trained against the main attention; here the exact entmax P);
- seer: KL(P^B_a ‖ softmax(gate_a)) over the valid key blocks of query block a, summed over
  B ∈ {16, 32, 64} (project choice: one gate for every block size of the slider; the reference
  trains at one B). SeerAttention's ``KLDivLoss`` on the log-softmax of the gate.

Choices (beyond the references, docs/methods.md): Adam on all weights (lr 1e-3 by default),
gradient clipping to norm 1.0 over each layer's (indexer) or head's (seer) weights, one input a
step, inputs shuffled every epoch, weights initialised as ``nn.Linear`` (U(±1/√fan_in), biases
0, the LayerNorm's gain 1 and bias 0). Everything draws from ``torch.Generator`` s seeded from
``seed``. Small by design: 2 index heads of width 16 per layer and gates of width 16 per head.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor
from tqdm.auto import tqdm

from . import __version__
from .corpus import split_indices
from .errors import SparsescopeError
from .metrics import aggregate, recall, sparsity
from .selectors import (
    Selector,
    gate_logits,
    index_logits,
    indexer_project,
    init_indexer,
    init_seer,
)
from .sparsefinder_fit import _created, _r

log = logging.getLogger(__name__)

SEER_BLOCKS = (16, 32, 64)
#: held-out figures of a fit: the indexer at these k, the gate at B = 32 with these top-k
VALID_KS = (4, 16, 64)
VALID_TOPK = (2, 4, 8)


@dataclass(frozen=True)
class SelectorConfig:
    """Hyper-parameters of a selector fit (module docstring)."""

    kind: str = "indexer"
    index_heads: int = 2
    index_dim: int = 16
    gate_dim: int = 16
    epochs: int = 6
    lr: float = 1e-3
    grad_clip: float = 1.0
    valid_fraction: float = 0.2
    seed: int = 0
    blocks: tuple[int, ...] = SEER_BLOCKS


@dataclass
class SelectorData:
    """Per input: queries, keys (L, H, n, d), the indexer target (L, n, n), the gate targets
    {B: (L, H, T, T)}, and (held-out inputs only) the gold graph (L, H, n, n)."""

    queries: list[Tensor] = field(default_factory=list)
    keys: list[Tensor] = field(default_factory=list)
    layer_target: list[Tensor] = field(default_factory=list)
    block_target: list[dict[int, Tensor]] = field(default_factory=list)
    graph: dict[int, Tensor] = field(default_factory=dict)
    causal: bool = False

    def __len__(self) -> int:
        return len(self.queries)


def block_max(p: Tensor, block: int) -> Tensor:
    """(…, n, n) -> (…, T, T): the max of P over each B × B block (ragged last ones), each row
    renormalised to sum 1 (a row of zeros stays zero)."""
    n = p.shape[-1]
    T = math.ceil(n / block)
    pad = T * block - n
    x = torch.nn.functional.pad(p, (0, pad, 0, pad))
    x = x.unflatten(-1, (T, block)).unflatten(-3, (T, block)).amax(dim=(-1, -3))
    return x / x.sum(-1, keepdim=True).clamp(min=1e-30)


def extract(
    model,
    texts: Sequence[str],
    alpha: float,
    keep_graph: Sequence[int] = (),
    blocks: Sequence[int] = SEER_BLOCKS,
    progress: bool = False,
) -> SelectorData:
    """Run the entmax model on each text (one at a time, bidirectional for an encoder) and keep
    the fits' inputs and targets; the gold graph of the inputs ``keep_graph``."""
    data = SelectorData(causal=bool(model.config.is_decoder))
    keep = set(keep_graph)
    for idx, text in enumerate(tqdm(texts, desc="extracting attention", unit="input",
                                    disable=not progress)):  # fmt: skip
        out = model.run(text, alpha=alpha, causal=False)
        p = torch.stack([torch.as_tensor(out.attn.layer(li)) for li in range(out.layers)]).float()
        data.queries.append(out.queries.float().clone())
        data.keys.append(out.keys.float().clone())
        data.layer_target.append(p.mean(1))  # (L, n, n): rows sum to 1
        data.block_target.append({b: block_max(p, b) for b in blocks})
        if idx in keep:
            data.graph[idx] = p > 0
    return data


def _valid(n: int, causal: bool) -> Tensor:
    return (
        torch.ones(n, n, dtype=torch.bool).tril_() if causal else torch.ones(n, n, dtype=torch.bool)
    )


def kl_rows(target: Tensor, logits: Tensor, valid: Tensor | None) -> Tensor:
    """Mean over rows of KL(target_row ‖ softmax(logits_row)) over the valid entries:
    (…, R, C) -> (…). Invalid entries are −∞ in the logits and 0 in the target."""
    if valid is not None:
        logits = logits.masked_fill(~valid, -torch.inf)
    logq = torch.log_softmax(logits, dim=-1)
    logq = torch.where(target > 0, logq, torch.zeros_like(logq))  # 0 · log q = 0 (also at −∞)
    kl = torch.xlogy(target, target) - target * logq
    return kl.sum(-1).mean(-1)


# ----------------------------------------------------------------------------- weights


def initial(cfg: SelectorConfig, L: int, H: int, d: int) -> dict[str, Tensor]:
    """The initial weights of ``cfg.kind`` for a model of L layers x H heads of dim d."""
    if cfg.kind == "indexer":
        return init_indexer(L, H * d, cfg.index_heads, cfg.index_dim, cfg.seed)
    return init_seer(L, H, d, cfg.gate_dim, cfg.seed)


# ----------------------------------------------------------------------------- losses


def indexer_loss(t: dict[str, Tensor], data: SelectorData, i: int, heads: int) -> Tensor:
    """(L,) the indexer's KL of input i, per layer."""
    qi, ki, w = indexer_project(t, data.queries[i], data.keys[i], heads)
    logits = index_logits(qi, ki, w)  # (L, n, n)
    n = logits.shape[-1]
    return kl_rows(data.layer_target[i], logits, _valid(n, data.causal) if data.causal else None)


def seer_loss(t: dict[str, Tensor], data: SelectorData, i: int, blocks: Sequence[int]) -> Tensor:
    """(L, H) the gate's KL of input i, summed over the block sizes."""
    total = 0
    for b in blocks:
        g = gate_logits(t["wq"], t["wk"], data.queries[i], data.keys[i], b)  # (L, H, T, T)
        T = g.shape[-1]
        total = total + kl_rows(
            data.block_target[i][b], g, _valid(T, True) if data.causal else None
        )
    return total


def _loss(kind: str, t, data, i, cfg) -> Tensor:
    if kind == "indexer":
        return indexer_loss(t, data, i, cfg.index_heads)
    return seer_loss(t, data, i, cfg.blocks)


def _clip(t: dict[str, Tensor], kind: str, max_norm: float) -> None:
    """Clip the gradient to ``max_norm`` per layer (indexer) or per head (seer)."""
    lead = 1 if kind == "indexer" else 2
    sq = sum(p.grad.flatten(lead).pow(2).sum(-1) for p in t.values())
    scale = (max_norm / (sq.sqrt() + 1e-6)).clamp(max=1.0)
    for p in t.values():
        p.grad.mul_(scale.reshape(scale.shape + (1,) * (p.dim() - lead)))


def train(
    data: SelectorData, train_idx: Sequence[int], t0: dict[str, Tensor], cfg: SelectorConfig,
    *, progress: bool = False,
) -> tuple[dict[str, Tensor], list[float]]:  # fmt: skip
    """Adam on the weights ``t0`` over the training inputs: the weights, each epoch's mean loss."""
    if not train_idx:
        raise SparsescopeError("no training inputs: give more text or a smaller valid fraction")
    t = {k: v.clone().requires_grad_() for k, v in t0.items()}
    opt = torch.optim.Adam(list(t.values()), lr=cfg.lr)
    gen = torch.Generator().manual_seed(cfg.seed + 3)
    bar = tqdm(total=cfg.epochs * len(train_idx), desc=f"training the {cfg.kind}", unit="step",
               disable=not progress)  # fmt: skip
    history = []
    for epoch in range(cfg.epochs):
        total = 0.0
        for step, p in enumerate(torch.randperm(len(train_idx), generator=gen).tolist()):
            per = _loss(cfg.kind, t, data, train_idx[p], cfg)  # per layer / head
            opt.zero_grad(set_to_none=True)
            per.sum().backward()
            _clip(t, cfg.kind, cfg.grad_clip)
            opt.step()
            total += float(per.detach().mean())
            bar.update(1)
            bar.set_postfix(epoch=epoch + 1, kl=f"{total / (step + 1):.3f}")
        history.append(total / len(train_idx))
        log.info("%s epoch %d: training KL %.4f", cfg.kind, epoch + 1, history[-1])
    bar.close()
    return {k: v.detach() for k, v in t.items()}, history


def mean_loss(data: SelectorData, idx: Sequence[int], t, cfg: SelectorConfig) -> float:
    """The mean KL over the inputs ``idx`` (and layers or heads)."""
    with torch.no_grad():
        return sum(float(_loss(cfg.kind, t, data, i, cfg).mean()) for i in idx) / max(1, len(idx))


def held_out(data: SelectorData, idx: Sequence[int], sel: Selector, cfg: SelectorConfig) -> list:
    """Recall and sparsity (definitions §4; per head averaged over inputs, then over heads) of
    the selector's masks on the inputs ``idx`` at the settings ``VALID_KS`` / ``VALID_TOPK``."""
    from .methods.selection import first_k_mask
    from .selectors import IndexerInput, SeerInput, index_scores, seer_gate

    settings = [{"k": k} for k in VALID_KS] if sel.kind == "indexer" else [
        {"block": 32, "topk": k} for k in VALID_TOPK]  # fmt: skip
    rec: list[list[Tensor]] = [[] for _ in settings]
    spa: list[list[Tensor]] = [[] for _ in settings]
    for i in idx:
        q, k, G = data.queries[i], data.keys[i], data.graph[i]
        L, H, n, _ = q.shape
        valid = _valid(n, data.causal)
        for s, st in enumerate(settings):
            if sel.kind == "indexer":
                inp = IndexerInput.of(sel, q, k)
                M = torch.stack([first_k_mask(index_scores(inp, li, data.causal), st["k"])
                                 for li in range(L)])[:, None].expand(L, H, n, n)  # fmt: skip
            else:
                inp, b = SeerInput.of(sel), st["block"]
                rows = []
                for li in range(L):
                    for h in range(H):
                        g = seer_gate(
                            inp, q[li, h].numpy(), k[li, h].numpy(), li, h, b, data.causal
                        )
                        blk = first_k_mask(g, st["topk"]).numpy()
                        rows.append(torch.from_numpy(blk.repeat(b, 0).repeat(b, 1)[:n, :n]))
                M = torch.stack(rows).view(L, H, n, n)
            M = M & valid
            rec[s].append(recall(M, G))
            spa[s].append(sparsity(M, data.causal))
    return [
        {**st, "recall": _r(aggregate(rec[s])[1]), "sparsity": _r(aggregate(spa[s])[1])}
        for s, st in enumerate(settings)
    ]


def fit_selector(
    model,
    texts: Sequence[str],
    *,
    alpha: float = 1.5,
    config: SelectorConfig | None = None,
    meta: dict | None = None,
    progress: bool = False,
) -> Selector:
    """Fit a selector of ``config.kind`` for ``model`` at ``alpha`` on ``texts`` (a seeded
    ``valid_fraction`` of them held out for the figures in its metadata)."""
    cfg = config or SelectorConfig()
    if cfg.kind not in ("indexer", "seer"):
        raise SparsescopeError(f"unknown selector {cfg.kind!r}; selectors are indexer, seer")
    if not texts:
        raise SparsescopeError("no inputs to fit on")
    train_idx, valid_idx = split_indices(len(texts), cfg.valid_fraction, cfg.seed)
    data = extract(model, texts, alpha, keep_graph=valid_idx, blocks=cfg.blocks, progress=progress)
    L, H, _, d = data.queries[0].shape
    t0 = initial(cfg, L, H, d)
    weights, history = train(data, train_idx, t0, cfg, progress=progress)
    # what ships is float16: the held-out figures are those of the rounded weights
    weights = {k: v.half().float() for k, v in weights.items()}
    sel = Selector(cfg.kind, model.model_id, float(alpha), weights)
    validation = None
    if valid_idx:
        validation = {
            "kl_initial": _r(mean_loss(data, valid_idx, t0, cfg)),
            "kl": _r(mean_loss(data, valid_idx, weights, cfg)),
            "masks": held_out(data, valid_idx, sel, cfg),
        }
        log.info("%s held-out KL %.4f (before training %.4f)", cfg.kind, validation["kl"],
                 validation["kl_initial"])  # fmt: skip
    sizes = {
        "inputs": len(texts), "train_inputs": len(train_idx), "valid_inputs": len(valid_idx),
        "tokens": sum(q.shape[2] for q in data.queries),
        "parameters": sum(v.numel() for v in weights.values()),
    }  # fmt: skip
    shape = (
        {"layers": L, "index_heads": cfg.index_heads, "index_dim": cfg.index_dim, "input": H * d}
        if cfg.kind == "indexer"
        else {
            "layers": L,
            "heads": H,
            "pooled": 2 * d,
            "gate_dim": cfg.gate_dim,
            "pooling": ["avg", "max"],
        }  # fmt: skip
    )
    sel.meta = {
        **(meta or {}),
        "causal": data.causal,
        "shape": shape,
        "sizes": sizes,
        "split": {"valid_fraction": cfg.valid_fraction, "valid_inputs": valid_idx},
        "training": {
            "loss": "KL(P_t || softmax(I_t)), P averaged over the layer's heads (definitions §12)"
            if cfg.kind == "indexer"
            else "KL(block-max-pooled P, renormalised || softmax(gate)), summed over blocks "
            f"{list(cfg.blocks)} (definitions §12)",
            "optimizer": "adam",
            "lr": cfg.lr,
            "epochs": cfg.epochs,
            "batch": 1,
            "steps": cfg.epochs * len(train_idx),
            "grad_clip": cfg.grad_clip,
            "grad_clip_scope": "per layer" if cfg.kind == "indexer" else "per head",
            "kl_per_epoch": [_r(x) for x in history],
        },  # fmt: skip
        "validation": validation,
        "seed": cfg.seed,
        "version": __version__,
        "torch": torch.__version__.split("+")[0],
        "created": _created(),
    }
    return sel
