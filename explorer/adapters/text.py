"""Text -> token ids, with the notes a view should show (truncation, unknown words, nothing to read).

The pieces the adapters' `encode` is made of (explorer.adapters: each model family decides its input convention
once): explorer vocabularies (explorer.data.vocab.Vocab: words, characters or a tokenizer.json's pieces, with the
special tokens wherever the vocabulary holds them; `encode_vocab`, `VocabText`), Hugging Face tokenizers with their
special tokens (`encode_hf`), and the empty-text rules (`no_text` for the explorer's vocabularies, `no_typed_text`
for a tokenizer).

A tokenizer reads the text exactly as typed (`tokenizer(text)`: its own normalizer does what it does; newlines,
tabs, zero-width joiners, combining marks and curly quotes reach it). The explorer's word and character
vocabularies read it through `explorer.data.vocab.clean_text`, and the note says what that changed. What the app
itself changes before any model reads it (the token budget) is said in a note too.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Iterable, Protocol, Sequence, TypeVar, Unpack, cast

import numpy as np

from explorer.text.token_text import TokenText, readable
from explorer.data.vocab import Vocab, clean_text, normalisation_changes, tokenize_words
from explorer.runtime import model_state
from explorer.runtime.errors import Caution

if TYPE_CHECKING:
    from explorer.runtime.hf_runtime import Encoding, Tokenizer, TokenizerOptions

DEFAULT_MAX_TOKENS = 512
TYPE_A_SENTENCE = "Type a sentence to see the model's internals."
NOTHING_TO_READ = ("The text has no characters the model can read (only control, format or combining characters): "
                   "type a sentence.")
NOTHING_TOKENIZED = ("The model's tokenizer reads no token in this text (its own normalisation removes every character "
                     "typed): type a sentence.")


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
    blank: bool = False  # the text gives the model nothing to read (empty, or removed by the model's reading of it)

    def __len__(self) -> int:
        return len(self.ids)


def model_max_tokens(loaded: object) -> int:
    """The longest input the model accepts (positions), or DEFAULT_MAX_TOKENS when unbounded."""
    cfg = getattr(loaded, "config", None)
    for name in ("max_position_embeddings", "n_positions", "block_size"):
        value = getattr(cfg, name, None) if cfg is not None else None
        if isinstance(value, int) and value > 0:
            return value
    block = (getattr(loaded, "meta", {}) or {}).get("config", {}).get("block_size")
    return int(block) if isinstance(block, int) and block > 0 else DEFAULT_MAX_TOKENS


def token_limit(loaded: object, max_tokens: int | None) -> tuple[int, str]:
    """The number of tokens to read (a view's `max_tokens`, at most the model's) and whose limit that is."""
    return limit_of(max_tokens, model_max_tokens(loaded))


def limit_of(max_tokens: int | None, own: int) -> tuple[int, str]:
    """(the tokens to read, whose limit that is): a view's `max_tokens` when below the model's `own`, else `own`."""
    if max_tokens is not None and max_tokens < own:  # a cap may say why (explorer.runtime.budget.TokenCap)
        return max_tokens, getattr(max_tokens, "why", "this view's limit")
    return own, "the model's limit"


_UNITS = {"char": "character", "subword": "piece"}
NO_BOS = ("The vocabulary has no beginning-of-sentence token (<bos>, <s>, <sos> or [CLS]), so the text is fed as "
          "is: its first {unit} is read with no context before it.")


def _unit(vocab: Vocab) -> str:
    return _UNITS.get(vocab.level, "word")


UNKNOWN_MARK = "→"


def unknown_label(typed: str, unk: str) -> str:
    """The label of a token the model reads as its unknown token: what was typed, an arrow, what the model reads
    ("owl→<unk>"), so that a chart never shows a bare row of unknown tokens."""
    return f"{typed}{UNKNOWN_MARK}{unk}"


def encode_vocab(vocab: Vocab, text: str, max_tokens: int = DEFAULT_MAX_TOKENS, bos: bool = False,
                 whose: str = "the model's limit", display: TokenText | None = None) -> Encoded:
    """Text -> the ids a vocabulary's model reads (`vocab.pieces`: words, characters or a tokenizer's pieces), with
    the beginning-of-sentence token first when `bos`. Unknown pieces become the vocabulary's unknown token, or are
    left out and listed in a note when it has none. Tokens are shown as `display` (default: the vocabulary's
    TokenText) writes them."""
    pieces = vocab.pieces(text)
    unit = _unit(vocab)
    notes: list[str] = []
    if vocab.splitter is None:  # the explorer's own word/character reading: say what its normalisation changed
        changed = normalisation_changes(text)
        if changed:
            notes.append("This vocabulary reads the text normalised: " + "; ".join(changed) + ".")
    truncated = False
    budget = max_tokens - (1 if bos else 0)
    if len(pieces) > budget:
        notes.append(Caution(f"The text has {len(pieces):,} tokens; only the first {budget:,} are used ({whose})."))
        pieces = pieces[:budget]
        truncated = True
    unknown = [p for p, i in pieces if i is None]
    unk = vocab.unk_id
    if unknown:
        shown = dict.fromkeys(repr(p) if unit == "character" else p for p in unknown[:8])
        sample = ", ".join(shown)
        if unk is not None:
            notes.append(Caution(f"{len(unknown)} {unit}(s) are not in the model's vocabulary and are shown as "
                                 f"{vocab.itos[unk]}: {sample}. The model reads {vocab.itos[unk]} there; the charts "
                                 f"mark them as {unknown_label(next(iter(shown)), vocab.itos[unk])}."))
        else:
            notes.append(Caution(f"{len(unknown)} {unit}(s) are not in the model's vocabulary, which has no "
                                 f"unknown-token entry, so they are left out: {sample}."))
    kept = [(p, i) for p, i in pieces if i is not None or unk is not None]
    ids = [i if i is not None else cast(int, unk) for _, i in kept]  # kept: a known id, or unk exists
    if bos and vocab.bos_id is not None:
        ids = [vocab.bos_id, *ids]
        kept = [("", vocab.bos_id), *kept]
    texts = (display or TokenText.of_vocab(vocab)).texts(ids)
    tokens = [t if i is not None else unknown_label(readable(p), vocab.itos[cast(int, unk)])
              for t, (p, i) in zip(texts, kept)]
    special = [i in vocab.special_ids and i != unk for i in ids]
    if bos and vocab.bos_id is not None:
        special[0] = True
    return Encoded(tuple(ids), tuple(tokens), tuple(notes), truncated, len(unknown), tuple(special))


def unknown_word_id(adapter: object) -> int | None:
    """The id of a word-level vocabulary's unknown-word token (`<unk>`: every word the vocabulary lacks, a class the
    model was trained to predict), where it is a token of its own (not also the end, start or padding token); None
    for a subword tokenizer (its unknown piece is all but never predicted) and a vocabulary without one. Generation
    and next-token lists leave it out unless the user asks to see it."""
    vocab = getattr(adapter, "vocab", None)
    unk = getattr(vocab, "unk_id", None) if isinstance(vocab, Vocab) and vocab.level != "subword" else None
    ends = {getattr(adapter, "bos_id", None), getattr(adapter, "pad_id", None), *getattr(adapter, "eos_ids", ())}
    return None if unk is None or unk in ends else int(unk)


S = TypeVar("S", bound=Any)  # an np.ndarray or a torch.Tensor


def without_unknown(scores: S, unknown: int | None) -> S:
    """`scores` (..., V), numpy or torch, for ranking words: a copy with entry `unknown` of the last axis at −∞
    (`scores` itself when there is no unknown-word token). The caller's numbers stay the model's own."""
    if unknown is None:
        return scores
    out = scores.copy() if isinstance(scores, np.ndarray) else scores.clone()
    out[..., unknown] = float("-inf")
    return out


def input_convention(vocab: Vocab, feeds_bos: bool = True) -> str:
    """How text is fed with this vocabulary, in words (the adapters' describe() rows)."""
    unit = _unit(vocab)
    split = "the tokenizer's pieces of the text" if vocab.splitter is not None else f"the {unit}s of the text" + (
        " (lowercased)" if vocab.lower else "")
    first = f"{vocab.itos[vocab.bos_id]} + " if feeds_bos and vocab.bos_id is not None else ""
    as_is = ", as they are: no beginning-of-sentence token" if feeds_bos and vocab.bos_id is None else ""
    unknown = (f"unknown {unit}s -> {vocab.itos[vocab.unk_id]}" if vocab.unk_id is not None
               else f"unknown {unit}s are left out and listed (no unknown-token entry)")
    return f"{first}{split}{as_is}; {unknown}"


def encode_hf(tokenizer: Tokenizer, text: str, max_tokens: int, text_pair: str | None = None, target: bool = False,
              whose: str = "the model's limit", display: TokenText | None = None) -> Encoded:
    """Hugging Face encoding with special tokens of the text as typed (`tokenizer(text)`, nothing of ours before it);
    counts [UNK] pieces and truncates to `max_tokens`, saying so. An Encoded with no ids and `blank` set when the
    tokenizer reads no token of the text (its normalizer removed it all).

    text_pair: a second segment (token type 1); target: encode as a decoder target (`text_target=`); display: how
    tokens are shown (default: the tokenizer's TokenText, built anew: adapters pass theirs)."""
    def call(**extra: Unpack[TokenizerOptions]) -> Encoding:
        kwargs: TokenizerOptions = {"add_special_tokens": True, **extra}
        if target:
            try:
                return tokenizer(text_target=text, **kwargs)
            except (TypeError, ValueError):
                pass
        return tokenizer(text, text_pair, **kwargs) if text_pair else tokenizer(text, **kwargs)

    full = call()
    ids = list(full["input_ids"])
    notes: list[str] = []
    truncated = False
    if len(ids) > max_tokens:
        notes.append(Caution(f"The text has {len(ids):,} tokens; only the first {max_tokens:,} are used ({whose})."))
        full = call(truncation=True, max_length=max_tokens)
        ids = list(full["input_ids"])
        truncated = True
    segments = tuple(int(x) for x in full.get("token_type_ids") or ()) if text_pair else ()
    tokens = (display or TokenText.of_tokenizer(tokenizer)).texts(ids)
    unk = getattr(tokenizer, "unk_token_id", None)
    n_unknown = sum(1 for i in ids if unk is not None and i == unk)
    if n_unknown and unk is not None:
        tokens = _typed_unknowns(tokenizer, text, ids, [str(t) for t in tokens], unk) if not text_pair and \
            not target else tokens
        typed = [t for t in tokens if UNKNOWN_MARK in str(t)]
        notes.append(Caution(f"{n_unknown} piece(s) are unknown to the tokenizer and shown as {tokenizer.unk_token}"
                             + (f": the charts mark them as {', '.join(dict.fromkeys(typed[:8]))}." if typed else ".")))
    special_ids = set(getattr(tokenizer, "all_special_ids", []) or [])
    special = tuple(i in special_ids and i != unk for i in ids)
    if all(special):  # only the tokens the tokenizer adds to every text: nothing of the text was read
        return Encoded((), (), (*notes, NOTHING_TOKENIZED), blank=True)
    return Encoded(tuple(ids), tuple(str(t) for t in tokens), tuple(notes), truncated, n_unknown, special, segments)


def _typed_unknowns(tokenizer: Tokenizer, text: str, ids: list[int], tokens: list[str], unk: int) -> list[str]:
    """The tokens with each unknown piece labelled by the text it covers (fast tokenizers' offsets), else as
    they are."""
    try:
        offsets = tokenizer(text, add_special_tokens=True, return_offsets_mapping=True)["offset_mapping"]
    except (NotImplementedError, ValueError, TypeError, KeyError):
        return tokens
    return [unknown_label(readable(text[a:b]), t) if i == unk and b > a else t
            for i, t, (a, b) in zip(ids, tokens, list(offsets)[:len(ids)])]


def no_text(text: str) -> Encoded | None:
    """For the explorer's vocabularies (which read `clean_text(text)`): an empty Encoded with the reason when `text`
    gives nothing to read (empty, only whitespace, control or combining characters), else None."""
    if not clean_text(text or "").strip():
        return Encoded((), (), (TYPE_A_SENTENCE,), blank=True)
    if not tokenize_words(text):  # only combining marks, variation selectors, ...: nothing a word can start with
        return Encoded((), (), (NOTHING_TO_READ,), blank=True)
    return None


def no_typed_text(text: str) -> Encoded | None:
    """For a tokenizer, which reads the text as typed: an empty Encoded when nothing was typed, else None (a lone
    newline, a space or a combining mark is text a tokenizer reads)."""
    return Encoded((), (), (TYPE_A_SENTENCE,), blank=True) if not text else None


class VocabText:
    """Text convention of models read with an explorer Vocab (a mixin for adapters with `self.vocab`, `self.loaded`):
    the vocabulary's pieces (words and punctuation, lowercased for the built-in models; characters for a
    character-level vocabulary; a tokenizer.json's pieces), the beginning-of-sentence token first when the
    vocabulary has one and `feeds_bos` is set; when it has none, the text as is, with a note saying so."""

    vocab: Vocab | None  # None: the model came without one (it cannot read text)
    loaded: object  # what the adapter was made from: read for the model's own token limit (model_max_tokens)
    feeds_bos = True

    @property
    def display(self) -> TokenText:
        """How this vocabulary's tokens are shown (built once per adapter). An adapter without a vocabulary has
        none: AttributeError, so that getattr(adapter, "display", None) reads None."""
        vocab = self.vocab
        if vocab is None:
            raise AttributeError(f"{type(self).__name__} has no vocabulary to show tokens with")
        return model_state.kept(self, "display", len(vocab), lambda: TokenText.of_vocab(vocab), most=1)

    def encode(self, text: str, side: str = "input", pair: str = "", max_tokens: int | None = None) -> Encoded:
        empty = no_text(text)
        if empty is not None:
            return empty
        limit, whose = token_limit(self.loaded, max_tokens)
        vocab = self.vocab
        assert vocab is not None, f"{type(self).__name__} has no vocabulary to read text with"
        bos = self.feeds_bos and vocab.bos_id is not None
        enc = encode_vocab(vocab, text, limit, bos=bos, whose=whose, display=self.display)
        if self.feeds_bos and not bos:
            enc = replace(enc, notes=(NO_BOS.format(unit=_unit(vocab)), *enc.notes))
        return enc

    def token_strings(self, ids: Iterable[int]) -> list[str]:
        """Each id shown on its own (explorer.text.token_text)."""
        return [self.display.text(i) for i in ids]

    def sequence_strings(self, ids: Iterable[int]) -> list[str]:
        """The ids of one sequence, shown as in a sentence."""
        return self.display.texts(list(ids))

    def detokenize(self, ids: Iterable[int]) -> str:
        """Generated ids as text: characters joined as they are, words and pieces with spaces."""
        vocab = self.vocab
        assert vocab is not None, f"{type(self).__name__} has no vocabulary to read ids with"
        itos = vocab.itos
        words = [itos[i] if 0 <= i < len(itos) else f"#{i}" for i in ids]
        return ("" if vocab.level == "char" else " ").join(words)


class Detokenizes(Protocol):
    """An adapter's `detokenize` (explorer.adapters.protocols.Reads has it)."""

    def detokenize(self, ids: Sequence[int]) -> str: ...


def shown_text(adapter: Detokenizes, ids: Sequence[int]) -> str:
    """Generated ids as the page shows their text: the adapter's `detokenize` (the tokenizer's decoding), with bytes
    that form no whole character (a text that ends inside one) as the bytes ‹E3 81›, the way a token on its own
    shows them, never "�"."""
    text = adapter.detokenize(ids)
    display = getattr(adapter, "display", None)
    return str(display.decoded([int(i) for i in ids], text)) if display is not None else text
