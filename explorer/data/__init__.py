"""Deterministic, seeded corpora and tokenizers (standard library + numpy only).

Submodules:
    vocab        -- :class:`Vocab`, :data:`SPECIALS`, :func:`tokenize_words`, :func:`tokenize_chars`
    english      -- probabilistic English grammar, agreement test (:func:`english.agreement_pairs`)
    translation  -- English -> French-like pairs with gold alignments
    dates        -- human-readable dates -> ISO, character level
    user_text    -- user-supplied text -> corpus, with :class:`CorpusError`

The package imports none of its modules (see tests/test_architecture.py: concurrent imports must not deadlock):
import each from its own module, e.g. `from explorer.data.vocab import Vocab`.
"""
