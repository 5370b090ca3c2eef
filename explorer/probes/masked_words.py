"""Masked-word prediction (BERT's pre-training task): the most probable fillers of each [MASK], with the model's own
probabilities p(w | context) = softmax(z)_w, z the model's logits at the mask position.

The text is fed with the model's own rules (adapter.encode); "[MASK]" or "<mask>" typed anywhere becomes the model's
mask token. A word of the text can be masked by its index (`mask_word`, the view's "click a word to mask it");
a text without a mask gets its last word masked, with a note. Bad text (empty, huge, emoji) gives a note; a model that
is not a masked LM, or a run it cannot do, raises MaskedWordsError.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from explorer.adapters.base import Unsupported
from explorer.adapters.task_head import not_a_language_model
from explorer.adapters.protocols import Loaded, Reads
from explorer.adapters.text import unknown_word_id, without_unknown
from explorer.runtime import budget
from explorer.runtime.errors import ViewError

MASK_SPELLINGS = re.compile(r"\[\s*mask\s*\]|<\s*mask\s*>", re.IGNORECASE)
WORDS = re.compile(MASK_SPELLINGS.pattern + r"|\w+|[^\w\s]", re.IGNORECASE)  # masks, words, single symbols
MASK = "[MASK]"
MAX_K = 30
MAX_MASKS = 8
MAX_WORDS = 8


@dataclass(frozen=True)
class MaskedTrace:
    """What a masked LM puts at each mask of one text.

    text: the text as fed (a picked word replaced by [MASK]); masked: the word that was replaced ("" when the
    masks were typed); tokens (T,): as fed, each mask shown as [MASK]; special (T,); positions (M,): token index
    of each mask; top_ids, top_tokens, probs, logits (M, k): the k most probable tokens at each mask, best first,
    their probabilities and logits z; lse (M,): log Σ_v e^{z_v}; entropy (M,): of the whole distribution, in nats;
    words (W,): the words compared, pieces (W,): the model's token for each ("" when the word is not one token),
    word_probs (M, W), word_ranks (M, W): probability and rank (1 = most probable; 0 when not one token);
    vocab_size: V; notes: messages for the user (no masks read: why, and the rest is empty).
    """

    model_id: str
    text: str
    masked: str
    tokens: tuple[str, ...]
    special: tuple[bool, ...]
    positions: tuple[int, ...]
    top_ids: np.ndarray
    top_tokens: tuple[tuple[str, ...], ...]
    probs: np.ndarray
    logits: np.ndarray
    lse: np.ndarray
    entropy: np.ndarray
    words: tuple[str, ...] = ()
    pieces: tuple[str, ...] = ()
    word_probs: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    word_ranks: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int64))
    vocab_size: int = 0
    notes: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.positions)


def word_spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, word) of each word of `text`: a typed mask, a run of letters/digits, or one other symbol."""
    return [(m.start(), m.end(), m.group(0)) for m in WORDS.finditer(text or "")]


def words_of(text: str) -> tuple[str, ...]:
    """The words of `text` in order (word_spans), as the view lists them for masking."""
    return tuple(w for _, _, w in word_spans(text))


def mask_word(text: str, index: int) -> tuple[str, str]:
    """(`text` with word `index` replaced by [MASK], the word replaced); the text unchanged and "" when there is
    no such word."""
    spans = word_spans(text)
    if not 0 <= index < len(spans):
        return text, ""
    start, end, word = spans[index]
    return text[:start] + MASK + text[end:], word


class MaskedWordsError(ViewError, ValueError):
    """No fillers can be read: the model is not a masked LM, or it could not run on this input."""

    alert = "warning"


def _empty(model_id: str, text: str, notes: tuple[str, ...] = (), tokens: tuple[str, ...] = (),
           special: tuple[bool, ...] = (), masked: str = "") -> MaskedTrace:
    """A trace with no mask read: its notes say why."""
    z = np.zeros((0, 0))
    return MaskedTrace(model_id=model_id, text=text, masked=masked, tokens=tokens, special=special, positions=(),
                       top_ids=np.zeros((0, 0), dtype=np.int64), top_tokens=(), probs=z, logits=z, lse=np.zeros(0),
                       entropy=np.zeros(0), notes=tuple(dict.fromkeys(notes)))


def mask_token(loaded: Loaded) -> tuple[int | None, str]:
    """(id, string) of the model's mask token: the built-in's <mask>, a Hugging Face tokenizer's mask_token."""
    adapter = loaded.adapter
    own = getattr(adapter, "mask_id", None)  # the built-in masked LM's (explorer.adapters.masked_lm)
    if own is not None:
        return int(own), str(getattr(adapter, "mask_token", ""))
    tok = getattr(adapter, "tokenizer", None)
    mid = getattr(tok, "mask_token_id", None) if tok is not None else None
    return (int(mid), str(getattr(tok, "mask_token", ""))) if isinstance(mid, int) else (None, "")


