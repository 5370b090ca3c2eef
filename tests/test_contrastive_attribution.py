"""Contrastive attribution (why the output rather than the foil) for every method, against two independent runs
subtracted; LRP in the token-attribution and decision probes (its relevance is the probe's, its conservation the
numbers the page prints); and the faithfulness curves against a direct computation."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from explorer import nb
from explorer.loading.loaders import load_model
from explorer.metrics.faithfulness import abpc, curves, order_of
from explorer.probes import decision
from explorer.adapters.lrp import lrp
from explorer.probes.token_attribution import (MIN_STEPS, AttributionError, _integrate, _Path, _Row, attribution,
                                               baseline_inputs, in_float32)

SENT = "the keys to the old cabinet are on the"


def _runs(loaded, text: str, rows_a: list[_Row], rows_b: list[_Row]):
    """gradient × input, integrated gradients (one Simpson interval: fixed nodes, so linear in f) and LRP of the rows'
    targets, as separate runs (no foil)."""
    a = loaded.caps.gradient
    ids = torch.tensor(list(a.encode(text).ids))
    raw = a.embed_ids(ids).detach()
    E, logits = raw.float(), in_float32(a.logits_from_embeddings, raw.dtype)
    B, _, _ = baseline_inputs(a, E)
    out = []
    for rows in (rows_a, rows_b):
        res = _integrate(_Path(logits, E, B, rows, positions=True), MIN_STEPS)
        rel = []
        for row in rows:
            def f(x, row=row):
                return logits(x, keep=[row.position])[:, 0, row.target]
            rel.append(lrp(f, E[None, :row.reach]).relevance[0])
        out.append(([r.gxi for r in res], [r.ig for r in res], rel))
    return out


@pytest.mark.parametrize("model", ["builtin:tiny-gpt", "builtin:lstm-lm"])
def test_a_foil_word_is_the_difference_of_two_runs_for_every_method(model):
    loaded = load_model(model)
    tr = attribution(loaded, SENT, steps=MIN_STEPS, of="logit", foil="table")
    foil = loaded.caps.gradient.encode(SENT + " table").ids[len(loaded.caps.gradient.encode(SENT).ids)]
    assert set(tr.foils) == {loaded.caps.gradient.token_strings([foil])[0]} and tr.foil == "table"
    rows_t = [_Row(p, t, p + 1) for p, t in zip(tr.position, _targets(loaded, tr))]
    rows_f = [_Row(p, foil, p + 1) for p in tr.position]
    (g_t, i_t, r_t), (g_f, i_f, r_f) = _runs(loaded, SENT, rows_t, rows_f)
    for m, (gt, gf, it, if_, rt, rf) in enumerate(zip(g_t, g_f, i_t, i_f, r_t, r_f)):
        reach = tr.reach[m]
        np.testing.assert_allclose(tr.gradient_x_input[m, :reach], gt - gf, atol=1e-4)
        np.testing.assert_allclose(tr.integrated[m, :reach], it - if_, atol=1e-4)
        np.testing.assert_allclose(tr.lrp.relevance[m, :reach], rt - rf, atol=1e-4)


def _targets(loaded, tr) -> list[int]:
    """The token ids of the trace's outputs (the sentence's next tokens and the model's own prediction)."""
    a = loaded.caps.gradient
    ids = list(a.encode(SENT).ids)
    own = a.logits_from_embeddings(a.embed_ids(torch.tensor(ids)).float()[None])[0, -1]
    from explorer.adapters.text import unknown_word_id, without_unknown
    return ids[1:] + [int(without_unknown(own, unknown_word_id(a)).argmax())]


def test_the_second_most_likely_foil_is_the_models_runner_up():
    loaded = load_model("builtin:tiny-gpt")
    tr = attribution(loaded, SENT, foil="second", method="gradient × input")
    a = loaded.caps.gradient
    ids = torch.tensor(list(a.encode(SENT).ids))
    with torch.no_grad():
        logits = a.logits_from_embeddings(a.embed_ids(ids).float()[None])[0]
    for m, (p, target) in enumerate(zip(tr.position, _targets(loaded, tr))):
        ranked = logits[p].clone()
        ranked[target] = -float("inf")
        assert tr.foils[m] == a.token_strings([int(ranked.argmax())])[0]
        # LRP explains the logit difference: its value is the model's own
        assert tr.lrp.value[m] == pytest.approx(float(logits[p, target] - logits[p].clone()[int(ranked.argmax())]),
                                                abs=1e-4)
    assert tr.integrating and tr.foil == "second"  # gradient × input shown: no integrated gradients computed


def test_a_word_outside_the_vocabulary_is_refused():
    with pytest.raises(AttributionError, match="not in this model's vocabulary"):
        attribution(load_model("builtin:lstm-lm"), SENT, foil="zyxqv", method="LRP")


