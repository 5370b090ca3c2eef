"""Real English for the built-in language models: the example sentences and glosses of WordNet 3.0.

WordNet 3.0 (Princeton University, 2006; the WordNet 3.0 licence, in assets/corpus/WORDNET-LICENSE, permits use,
copying and distribution with its notice) holds, for each of its 117,659 synsets, a gloss: a definition, often
followed by example sentences in double quotes ("he went to the bank to deposit his paycheck"). This module reads
them from the data files of Debian's `wordnet-base` package (/usr/share/wordnet/data.{noun,verb,adj,adv}) and
writes the corpus the project ships, assets/corpus/wordnet-english.txt.gz: one text per line, the example sentences
first, then the definitions, each kept once (first occurrence), in the order of the data files. Rebuild and check
it, offline, from the package alone:

    apt-get install wordnet-base
    python -m explorer.data.wordnet_english build     # writes the asset
    python -m explorer.data.wordnet_english check     # exit status 0 when the asset is byte for byte the rebuild

A line is held out when the first 8 hex digits of its SHA-256 are 0 modulo HELDOUT_EVERY (one line in 20), so the
split needs no seed and survives any reordering. `sentences(split)` gives the lines as lowercase word tokens
(explorer.data.vocab.tokenize_words, as the built-in models read text).
"""
from __future__ import annotations

import dataclasses
import functools
import gzip
import hashlib
import io
import os
import random
import sys
from collections import Counter
from pathlib import Path

from explorer.data.vocab import tokenize_words
from explorer.runtime.paths import app_root

ROOT = app_root()
ASSET = ROOT / "assets" / "corpus" / "wordnet-english.txt.gz"
LICENSE = ROOT / "assets" / "corpus" / "WORDNET-LICENSE"
PARTS = ("noun", "verb", "adj", "adv")
HELDOUT_EVERY = 20
TRAIN_SEED = None  # the split is by hash, not by a seed (explorer.training.corpus reads these two)
HELDOUT_SEED = None


def wordnet_dir() -> Path:
    """Where WordNet's data files are: $EXPLORER_WORDNET_DIR, else Debian's /usr/share/wordnet."""
    return Path(os.environ.get("EXPLORER_WORDNET_DIR") or "/usr/share/wordnet")


def parse_gloss(gloss: str) -> tuple[list[str], list[str]]:
    """(definitions, examples) of one synset's gloss: segments separated by ';', an example being one in double
    quotes. 'a river bank; "he sat on the bank"' -> (['a river bank'], ['he sat on the bank'])."""
    definitions, examples = [], []
    for segment in gloss.split(";"):
        segment = segment.strip()
        if segment.startswith('"'):
            text = segment.strip('"').strip()
            if text:
                examples.append(text)
        elif segment:
            definitions.append(segment)
    return definitions, examples


def read_wordnet(folder: Path | None = None) -> list[str]:
    """Every distinct example sentence (first) and definition (then) of WordNet's data files in `folder`, in file
    order. Raises FileNotFoundError when a data file is missing."""
    folder = folder or wordnet_dir()
    definitions: dict[str, None] = {}
    examples: dict[str, None] = {}
    for part in PARTS:
        with open(folder / f"data.{part}", encoding="utf-8", errors="strict") as f:
            for line in f:
                if line.startswith("  ") or " | " not in line:  # the licence header, or a synset without a gloss
                    continue
                d, e = parse_gloss(line.split(" | ", 1)[1])
                definitions.update(dict.fromkeys(d))
                examples.update(dict.fromkeys(e))
    return list(examples) + [d for d in definitions if d not in examples]


def encode(lines: list[str]) -> bytes:
    """The asset's bytes: the lines joined by newlines, gzipped()."""
    return gzipped(("\n".join(lines) + "\n").encode("utf-8"))


def gzipped(raw: bytes) -> bytes:
    """`raw` gzip-compressed with no name and time (the same bytes on every machine with the same zlib)."""
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, compresslevel=9, mtime=0) as gz:
        gz.write(raw)
    return out.getvalue()


