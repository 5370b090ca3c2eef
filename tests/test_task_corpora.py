"""The labelled corpora of the task models (docs/builtin-models.md, "Labelled corpora"): sentiment
(explorer.data.sentiment_english: SmolLM2's opinions, labelled by their request) and part of speech in context
(explorer.data.pos_english: WordNet's example sentences with the illustrated word marked). Both rebuild byte for
byte, hold only their labels, split by hash, have the documented sizes, and hold none of the everyday test
sentences written for them (tests/data/sentiment-everyday.tsv, tests/data/pos-everyday.tsv)."""
from __future__ import annotations

import functools
import hashlib
import re
from collections import Counter
from pathlib import Path

import pytest

from explorer.data import everyday_english as E
from explorer.data import pos_english as P
from explorer.data import sentiment_english as S
from explorer.data import wordnet_english as W
from explorer.data.vocab import tokenize_words

DATA = Path(__file__).parent / "data"
# docs/builtin-models.md
SENTIMENT = {"negative": 8_660, "positive": 8_431}
SENTIMENT_HELDOUT = {"negative": 870, "positive": 768}
SENTIMENT_NEGATED = {"negative": 4_691, "positive": 3_256}  # sentences with not, never, no, nothing or nobody
ROUND_2 = {"negative": 3_085, "positive": 2_946}  # the rows round 2 added
QUALITY = {"yes": 83, "neutral": 10, "opposite": 5, "mixed": 2}  # the hand-read sample's verdicts, round 1
QUALITY_2 = {"yes": 34, "neutral": 4, "opposite": 1, "mixed": 1}  # and round 2's
POS = {"noun": 10_173, "verb": 10_873, "adjective": 18_312, "adverb": 3_602}
POS_HELDOUT = {"noun": 493, "verb": 553, "adjective": 895, "adverb": 186}
POS_AMBIGUOUS = 2_034  # marked words found under two or more labels
NEGATION = frozenset({"not", "never", "no", "nothing", "nobody"})
WORDNET = pytest.mark.skipif(not (W.wordnet_dir() / "data.noun").is_file(),
                             reason="needs Debian's wordnet-base (README's test command installs it)")


@functools.lru_cache(maxsize=None)
def everyday(name: str) -> tuple[tuple[str, ...], ...]:
    """The rows of tests/data/<name>.tsv, split at tabs."""
    return tuple(tuple(line.split("\t")) for line in (DATA / f"{name}.tsv").read_text("utf-8").splitlines())


def words(text: str) -> tuple[str, ...]:
    """The lowercase runs of letters and digits of `text` (equal for texts whose tokenize_words are equal)."""
    return tuple(re.findall(r"[a-z0-9]+", text.lower()))


# ------------------------------------------------------------------------------------------------ sentiment
def test_the_sentiment_requests_are_the_shipped_batches() -> None:
    shipped = S.texts()
    assert len(S.requests()) == len(S.TOPICS) * sum(len(s) for r in (S.STARTS, S.STARTS_2) for s in r.values()) \
        * S.SAMPLES
    assert [len(b) for b in S.batches()].count(64) == len(S.batches()) - 2  # each round's last batch is shorter
    assert [b["batch"] for b in shipped] == list(range(len(S.batches())))
    for b, batch in enumerate(shipped):
        prompts, starts, labels = (list(x) for x in zip(*S.batches()[b]))
        assert (batch["seed"], batch["prompts"], batch["starts"], batch["labels"]) == (S.SEED + b, prompts, starts,
                                                                                       labels)
        assert len(batch["texts"]) == len(prompts)
        assert all(text.startswith(start) for text, start in zip(batch["texts"], starts))
    happy = {label: {p for p, _, lab in S.requests() if lab == label} for label in S.LABELS}
    assert all("happy" in p or "loved" in p for p in happy["positive"])
    assert all("angry" in p or "hated" in p for p in happy["negative"])


def test_the_sentiment_corpus_is_cut_from_the_shipped_texts_byte_for_byte() -> None:
    assert S.encode(S.corpus_rows()) == S.ASSET.read_bytes()
    assert S.main(["check"]) == 0


