"""AppTest of app_pages/seq2seq.py: defaults, built-in checkpoint, local random seq2seq, tiny Marian (with a
saved tokenizer) and T5 (without one), a non-encoder–decoder, and bad input. No exception element anywhere."""
from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from conftest import assert_no_exception, run_page
from explorer.data.vocab import SPECIALS
from explorer.models.seq2seq import Seq2Seq
from explorer.loading.catalogue import builtin_names
from explorer.text.escape import md_unescape
from families import tiny_model
from test_probe_seq2seq import SRC_WORDS, TGT_WORDS, tiny_hf

PAGE = "app_pages/seq2seq.py"
HAS_BAHDANAU = "seq2seq-bahdanau" in builtin_names()


def _text(elements) -> str:
    return " | ".join(md_unescape(e.value) for e in elements)


def rnn_folder(tmp_path: Path, attention: str) -> str:
    name = f"s2s-{attention}-{uuid.uuid4().hex[:6]}"
    folder = tmp_path / name
    folder.mkdir()
    config = {"src_vocab_size": len(SPECIALS) + len(SRC_WORDS), "tgt_vocab_size": len(SPECIALS) + len(TGT_WORDS),
              "emb_dim": 8, "hidden_size": 16, "attention": attention}
    torch.manual_seed(0)
    save_file(Seq2Seq(**config).state_dict(), str(folder / "model.safetensors"))
    meta = {"name": name, "architecture": "seq2seq", "config": config, "src_vocab": SPECIALS + SRC_WORDS,
            "tgt_vocab": SPECIALS + TGT_WORDS, "corpus": {"generator": "translation"}}
    (folder / "config.json").write_text(json.dumps(meta))
    return f"local:{name}"


def hf_folder(tmp_path: Path, kind: str, tokenizer: bool) -> str:
    name = f"{kind}-{uuid.uuid4().hex[:6]}"
    model, tok = tiny_hf(kind)
    model.save_pretrained(tmp_path / name)
    if tokenizer:
        tok.save_pretrained(tmp_path / name)
    return f"local:{name}"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    tmp_path = tmp_path_factory.mktemp("s2s-models")
    return tmp_path, {"bahdanau": rnn_folder(tmp_path, "bahdanau"), "none": rnn_folder(tmp_path, "none"),
                      "marian": hf_folder(tmp_path, "marian", True), "t5": hf_folder(tmp_path, "t5", False)}


@pytest.fixture
def models(model_dir, monkeypatch) -> dict[str, str]:
    monkeypatch.setenv("EXPLORER_MODEL_PATH", str(model_dir[0]))
    return model_dir[1]


def test_defaults() -> None:
    at = run_page(PAGE)
    assert_no_exception(at)
    if HAS_BAHDANAU:
        assert not at.error and len(at.get("plotly_chart")) >= 2 and at.latex
    else:
        assert at.error  # the default built-in is missing: a clear message, not a traceback


@pytest.mark.skipif(not HAS_BAHDANAU, reason="builtin:seq2seq-bahdanau not trained yet")
def test_builtin_bahdanau_url() -> None:
    at = run_page(PAGE, {"model": "builtin:seq2seq-bahdanau", "text": "the red car is fast .", "step": "2"})
    assert_no_exception(at)
    assert not at.error
    assert "voiture" in _text(at.markdown)
    assert at.query_params["step"] == ["2"] or at.query_params["step"] == "2"


