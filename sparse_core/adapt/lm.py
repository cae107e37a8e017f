"""A model with its language-model head, run as an entmax transformer (definitions §7, §9).

:func:`load_lm` loads a supported checkpoint with transformers' masked-LM class (encoders:
``AutoModelForMaskedLM``) or causal-LM class (decoders: ``AutoModelForCausalLM``) and our entmax
attention. Where the checkpoint has no head (all-MiniLM-L6-v2 is a sentence-transformers
checkpoint: no ``cls.predictions`` weights), the architecture's own head is added, newly
initialised, with its decoder tied to the input embeddings: BERT's dense + GELU + LayerNorm +
tied decoder (``BertLMPredictionHead``), RoBERTa's ``lm_head``, DistilBERT's ``vocab_*`` layers,
ELECTRA's generator head; a decoder without ``lm_head`` weights gets a tied ``lm_head``.

The :class:`LanguageModel` holds the transformers model (``lm``) and a
:class:`~sparse_core.model.SparseModel` over its base model (``sparse``: the same modules, so
``sparse.run`` shows the graphs of the model being trained). :meth:`LanguageModel.loss` runs one
forward under a :class:`~sparse_core.attention.RunState` (α per layer, optional restriction
masks, training mode) and returns the masked-LM loss on the chosen positions (logits are
computed only there: the 30k-word decoder on every position would cost more than the body) or
the next-token loss.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from .. import attention as A
from ..errors import ModelLoadError, SparsescopeError
from ..model import SparseModel, _resolve_device, own_alpha, quiet_load_report, quiet_progress
from ..sources import ModelSource, resolve
from ..tokens import load_tokenizer

log = logging.getLogger(__name__)

IGNORE = -100
"""Label of positions without a loss (transformers' convention)."""


@dataclass
class Batch:
    """One batch of token ids (B, n) with its labels (B, n): the original id at the chosen
    (masked-LM) positions, :data:`IGNORE` elsewhere; decoders: the ids themselves."""

    ids: Tensor
    labels: Tensor


class LanguageModel:
    """A transformers LM (``lm``) and the :class:`SparseModel` over its base model."""

    def __init__(self, lm, sparse: SparseModel, source: ModelSource, new_head: bool) -> None:
        self.lm = lm
        self.sparse = sparse
        self.source = source
        self.new_head = new_head  #: the head was added here (not in the checkpoint)
        self.decoder = sparse.arch.decoder

    @property
    def objective(self) -> str:
        return "causal-lm" if self.decoder else "masked-lm"

    @property
    def device(self) -> torch.device:
        return self.sparse._device

    def head_parameters(self) -> list[tuple[str, torch.nn.Parameter]]:
        """The parameters outside the base model (the head; a tied decoder is not among them)."""
        base = {id(p) for p in self.lm.base_model.parameters()}
        return [(n, p) for n, p in self.lm.named_parameters() if id(p) not in base]

    def loss_sums(
        self,
        batch: Batch,
        alphas: list,
        *,
        train: bool,
        restrict: Tensor | None = None,
        support: list | None = None,
        body_grad: bool = True,
    ) -> tuple[Tensor, int]:
        """(sum of the token losses, number of tokens with a loss) of one forward.

        ``alphas``: α per layer (floats or (1, H, 1, 1) tensors); ``train``: the training
        attention (autograd through entmax, dropout where the modules train); ``restrict``:
        (L, B, H, n, n) bool masks each head's attention is restricted to (definitions §9);
        ``support``: a list that receives each layer's (|G|, |V|) per head (training only);
        ``body_grad=False``: the base model runs without autograd (a head on a frozen body).
        """
        ids = batch.ids.to(self.device)
        labels = batch.labels.to(self.device)
        kwargs = {"use_cache": False} if self.decoder else {}
        state = A.RunState(
            alphas=alphas,
            restrict=restrict,
            layer_of=self.sparse._layer_of,
            train=train,
            support=support if train else None,
        )
        grad = contextlib.nullcontext() if body_grad else torch.no_grad()
        with A.running(state), grad:
            hidden = self.lm.base_model(input_ids=ids, **kwargs).last_hidden_state  # (B, n, D)
        if self.decoder:
            hidden, labels = hidden[:, :-1], labels[:, 1:]
        chosen = labels != IGNORE  # (B, n)
        h = hidden[chosen]  # (K, D)
        logits = head_logits(self.lm, self.sparse.arch.model_type, h).float()  # (K, V)
        total = F.cross_entropy(logits, labels[chosen], reduction="sum")
        return total, int(chosen.sum())


def head_logits(lm, model_type: str, hidden: Tensor) -> Tensor:
    """The LM head of ``lm`` applied to hidden states (..., D) -> logits (..., V)."""
    if model_type == "bert":
        return lm.cls(hidden)
    if model_type in ("roberta", "xlm-roberta"):
        return lm.lm_head(hidden)
    if model_type == "distilbert":
        x = lm.vocab_layer_norm(lm.activation(lm.vocab_transform(hidden)))
        return lm.vocab_projector(x)
    if model_type == "electra":
        return lm.generator_lm_head(lm.generator_predictions(hidden))
    if model_type == "modernbert":  # ModernBertForMaskedLM: head (dense, act, norm), decoder
        return lm.decoder(lm.head(hidden))
    logits = lm.lm_head(hidden)
    cap = getattr(lm.config, "final_logit_softcapping", None)
    if cap:  # Gemma-2 caps its output logits
        logits = torch.tanh(logits / cap) * cap
    return logits


def load_lm(path_or_name=None, device: str = "auto", *, max_tokens: int = 512) -> LanguageModel:
    """Load a model with its LM head (added and tied where the checkpoint has none)."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM

    src = resolve(path_or_name)
    dev = _resolve_device(device)
    A.register()
    try:
        cfg = AutoConfig.from_pretrained(str(src.path), local_files_only=True)
    except (OSError, ValueError, KeyError) as exc:
        raise ModelLoadError(f"{src.path}/config.json could not be read: {exc}") from None
    auto = AutoModelForCausalLM if src.arch.decoder else AutoModelForMaskedLM
    with quiet_progress(), quiet_load_report():
        lm, missing = _load(auto, src, cfg)
        head_missing = [k for k in missing if not k.startswith(lm.base_model_prefix + ".")]
        if src.arch.decoder and head_missing and not getattr(cfg, "tie_word_embeddings", False):
            cfg.tie_word_embeddings = True  # no lm_head weights: tie it to the input embeddings
            lm, missing = _load(auto, src, cfg)
    emb = lm.get_input_embeddings()
    out = lm.get_output_embeddings()
    if head_missing and (emb is None or out is None or out.weight is not emb.weight):
        raise ModelLoadError(
            f"{src.model_id}: the checkpoint has no LM head and the model has no input "
            "embeddings to tie a new one to; sparsescope adapt needs one of them",
        )
    base_missing = [k for k in missing if k.startswith(lm.base_model_prefix + ".")]
    base_missing = [k for k in base_missing if ".pooler." not in k]
    if base_missing:
        raise ModelLoadError(
            f"{src.path}: the checkpoint lacks {len(base_missing)} weights the model needs, "
            f"e.g. {sorted(base_missing)[0]}"
        )
    lm = lm.to(dev)
    tok = load_tokenizer(src.path)
    sparse = SparseModel(
        lm.base_model, tok, src.model_id, dev, src.arch, max_tokens=max_tokens,
        default_alpha=own_alpha(src, cfg, int(cfg.num_hidden_layers), int(cfg.num_attention_heads)),
    )  # fmt: skip
    if head_missing:
        log.info("%s: added a new %s head (%s)", src.model_id, type(lm).__name__, head_missing[0])
    return LanguageModel(lm.eval(), sparse, src, new_head=bool(head_missing))


def _load(auto, src: ModelSource, cfg):
    try:
        lm, info = auto.from_pretrained(
            str(src.path),
            config=cfg,
            attn_implementation=A.IMPLEMENTATION,
            dtype=torch.float32,
            local_files_only=True,
            output_loading_info=True,
        )
    except (OSError, ValueError, RuntimeError) as exc:
        raise ModelLoadError(f"{src.path}: the weights could not be loaded: {exc}") from None
    return lm, sorted(info.get("missing_keys", []))


def check_alpha(alpha: float, *, allow_softmax: bool = False) -> float:
    """α for adapting: in (1, 2] (``allow_softmax``: α = 1 too, for a head on a frozen body)."""
    lo = "[1, 2]" if allow_softmax else "(1, 2]"
    ok = 1.0 <= alpha <= 2.0 if allow_softmax else 1.0 < alpha <= 2.0
    if not ok:
        raise SparsescopeError(
            f"--alpha must be in {lo} or 'learned', got {alpha:g}", field="alpha"
        )
    return alpha