@functools.lru_cache(maxsize=1)
def lines() -> tuple[str, ...]:
    """The shipped corpus's lines (assets/corpus/wordnet-english.txt.gz)."""
    with gzip.open(ASSET, "rt", encoding="utf-8") as f:
        return tuple(f.read().splitlines())


def held_out(line: str) -> bool:
    """Whether `line` is in the held-out split (its SHA-256's first 8 hex digits ≡ 0 mod HELDOUT_EVERY)."""
    return int(hashlib.sha256(line.encode("utf-8")).hexdigest()[:8], 16) % HELDOUT_EVERY == 0


@functools.lru_cache(maxsize=2)
def sentences(split: str = "train") -> tuple[tuple[str, ...], ...]:
    """The lines of `split` ("train" or "heldout") as lowercase word tokens, in corpus order."""
    if split not in ("train", "heldout"):
        raise ValueError(f"split must be 'train' or 'heldout', not {split!r}")
    return tokenized(lines(), split)


def tokenized(texts: tuple[str, ...], split: str) -> tuple[tuple[str, ...], ...]:
    """The texts of `split` ("train" or "heldout", by held_out) as lowercase word tokens, in order."""
    want = split == "heldout"  # each word kept once in memory (sys.intern): 1.5M tokens share ~54,000 strings
    return tuple(tuple(sys.intern(w) for w in tokenize_words(s)) for s in texts if held_out(s) == want)


def generate_sentences(n: int, seed: object = None, stop: object = None) -> list[list[str]]:
    """The first `n` training lines as token lists (the interface explorer.training.corpus calls for a corpus)."""
    return [list(s) for s in sentences("train")[:n]]


def heldout_sentences(n: int) -> list[list[str]]:
    """The first `n` held-out lines as token lists."""
    return [list(s) for s in sentences("heldout")[:n]]


# ------------------------------------------------------------------------------------ subject-verb agreement
# Agreement across an attractor in natural English, two ways. The corpus's own sentences of the form
# DET (ADJ) N1 PREP DET (ADJ) N2 VERB (Linzen et al. 2016, by pattern instead of a parser): few, because WordNet's
# definitions rarely hold a finite verb (62 whose N2 has the other number, 4 of them held out). And templated ones
# (Marvin & Linzen 2018's "agreement across a prepositional phrase"), made of common words, in no corpus:
# "the keys near the door" -> are / is.
AGREEMENT_NOUNS = (("key", "keys"), ("book", "books"), ("dog", "dogs"), ("teacher", "teachers"),
                   ("picture", "pictures"), ("car", "cars"), ("house", "houses"), ("student", "students"),
                   ("bottle", "bottles"), ("window", "windows"), ("door", "doors"), ("table", "tables"),
                   ("box", "boxes"), ("girl", "girls"), ("boy", "boys"), ("farmer", "farmers"), ("flower", "flowers"),
                   ("bird", "birds"), ("tree", "trees"), ("letter", "letters"), ("child", "children"), ("man", "men"),
                   ("woman", "women"))
AGREEMENT_PREPS = ("near", "behind", "on", "in", "of", "under", "with", "beside", "by")
AGREEMENT_VERBS = {"is": "are", "was": "were", "has": "have"}  # singular -> plural
VERB_NUMBER = {**{v: "sg" for v in AGREEMENT_VERBS}, **{v: "pl" for v in AGREEMENT_VERBS.values()}}
OTHER_FORM = {**AGREEMENT_VERBS, **{p: s for s, p in AGREEMENT_VERBS.items()}}
_DETERMINERS = frozenset("the a an this that these those his her their my our your its some many every each all "
                         "two three several".split())
_PREPOSITIONS = frozenset("of in on near with for from at by to behind under about between like without inside over "
                          "into".split())
_STOPS = _DETERMINERS | _PREPOSITIONS | frozenset(VERB_NUMBER) | frozenset(
    'and or , that which who not ( ) " ; : it he she they we i you'.split())


