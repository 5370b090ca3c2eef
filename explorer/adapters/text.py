"""Text -> token ids, with the notes a view should show (truncation, unknown words, nothing to read).

The pieces the adapters' `encode` is made of (explorer.adapters: each model family decides its input convention
once): word-level vocabularies (explorer.data.vocab: tokenize_words + Vocab, `VocabText`), Hugging Face tokenizers
with their special tokens (`encode_hf`), and the empty-text rule every view shares (`no_text`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from explorer.data.vocab import Vocab, clean_text, tokenize_words

DEFAULT_MAX_TOKENS = 512
NOTHING_TO_READ = ("The text has no characters the model can read (only control, format or combining characters): "
                   "type a sentence.")


@dataclass(frozen=True)
class Encoded:
    """ids: token ids (T,); tokens: their strings (T,); notes: messages for the user (may be empty)."""

    ids: tuple[int, ...]
    tokens: tuple[str, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)
    truncated: bool = False
    n_unknown: int = 0
    special: tuple[bool, ...] = field(default_factory=tuple)  # True where the token is a special token
    segments: tuple[int, ...] = ()  # sentence A/B of a pair (token type ids), when the tokenizer gives them

    def __len__(self) -> int:
        return len(self.ids)


def model_max_tokens(loaded: Any) -> int:
    """The longest input the model accepts (positions), or DEFAULT_MAX_TOKENS when unbounded."""
    cfg = getattr(loaded, "config", None)
    for name in ("max_position_embeddings", "n_positions", "block_size"):
        value = getattr(cfg, name, None) if cfg is not None else None
        if isinstance(value, int) and value > 0:
            return value
    block = (getattr(loaded, "meta", {}) or {}).get("config", {}).get("block_size")
    return int(block) if isinstance(block, int) and block > 0 else DEFAULT_MAX_TOKENS


def encode_words(vocab: Vocab, text: str, max_tokens: int = DEFAULT_MAX_TOKENS, bos: bool = False) -> Encoded:
    """Word-level encoding with a built-in Vocab: lowercased words and punctuation, unknown -> <unk>."""
    words = tokenize_words(text)
    notes: list[str] = []
    truncated = False
    budget = max_tokens - (1 if bos else 0)
    if len(words) > budget:
        notes.append(f"The text has {len(words):,} tokens; only the first {budget:,} are used (the model's limit).")
        words = words[:budget]
        truncated = True
    ids = vocab.encode(words)
    unknown = [w for w, i in zip(words, ids) if i == vocab.unk_id]
    if unknown:
        sample = ", ".join(dict.fromkeys(unknown[:8]))
        notes.append(f"{len(unknown)} word(s) are not in the model's vocabulary and are shown as <unk>: {sample}.")
    tokens = [w if i != vocab.unk_id else "<unk>" for w, i in zip(words, ids)]
    special = [False] * len(ids)
    if bos:
        ids, tokens, special = [vocab.bos_id, *ids], ["<bos>", *tokens], [True, *special]
    return Encoded(tuple(ids), tuple(tokens), tuple(notes), truncated, len(unknown), tuple(special))


def encode_hf(tokenizer: Any, text: str, max_tokens: int, text_pair: str | None = None, target: bool = False) -> Encoded:
    """Hugging Face encoding with special tokens; counts [UNK] pieces and truncates to `max_tokens`.

    text_pair: a second segment (token type 1); target: encode as a decoder target (`text_target=`)."""
    text = clean_text(text)
    kwargs: dict[str, Any] = {"add_special_tokens": True}

    def call(**extra: Any) -> Any:
        if target:
            try:
                return tokenizer(text_target=text, **kwargs, **extra)
            except (TypeError, ValueError):
                pass
        return tokenizer(text, text_pair, **kwargs, **extra) if text_pair else tokenizer(text, **kwargs, **extra)

    full = call()
    ids = list(full["input_ids"])
    notes: list[str] = []
    truncated = False
    if len(ids) > max_tokens:
        notes.append(f"The text has {len(ids):,} tokens; only the first {max_tokens:,} are used (the model's limit).")
        full = call(truncation=True, max_length=max_tokens)
        ids = list(full["input_ids"])
        truncated = True
    segments = tuple(int(x) for x in full.get("token_type_ids") or ()) if text_pair else ()
    tokens = tokenizer.convert_ids_to_tokens(ids)
    unk = getattr(tokenizer, "unk_token_id", None)
    n_unknown = sum(1 for i in ids if unk is not None and i == unk)
    if n_unknown:
        notes.append(f"{n_unknown} piece(s) are unknown to the tokenizer and shown as {tokenizer.unk_token}.")
    special_ids = set(getattr(tokenizer, "all_special_ids", []) or [])
    special = tuple(i in special_ids and i != unk for i in ids)
    return Encoded(tuple(ids), tuple(str(t) for t in tokens), tuple(notes), truncated, n_unknown, special, segments)


def no_text(text: str) -> Encoded | None:
    """An empty Encoded with the reason when `text` gives nothing to read (empty, only control or combining
    characters), else None."""
    if not clean_text(text or "").strip():
        return Encoded((), (), ("Type a sentence to see the model's internals.",))
    if not tokenize_words(text):  # only combining marks, variation selectors, ...: nothing a word can start with
        return Encoded((), (), (NOTHING_TO_READ,))
    return None


class VocabText:
    """Text convention of the built-in word-level models (a mixin for adapters with `self.vocab`, `self.loaded`):
    lowercased words and punctuation, `<bos>` first when the vocabulary has it and `bos` is set."""

    vocab: Vocab
    loaded: Any
    feeds_bos = True

    def encode(self, text: str, side: str = "input", pair: str = "", max_tokens: int | None = None) -> Encoded:
        empty = no_text(text)
        if empty is not None:
            return empty
        limit = min(max_tokens or model_max_tokens(self.loaded), model_max_tokens(self.loaded))
        return encode_words(self.vocab, text, limit, bos=self.feeds_bos and "<bos>" in self.vocab)

    def token_strings(self, ids: Any) -> list[str]:
        itos = self.vocab.itos
        return [itos[i] if 0 <= i < len(itos) else f"#{i}" for i in ids]
