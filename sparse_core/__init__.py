"""sparsescope's science: the entmax transformer, its attention graphs, sparse patterns, metrics.

Torch and numpy only; no web imports, so it works from a notebook.
"""

from . import metrics, patterns
from .errors import (
    ArtefactError,
    EmptyTextError,
    ModelLoadError,
    ModelNotFoundError,
    ModelTooLargeError,
    SparsescopeError,
    TextTooLongError,
    UnsupportedModelError,
)
from .model import (
    DEFAULT_MODEL_ID,
    SUPPORTED_MODEL_TYPES,
    ModelConfig,
    RunOutput,
    SparseModel,
    load_model,
)

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_MODEL_ID",
    "ArtefactError",
    "EmptyTextError",
    "ModelConfig",
    "ModelLoadError",
    "ModelNotFoundError",
    "ModelTooLargeError",
    "RunOutput",
    "SUPPORTED_MODEL_TYPES",
    "SparseModel",
    "SparsescopeError",
    "TextTooLongError",
    "UnsupportedModelError",
    "__version__",
    "load_model",
    "metrics",
    "patterns",
]
