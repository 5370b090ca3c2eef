"""Logit lens: each layer through the model's own final norm and output layer; the last layer is the model's output."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from explorer.loaders import LoadedModel, load_model
from explorer.probes.lens import LensError, logit_lens
from families import tiny

SENT = "the keys to the old cabinet are on the table ."


def test_builtin_gpt_every_layer_equals_ln_f_then_lm_head():
    lm = load_model("builtin:tiny-gpt")
    tr = logit_lens(lm, SENT)
    ids = torch.tensor([lm.adapter.encode(SENT).ids])
    rec: dict = {}
    with torch.no_grad():
        logits = lm.model(ids, record=rec)[0]
        per_layer = [torch.softmax(lm.model.lm_head(lm.model.ln_f(rec[f"blocks.{l}.resid_post"][0])), -1)
                     for l in range(lm.model.config.n_layer)]
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


def test_recurrent_lm_and_refusals():
    tr = logit_lens(load_model("builtin:lstm-lm"), SENT)
    assert tr.layers == ("LSTM layer 0",) and tr.lens_error < 1e-4 and (tr.final_rank == 0).all()
    with pytest.raises(LensError, match="head|decoder"):
        logit_lens(load_model("pretrained:minilm"), SENT)
    with pytest.raises(LensError):
        logit_lens(load_model("builtin:tiny-gpt"), "   ")
