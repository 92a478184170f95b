"""Tokens as readable labels, for both tokenizers through one small protocol.

A label is a token's own text made safe to show: spaces and line breaks visible,
control and direction-changing characters as U+XXXX, a character split into byte
pieces shown once (its other pieces show a continuation mark).
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from typing import Protocol

CONTINUATION = "…"  # label of the 2nd, 3rd… byte piece of one character


class Tokenizer(Protocol):
    """What the model needs of a tokenizer: ids with character offsets, and the label
    of a special token (None for ordinary ones)."""

    bos_token_id: int
    unk_token_id: int | None

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]: ...

    def special_label(self, token_id: int) -> str | None: ...


_VISIBLE = {" ": "␣", "\n": "↵", "\t": "⇥", "\r": "↵"}
_WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def readable(piece: str) -> str:
    """A token's text as a short, safe label: spaces and line breaks made visible,
    control and direction-changing characters shown as U+XXXX, never empty."""
    stripped = piece.strip()
    if stripped:
        piece = stripped
    out = []
    for ch in piece:
        if ch in _VISIBLE:
            out.append(_VISIBLE[ch])
        elif unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
            out.append(f"U+{ord(ch):04X}")
        else:
            out.append(ch)
    label = "".join(out)
    return label[:24] + "…" if len(label) > 25 else label


def labels_from_offsets(text: str, offsets: list[tuple[int, int]], special: list[str | None]) -> list[str]:
    """One label per token. A character split into several byte pieces (which share
    one character span) shows on its first piece; the others show a continuation
    mark, so the count stays n."""
    labels = []
    prev = None
    for (start, end), sp in zip(offsets, special):
        if sp is not None:
            labels.append(sp)
            prev = None
            continue
        if (start, end) == prev:
            labels.append(CONTINUATION)
        else:
            labels.append(readable(text[start:end]) if end > start else "?")
        prev = (start, end)
    return labels


def words_from_offsets(text: str, offsets: list[tuple[int, int]], special: list[str | None]) -> list[int]:
    """Index of the word (a run of letters/digits, or one punctuation mark) each
    token starts in; −1 for special tokens and pure whitespace."""
    spans = [m.span() for m in _WORD.finditer(text)]
    starts = [s for s, _ in spans]
    out = []
    for (start, end), sp in zip(offsets, special):
        if sp is not None:
            out.append(-1)
            continue
        pos = start
        while pos < end and text[pos].isspace():
            pos += 1
        k = bisect.bisect_right(starts, pos) - 1
        out.append(k if k >= 0 and pos < end and spans[k][0] <= pos < spans[k][1] else -1)
    return out


class ByteTokenizer:
    """UTF-8 bytes as tokens (id = byte + 3, 2 = <bos>): the tokenizer of the tiny
    random-weight test model. Multi-byte characters become several pieces."""

    bos_token_id = 2
    unk_token_id = 1
    vocab_size = 259

    def encode_with_offsets(self, text: str):
        ids, offsets = [self.bos_token_id], [(0, 0)]
        for i, ch in enumerate(text):
            for byte in ch.encode("utf-8", errors="replace"):
                ids.append(byte + 3)
                offsets.append((i, i + 1))
        return ids, offsets

    def special_label(self, token_id: int) -> str | None:
        return "<bos>" if token_id == self.bos_token_id else None


class HFTokenizer:
    """The model's own tokenizer, with character offsets."""

    def __init__(self, tok):
        self.tok = tok
        self.bos_token_id = tok.bos_token_id
        self.unk_token_id = tok.unk_token_id
        self._special = {i: t for t, i in zip(tok.all_special_tokens, tok.all_special_ids)}

    def encode_with_offsets(self, text: str):
        enc = self.tok(text, return_offsets_mapping=True, add_special_tokens=True)
        return list(enc["input_ids"]), [tuple(o) for o in enc["offset_mapping"]]

    def special_label(self, token_id: int) -> str | None:
        return self._special.get(token_id)

    def changed_characters(self, text: str) -> dict[str, str]:
        """The characters of ``text`` the tokenizer's normaliser changes before reading them
        (an uncased vocabulary lowercases, drops accents and voicing marks: パ read as ハ),
        each with what it becomes; {} when it has no normaliser or changes none."""
        backend = getattr(self.tok, "backend_tokenizer", None)
        normalizer = getattr(backend, "normalizer", None)
        if normalizer is None:
            return {}
        out = {}
        for c in dict.fromkeys(text):
            if not c.isspace():
                # spaces the normaliser puts around a character (BERT's around each kanji) change
                # nothing the model reads of it: only a character read as another counts
                made = "".join(normalizer.normalize_str(c).split())
                if made != c:
                    out[c] = made
        return out
