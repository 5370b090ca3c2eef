"""Token attribution against independent computations: autograd on the model itself, finite differences, and
integrated gradients' completeness."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from explorer.loaders import LoadedModel, load_model
from explorer.probes.attribution import AttributionError, attribution
from families import tiny

SENT = "the keys to the old cabinet are on the table ."


def _gxi_by_hand(f, E):
    x = E.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(f(x), x)
    return (g * x).sum(-1).detach().numpy()


def test_builtin_gpt_gradient_x_input_equals_autograd_and_finite_differences():
    lm = load_model("builtin:tiny-gpt")
    tr = attribution(lm, SENT, steps=32)
    ids = torch.tensor(lm.adapter.encode(SENT).ids)
    E = lm.model.wte(ids).detach()
    row = 6  # predicting "are" after "... cabinet"
    p, y = tr.position[row], ids[tr.position[row] + 1]
    assert tr.outputs[row] == "are"

    def f(e):
        return lm.model(None, embeds=e[None])[0, p, y]
    np.testing.assert_allclose(tr.gradient_x_input[row, :p + 1], _gxi_by_hand(f, E)[:p + 1], atol=1e-5)
    # gradient × input of token j is the derivative of f along E_j: (f(E_j·(1 + ε)) − f(E_j·(1 − ε))) / 2ε, taken
    # in float64 on a copy of the model (independent of autograd)
    m64 = copy.deepcopy(lm.model).double()
    eps, j = 1e-5, 2
    with torch.no_grad():
        up, down = E.double().clone(), E.double().clone()
        up[j] *= 1 + eps
        down[j] *= 1 - eps
        fd = (float(m64(None, embeds=up[None])[0, p, y]) - float(m64(None, embeds=down[None])[0, p, y])) / (2 * eps)
    assert tr.gradient_x_input[row, j] == pytest.approx(fd, rel=1e-3, abs=1e-5)
    assert np.all(tr.integrated[row, p + 1:] == 0) and tr.reach[row] == p + 1


def test_integrated_gradients_completeness_improves_with_steps():
    lm = load_model("builtin:tiny-gpt")
    coarse, fine = attribution(lm, SENT, steps=4), attribution(lm, SENT, steps=128)
    delta = np.abs(fine.logit - fine.baseline_logit)
    assert np.all(fine.completeness <= 0.01 * delta + 1e-3)
    assert fine.max_completeness < coarse.max_completeness
    np.testing.assert_allclose(fine.integrated.sum(1), fine.logit - fine.baseline_logit, atol=0.01 * delta.max())
    assert fine.predicted and fine.outputs[-1] == lm.adapter.token_strings(
        [int(lm.model(torch.tensor([lm.adapter.encode(SENT).ids]))[0, -1].argmax())])[0]


def test_recurrent_lm_and_seq2seq():
    lstm = load_model("builtin:lstm-lm")
    tr = attribution(lstm, SENT, steps=16)
    ids = torch.tensor(lstm.adapter.encode(SENT).ids)
    E = lstm.model.embedding(ids).detach()
    p, y = tr.position[-2], ids[tr.position[-2] + 1]

    def f(e):
        out, _ = lstm.model.rnn(e[None])
        return lstm.model.decoder(out)[0, p, y]
    np.testing.assert_allclose(tr.gradient_x_input[-2, :p + 1], _gxi_by_hand(f, E)[:p + 1], atol=1e-5)
    s2s = load_model("builtin:seq2seq-bahdanau")
    tr = attribution(s2s, "the red car is fast .", steps=64)
    S = tr.segment.count(0)
    assert tr.outputs[:3] == ("la", "voiture", "rouge") and len(tr.inputs) == S + len(tr.outputs)
    assert tr.reach[0] == S + 1 and np.all(tr.integrated[0, S + 1:] == 0)  # output 0 sees the source and <bos>
    assert np.all(tr.completeness <= 0.02 * np.abs(tr.logit - tr.baseline_logit))  # 64 steps


@pytest.mark.parametrize("name", ["llama", "t5"])
def test_hf_models_equal_autograd(name):
    model, tok, family = tiny(name)
    lm = LoadedModel(f"test:{name}", family, model, "cpu", "float32", {}, tokenizer=tok)
    tr = attribution(lm, "the red car is fast .", target="la voiture rouge" if name == "t5" else "", steps=8)
    ids = torch.tensor(lm.adapter.encode("the red car is fast .").ids)
    E = model.get_input_embeddings()(ids).detach()
    if name == "llama":
        p, y = tr.position[2], ids[tr.position[2] + 1]

        def f(e):
            return model(inputs_embeds=e[None]).logits[0, p, y]
        np.testing.assert_allclose(tr.gradient_x_input[2, :p + 1], _gxi_by_hand(f, E)[:p + 1], atol=1e-5)
    else:
        dec = torch.tensor([0, *lm.adapter.encode("la voiture rouge", side="target").ids[:-1]])
        D = model.get_input_embeddings()(dec).detach()
        out_ids = lm.adapter.encode("la voiture rouge", side="target").ids

        def f(e):
            return model(inputs_embeds=e[None], decoder_inputs_embeds=D[None]).logits[0, 1, out_ids[1]]
        np.testing.assert_allclose(tr.gradient_x_input[1, :len(ids)], _gxi_by_hand(f, E), atol=1e-5)


def test_refusals():
    with pytest.raises(AttributionError, match="head"):
        attribution(load_model("pretrained:minilm"), SENT)
    with pytest.raises(AttributionError):
        attribution(load_model("builtin:tiny-gpt"), "")
