"""Word vectors in a text file, read within a budget: "word v1 v2 ... vD" per line (the GloVe / word2vec text format,
with an optional "N D" header line), as uploaded to the word-embeddings view.

Budget, checked before anything is decoded (a refusal names the limit and its setting):
  EXPLORER_MAX_VECTORS_MB (100)  a vector text file's bytes (parsing takes ~6 bytes of memory per byte)
and at most MAX_FILE_ROWS vectors. The parser returns the words and vectors (`VectorText`); the word-embeddings probe
makes its table of them (explorer.probes.word_embeddings.text_file_table).
"""
from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from explorer.runtime.errors import ViewError

MAX_FILE_ROWS = 1_000_000
DEFAULT_MAX_VECTORS_MB = 100  # parsing takes ~6 bytes of memory per byte (82 MB of text: 4.4 s, +500 MB)


class EmbeddingError(ViewError, ValueError):
    """A model or file has no embedding table this view can read; str() is a message for the user."""


class EmbeddingFileError(EmbeddingError):
    """A malformed embedding text file; `line` is the 1-based line number (0: the file as a whole)."""

    def __init__(self, line: int, reason: str) -> None:
        self.line, self.reason = line, reason
        super().__init__(f"line {line}: {reason}" if line else reason)


@dataclass(frozen=True)
class VectorText:
    """The vectors of a text file, in file order: words (V,) as written (duplicates kept); vectors (V, D) float32;
    key "file:" + the first 16 hex digits of the file's SHA-256 (stable per content); source "name (V × D)";
    notes: where the file differs from what it announces (header count, duplicate words)."""

    key: str
    source: str
    words: tuple[str, ...]
    vectors: np.ndarray
    notes: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.words)


def max_vector_file_bytes() -> int:
    """Largest vector text file parsed: EXPLORER_MAX_VECTORS_MB (default 100)."""
    try:
        mb = float(os.environ.get("EXPLORER_MAX_VECTORS_MB", DEFAULT_MAX_VECTORS_MB))
    except ValueError:
        mb = DEFAULT_MAX_VECTORS_MB
    return int(max(mb, 0) * 2**20)


def parse_text_embeddings(data: bytes, name: str = "upload", max_rows: int = MAX_FILE_ROWS) -> VectorText:
    """Parse "word v1 ... vD" lines (GloVe / word2vec text format, optional "N D" header) from bytes.

    Raises EmbeddingFileError with the 1-based line number and the reason for the first problem found, and for a
    file over EXPLORER_MAX_VECTORS_MB before anything is decoded. Words may contain spaces (the last D fields are
    the numbers). Duplicate words are kept (a table built of them looks up the first row; a note says so).
    """
    limit = max_vector_file_bytes()
    if len(data) > limit:
        raise EmbeddingFileError(0, f"The file is {len(data) / 2**20:,.1f} MB, over the {limit / 2**20:.3g} MB limit "
                                    "for vector files (set EXPLORER_MAX_VECTORS_MB to change it).")
    if not data or not data.strip():
        raise EmbeddingFileError(0, "The file is empty.")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise EmbeddingFileError(line, f"not UTF-8 text (byte 0x{data[exc.start]:02x}); is this a binary word2vec "
                                       "file? Save it in the text format.") from None
    lines = text.split("\n")
    header_n: int | None = None
    dim: int | None = None
    words: list[str] = []
    rows: list[np.ndarray] = []
    start = 0
    while start < len(lines) and not lines[start].strip():
        start += 1
    first = lines[start].split() if start < len(lines) else []
    if len(first) == 2 and all(re.fullmatch(r"\d+", f) for f in first):
        header_n, dim = int(first[0]), int(first[1])
        if dim < 1:
            raise EmbeddingFileError(start + 1, f"the header says {dim} dimensions.")
        start += 1
    for lineno in range(start, len(lines)):
        raw = lines[lineno].rstrip("\r")
        if not raw.strip():
            continue
        parts = raw.split()
        if dim is None:
            if len(parts) < 2:
                raise EmbeddingFileError(lineno + 1, "expected a word followed by numbers, found one field.")
            dim = _count_numbers(parts)
            if dim == 0:
                raise EmbeddingFileError(lineno + 1, f"'{parts[-1][:40]}' is not a number.")
        if len(parts) < dim + 1:
            raise EmbeddingFileError(lineno + 1, f"expected a word and {dim} numbers, found {len(parts)} field(s)"
                                                 f" ({len(parts) - 1} number(s)).")
        word = " ".join(parts[: len(parts) - dim])
        try:
            vec = np.array(parts[len(parts) - dim:], dtype=np.float32)
        except ValueError:
            bad = next((p for p in parts[len(parts) - dim:] if not _is_number(p)), parts[-1])
            raise EmbeddingFileError(lineno + 1, f"'{bad[:40]}' is not a number.") from None
        if len(parts) > dim + 1 and _is_number(parts[len(parts) - dim - 1]):
            raise EmbeddingFileError(lineno + 1, f"expected {dim} numbers after the word, found more "
                                                 f"({_count_numbers(parts)}).")
        if not np.isfinite(vec).all():
            raise EmbeddingFileError(lineno + 1, "the vector holds NaN or infinite values.")
        words.append(word)
        rows.append(vec)
        if len(words) > max_rows:
            raise EmbeddingFileError(lineno + 1, f"more than {max_rows:,} vectors: too large for the explorer.")
    if not words:
        raise EmbeddingFileError(0, "The file holds no vectors.")
    notes = []
    if header_n is not None and header_n != len(words):
        notes.append(f"The header announces {header_n:,} vectors; the file holds {len(words):,}.")
    n_dups = len(words) - len(set(words))
    if n_dups:
        notes.append(f"{n_dups:,} duplicate word(s): the first vector of each is used for look-ups.")
    digest = hashlib.sha256(data).hexdigest()[:16]
    return VectorText(f"file:{digest}", f"{name} ({len(words):,} × {dim})", tuple(words), np.stack(rows), tuple(notes))


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def _count_numbers(parts: Sequence[str]) -> int:
    """How many trailing fields are numbers (the word is the rest, at least the first field)."""
    n = 0
    for p in reversed(parts[1:]):
        if not _is_number(p):
            break
        n += 1
    return n


def table_to_text(words: Sequence[str], vectors: np.ndarray, header: bool = False) -> bytes:
    """The text format of `parse_text_embeddings` (for tests and export): words (V,), vectors (V, D)."""
    lines = [f"{len(words)} {vectors.shape[1]}"] if header else []
    lines += [w + " " + " ".join(f"{v:.6g}" for v in row) for w, row in zip(words, vectors)]
    return ("\n".join(lines) + "\n").encode()
