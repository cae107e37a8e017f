"""The engine's domain errors: what went wrong, in words, with the input at fault as ``field``.

Every class is a :class:`~sparse_core.errors.SparsescopeError` (message + ``field``); none knows
an HTTP status. The web layer maps each class to its status in one table
(:data:`sparsescope.web.errors.HTTP`); the command line prints the message on one line. The
share store's own errors (:class:`~sparsescope.engine.store.ShareStoreError` and its subclasses)
live with the store.
"""

from __future__ import annotations

import math

from sparse_core.errors import SparsescopeError


class NotFound(SparsescopeError):
    """An id that names nothing (an analysis evicted from the cache, a mistyped share link)."""

    default_field = "id"


class NotInAnalysis(NotFound):
    """A part that an existing analysis does not have: a layer or head past its model's, a
    token past its text, a tile past its pyramid (a 404 naming the index at fault). These
    bounds depend on the analysis, so the OpenAPI schema can only describe them; a value that
    the schema allows is never a 400."""


class Gone(SparsescopeError):
    """Something that existed but can no longer be served (a share saved in an older form)."""


class TooLarge(SparsescopeError):
    """An input over a size cap (a share's state over 64 KiB)."""


class Invalid(SparsescopeError):
    """A nested value that does not match its schema (a share's state), like a request body."""


class ClientGone(SparsescopeError):
    """The client disconnected before its queued model work ran; the work was dropped. (The
    499 is never read by anyone: it only ends the request.)"""


class Refused(SparsescopeError):
    """Not now: try again after ``retry_after`` seconds (sent as the body's ``retry_after`` and
    the ``Retry-After`` header). ``field`` is null: nothing in the request was wrong."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message, field=None)
        self.retry_after = max(1, math.ceil(retry_after))


class Busy(Refused):
    """The model's work queue is full (app/engine/batching.py): a 503."""


class RateLimited(Refused):
    """This client has sent more than its rate allows (app/engine/limits.py): a 429."""


class UnknownModel(Invalid):
    """A model id that names no served model (the message lists the served ones)."""

    default_field = "model"
