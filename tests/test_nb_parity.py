"""The notebook says what the app says (explorer.nb against the pages, AppTest).

For every view, on the same model and text (the view's own default sentence, and the hostile texts that make views
speak: 3,000 words, emoji, control characters), each note and warning the page shows about the model's input and its
computation is among the `notes` nb returns, in the same words. Messages about the page's own controls (a model to
compare, a box to fill) have nothing to match in a notebook call and are named in PAGE_ONLY. The defaults are
compared in tests/test_notebook.py (test_every_notebook_default_is_the_pages).
"""
from __future__ import annotations

import importlib
import json
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from conftest import assert_no_exception, run_page
from explorer import nb
from explorer.views import BY_PATH, VIEWS
from explorer.text.escape import md_unescape
from hostile import HOSTILE_TEXTS
from plotly_arrays import plotly_array
from testkit.view_cases import CASES

# what a page says about its own controls, never about the model's run
PAGE_ONLY = ("cannot be compared here", "No difference is drawn", "is not compared", "Type ", "Choose ", "Ignoring ?",
             "Fill in", "Upload a file", "raise n", "Add Beam search")

AGREEMENT = {"text": "the keys to the cabinet", "corrupt": "the key to the cabinet", "answer": "are", "wrong": "is"}

# view -> (page params, nb call on (model, text)); the model is the page's default or its hostile-text model
CALLS: dict[str, tuple[dict[str, str], Callable[[str, str], nb.ViewResult]]] = {
    "lstm-gates": ({}, lambda m, t: nb.lstm_gates(m, t)),
    "self-attention": ({}, lambda m, t: nb.self_attention(m, t)),
    "positional-encodings": ({"panel": "sentence"}, lambda m, t: nb.positional_encodings(m, text=t)),
    "word-embeddings": ({}, lambda m, t: nb.word_embeddings(m, words=t)),
    "decoding-strategies": ({}, lambda m, t: nb.decoding_strategies(m, t)),
    "masked-words": ({"b": ""}, lambda m, t: nb.masked_words(m, t)),
    "decision": ({"b": ""}, lambda m, t: nb.classify(m, t)),
    "logit-lens": ({}, lambda m, t: nb.logit_lens(m, t)),
    "token-attribution": ({}, lambda m, t: nb.token_attribution(m, t)),
    "interventions": ({k: v for k, v in AGREEMENT.items() if k != "text"},
                      lambda m, t: nb.interventions(m, t, AGREEMENT["corrupt"], AGREEMENT["answer"],
                                                    AGREEMENT["wrong"])),
    "gradients-through-time": ({}, lambda m, t: nb.gradients_through_time(
        list(BY_PATH["gradients-through-time"].params["models"].default), t)),
    "seq2seq": ({}, lambda m, t: nb.seq2seq(m, t)),
}
TEXTS = {"its sentence": None, **{case: HOSTILE_TEXTS[case] for case in ("3000-words", "emoji", "control-mixed")}}
TEXTS_OF = {"interventions": {"its sentence": AGREEMENT["text"]}}  # two prompts of one length: no hostile pair


def plain(message: str) -> str:
    """A message as read: Markdown's escapes and emphasis dropped, spaces collapsed."""
    return " ".join(re.sub(r"\\(.)", r"\1", message).replace("**", "").split())


def _page_messages(at) -> list[str]:
    said = [plain(str(e.value)) for e in [*at.info, *at.warning, *at.error]]
    return [m for m in said if not any(p in m for p in PAGE_ONLY)]


# cases where the views warn about their own computation, with the models and settings that make them warn
EIFFEL = "The Eiffel Tower is in the city of"
WARNING_CASES = {
    "integrated gradients short of completeness (SmolLM2, 8 steps)": (
        "token-attribution", {"model": "pretrained:smollm2", "steps": "8", "text": EIFFEL,
                              "method": "integrated gradients"},
        lambda: nb.token_attribution("pretrained:smollm2", EIFFEL, "integrated gradients", steps=8)),
    "a classifier's integrated gradients short of completeness": (
        "decision", {"model": "builtin:sentiment-lstm", "b": "", "steps": "2", "text": "the food was not good ."},
        lambda: nb.classify("builtin:sentiment-lstm", "the food was not good .", steps=2)),
    "the unknown word left out of generation": (
        "decoding-strategies", {"model": "builtin:rnn-lm-wordnet", "text": "The old man"},
        lambda: nb.decoding_strategies("builtin:rnn-lm-wordnet", "The old man")),
    "a GRU's gates": ("lstm-gates", {"model": "builtin:gru-lm", "text": "the dogs near the car are ."},
                      lambda: nb.lstm_gates("builtin:gru-lm", "the dogs near the car are .")),
    "a seq2seq model without attention": (
        "seq2seq", {"model": "builtin:seq2seq-none", "text": "the red car is fast ."},
        lambda: nb.seq2seq("builtin:seq2seq-none", "the red car is fast .")),
}