def test_decision_label_a_minus_label_b_is_the_difference_of_two_runs():
    loaded = load_model("builtin:sentiment-lstm")
    text = "the film was not good at all ."
    both = decision.attribute(loaded, text, 0, 1, steps=MIN_STEPS)
    a, b = (decision.attribute(loaded, text, lab, steps=MIN_STEPS) for lab in (0, 1))
    np.testing.assert_allclose(both.gradient_x_input, a.gradient_x_input - b.gradient_x_input, atol=1e-5)
    np.testing.assert_allclose(both.integrated, a.integrated - b.integrated, atol=1e-5)
    np.testing.assert_allclose(both.lrp.relevance, a.lrp.relevance - b.lrp.relevance, atol=1e-5)
    assert both.value == pytest.approx(a.value - b.value, abs=1e-5)  # log p(A) − log p(B)
    assert both.lrp.value[0] == pytest.approx(both.value, abs=1e-4)  # = the logit difference LRP explains
    # an LSTM classifier has no softmax inside: LRP conserves everything but what its biases absorb
    assert abs(both.lrp.rest[0]) < 1e-4 and abs(both.lrp.biases[0]) > 1e-3


def test_the_page_and_the_notebook_print_lrps_conservation():
    r = nb.token_attribution("builtin:lstm-lm", SENT, method="lrp", foil="table", out=2)
    tr = r.trace
    rel = tr.lrp
    text = " ".join(r.notes)
    assert f"f = the logit of “{tr.outputs[2]}” minus that of “{tr.foils[2]}” = {rel.value[2]:.4f} = " in text
    assert f"{abs(rel.relevance[2].sum()):.4f} (the inputs' relevance)" in text
    assert f"{abs(rel.biases[2]):.4f} (absorbed by biases)" in text
    assert "(not conserved: the softmax rule and ε)" in text
    # the four terms add up to f (an LSTM has no softmax: nothing is left unconserved)
    assert rel.relevance[2].sum() + rel.biases[2] + rel.positions[2] + rel.rest[2] == pytest.approx(rel.value[2])
    assert abs(rel.rest[2]) < 1e-5
    np.testing.assert_allclose(np.asarray(r.figures["attribution"].data[0].z, dtype=float), rel.relevance, atol=1e-6)


def test_seq2seq_foil():
    loaded = load_model("builtin:seq2seq-bahdanau")
    tr = attribution(loaded, "the red car is fast .", foil="second", method="LRP")
    assert len(tr.foils) == len(tr.outputs) and all(tr.foils) and all(f != o for f, o in zip(tr.foils, tr.outputs))
    assert tr.lrp.relevance.shape == tr.gradient_x_input.shape and not tr.lrp.mixed


def test_faithfulness_curves_are_the_models_log_probabilities():
    loaded = load_model("builtin:tiny-gpt")
    a = loaded.caps.gradient
    ids = torch.tensor(list(a.encode(SENT).ids))
    E = a.embed_ids(ids).float()
    B = torch.zeros_like(E)
    order = order_of(np.arange(len(ids), dtype=float), range(1, len(ids)))
    assert order == list(range(len(ids) - 1, 0, -1))
    d, i = curves(a.logits_from_embeddings, E, B, len(ids) - 1, 7, order, positions=True)
    with torch.no_grad():
        def logp(x):
            return float(torch.log_softmax(a.logits_from_embeddings(x[None])[0, -1].double(), -1)[7])
        X = E.clone()
        X[order[:3]] = 0
        assert d[3] == pytest.approx(logp(X), abs=1e-5)
        Y = E.clone()
        Y[order[2:]] = 0  # the perturbable inputs but the top two at the baseline; the first (not perturbed) kept
        assert i[2] == pytest.approx(logp(Y), abs=1e-5)
    assert d[0] == pytest.approx(logp(E), abs=1e-5) and i[-1] == pytest.approx(logp(E), abs=1e-5)
    assert abpc(d, i) == pytest.approx(float(np.mean(i - d)))


def test_the_views_name_the_measured_ranking_and_the_docs_table_is_the_shipped_one():
    from pathlib import Path

    from explorer.metrics.faithfulness import first_answer, measured, ranking

    table = measured()
    assert set(table) == {"pretrained:smollm2", "builtin:masked-lm-wordnet", "builtin:lstm-lm-wordnet",
                          "builtin:sentiment-lstm"} and all(r.sentences >= 50 for r in table.values())
    row = ranking("rnn-lm")
    assert row is table["builtin:lstm-lm-wordnet"] and list(row.abpc) == sorted(row.abpc, reverse=True)
    r = nb.token_attribution("builtin:lstm-lm", SENT, method="gradient × input")
    assert row.sentence("builtin:lstm-lm") in r.notes and "(not on builtin:lstm-lm itself)" in row.sentence(
        "builtin:lstm-lm") and "itself" not in row.sentence("builtin:lstm-lm-wordnet")
    assert first_answer("rnn-lm") == next(m for m in row.methods if m in ("LRP", "gradient × input"))
    assert first_answer("seq2seq-rnn") == "gradient × input"  # not measured: the plain one
    docs = (Path(__file__).resolve().parent.parent / "docs" / "numbers.md").read_text()
    for mid, rank in table.items():
        line = next(ln for ln in docs.splitlines() if f"(`{mid}`)" in ln)
        for method in ("gradient × input", "integrated gradients", "LRP"):
            i = rank.methods.index(method)
            assert f"{rank.abpc[i]:+.2f} ± {rank.stderr[i]:.2f}" in line, (mid, method, line)
