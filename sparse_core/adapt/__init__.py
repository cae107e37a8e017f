"""Adapting a model to entmax attention by training (SPEC §7; ``sparsescope adapt``).

- :mod:`.lm`: the model with its LM head (added and tied where the checkpoint has none);
- :mod:`.data`: the split by article, token sequences, BERT's masking, the seeded order;
- :mod:`.alpha`: a fixed α or one learned per head (α = 1 + sigmoid(a));
- :mod:`.trainer`: AdamW, warm-up and decay, clipping, the step; :mod:`.run`: the whole run
  (checks, checkpoints, Ctrl-C, resume, the log, the figure); :mod:`.store`: the out-dir;
- :mod:`.evaluate`: held-out loss, gold sparsity, the loss under restricted attention (SPEC §9);
- :mod:`.delta`: a shipped adapted model as a delta over the installed base weights;
- :mod:`.ray_train`: data-parallel training on Ray Train.
"""

from .lm import LanguageModel, load_lm
from .run import Interrupted, adapt
from .trainer import AdaptConfig

__all__ = ["AdaptConfig", "Interrupted", "LanguageModel", "adapt", "load_lm"]