def test_local_rnn_greedy_beam_forced_compare(models: dict[str, str]) -> None:
    params = {"model": models["bahdanau"], "text": "the red car is fast .", "decoding": "beam", "beam": "3",
              "model2": models["none"], "step": "1"}
    at = run_page(PAGE, params)
    assert_no_exception(at)
    assert not at.error, _text(at.error)
    md = _text(at.markdown)
    assert "beam search (beam size 3)" in md
    assert "No attention, so no alignment" in md
    titles = [json.loads(c.proto.spec)["layout"].get("title", {}).get("text", "") for c in at.get("plotly_chart")]
    assert (any("Beam tree: 3 beams" in t for t in titles)
            and any("relies on the final encoder state" in t for t in titles))
    at.radio(key="panel").set_value("length").run()
    assert_no_exception(at)
    titles = [json.loads(c.proto.spec)["layout"].get("title", {}).get("text", "") for c in at.get("plotly_chart")]
    assert any("Accuracy against source length" in t for t in titles)
    assert "computed now on" in _text(at.caption)
    at.radio(key="panel").set_value("step").run()
    assert at.latex and any("recomputed" in str(c.value) for c in at.caption)
    assert at.query_params["panel"] in ("step", ["step"])
    at.text_input(key="target").set_value("la voiture rouge est rapide .").run()
    assert_no_exception(at)
    assert "teacher-forced loss" in _text(at.caption)


def test_hf_marian_and_t5_without_tokenizer(models: dict[str, str]) -> None:
    at = run_page(PAGE, {"model": models["marian"], "text": "the red car is fast .", "layer": "1", "head": "2"})
    assert_no_exception(at)
    assert not at.error, _text(at.error)
    assert any("cross-attention, layer 1, head 2" in json.loads(c.proto.spec)["layout"]["title"]["text"]
               for c in at.get("plotly_chart"))
    at = run_page(PAGE, {"model": models["t5"], "text": "the red car"})
    assert_no_exception(at)
    assert "cannot read text" in _text(at.warning)


def test_not_encoder_decoder(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("EXPLORER_MODEL_PATH", str(tmp_path))
    # a name of its own: models are cached by id, and test_page_self_attention has a "tiny-bert" with a tokenizer
    tiny_model("BertModel", 30, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
               intermediate_size=64).save_pretrained(tmp_path / "bert-no-decoder")
    at = run_page(PAGE, {"model": "local:bert-no-decoder", "text": "hello"})
    assert_no_exception(at)
    assert "not an encoder–decoder" in _text(at.warning) or at.error


def test_bad_inputs(models: dict[str, str]) -> None:
    at = run_page(PAGE, {"model": models["bahdanau"], "text": ""})
    assert_no_exception(at)
    assert "Type a source sentence" in _text(at.info)
    for text in ["🚗🚕 \x00\x07 ✨", "zzz qqq www", " ".join(["the old wooden table"] * 60), "\x00\x01\x02"]:
        at.text_input(key="text").set_value(text).run()
        assert_no_exception(at)
        if "zzz" in text or "🚗" in text:
            assert "<unk>" in _text(at.info) and "unknown" in _text(at.warning)
        elif "\x01" in text:
            assert "Type a source sentence" in _text(at.info)


@pytest.mark.parametrize("name", [n for n in builtin_names() if n.startswith("seq2seq-") and n != "seq2seq-dates"])
def test_every_builtin_seq2seq_in_every_panel(name: str) -> None:
    """Each shipped checkpoint (Luong ones use input feeding: their decoder state is a pair) decodes greedily and
    with beam search, is force-decoded, and shows the step panel, with rows of the heatmap summing to 1."""
    at = run_page(PAGE, {"model": f"builtin:{name}", "text": "the red car is fast .", "decoding": "beam", "beam": "3"})
    assert_no_exception(at)
    assert not at.error, _text(at.error)
    assert "beam search (beam size 3)" in _text(at.markdown)
    heat = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    if name != "seq2seq-none":
        import numpy as np
        from plotly.io import from_json

        z = np.asarray(from_json(json.dumps(heat[0])).data[0].z, dtype=float)
        np.testing.assert_allclose(z.sum(axis=1), 1.0, atol=1e-4)
    at.selectbox(key="decoding").set_value("greedy").run()
    at.radio(key="panel").set_value("step").run()
    assert_no_exception(at)
    assert not at.error, _text(at.error)
    if name != "seq2seq-none":
        assert at.latex and any("recomputed" in str(c.value) for c in at.caption)
    at.text_input(key="target").set_value("la voiture rouge est rapide .").run()
    assert_no_exception(at)
    assert "teacher-forced loss" in _text(at.caption)
