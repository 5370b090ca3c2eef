"""Logit lens: each layer through the model's own final norm and output layer; the last layer is the model's output."""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from explorer.loading.loaders import LoadedModel, load_model
from explorer.probes.logit_lens import LensError, logit_lens
from families import tiny
from conftest import needs_smollm2

SENT = "the keys to the old cabinet are on the table ."


def test_builtin_gpt_every_layer_equals_ln_f_then_lm_head():
    lm = load_model("builtin:tiny-gpt")
    tr = logit_lens(lm, SENT)
    ids = torch.tensor([lm.adapter.encode(SENT).ids])
    rec: dict = {}
    with torch.no_grad():
        logits = lm.model(ids, record=rec)[0]
        per_layer = [torch.softmax(lm.model.lm_head(lm.model.ln_f(rec[f"blocks.{layer}.resid_post"][0])), -1)
                     for layer in range(lm.model.config.n_layer)]
    assert tr.tokens[0] == "<bos>" and len(tr.layers) == lm.model.config.n_layer and tr.lens_error < 1e-5
    for layer, probs in enumerate(per_layer):
        top_p, top_i = probs.max(-1)
        np.testing.assert_allclose(tr.top_probs[layer], top_p.numpy(), atol=1e-6)
        assert list(tr.top_tokens[layer]) == lm.adapter.token_strings(top_i.tolist())
    final = logits.argmax(-1)
    assert list(tr.final_tokens) == lm.adapter.token_strings(final.tolist())
    assert (tr.final_rank[-1] == 0).all()  # at the last layer the model's own prediction is the top token
    own = torch.softmax(logits, -1)
    np.testing.assert_allclose(tr.final_prob[0], per_layer[0].gather(-1, final[:, None])[:, 0].numpy(), atol=1e-6)
    np.testing.assert_allclose(tr.topk_probs[-1, 3], own[3].topk(10).values.numpy(), atol=1e-6)


def test_hf_llama_layers_through_its_norm_and_head():
    model, tok, family = tiny("llama")
    lm = LoadedModel("test:llama", family, model, "cpu", "float32", {}, tokenizer=tok)
    tr = logit_lens(lm, "the red car is fast .")
    ids = torch.tensor([lm.adapter.encode("the red car is fast .").ids])
    with torch.no_grad():
        out = model(ids, output_hidden_states=True)
        mid = torch.softmax(model.lm_head(model.model.norm(out.hidden_states[1][0])), -1)
    np.testing.assert_allclose(tr.top_probs[0], mid.max(-1).values.numpy(), atol=1e-6)
    np.testing.assert_allclose(tr.top_probs[-1], torch.softmax(out.logits[0], -1).max(-1).values.numpy(), atol=1e-6)
    # layers count from 0: "layer l" is the output of transformer block l (hidden_states[l + 1])
    assert tr.layers == ("layer 0", "layer 1")


def test_recurrent_lm_and_refusals():
    tr = logit_lens(load_model("builtin:lstm-lm"), SENT)
    assert tr.layers == ("LSTM layer 0",) and tr.lens_error < 1e-4 and (tr.final_rank == 0).all()
    with pytest.raises(LensError, match="head|decoder"):
        logit_lens(load_model("pretrained:minilm"), SENT)
    with pytest.raises(LensError):
        logit_lens(load_model("builtin:tiny-gpt"), "   ")




@needs_smollm2
def test_smollm2_layer_l_is_block_l_and_the_last_is_its_output():
    lm = load_model("pretrained:smollm2")
    text = "The capital of France is"
    tr = logit_lens(lm, text)
    n = lm.model.config.num_hidden_layers
    assert n == 30 and tr.layers == tuple(f"layer {i}" for i in range(n))
    ids = torch.tensor([lm.adapter.encode(text).ids])
    with torch.no_grad():
        out = lm.model(ids, output_hidden_states=True)
        for layer in (0, 14, n - 2):  # block l's output: hidden_states[l + 1], through the final norm and the head
            probs = torch.softmax(lm.model.lm_head(lm.model.model.norm(out.hidden_states[layer + 1][0])), -1)
            np.testing.assert_allclose(tr.top_probs[layer], probs.max(-1).values.numpy(), atol=1e-5)
    own = torch.softmax(out.logits[0], -1)
    np.testing.assert_allclose(tr.top_probs[-1], own.max(-1).values.numpy(), atol=1e-5)
    assert tr.lens_error < 1e-3 and (tr.final_rank[-1] == 0).all() and tr.final_tokens[-1] == "·Paris"


