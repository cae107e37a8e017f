"""The analysis request: THE one place for its fields, its validation and its cache key.

An analysis is asked for by ``(text, alpha, causal, truncate, model, start)``: the HTTP route
(``POST /api/analyze``), a share link or gallery example, the notebook widget and the warm-up all
build one :class:`AnalysisRequest` and hand it to the service; the model worker runs it
(:meth:`AnalysisRequest.run`, :func:`run_together`). Its checks (:meth:`AnalysisRequest.checked`)
and α's range (:func:`check_alpha`, also used by every command's ``--alpha``) are written once
here, with one message each.

The cache key (the analysis id) is ``sha256([text, repr(alpha), causal, truncate, model id,
artefact name] + [start, when a window of a long text])[:ID_HEX]`` (α "own", the model's own,
is written ``"own"``: :data:`OWN_ALPHA`) (:meth:`AnalysisRequest.key`):
the model id and the artefact name are what the service resolved the request to.
"""

from __future__ import annotations

import hashlib
import json
import math
import unicodedata
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from typing import Any

from sparse_core.errors import EmptyTextError, SparsescopeError, TextTooLongError

# α of an analysis nobody chose and α's range: defined once (definitions §1), re-exported here
from sparse_core.outputs import ALPHA_MAX, ALPHA_MIN, DEFAULT_ALPHA  # noqa: F401

#: 96 bits of sha256: ids are cache keys, collisions must not happen by chance.
ID_HEX = 24

#: The α of a request that asks for the model's own (``SparseModel.default_alpha``: what an
#: adapted model was trained with, one value or one per layer and head; 1.5 for a model trained
#: with softmax). ``null`` in the API means the same and is normalised to this token.
OWN_ALPHA = "own"


def check_request_alpha(alpha: Any) -> float | str:
    """A request's α: :data:`OWN_ALPHA` for ``"own"`` or None (the model's own), else
    :func:`check_alpha`'s float; the error names both choices."""
    if alpha is None or alpha == OWN_ALPHA:
        return OWN_ALPHA
    if isinstance(alpha, str) or isinstance(alpha, bool):
        raise SparsescopeError(
            f'alpha must be a number in [1, 2] (1 softmax, 1.5 entmax, 2 sparsemax) or "own" '
            f"(the model's own α), got {alpha!r}",
            field="alpha",
        )
    return check_alpha(alpha)


def check_alpha(alpha: Any) -> float:
    """``alpha`` as a float in [1, 2]; else a :class:`SparsescopeError` (field ``alpha``) naming
    the range. THE app's one check of α (the API, shares, the widget, every command's
    ``--alpha``); ``sparse_core`` keeps its own guard for callers that skip the app."""
    try:
        a = float(alpha)
    except (TypeError, ValueError):
        a = math.nan
    if not math.isfinite(a) or not ALPHA_MIN <= a <= ALPHA_MAX:
        raise SparsescopeError(
            f"alpha must be in [1, 2] (1 softmax, 1.5 entmax, 2 sparsemax), got {alpha}",
            field="alpha",
        )
    return a


def alpha_words(alpha: float | str) -> str:
    """α as a message writes it: ``1.5``, or ``"the model's own"``."""
    return "the model's own" if alpha == OWN_ALPHA else f"{float(alpha):g}"


def check_start(start: Any) -> int:
    """``start`` (the first token of a long text's window) as a token index >= 0."""
    if isinstance(start, bool) or not isinstance(start, int) or start < 0:
        raise SparsescopeError(
            f"start must be a token index >= 0 (the first token of the window), got {start!r}",
            field="start",
        )
    return start


