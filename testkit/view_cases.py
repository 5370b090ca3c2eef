"""How the tests and benches drive each view, in one table keyed by URL path (explorer.views.VIEWS).

Adding a view adds one entry here (tests/test_view_cases.py fails until it exists); the hostile-text, unknown-word,
badge and browser tests and bench/bench_browser.py read their cases from it instead of keeping lists of their own.
"""
from __future__ import annotations

from dataclasses import dataclass

NOTHING = "The text has no characters the model can read (only control, format or combining characters)"
NOTHING_TOKENIZED = "The model's tokenizer reads no token in this text"
UNK_PIECES = "unknown to the tokenizer and shown as [UNK]"  # MiniLM: a lone combining mark or skin tone is [UNK]
TYPE = "Type a sentence to see the model's internals."


@dataclass(frozen=True)
class Hostile:
    """What a view that reads a sentence says about hostile text (tests/test_hostile_text.py): opened with `params`,
    `empty` once control characters are dropped, `marks` for only combining marks, `long` for 3,000 words,
    `unknown` for words the model does not know; `subword`: a word-piece model that reads any script; `unreadable`:
    what it says of text with characters that its reading removes (only whitespace, control or format characters),
    when that differs from `empty` (a tokenizer reads the text as typed and says its normalisation removed it)."""

    params: dict[str, str]
    empty: str
    marks: str
    long: str
    unknown: str
    subword: bool
    unreadable: str = ""


@dataclass(frozen=True)
class ViewCase:
    """One view's cases.

    hostile: its hostile-text expectations (None: the view reads no sentence).
    word_level: a built-in word-level model it offers (None: its default model) and the extra URL state that reaches
        its sentence, for the unknown-word test (tests/test_examples.py).
    panels: URL states that together show every panel and mode (tests/test_app_pages.py: every chart under a badge).
    typing: the query of the typing bench and test: the view's main chart shows the typed noun (None: no sentence).
    """

    hostile: Hostile | None = None
    word_level: tuple[str | None, dict[str, str]] | None = None
    panels: tuple[dict[str, str], ...] = ()
    typing: str | None = None


