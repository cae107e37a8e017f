"""Part-of-speech tags of an analysed text, tagged on a thread of their own beside the forward.

spaCy (``sparse_core.pos``) tags the words of the part of the text the model sees while the model
runs on the other core (spaCy and torch both release the GIL in their inner loops); each
sub-word token then takes the Universal POS tag of the word holding it.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor

from sparse_core import pos
from sparse_core.errors import SparsescopeError

log = logging.getLogger(__name__)


class Tagger:
    """One spaCy tagging at a time, in its own thread."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sparsescope-pos")

    def start(self, text: str, enc) -> Future:
        """Start tagging the words of ``text`` that the encoding ``enc`` (offsets, special)
        covers (a truncated text's tail is not tagged); hand the future to :meth:`tags`."""
        return self._pool.submit(pos.word_tags, text[: _covered(enc.offsets, enc.special)])

    def tags(self, out, words: Future | None = None) -> list[str | None]:
        """Universal POS tag of every token of ``out``; None for special tokens, which the page
        leaves out of POS shares, and for every token when no spaCy pipeline is installed.
        ``words``: the future of :meth:`start`, else the words are tagged now."""
        try:
            words = words if words is not None else self.start(out.text, out)
            tags = pos.tag_tokens(out.text, out.offsets, out.special, words=words.result())
        except SparsescopeError as exc:  # no spaCy pipeline installed: the page shows no tags
            log.warning("no POS tags: %s", exc)
            return [None] * out.n
        out.extra["pos_tags"] = tags  # as tagged ("[CLS]", "[SEP]" too), for cluster breakdowns
        return [None if sp else tag for tag, sp in zip(tags, out.special, strict=True)]


def _covered(offsets, special) -> int:
    """End of the text the tokens cover."""
    return max((e for (_, e), sp in zip(offsets, special, strict=True) if not sp), default=0)
