"""Vocabularies and tokenizers shared by every corpus.

A :class:`Vocab` maps tokens to integer ids. Every vocabulary the explorer builds (``Vocab(tokens)``,
``Vocab.build``) holds the four :data:`SPECIALS` at ids 0..3 (``pad_id == 0``), and the built-in models and
training rely on that. A vocabulary read from a user's file (:meth:`Vocab.from_json`, or
:mod:`explorer.data.vocab_files` for the other ways people save one) keeps the file's ids, so they keep matching
the model's embedding rows: its special tokens are recognised by name wherever they sit
(:data:`SPECIAL_NAMES`: ``<unk>``/``[UNK]``/``UNK``, ``<bos>``/``<s>``/``[CLS]``/``<sos>``, ...), and
``pad_id``/``unk_id``/``bos_id``/``eos_id`` are None when absent. Whether a vocabulary is word- or
character-level, and whether it is lowercase, is read from its tokens (``level``, ``lower``).

Tokenizers are deliberately simple and deterministic:

* :func:`tokenize_words` lowercases (unless told not to), splits off punctuation, drops control and
  zero-width characters, and keeps any other script (CJK, Arabic, emoji, ...)
  as tokens, so unseen scripts become ``<unk>`` cleanly instead of crashing.
* :func:`tokenize_chars` returns one token per character after the same cleaning.
"""

from __future__ import annotations

import reprlib
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence

__all__ = ["SPECIALS", "SPECIAL_NAMES", "PAD", "UNK", "BOS", "EOS", "Vocab", "find_specials", "tokenize_words",
           "tokenize_chars", "clean_text", "normalisation_changes"]

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<bos>", "<eos>"
SPECIALS: list[str] = [PAD, UNK, BOS, EOS]
# Role -> the names people give its token, in order of preference (the first present in a vocabulary is used).
SPECIAL_NAMES: dict[str, tuple[str, ...]] = {
    "pad": ("<pad>", "[PAD]", "<PAD>"),
    "unk": ("<unk>", "[UNK]", "<UNK>", "UNK"),
    "bos": ("<bos>", "<s>", "<sos>", "[CLS]", "<BOS>", "<SOS>", "[BOS]", "<start>"),
    "eos": ("<eos>", "</s>", "[SEP]", "<EOS>", "[EOS]", "<end>"),
    "mask": ("<mask>", "[MASK]", "<MASK>"),
}
_BUILTIN_ROLES = {"pad": 0, "unk": 1, "bos": 2, "eos": 3}
Splitter = Callable[[str], list]  # text -> [(piece, id or None)]

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


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxdict, _REPR.maxstring, _REPR.maxother = 2, 10, 4, 40, 40


def _short(value: object) -> str:
    """A bounded repr of a value from a file, for messages (reprlib: bounded work whatever the value's size)."""
    return _REPR.repr(value)


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


def normalisation_changes(text: str) -> tuple[str, ...]:
    """What :func:`clean_text` changes in ``text``, in words (empty when nothing): the built-in vocabularies read the
    cleaned text, and the page says so, e.g. ("2 line breaks or tabs read as spaces", "“ ” read as \" \"")."""
    if not isinstance(text, str) or not text:
        return ()
    composed = unicodedata.normalize("NFC", text)
    changes: list[str] = []
    if composed != text:
        changes.append("accents typed as combining marks composed into single characters (NFC)")
    white = sum(1 for ch in composed if ch in _WHITESPACE_CONTROLS)
    if white:
        changes.append(f"{white} line break(s) or tab(s) read as spaces")
    dropped = [ch for ch in composed if ch not in _WHITESPACE_CONTROLS and unicodedata.category(ch) in _DROP_CATEGORIES]
    if dropped:
        names = ", ".join(dict.fromkeys(unicodedata.name(ch, f"U+{ord(ch):04X}").lower() for ch in dropped[:20]))
        changes.append(f"{len(dropped)} invisible or control character(s) dropped ({names})")
    folded = dict.fromkeys(ch for ch in composed if ch in _PUNCT_FOLD)
    if folded:
        changes.append("typographic punctuation read as ASCII (" +
                       ", ".join(f"{ch} as {_PUNCT_FOLD[ch]}" for ch in folded) + ")")
    return tuple(changes)


def _is_modifier(ch: str) -> bool:
    """Characters that belong to the previous token (combining marks, variation
    selectors, emoji skin-tone modifiers)."""
    cat = unicodedata.category(ch)
    return cat[0] == "M" or 0x1F3FB <= ord(ch) <= 0x1F3FF


