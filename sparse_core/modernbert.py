"""ModernBERT's local layers, and the α a SparseModernBERT checkpoint was trained with.

**ModernBERT** (Warner et al. 2024, "Smarter, Better, Faster, Longer", arXiv:2412.13663, §2.1)
alternates global and local attention: layer l is global when l is a multiple of
``global_attn_every_n_layers`` (3 in the released models) and local otherwise. A local layer
attends within a sliding window of ``local_attention`` tokens (128) centred on the query,

    W = {(i, j) : |i − j| ≤ w},   w = local_attention // 2   (``config.sliding_window``)

and the two kinds use rotary embeddings of different bases (θ = 160,000 global, 10,000 local).
transformers (``ModernBertModel.forward``) builds W into the boolean mask it hands the attention
function of a local layer (``masking_utils.create_bidirectional_sliding_window_mask``), so in
:func:`sparse_core.attention.entmax_attention` the scores outside W are −∞ *before* entmax: a
local layer's P, and its graph, never have an entry outside the window. Queries and keys reach
the function after the layer's own rotary embedding. Nothing here changes the model; this module
only reads its layer kinds (:func:`local_layers`).

**SparseModernBERT** (Gonçalves, Treviso & Martins 2025, "AdaSplash: Adaptive Sparse Flash
Attention", arXiv:2502.12082) is ModernBERT-base pretrained further with α-entmax attention;
the checkpoints ``sardinelab/SparseModernBERT-alpha1.5`` and ``-alpha2.0`` are stock ModernBERT
weights (``model_type`` "modernbert"), so transformers' ``ModernBertModel`` loads them. Their
reference code, deep-spin/SparseModernBERT ``sparse_modern_bert.py``:

- ``CustomModernBertAttention`` takes α from ``config.initial_alpha`` (2.0 when absent);
  ``CustomModernBertModel`` writes ``config.alpha`` and ``config.initial_alpha``;
  ``get_custom_model`` writes ``initial_alpha``, ``use_triton_entmax``, ``pre_iter``,
  ``post_iter``;
- entmax runs in the **global layers only**: a layer with a local window goes through
  ModernBERT's own softmax attention (``if self.alpha == 1.0 or self.local_attention != (-1,
  -1)``). The model's own α (:func:`trained_alpha_table`) is therefore α on the global layers
  and 1 (softmax) on the local ones;
- ``train_modernbert.py`` anneals α from ``--initial_alpha`` (1.01 in ``train_modernbert.sh``)
  to ``--final_alpha`` (``AlphaScheduler``), so ``initial_alpha`` in a saved config.json may be
  the schedule's start rather than the trained α. The published checkpoints state their α in
  their name (and model card: "Sparsity (α): 1.5").

Hence the trained α of a SparseModernBERT checkpoint (:func:`trained_alpha`) is, first found:
``config.json``'s ``alpha``; the ``alpha<x>`` at the end of the model's name or directory
(``SparseModernBERT-alpha1.5``); ``config.json``'s ``initial_alpha``; else 2.0, the reference's
default. Where we differ from the reference: their kernels (``triton_entmax``, AdaSplash) run 5
bisection/Halley iterations; we compute α-entmax exactly (definitions §1).
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass

import torch
from torch import Tensor

from .errors import ModelLoadError

log = logging.getLogger(__name__)

#: config.json keys written by deep-spin/SparseModernBERT's model classes
SPARSE_KEYS = ("alpha", "initial_alpha", "use_triton_entmax", "pre_iter", "post_iter")
#: the reference's α when a checkpoint records none (``CustomModernBertAttention``)
REFERENCE_DEFAULT_ALPHA = 2.0
_NAME_ALPHA = re.compile(r"alpha[-_=]?(\d+(?:\.\d+)?)$", re.IGNORECASE)


@dataclass(frozen=True)
class TrainedAlpha:
    """A checkpoint's own α and where it was read (for the log and error messages)."""

    alpha: float
    source: str


def is_sparse_modernbert(config: dict, model_id: str) -> bool:
    """A ModernBERT checkpoint trained with entmax: its config carries the reference's keys or
    classes (``CustomModernBert…``), or its name says SparseModernBERT."""
    if config.get("model_type") != "modernbert":
        return False
    archs = config.get("architectures") or []
    return (
        any(k in config for k in SPARSE_KEYS)
        or any(str(a).startswith("CustomModernBert") for a in archs)
        or "sparsemodernbert" in model_id.lower().replace("-", "").replace("_", "")
    )


def trained_alpha(config: dict, model_id: str) -> TrainedAlpha | None:
    """The α a SparseModernBERT checkpoint was trained with (module docstring), or None for
    any other model. A recorded α that is not a number in [1, 2] is a :class:`ModelLoadError`."""
    if not is_sparse_modernbert(config, model_id):
        return None
    name = model_id.rstrip("/").rsplit("/", 1)[-1]
    found = _NAME_ALPHA.search(name)
    candidates = (
        ("config.json 'alpha'", config.get("alpha")),
        (f"the model's name {name!r}", found.group(1) if found else None),
        ("config.json 'initial_alpha'", config.get("initial_alpha")),
    )
    for source, value in candidates:
        if value is None:
            continue
        try:
            a = float(value)
        except (TypeError, ValueError):
            a = math.nan
        if isinstance(value, bool) or not math.isfinite(a) or not 1.0 <= a <= 2.0:
            raise ModelLoadError(
                f"{model_id}: the SparseModernBERT alpha in {source} is {value!r}; "
                "it must be a number in [1, 2] (edit config.json or pass alpha explicitly)"
            )
        return TrainedAlpha(a, source)
    return TrainedAlpha(REFERENCE_DEFAULT_ALPHA, "the reference code's default (none recorded)")


def local_layers(hf_config) -> list[bool]:
    """Per layer: True for a local (sliding-window) layer of a ModernBERT-style config."""
    kinds = getattr(hf_config, "layer_types", None) or []
    return [k == "sliding_attention" for k in kinds]


def trained_alpha_table(hf_config, trained: TrainedAlpha, heads: int) -> Tensor:
    """(L, H): the trained α on global layers, 1 (softmax) on local ones, as the reference runs
    them (``CustomModernBertAttention.forward``)."""
    local = local_layers(hf_config)
    table = torch.full((len(local), heads), float(trained.alpha))
    table[torch.tensor(local, dtype=torch.bool)] = 1.0
    return table


def default_alpha(config: dict, model_id: str, hf_config, heads: int) -> Tensor | None:
    """The model's own α for :class:`~sparse_core.model.SparseModel` (None: the usual 1.5)."""
    trained = trained_alpha(config, model_id)
    if trained is None:
        return None
    log.info(
        "%s: SparseModernBERT, alpha %.4g from %s on the global layers (softmax on the local "
        "ones, as its reference code runs them)",
        model_id, trained.alpha, trained.source,
    )  # fmt: skip
    return trained_alpha_table(hf_config, trained, heads)
