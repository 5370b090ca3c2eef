"""AppTest of app_pages/lstm_gates.py: defaults, built-in and local state-dict models, bad input, broken weights."""
from __future__ import annotations

import json
import uuid
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn as nn
from safetensors.torch import save_file

from conftest import assert_no_exception, run_page
from explorer.data.vocab import SPECIALS
from explorer.loading.catalogue import builtin_names
from explorer.loading.loaders import load_model
from explorer.probes.lstm_gates import compare, rnn_gates, unit_order
from plotly_arrays import plotly_array

PAGE = "app_pages/lstm_gates.py"
WORDS = ["the", "key", "keys", "to", "old", "cabinet", "cabinets", "is", "are", "on", "table", "."]
HAS_LSTM = "lstm-lm" in builtin_names()


class UserLM(nn.Module):
    def __init__(self, V: int, E: int = 6, H: int = 12) -> None:
        super().__init__()
        self.emb = nn.Embedding(V, E)
        self.encoder = nn.Module()
        self.encoder.lstm = nn.LSTM(E, H, 2, batch_first=True)
        self.fc = nn.Linear(H, V)


def _folder(tmp_path: Path, monkeypatch, state: dict, vocab: object) -> str:
    """A local:<name> model folder (safetensors + vocab.json) under EXPLORER_MODEL_PATH; returns its id."""
    name = f"user-{uuid.uuid4().hex[:8]}"  # unique: the model and probe caches are process-wide
    folder = tmp_path / name
    folder.mkdir()
    save_file({k: v.contiguous() for k, v in state.items()}, str(folder / "model.safetensors"))
    (folder / "vocab.json").write_text(json.dumps(vocab))
    monkeypatch.setenv("EXPLORER_MODEL_PATH", str(tmp_path))
    return f"local:{name}"


@pytest.fixture
def user_model(tmp_path: Path, monkeypatch) -> str:
    torch.manual_seed(0)
    return _folder(tmp_path, monkeypatch, UserLM(len(SPECIALS) + len(WORDS)).state_dict(), SPECIALS + WORDS)


