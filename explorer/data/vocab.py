"""Vocabularies and tokenizers shared by every corpus.

A :class:`Vocab` maps tokens to integer ids. The four special tokens in
:data:`SPECIALS` always hold ids 0..3, so ``pad_id == 0`` for every vocabulary
the explorer builds or loads.

Tokenizers are deliberately simple and deterministic:

* :func:`tokenize_words` lowercases, splits off punctuation, drops control and
  zero-width characters, and keeps any other script (CJK, Arabic, emoji, ...)
  as tokens, so unseen scripts become ``<unk>`` cleanly instead of crashing.
* :func:`tokenize_chars` returns one token per character after the same cleaning.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

__all__ = ["SPECIALS", "PAD", "UNK", "BOS", "EOS", "Vocab", "tokenize_words", "tokenize_chars", "clean_text"]

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<bos>", "<eos>"
SPECIALS: list[str] = [PAD, UNK, BOS, EOS]

# Typographic variants folded onto ASCII punctuation.
_PUNCT_FOLD = {
    "\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'",
    "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u00ab": '"', "\u00bb": '"',
    "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-", "\u2212": "-",
    "\u2026": "...",
}
# Unicode categories removed entirely: controls (incl. NUL), format characters
# (zero-width space/joiners, BOM, bidi marks), surrogates, unassigned code points.
_DROP_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Cn"})
_WHITESPACE_CONTROLS = frozenset("\t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85")


def clean_text(text: str) -> str:
    """NFC-normalise ``text``, turn whitespace controls into spaces and drop other
    control / zero-width / format characters. Case is kept."""
    if not isinstance(text, str):
        raise TypeError(f"expected str, got {type(text).__name__}")
    text = unicodedata.normalize("NFC", text)
    out = []
    for ch in text:
        if ch in _WHITESPACE_CONTROLS:
            out.append(" ")
        elif unicodedata.category(ch) in _DROP_CATEGORIES:
            continue
        else:
            out.append(_PUNCT_FOLD.get(ch, ch))
    return "".join(out)


def _is_modifier(ch: str) -> bool:
    """Characters that belong to the previous token (combining marks, variation
    selectors, emoji skin-tone modifiers)."""
    cat = unicodedata.category(ch)
    return cat[0] == "M" or 0x1F3FB <= ord(ch) <= 0x1F3FF


def tokenize_words(text: str) -> list[str]:
    """Lowercased word tokens of ``text``.

    Runs of letters/digits (any script) form one token; each of ``. , ; : ! ? " ' ( ) -``
    is its own token; every other visible symbol (emoji, ``$``, ...) is a
    one-character token. Control characters, NUL and zero-width characters are removed.

    >>> tokenize_words("The dog's bone (big)!")
    ['the', 'dog', "'", 's', 'bone', '(', 'big', ')', '!']
    """
    text = clean_text(text).lower()
    tokens: list[str] = []
    word: list[str] = []

    def flush() -> None:
        if word:
            tokens.append("".join(word))
            word.clear()

    prev_space = True
    for ch in text:
        if ch.isspace():
            flush()
            prev_space = True
            continue
        if _is_modifier(ch):
            # Combining mark / variation selector / skin tone: part of the previous token.
            if word:
                word.append(ch)
            elif tokens and not prev_space:
                tokens[-1] += ch
        elif unicodedata.category(ch)[0] in "LMN" or ch == "_":  # letters, marks, digits of any script
            word.append(ch)
        else:
            flush()
            tokens.append(ch)
        prev_space = False
    flush()
    return tokens


def tokenize_chars(text: str, lower: bool = True) -> list[str]:
    """One token per character of the cleaned ``text`` (see :func:`clean_text`).

    Runs of whitespace collapse to a single ``" "``; leading/trailing space is dropped.
    """
    text = " ".join(clean_text(text).split())
    if lower:
        text = text.lower()
    return list(text)


class Vocab:
    """Bidirectional token <-> id map with the :data:`SPECIALS` at ids 0..3.

    ``Vocab(tokens)`` keeps the order of ``tokens`` after the specials (duplicates
    and specials inside ``tokens`` are skipped). ``itos[i]`` is the token of id ``i``;
    ``stoi[t]`` the id of token ``t``. ``freq`` holds corpus counts when built with
    :meth:`build` (empty otherwise).
    """

    def __init__(self, tokens: Iterable[str] = (), freq: Mapping[str, int] | None = None):
        self.itos: list[str] = list(SPECIALS)
        self.stoi: dict[str, int] = {t: i for i, t in enumerate(SPECIALS)}
        for tok in tokens:
            if not isinstance(tok, str):
                raise ValueError(f"vocabulary tokens must be strings, got {tok!r} ({type(tok).__name__})")
            if tok not in self.stoi:
                self.stoi[tok] = len(self.itos)
                self.itos.append(tok)
        self.freq: dict[str, int] = dict(freq or {})

    @classmethod
    def build(cls, token_lists: Iterable[Sequence[str]], min_freq: int = 1, max_size: int | None = None) -> "Vocab":
        """Count tokens and keep those seen ``>= min_freq`` times, most frequent first
        (ties alphabetical), at most ``max_size`` entries in total including specials."""
        counts: Counter[str] = Counter()
        for tokens in token_lists:
            counts.update(tokens)
        for special in SPECIALS:
            counts.pop(special, None)
        ordered = sorted((t for t, c in counts.items() if c >= min_freq), key=lambda t: (-counts[t], t))
        if max_size is not None:
            ordered = ordered[: max(0, max_size - len(SPECIALS))]
        return cls(ordered, freq={t: counts[t] for t in ordered})

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: object) -> bool:
        return token in self.stoi

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocab) and self.itos == other.itos

    def __repr__(self) -> str:
        return f"Vocab(size={len(self)})"

    @property
    def pad_id(self) -> int:
        return 0

    @property
    def unk_id(self) -> int:
        return 1

    @property
    def bos_id(self) -> int:
        return 2

    @property
    def eos_id(self) -> int:
        return 3

    def encode(self, tokens: Sequence[str]) -> list[int]:
        """Token list -> id list; unknown tokens map to :attr:`unk_id`."""
        unk = self.unk_id
        return [self.stoi.get(t, unk) for t in tokens]

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Id list (ints or numpy ints) -> token list; out-of-range ids become ``<unk>``."""
        n = len(self.itos)
        return [self.itos[int(i)] if 0 <= int(i) < n else UNK for i in ids]

    def to_json(self) -> dict:
        """JSON-serialisable form: ``{"itos": [...], "freq": {...}}``."""
        obj: dict = {"itos": list(self.itos)}
        if self.freq:
            obj["freq"] = dict(self.freq)
        return obj

    @classmethod
    def from_json(cls, obj: object, add_specials: bool = False) -> "Vocab":
        """Load a vocabulary from a token list, a ``{token: id}`` map, or :meth:`to_json` output.

        Ids must be exactly ``0..n-1`` without duplicates and tokens must be strings.
        The file's ids are kept, so they keep matching a model's embedding rows: the
        :data:`SPECIALS` must already sit at ids 0..3. With ``add_specials=True`` a file
        that has none of them gets them prepended instead (every id shifts by 4; use
        only for word lists, not for a trained model's vocabulary).
        Raises ``ValueError`` with a readable message.
        """
        freq = None
        if isinstance(obj, Mapping) and "itos" in obj and isinstance(obj.get("itos"), list):
            freq = obj.get("freq") or None
            if freq is not None and not isinstance(freq, Mapping):
                raise ValueError("vocabulary 'freq' must be a {token: count} object")
            obj = obj["itos"]
        if isinstance(obj, Mapping):
            items = list(obj.items())
            if not items:
                raise ValueError("vocabulary is empty")
            for tok, idx in items:
                if not isinstance(tok, str):
                    raise ValueError(f"vocabulary token {tok!r} is not a string")
                if isinstance(idx, bool) or not isinstance(idx, int):
                    raise ValueError(f"id of token {tok!r} must be an integer, got {idx!r}")
            ids = sorted(idx for _, idx in items)
            if ids != list(range(len(items))):
                dup = sorted({i for i in ids if ids.count(i) > 1})
                if dup:
                    raise ValueError(f"vocabulary ids must be unique; duplicated id(s): {dup[:10]}")
                missing = sorted(set(range(len(items))) - set(ids))
                raise ValueError(
                    f"vocabulary ids must be 0..{len(items) - 1} with no gaps; "
                    f"missing {missing[:10]}, range found {ids[0]}..{ids[-1]}"
                )
            tokens = [tok for tok, _ in sorted(items, key=lambda kv: kv[1])]
        elif isinstance(obj, (list, tuple)):
            tokens = list(obj)
            if not tokens:
                raise ValueError("vocabulary is empty")
            for i, tok in enumerate(tokens):
                if not isinstance(tok, str):
                    raise ValueError(f"vocabulary entry {i} is {tok!r}, not a string")
            seen: set[str] = set()
            dups = [t for t in tokens if t in seen or seen.add(t)]
            if dups:
                raise ValueError(f"vocabulary has duplicate tokens: {dups[:10]}")
        else:
            raise ValueError(
                "vocabulary must be a JSON list of tokens or a {token: id} object, "
                f"got {type(obj).__name__}"
            )
        present = [s for s in SPECIALS if s in tokens]
        if not present and not add_specials:
            raise ValueError(
                f"vocabulary must start with the special tokens {SPECIALS} at ids 0..3 "
                f"(found {tokens[0]!r} at id 0); add them to the file, or load a plain word "
                "list with add_specials=True (this shifts every id by 4)"
            )
        if present:
            for i, special in enumerate(SPECIALS):
                if i >= len(tokens) or tokens[i] != special:
                    raise ValueError(
                        f"special tokens must have ids 0..3 in the order {SPECIALS}; "
                        f"found {special!r} at id {tokens.index(special) if special in tokens else 'none'}"
                    )
            tokens = tokens[len(SPECIALS):]
        return cls(tokens, freq=freq)
