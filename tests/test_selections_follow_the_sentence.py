"""Every selector that names a token of the sentence follows the sentence (explorer.ui.state.Controls.token): typed a
new sentence, it points at the same token in the new one (the same occurrence, else the first), else at the view's
default; its options and the captions name only tokens of the sentence on screen. Built-in models, AppTest."""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Callable

import pytest

from conftest import assert_no_exception, run_page
from explorer.adapters.generation import Strategy
from explorer.loading.loaders import load_model
from explorer.probes import interventions as I
from explorer.probes.decoding_strategies import decode_all
from explorer.probes.masked_words import words_of
from explorer.probes.self_attention import default_query
from explorer.probes.seq2seq import alignment_trace
from explorer.probes.token_attribution import attribution
from explorer.text.escape import md_unescape
from explorer.ui.state import token_value
from explorer.viz import interventions as IV
from explorer.viz.tokens import labels as display_tokens
from testkit.fragments import fragment_ids, page_states, run_fragment

KEYS = "the keys to the old cabinet are on the table ."
DOG = "the old dog sleeps on the table ."
CORRUPT = "the key to the cabinet"  # the preset corrupted prompt of "the keys to the cabinet" (6 tokens)


@functools.cache
def model(model_id: str):
    return load_model(model_id)


def encoded(model_id: str) -> Callable[[str], tuple[str, ...]]:
    return lambda text: tuple(model(model_id).adapter.encode(text).tokens)


@functools.cache
def outputs(text: str) -> tuple[str, ...]:
    return attribution(model("builtin:tiny-gpt"), text, "", 32, "all").outputs


@functools.cache
def translation(text: str) -> tuple[str, ...]:
    return tuple(alignment_trace(model("builtin:seq2seq-bahdanau"), text, "", "greedy", 4).out_tokens)


@functools.cache
def greedy(text: str) -> tuple[str, ...]:
    return decode_all(model("builtin:tiny-gpt"), text, (Strategy("greedy"),), 0, 30, 1, True).generations[0] \
        .outputs[0].tokens


@functools.cache
def grid(text: str):
    return I.patching(model("builtin:tiny-gpt"), text, CORRUPT, "are", "is", "resid", "denoise", -1, "fwd")


def columns(text: str) -> tuple[str, ...]:
    c = I.contrast(model("builtin:tiny-gpt"), text, CORRUPT, "are", "is")
    return tuple(IV.columns(grid(text), c.corrupt_tokens))


def query(text: str) -> int:
    enc = model("builtin:tiny-gpt").adapter.encode(text)
    return default_query(tuple(enc.tokens), tuple(enc.special))


@dataclass(frozen=True)
class Case:
    """A view's token selector `key`, opened on texts[0]: `pick` (value, token) is chosen, texts[1] typed, and the
    selector must point at `follows` (value, the same token); then `drop` (value, token), a token of texts[1] that
    texts[2] lacks, is chosen and texts[2] typed: the selector must be the view's `default` for texts[2]."""

    page: str
    params: dict[str, str]
    key: str
    tokens: Callable[[str], tuple[str, ...]]  # what the selector indexes, for a sentence
    default: Callable[[str], int]
    texts: tuple[str, str, str]
    pick: tuple[int, str]
    follows: tuple[int, str]
    drop: tuple[int, str]
    label: Callable[[int, tuple[str, ...]], str] | None = None  # an option's label (None: a slider)
    extra: Callable[[int, tuple[str, ...]], list[int]] = field(default=lambda n, t: [])  # options that are no token
    first: int = 0  # value v is token v - first