def _charts(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def _heatmap(at) -> dict:
    return _charts(at)[0]["data"][0]


def _messages(elements) -> str:
    """The texts of message elements, markdown escapes removed."""
    return " | ".join(str(e.value) for e in elements).replace("\\", "")


def test_defaults() -> None:
    at = run_page(PAGE)
    assert_no_exception(at)
    if HAS_LSTM:
        assert not at.error
        assert len(at.get("plotly_chart")) == 2 and at.latex and at.get("html")


@pytest.mark.skipif(not HAS_LSTM, reason="builtin:lstm-lm is not trained yet")
def test_builtin_lstm_heatmap_equals_probe() -> None:
    text = "the keys to the old cabinet are on the table ."
    at = run_page(PAGE, {"model": "builtin:lstm-lm", "text": text, "gate": "f", "sort": "mean", "top": "20"})
    assert_no_exception(at)
    assert not at.error and not at.warning
    trace = rnn_gates(load_model("builtin:lstm-lm"), text)
    expected = trace.gates["f"][0, 0]
    units = unit_order(expected, "mean", 20)
    heat = _heatmap(at)
    np.testing.assert_allclose(plotly_array(heat["z"]), expected[:, units], atol=1e-6)
    assert heat["x"] == [str(u) for u in units]
    assert len(heat["y"]) == len(trace.tokens) == 12 and heat["y"][0] == "0 · &lt;bos&gt;"  # as the model was trained
    assert trace.max_abs_error < 1e-5


@pytest.mark.parametrize("name", ["rnn-lm", "lstm-lm", "gru-lm"])
def test_next_tokens_are_the_models_own_softmax_on_bos_and_sentence(name: str) -> None:
    """The "Next tokens" table equals softmax(model(<bos> + sentence)) computed here with the model itself."""
    if name not in builtin_names():
        pytest.skip(f"builtin:{name} is not trained yet")
    text = "the keys to the old cabinet are on the table ."
    at = run_page(PAGE, {"model": f"builtin:{name}", "text": text, "section": "Next tokens"})
    assert_no_exception(at)
    table = at.dataframe[-1].value
    loaded = load_model(f"builtin:{name}")
    vocab = loaded.vocabs["vocab"]
    ids = [vocab.bos_id] + vocab.encode(text.split())
    with torch.no_grad():
        logits, _ = loaded.model(torch.tensor([ids]))
    probs = torch.softmax(logits[0].double(), -1)
    assert list(table["after"]) == ["<bos>"] + text.split()
    after_cabinet = text.split().index("cabinet") + 1
    top = probs[after_cabinet].topk(5)
    expected = [f"{vocab.itos[i]}  ({p:.1%})" for i, p in zip(top.indices.tolist(), top.values.tolist())]
    assert [table[f"#{k + 1}"][after_cabinet] for k in range(5)] == expected


@pytest.mark.skipif(not HAS_LSTM, reason="builtin:lstm-lm is not trained yet")
def test_builtin_lstm_sections() -> None:
    at = run_page(PAGE, {"model": "builtin:lstm-lm", "text": "the keys to the old cabinet are on the table ."})
    at.radio(key="section").set_value("Gate saturation").run()
    assert_no_exception(at)
    assert {d["name"] for d in _charts(at)[1]["data"]} == {"input gate i", "forget gate f", "output gate o"}
    at.radio(key="section").set_value("Next tokens").run()
    assert_no_exception(at)
    table = at.dataframe[-1].value
    assert list(table.columns[:3]) == ["position", "after", "#1"] and len(table) == 12
    at.radio(key="section").set_value("Compare two sentences").run()
    assert_no_exception(at)
    loaded = load_model("builtin:lstm-lm")
    a = rnn_gates(loaded, "the dog that the farmers feed sleeps in the garden .")
    b = rnn_gates(loaded, "the dogs that the farmers feed sleep in the garden .")
    cmp = compare(a, b, "c", 0)  # the default state of an LSTM: its cell state
    np.testing.assert_allclose(plotly_array(_charts(at)[1]["data"][0]["z"]), cmp.diff[:, cmp.order[:64]], atol=1e-6)
    at.selectbox(key="pair").set_value("your own pair").run()
    at.text_input(key="b").set_value("the keys to the old cabinet is").run()
    assert_no_exception(at)
    assert "positions 0..7 are compared" in _messages(at.info)  # <bos> + 7 words


def test_local_state_dict(user_model: str) -> None:
    text = "The keys to the old cabinet are on the table."
    at = run_page(PAGE, {"model": user_model, "text": text, "layer": "1", "gate": "c", "top": "5"})
    assert_no_exception(at)
    assert not at.error, _messages(at.error)
    inferred = _messages(at.markdown)
    assert "`encoder.lstm.weight_ih_l0 … (2 layer(s))`" in inferred and "`emb.weight (16, 6)`" in inferred
    loaded = load_model(user_model)
    trace = rnn_gates(loaded, text)
    expected = trace.gates["c"][1, 0]
    np.testing.assert_allclose(plotly_array(_heatmap(at)["z"]), expected[:, unit_order(expected, "variance", 5)],
                               atol=1e-6)
    assert at.query_params.get("layer") in ("1", ["1"])  # the view state is written back to the URL


@pytest.mark.parametrize("text, kind, expected", [
    ("", "info", "Type a sentence"),
    ("zebra quokka wombat", "warning", "<unk>"),
    ("the key is on the table . " * 350, "warning", "first 511"),
    ("the key 🔑🦘 is 👍🏽 on", "warning", "<unk>"),
    ("the\x00 key\x07 is\u200b on\x1b the table", None, None),
    ("ключ 钥匙 مفتاح the key", "warning", "<unk>"),
    ("<script>alert(1)</script> <b>the</b> key", "warning", "<unk>"),
], ids=["empty", "unknown-words", "2450-tokens", "emoji", "control-chars", "non-latin", "html"])
def test_bad_text(user_model: str, text: str, kind: str | None, expected: str | None) -> None:
    at = run_page(PAGE, {"model": user_model, "text": text})
    assert_no_exception(at)
    assert not at.error, _messages(at.error)
    if kind:
        assert expected in _messages(getattr(at, kind))
    html = " ".join(str(h.proto.body) for h in at.get("html"))
    assert "<script" not in html and "<unk>" not in html and "<b>" not in html
    if text.strip() and "<unk>" == expected:
        assert "&lt;unk&gt;" in html
    if expected == "first 511":  # the display is capped too: <bos> + 511 words
        assert len(_heatmap(at)["y"]) == 512


@pytest.mark.parametrize("case, expected", [
    ("no-rnn", "weight_ih_l0"),
    ("vocab-mismatch", "rows"),
    ("bad-shape", "weight_hh_l0"),
])
def test_broken_state_dict(tmp_path: Path, monkeypatch, case: str, expected: str) -> None:
    vocab = SPECIALS + WORDS
    state = dict(UserLM(len(vocab)).state_dict())
    if case == "no-rnn":
        state = {"emb.weight": state["emb.weight"], "fc.weight": state["fc.weight"]}
    elif case == "vocab-mismatch":
        vocab = vocab[:-3]
    else:
        state["encoder.lstm.weight_hh_l0"] = torch.zeros(50, 12)
    mid = _folder(tmp_path, monkeypatch, state, vocab)
    at = run_page(PAGE, {"model": mid, "text": "the key"})
    assert_no_exception(at)
    assert expected in _messages(at.error)


@pytest.mark.parametrize("name, states", [("gru-lm", "rzn"), ("rnn-lm", "")])
def test_other_builtins(name: str, states: str) -> None:
    if name not in builtin_names():
        pytest.skip(f"builtin:{name} is not trained yet")
    at = run_page(PAGE, {"model": f"builtin:{name}", "text": "the dogs that the farmers feed sleep ."})
    assert_no_exception(at)
    assert not at.error, _messages(at.error)
    assert _heatmap(at)["type"] == "heatmap" and at.latex[0].value.count("&=") == (4 if states else 1)


def test_reset_this_view_brings_back_its_defaults() -> None:
    """Outside a lesson, the sidebar's "Reset this view" drops what the class changed (model, sentence, settings)
    from the session and the URL: the view reopens as declared."""
    from explorer.views import BY_PATH

    at = run_page("app_pages/lstm_gates.py", {"model": "builtin:gru-lm", "layer": "0", "top": "16"})
    assert at.session_state["model"] == "builtin:gru-lm"
    at.button(key="_view_reset").click().run()
    at.run()
    assert_no_exception(at)
    assert at.session_state["model"] == BY_PATH["lstm-gates"].params["model"].default
    assert at.query_params.get("top") in (None, [str(BY_PATH["lstm-gates"].params["top"].default)],
                                          str(BY_PATH["lstm-gates"].params["top"].default))
