"""AppTest of app_pages/masked_words.py: the default real-English masked LM, the generated English's agreement pair,
URL state, picking a word to mask, a tiny Hugging Face BertForMaskedLM, an encoder without a masked-LM head, and
models that cannot fill masks."""
from __future__ import annotations

import json
import uuid
from pathlib import Path

import numpy as np
import pytest

from conftest import assert_no_exception, run_page
from explorer.loading.loaders import load_model
from explorer.probes.masked_words import masked_fill
from plotly_arrays import plotly_array
from test_probe_masked_words import save_tiny_mlm

PAGE = "app_pages/masked_words.py"
A = "the keys to the cabinet [MASK] on the table ."
B = "the key to the cabinets [MASK] on the table ."


def _charts(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def _messages(elements) -> str:
    return " | ".join(str(e.value) for e in elements).replace("\\", "")


def test_the_view_opens_on_the_real_english_masked_lm_with_its_numbers() -> None:
    """The default model reads everyday English (pretrained:minilm-mlm): its own example sentence and the view's
    second sentence, side by side, each bar its own probability."""
    at = run_page(PAGE)
    assert_no_exception(at)
    assert not at.error and not at.warning
    assert at.query_params.get("model") in ("pretrained:minilm-mlm", ["pretrained:minilm-mlm"])
    loaded = load_model("pretrained:minilm-mlm")
    text = loaded.adapter.examples("masked").default
    assert text == "The keys to the cabinet [MASK] on the table."
    a, b = (masked_fill(loaded, t, 10, "is, are") for t in (text, B))
    charts = _charts(at)
    assert len(charts) == 3
    for chart, trace in zip(charts, (a, b)):
        np.testing.assert_allclose(plotly_array(chart["data"][0]["x"]), trace.probs[0], atol=1e-12)
        assert chart["data"][0]["hovertext"] == list(trace.top_tokens[0])
    for series, trace in zip(charts[2]["data"], (a, b)):
        np.testing.assert_allclose(plotly_array(series["y"]), trace.word_probs[0], atol=1e-12)
    assert "[UNK]" not in _messages(at.caption)


def test_the_generated_english_model_shows_the_agreement_pair_with_its_numbers() -> None:
    """builtin:masked-lm (the lessons' clean agreement experiment): the verb agrees with the head noun."""
    at = run_page(PAGE, {"model": "builtin:masked-lm"})
    assert_no_exception(at)
    assert not at.error and not at.warning
    loaded = load_model("builtin:masked-lm")
    a, b = (masked_fill(loaded, t, 10, "is, are") for t in (A, B))
    charts = _charts(at)
    assert len(charts) == 3  # A's mask, B's mask, the compared words
    for chart, trace in zip(charts, (a, b)):
        bars = chart["data"][0]
        np.testing.assert_allclose(plotly_array(bars["x"]), trace.probs[0], atol=1e-12)
        assert bars["hovertext"] == list(trace.top_tokens[0])
    words = charts[2]["data"]  # one series per sentence: the compared words' probabilities and ranks
    assert [s["name"] for s in words] == ["A", "B"] and all(s["x"] == ["is", "are"] for s in words)
    for series, trace in zip(words, (a, b)):
        np.testing.assert_allclose(plotly_array(series["y"]), trace.word_probs[0], atol=1e-12)
        assert list(plotly_array(series["customdata"])) == list(trace.word_ranks[0])
    # agreement with the head noun across the attractor, in both directions
    assert a.word_probs[0, 1] > a.word_probs[0, 0] and b.word_probs[0, 0] > b.word_probs[0, 1]
    assert at.latex and f"{a.probs[0, 0]:.4f}" in at.latex[0].value
    assert at.query_params.get("model") in ("builtin:masked-lm", ["builtin:masked-lm"])


def test_url_state_one_sentence_several_masks_and_k() -> None:
    text = "the [MASK] to the cabinet [MASK] on the table ."
    at = run_page(PAGE, {"model": "builtin:masked-lm", "text": text, "b": "", "k": "4", "words": "are"})
    assert_no_exception(at)
    trace = masked_fill(load_model("builtin:masked-lm"), text, 4, "are")
    charts = _charts(at)
    assert len(charts) == 3 and all(len(c["data"][0]["y"]) == 4 for c in charts[:2])
    for m in range(2):  # one chart per mask, its bars the model's top 4
        np.testing.assert_allclose(plotly_array(charts[m]["data"][0]["x"]), trace.probs[m], atol=1e-12)
        np.testing.assert_allclose(plotly_array(charts[m]["data"][0]["customdata"])[:, 0], trace.logits[m], atol=1e-12)
    words = charts[2]["data"]  # one series per mask
    assert [s["name"] for s in words] == ["A, [MASK] at token 2", "A, [MASK] at token 6"]
    np.testing.assert_allclose([plotly_array(s["y"])[0] for s in words], trace.word_probs[:, 0], atol=1e-12)
    assert at.number_input(key="k").value == 4 and at.text_input(key="b").value == ""


def test_picking_a_word_masks_it_and_compares_the_hidden_word() -> None:
    text = "the dogs that the farmer feeds sleep in the garden ."
    at = run_page(PAGE, {"model": "builtin:masked-lm", "text": text, "b": "", "words": "sleeps"})
    assert_no_exception(at)
    assert "has no [MASK], so its word “garden” is masked" in _messages(at.info)
    at.selectbox(key="mask").set_value(6).run()
    assert_no_exception(at)
    assert at.query_params.get("mask") in ("6", ["6"])
    words = _charts(at)[-1]["data"][0]
    assert words["x"] == ["sleep", "sleeps"]
    trace = masked_fill(load_model("builtin:masked-lm"), text, 10, "sleeps", 6)
    assert trace.masked == "sleep"
    np.testing.assert_allclose(plotly_array(words["y"]), trace.word_probs[0], atol=1e-12)
    assert "in A, “sleep” gets p =" in _messages(at.caption)


def test_projector_mode_runs() -> None:
    at = run_page(PAGE, {"projector": "1"})
    assert_no_exception(at)
    assert len(at.get("plotly_chart")) == 3


@pytest.mark.parametrize("model_id,says", [  # the first two refused from the catalogue, before loading (issue 57)
    ("builtin:tiny-gpt", "cannot open in this view: it needs a model that reads a sentence both ways (an encoder), "
                         "and this one is of the family “Transformer decoder (causal LM)”"),
    ("builtin:lstm-lm", "cannot open in this view: it needs a model that reads a sentence both ways (an encoder), "
                        "and this one is of the family “RNN language model”"),
    ("pretrained:minilm", "has no masked-LM head"),  # an encoder may fill masks: loaded, and its head is missing
])
def test_models_that_cannot_fill_masks_get_a_message(model_id: str, says: str) -> None:
    at = run_page(PAGE, {"model": model_id})
    assert_no_exception(at)
    assert says in _messages(at.warning)
    assert bool(at.get("plotly_chart")) == ("cannot open" in says)  # a refused link: the view's default model


def test_a_hugging_face_masked_lm(tmp_path: Path, monkeypatch) -> None:
    name = f"mlm-{uuid.uuid4().hex[:8]}"  # unique: the model and probe caches are process-wide
    model_id = save_tiny_mlm(tmp_path, "bert", name=name)
    monkeypatch.setenv("EXPLORER_MODEL_PATH", str(tmp_path))
    at = run_page(PAGE, {"model": model_id, "text": A, "b": B})
    assert_no_exception(at)
    assert not at.error and not at.warning
    loaded = load_model(model_id, task="masked-lm")
    trace = masked_fill(loaded, A, 10, "is, are")
    np.testing.assert_allclose(plotly_array(_charts(at)[0]["data"][0]["x"]), trace.probs[0], atol=1e-12)
    assert "[CLS]" in _messages(at.caption) and len(_charts(at)) == 3