def test_a_sentence_written_under_both_labels_is_dropped_and_only_the_first_sentences_count() -> None:
    batches = [{"labels": ["positive", "negative", "positive"],
                "texts": ["The food was great. The staff were kind. The room was clean.",
                          "The food was great. It was cold by the time it came.",
                          "The staff were kind. I will come back!"]}]
    assert S.MAX_SENTENCES == 2
    assert S.labelled(batches) == [("positive", "The staff were kind."),
                                   ("negative", "It was cold by the time it came."), ("positive", "I will come back!")]


def test_the_sentiment_corpus_its_labels_split_and_size() -> None:
    rows = S.rows()
    assert {label for label, _ in rows} == set(S.LABELS) and S.LABELS == ("negative", "positive")
    sentences = [s for _, s in rows]
    assert len(sentences) == len(set(sentences))
    assert all(E.keep(s) for s in sentences)
    assert Counter(label for label, _ in rows) == SENTIMENT
    held = [(s, label) for label, s in rows if int(hashlib.sha256(s.encode()).hexdigest()[:8], 16) % 10 == 0]
    assert S.examples("heldout") == held
    assert Counter(label for _, label in held) == SENTIMENT_HELDOUT
    assert len(S.examples("train")) + len(held) == len(rows)
    assert not set(S.examples("train")) & set(held)
    negated = Counter(label for label, s in rows if NEGATION & set(tokenize_words(s)))
    assert negated == SENTIMENT_NEGATED  # the classifier sees "not" both ways
    with pytest.raises(ValueError):
        S.examples("test")


def test_the_hand_read_samples_are_the_corpus_s_and_their_counts_are_the_documented_ones() -> None:
    sample = everyday("sentiment-quality-sample")
    assert [(label, sentence) for _, label, sentence in sample] == S.quality_sample(1) and len(sample) == 100
    assert Counter(verdict for verdict, _, _ in sample) == QUALITY
    second = everyday("sentiment-quality-sample-2")
    assert [(label, sentence) for _, label, sentence in second] == S.quality_sample(2) and len(second) == 40
    assert Counter(verdict for verdict, _, _ in second) == QUALITY_2
    assert Counter(label for label, _ in S.round_rows(2)) == ROUND_2
    first = set(S.round_rows(1))  # round 1's cut; a sentence round 2 wrote under the other label left the corpus
    assert sum(row in first for row in S.rows()) + len(S.round_rows(2)) == len(S.rows())
    assert len(first) - sum(row in first for row in S.rows()) == 1


def test_the_everyday_sentiment_sentences_are_balanced_and_in_no_corpus() -> None:
    rows = everyday("sentiment-everyday")
    assert len(rows) == 120 and all(len(r) == 2 for r in rows)
    assert Counter(label for label, _ in rows) == {"negative": 60, "positive": 60}
    sentences = [s for _, s in rows]
    assert len(set(sentences)) == 120
    negated = [s for s in sentences if NEGATION & set(tokenize_words(s))]
    assert len(negated) >= 30
    corpus = {words(s) for _, s in S.rows()}
    assert not [s for s in sentences if words(s) in corpus]


# ------------------------------------------------------------------------------------------- part of speech
def test_regular_and_irregular_forms_of_a_lemma() -> None:
    assert P.forms("run", "verb") >= {"run", "runs", "running"} and "runner" not in P.forms("run", "verb")
    assert P.forms("city", "noun") >= {"cities"} and P.forms("fast", "adjective") >= {"faster", "fastest"}
    assert P.forms("bake", "verb") >= {"baked", "baking"} and P.forms("stop", "verb") >= {"stopped", "stopping"}
    assert "ran" in P.exceptions(W.wordnet_dir(), "verb")["run"] if (W.wordnet_dir() / "verb.exc").is_file() else True


@WORDNET
def test_the_pos_corpus_rebuilds_byte_for_byte_from_wordnet_base() -> None:
    assert P.main(["check"]) == 0  # P.encode(P.read_examples()) == P.ASSET.read_bytes()


