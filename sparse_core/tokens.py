"""Tokenizers of any model: loading, special tokens, offsets, and tokens as a person reads them.

``model.tokenizer`` is a ``tokenizers.Tokenizer`` (the fast backend, with the model's own
special-token post-processing), whichever files the model ships:

- ``tokenizer.json`` is read directly;
- older layouts (``vocab.txt``; ``vocab.json`` + ``merges.txt``; a SentencePiece model) are
  converted by transformers' ``AutoTokenizer`` (local files only), whose backend we keep.

:func:`read_encoding` turns one ``tokenizers.Encoding`` into an :class:`Encoding`:

- ``special``: tokens the post-processor added (CLS, SEP, BOS, EOS …) and any token whose id is
  a special added token (a "[SEP]" typed in the text is still a separator to the model); their
  offsets are (0, 0);
- ``offsets``: character spans into the text, trimmed of surrounding whitespace (byte-level BPE
  counts the space before a word as part of its token), so that every tokenizer's spans point
  at the visible characters a POS tagger sees;
- ``display``: the token as text. Byte-level BPE (GPT-2, Llama 3, Qwen2) maps its byte alphabet
  back to UTF-8 (``Ġ`` is a leading space, ``Ċ`` a newline); SentencePiece's ``▁`` becomes a
  leading space and its byte-fallback tokens ``<0xNN>`` their character; WordPiece's ``##`` is
  removed. Specials are shown as they are ("[CLS]", "<s>");
- ``continuation``: True for a token that continues the previous word: WordPiece's ``##``
  pieces; for BPE and SentencePiece, a piece that does not begin with a space (other than the
  first token of the text, and a piece after one that ends in whitespace: a newline ``Ċ`` or a
  run of spaces, which byte-level BPE such as ModernBERT's keeps as tokens of their own).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ModelLoadError

log = logging.getLogger(__name__)

_BYTE_TOKEN = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


@dataclass
class Encoding:
    """One tokenised text; lists are aligned with ``ids``."""

    ids: list[int]
    tokens: list[str]
    offsets: list[tuple[int, int]]
    special: list[bool]
    truncated: bool = False
    display: list[str] = field(default_factory=list)
    continuation: list[bool] = field(default_factory=list)
    #: the text's tokens (specials excluded) before a window or truncation, and the index of
    #: the first one kept: tokens ``window_start .. window_start + kept`` of ``total_tokens``
    total_tokens: int | None = None
    window_start: int = 0


def load_tokenizer(path: Path):
    """The model's fast tokenizer (``tokenizers.Tokenizer``), padding and truncation off."""
    from tokenizers import Tokenizer

    tj = path / "tokenizer.json"
    if tj.is_file():
        try:
            tok = Tokenizer.from_file(str(tj))
        except Exception as exc:  # the tokenizers library raises plain Exception
            raise ModelLoadError(f"{tj} could not be read as a tokenizer: {exc}") from None
    else:
        tok = _converted(path)
    tok.no_truncation()
    tok.no_padding()
    return tok


def _converted(path: Path):
    """Convert an older tokenizer layout through transformers (local files only)."""
    from transformers import AutoTokenizer

    try:
        hf = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        backend = hf.backend_tokenizer
    except Exception as exc:  # transformers raises many kinds here; all mean "cannot use it"
        raise ModelLoadError(
            f"{path}: the tokenizer files could not be converted to a fast tokenizer ({exc}); "
            "save a tokenizer.json with the model (tokenizer.save_pretrained on a machine where "
            "it loads)"
        ) from None
    log.info("converted the tokenizer of %s to a fast tokenizer", path)
    return backend