@dataclasses.dataclass(frozen=True)
class AgreementCase:
    """A prefix ending in the subject's phrase, the verb form that agrees with its head noun and the one that does
    not, and whether the noun just before the verb (the attractor) has the other number."""

    prefix: tuple[str, ...]
    correct: str
    wrong: str
    attractor: bool


def templated_agreement(n: int = 1000, seed: int = 0) -> list[AgreementCase]:
    """n cases "the N1 PREP the N2" -> VERB, half with an attractor (N2 of the other number), drawn with `seed`."""
    rng = random.Random(seed)
    cases = []
    for i in range(n):
        (a, b) = rng.sample(AGREEMENT_NOUNS, 2)
        head = rng.randrange(2)
        other = 1 - head if i % 2 == 0 else head  # even cases have an attractor
        singular = rng.choice(list(AGREEMENT_VERBS))
        right = singular if head == 0 else AGREEMENT_VERBS[singular]
        cases.append(AgreementCase(("the", a[head], rng.choice(AGREEMENT_PREPS), "the", b[other]), right,
                                   OTHER_FORM[right], other != head))
    return cases


def _number(word: str, known: Counter[str]) -> str | None:
    """'pl' for a word ending in s whose stem is a training word, 'sg' for one whose s-form is; else None."""
    if word.endswith("s") and not word.endswith(("ss", "us", "is")) and known[word[:-1]]:
        return "pl"
    return "sg" if not word.endswith("s") and known[word + "s"] else None


def _noun_end(s: tuple[str, ...], j: int) -> int | None:
    """The index of the noun that ends the phrase whose determiner is s[j] (DET, up to two words, then a preposition
    or one of the verbs), or None."""
    for k in range(j + 1, min(j + 4, len(s))):
        if s[k] in _STOPS:
            return None
        if k + 1 < len(s) and (s[k + 1] in _PREPOSITIONS or s[k + 1] in VERB_NUMBER):
            return k
    return None


@functools.lru_cache(maxsize=1)
def _training_counts() -> Counter[str]:
    """How often each word occurs in the training split (counted once per process)."""
    return Counter(w for line in sentences("train") for w in line)


def corpus_agreement(split: str) -> list[AgreementCase]:
    """The corpus's lines of `split` with DET (ADJ) N1 PREP DET (ADJ) N2 VERB whose verb agrees with N1, cut before
    the verb (from the start of the line), with attractor = N2's number differs."""
    known = _training_counts()
    cases = []
    for s in sentences(split):
        for j, word in enumerate(s):
            if word not in _DETERMINERS or (k1 := _noun_end(s, j)) is None or s[k1 + 1] not in _PREPOSITIONS \
                    or k1 + 2 >= len(s) or s[k1 + 2] not in _DETERMINERS or (k2 := _noun_end(s, k1 + 2)) is None \
                    or s[k2 + 1] not in VERB_NUMBER:
                continue
            verb, head, near = s[k2 + 1], _number(s[k1], known), _number(s[k2], known)
            if head is not None and near is not None and VERB_NUMBER[verb] == head:
                cases.append(AgreementCase(s[:k2 + 1], verb, OTHER_FORM[verb], near != head))
    return cases


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in ("build", "check"):
        print("usage: python -m explorer.data.wordnet_english build|check", file=sys.stderr)
        return 2
    try:
        data = encode(read_wordnet())
    except FileNotFoundError as exc:
        print(f"{exc}: install Debian's wordnet-base (apt-get install wordnet-base) or set EXPLORER_WORDNET_DIR",
              file=sys.stderr)
        return 1
    if argv[0] == "build":
        ASSET.parent.mkdir(parents=True, exist_ok=True)
        ASSET.write_bytes(data)
        print(f"wrote {ASSET} ({len(data):,} bytes)")
        return 0
    same = ASSET.is_file() and ASSET.read_bytes() == data
    print(f"{ASSET}: {'the same bytes as the rebuild' if same else 'DIFFERS from the rebuild'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
