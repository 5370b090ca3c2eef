"""Everyday English (explorer.data.everyday_english): SmolLM2's texts as shipped, the sentences cut from them byte for
byte, the split, and the everyday test sentences kept out of it."""
from __future__ import annotations

from explorer.data import everyday_english as E
from explorer.data import wordnet_english as W
from explorer.data.vocab import tokenize_words
from test_real_english import everyday

LINES, SPLIT, TRAIN_WORDS = 21_131, (20_126, 1_005), 349_382  # docs/builtin-models.md


def test_a_generated_text_is_cut_into_finished_sentences_of_plain_prose() -> None:
    text = ('Once upon a time, there was a girl named Emma. She loved to cook! "Can I help?" asked Tom.\n\n'
            "1. Wash the apples in cold water.\n**Title: A Day Out**\nJamie: Hi Alex, what's up with the party?\n"
            "The bus was late, so we walked to sch")
    assert E.split_sentences(text) == [
        "Once upon a time, there was a girl named Emma.", "She loved to cook!", '"Can I help?" asked Tom.',
        "Wash the apples in cold water.", "Hi Alex, what's up with the party?"]  # the unfinished last one dropped
    assert [E.keep(s) for s in ("She loved to cook!", "Wash the apples in cold water.", "Hi!", "I love 🍕 a lot.",
                                "the bus was late today.", "Café au lait is my favourite drink.",
                                " ".join(["word"] * 31) + ".")] == [True, True, False, False, False, False, False]


def test_the_prompts_and_seeds_are_the_shipped_batches() -> None:
    shipped = E.texts()
    assert [b["batch"] for b in shipped] == list(range(len(E.batches()))) == list(range(56))
    for b, batch in enumerate(shipped):
        assert batch["seed"] == E.SEED + b and batch["prompts"] == E.batches()[b]
        assert len(batch["texts"]) == len(batch["prompts"])
    assert len(E.prompts()) == len(E.TOPICS) * len(E.FORMS) * E.SAMPLES == 3_552


def test_the_corpus_is_cut_from_the_shipped_texts_byte_for_byte() -> None:
    assert W.encode(E.corpus_lines()) == E.ASSET.read_bytes()
    assert E.main(["check"]) == 0


def test_the_corpus_its_split_and_size() -> None:
    lines = E.lines()
    assert len(lines) == len(set(lines)) == LINES
    assert all(E.keep(s) for s in lines)
    own_train = [s for s in lines if not W.held_out(s)]
    own_held = [s for s in lines if W.held_out(s)]
    assert (len(own_train), len(own_held)) == SPLIT
    assert sum(len(tokenize_words(s)) for s in own_train) == TRAIN_WORDS
    train, held = E.sentences("train"), E.sentences("heldout")
    assert train[len(own_train):] == W.sentences("train") and held[len(own_held):] == W.sentences("heldout")
    assert train[0] == tuple(tokenize_words(own_train[0]))
    assert E.generate_sentences(2) == [list(s) for s in train[:2]]


def test_everyday_test_sentences_are_in_no_corpus() -> None:
    corpus = set(E.sentences("train")) | set(E.sentences("heldout"))
    sentences = [s for topic in everyday().values() for s in topic]
    assert not [s for s in sentences if tuple(tokenize_words(s)) in corpus]