def test_a_deep_models_grid_shows_every_few_layers_and_the_chosen_one():
    from explorer.viz.logit_lens import MAIN_ROWS, grid_rows

    assert grid_rows(2) == [0, 1] and grid_rows(MAIN_ROWS, 3) == list(range(MAIN_ROWS))
    rows = grid_rows(30, 28)
    assert rows == [2, 5, 8, 11, 14, 17, 20, 23, 26, 28, 29] and len(rows) <= MAIN_ROWS
    assert grid_rows(30, None)[-1] == 29 and 0 in grid_rows(30, 0)


def test_byte_tokens_keep_their_byte_list_in_the_charts():
    """A token holding part of a character reads ‹F0 9F› in the lens charts as in the decoding view: the space
    between its bytes is not the mark · of a space in the token."""
    from explorer.viz.logit_lens import lens_bars, lens_grid
    from explorer.viz.theme import NORMAL
    from families import GPT2_SMALL, tiny_model
    from real_tokenizers import byte_level_bpe

    tok = byte_level_bpe()
    model = tiny_model("GPT2LMHeadModel", len(tok), n_head=4, n_positions=64, bos_token_id=tok.bos_token_id,
                       eos_token_id=tok.eos_token_id, **GPT2_SMALL)
    byte = tok.convert_tokens_to_ids("ðŁ")  # the first two bytes F0 9F of an emoji
    with torch.no_grad():  # every layer through the lens reads W_U · w_byte: the byte token comes first
        model.transformer.ln_f.weight.zero_()
        model.transformer.ln_f.bias.copy_(model.lm_head.weight[byte])
    lm = LoadedModel("test:gpt2", "decoder", model, "cpu", "float32", {}, tokenizer=tok)
    tr = logit_lens(lm, "Le thé 🍃")  # 🍃 is split over three tokens
    assert tr.tokens[-3:] == ("·🍃(1/3)", "🍃(2/3)", "🍃(3/3)")
    assert set(tr.final_tokens) == {"‹F0 9F›"} and tr.top_tokens[0][0] == "‹F0 9F›"
    grid = lens_grid(tr, NORMAL).to_plotly_json()["data"][0]
    bars = lens_bars(*tr.bars(0, 2), "bars", NORMAL, mark=tr.final_tokens[2]).to_plotly_json()["data"][0]
    shown = [t for row in grid["text"] for t in row] + [c[0] for row in grid["customdata"] for c in row] + \
        list(bars["text"])
    assert "‹F0 9F›" in shown and "‹F0 9F›" in bars["text"]
    assert not [t for t in shown if re.search("‹[^›]*·", t)], shown
    assert bars["marker"]["color"][list(bars["text"]).index("‹F0 9F›")] == NORMAL.categorical[5]  # outlined


@pytest.mark.parametrize("theme_name", ["normal", "projector"])
def test_lens_cell_text_reads_on_its_own_colour(theme_name: str) -> None:
    """Each cell's token is drawn in black or white by its own cell's colour (WCAG contrast ≥ 4.5 on every colour
    of the scale), not one colour for the whole grid (grey on grey on the projector's cividis)."""
    from plotly.colors import sample_colorscale

    from explorer.viz.logit_lens import cell_text
    from explorer.viz.theme import contrast, get_theme

    theme = get_theme(theme_name == "projector")
    z = np.linspace(0, 1, 41).reshape(1, -1)
    trace = cell_text([[f"t{i}" for i in range(41)]], z, ["layer 0"], theme.sequential, 14)
    assert trace["text"] == [f"t{i}" for i in range(41)] and trace["hoverinfo"] == "skip"
    colours = trace["textfont"]["color"]
    assert set(colours) == {"#000", "#fff"}  # both are needed on a sequential scale
    for value, colour in zip(z[0], colours):
        background = tuple(float(c) for c in sample_colorscale(theme.sequential, [value])[0][4:-1].split(","))
        ink = (0, 0, 0) if colour == "#000" else (255, 255, 255)
        assert contrast(background, ink) >= 4.5, (value, colour)