def check_unicode(text: str) -> None:
    """JSON may carry a lone UTF-16 surrogate (``"\\ud800"``), which is not text: the hash, the
    tokenizer and the response would all fail on it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise SparsescopeError(
            f"text is not valid Unicode: character {exc.start} is a lone surrogate "
            f"({text[exc.start]!r}); send UTF-8 text (escape pairs like \\ud83d\\ude00 are fine)",
            field="text",
        ) from None


def is_blank(text: str) -> bool:
    """Whether ``text`` is blank as the analyser calls it before it knows the model: nothing
    but whitespace and characters of Unicode category C (control, format such as zero-width
    spaces and joiners, private use, unassigned), which BERT's normaliser drops, and U+FFFD.
    (Each model's tokenizer is asked again when the text is analysed.)"""
    return all(c.isspace() or c == "\ufffd" or unicodedata.category(c)[0] == "C" for c in text)


def check_not_blank(text: str, *, field: str = "text") -> None:
    """:class:`EmptyTextError` (the analyser's own message) when ``text`` :func:`is_blank`."""
    if is_blank(text):
        err = EmptyTextError()
        err.field = field
        raise err


def looks_like_id(s: str) -> bool:
    """Whether ``s`` could be an analysis id (:data:`ID_HEX` lower-case hex digits)."""
    return len(s) == ID_HEX and all(c in "0123456789abcdef" for c in s)


@contextmanager
def api_wording() -> Iterator[None]:
    """A text over the model's positions, told in the request's words (its flag is
    ``truncate``)."""
    try:
        yield
    except TextTooLongError as exc:
        raise SparsescopeError(
            f"text is {exc.length} tokens long but the model takes at most {exc.limit} "
            f"(special tokens included); shorten it, or send truncate=true to analyse a "
            f"window of {exc.limit} tokens (start: its first token, default 0)" + exc.cap_note(),
            field="text",
        ) from None


@dataclass(frozen=True)
class AnalysisRequest:
    """One text to analyse, and how.

    ``model``: a served model's id or the name it was served by (None: the default).
    ``start``: with ``truncate``, the first token (specials excluded) of the window of a text
    longer than the model's positions; without ``truncate`` it means nothing and is dropped by
    :meth:`checked`.
    """

    text: str
    alpha: float | str | None = DEFAULT_ALPHA
    causal: bool = False
    truncate: bool = False
    model: str | None = None
    start: int = 0

    @classmethod
    def of(cls, source: Mapping[str, Any] | Any) -> AnalysisRequest:
        """The request held by ``source``: a mapping or an object (a share state, an API body,
        a page's view) with these fields by name; missing ones take their defaults."""
        names = [f.name for f in fields(cls)]
        if isinstance(source, Mapping):
            return cls(**{k: source[k] for k in names if k in source})
        return cls(**{k: getattr(source, k) for k in names if hasattr(source, k)})

    def checked(self) -> AnalysisRequest:
        """This request validated and normalised (alpha a float in [1, 2] or "own", the text
        not empty and valid Unicode, start a token index kept only with truncate); a
        :class:`SparsescopeError` naming the field otherwise. Whether the model is served is
        the service's to say."""
        alpha = check_request_alpha(self.alpha)
        if not isinstance(self.text, str) or not self.text.strip():
            raise EmptyTextError()
        check_unicode(self.text)
        start = check_start(self.start)
        truncate = bool(self.truncate)
        return replace(
            self, alpha=alpha, causal=bool(self.causal), truncate=truncate,
            start=start if truncate else 0,
        )  # fmt: skip

    @property
    def own(self) -> bool:
        """Whether this (checked) request runs at the model's own α."""
        return self.alpha == OWN_ALPHA

    @property
    def alpha_token(self) -> str:
        """α as the cache key writes it: ``repr`` of the float, or :data:`OWN_ALPHA`."""
        return OWN_ALPHA if self.own else repr(float(self.alpha))  # type: ignore[arg-type]

    @property
    def run_alpha(self) -> float | None:
        """α as ``SparseModel.run`` takes it (None: the model's own)."""
        return None if self.own else float(self.alpha)  # type: ignore[arg-type]

    def key(self, model_id: str, artefact: str | None) -> str:
        """The cache key and analysis id of this request analysed on model ``model_id`` with
        the Sparsefinder artefact named ``artefact`` (None: none)."""
        start = int(self.start) if self.truncate else 0  # a text that fits has one window
        blob = json.dumps(
            [self.text, self.alpha_token, bool(self.causal), bool(self.truncate),
             model_id, artefact] + ([start] if start else []),
            ensure_ascii=False,
        )  # fmt: skip
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:ID_HEX]

    @property
    def batch_key(self) -> tuple:
        """Requests with equal keys may share one ``run_batch`` forward (:func:`run_together`)."""
        return (self.alpha_token, bool(self.causal), bool(self.truncate))

    def run(self, model: Any, runtime: Any = None) -> Any:
        """``model.run`` of this request (a ``sparse_core.RunOutput``); ``runtime``: how the
        run uses the machine (a ``sparse_core.runtime.Runtime``, e.g. with a side worker that
        takes half the work of a lone text; None: the model's own)."""
        kw: dict[str, Any] = {"start": self.start} if self.start else {}
        if runtime is not None:
            kw["runtime"] = runtime
        return model.run(
            self.text, alpha=self.run_alpha, causal=self.causal, truncate=self.truncate, **kw
        )


def run_together(model: Any, requests: list[AnalysisRequest]) -> list[Any]:
    """``model.run_batch`` of requests with one :attr:`~AnalysisRequest.batch_key` (windows of
    long texts, ``start > 0``, are run alone: :meth:`AnalysisRequest.run`)."""
    first = requests[0]
    if any(r.batch_key != first.batch_key or r.start for r in requests):
        raise ValueError("requests run together share alpha, causal and truncate, and start at 0")
    return model.run_batch(
        [r.text for r in requests],
        alpha=first.run_alpha,
        causal=first.causal,
        truncate=first.truncate,
    )
