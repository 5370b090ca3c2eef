"""What a task model decides: a classifier's labels for a sentence (or a sentence pair), or a tagger's label for
each token, read once when the model is loaded.

A task model is a language model's body with a task head instead of (or beside) an output layer over the
vocabulary: Hugging Face's `*ForSequenceClassification` / `*ForTokenClassification` (labels from `config.id2label`),
or a student's embedding -> nn.LSTM / nn.GRU / nn.RNN -> Linear(H or 2H -> C). What the weights cannot tell (how a
recurrent classifier pools its states into one vector, the label names) is read from a small JSON beside the
weights (`{"task": "classify" | "tag", "pooling": "last" | "mean" | "max" | "first", "labels": [...]}`), or
assumed, and `TaskHead.assumed` says what was.

The capability itself (explorer.adapters.protocols.Decides) is explorer.adapters.decision.Decider: this module is
what it decides, plain data.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from explorer.models.rnn_classifier import POOLINGS

TASKS = ("sequence-classification", "token-classification")
POOLING_WHAT = {
    "last": "the last state of each direction (h_n: the forward direction after the last token, the backward one "
            "after the first)",
    "mean": "the mean of the top layer's states over the tokens",
    "max": "the element-wise maximum of the top layer's states over the tokens",
    "first": "the top layer's state at the first token",
}
_TASK_WORDS = {"classify": TASKS[0], "classification": TASKS[0], "sentence": TASKS[0], "sequence": TASKS[0],
               "tag": TASKS[1], "tagging": TASKS[1], "token": TASKS[1], "word": TASKS[1], **{t: t for t in TASKS}}
MAX_LABELS = 4096
MAX_LABEL_CHARS = 80


@dataclass(frozen=True)
class TaskHead:
    """What a task model decides. task: "sequence-classification" (one label per input) or "token-classification"
    (one per token); labels (C,): the label names in id order; pooling: how a sentence is read into one vector
    (a key of POOLING_WHAT, or the model's own description, e.g. "[CLS] through BERT's pooler"); pairs: it reads a
    sentence pair (two segments) as well as one sentence; assumed: what was not in the files and was assumed, one
    sentence each."""

    task: str
    labels: tuple[str, ...]
    pooling: str
    pairs: bool = False
    assumed: tuple[str, ...] = ()
    source: str = ""  # where the head was read, e.g. "classifier.weight (2, 384)"

    @property
    def per_token(self) -> bool:
        return self.task == TASKS[1]

    def what(self) -> str:
        """One line for the page, e.g. "a sentence classifier with 2 labels (negative, positive)"."""
        kind = "a word tagger" if self.per_token else "a sentence classifier"
        shown = ", ".join(self.labels[:6]) + (", …" if len(self.labels) > 6 else "")
        return f"{kind} with {len(self.labels)} label{'s' if len(self.labels) != 1 else ''} ({shown})"

    def rows(self) -> tuple[tuple[str, str], ...]:
        """(what, value) rows of "What was read from the model"."""
        rows = [("task", self.what()), ("labels", ", ".join(f"{i}: {lab}" for i, lab in enumerate(self.labels)))]
        if not self.per_token:
            rows.append(("pooling", POOLING_WHAT.get(self.pooling, self.pooling)))
        if self.source:
            rows.append(("task head", self.source))
        rows += [("assumed", a) for a in self.assumed]
        return tuple(rows)


def label_names(n: int, given: object) -> tuple[tuple[str, ...], str]:
    """The names of n labels from `given` (a list, or a {id: name} map as config.id2label is), each cut to
    MAX_LABEL_CHARS, and what was assumed ("" when `given` named them all). Names Hugging Face makes up when a
    config sets none (LABEL_0, LABEL_1, ...) count as not given."""
    names: dict[int, str] = {}
    if isinstance(given, (list, tuple)):
        names = {i: str(v) for i, v in enumerate(given[:n])}
    elif isinstance(given, Mapping):
        for k, v in list(given.items())[:MAX_LABELS]:
            try:
                names[int(k)] = str(v)
            except (TypeError, ValueError):
                continue
    names = {i: " ".join(v.split())[:MAX_LABEL_CHARS] for i, v in names.items() if 0 <= i < n and v.strip()}
    generic = all(v == f"LABEL_{i}" for i, v in names.items())
    if len(names) == n and not generic:
        return tuple(names[i] for i in range(n)), ""
    made = tuple(names.get(i, f"label {i}") if not generic else f"label {i}" for i in range(n))
    why = "no label names were saved with it" if not names or generic else \
        f"names were saved for {len(names)} of its {n} labels"
    return made, f"Labels: {why}, so they are shown as {', '.join(made[:4])}{', …' if n > 4 else ''}."


def task_settings(meta: Mapping[str, object] | None) -> dict[str, object]:
    """The task settings of a JSON beside a student's weights ({} when there are none): task, pooling, labels."""
    found = (meta or {}).get("task_settings")
    return dict(found) if isinstance(found, Mapping) else {}


def settings_from_json(obj: object) -> dict[str, object] | None:
    """The task settings a JSON object holds ("task", "pooling", "labels" or "id2label"), or None when it holds none
    of them. Raises ValueError naming a value that is not one of the allowed ones."""
    if not isinstance(obj, Mapping) or not ({"task", "pooling", "labels", "id2label"} & set(obj)):
        return None
    out: dict[str, object] = {}
    if "task" in obj:
        task = _TASK_WORDS.get(str(obj["task"]).strip().lower())
        if task is None:
            raise ValueError(f"'task' must be classify or tag; got '{str(obj['task'])[:40]}'.")
        out["task"] = task
    if "pooling" in obj:
        pooling = str(obj["pooling"]).strip().lower()
        if pooling not in POOLINGS:
            raise ValueError(f"'pooling' must be one of {', '.join(POOLINGS)}; got '{pooling[:40]}'.")
        out["pooling"] = pooling
    labels = obj.get("labels", obj.get("id2label"))
    if labels is not None:
        if not isinstance(labels, (list, tuple, Mapping)) or len(labels) > MAX_LABELS:
            raise ValueError(f"'labels' must be a list of at most {MAX_LABELS:,} names (or an id -> name map).")
        out["labels"] = list(labels) if isinstance(labels, (list, tuple)) else dict(labels)
    return out



def what_it_is(loaded: object) -> str:
    """"a sentence classifier with 2 labels (negative, positive)" when `loaded` (a LoadedModel) is a task model: its
    decision's head, or the task its Hugging Face config was saved for where a view loaded it for another task
    (meta["saved_task"]); "" otherwise."""
    caps = getattr(loaded, "caps", None)
    decision = getattr(caps, "decision", None)
    if decision is not None:
        return str(decision.head.what())
    meta = getattr(loaded, "meta", None) or {}
    task = meta.get("saved_task")
    if task not in TASKS:
        return ""
    config = getattr(getattr(loaded, "model", None), "config", None)
    n = getattr(config, "num_labels", None)
    n = n if isinstance(n, int) and 0 < n <= MAX_LABELS else len(getattr(config, "id2label", None) or {}) or 2
    labels, _ = label_names(n, getattr(config, "id2label", None))
    return TaskHead(str(task), labels, "", pairs=False).what()


def not_a_language_model(loaded: object, does: str) -> str:
    """The message of a view that needs a language model, for a task model ("" for any other model): what the model
    is and that it `does` nothing of the kind, e.g. "builtin:x is a sentence classifier with 2 labels (…): it
    predicts no next word. The Decision view shows what it decides."."""
    what = what_it_is(loaded)
    if not what:
        return ""
    return f"{getattr(loaded, 'id', 'This model')} is {what}: it {does}. The Decision view shows what it decides."
