"""A user's labelled text for training a classifier or a tagger, read with clear errors (CorpusError).

Two forms, told apart by their lines:
- sentence labels, CSV `text,label` (a header row `text,label` is skipped; the label is the last field, so a text may
  hold commas when it is quoted);
- word tags, one `word tag` per line (CoNLL: the first field is the word, the last the tag; any fields between are
  ignored, and a line of more than 4 fields must be tab-separated), a blank line between sentences.

Bounded: at most MAX_EXAMPLES sentences, MAX_WORDS words each (longer ones are cut), MAX_LABELS labels.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass

from explorer.data.user_text import MAX_CHARS, CorpusError
from explorer.data.vocab import clean_text, tokenize_words

MAX_EXAMPLES = 100_000
MAX_WORDS = 200
MAX_LABELS = 64


@dataclass(frozen=True)
class LabelledText:
    """The examples read: `task` "classify" (one label per sentence, position -1) or "tag" (a label per word);
    `examples`: (words, ((position, label id), …)); `labels`: the label names, first seen first."""

    task: str
    examples: list[tuple[list[str], list[tuple[int, int]]]]
    labels: list[str]

    def summary(self) -> str:
        """One sentence of what was read: sentences, words, labels and how often each occurs."""
        counts = [0] * len(self.labels)
        for _, targets in self.examples:
            for _, lab in targets:
                counts[lab] += 1
        what = "sentence labels" if self.task == "classify" else "word tags"
        each = ", ".join(f"{name} {n:,}" for name, n in zip(self.labels, counts))
        words = sum(len(w) for w, _ in self.examples)
        return f"{len(self.examples):,} sentences ({words:,} words) with {what}: {each}."


def read_labelled(text: str) -> LabelledText:
    """The examples of `text` in either form (see the module); CorpusError says what is wrong, with a line number."""
    if len(text) > MAX_CHARS:
        raise CorpusError(f"The text has {len(text):,} characters; the limit is {MAX_CHARS:,}.")
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    filled = [ln for ln in lines if ln.strip()]
    if not filled:
        raise CorpusError("No labelled text: paste CSV lines `text,label`, or `word tag` lines with a blank line "
                          "between sentences.")
    tagged = sum(1 for ln in filled if "," not in ln and ("\t" in ln.strip() or 2 <= len(ln.split()) <= 4))
    return _tags(lines) if tagged > len(filled) / 2 else _sentences(filled)


class _Labels:
    """Label names to ids, first seen first, at most MAX_LABELS."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def __call__(self, name: str, where: str) -> int:
        name = clean_text(name).strip()
        if not name:
            raise CorpusError(f"{where}: the label is empty.")
        if name not in self.ids:
            if len(self.ids) >= MAX_LABELS:
                raise CorpusError(f"{where}: more than {MAX_LABELS} different labels (is the label column right?).")
            self.ids[name] = len(self.ids)
        return self.ids[name]


def _sentences(lines: list[str]) -> LabelledText:
    labels = _Labels()
    examples: list[tuple[list[str], list[tuple[int, int]]]] = []
    for number, row in enumerate(csv.reader(lines), start=1):
        if number == 1 and [c.strip().lower() for c in row] == ["text", "label"]:
            continue
        if len(row) < 2:
            raise CorpusError(f"Line {number}: expected `text,label`, found no comma.")
        words = tokenize_words(clean_text(",".join(row[:-1])))[:MAX_WORDS]
        if not words:
            raise CorpusError(f"Line {number}: the text is empty.")
        examples.append((words, [(-1, labels(row[-1], f"Line {number}"))]))
        if len(examples) > MAX_EXAMPLES:
            raise CorpusError(f"More than {MAX_EXAMPLES:,} sentences: upload a smaller part.")
    return _checked(LabelledText("classify", examples, list(labels.ids)))


def _tags(lines: list[str]) -> LabelledText:
    labels = _Labels()
    examples: list[tuple[list[str], list[tuple[int, int]]]] = []
    words: list[str] = []
    targets: list[tuple[int, int]] = []
    for number, line in enumerate([*lines, ""], start=1):
        fields = line.split()
        if not fields:
            if words:
                examples.append((words[:MAX_WORDS], [(i, t) for i, t in targets if i < MAX_WORDS]))
                words, targets = [], []
                if len(examples) > MAX_EXAMPLES:
                    raise CorpusError(f"More than {MAX_EXAMPLES:,} sentences: upload a smaller part.")
            continue
        if len(fields) < 2:
            raise CorpusError(f"Line {number}: expected `word tag`, found one field ({fields[0][:40]!r}).")
        targets.append((len(words), labels(fields[-1], f"Line {number}")))
        words.append(clean_text(fields[0]).lower())
    return _checked(LabelledText("tag", examples, list(labels.ids)))


def _checked(read: LabelledText) -> LabelledText:
    if len(read.labels) < 2:
        raise CorpusError(f"Only one label was found ({read.labels[0] if read.labels else 'none'!r}): a classifier "
                          "needs at least two.")
    if len(read.examples) < 10:
        raise CorpusError(f"{len(read.examples)} labelled sentences: at least 10 are needed (one in ten is held out "
                          "to measure the accuracy).")
    return read
