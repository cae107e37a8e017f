"""The training step and its state: AdamW, warm-up and decay, clipping, learned α (definitions §7).

One step s (0-based) of :class:`Trainer`:

1. learning rate ``lr · f(s)``: linear warm-up over the first ``w = round(warmup · steps)`` steps
   (``f = (s + 1) / w``), then linear decay to 0 at the last step (``f = (steps − s) /
   (steps − w)``) or cosine (``f = ½ (1 + cos(π (s − w) / (steps − w)))``);
2. the batch of step s (:mod:`sparse_core.adapt.data`: order and masking are functions of
   (seed, s)); dropout draws from torch's generator seeded with (seed, s, rank) for the forward;
3. loss = (sum of the token losses) / (tokens with a loss in the whole batch); backward (entmax's
   closed-form backward, :mod:`sparse_core.entmax.grad`); with several data-parallel workers
   each computes its share of the batch and the gradients are summed over workers (so W workers
   compute the gradient of the same mean as one);
4. gradient clipping to a global norm of ``clip``; AdamW (decoupled weight decay, not on biases,
   norm weights and α; BERT's β = (0.9, 0.999), ε = 1e-6).

Everything a resumed run needs is the model's weights, the optimiser's state and the step
(:meth:`Trainer.state_dict`): the schedule, the data position and every random draw are
functions of the step, so a run resumed from a checkpoint computes the same losses, bit for bit,
as one that was never interrupted (on the same machine and thread count).

What is trained (``train``): ``all`` (every parameter), ``body`` (all but the embeddings; a
tied decoder stays as it is), ``attention`` (the attention blocks' projections and every norm,
plus the head's own layers: the smallest delta to ship) or ``head`` (only the head, on a frozen
body run in eval mode; α = 1 allowed: the softmax original's head).
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, fields

import torch

from .alpha import LearnedAlpha, alpha_stats, layer_alphas
from .data import Batches, mix_seed
from .lm import IGNORE, LanguageModel

TRAIN_CHOICES = ("all", "body", "attention", "head")
SCHEDULES = ("linear", "cosine")
_ATTENTION = re.compile(r"(^|\.)(attention|attn|self_attn)\.|(^|\.)(q_lin|k_lin|v_lin|out_lin)\.")
_NORM = re.compile(r"norm|layernorm|ln_\d|ln_f", re.IGNORECASE)
_EMBED = re.compile(r"embed|wte|wpe|shared", re.IGNORECASE)
_NO_DECAY = re.compile(r"bias$|norm|LayerNorm|ln_", re.IGNORECASE)


@dataclass
class AdaptConfig:
    """Everything that determines an adaptation's result (recorded in ``adapt.json``)."""

    alpha: float | None  # None: learned per head
    steps: int
    alpha_start: float = 1.5
    seq_len: int = 128
    batch: int = 16
    lr: float = 1e-4
    alpha_lr: float = 1e-2
    warmup: float = 0.06
    schedule: str = "linear"
    weight_decay: float = 0.01
    clip: float = 1.0
    seed: int = 0
    train: str = "all"
    eval_every: int = 5

    @property
    def learned(self) -> bool:
        return self.alpha is None

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> AdaptConfig:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


def trainable(lm: LanguageModel, what: str) -> list[tuple[str, torch.nn.Parameter]]:
    """The (name, parameter) pairs that ``what`` trains (module docstring)."""
    if what not in TRAIN_CHOICES:
        raise ValueError(f"train must be one of {TRAIN_CHOICES}, got {what!r}")
    head = {id(p) for _, p in lm.head_parameters()}
    out = []
    for name, p in lm.lm.named_parameters():
        in_head = id(p) in head
        if what == "all":
            keep = True
        elif what == "head":
            keep = in_head
        elif what == "body":
            keep = in_head or not _EMBED.search(name)
        else:  # attention
            keep = in_head or bool(_ATTENTION.search(name)) or bool(_NORM.search(name))
            keep = keep and not _EMBED.search(name.replace("embeddings.LayerNorm", ""))
        if keep:
            out.append((name, p))
    return out


