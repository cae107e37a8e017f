"""Measuring an LM run as an entmax transformer: held-out loss, gold sparsity, restricted loss.

- :func:`evaluate_loss`: the masked-LM loss on a fixed seeded masking (BERT's recipe,
  :func:`data.mask_tokens`; the same positions and replacements for every model compared) or the
  next-token loss, the mean over every scored token of a corpus part (definitions §7).
- :func:`gold_sparsity`: definitions §4's aggregate of ``sparsity(G)`` over texts packed to at most
  n tokens (per head the mean over texts, then the plain mean over heads).
- :func:`run_ids` / :func:`restricted_loss`: the task axis (definitions §9): one input's ids (a
  masked text) run and recorded like ``SparseModel.run``, and its loss when every head's attention
  is restricted to masks M (entmax over the scores inside M, :attr:`RunState.restrict`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..outputs import RunOutput
from ..tokens import Encoding
from .alpha import layer_alphas
from .data import Batches, mix_seed
from .lm import IGNORE, Batch, LanguageModel


def evaluate_loss(
    lm: LanguageModel, data: Batches, alpha, *, batch: int = 16, seed: int = 0
) -> dict:
    """Held-out loss of ``lm`` at ``alpha`` (a float or a LearnedAlpha / (L, H) table)."""
    alphas = _alphas(lm, alpha)
    lm.lm.eval()
    total, count = 0.0, 0
    with torch.inference_mode():
        for b in data.eval_batches(batch, seed=seed):
            s, k = lm.loss_sums(b, alphas, train=False)
            total += float(s)
            count += k
    return {"loss": total / max(count, 1), "tokens": count, "sequences": len(data)}


def _alphas(lm: LanguageModel, alpha) -> list:
    if isinstance(alpha, Tensor):  # an (L, H) table
        return [float(r[0]) if bool((r == r[0]).all()) else r.double().view(1, -1, 1, 1)
                for r in alpha]  # fmt: skip
    return layer_alphas(alpha, lm.sparse.config.num_layers)


def gold_sparsity(model, texts: list[str], alpha) -> dict:
    """Gold sparsity of ``model`` (a SparseModel) over ``texts`` (definitions §4 aggregation)."""
    from ..metrics import sparsity

    acc = None
    with torch.inference_mode():
        for t in texts:
            out = model.run(t, alpha=alpha, truncate=True, hidden=False)
            s = sparsity(out.graph, causal=out.causal).double()  # (L, H)
            acc = s if acc is None else acc + s
    per_head = acc / len(texts)
    return {
        "gold_sparsity": float(per_head.mean()),
        "per_head_min": float(per_head.min()),
        "per_head_max": float(per_head.max()),
        "texts": len(texts),
    }


def run_ids(model, ids: list[int], special: list[bool], alpha, causal: bool = False) -> RunOutput:
    """``model.run`` of token ids (e.g. a masked text) instead of a text: the same recordings
    (queries, keys, P, G, hidden states); tokens are the vocabulary's, offsets empty."""
    tok = model.tokenizer
    tokens = [tok.id_to_token(i) or "" for i in ids]
    enc = Encoding(ids=list(ids), tokens=tokens, offsets=[(0, 0)] * len(ids),
                   special=list(special), display=tokens,
                   continuation=[t.startswith("##") for t in tokens])  # fmt: skip
    a = model._alpha(alpha)
    causal = bool(causal) or model.config.is_decoder
    x = torch.tensor([ids], device=model._device)
    with torch.inference_mode():
        res = model._forward(x, None, a, causal, None, record=True)
    return model._output(" ".join(tokens), enc, res, 0, a, causal)


def masked_input(lm: LanguageModel, ids: list[int], seed: int, index: int) -> Batch:
    """The fixed seeded masking of one input (decoders: the ids themselves)."""
    x = torch.tensor([ids])
    if lm.decoder:
        return Batch(x, x.clone())
    from .data import mask_token_id, mask_tokens, special_frame

    head, tail = special_frame(lm.sparse.tokenizer)
    special = torch.zeros(len(ids), dtype=torch.bool)
    special[: len(head)] = True
    if tail:
        special[len(ids) - len(tail) :] = True
    g = torch.Generator().manual_seed(mix_seed(seed, index, 41))
    return mask_tokens(x, special, mask_token_id(lm.sparse.tokenizer),
                       lm.sparse.config.vocab_size, g)  # fmt: skip


def restricted_loss(
    lm: LanguageModel, batch: Batch, alpha, masks: Tensor | None
) -> tuple[float, int]:
    """(mean token loss, scored tokens) of one input (1, n) with every head's attention
    restricted to ``masks`` (L, H, n, n) bool (None: unrestricted)."""
    restrict = None if masks is None else masks.to(lm.device, torch.bool)[:, None]
    lm.lm.eval()
    with torch.inference_mode():
        s, k = lm.loss_sums(batch, _alphas(lm, alpha), train=False, restrict=restrict)
    return float(s) / max(k, 1), k


def scored_positions(batch: Batch) -> int:
    return int((batch.labels != IGNORE).sum())


def evaluate_corpus(
    model, corpus, alpha, *, seq_len: int = 128, batch: int = 16, gold_texts: int = 40,
    lengths: tuple[int, ...] = (128, 512), device: str = "auto", seed: int = 0,
) -> dict:  # fmt: skip
    """A model's loss on the whole ``corpus`` (sequences of ``seq_len``, the fixed masking of
    ``seed``) at ``alpha`` ("own": the model's recorded α), and its gold sparsity on the
    first ``gold_texts`` inputs packed to at most n tokens (at least n / 2) for each n."""
    from ..corpus import pack, read_corpus, token_counter
    from ..errors import SparsescopeError
    from .data import token_sequences
    from .lm import load_lm

    lm = load_lm(model, device)
    if lm.new_head:
        raise SparsescopeError(
            f"{lm.source.model_id} has no LM head, so it has no loss; train one first "
            "(sparsescope adapt --train head)",
            field="model",
        )
    c = lm.sparse.config
    a = lm.sparse.default_alpha if alpha == "own" else alpha
    docs = read_corpus(corpus)
    tok = lm.sparse.tokenizer
    seqs = token_sequences(docs, tok, seq_len)
    if not len(seqs):
        raise SparsescopeError(f"the corpus gives no sequence of {seq_len} tokens", field="corpus")
    data = Batches(seqs, tok, decoder=lm.decoder, vocab_size=c.vocab_size)
    res = {
        "model": lm.source.model_id,
        "alpha": a if not isinstance(a, Tensor) else a.tolist(),
        "alpha_trained": lm.sparse.alpha_trained,
        "objective": lm.objective,
        "seq_len": seq_len,
    }
    table = a if isinstance(a, Tensor) else float(a)
    res["loss"] = evaluate_loss(lm, data, table, batch=batch, seed=seed)
    count = token_counter(tok)
    for n in lengths:
        n_eff = min(n, c.max_positions)
        inputs = [i.text for i in pack(docs, count, n_eff) if i.n_tokens >= n_eff // 2]
        if inputs:
            res[f"gold_n{n_eff}"] = gold_sparsity(lm.sparse, inputs[:gold_texts], table)
    return res
