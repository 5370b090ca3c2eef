"""AppTest of app_pages/decision.py: the shipped sentiment LSTM with two sentences side by side, the decision on each
prefix and the attribution of a label, each chart's numbers the probe's (the model's own, tests/test_decision.py);
the shipped tagger's grid; a contrastive question from the URL; a language model told what the view needs; a second
model compared."""
from __future__ import annotations

import json

import numpy as np

from conftest import assert_no_exception, run_page
from explorer.text.escape import md_unescape
from explorer.loading.loaders import load_model
from explorer.probes.decision import attribute, decide
from plotly_arrays import plotly_array

PAGE = "app_pages/decision.py"


def _charts(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def _said(elements) -> str:
    return " | ".join(str(e.value) for e in elements).replace("\\", "")


def test_the_view_opens_on_the_sentiment_lstm_with_its_numbers() -> None:
    at = run_page(PAGE)
    assert_no_exception(at)
    assert not at.error and not at.warning
    assert at.query_params.get("model") in ("builtin:sentiment-lstm", ["builtin:sentiment-lstm"])
    loaded = load_model("builtin:sentiment-lstm")
    text = loaded.adapter.examples("decide").default
    a, b = decide(loaded, text), decide(loaded, "The film was not good at all.")
    bars, prefixes, attribution = _charts(at)[:3]
    for series, trace in zip(bars["data"], (a, b)):
        np.testing.assert_allclose(plotly_array(series["x"]), trace.probs, atol=1e-12)
        assert series["y"] == ["negative", "positive"]
    words = [i for i, s in enumerate(a.special) if not s]
    for c, series in enumerate(prefixes["data"]):
        np.testing.assert_allclose(plotly_array(series["y"]), a.prefix_probs[words, c], atol=1e-12)
    attr = attribute(loaded, text, int(a.probs.argmax()), -1, -1, "", 256)
    np.testing.assert_allclose(plotly_array(attribution["data"][0]["y"]), attr.integrated, atol=1e-12)
    said = _said(at.caption) + _said(at.markdown)
    assert f"p = {float(a.probs.max()):.4f}" in said and "a sentence classifier with 2 labels" in said


def test_a_contrastive_question_from_the_url() -> None:
    at = run_page(PAGE, {"text": "the food was not bad at all .", "label": "1", "foil": "0",
                         "method": "gradient × input"})
    assert_no_exception(at)
    loaded = load_model("builtin:sentiment-lstm")
    attr = attribute(loaded, "the food was not bad at all .", 1, 0, -1, "", 256)
    chart = next(c for c in _charts(at) if "comes from" in c["layout"]["title"]["text"])
    assert "log p(positive) − log p(negative)" in chart["layout"]["title"]["text"]
    np.testing.assert_allclose(plotly_array(chart["data"][0]["y"]), attr.gradient_x_input, atol=1e-12)


def test_the_tagger_shows_a_label_under_each_word() -> None:
    text = "they went for a long run ."
    at = run_page(PAGE, {"model": "builtin:pos-bilstm", "text": text})
    assert_no_exception(at)
    trace = decide(load_model("builtin:pos-bilstm"), text)
    grid = _charts(at)[0]
    words = [i for i, s in enumerate(trace.special) if not s]
    np.testing.assert_allclose(plotly_array(grid["data"][0]["z"]), trace.probs[words].T, atol=1e-12)
    run = trace.tokens.index("run")
    column = [row[words.index(run)] for row in grid["data"][0]["text"]]
    assert "<b>noun</b>" in column


def test_a_language_model_is_told_what_the_view_needs() -> None:
    at = run_page(PAGE, {"model": "builtin:lstm-lm"})  # refused from the catalogue, before loading (issue 57)
    assert_no_exception(at)
    said = md_unescape(" ".join(w.value for w in at.warning))
    assert "cannot open in this view: it needs a model that decides a label for a sentence or for each word" in said


def test_a_second_model_is_compared() -> None:
    at = run_page(PAGE, {"compare": "builtin:pos-bilstm", "text": "the food was good ."})
    assert_no_exception(at)
    assert "its labels are not builtin:sentiment-lstm's" in _said(at.info)
    titles = [c["layout"]["title"]["text"] for c in _charts(at)]
    assert any("Each word's label" in t for t in titles)