CASES: dict[str, ViewCase] = {
    "overview": ViewCase(),
    "catalogue": ViewCase(),
    "lesson-plans": ViewCase(),
    "training-curves": ViewCase(panels=({"model": "builtin:lstm-lm"}, {"model": "builtin:tiny-gpt",
                                                                        "score": "induction"})),
    "lstm-gates": ViewCase(
        hostile=Hostile({"model": "builtin:lstm-lm"}, TYPE, NOTHING,
                        "The text has 3,000 tokens; only the first 511 are used", "are shown as <unk>", False),
        word_level=("builtin:lstm-lm", {}),
        panels=tuple({"section": s} for s in ("One unit + equations", "Gate saturation", "Next tokens",
                                              "Compare two sentences")),
        typing="model=builtin:lstm-lm"),
    "self-attention": ViewCase(
        hostile=Hostile({"model": "pretrained:minilm"}, TYPE, UNK_PIECES,  # cut below MiniLM's 512 by the budget
                        "are used (this server's budget per request", UNK_PIECES, True, NOTHING_TOKENIZED),
        word_level=("builtin:tiny-gpt", {}),
        panels=(*({"mode": m} for m in ("head", "model", "steps", "masks", "compare")),
                {"mode": "head", "agg": "rollout", "hide": "1"}),
        typing="model=pretrained:minilm"),
    "seq2seq": ViewCase(
        hostile=Hostile({"model": "builtin:seq2seq-bahdanau"}, "Type a source sentence to decode it.", NOTHING,
                        "The source has 3,000 tokens; only the first 400 are used",
                        "are not in the model's vocabulary and are read as <unk>", False),
        word_level=("builtin:seq2seq-bahdanau", {}),
        panels=({}, {"panel": "length"}, {"decoding": "beam", "panel": "beam"}, {"model": "builtin:seq2seq-none"}),
        typing="model=builtin:seq2seq-bahdanau",  # an unknown source word is labelled "noun→<unk>"
    ),
    "word-embeddings": ViewCase(
        hostile=Hostile({"model": "builtin:word2vec"}, "Type some words to highlight them in the projection.",
                        "are not entries of the table", "Only the first 64 distinct words are highlighted.",
                        "of the table (builtin:word2vec", False),
        word_level=("builtin:word2vec", {}),
        panels=({},)),
    "decoding-strategies": ViewCase(
        hostile=Hostile({"model": "builtin:tiny-gpt"},
                        "Empty prompt: generation starts from the beginning-of-sequence", NOTHING,
                        "The text has 3,000 tokens; only the first 63 are used", "are shown as <unk>", False),
        word_level=("builtin:tiny-gpt", {"max_new": "3", "n": "1"}),
        panels=({},),
        typing="model=builtin:tiny-gpt"),  # the main chart's title quotes the prompt's end
    "positional-encodings": ViewCase(
        hostile=Hostile({"model": "pretrained:minilm", "panel": "sentence"}, TYPE, UNK_PIECES,
                        "only the first 512 are used", UNK_PIECES, True, NOTHING_TOKENIZED),
        word_level=("builtin:tiny-gpt", {"panel": "sentence"}),
        panels=tuple({"panel": p} for p in ("sinusoidal", "similarity", "rope", "learned", "sentence")),
        typing="model=pretrained:minilm&panel=sentence"),
    "masked-words": ViewCase(
        hostile=Hostile({"model": "builtin:masked-lm", "b": ""}, TYPE, NOTHING,
                        "The text has 3,000 tokens; only the first 62 are used", "are shown as <unk>", False),
        word_level=("builtin:masked-lm", {}),
        panels=({}, {"b": "", "text": "the [MASK] to the [MASK] are here ."}),
        typing="model=builtin:masked-lm&b="),
    "decision": ViewCase(
        hostile=Hostile({"model": "builtin:sentiment-lstm", "b": ""}, TYPE, NOTHING,
                        "The text has 3,000 tokens; only the first 511 are used", "are shown as <unk>", False),
        word_level=("builtin:sentiment-lstm", {"b": ""}),
        panels=({}, {"foil": "0", "label": "1", "method": "gradient × input"},
                {"model": "builtin:pos-bilstm", "text": "they went for a long run ."}),
        typing="model=builtin:sentiment-lstm&b="),
    "logit-lens": ViewCase(
        hostile=Hostile({"model": "builtin:tiny-gpt"}, TYPE, NOTHING,
                        "The text has 3,000 tokens; only the first 63 are used (the model's limit)",
                        "are shown as <unk>", False),
        word_level=("builtin:tiny-gpt", {}),
        panels=({},),
        typing="model=builtin:tiny-gpt"),
    "token-attribution": ViewCase(
        hostile=Hostile({"model": "builtin:tiny-gpt"}, TYPE, NOTHING,
                        "The text has 3,000 tokens; only the first 63 are used (the model's limit)",
                        "are shown as <unk>", False),
        word_level=("builtin:tiny-gpt", {"steps": "2"}),
        panels=({}, {"method": "gradient × input"}, {"method": "lrp", "foil": "second"},
                {"model": "builtin:seq2seq-bahdanau", "text": "the red car is fast ."}),
        typing="model=builtin:tiny-gpt"),
    "interventions": ViewCase(
        hostile=Hostile({"model": "builtin:tiny-gpt"}, "Type the clean prompt", NOTHING,
                        "are used (this view's limit)", "are shown as <unk>", False),
        word_level=("builtin:tiny-gpt", {}),
        panels=({}, {"site": "heads", "method": "both", "ablate": "L1H1,L0MLP"},
                {"model": "builtin:lstm-lm", "site": "c", "direction": "noise", "ablate": "L0U5", "how": "mean"}),
        typing=None),  # a typed clean prompt alone paints no grid: the corrupted one must match its length
    "gradients-through-time": ViewCase(
        hostile=Hostile({}, TYPE, NOTHING, "The text has 3,000 tokens; only the first 79 are used (this view's limit)",
                        "are shown as <unk>", False),
        word_level=(None, {}),
        panels=({},),
        typing=""),  # the last word is the prediction, named on the main chart's y axis
}