def cannot_fill(loaded: Loaded) -> str:
    """Why `loaded` cannot fill in masks ("" when it can): it must be a bidirectional transformer with a mask token
    and a masked-LM head over its vocabulary."""
    mid, adapter = str(getattr(loaded, "id", "model")), loaded.adapter
    if task := not_a_language_model(loaded, "fills in no [MASK]: its head decides labels, not words"):
        return task
    if loaded.model is None or not adapter.streams:
        what = "a bare state dict" if loaded.model is None else f"not a transformer (family: {loaded.family})"
        return (f"{mid} is {what}. Masked-word prediction needs a masked language model: builtin:masked-lm or a "
                "Hugging Face *ForMaskedLM (BERT, RoBERTa, DistilBERT, ALBERT, …).")
    if adapter.is_encoder_decoder:
        return (f"{mid} is an encoder–decoder: it fills gaps by generating text with its decoder (T5's sentinels, "
                "BART's denoising), not with a masked-LM head. Pick builtin:masked-lm or a *ForMaskedLM model.")
    if adapter.causal:
        return (f"{mid} is a causal language model: it predicts the next token from the words before it, not a "
                "masked word from both sides. Pick builtin:masked-lm or a *ForMaskedLM model.")
    if mask_token(loaded)[0] is None:
        return f"{mid} has no mask token in its vocabulary, so it cannot be asked to fill one in."
    if not getattr(adapter, "has_head", False) or (loaded.meta or {}).get("task", "masked-lm") != "masked-lm":
        return (f"{mid} has no masked-LM head: it was saved as an encoder only (as MiniLM's sentence-embedding "
                "checkpoint is), so it gives hidden states but no probabilities over its vocabulary. Pick "
                "builtin:masked-lm or a model saved as *ForMaskedLM.")
    return ""


def _single_ids(adapter: Reads, word: str) -> list[int]:
    """The ids that are `word` as one token of this model: the word alone, and after a space (byte-level BPE has
    one token for "are" at the start and another, "Ġare", after a space); none when it is several tokens."""
    found: list[int] = []
    for variant in (word, " " + word):
        enc = adapter.encode(variant)
        ids = [i for i, s in zip(enc.ids, enc.special) if not s]
        if len(ids) == 1 and not enc.n_unknown and ids[0] not in found:
            found.append(int(ids[0]))
    return found


def _compare_words(words: str, masked: str) -> list[str]:
    """The words to compare (comma- or space-separated), the hidden word first when one was masked."""
    out = [masked] if masked.strip() and not MASK_SPELLINGS.fullmatch(masked) else []
    for w in re.split(r"[,\s]+", words or ""):
        if w and w not in out:
            out.append(w)
    return out


def _auto_mask(loaded: Loaded, text: str, mask_id: int, mask_str: str) -> tuple[str, str, str]:
    """A text without a mask gets its last word masked (the last one the model still reads when the text is cut to
    its length): (text, word masked, note)."""
    spans = word_spans(text)
    words = [i for i, (_, _, w) in enumerate(spans) if re.match(r"\w", w)] or list(range(len(spans)))
    j = len(words) - 1
    while j >= 0:
        candidate, word = mask_word(text, words[j])
        if mask_id in loaded.adapter.encode(MASK_SPELLINGS.sub(mask_str, candidate)).ids or j == 0:
            return candidate, word, (f"The text has no {MASK}, so its word “{word}” is masked. Type {MASK} "
                                     "where a word should be, or pick the word to mask.")
        j //= 2
    return text, "", ""