def test_the_pos_corpus_marks_the_illustrated_word_once() -> None:
    folder = W.wordnet_dir()
    irregular = {label: P.exceptions(folder, part) for part, label in P.PARTS.items()}
    for r in P.rows():
        tokens = tokenize_words(r.sentence)
        words = P.forms(r.lemma, r.label) | irregular[r.label].get(r.lemma, set())
        assert tokens[r.position] in words, r
        assert sum(t in words for t in tokens) == 1, r
        assert r.label in P.LABELS and r.supersense in P.SUPERSENSES
        assert r.supersense.split(".")[0] == {"adjective": "adj", "adverb": "adv"}.get(r.label, r.label), r


def test_the_pos_corpus_its_labels_split_and_size() -> None:
    rows = P.rows()
    assert P.LABELS == ("noun", "verb", "adjective", "adverb")
    assert Counter(r.label for r in rows) == POS and sum(POS.values()) == 42_960
    assert len({(r.sentence, r.position) for r in rows}) == len(rows)
    held = P.examples("heldout")
    assert Counter(label for *_, label in held) == POS_HELDOUT
    assert held == [(tuple(tokenize_words(r.sentence)), r.position, r.label) for r in rows if W.held_out(r.sentence)]
    assert len(P.examples("train")) + len(held) == len(rows) and P.HELDOUT_EVERY == W.HELDOUT_EVERY == 20
    words, index, label = P.examples("train")[0]
    assert isinstance(words, tuple) and words[index] and label in P.LABELS
    ambiguous = P.ambiguity(rows)
    assert len(ambiguous) == POS_AMBIGUOUS
    for word in ("run", "light", "fast", "back", "well"):
        assert len(ambiguous[word]) >= 2, word
    assert ambiguous["run"] == {"noun", "verb"} and ambiguous["back"] == set(P.LABELS)


def test_the_everyday_pos_sentences_are_marked_balanced_and_in_no_corpus() -> None:
    rows = everyday("pos-everyday")
    assert len(rows) == 120 and all(len(r) == 3 for r in rows)
    assert Counter(label for label, _, _ in rows) == {label: 30 for label in P.LABELS}
    for label, index, sentence in rows:
        tokens = tokenize_words(sentence)
        assert 0 <= int(index) < len(tokens) and tokens[int(index)].isalpha(), sentence
    # context decides: words marked under two or more labels
    marked: dict[str, set[str]] = {}
    for label, index, sentence in rows:
        marked.setdefault(tokenize_words(sentence)[int(index)], set()).add(label)
    assert sum(len(labels) > 1 for labels in marked.values()) >= 40
    corpus = {words(line) for line in W.lines()}  # WordNet's lines: the POS corpus's sentences and the rest
    assert {words(r.sentence) for r in P.rows()} <= corpus
    assert not [s for _, _, s in rows if words(s) in corpus]


# --------------------------------------------------------------------------------------------------- budget
def test_the_labelled_corpora_and_the_task_models_are_small() -> None:
    """The task models' assets (the two labelled corpora, the two recurrent task models, MiniLM's two fine-tunes)
    stay within 14 MB, apart from the real-English assets' 60 MB (test_real_english)."""
    from explorer.loading.catalogue import BUILTIN_DIR
    from explorer.loading.pretrained import OVERLAYS

    ours = sum(p.stat().st_size for p in (S.ASSET, S.TEXTS, P.ASSET))
    assert ours <= 2 * 2**20, f"{ours / 2**20:.2f} MB"
    models = [BUILTIN_DIR / f"{n}.{ext}" for n in ("sentiment-lstm", "pos-bilstm") for ext in ("json", "safetensors")]
    models += [OVERLAYS[n].with_suffix(ext) for n in ("minilm-sentiment", "minilm-pos") for ext in (".json",
                                                                                                   ".safetensors")]
    total = ours + sum(p.stat().st_size for p in models)
    assert total <= 14 * 2**20, f"{total / 2**20:.1f} MB"
