"""Errors raised for bad input. Each message says what was wrong and what is allowed."""

from __future__ import annotations


class SparsescopeError(ValueError):
    """Base class of the errors a user can cause (bad text, bad parameter, bad file)."""


class EmptyTextError(SparsescopeError):
    def __init__(self) -> None:
        super().__init__("text is empty or whitespace only; type some text to analyse")


class TextTooLongError(SparsescopeError):
    """The text has more tokens than the model has positions."""

    def __init__(self, length: int, limit: int) -> None:
        self.length = length
        self.limit = limit
        super().__init__(
            f"text is {length} tokens long but the model takes at most {limit} positions "
            f"(special tokens included); shorten it or pass truncate=True to keep the first {limit}"
        )


class ModelLoadError(SparsescopeError):
    """A model directory is missing, incomplete or of an unsupported kind."""


class ArtefactError(SparsescopeError):
    """A Sparsefinder artefact is missing, corrupt or made for another model / alpha."""
