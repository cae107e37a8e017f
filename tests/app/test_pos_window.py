"""POS tagging bounded to the analysed window.

A truncated window deep into a long text is tagged with its own characters plus
``pos.CONTEXT_CHARS`` of context on each side, not from character 0; the words wholly inside
the window get the tags that tagging the whole text gives them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sparse_core import pos
from sparsescope.engine.tagging import Tagger

#: The most context on each side the tests allow (pos.CONTEXT_CHARS is 256).
MARGIN = 512
WIKITEXT = Path("/work/shared/data/wikitext-2/valid.txt")


def long_text(chars: int) -> str:
    """``chars`` characters of real English (wikitext-2's validation text, repeated)."""
    if WIKITEXT.exists():
        base = WIKITEXT.read_text(encoding="utf-8")
    else:  # pragma: no cover - the corpus is on every machine of this project
        base = "The chef who ran to the store was out of food, so he went back home. " * 200
    return (base * (chars // len(base) + 1))[:chars]


def window_chars(enc) -> tuple[int, int]:
    spans = [(a, b) for (a, b), sp in zip(enc.offsets, enc.special, strict=True) if not sp]
    return min(a for a, _ in spans), max(b for _, b in spans)


def test_a_window_deep_in_500000_characters_tags_only_the_window(tiny_model, monkeypatch):
    text = long_text(500_000)
    enc = tiny_model.encode(text, truncate=True, start=100_000)  # tokens ~100,000 on
    first, last = window_chars(enc)
    assert first > 300_000  # deep into the text
    bound = (last - first) + 2 * MARGIN  # the window and some context, not its offset
    tagged: list[int] = []
    real = pos.word_tags

    def spy(part: str):
        tagged.append(len(part))
        if len(part) > bound:  # fail at once (tagging 400,000 characters takes a minute)
            raise AssertionError(f"tagged {len(part)} characters for a window of {last - first}")
        return real(part)

    monkeypatch.setattr(pos, "word_tags", spy)
    words = Tagger().start(text, enc).result(timeout=120)
    assert tagged and max(tagged) <= bound
    assert all(first - MARGIN <= a and b <= last + MARGIN for a, b, _ in words)
    tags = pos.tag_tokens(text, enc.offsets, enc.special, words=words)
    assert tags.count("X") < len(enc.ids) // 4  # the window's tokens are tagged


@pytest.mark.parametrize("start", [0, 1_000, 3_517])
def test_tags_inside_the_window_equal_the_whole_text_s(tiny_model, start):
    text = long_text(40_000)
    whole = pos.word_tags(text)
    enc = tiny_model.encode(text, truncate=True, start=start)
    first, last = window_chars(enc)
    inside = {(a, b, t) for a, b, t in whole if first <= a and b <= last}
    assert len(inside) > 100
    windowed = Tagger().start(text, enc).result(timeout=120)
    assert inside <= set(windowed), sorted(inside - set(windowed))[:5]
    # and the tokens' tags (pos.tag_tokens with no words tags the window itself)
    assert pos.tag_tokens(text, enc.offsets, enc.special) == pos.tag_tokens(
        text, enc.offsets, enc.special, words=whole
    )
