"""Part-of-speech tags of an analysed text, tagged on a thread of their own beside the forward.

spaCy (``sparse_core.pos``) tags the words of the part of the text the model sees while the model
runs on the other core (spaCy and torch both release the GIL in their inner loops); each
sub-word token then takes the Universal POS tag of the word holding it. The same call parses
the words (``pos.Words.arcs``); the output keeps them (``out.extra["words"]``) for the head
roles (sparse_core/roles.py), so spaCy runs once per text.

Texts that wait for the tagging thread together are tagged in one ``nlp.pipe`` call (a lecture
hall's burst: about half the CPU of one call each), unless batching is off
(``SPARSESCOPE_BATCH_TOKENS=1``: one text a call, as the model's forwards). spaCy's tok2vec
output and the tags of a text are the same piped or alone (tested on ~1,800 texts of 1 to 120
words in batches of 7 to 256 while building this, and on ~600 in tests/app/test_hall.py).
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor

from sparse_core import pos
from sparse_core.errors import SparsescopeError

log = logging.getLogger(__name__)


#: Texts tagged in one ``nlp.pipe`` call at most.
PIPE_TEXTS = 64


class Tagger:
    """One spaCy tagging call at a time, in its own thread; the texts waiting for it go
    through one ``nlp.pipe`` call together."""

    def __init__(self, pipe: bool = True) -> None:
        self.pipe = pipe  # False: one text a call (the server with batching off)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sparsescope-pos")
        self._lock = threading.Lock()
        self._pending: list[tuple[str, int, Future]] = []
        self.calls = 0  # tagging calls made (one per pipe of several texts)

    def start(self, text: str, enc) -> Future:
        """Start tagging the words of ``text`` that the encoding ``enc`` (offsets, special)
        covers, with ``pos.CONTEXT_CHARS`` of context on each side (``pos.window_span``: a
        window deep in a long text costs its own length, not its offset);
        hand the future to :meth:`tags`."""
        future: Future = Future()
        lo, hi = pos.window_span(text, enc.offsets, enc.special)
        with self._lock:
            self._pending.append((text[lo:hi], lo, future))
        self._pool.submit(self._drain)
        return future

    def _drain(self) -> None:
        """Tag what waits (up to :data:`PIPE_TEXTS` texts) in one call."""
        most = PIPE_TEXTS if self.pipe else 1
        with self._lock:
            items, self._pending = self._pending[:most], self._pending[most:]
        if not items:
            return  # an earlier call took them
        texts = [t for t, _, _ in items]
        self.calls += 1
        try:
            words = (
                [pos.word_tags(texts[0])]
                if len(texts) == 1
                else pos.word_tags_many(texts, batch_size=PIPE_TEXTS)
            )
        except BaseException as exc:  # e.g. no spaCy pipeline: every waiting text is told
            for _, _, future in items:
                future.set_exception(exc)
            return
        for (_, lo, future), w in zip(items, words, strict=True):
            future.set_result(pos.shift(w, lo))  # spans of the whole text

    def tags(self, out, words: Future | None = None) -> list[str | None]:
        """Universal POS tag of every token of ``out``; None for special tokens, which the page
        leaves out of POS shares, and for every token when no spaCy pipeline is installed.
        ``words``: the future of :meth:`start`, else the words are tagged now."""
        try:
            words = words if words is not None else self.start(out.text, out)
            tagged = words.result()
            tags = pos.tag_tokens(out.text, out.offsets, out.special, words=tagged)
        except SparsescopeError as exc:  # no spaCy pipeline installed: the page shows no tags
            log.warning("no POS tags: %s", exc)
            return [None] * out.n
        out.extra["pos_tags"] = tags  # as tagged ("[CLS]", "[SEP]" too), for cluster breakdowns
        out.extra["words"] = tagged  # the words and their parse, for the head roles
        return [None if sp else tag for tag, sp in zip(tags, out.special, strict=True)]