def tokenize_words(text: str, lower: bool = True) -> list[str]:
    """Word tokens of ``text``, lowercased unless ``lower=False``.

    Runs of letters/digits (any script) form one token; each of ``. , ; : ! ? " ' ( ) -``
    is its own token; every other visible symbol (emoji, ``$``, ...) is a
    one-character token. Control characters, NUL and zero-width characters are removed.

    >>> tokenize_words("The dog's bone (big)!")
    ['the', 'dog', "'", 's', 'bone', '(', 'big', ')', '!']
    """
    text = clean_text(text)
    text = text.lower() if lower else text
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


def find_specials(itos: Sequence[str]) -> dict[str, int]:
    """Role ("pad", "unk", "bos", "eos", "mask") -> id of the first of its :data:`SPECIAL_NAMES` in ``itos``."""
    index = {t: i for i, t in enumerate(itos)}
    found = {}
    for role, names in SPECIAL_NAMES.items():
        i = next((index[n] for n in names if n in index), None)
        if i is not None:
            found[role] = i
    return found


def _level(itos: Sequence[str], special_ids: frozenset[int]) -> tuple[str, bool]:
    """("char" when nine in ten of the ordinary tokens are one character long, else "word"; lowercase?)."""
    ordinary = [t for i, t in enumerate(itos) if i not in special_ids]
    char = bool(ordinary) and sum(len(t) == 1 for t in ordinary) >= 0.9 * len(ordinary)
    return ("char" if char else "word"), all(t == t.lower() for t in ordinary)


