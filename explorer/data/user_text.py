"""Turning text a user pastes or uploads into a training corpus, with clear errors.

Every failure raises :class:`CorpusError` (a ``ValueError``) whose message can be
shown to the user as is (``st.error(str(err))``).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Literal

from explorer.runtime.errors import ViewError

from .vocab import clean_text, tokenize_chars, tokenize_words

__all__ = ["CorpusError", "corpus_from_text", "read_uploaded_text", "MIN_CHARS", "MIN_TOKENS"]

MIN_CHARS = 200
MIN_TOKENS = 50
# A pasted or uploaded corpus: at most a million characters (about 180,000 words, 1.3 s to tokenise once on one core)
# and, uploaded, 4 MB of UTF-8; the Models page names both and reads a text once, not on every rerun
MAX_CHARS = 1_000_000
MAX_BYTES = 4_000_000

# Sentence boundary: . ! ? (possibly repeated, possibly followed by closing quotes/brackets) + space.
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]\u201d\u2019]*\s+")


class CorpusError(ViewError, ValueError):
    """Input text cannot be used as a corpus; the message explains why, for the user."""

    alert = "warning"


def _binary_fraction(text: str) -> float:
    """Share of characters that are controls (other than whitespace), NUL, or U+FFFD."""
    sample = text[:100_000]
    if not sample:
        return 0.0
    bad = sum(1 for ch in sample if ch == "\ufffd" or (unicodedata.category(ch) == "Cc" and ch not in "\t\n\r\x0c"))
    return bad / len(sample)


def read_uploaded_text(data: bytes, max_bytes: int = MAX_BYTES) -> str:
    """Decode an uploaded file to ``str``: UTF-8 (with or without BOM) or UTF-16 with a BOM.

    Raises :class:`CorpusError` for empty or oversized files, binary files and
    non-UTF-8 text (with a hint to re-save as UTF-8).
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CorpusError(f"expected the file's bytes, got {type(data).__name__}")
    data = bytes(data)
    if not data:
        raise CorpusError("The file is empty.")
    if len(data) > max_bytes:
        raise CorpusError(
            f"The file is {len(data) / 1e6:.1f} MB; the limit is {max_bytes / 1e6:.0f} MB. "
            "Upload a smaller excerpt."
        )
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError as err:
            raise CorpusError(f"The file starts like UTF-16 text but cannot be decoded ({err.reason}).") from None
    head = data[:8192]
    if b"\x00" in head:
        raise CorpusError("This looks like a binary file (it contains NUL bytes), not plain text. "
                          "Upload a .txt file saved as UTF-8.")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise CorpusError(
            f"The file is not valid UTF-8 text (bad byte at position {err.start}). "
            "If it is text, save it as UTF-8 and upload it again; if it is a PDF, Word or image file, "
            "copy the text out first."
        ) from None
    if _binary_fraction(text) > 0.05:
        raise CorpusError("This looks like a binary file, not plain text. Upload a .txt file saved as UTF-8.")
    return text


def corpus_from_text(
    text: str,
    level: Literal["word", "char"] = "word",
    max_chars: int = MAX_CHARS,
    min_chars: int = MIN_CHARS,
    min_tokens: int = MIN_TOKENS,
) -> list[list[str]]:
    """Split ``text`` into a corpus: a list of token lists.

    ``level="word"``: one list per sentence (split at ``. ! ?`` and at line breaks),
    tokens from :func:`~explorer.data.vocab.tokenize_words` (lowercased, punctuation
    split off). ``level="char"``: one list per non-empty line, tokens from
    :func:`~explorer.data.vocab.tokenize_chars`.

    Raises :class:`CorpusError` if the text is empty, binary-looking, longer than
    ``max_chars``, shorter than ``min_chars`` characters / ``min_tokens`` tokens, or has
    no letters or digits at all.
    """
    if level not in ("word", "char"):
        raise CorpusError(f"level must be 'word' or 'char', not {level!r}")
    if not isinstance(text, str):
        raise CorpusError(f"expected text, got {type(text).__name__}")
    if len(text) > max_chars:
        raise CorpusError(
            f"The text has {len(text):,} characters; the limit is {max_chars:,}. Use a shorter excerpt."
        )
    if not text.strip():
        raise CorpusError("The text is empty. Paste or upload some sentences to train on.")
    if _binary_fraction(text) > 0.05:
        raise CorpusError("The text looks like binary data (many control characters), not writing.")
    cleaned = clean_text(text)
    visible = len("".join(cleaned.split()))
    if visible < min_chars:
        raise CorpusError(
            f"The text is too short to train on: {visible} non-space characters, at least {min_chars} "
            "are needed (a few paragraphs)."
        )
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if level == "word":
        corpus = [tokenize_words(part) for line in lines for part in _SENTENCE_END.split(line) if part.strip()]
    else:
        corpus = [tokenize_chars(line) for line in lines]
    corpus = [tokens for tokens in corpus if tokens]
    n_tokens = sum(len(s) for s in corpus)
    usable = sum(1 for s in corpus for t in s if any(ch.isalnum() for ch in t))
    if usable == 0:
        raise CorpusError("The text has no usable tokens: no letters or digits were found.")
    if level == "word" and n_tokens < min_tokens:
        raise CorpusError(
            f"The text is too short to train on: {n_tokens} word tokens, at least {min_tokens} are needed."
        )
    return corpus
