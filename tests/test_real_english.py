"""Real English for the built-in models (explorer.data.wordnet_english): the shipped corpus is WordNet 3.0's text,
rebuilt byte for byte from Debian's wordnet-base; its split; and the words of everyday sentences (written for this
test, tests/data/everyday_sentences.txt, in no corpus) that its vocabulary knows."""
from __future__ import annotations

import functools
from collections import Counter
from pathlib import Path

import pytest

from explorer.data import english
from explorer.data import everyday_english as E
from explorer.data import wordnet_english as W
from explorer.data.vocab import UNK, Vocab, tokenize_words

EVERYDAY = Path(__file__).parent / "data" / "everyday_sentences.txt"
VOCAB = 12_000  # the real-English transformers' vocabulary (explorer.training.recipes._WORDNET_TEXT)
RECURRENT_VOCAB = 20_000  # the real-English recurrent models', on the everyday corpus (recipes._WORDNET)


def everyday() -> dict[str, list[str]]:
    """Topic -> its sentences."""
    topics: dict[str, list[str]] = {}
    topic = ""
    for line in EVERYDAY.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            topic = line[3:]
        elif line.strip() and not line.startswith("#"):
            topics.setdefault(topic, []).append(line)
    return topics


def words(sentence: str) -> list[str]:
    """The words of a sentence as the built-in models read it (tokens with a letter: punctuation left out)."""
    return [w for w in tokenize_words(sentence) if any(c.isalpha() for c in w)]


def coverage(known: set[str]) -> tuple[float, Counter[str]]:
    """(share of the everyday sentences' words in `known`, the unknown ones counted)."""
    every = [w for sentences in everyday().values() for s in sentences for w in words(s)]
    unknown = Counter(w for w in every if w not in known)
    return 1 - sum(unknown.values()) / len(every), unknown


def test_a_gloss_is_split_into_definitions_and_examples() -> None:
    assert W.parse_gloss('sloping land beside a body of water; "they pulled the canoe up on the bank"; '
                         '"he sat on the bank of the river"  ') == (
        ["sloping land beside a body of water"],
        ["they pulled the canoe up on the bank", "he sat on the bank of the river"])
    assert W.parse_gloss('a shout; ""; "hey!"') == (["a shout"], ["hey!"])


@pytest.mark.skipif(not (W.wordnet_dir() / "data.noun").is_file(),
                    reason="needs Debian's wordnet-base (README's test command installs it)")
def test_the_corpus_rebuilds_byte_for_byte_from_wordnet_base() -> None:
    assert W.encode(W.read_wordnet()) == W.ASSET.read_bytes()
    assert W.main(["check"]) == 0
    assert "WordNet 3.0 Copyright 2006 by Princeton University" in W.LICENSE.read_text(encoding="utf-8")


def test_the_corpus_its_split_and_size() -> None:
    lines = W.lines()
    assert len(lines) == len(set(lines)) == 181_478  # each text once
    assert lines[0] == "it was full of rackets, balls and other objects"  # WordNet's first example sentence
    train, held = W.sentences("train"), W.sentences("heldout")
    assert (len(train), len(held)) == (172_393, 9_085)
    assert 0.045 < len(held) / len(lines) < 0.055
    assert (sum(map(len, train)), sum(map(len, held))) == (1_460_087, 77_912)
    seen = set(train)
    assert sum(1 for s in held if s in seen) / len(held) < 0.01  # distinct texts that read alike once lowercased
    assert W.generate_sentences(3) == [list(s) for s in train[:3]]
    assert W.heldout_sentences(2) == [list(s) for s in held[:2]]
    with pytest.raises(ValueError):
        W.sentences("test")


def test_everyday_sentences_are_held_out_from_the_corpus() -> None:
    corpus = {tuple(s) for s in W.sentences("train")} | {tuple(s) for s in W.sentences("heldout")}
    sentences = [s for topic in everyday().values() for s in topic]
    assert len(sentences) >= 130
    assert set(everyday()) == {"conversation", "news", "classroom questions", "food", "family", "school", "travel"}
    assert not [s for s in sentences if tuple(tokenize_words(s)) in corpus]


def test_the_vocabulary_knows_98_percent_of_everyday_words() -> None:
    """The 12,000 most frequent words of the training split, as the real-English models' vocabulary is built."""
    vocab = Vocab.build([list(s) for s in W.sentences("train")], max_size=VOCAB)
    share, unknown = coverage(set(vocab.itos))
    assert share >= 0.98, unknown.most_common(20)
    assert (sum(unknown.values()), round(share, 4)) == (13, 0.9877)  # docs/builtin-models.md: 13 unknown of 1,057 words
    assert UNK not in [vocab.itos[i] for i in vocab.encode(tokenize_words("I went to the bank to deposit money"))]
    assert coverage(set(english.vocabulary()))[0] < 0.7  # the generated English's 776 words, for comparison


def test_the_recurrent_models_vocabulary_knows_99_7_percent_of_everyday_words() -> None:
    """The 20,000 most frequent words of the everyday corpus's training split (SmolLM2's everyday sentences, then
    WordNet's), as the real-English recurrent models' vocabulary is built."""
    vocab = Vocab.build([list(s) for s in E.sentences("train")], max_size=RECURRENT_VOCAB)
    share, unknown = coverage(set(vocab.itos))
    assert (sum(unknown.values()), round(share, 4)) == (3, 0.9972)  # docs/builtin-models.md: 3 unknown of 1,057
    assert sorted(unknown) == ["journeys", "mondays", "reopened"]
    assert {"recipe", "delicious", "passport", "suitcase", "grandparents", "thank"} <= set(vocab.itos)