TINY = {"model": "builtin:tiny-gpt"}
CASES = {
    "logit-lens pos": Case(
        "app_pages/logit_lens.py", TINY, "pos", encoded("builtin:tiny-gpt"), lambda s: len(encoded(
            "builtin:tiny-gpt")(s)) - 1, (KEYS, DOG, KEYS), (10, "table"), (7, "table"), (3, "dog"),
        label=lambda i, t: f"after token {i}: {t[i]}"),
    "logit-lens pos, a repeated token": Case(  # the third "the" of A: B has two, so the first
        "app_pages/logit_lens.py", TINY, "pos", encoded("builtin:tiny-gpt"), lambda s: len(encoded(
            "builtin:tiny-gpt")(s)) - 1, (KEYS, DOG, KEYS), (9, "the"), (1, "the"), (4, "sleeps"),
        label=lambda i, t: f"after token {i}: {t[i]}"),
    "token-attribution out": Case(
        "app_pages/token_attribution.py", {**TINY, "outputs": "all"}, "out", outputs,
        lambda s: len(outputs(s)) - 1, (KEYS, DOG, KEYS), (9, "table"), (6, "table"), (2, "dog"),
        label=lambda i, t: f"onto output {i}: {t[i]}" + (" (the model's prediction)" if i == len(t) - 1 else "")),
    "self-attention token": Case(
        "app_pages/self_attention.py", {**TINY, "mode": "head"}, "token", encoded("builtin:tiny-gpt"), query,
        (KEYS, DOG, KEYS), (10, "table"), (7, "table"), (3, "dog"),
        label=lambda i, t: "all query tokens" if i < 0 else f"query {i}: {display_tokens(t)[i]}",
        extra=lambda n, t: [-1]),
    "lstm-gates t": Case(
        "app_pages/lstm_gates.py", {"model": "builtin:lstm-lm"}, "t", encoded("builtin:lstm-lm"), lambda s: 0,
        (KEYS, DOG, KEYS), (10, "table"), (7, "table"), (3, "dog"), label=lambda i, t: f"{i} · {t[i]}"),
    "interventions pos": Case(
        "app_pages/interventions.py", {**TINY, "site": "heads"}, "pos", encoded("builtin:tiny-gpt"), lambda s: -1,
        ("the keys to the cabinet", "keys to the old cabinet", "the keys to the cabinet"), (3, "to"), (2, "to"),
        (4, "old"), label=lambda i, t: "every position" if i < 0 else f"position {i}: {t[i]}",
        extra=lambda n, t: [-1]),
    "interventions col": Case(
        "app_pages/interventions.py", TINY, "col", columns, lambda s: grid(s).strongest()[1],
        ("the keys to the cabinet", "keys to the old cabinet", "the keys to the cabinet"), (5, "cabinet"),
        (5, "cabinet"), (4, "old/the"), label=lambda i, t: t[i]),
    "masked-words mask": Case(
        "app_pages/masked_words.py", {"model": "builtin:masked-lm"}, "mask", lambda s: tuple(words_of(s)),
        lambda s: -1, (KEYS, DOG, KEYS), (9, "table"), (6, "table"), (2, "dog"),
        label=lambda i, t: "the [MASK]s typed" if i < 0 else f"mask {i}: {t[i]}", extra=lambda n, t: [-1]),
    "seq2seq step": Case(
        "app_pages/seq2seq.py", {"model": "builtin:seq2seq-bahdanau"}, "step", translation, lambda s: 0,
        ("the red car is fast .", "the old wooden table is in the kitchen .", "the red car is fast ."),
        (3, "est"), (4, "est"), (7, "cuisine")),
    "decoding step": Case(
        "app_pages/decoding_strategies.py", {**TINY, "strategies": "greedy"}, "step", greedy, lambda s: 1,
        ('the teacher said : " the children', "the keys to the old cabinet", "the dog that the farmers feed"),
        (6, "very"), (2, "very"), (3, "short"), first=1),
    "positional-encodings tok": Case(
        "app_pages/positional_encodings.py", {**TINY, "panel": "sentence"}, "tok", encoded("builtin:tiny-gpt"),
        lambda s: 0, (KEYS, DOG, KEYS), (10, "table"), (7, "table"), (3, "dog")),
}


def widget(at, case: Case):
    return at.selectbox(key=case.key) if case.label is not None else at.slider(key=case.key)


def type_sentence(at, text: str) -> None:
    at.text_input(key="text").set_value(text).run()
    assert_no_exception(at)


def shown(at, case: Case, text: str) -> None:
    """The selector's options name the tokens of `text` and nothing else; its value is in the URL."""
    w = widget(at, case)
    tokens = case.tokens(text)
    if case.label is not None:
        values = [*case.extra(len(tokens), tokens), *range(case.first, case.first + len(tokens))]
        assert list(w.options) == [case.label(v, tokens) for v in values]
    else:
        assert w.max in (case.first + len(tokens) - 1, max(case.first + len(tokens) - 1, 2))
    assert at.query_params[case.key] in (str(w.value), [str(w.value)])


def quoted(at) -> str:
    """Every caption, Markdown block and subheader on the page, as text, but "What to notice" (computed on the
    model's own example sentences, which it quotes as such)."""
    notice = {e.value for x in at.expander if x.label == "What to notice" for e in x.markdown}
    return " ".join(md_unescape(e.value) for kind in ("caption", "markdown", "subheader") for e in at.get(kind)
                    if e.value not in notice)


def names_none_of(at, gone: set[str]) -> None:
    """No caption or Markdown names a token of the last sentence that the new one lacks: neither quoted (“keys”,
    how the pages name a token) nor, in a caption, as a word (words of four letters or more), but in a quoted
    example sentence of the model's, which a caption names as such."""
    example = re.compile(r"\bexample “[^”]*”")  # the model's own example sentence, named as such, not the typed one
    text = example.sub("", quoted(at))
    captions = example.sub("", " ".join(md_unescape(e.value) for e in at.caption))
    for token in gone:
        assert f"“{token}”" not in text, token
        if len(token) >= 4 and token.isalpha():
            assert not re.search(rf"\b{re.escape(token)}\b", captions), token


