"""The example sentences a model can read: explorer.data.examples's sentences of the model's own language (or of
another it reads), each checked with the model's own `encode` (computed once per loaded model by
`Adapter.examples(purpose)`); the self-attention view's pronoun pair and second sentence for a model.
"""
from __future__ import annotations

from typing import Protocol

from explorer.adapters.text import Encoded
from explorer.data.examples import LANGUAGES, PRONOUN_PAIRS, PURPOSES, Examples, sentences


class Encodes(Protocol):
    """An adapter's id and input convention (explorer.adapters.protocols.Reads has them; explorer.adapters.base
    imports this module and that one imports the base, so this module names neither)."""

    @property
    def id(self) -> str: ...

    def encode(self, text: str) -> Encoded: ...


class Adapted(Encodes, Protocol):
    """An adapter with what it was made from (the loaded model, whose meta names its training corpus)."""

    @property
    def loaded(self) -> object: ...


class Offers(Protocol):
    """An adapter's example sentences (explorer.adapters.base.Adapter.examples)."""

    def examples(self, purpose: str) -> Examples: ...


def language_of(loaded: object) -> str:
    """The language a model was trained on: its generator (built-ins and checkpoints trained here), else
    "natural" (Hugging Face models, MiniLM, a user's checkpoint)."""
    corpus = (getattr(loaded, "meta", None) or {}).get("corpus")
    generator = corpus.get("generator") if isinstance(corpus, dict) else None
    return generator if generator in LANGUAGES and generator != "natural" else "natural"


def left_to_right(adapter: object) -> bool:
    """Whether the model's state at a token reads only the tokens before it (known before a run): a causal
    transformer, or a recurrent language model (one direction: it predicts the next word)."""
    return bool(getattr(adapter, "causal", False)) or (
        bool(getattr(adapter, "recurrent", False)) and bool(getattr(adapter, "can_generate", False))
        and not getattr(adapter, "is_encoder_decoder", False))


def unknown_words(adapter: Encodes, text: str) -> int | None:
    """How many tokens of `text` the model reads as unknown, or None when it cannot read text."""
    try:
        return int(adapter.encode(text).n_unknown)
    except (ValueError, TypeError, RuntimeError, KeyError):  # no vocabulary (Unsupported), a refused text
        return None


def for_model(adapter: Adapted, purpose: str) -> Examples:
    """The example sentences of the model behind `adapter` for `purpose` (a key of PURPOSES)."""
    if purpose not in PURPOSES:
        raise ValueError(f"unknown purpose {purpose!r}; use one of {', '.join(PURPOSES)}")
    own = language_of(adapter.loaded)
    one_way = left_to_right(adapter)
    first = sentences(own, purpose, one_way)
    counts = {s: unknown_words(adapter, s) for s in first}
    if any(n is None for n in counts.values()):
        return Examples(first, f"{adapter.id} has no vocabulary this view can check sentences against.", own)
    known = tuple(s for s in first if counts[s] == 0)
    if known:
        return Examples(known, "", own)
    others = [lang for lang in LANGUAGES if lang != own]
    for lang in others:
        found = tuple(s for s in sentences(lang, purpose, one_way) if unknown_words(adapter, s) == 0)
        if found:
            return Examples(found, "", lang)
    ranked = tuple(sorted(first, key=lambda s: counts[s] or 0))  # every count is known here (checked above)
    return Examples(ranked, f"None of the example sentences has every word in {adapter.id}'s vocabulary: the words "
                            "it does not know are read as its unknown token (marked in the charts). Type a sentence "
                            "in the model's own words.", own)


def pronoun_pair(adapter: Offers) -> tuple[str, str] | None:
    """The self-attention view's pronoun pair for this model (PRONOUN_PAIRS: the one whose deciding word it can
    read), or None when its example sentences do not include it (a built-in's generated English)."""
    pair = PRONOUN_PAIRS[left_to_right(adapter)]
    offered = adapter.examples("attention").sentences
    return pair if all(s in offered for s in pair) else None


def compare_default(adapter: Offers) -> str:
    """The self-attention view's second sentence to compare: the pronoun pair's second when the model offers it, else
    its second example sentence ("" when it has none)."""
    pair = pronoun_pair(adapter)
    offered = adapter.examples("attention").sentences
    return pair[1] if pair else (offered[1] if len(offered) > 1 else "")
