"""Gradients through time against autograd on the model's own nn.LSTM/GRU/RNN, and Jacobians against the
module's own single step."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from explorer.loading.loaders import load_model
from explorer.probes.gradients_through_time import GradientError, gradients_through_time, spectral_norm

SENT = "the keys to the cabinets in the old kitchen are"


@pytest.mark.parametrize("name", ["rnn-lm", "gru-lm", "lstm-lm"])
def test_input_gradients_and_jacobians_are_the_models_own(name):
    lm = load_model(f"builtin:{name}")
    tr = gradients_through_time(lm, SENT)
    ids = torch.tensor(lm.adapter.encode(SENT).ids)
    m = lm.model
    x = m.embedding(ids[:-1]).detach().requires_grad_(True)
    out, _ = m.rnn(x[None])
    logp = torch.log_softmax(m.decoder(out[0, -1]), -1)[ids[-1]]
    (g,) = torch.autograd.grad(logp, x)
    assert tr.tokens[0] == "<bos>" and tr.target == "are" and tr.log_prob == pytest.approx(float(logp), abs=1e-5)
    np.testing.assert_allclose(tr.input_grad, g.norm(dim=-1).numpy(), rtol=1e-4, atol=1e-7)
    assert tr.distance.tolist() == list(range(len(ids) - 2, -1, -1))
    # the Jacobian of one step of the module itself, at the state reached after the first two words
    lstm = isinstance(m.rnn, torch.nn.LSTM)
    H = m.rnn.hidden_size
    with torch.no_grad():
        _, state = m.rnn(x[None, :2].detach())
    s0 = torch.cat([state[0].reshape(-1), state[1].reshape(-1)]) if lstm else state.reshape(-1)

    def step(s):
        hidden = (s[:H].view(1, 1, H), s[H:].view(1, 1, H)) if lstm else s.view(1, 1, H)
        _, new = m.rnn(x[None, 2:3].detach(), hidden)
        return torch.cat([new[0].reshape(-1), new[1].reshape(-1)]) if lstm else new.reshape(-1)
    J = torch.autograd.functional.jacobian(step, s0)
    assert tr.step_norms[1] == pytest.approx(float(torch.linalg.matrix_norm(J, ord=2)), rel=1e-4)
    assert tr.products[-1] == 1.0 and tr.products[0] == pytest.approx(np.prod(tr.step_norms), rel=1e-9)


@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (64, 64), (512, 512)])
def test_spectral_norm_is_the_largest_singular_value(shape):
    rng = np.random.default_rng(0)
    for scale in (0.1, 1.0, 10.0):
        J = rng.normal(size=shape) * scale
        assert spectral_norm(J) == pytest.approx(float(np.linalg.svd(J, compute_uv=False)[0]), rel=1e-9)
    assert spectral_norm(np.eye(shape[0]) * 0.5) == pytest.approx(0.5, rel=1e-12)  # equal singular values


def test_refusals():
    with pytest.raises(GradientError, match="recurrence"):
        gradients_through_time(load_model("builtin:tiny-gpt"), SENT)
    with pytest.raises(GradientError):
        gradients_through_time(load_model("builtin:lstm-lm"), "the")


def test_models_the_view_leaves_out_are_named_with_their_kind():
    from explorer.loading.catalogue import FAMILIES
    from explorer.probes.gradients_through_time import left_out_notes

    notes = left_out_notes(["pretrained:smollm2", "hf:gpt2", "builtin:word2vec"],
                           {"pretrained:smollm2": FAMILIES["decoder"], "builtin:word2vec": FAMILIES["word2vec"]},
                           kept=["builtin:gru-lm"])
    assert notes[0] == ("pretrained:smollm2 is a Transformer decoder (causal LM): gradients through time are computed "
                        "for recurrent models (the built-in RNN, GRU and LSTM language models, or a recurrent state "
                        "dict), whose gradient flows back through one state update per word; it is left out, showing "
                        "builtin:gru-lm.")
    assert notes[1].startswith("hf:gpt2 is not a recurrent model available here: ")
    assert notes[2].startswith("builtin:word2vec holds word embeddings: ")
    assert left_out_notes(["builtin:tiny-gpt"], {}, [])[0].endswith("showing the built-in recurrent models instead.")
