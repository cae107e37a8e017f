"""Adapting a model to entmax attention by training (definitions §7; ``sparsescope adapt``).

- :mod:`.lm`: the model with its LM head (added and tied where the checkpoint has none);
- :mod:`.data`: the split by article, token sequences, BERT's masking, the seeded order;
- :mod:`.alpha`: a fixed α or one learned per head (α = 1 + sigmoid(a));
- :mod:`.trainer`: AdamW, warm-up and decay, clipping, the step; :mod:`.loop`: the steps, the
  log, checkpoints and Ctrl-C; :mod:`.run`: the whole run (checks, resume, the held-out loss,
  the figure); :mod:`.store`: the out-dir;
- :mod:`.evaluate`: held-out loss, gold sparsity, the loss under restricted attention (definitions
  §9);
- :mod:`.delta`: writing a shipped adapted model's delta (loading: :mod:`sparse_core.shipped`);
- :mod:`.ray_train`: data-parallel training on Ray Train.
"""

from .lm import LanguageModel, load_lm
from .loop import Interrupted
from .run import adapt
from .trainer import AdaptConfig

__all__ = ["AdaptConfig", "Interrupted", "LanguageModel", "adapt", "load_lm"]