class Vocab:
    """Bidirectional token <-> id map.

    ``Vocab(tokens)`` (what the explorer builds) holds the :data:`SPECIALS` at ids 0..3 and keeps the order of
    ``tokens`` after them (duplicates and specials inside ``tokens`` are skipped). ``Vocab(tokens, keep_ids=True)``
    (a user's file) keeps ``tokens`` exactly as ids 0..n-1 and recognises its special tokens by name
    (``roles`` / ``special_ids`` override that, e.g. for a tokenizer.json's declared special tokens).
    ``itos[i]`` is the token of id ``i``; ``stoi[t]`` the id of token ``t``; ``specials`` role -> id;
    ``special_ids`` every special token's id; ``level`` "word" | "char" | "subword" and ``lower`` (text is
    lowercased before lookup) are read from the tokens; ``splitter`` (optional) splits text into
    (piece, id or None) as a tokenizer does; ``source`` says what the file was. ``freq`` holds corpus counts
    when built with :meth:`build` or given (empty otherwise).
    """

    def __init__(self, tokens: Iterable[str] = (), freq: Mapping[str, int] | None = None, *, keep_ids: bool = False,
                 roles: Mapping[str, int] | None = None, special_ids: Iterable[int] = (),
                 splitter: Splitter | None = None, level: str | None = None, source: str = ""):
        self.itos: list[str] = [] if keep_ids else list(SPECIALS)
        self.stoi: dict[str, int] = {t: i for i, t in enumerate(self.itos)}
        for i, tok in enumerate(tokens):
            if not isinstance(tok, str):
                raise ValueError(f"vocabulary tokens must be strings, got {_short(tok)} ({type(tok).__name__})")
            if tok in self.stoi:
                if keep_ids:
                    raise ValueError(f"vocabulary has duplicate token {_short(tok)} (ids {self.stoi[tok]} and {i})")
                continue
            self.stoi[tok] = len(self.itos)
            self.itos.append(tok)
        self.freq: dict[str, int] = dict(freq or {})
        self.specials: dict[str, int] = dict(roles) if roles is not None else (
            find_specials(self.itos) if keep_ids else dict(_BUILTIN_ROLES))
        self.special_ids = frozenset(self.specials.values()) | frozenset(special_ids)
        self.level, self.lower = _level(self.itos, self.special_ids)
        self.level = level or self.level
        self.splitter = splitter
        self.source = source

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
    def pad_id(self) -> int | None:
        return self.specials.get("pad")

    @property
    def unk_id(self) -> int | None:
        return self.specials.get("unk")

    @property
    def bos_id(self) -> int | None:
        return self.specials.get("bos")

    @property
    def eos_id(self) -> int | None:
        return self.specials.get("eos")

    @property
    def builtin_layout(self) -> bool:
        """Whether the :data:`SPECIALS` hold ids 0..3 (what the explorer's own models are trained with)."""
        return self.itos[:4] == SPECIALS

    def encode(self, tokens: Sequence[str]) -> list[int]:
        """Token list -> id list; unknown tokens map to :attr:`unk_id` (ValueError naming them when there is none)."""
        unk = self.unk_id
        if unk is None:
            missing = [t for t in tokens if t not in self.stoi]
            if missing:
                raise ValueError(f"not in the vocabulary, which has no unknown-token entry: {missing[:10]}")
            return [self.stoi[t] for t in tokens]
        return [self.stoi.get(t, unk) for t in tokens]

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Id list (ints or numpy ints) -> token list; out-of-range ids become the unknown token."""
        n = len(self.itos)
        unk = self.itos[self.unk_id] if self.unk_id is not None else UNK
        return [self.itos[int(i)] if 0 <= int(i) < n else unk for i in ids]

    def pieces(self, text: str) -> list[tuple[str, int | None]]:
        """``text`` split as this vocabulary's model reads it: (piece, id), id None where the piece is not in the
        vocabulary. Words (:func:`tokenize_words`) or characters (:func:`tokenize_chars`), lowercased when the
        vocabulary is; a tokenizer's own pieces when it came with one (``splitter``)."""
        if self.splitter is not None:
            return self.splitter(text)
        split = tokenize_chars if self.level == "char" else tokenize_words
        return [(t, self.stoi.get(t)) for t in split(text, self.lower)]

    def summary(self) -> str:
        """E.g. "5,000 tokens, word-level, lowercase; <unk> id 0, <pad> id 1, no <bos>, no <eos>"."""
        level = {"word": "word-level", "char": "character-level", "subword": "sub-word pieces"}.get(self.level,
                                                                                                    self.level)
        case = "" if self.splitter is not None else (", lowercase" if self.lower else ", case-sensitive")
        roles = [f"{self.itos[i]} id {i}" if (i := self.specials.get(r)) is not None else f"no <{r}>"
                 for r in ("unk", "pad", "bos", "eos")]
        return f"{len(self):,} tokens, {level}{case}; {', '.join(roles)}"

    def to_json(self) -> dict:
        """JSON-serialisable form: ``{"itos": [...], "freq": {...}}``."""
        obj: dict = {"itos": list(self.itos)}
        if self.freq:
            obj["freq"] = dict(self.freq)
        return obj

    @classmethod
    def from_json(cls, obj: object, add_specials: bool = False) -> "Vocab":
        """Load a vocabulary from a token list, a ``{token: id}`` map, or ``{"itos": [...], "freq": {...}}``.

        Ids must be exactly ``0..n-1`` without duplicates and tokens must be strings. The file's ids are kept, so
        they keep matching a model's embedding rows; special tokens are recognised by name wherever they sit (or
        are absent). With ``add_specials=True`` a file that has none of the :data:`SPECIALS` gets them prepended
        instead (every id shifts by 4; use only for word lists, not for a trained model's vocabulary).
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
                    raise ValueError(f"vocabulary token {_short(tok)} is not a string")
                if isinstance(idx, bool) or not isinstance(idx, int):
                    raise ValueError(f"id of token {_short(tok)} must be an integer, got {_short(idx)}")
            ids = sorted(idx for _, idx in items)
            if ids != list(range(len(items))):  # every check below is linear in the number of entries
                dup = sorted(i for i, n in Counter(ids).items() if n > 1)
                if dup:
                    raise ValueError(f"vocabulary ids must be unique; duplicated id(s): {dup[:10]}")
                present = set(ids)
                missing = [i for i in range(len(items)) if i not in present][:10]
                raise ValueError(
                    f"vocabulary ids must be 0..{len(items) - 1} with no gaps; "
                    f"missing {missing}, range found {ids[0]}..{ids[-1]}"
                )
            tokens = [tok for tok, _ in sorted(items, key=lambda kv: kv[1])]
        elif isinstance(obj, (list, tuple)):
            tokens = list(obj)
            if not tokens:
                raise ValueError("vocabulary is empty")
            for i, tok in enumerate(tokens):
                if not isinstance(tok, str):
                    raise ValueError(f"vocabulary entry {i} is {_short(tok)}, not a string")
            seen: set[str] = set()
            dups = []
            for t in tokens:
                if t in seen:
                    dups.append(t)
                seen.add(t)
            if dups:
                raise ValueError(f"vocabulary has duplicate tokens: {_short(dups[:10])}")
        else:
            raise ValueError(
                "vocabulary must be a JSON list of tokens or a {token: id} object, "
                f"got {type(obj).__name__}"
            )
        if add_specials and not any(s in tokens for s in SPECIALS):
            return cls(tokens, freq=freq)
        return cls(tokens, freq=freq, keep_ids=True)
