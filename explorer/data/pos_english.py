"""Part of speech in context: WordNet 3.0's example sentences, each with the word it illustrates marked, labelled
with that word's part of speech and supersense (the corpus of `builtin:pos-bilstm`).

Each example sentence in a WordNet gloss ("he ran back to the house") illustrates one synset: its lemmas, its part
of speech (the data file: noun, verb, adj, adv; adjective satellites 's' count as adjective) and its lexicographer
file (field 2 of a data line, 00-44: the supersense, such as noun.animal or verb.motion, SUPERSENSES). This module
reads Debian's `wordnet-base` files (/usr/share/wordnet/data.{noun,verb,adj,adv} and the exception lists
{noun,verb,adj,adv}.exc, the same files as explorer.data.wordnet_english) and finds, in each example's word tokens
(explorer.data.vocab.tokenize_words), where a one-word lemma of its synset stands: the lemma itself, a regular
inflection of its part of speech (forms()) or an irregular one from the exception list ("ran" for run). A sentence is
kept when exactly one position is found; each (sentence, position) once, the first synset's label winning. The
labels come from WordNet's lexicographers (the synset an example belongs to), not from a tagger.

    apt-get install wordnet-base
    python -m explorer.data.pos_english build     # writes ASSET
    python -m explorer.data.pos_english check     # exit status 0 when ASSET is byte for byte the rebuild

ASSET (from wordnet-base 1:3.0-37) holds one example a line, label<TAB>supersense<TAB>lemma<TAB>index<TAB>sentence
(a Row; index counts tokenize_words(sentence)), in the order of the data files (noun, verb, adj, adv). An example
is held out as WordNet's lines are (explorer.data.wordnet_english.held_out on the sentence: the first 8 hex digits
of its SHA-256 ≡ 0 mod HELDOUT_EVERY = 20), so a sentence held out here is held out of the wordnet-english corpus
too. `examples(split)` gives (words, index, label) for "train" or "heldout".

Of WordNet's 48,247 (synset, example) pairs, 43,022 have exactly one such position (4,819 none: the example shows a
multi-word lemma or a form no rule finds; 406 more than one), 42,960 (sentence, position) pairs once: 10,173 noun,
10,873 verb, 18,312 adjective, 3,602 adverb; 2,127 held out (493, 553, 895, 186). 2,034 marked words occur under two
or more labels (run: 14 noun, 22 verb; back under all four; 11,322 examples mark one of them): context decides.
"""
from __future__ import annotations

import functools
import gzip
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import NamedTuple

from explorer.data import wordnet_english as W
from explorer.data.vocab import tokenize_words
from explorer.runtime.paths import app_root

ROOT = app_root()
ASSET = ROOT / "assets" / "corpus" / "pos-english.tsv.gz"
LABELS = ("noun", "verb", "adjective", "adverb")
HELDOUT_EVERY = W.HELDOUT_EVERY
PARTS = {"noun": "noun", "verb": "verb", "adj": "adjective", "adv": "adverb"}  # data file -> label
SUPERSENSES = (
    "adj.all", "adj.pert", "adv.all", "noun.Tops", "noun.act", "noun.animal", "noun.artifact", "noun.attribute",
    "noun.body", "noun.cognition", "noun.communication", "noun.event", "noun.feeling", "noun.food", "noun.group",
    "noun.location", "noun.motive", "noun.object", "noun.person", "noun.phenomenon", "noun.plant", "noun.possession",
    "noun.process", "noun.quantity", "noun.relation", "noun.shape", "noun.state", "noun.substance", "noun.time",
    "verb.body", "verb.change", "verb.cognition", "verb.communication", "verb.competition", "verb.consumption",
    "verb.contact", "verb.creation", "verb.emotion", "verb.motion", "verb.perception", "verb.possession",
    "verb.social", "verb.stative", "verb.weather", "adj.ppl",
)  # WordNet's lexicographer files 00-44 (lexnames(5WN))
_VOWELS = frozenset("aeiou")


class Row(NamedTuple):
    """One example: its label (LABELS), supersense (SUPERSENSES), the lemma found, the word's position (index) in
    tokenize_words(sentence), and the sentence as WordNet has it."""

    label: str
    supersense: str
    lemma: str
    position: int
    sentence: str


def forms(lemma: str, label: str) -> set[str]:
    """The regular inflections of `lemma` as a `label`, with the lemma: noun +s/es (y -> ies); verb +s/es/d/ed/ing
    (y -> ies/ied, e dropped before ing, a final consonant doubled); adjective and adverb +r/er/st/est (y -> ier/iest,
    a final consonant doubled)."""
    out = {lemma}
    stem_y = lemma[:-1] if lemma.endswith("y") and len(lemma) > 2 and lemma[-2] not in _VOWELS else None
    double = (len(lemma) >= 3 and lemma[-1] not in _VOWELS | {"w", "x", "y"} and lemma[-2] in _VOWELS
              and lemma[-3] not in _VOWELS)
    if label == "noun":
        out |= {lemma + "s", lemma + "es"} | ({stem_y + "ies"} if stem_y else set())
    elif label == "verb":
        out |= {lemma + "s", lemma + "es", lemma + "ed", lemma + "ing"}
        if lemma.endswith("e"):
            out |= {lemma + "d", lemma[:-1] + "ing"}
        if stem_y:
            out |= {stem_y + "ies", stem_y + "ied"}
        if double:
            out |= {lemma + lemma[-1] + "ed", lemma + lemma[-1] + "ing"}
    else:
        out |= {lemma + "er", lemma + "est"}
        if lemma.endswith("e"):
            out |= {lemma + "r", lemma + "st"}
        if stem_y:
            out |= {stem_y + "ier", stem_y + "iest"}
        if double:
            out |= {lemma + lemma[-1] + "er", lemma + lemma[-1] + "est"}
    return out