def _bytes_to_unicode() -> dict[int, int]:
    """GPT-2's byte -> printable character table (byte-level BPE's alphabet)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    keep += range(ord("®"), ord("ÿ") + 1)
    table, extra = {b: b for b in keep}, 0
    for b in range(256):
        if b not in table:
            table[b] = 256 + extra
            extra += 1
    return table


_UNICODE_TO_BYTE = {chr(c): b for b, c in _bytes_to_unicode().items()}


class TokenReader:
    """Reads a tokenizer's conventions once (its model kind and markers) and applies them."""

    def __init__(self, tokenizer) -> None:
        spec = json.loads(tokenizer.to_str())
        model = spec.get("model") or {}
        kinds = _component_types(spec.get("pre_tokenizer")) | _component_types(spec.get("decoder"))
        if model.get("type") == "WordPiece":
            self.kind = "wordpiece"
        elif "ByteLevel" in kinds:
            self.kind = "bytelevel"
        elif "Metaspace" in kinds or _replaces_metaspace(spec.get("decoder")):
            self.kind = "metaspace"
        else:
            self.kind = "plain"
        self.prefix = model.get("continuing_subword_prefix") or "##"
        self.special_ids = {
            int(t["id"]) for t in spec.get("added_tokens") or [] if t.get("special", False)
        }

    def read(self, enc, text: str) -> Encoding:
        """An :class:`Encoding` from a ``tokenizers.Encoding`` of ``text``."""
        ids, tokens = list(enc.ids), list(enc.tokens)
        special = [
            bool(s) or i in self.special_ids
            for i, s in zip(ids, enc.special_tokens_mask, strict=True)
        ]
        offsets = [
            (0, 0) if sp else _trim(text, int(s), int(e))
            for (s, e), sp in zip(enc.offsets, special, strict=True)
        ]
        display, cont = self.display(tokens, special, offsets, text)
        return Encoding(ids, tokens, offsets, special, False, display, cont)

    def display(
        self,
        tokens: list[str],
        special: list[bool],
        offsets: list[tuple[int, int]],
        text: str,
    ) -> tuple[list[str], list[bool]]:
        """Tokens as a person reads them, and which ones continue the previous word."""
        shown, cont = [], []
        first, after_space = True, False
        for tok, sp, (s, e) in zip(tokens, special, offsets, strict=True):
            if sp:
                shown.append(tok)
                cont.append(False)
                continue
            if self.kind == "wordpiece":
                glued = tok.startswith(self.prefix)
                d = tok[len(self.prefix) :] if glued else tok
            else:
                if self.kind == "bytelevel":
                    d = _from_byte_level(tok, text[s:e])
                elif self.kind == "metaspace":
                    d = _from_metaspace(tok, text[s:e])
                else:
                    d = tok
                # a piece after whitespace (a newline, a run of spaces) starts a word too
                glued = not first and not d[:1].isspace() and not after_space
                after_space = d[-1:].isspace()
            shown.append(d)
            cont.append(glued)
            first = False
        return shown, cont


def _component_types(component) -> set[str]:
    """Types of a pre-tokenizer / decoder, looking inside ``Sequence`` components."""
    if not isinstance(component, dict):
        return set()
    found = {str(component.get("type"))}
    for key in ("pretokenizers", "decoders"):
        for sub in component.get(key) or []:
            found |= _component_types(sub)
    return found


def _replaces_metaspace(decoder) -> bool:
    """SentencePiece decoders written as Replace("▁", " ") (Llama 2, Gemma)."""
    if not isinstance(decoder, dict):
        return False
    if decoder.get("type") == "Replace":
        return (decoder.get("pattern") or {}).get("String") == "▁"
    return any(_replaces_metaspace(d) for d in decoder.get("decoders") or [])


def _from_byte_level(token: str, span: str) -> str:
    """Byte-level BPE piece -> text; a piece that splits a UTF-8 character shows its span."""
    try:
        raw = bytes(_UNICODE_TO_BYTE[c] for c in token)
    except KeyError:  # not in the byte alphabet (an added token): as it is
        return token
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return span or raw.decode("utf-8", errors="replace")


def _from_metaspace(token: str, span: str) -> str:
    m = _BYTE_TOKEN.match(token)
    if m:
        b = int(m.group(1), 16)
        return chr(b) if b < 0x80 else (span or token)
    return token.replace("▁", " ")


def _trim(text: str, s: int, e: int) -> tuple[int, int]:
    """Shrink [s, e) to its non-whitespace part; a whitespace-only span stays as it is."""
    piece = text[s:e]
    core = piece.strip()
    if not core or core == piece:
        return (s, e)
    start = s + (len(piece) - len(piece.lstrip()))
    return (start, start + len(core))


def truncate_encoding(enc: Encoding, limit: int) -> Encoding:
    """Keep the first tokens and the closing special token (SEP, EOS) if there is one,
    ``limit`` tokens in all."""
    return window_encoding(enc, limit, 0)


def content_span(enc: Encoding) -> tuple[int, int]:
    """``(head, tail)``: how many special tokens open and close the encoding (CLS … SEP)."""
    sp = enc.special
    head = 0
    while head < len(sp) and sp[head]:
        head += 1
    tail = 0
    while tail < len(sp) - head and sp[len(sp) - 1 - tail]:
        tail += 1
    return head, tail


def window_encoding(enc: Encoding, limit: int, start: int) -> Encoding:
    """A window of ``limit`` tokens in all: the opening special tokens, the text's tokens from
    index ``start`` (counted without specials, clamped so that the window is full), and the
    closing ones. The window of a long text is what a model of ``limit`` positions can see;
    ``total_tokens``/``window_start`` say where it lies in the whole text."""
    head, tail = content_span(enc)
    total = len(enc.ids) - head - tail
    width = max(0, limit - head - tail)
    if width == 0:
        head, tail, width = min(head, limit), 0, max(0, limit - min(head, limit))
    first = max(0, min(int(start), max(0, total - width)))
    while first > 0 and enc.continuation and enc.continuation[head + first]:
        first -= 1  # a window starts at a word's first token, not inside the word
    lo, hi = head + first, head + first + min(width, total)
    end = len(enc.ids) - tail

    def cut(xs: list) -> list:
        return xs[:head] + xs[lo:hi] + xs[end:] if xs else xs

    return Encoding(
        cut(enc.ids),
        cut(enc.tokens),
        cut(enc.offsets),
        cut(enc.special),
        hi - lo < total,
        cut(enc.display),
        cut(enc.continuation),
        total_tokens=total,
        window_start=first,
    )
