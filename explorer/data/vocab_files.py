"""Vocabularies as people save them -> a :class:`~explorer.data.vocab.Vocab` whose ids match the model's rows.

`read_vocabulary(obj)` takes a parsed JSON value (or a plain entry of a checkpoint) and accepts:

* a list of tokens (id = position), a ``{token: id}`` map, or an ``{id: token}`` map (JSON keys "0", "1", ...);
* an object holding one of those under any name: torchtext's ``{"itos": [...], "stoi": {...}}``,
  ``{"word2idx": ..., "idx2word": ...}``, ``{"vocab": ...}``; when both directions are saved they must agree
  (counts under ``freq``/``freqs``/``counts`` are kept as frequencies);
* a Hugging Face ``tokenizer.json`` (the `tokenizers` library): its vocabulary and added tokens, and the tokenizer
  itself to split text (normalizer, pre-tokenizer and model; its post-processor is not applied: the explorer adds
  the beginning-of-sentence token itself, as for every vocabulary).

Special tokens are recognised by name wherever they sit (explorer.data.vocab.SPECIAL_NAMES); the tokenizer's
declared special tokens count too. Nothing here runs code from a file: JSON values only. A tokenizer.json's regular
expressions are checked before the library compiles them (explorer.data.tokenizer_safety), and a vocabulary larger
than the weights' rows (+ VOCAB_SLACK) is refused before anything is built from it.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, TypeGuard

from explorer.data.tokenizer_safety import TokenizerError, check_patterns, guarded, is_panic
from explorer.data.vocab import Vocab, find_specials

if TYPE_CHECKING:
    from tokenizers import Tokenizer

_COUNT_KEYS = ("freq", "freqs", "counts", "frequencies")


def read_vocabulary(obj: object, nested: bool = False) -> Vocab:
    """A Vocab from a parsed JSON value saved in any of the ways of the module docstring. Raises ValueError.

    nested: obj is an entry of an object already (its own entries are not searched again)."""
    if is_tokenizer_json(obj):
        return tokenizer_vocab(obj)
    if isinstance(obj, Mapping) and obj and not _is_flat(obj) and not nested:
        return _from_entries(obj)
    tokens = _id_map_tokens(obj)
    vocab = Vocab.from_json(tokens if tokens is not None else obj)
    vocab.source = _shape(obj)
    return vocab


def _shape(obj: object) -> str:
    if isinstance(obj, (list, tuple)):
        return "a list of tokens"
    if isinstance(obj, Mapping) and "itos" in obj:
        return "an {itos: [...]} object"
    return "an {id: token} map" if _id_map_tokens(obj) is not None else "a {token: id} map"


def _is_flat(obj: Mapping) -> bool:
    """No entry holds a list or an object: a {token: id} or {id: token} map, not a wrapper of one."""
    return not any(isinstance(v, (list, tuple, Mapping)) for v in obj.values())


def _id_map_tokens(obj: object) -> list[str] | None:
    """The tokens of an {id: token} map (ids "0".."n-1" as JSON keys), in id order; None if obj is not one."""
    if not isinstance(obj, Mapping) or not obj or not all(isinstance(v, str) for v in obj.values()):
        return None
    if not all(isinstance(k, int) or (isinstance(k, str) and k.isdigit()) for k in obj):
        return None
    ids = {int(k): v for k, v in obj.items()}
    if sorted(ids) != list(range(len(ids))):
        raise ValueError(f"an {{id: token}} map needs the ids 0..{len(ids) - 1} with no gaps; "
                         f"found {min(ids)}..{max(ids)} ({len(ids)} ids)")
    return [ids[i] for i in range(len(ids))]


def _from_entries(obj: Mapping) -> Vocab:
    """The vocabulary held in one or more entries of an object (torchtext itos/stoi, word2idx/idx2word, ...)."""
    found: dict[str, Vocab] = {}
    problems: list[str] = []
    for key, value in obj.items():
        if key in _COUNT_KEYS or not isinstance(value, (list, tuple, Mapping)):
            continue
        try:
            found[str(key)] = read_vocabulary(value, nested=True)
        except ValueError as exc:
            problems.append(f"'{key}': {exc}")
    if not found:
        entries = ", ".join(f"'{k}' ({type(v).__name__})" for k, v in list(obj.items())[:8])
        detail = f" ({'; '.join(problems[:3])})" if problems else ""
        raise ValueError(f"no entry of this object is a vocabulary{detail}: found {entries}; expected a list of "
                         "tokens, a {token: id} map or an {id: token} map, alone or under a name such as itos/stoi")
    first = next(iter(found))
    disagree = [k for k, v in found.items() if v.itos != found[first].itos]
    if disagree:
        raise ValueError(f"the entries '{first}' and '{disagree[0]}' are two different vocabularies "
                         f"({len(found[first])} and {len(found[disagree[0]])} tokens); keep one")
    counts = next((obj[k] for k in _COUNT_KEYS if isinstance(obj.get(k), Mapping)), None)
    vocab = found[first]
    if counts:
        vocab.freq = {str(t): int(c) for t, c in counts.items() if isinstance(c, (int, float))}
    vocab.source = f"the {' and '.join(repr(k) for k in found)} entr{'ies' if len(found) > 1 else 'y'} of an object"
    return vocab


# ------------------------------------------------------------------------------------------- tokenizer.json
def is_tokenizer_json(obj: object) -> TypeGuard[Mapping[str, object]]:
    """Whether obj looks like a Hugging Face tokenizer.json (a "model" object with a "vocab")."""
    return isinstance(obj, Mapping) and isinstance(obj.get("model"), Mapping) and "vocab" in obj["model"]


def tokenizer_vocab(obj: Mapping[str, object]) -> Vocab:
    """The vocabulary of a tokenizer.json (model vocab + added tokens) with the tokenizer to split text. Raises
    ValueError (TokenizerError: a regex that is not a known family's, a crash of the library)."""
    check_patterns(obj)  # before anything is built, and before the library compiles anything of the file
    model = obj["model"]
    assert isinstance(model, Mapping)  # is_tokenizer_json(obj)
    kind = str(model.get("type") or "tokenizer")
    raw = model["vocab"]
    if isinstance(raw, list):  # Unigram: [[piece, score], ...], id = position
        raw = {str(p[0]): i for i, p in enumerate(raw) if isinstance(p, (list, tuple)) and p}
    if not isinstance(raw, Mapping):
        raise ValueError(f"tokenizer.json: model.vocab is a {type(raw).__name__}, not a {{token: id}} map")
    by_token = dict(raw)
    declared = set()
    added_tokens = obj.get("added_tokens") or []
    if not isinstance(added_tokens, list):
        raise ValueError(f"tokenizer.json: added_tokens is a {type(added_tokens).__name__}, not a list")
    for added in added_tokens:
        if isinstance(added, Mapping) and isinstance(added.get("content"), str) and isinstance(added.get("id"), int):
            by_token[added["content"]] = added["id"]
            if added.get("special"):
                declared.add(added["id"])
    itos = Vocab.from_json(by_token).itos
    roles = find_specials(itos)
    unk = model.get("unk_token")
    if isinstance(unk, str) and unk in by_token:
        roles["unk"] = by_token[unk]
    from tokenizers import Tokenizer

    tokenizer = guarded(lambda: Tokenizer.from_str(json.dumps(obj)), "the tokenizers library cannot read this "
                        "tokenizer.json")
    level = "word" if kind == "WordLevel" else "subword"
    vocab = Vocab(itos, keep_ids=True, roles=roles, special_ids=declared, level=level,
                  source=f"a Hugging Face tokenizer.json ({kind} model)")
    vocab.splitter = _TokenizerSplitter(tokenizer, vocab)
    for sample in _SAMPLES:  # a tokenizer that crashes on ordinary text is refused now, not in a view
        try:
            vocab.splitter(sample)
        except TokenizerError as exc:
            raise TokenizerError(f"it fails on ordinary text: {exc}") from None
    return vocab


# Text every accepted tokenizer must split without crashing: words, digits, punctuation, emoji, runs of whitespace.
_SAMPLES = ("The capital of France is Paris.", "Le café coûte 3 € 😊 — “quoted” words, it's 12345 o'clock!",
            " " * 300 + "a" + "\n\t " * 100, "a" * 500 + "1" * 500 + "!" * 500)


class _TokenizerSplitter:
    """Text -> [(piece, id or None)] with a `tokenizers` Tokenizer, no special tokens added. A piece the tokenizer
    maps to its unknown token is returned as the text it covers, with id None."""

    def __init__(self, tokenizer: Tokenizer, vocab: Vocab) -> None:
        self.tokenizer, self.stoi, self.unk = tokenizer, vocab.stoi, vocab.unk_id

    def __call__(self, text: str) -> list[tuple[str, int | None]]:
        """The text as typed (the tokenizer's own normalizer does what it does). Raises TokenizerError (a ValueError)
        when the library crashes (a Rust panic) on this text."""
        try:
            enc = self.tokenizer.encode(text, add_special_tokens=False)
        except BaseException as exc:
            if is_panic(exc):
                raise TokenizerError(f"the uploaded tokenizer crashed on this text (the tokenizers library "
                                     f"panicked: {str(exc)[:160]})") from None
            if not isinstance(exc, Exception):
                raise
            # e.g. a WordLevel model whose unk_token is not in its vocabulary: look the words up
            return guarded(lambda: self._words(text), "the uploaded tokenizer cannot split this text")
        return [(text[a:b] or piece, None) if i == self.unk else (piece, i)
                for piece, i, (a, b) in zip(enc.tokens, enc.ids, enc.offsets)]

    def _words(self, text: str) -> list[tuple[str, int | None]]:
        tok = self.tokenizer
        norm = tok.normalizer.normalize_str(text) if tok.normalizer is not None else text
        words = tok.pre_tokenizer.pre_tokenize_str(norm) if tok.pre_tokenizer is not None else [(norm, None)]
        return [(w, self.stoi.get(w)) for w, _ in words if w]


# ------------------------------------------------------------------------------------------- which file
NAMED = ("tokenizer.json", "vocab.json")  # read as the vocabulary whatever else is there; errors are reported
VOCAB_SLACK = 1_024  # a vocabulary may have this many more tokens than its model's largest weight matrix has rows


def token_count(obj: object, depth: int = 0) -> int:
    """How many tokens a vocabulary saved as `obj` would hold, counted without building anything (0: none)."""
    if is_tokenizer_json(obj):
        model = obj["model"]
        assert isinstance(model, Mapping)  # is_tokenizer_json(obj)
        vocab, added = model["vocab"], obj.get("added_tokens")
        return (len(vocab) if isinstance(vocab, (list, Mapping)) else 0) + (len(added) if isinstance(added, list)
                                                                           else 0)
    if isinstance(obj, (list, tuple)):
        return len(obj)
    if not isinstance(obj, Mapping):
        return 0
    if _is_flat(obj) or depth > 0:
        return len(obj)
    return max((token_count(v, depth + 1) for v in obj.values()), default=0)


def _too_large(obj: object, rows: int) -> int:
    """The token count of obj when it exceeds rows + VOCAB_SLACK, else 0."""
    n = token_count(obj)
    return n if n > rows + VOCAB_SLACK else 0


def find_vocabulary(files: Mapping[str, object], extras: Mapping[str, object], sizes: set[int],
                    weights_name: str = "the weights file") -> tuple[Vocab, str] | None:
    """The vocabulary among parsed JSON files (name -> value) and a checkpoint's plain entries (`extras`).

    tokenizer.json, else vocab.json (a ValueError naming the file when it is not a vocabulary); else the one other
    file, then the one checkpoint entry, that reads as a vocabulary with as many tokens as a 2-D tensor has rows
    (`sizes`). Returns (vocab, where it was read) or None. Several such candidates: ValueError naming them.
    A vocabulary with more than VOCAB_SLACK tokens beyond the largest row count is refused (a named file) or passed
    over (a candidate) before anything is built from it."""
    rows = max(sizes, default=0)
    lower = {name.lower(): name for name in files}
    for wanted in NAMED:
        if wanted in lower:
            name = lower[wanted]
            if n := _too_large(files[name], rows):
                raise ValueError(
                    f"'{name}' has {n:,} tokens, but the largest weight matrix of {weights_name} has {rows:,} rows: a "
                    f"vocabulary may have at most {VOCAB_SLACK:,} more tokens than its model's embedding has rows. "
                    "Refused before it was read.")
            try:
                vocab = read_vocabulary(files[name])
            except ValueError as exc:
                raise ValueError(f"'{name}' is not a valid vocabulary: {exc}") from None
            return vocab, f"{name} ({vocab.source})"
    for pool, where in ((files, "{}"), (extras, f"the '{{}}' entry of {weights_name}")):
        found = []
        for key, value in pool.items():
            if _too_large(value, rows):
                continue
            try:
                vocab = read_vocabulary(value)
            except ValueError:
                continue
            if len(vocab) in sizes:
                found.append((vocab, where.format(key) + f" ({vocab.source})"))
        if len(found) > 1:
            raise ValueError(f"several vocabularies fit these weights: {'; '.join(w for _, w in found)}. Keep one, "
                             "or name it vocab.json.")
        if found:
            return found[0]
    return None