class Trainer:
    """One adaptation's optimiser, schedule and α; :meth:`step` trains one batch."""

    def __init__(
        self, lm: LanguageModel, cfg: AdaptConfig, data: Batches, *, rank: int = 0, world: int = 1
    ) -> None:
        self.lm, self.cfg, self.data = lm, cfg, data
        self.rank, self.world = rank, world
        c = lm.sparse.config
        self.layers = c.num_layers
        self.alpha: float | LearnedAlpha = (
            LearnedAlpha(c.num_layers, c.num_heads, cfg.alpha_start).to(lm.device)
            if cfg.learned
            else float(cfg.alpha)
        )
        chosen = trainable(lm, cfg.train)
        ids = {id(p) for _, p in chosen}
        for p in lm.lm.parameters():
            p.requires_grad_(id(p) in ids)
        self.body_grad = cfg.train != "head" or cfg.learned
        self.params = [p for _, p in chosen]
        decay = [p for n, p in chosen if not _NO_DECAY.search(n)]
        rest = [p for n, p in chosen if _NO_DECAY.search(n)]
        groups = [
            {"params": decay, "weight_decay": cfg.weight_decay, "lr": cfg.lr, "base_lr": cfg.lr},
            {"params": rest, "weight_decay": 0.0, "lr": cfg.lr, "base_lr": cfg.lr},
        ]
        if isinstance(self.alpha, LearnedAlpha):
            self.params.append(self.alpha.a)
            groups.append(
                {"params": [self.alpha.a], "weight_decay": 0.0, "lr": cfg.alpha_lr,
                 "base_lr": cfg.alpha_lr}
            )  # fmt: skip
        self.opt = torch.optim.AdamW(groups, betas=(0.9, 0.999), eps=1e-6)
        self.done = 0  # steps done

    # ------------------------------------------------------------------ schedule
    def lr_factor(self, s: int) -> float:
        steps = self.cfg.steps
        w = min(round(self.cfg.warmup * steps), steps - 1) if self.cfg.warmup > 0 else 0
        if s < w:
            return (s + 1) / w
        rest = max(1, steps - w)
        if self.cfg.schedule == "cosine":
            return 0.5 * (1.0 + math.cos(math.pi * (s - w) / rest))
        return (steps - s) / rest

    # ------------------------------------------------------------------ one step
    def step(self) -> dict:
        """Train on the batch of step ``self.done``; returns the log record of the step."""
        s, cfg = self.done, self.cfg
        f = self.lr_factor(s)
        for g in self.opt.param_groups:
            g["lr"] = g["base_lr"] * f
        batch = self.data.train_batch(s, cfg.batch, cfg.seed)
        count = int((batch.labels[:, 1:] if self.lm.decoder else batch.labels).ne(IGNORE).sum())
        mine = self._share(batch)
        self.lm.lm.train(self.body_grad)
        if not self.body_grad:  # a head on a frozen body: the body runs in eval mode
            self.lm.lm.base_model.eval()
        support: list = []
        devices = [self.lm.device] if self.lm.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(mix_seed(cfg.seed, s, 31, self.rank))
            total, _ = self.lm.loss_sums(
                mine,
                layer_alphas(self.alpha, self.layers),
                train=True,
                support=support,
                body_grad=self.body_grad,
            )
        (total / count).backward()
        loss_sum = total.detach().double()
        stats = torch.stack([torch.stack([g.sum(), v.sum()]) for g, v in support]).double()
        if self.world > 1:
            loss_sum, stats = self._all_reduce(loss_sum, stats)
        torch.nn.utils.clip_grad_norm_(self.params, cfg.clip)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        self.done += 1
        gold = 1.0 - float(stats[:, 0].sum() / stats[:, 1].sum()) if len(stats) else None
        return {
            "step": self.done,
            "loss": float(loss_sum) / count,
            "lr": cfg.lr * f,
            "gold_sparsity": gold,
            "alpha": alpha_stats(self.alpha),
            "tokens": count,
        }

    def _share(self, batch):
        """This worker's rows of the batch (all of them with one worker)."""
        if self.world == 1:
            return batch
        b = batch.ids.shape[0]
        lo, hi = b * self.rank // self.world, b * (self.rank + 1) // self.world
        return type(batch)(batch.ids[lo:hi], batch.labels[lo:hi])

    def _all_reduce(self, loss_sum, stats):
        """Sum the gradients (each worker's loss is its share of the batch mean) and figures."""
        import torch.distributed as dist

        grads = [p.grad for p in self.params if p.grad is not None]
        if grads:
            flat = torch.cat([g.reshape(-1) for g in grads])
            dist.all_reduce(flat)
            o = 0
            for g in grads:
                g.copy_(flat[o : o + g.numel()].view_as(g))
                o += g.numel()
        figs = torch.cat([loss_sum.view(1), stats.reshape(-1)])
        dist.all_reduce(figs)
        return figs[0], figs[1:].view_as(stats)

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict:
        d = {"done": self.done, "optimizer": self.opt.state_dict(), "config": self.cfg.to_json()}
        if isinstance(self.alpha, LearnedAlpha):
            d["alpha"] = self.alpha.state_dict()
        return d

    def load_state_dict(self, d: dict) -> None:
        self.done = int(d["done"])
        self.opt.load_state_dict(d["optimizer"])
        if isinstance(self.alpha, LearnedAlpha):
            self.alpha.load_state_dict(d["alpha"])
