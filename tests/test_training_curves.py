"""What was learned, when (explorer.training.curves): each curve against an independent computation on a few
snapshots, the view that shows them (app_pages/training_curves.py) and the views a click opens."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch

from conftest import assert_no_exception, run_page
from explorer.data import english
from explorer.loading.loaders import load_model
from explorer.probes.lstm_gates import rnn_gates
from explorer.probes.self_attention import attention_trace
from explorer.text.escape import md_unescape
from explorer.training import curves as TC
from plotly_arrays import plotly_array

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def lstm() -> TC.SeriesCurves:
    return TC.series_curves("builtin:lstm-lm")


@pytest.fixture(scope="module")
def gpt() -> TC.SeriesCurves:
    return TC.series_curves("builtin:tiny-gpt")


def _items(vocab):
    """The held-out agreement items every word of which the model knows, as text."""
    out = []
    for p in english.agreement_pairs(TC.ITEMS, english.HELDOUT_SEED, min_distance=1):
        if all(w in vocab.stoi for w in [*p.prefix, p.correct, p.wrong]):
            out.append((" ".join(p.prefix), p.correct, p.wrong, p.number == "pl"))
    return out


@pytest.mark.parametrize("name,index", [("lstm", 13), ("lstm", 15), ("gpt", 14)])
def test_agreement_is_the_share_of_items_where_the_right_verb_wins(name, index, lstm, gpt) -> None:
    c = lstm if name == "lstm" else gpt
    loaded = load_model(f"{c.model}@{c.steps[index]}")
    vocab = loaded.vocabs["vocab"]
    items = _items(vocab)
    assert len(items) == c.n_items > 500
    right = []
    with torch.no_grad():  # one item at a time, no padding: the model's own forward on <bos> + prefix
        for text, good, bad, _ in items:
            ids = torch.tensor([[vocab.stoi["<bos>"], *vocab.encode(text.split())]])
            out = loaded.model(ids)
            logits = (out[0] if isinstance(out, tuple) else out)[0, -1]
            right.append(bool(logits[vocab.stoi[good]] > logits[vocab.stoi[bad]]))
    assert c.curves[TC.AGREEMENT][index] == pytest.approx(np.mean(right), abs=1e-12)


@pytest.mark.parametrize("index", [0, 13, 15])
def test_the_number_unit_is_the_units_sign_and_is_read_by_the_recurrent_cell_view(index, lstm) -> None:
    loaded = load_model(f"{lstm.model}@{lstm.steps[index]}")
    items = _items(loaded.vocabs["vocab"])
    # the cell states after each prefix, recomputed by the recurrent-cell view's probe from the weights
    cells = np.stack([rnn_gates(loaded, text).gates["c"][0, 0, -1] for text, *_ in items])     # (N, H)
    plural = np.array([p for *_, p in items])
    half = len(items) // 2
    fit = ((cells[:half] > 0) == plural[:half, None]).mean(axis=0)
    unit = int(lstm.unit[index])
    assert max(fit[unit], 1 - fit[unit]) == pytest.approx(np.maximum(fit, 1 - fit).max())
    flip = fit[unit] < 0.5
    accuracy = (((cells[half:, unit] > 0) != flip) == plural[half:]).mean()
    assert lstm.curves[TC.NUMBER_UNIT][index] == pytest.approx(accuracy, abs=1e-12)
    if index >= 13:  # once agreement is learned, the unit is lesson 01's number unit
        assert unit == 133 and accuracy > 0.8


@pytest.mark.parametrize("name,index", [("lstm", 0), ("lstm", 15), ("gpt", 12)])
def test_neighbour_precision_recomputed_with_numpy(name, index, lstm, gpt) -> None:
    c = lstm if name == "lstm" else gpt
    loaded = load_model(f"{c.model}@{c.steps[index]}")
    model = loaded.model
    table = (model.embedding.weight if name == "lstm" else model.wte.weight).detach().numpy().astype(np.float64)
    itos = loaded.vocabs["vocab"].itos
    ids = [i for i, w in enumerate(itos) if english.word_class(w)]
    W = table[ids] / np.linalg.norm(table[ids], axis=1, keepdims=True)
    sims = W @ W.T
    np.fill_diagonal(sims, -np.inf)
    top = np.argsort(-sims, axis=1)[:, :5]
    classes = np.array([english.word_class(itos[i]) for i in ids])
    per_class: dict[str, list[float]] = {}
    for row, neighbours in enumerate(top):
        per_class.setdefault(classes[row], []).append(float((classes[neighbours] == classes[row]).mean()))
    expected = np.mean([p for v in per_class.values() for p in v])
    assert c.curves[TC.NEIGHBOURS][index] == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("index", [0, 15])
def test_head_scores_from_the_self_attention_views_patterns(index, gpt) -> None:
    loaded = load_model(f"{gpt.model}@{gpt.steps[index]}")
    vocab = loaded.vocabs["vocab"]
    total, count = 0.0, 0
    for words in english.generate_sentences(TC.SENTENCES, english.HELDOUT_SEED)[:TC.SENTENCES]:
        tr = attention_trace(loaded, " ".join(words), arithmetic=False)
        assert tr.tokens[0] == "<bos>" and len(tr.tokens) == len(words) + 1
        A = tr.attentions                                                  # (L, H, T, T)
        T = A.shape[-1]
        total = total + A[..., np.arange(1, T), np.arange(T - 1)].sum(-1)
        count += T - 1
    np.testing.assert_allclose(gpt.heads[TC.PREVIOUS][index], total / count, atol=1e-5)
    rng = random.Random(0)
    seqs = [[rng.randrange(4, len(vocab.itos)) for _ in range(TC.HALF)] for _ in range(TC.REPEATS)]
    scores = []
    for s in seqs:
        tr = attention_trace(loaded, " ".join(vocab.itos[i] for i in s + s), arithmetic=False)
        A = tr.attentions
        scores.append(np.mean([A[:, :, t, t - TC.HALF + 1] for t in range(TC.HALF + 1, 2 * TC.HALF + 1)], axis=0))
    np.testing.assert_allclose(gpt.heads[TC.INDUCTION][index], np.mean(scores, axis=0), atol=1e-5)


def test_the_curves_tell_when_agreement_and_the_number_unit_arrive(lstm, gpt) -> None:
    for c in (lstm, gpt):
        agreement = c.curves[TC.AGREEMENT]
        assert (np.abs(agreement[:10] - 0.5) < 0.06).all() and agreement[-1] > 0.95  # chance, then learned
        assert c.curves[TC.NEIGHBOURS][-1] > 5 * c.curves[TC.NEIGHBOURS][0]
        assert np.isnan(c.curves[TC.TRAIN_LOSS][0]) and c.curves[TC.LOSS][-1] < c.curves[TC.LOSS][0] - 3
    assert lstm.curves[TC.NUMBER_UNIT][-1] > 0.95 and (lstm.unit[-3:] == 133).all() and not gpt.heads == {}
    assert (gpt.unit == -1).all() and TC.NUMBER_UNIT not in gpt.curves


# --------------------------------------------------------------------------------------------------- the view
def _charts(at) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def test_the_view_draws_the_measured_curves_and_every_head(gpt) -> None:
    at = run_page("app_pages/training_curves.py", {"model": "builtin:tiny-gpt", "score": "induction"})
    assert_no_exception(at)
    curves, heads = _charts(at)
    drawn = {t["name"]: plotly_array(t["y"]) for t in curves["data"]}
    assert set(drawn) == set(gpt.curves)
    for name, values in gpt.curves.items():
        np.testing.assert_allclose(drawn[name], values, atol=1e-9)
    np.testing.assert_allclose(plotly_array(curves["data"][0]["x"]), gpt.steps + 1)
    S, L, H = gpt.heads[TC.INDUCTION].shape
    np.testing.assert_allclose(plotly_array(heads["data"][0]["z"]), gpt.heads[TC.INDUCTION].reshape(S, L * H).T,
                               atol=1e-6)
    assert heads["data"][0]["zmin"] == 0 and heads["data"][0]["zmax"] == 1
    captions = " | ".join(md_unescape(c.value) for c in at.caption)
    step = int(gpt.steps[np.argmax(gpt.curves[TC.AGREEMENT] >= 0.9)])
    assert f"agreement: {gpt.curves[TC.AGREEMENT][-1]:.3f} at the end, first ≥ 0.9 at step {step:,}" in captions


def test_a_model_without_snapshots_is_named_with_those_that_have_them() -> None:
    at = run_page("app_pages/training_curves.py", {"model": "builtin:gru-lm"})
    assert_no_exception(at)
    said = " ".join(i.value for i in at.info).replace("\\", "")
    assert "builtin:gru-lm was not trained with snapshots" in said and "builtin:lstm-lm" in said


@pytest.mark.parametrize("curve,step", [(TC.NUMBER_UNIT, 1096), (TC.AGREEMENT, 640), (TC.LOSS, 43),
                                        (TC.NEIGHBOURS, 218)])
def test_a_click_opens_the_view_that_shows_the_curve_at_that_step(curve, step, lstm) -> None:
    page, params = TC.view_at(lstm, curve, step)
    at = run_page(f"app_pages/{page.replace('-', '_')}.py", params)
    assert_no_exception(at)
    assert not at.error
    assert at.query_params["train_step"] == str(step) and at.query_params["model"] == "builtin:lstm-lm"
    assert f"Step {step:,} of 1,878" in " | ".join(c.value for c in at.caption).replace("\\", "")
    if curve == TC.NUMBER_UNIT:
        assert at.query_params["unit"] == str(int(lstm.unit[list(lstm.steps).index(step)])) == "133"


def test_a_run_that_is_not_a_language_model_shows_its_losses() -> None:
    """Watch it learn offers every model trained with snapshots (and the Models page links each run kept with them):
    word vectors trained on generated English predict no next word to read agreement in, so their losses alone."""
    from explorer.training.jobs import TrainingJob
    from explorer.training.spec import TrainSpec

    spec = TrainSpec(architecture="word2vec", corpus="english", n_train=300, n_heldout=30, hidden_size=16, epochs=1,
                     batch_size=16, name="my-word2vec")
    job = TrainingJob(spec, snapshots=3).start()
    assert job.wait(120) and job.status == "done", job.error
    at = run_page("app_pages/training_curves.py", {"model": job.model_id})
    assert_no_exception(at)
    said = " ".join(i.value for i in at.info).replace("\\", "")
    assert f"{job.model_id} is not a language model: only its losses are shown" in said