@pytest.mark.parametrize("case", list(WARNING_CASES))
def test_the_notebook_warns_where_the_page_warns(case: str) -> None:
    path, query, call = WARNING_CASES[case]
    at = run_page(BY_PATH[path].script, query)
    assert_no_exception(at)
    said = _page_messages(at)
    notes = [plain(n) for n in call().notes]
    assert said or "gates" in case or "without attention" in case, f"{case}: the page says nothing"
    missing = [m for m in said if not any(m in n for n in notes)]
    assert not missing, f"the page says {missing}; nb says {notes}"


def test_every_view_with_a_notebook_call_is_compared() -> None:
    sentence_views = {v.url_path for v in VIEWS if "text" in v.params}
    assert sentence_views == set(CALLS), sentence_views ^ set(CALLS)


def _model(path: str) -> str:
    case = CASES[path].hostile
    view = BY_PATH[path]
    return (case.params.get("model") if case else None) or view.params["model"].default \
        if "model" in view.params else ""


@pytest.mark.parametrize("text_case", list(TEXTS))
@pytest.mark.parametrize("path", list(CALLS))
def test_the_notebook_says_what_the_page_says(path: str, text_case: str, monkeypatch) -> None:
    texts = TEXTS_OF.get(path, TEXTS)
    if text_case not in texts:
        pytest.skip(f"{path} is compared on its own prompts")
    params, call = CALLS[path]
    model = _model(path)
    text = texts[text_case]
    query = {**({"model": model} if model else {}), **params, **({} if text is None else {"text": text})}
    at = run_page(BY_PATH[path].script, query)
    assert_no_exception(at)
    shown = at.text_input(key="text").value if text is None else text  # the page's own default sentence
    said = _page_messages(at)
    notes = [plain(n) for n in call(model, shown).notes]
    missing = [m for m in said if not any(m in n for n in notes)]
    assert not missing, f"the page says {missing}; nb says {notes}"


# ------------------------------------------------------------------------ one presenter: the same figures' data
def _arrays(trace: dict) -> dict[str, np.ndarray]:
    """A Plotly trace's data arrays (z, x, y), numeric or text, as numpy arrays."""
    return {k: plotly_array(trace[k]) for k in ("z", "x", "y") if k in trace and trace[k] is not None}


def _same_data(page_spec: dict, fig) -> None:
    ours = fig.to_plotly_json()["data"]
    assert len(page_spec["data"]) == len(ours)
    for a, b in zip(page_spec["data"], ours):
        arr_a, arr_b = _arrays(a), _arrays(b)
        assert arr_a.keys() == arr_b.keys()
        for k in arr_a:
            if arr_a[k].dtype.kind in "fiu":
                np.testing.assert_allclose(arr_a[k].astype(float), arr_b[k].astype(float), atol=1e-6, err_msg=k)
            else:
                assert arr_a[k].tolist() == arr_b[k].tolist(), k


def _presented() -> dict[str, tuple[str, dict[str, str], Callable[[], nb.ViewResult]]]:
    """Every view's cases (tests/presented_<view>.py, CASES: name -> (view, page params, nb call))."""
    cases: dict = {}
    for path in sorted(Path(__file__).parent.glob("presented_*.py")):
        cases.update(importlib.import_module(path.stem).CASES)
    return cases


PRESENTED = _presented()


@pytest.mark.parametrize("case", list(PRESENTED))
def test_the_page_and_the_notebook_draw_the_same_figures(case: str) -> None:
    """The page and nb call the same presenter: the same figures in the same order with the same data, and every
    sentence the presenter says is on the page."""
    path, query, call = PRESENTED[case]
    at = run_page(BY_PATH[path].script, query)
    assert_no_exception(at)
    res = call()
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert len(specs) == len(res.figures) > 0, (len(specs), list(res.figures))
    for spec, fig in zip(specs, res.figures.values()):
        _same_data(spec, fig)
    page_text = " ".join(md_unescape(str(e.value)) for e in [*at.info, *at.warning, *at.caption, *at.markdown])
    said = [n for n in res.notes if n not in getattr(nb.read(query["model"]), "notes", [])] if "model" in query \
        else list(res.notes)
    missing = [n for n in said if " ".join(n.split()) not in " ".join(page_text.split())]
    assert said and not missing, missing
