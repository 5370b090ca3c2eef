"""A run's data: the corpus (generated and seeded, or the user's token lists), the token ids the tasks add, and the
batches they are cut into."""
from __future__ import annotations

import importlib
import random
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Generic, TypeVar

from explorer.training.spec import LABELLED, TrainSpec

PAD, UNK, BOS, EOS = 0, 1, 2, 3  # explorer.data.vocab's SPECIALS
MASK, MASK_TOKEN = 4, "<mask>"  # masked_lm: the mask token follows the four specials
# Real English, each its shipped corpus's own split: WordNet's lines (explorer.data.wordnet_english), and
# SmolLM2's everyday sentences followed by WordNet's (explorer.data.everyday_english)
REAL_ENGLISH = ("wordnet", "everyday")

Sentence = list[str]                    # one example of a language model or word2vec: its tokens
Pair = tuple[list[str], list[str]]      # one example of seq2seq: (source tokens, target tokens)
# one example of a classifier or tagger: (words, ((position, label id), …)), position -1 for the sentence's label
Labelled = tuple[list[str], list[tuple[int, int]]]
E = TypeVar("E", Sentence, Pair, Labelled)


@dataclass
class Corpus(Generic[E]):
    """Token-level data of one run: sentences (LMs, word2vec), (src, tgt) pairs (seq2seq) or labelled sentences (a
    classifier or tagger, whose label names are `labels`)."""
    train: list[E]
    heldout: list[E]
    generator: str
    seed: int | None
    level: str
    labels: tuple[str, ...] = ()


# a corpus's name -> its module in explorer.data, where they differ
CORPUS_MODULES = {"wordnet": "wordnet_english", "everyday": "everyday_english"}


def data_module(name: str) -> ModuleType:
    """explorer.data.<name> (english, wordnet_english, translation, dates), imported when a run first needs it."""
    return importlib.import_module(f"explorer.data.{CORPUS_MODULES.get(name, name)}")


def load_corpus(spec: TrainSpec, stop: Callable[[], bool] | None = None
                ) -> Corpus[Sentence] | Corpus[Pair] | Corpus[Labelled]:
    """The run's data. stop(): generation ends early (fewer examples) when it returns True (a run out of time)."""
    if spec.architecture in LABELLED:
        return labelled_corpus(spec)
    return _user_corpus(spec) if spec.corpus == "user" else _generated_corpus(spec, stop)


def labelled_corpus(spec: TrainSpec) -> Corpus[Labelled]:
    """A classifier's or tagger's examples: the user's (a tenth held out, drawn with the spec's seed), or up to
    n_train of a shipped corpus's training split (drawn with the seed) and n_heldout of its held-out split: the
    opinions ("sentiment") or WordNet's sentences with the illustrated word's part of speech ("pos"), each taught as
    the shipped task models are (explorer.training.task_models.targets)."""
    rng = random.Random(spec.seed)
    if spec.corpus == "user":
        examples = [(list(w), list(t)) for w, t in spec.user_examples or () if w and t]
        order = list(range(len(examples)))
        rng.shuffle(order)
        n_held = max(1, len(examples) // 10)
        held, train = (sorted(order[:n_held]), sorted(order[n_held:]))
        return Corpus([examples[i] for i in train], [examples[i] for i in held], "user", None, "word",
                      tuple(spec.labels or ()))
    from explorer.training import task_models as T

    recipe = T.RECIPES["sentiment-lstm" if spec.corpus == "sentiment" else "pos-bilstm"]
    parts = []
    for split, n in (("train", spec.n_train), ("heldout", spec.n_heldout)):
        shipped, labels = T.corpus(recipe, split)
        chosen = sorted(rng.sample(range(len(shipped)), min(n, len(shipped))))
        parts.append([(list(shipped[i][0]), T.targets(shipped[i], labels)) for i in chosen])
    return Corpus(parts[0], parts[1], spec.corpus, spec.seed, "word", labels)


def heldout_seed(spec: TrainSpec) -> int | None:
    """The seed of a generated corpus's held-out part (None for the user's text)."""
    if spec.corpus == "user" or spec.architecture in LABELLED:
        return None
    return getattr(data_module(spec.corpus), "HELDOUT_SEED", None)


def _user_corpus(spec: TrainSpec) -> Corpus[Sentence]:
    """The user's non-empty token lists, a tenth of them (at least one, drawn with the spec's seed) held out."""
    sents = [list(s) for s in spec.user_tokens or () if len(s)]
    rng = random.Random(spec.seed)
    order = list(range(len(sents)))
    rng.shuffle(order)
    n_held = max(1, len(sents) // 10)
    held = [sents[i] for i in sorted(order[:n_held])]
    train = [sents[i] for i in sorted(order[n_held:])]
    return Corpus(train, held, "user", None, spec.level)


def _generated_corpus(spec: TrainSpec, stop: Callable[[], bool] | None) -> Corpus[Sentence] | Corpus[Pair]:
    """n_train and n_heldout examples of a generated corpus from its two seeds: English sentences (split into
    characters at level "char"), or (source, target) token-list pairs."""
    mod = data_module(spec.corpus)
    if spec.corpus in ("english", *REAL_ENGLISH):
        if spec.corpus in REAL_ENGLISH:  # the shipped corpus's own split
            train, held = mod.generate_sentences(spec.n_train), mod.heldout_sentences(spec.n_heldout)
        else:
            train = mod.generate_sentences(spec.n_train, mod.TRAIN_SEED, stop=stop)
            held = mod.generate_sentences(spec.n_heldout, mod.HELDOUT_SEED, stop=stop)
        if spec.level == "char":
            train = [list(" ".join(s)) for s in train]
            held = [list(" ".join(s)) for s in held]
    else:
        train = [(list(s), list(t)) for s, t in mod.generate_pairs(spec.n_train, mod.TRAIN_SEED, stop=stop)]
        held = [(list(s), list(t)) for s, t in mod.generate_pairs(spec.n_heldout, mod.HELDOUT_SEED, stop=stop)]
    return Corpus(train, held, spec.corpus, mod.TRAIN_SEED, spec.level)


def chunks(ids: list[int], size: int) -> list[list[int]]:
    """Split a long sequence into windows of at most `size` tokens (for LM training)."""
    return [ids[i:i + size] for i in range(0, max(len(ids), 1), size)] if len(ids) > size else [ids]


def bucketed_batches(n: int, lengths: list[int], batch_size: int, rng: random.Random) -> list[list[int]]:
    """Shuffled batches of similar length (sort within pools of 50 batches), in shuffled order."""
    order = list(range(n))
    rng.shuffle(order)
    pool = batch_size * 50
    batches = []
    for p in range(0, n, pool):
        chunk = sorted(order[p:p + pool], key=lambda i: lengths[i])
        batches += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
    rng.shuffle(batches)
    return batches
