"""Errors raised for bad input. Each message says what was wrong and what is allowed.

Every error carries ``field``: the name of the input at fault (``"text"``, ``"alpha"``,
``"model"``, a method parameter such as ``"window"``), or None when no single input is. The web
app maps these domain errors to HTTP statuses in one place (``sparsescope.web.errors``) and sends
``{"detail": str(error), "field": error.field}``; the CLI prints the message on one line.
"""

from __future__ import annotations


class SparsescopeError(ValueError):
    """Base class of the errors a user can cause (bad text, bad parameter, bad file)."""

    #: the input at fault when the raiser does not say (subclasses set their own)
    default_field: str | None = None

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field if field is not None else self.default_field


class MalformedValueError(SparsescopeError):
    """A value not written in its kind's form (a number string outside the plain form: ``"+4"``,
    ``" 5"``, ``"1_0"``, ``"３"``): the web answers 422, the request does not match the schema,
    where a well-formed value out of range is a 400."""


class EmptyTextError(SparsescopeError):
    default_field = "text"

    def __init__(self) -> None:
        super().__init__(
            "text is empty or whitespace only (invisible and control characters, such as "
            "zero-width spaces, count as whitespace); type some text to analyse"
        )


class UnknownTokensError(SparsescopeError):
    """Every token of the text is the tokenizer's unknown token (emoji, private-use characters,
    a word longer than the tokenizer reads): not blank, but nothing the model knows."""

    default_field = "text"

    def __init__(self, unk: str) -> None:
        super().__init__(
            f"none of this text's tokens is in the model's vocabulary: the tokenizer reads all of "
            f"it as {unk} (unknown), as it does emoji, private-use characters and words of more "
            "than 100 letters; type text with words in the model's language"
        )


class TextTooLongError(SparsescopeError):
    """The text has more tokens than the model has positions."""

    default_field = "text"

    def __init__(self, length: int, limit: int, positions: int | None = None) -> None:
        self.length = length
        self.limit = limit
        self.positions = positions  # the model's own positions, when the limit is a lower cap
        super().__init__(
            f"text is {length} tokens long but the model takes at most {limit} positions "
            f"(special tokens included); shorten it or pass truncate=True to keep the first "
            f"{limit}" + self.cap_note()
        )

    def cap_note(self) -> str:
        """How to raise the limit, when it is a cap below the model's own positions."""
        if self.positions is None or self.positions <= self.limit:
            return ""
        return (
            f" ({self.limit} is the token cap; the model has {self.positions} positions: raise "
            f"the cap with --max-tokens or SPARSESCOPE_MAX_TOKENS, or max_tokens= in load_model)"
        )


class ModelLoadError(SparsescopeError):
    """A model directory is missing, incomplete or of an unsupported kind."""

    default_field = "model"


class ModelNotFoundError(ModelLoadError):
    """No such directory, and no such name in the local Hugging Face cache."""


class UnsupportedModelError(ModelLoadError):
    """The model's architecture (``model_type``) is not one sparsescope runs."""


class ModelTooLargeError(ModelLoadError):
    """The weights and one run would not fit in the memory available (checked before loading)."""

    def __init__(self, message: str, *, need: int, free: int) -> None:
        super().__init__(message)
        self.need = need
        self.free = free


class ArtefactError(SparsescopeError):
    """A Sparsefinder artefact is missing, corrupt or made for another model / alpha."""

    default_field = "artefact"