# ------------------------------------------------------------------------------------- the real-English models
RECURRENT = ("rnn-lm-wordnet", "gru-lm-wordnet", "lstm-lm-wordnet")
LMS = RECURRENT + ("tiny-gpt-wordnet",)
MODELS = LMS + ("masked-lm-wordnet",)


@functools.lru_cache(maxsize=None)
def checkpoint(name: str):
    """(model, meta, vocab) of assets/builtin/<name> as the app reads it."""
    from explorer.files.safe_load import read_state_dict_file
    from explorer.loading.catalogue import BUILTIN_DIR
    from explorer.loading.checkpoint import read_meta
    from explorer.models.build import from_checkpoint

    meta = read_meta(BUILTIN_DIR / f"{name}.json")
    model = from_checkpoint(meta, read_state_dict_file(BUILTIN_DIR / f"{name}.safetensors"), name)
    return model.eval(), meta, Vocab.from_json(meta["vocab"])


def test_the_real_english_models_fit_the_asset_budget() -> None:
    from explorer.loading.catalogue import BUILTIN_DIR

    new = sum((BUILTIN_DIR / f"{n}.{ext}").stat().st_size for n in MODELS for ext in ("json", "safetensors"))
    new += W.ASSET.stat().st_size + W.LICENSE.stat().st_size + E.ASSET.stat().st_size + E.TEXTS.stat().st_size
    new += sum(f.stat().st_size for f in (BUILTIN_DIR.parent / "pretrained").glob("minilm-mlm.*"))
    assert new <= 60 * 2**20, f"{new / 2**20:.1f} MB"


@pytest.mark.parametrize("name", MODELS)
def test_a_real_english_model_knows_98_percent_of_everyday_words(name: str) -> None:
    from explorer.loading.loaders import load_model

    _, meta, vocab = checkpoint(name)
    assert meta["corpus"]["generator"] == ("everyday" if name in RECURRENT else "wordnet")
    assert meta["train"]["spec"]["stored"] == "float16"
    assert coverage(set(vocab.itos))[0] >= 0.98
    loaded = load_model(f"builtin:{name}")
    assert loaded.adapter.encode("I went to the bank to deposit money").n_unknown == 0


@pytest.mark.parametrize("name", LMS)
def test_held_out_perplexity_is_the_models_own_and_beats_the_bigram_baseline(name: str) -> None:
    import math

    from explorer.metrics import held_out as M

    model, meta, vocab = checkpoint(name)
    block = meta["train"]["spec"]["block_size"]
    corpus = E if meta["corpus"]["generator"] == "everyday" else W  # the held-out split of the model's own corpus
    held = [vocab.encode(list(s))[: block - 1] for s in corpus.sentences("heldout")]
    total, n = M.lm_nll(model, held)
    perplexity = math.exp(total / n)
    assert perplexity == pytest.approx(meta["metrics"]["heldout_perplexity"], rel=1e-4)
    assert perplexity < 0.8 * meta["metrics"]["bigram_perplexity"]


@pytest.mark.parametrize("name", MODELS)
def test_agreement_across_an_attractor_is_recomputed(name: str) -> None:
    from explorer.training.evaluation import natural_agreement_eval, natural_masked_agreement

    model, meta, vocab = checkpoint(name)
    evaluate = natural_masked_agreement if name.startswith("masked") else natural_agreement_eval
    assert evaluate(model, vocab) == meta["metrics"]["natural_agreement"]


@pytest.mark.parametrize("name", LMS)
def test_generation_samples_are_the_models_own(name: str) -> None:
    from explorer.training.evaluation import SAMPLE_PROMPTS, continuations

    from explorer.loading.loaders import load_model
    from explorer.probes.decoding_strategies import decode_all
    from explorer.adapters.generation import Strategy

    model, meta, vocab = checkpoint(name)
    samples = meta["metrics"]["samples"]
    assert continuations(model, meta) == samples and list(samples) == list(SAMPLE_PROMPTS)
    loaded = load_model(f"builtin:{name}")  # the decoding view's greedy column says the same with <unk> shown (the
    for prompt, text in samples.items():    # raw model's samples); by default it leaves <unk> out, a word instead
        run = decode_all(loaded, prompt, (Strategy("greedy", show_unknown=True),), 0, 12)
        words = [w for w in run.generations[0].outputs[0].tokens if w != "<eos>"]
        assert text == " ".join([prompt, *words]) and len(words) >= 1
        raw = run.generations[0].outputs[0].tokens
        default = decode_all(loaded, prompt, (Strategy("greedy"),), 0, 12).generations[0].outputs[0].tokens
        k = raw.index("<unk>") if "<unk>" in raw else len(raw)  # the same words up to the first <unk>
        assert "<unk>" not in default and default[:k] == raw[:k]


def test_the_recurrent_views_read_the_bank_sentence_with_no_unknown_word() -> None:
    import numpy as np

    from explorer.loading.loaders import load_model
    from explorer.probes.gradients_through_time import gradients_through_time
    from explorer.probes.lstm_gates import rnn_gates

    sentence = "I went to the bank to deposit money"
    trace = rnn_gates(load_model("builtin:lstm-lm-wordnet"), sentence)
    assert [t for t in trace.tokens if t != "<bos>"] == tokenize_words(sentence)
    assert trace.gates["c"].shape[2] == len(trace.tokens) and trace.max_abs_error < 1e-5
    for name in RECURRENT:
        grads = gradients_through_time(load_model(f"builtin:{name}"), sentence)
        assert UNK not in grads.tokens and grads.target == "money" and np.isfinite(grads.log_prob)