def masked_fill(loaded: Loaded, text: str, k: int = 10, words: str = "", mask_index: int = -1,
                ids: tuple[tuple[int, ...], ...] = ()) -> MaskedTrace:
    """The k most probable fillers of every [MASK] in `text` (at most MAX_MASKS), from the model's own logits.

    words: words to compare at each mask (e.g. "is, are"): their probability and rank. mask_index >= 0: replace
    word mask_index of the text (word_spans) by [MASK] first. ids: the tokens to show at each mask instead of the
    most probable ones (another model's top tokens, to compare the two; one tuple per mask, ids of this model's
    vocabulary). Bad text gives notes (and no masks read); raises MaskedWordsError (class docstring)."""
    mid = str(getattr(loaded, "id", "model"))
    text = text or ""
    reason = cannot_fill(loaded)
    if reason:
        raise MaskedWordsError(reason)
    adapter = loaded.adapter
    k = int(min(max(int(k), 1), MAX_K))
    first = adapter.encode(text)
    if not first.ids:  # nothing to read (empty, only control or combining characters): the adapter says why
        return _empty(mid, text, first.notes)
    notes: list[str] = []
    masked = ""
    if mask_index >= 0:
        text, masked = mask_word(text, mask_index)
        if not masked:
            notes.append(f"The text has no word {mask_index}: nothing more was masked.")
    mask_id, mask_str = mask_token(loaded)
    assert mask_id is not None  # cannot_fill refused a model without one
    if not MASK_SPELLINGS.search(text):
        text, masked, note = _auto_mask(loaded, text, mask_id, mask_str)
        notes += [note] if note else []
    enc = adapter.encode(MASK_SPELLINGS.sub(mask_str, text),
                         max_tokens=budget.cap_tokens(loaded.model, adapter.max_tokens))  # one priced forward
    notes = list(enc.notes) + notes
    if not enc.ids:
        return _empty(mid, text, tuple(notes), masked=masked)
    tokens = tuple(MASK if i == mask_id else t for i, t in zip(enc.ids, enc.tokens))
    special = tuple(bool(s) for s in enc.special)
    positions = [t for t, i in enumerate(enc.ids) if i == mask_id]
    if not positions:
        notes.append(f"No {MASK} is left in the part of the text the model reads (its first {len(enc.ids):,} "
                     "tokens): put one earlier.")
        return _empty(mid, text, tuple(notes), tokens, special, masked)
    if len(positions) > MAX_MASKS:
        notes.append(f"The text has {len(positions)} masks; the first {MAX_MASKS} are shown.")
        positions = positions[:MAX_MASKS]
    try:
        rec = adapter.run(enc, names=("logits",))
    except Unsupported as exc:
        raise MaskedWordsError(str(exc)) from None
    except (RuntimeError, ValueError, IndexError) as exc:
        raise MaskedWordsError(f"{mid} could not run on this input: {type(exc).__name__}: {str(exc)[:200]}") from None
    z = rec["logits"][positions].astype(np.float64)                          # (M, V)
    top = z.max(axis=1, keepdims=True)
    lse = (top + np.log(np.exp(z - top).sum(axis=1, keepdims=True)))[:, 0]  # (M,)
    p = np.exp(z - lse[:, None])                                            # (M, V)
    unknown = unknown_word_id(adapter)  # <unk> is not a word: left out of the fillers, its probability said
    k = min(k, p.shape[1] - (unknown is not None))
    order = np.argsort(-without_unknown(p, unknown), axis=1, kind="stable")[:, :k]  # (M, k)
    if unknown is not None and (p[:, unknown] >= p[np.arange(len(positions)), order[:, -1]]).any():  # it had a place
        notes.append(f"{adapter.token_strings([unknown])[0]} (any word outside the model's vocabulary) is left out "
                     "of the fillers: it is not a word. Its probability, unknown word: "
                     + ", ".join(f"{float(p[m, unknown]):.3f}" + (f" at mask {m + 1}" if len(positions) > 1 else "")
                                 for m in range(len(positions))) + ".")
    if ids:
        if len(ids) != len(positions) or len({len(r) for r in ids}) != 1 or \
                not all(0 <= int(i) < p.shape[1] for r in ids for i in r):
            raise MaskedWordsError(f"The tokens to compare are not {len(positions)} rows of ids of {mid}'s "
                                   f"{p.shape[1]:,} tokens.")
        order = np.array(ids, dtype=np.int64)                               # (M, k) as given
    rows = np.arange(len(positions))[:, None]
    entropy = -(p * np.log(np.where(p > 0, p, 1.0))).sum(axis=1)
    compare = _compare_words(words, masked)[:MAX_WORDS]
    pieces, word_p, word_r = [], np.full((len(positions), len(compare)), np.nan), \
        np.zeros((len(positions), len(compare)), dtype=np.int64)
    for j, w in enumerate(compare):
        word_ids = _single_ids(adapter, w)
        if not word_ids:
            pieces.append("")
            notes.append(f"“{w}” is not one token of {mid}'s vocabulary, so it has no single probability at a "
                         "mask.")
            continue
        best = np.array(word_ids)[np.argmax(p[:, word_ids], axis=1)]        # (M,) the likelier spelling per mask
        word_p[:, j] = p[np.arange(len(positions)), best]
        word_r[:, j] = 1 + (p > word_p[:, j:j + 1]).sum(axis=1)
        pieces.append(adapter.token_strings([int(best[0])])[0])
    return MaskedTrace(
        model_id=mid, text=text, masked=masked, tokens=tokens, special=special, positions=tuple(positions),
        top_ids=order, top_tokens=tuple(tuple(adapter.token_strings([int(i) for i in row])) for row in order),
        probs=p[rows, order], logits=z[rows, order], lse=lse, entropy=entropy, words=tuple(compare),
        pieces=tuple(pieces), word_probs=word_p, word_ranks=word_r, vocab_size=int(p.shape[1]),
        notes=tuple(dict.fromkeys(notes)))