def exceptions(folder: Path, part: str) -> dict[str, set[str]]:
    """WordNet's irregular forms of `part` (its .exc file, 'ran run'): base -> {inflected forms}; empty when the
    file is absent."""
    out: dict[str, set[str]] = defaultdict(set)
    path = folder / f"{part}.exc"
    if path.is_file():
        for line in path.read_text("utf-8").splitlines():
            inflected, *bases = line.split()
            for base in bases:
                out[base].add(inflected)
    return out


def _lemma(word: str) -> str:
    """A data line's word as text: 'take_a_breath' -> 'take a breath', an adjective's marker '(p)' cut."""
    return word.split("(")[0].replace("_", " ").lower()


def read_examples(folder: Path | None = None) -> list[Row]:
    """The Row of every example sentence of WordNet's data files in `folder` in which exactly one word token is a
    form of a one-word lemma of its synset, each (sentence, index) once (the first synset's), in file order."""
    folder = folder or W.wordnet_dir()
    out: dict[tuple[str, int], tuple[str, str, str]] = {}
    for part, label in PARTS.items():
        irregular = exceptions(folder, part)
        with open(folder / f"data.{part}", encoding="utf-8", errors="strict") as f:
            for line in f:
                if line.startswith("  ") or " | " not in line:  # the licence header, or a synset without a gloss
                    continue
                fields, gloss = line.split(" | ", 1)
                head = fields.split()
                lexfile, count = int(head[1]), int(head[3], 16)
                words: dict[str, str] = {}  # a form -> its lemma (the first, in the data line's order)
                for lemma in dict.fromkeys(_lemma(head[4 + 2 * i]) for i in range(count)):
                    if len(tokenize_words(lemma)) == 1:
                        for form in sorted(forms(lemma, label) | irregular.get(lemma, set())):
                            words.setdefault(form, lemma)
                for sentence in W.parse_gloss(gloss)[1]:
                    tokens = tokenize_words(sentence)
                    hits = [i for i, w in enumerate(tokens) if w in words]
                    if len(hits) == 1:
                        out.setdefault((sentence, hits[0]), (label, SUPERSENSES[lexfile], words[tokens[hits[0]]]))
    return [Row(label, sense, lemma, index, sentence) for (sentence, index), (label, sense, lemma) in out.items()]


def encode(data: list[Row]) -> bytes:
    """ASSET's bytes: one Row a line, its fields tab-separated, gzipped (explorer.data.wordnet_english.encode)."""
    return W.encode(["\t".join(map(str, row)) for row in data])


@functools.lru_cache(maxsize=1)
def rows() -> tuple[Row, ...]:
    """The shipped rows, in order."""
    with gzip.open(ASSET, "rt", encoding="utf-8") as f:
        out = []
        for line in f.read().splitlines():
            label, sense, lemma, index, sentence = line.split("\t")
            out.append(Row(label, sense, lemma, int(index), sentence))
        return tuple(out)


@functools.lru_cache(maxsize=2)
def tagged(split: str = "train") -> tuple[tuple[tuple[str, ...], int, str, str], ...]:
    """(words, index, label, supersense) of every example of `split` ("train" or "heldout"), in order."""
    if split not in ("train", "heldout"):
        raise ValueError(f"split must be 'train' or 'heldout', not {split!r}")
    want = split == "heldout"
    return tuple((tuple(sys.intern(w) for w in tokenize_words(r.sentence)), r.position, r.label, r.supersense)
                 for r in rows() if W.held_out(r.sentence) == want)


def examples(split: str = "train") -> list[tuple[tuple[str, ...], int, str]]:
    """(words, index of the marked word, label) of every example of `split` ("train" or "heldout")."""
    return [(words, index, label) for words, index, label, _ in tagged(split)]


def ambiguity(data: list[Row] | tuple[Row, ...]) -> dict[str, set[str]]:
    """The marked words (the token itself, as written) found under two or more labels: word -> its labels."""
    labels: dict[str, set[str]] = defaultdict(set)
    for r in data:
        labels[tokenize_words(r.sentence)[r.position]].add(r.label)
    return {w: s for w, s in labels.items() if len(s) > 1}


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in ("build", "check"):
        print("usage: python -m explorer.data.pos_english build|check", file=sys.stderr)
        return 2
    try:
        data = read_examples()
    except FileNotFoundError as exc:
        print(f"{exc}: install Debian's wordnet-base (apt-get install wordnet-base) or set EXPLORER_WORDNET_DIR",
              file=sys.stderr)
        return 1
    raw = encode(data)
    if argv[0] == "check":
        same = ASSET.is_file() and ASSET.read_bytes() == raw
        print(f"{ASSET}: {'the same bytes as the rebuild' if same else 'DIFFERS from the rebuild'}")
        return 0 if same else 1
    ASSET.parent.mkdir(parents=True, exist_ok=True)
    ASSET.write_bytes(raw)
    counts = Counter(r.label for r in data)
    held = Counter(r.label for r in data if W.held_out(r.sentence))
    print(f"wrote {ASSET} ({len(raw):,} bytes): {len(data):,} examples, "
          + ", ".join(f"{counts[x]:,} {x} ({held[x]:,} held out)" for x in LABELS)
          + f"; {len(ambiguity(data)):,} words under two or more labels")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