@pytest.mark.parametrize("name", list(CASES))
def test_a_selection_follows_the_sentence(name: str) -> None:
    case = CASES[name]
    a, b, c = case.texts
    ta, tb, tc = case.tokens(a), case.tokens(b), case.tokens(c)
    # the cases say what they test: the picked token is in both sentences, the dropped one only in the second
    assert ta[case.pick[0] - case.first] == tb[case.follows[0] - case.first] == case.pick[1] == case.follows[1]
    assert tb[case.drop[0] - case.first] == case.drop[1] and case.drop[1] not in tc
    assert case.pick[0] != case.default(a) and case.drop[0] != case.default(b)

    at = run_page(case.page, {**case.params, "text": a})
    assert_no_exception(at)
    shown(at, case, a)
    widget(at, case).set_value(case.pick[0]).run()
    assert_no_exception(at)
    assert widget(at, case).value == case.pick[0]

    type_sentence(at, b)  # the token picked in A is in B: the selector points at it there
    assert widget(at, case).value == case.follows[0], (case.follows, widget(at, case).value)
    shown(at, case, b)
    names_none_of(at, set(ta) - set(tb))

    widget(at, case).set_value(case.drop[0]).run()
    assert_no_exception(at)
    type_sentence(at, c)  # the token picked in B is not in C: the view's default
    assert widget(at, case).value == case.default(c)
    shown(at, case, c)
    names_none_of(at, set(tb) - set(tc))


def test_captions_are_those_of_the_token_followed() -> None:
    """The logit lens's captions and bar chart name the token the selector points at after the sentence changed."""
    at = run_page("app_pages/logit_lens.py", {**TINY, "text": KEYS})
    at.selectbox(key="pos").set_value(10).run()
    type_sentence(at, DOG)
    assert at.selectbox(key="pos").value == 7
    assert any(md_unescape(e.value).startswith("The model's own prediction after “table” is") for e in at.caption)


def test_typed_in_the_self_attention_fragment() -> None:
    """Self-attention's sentence and query menu are one st.fragment: typing reruns the fragment only, and the query
    follows the token there too."""
    at = run_page("app_pages/self_attention.py", {**TINY, "mode": "head", "text": KEYS, "token": "10"})
    assert at.selectbox(key="token").options[11] == "query 10: table"
    page = page_states(at)
    [fid] = fragment_ids(at)
    at.text_input(key="text").set_value(DOG)
    run_fragment(at, fid, page)
    assert_no_exception(at)
    assert at.selectbox(key="token").value == 7 and at.selectbox(key="token").options[8] == "query 7: table"
    assert at.query_params["token"] in ("7", ["7"])
    live = [md_unescape(e.value) for e in at.caption if md_unescape(e.value).startswith("Live:")]
    assert live and "“table” gives its largest weight" in live[0]


def test_a_selector_not_drawn_while_the_sentence_changed() -> None:
    """The recurrent cell's token menu is drawn in one section only: typed while another section is open, it follows
    the sentence from the value it left in the URL when its section comes back."""
    at = run_page("app_pages/lstm_gates.py", {"model": "builtin:lstm-lm", "text": KEYS})
    at.selectbox(key="t").set_value(10).run()
    at.radio(key="section").set_value("Next tokens").run()
    assert not [w for w in at.selectbox if w.key == "t"]
    type_sentence(at, DOG)
    at.radio(key="section").set_value("One unit + equations").run()
    assert_no_exception(at)
    assert at.selectbox(key="t").value == 7 and at.selectbox(key="t").options[7] == "7 · table"


def test_an_untouched_selection_stays_the_default() -> None:
    """A selector never moved from its default (the logit lens's last token) takes the new sentence's default: the
    last token of the new sentence, not the token the old default pointed at."""
    at = run_page("app_pages/logit_lens.py", {**TINY, "text": DOG})
    assert at.selectbox(key="pos").value == 8
    type_sentence(at, KEYS)
    assert at.selectbox(key="pos").value == 11
    assert at.query_params["pos"] in ("11", ["11"])


def test_a_link_sets_the_selection_for_its_own_sentence() -> None:
    """?pos= of a link is read against the link's own sentence: nothing is re-derived on the first run."""
    at = run_page("app_pages/logit_lens.py", {**TINY, "text": KEYS, "pos": "6"})
    assert at.selectbox(key="pos").value == 6
    assert at.selectbox(key="pos").options[6] == "after token 6: cabinet"


@pytest.mark.parametrize(("old", "value", "old_default", "new", "expected"), [
    (("a", "b", "a", "c"), 2, 3, ("x", "a", "a"), 2),  # the second "a": the second "a" of the new tokens
    (("a", "b", "a", "a"), 3, 0, ("x", "a", "a"), 1),  # the third "a": the new tokens have two, so the first
    (("a", "b", "c"), 1, 2, ("b", "x"), 0),
    (("a", "b", "c"), 0, 2, ("x", "y"), 9),  # gone: the default
    (("a", "b", "c"), -1, 2, ("b",), -1),  # not a token ("every token"): kept
    (("a", "b", "c"), 2, 2, ("c", "b", "a"), 9),  # the old default stays the default
])
def test_token_value(old, value, old_default, new, expected) -> None:
    """The value for the new tokens (the view's default: 9), and the same with value v naming token v - 1."""
    assert token_value(old, value, old_default, new, 9) == expected
    assert token_value(old, value + 1, old_default + 1, new, 10, first=1) == expected + 1
