"""Deterministic, seeded corpora and tokenizers (standard library + numpy only).

Submodules:
    vocab        -- :class:`Vocab`, :data:`SPECIALS`, :func:`tokenize_words`, :func:`tokenize_chars`
    english      -- probabilistic English grammar, agreement test (:func:`english.agreement_pairs`)
    translation  -- English -> French-like pairs with gold alignments
    dates        -- human-readable dates -> ISO, character level
    user_text    -- user-supplied text -> corpus, with :class:`CorpusError`
"""

from . import dates, english, translation, user_text, vocab
from .english import AgreementPair, agreement_pairs, generate_sentences, heldout_sentences, word_class
from .user_text import CorpusError, corpus_from_text, read_uploaded_text
from .vocab import SPECIALS, Vocab, tokenize_chars, tokenize_words

__all__ = [
    "dates", "english", "translation", "user_text", "vocab",
    "SPECIALS", "Vocab", "tokenize_words", "tokenize_chars",
    "AgreementPair", "agreement_pairs", "generate_sentences", "heldout_sentences", "word_class",
    "CorpusError", "corpus_from_text", "read_uploaded_text",
]
