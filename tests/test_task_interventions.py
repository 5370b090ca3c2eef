"""Interventions on task models: a student's recurrent classifier or tagger patched toward one of its labels.

Every patched logit difference is checked against an independent reference: the module's own weights in
nn.LSTMCell / nn.GRUCell copies, stepped one word at a time in each direction, with one state replaced by the clean
run's, then read out as the module's own forward reads its states (h_n[-1] into fc; the mean over the words; the
tagger's last word)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from explorer.data import examples as E
from explorer.loading.loaders import load_model
from explorer.probes import interventions as I
from tests.test_decision import LABELS, LastState, MeanPooled, Tagger, _ids, _upload

CLEAN, CORRUPT = "the film was not good", "the film was very good"
TOL = 1e-5


def _cells(rnn: torch.nn.RNNBase) -> list[list[torch.nn.Module]]:
    """Per layer and direction, an nn.LSTMCell / nn.GRUCell holding the module's own weights."""
    kind = torch.nn.LSTMCell if isinstance(rnn, torch.nn.LSTM) else torch.nn.GRUCell
    D, H = 2 if rnn.bidirectional else 1, rnn.hidden_size
    out = []
    for layer in range(rnn.num_layers):
        row = []
        for d in range(D):
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            cell = kind(rnn.input_size if layer == 0 else D * H, H)
            cell.load_state_dict({f"{k}_{p}": getattr(rnn, f"{k}_{p}{sfx}") for k in ("weight", "bias")
                                  for p in ("ih", "hh")})
            row.append(cell)
        out.append(row)
    return out


def _stepped(rnn, x, patch=None, source=None, edit=None):
    """x (T, E) -> (top-layer states (T, D·H), every state {(layer, dir, t): {"h", "c"}}); patch (layer, dir, t,
    kind) replaces that state by source's as it is made; edit(layer, dir, h) -> h changes every h as it is made."""
    cells, T, seen = _cells(rnn), x.shape[0], {}
    for layer, row in enumerate(cells):
        outs = []
        for d, cell in enumerate(row):
            h = c = torch.zeros(1, rnn.hidden_size)
            hs = [None] * T
            for t in (range(T) if d == 0 else reversed(range(T))):
                if isinstance(cell, torch.nn.LSTMCell):
                    h, c = cell(x[t:t + 1], (h, c))
                else:
                    h = cell(x[t:t + 1], h)
                if patch == (layer, d, t, "h"):
                    h = source[(layer, d, t)]["h"]
                if patch == (layer, d, t, "c"):
                    c = source[(layer, d, t)]["c"]
                if edit is not None:
                    h = edit(layer, d, h)
                seen[(layer, d, t)] = {"h": h, "c": c}
                hs[t] = h[0]
            outs.append(torch.stack(hs))
        x = torch.cat(outs, dim=-1)
    return x, seen


READOUT = {  # as each module's forward reads its top layer's states (T, D·H) -> (C,)
    "last": lambda m, out: m.fc(out[-1]),
    "mean": lambda m, out: m.classifier(out.mean(0)),
    "tag": lambda m, out: m.out(out[-1]),
}
MODULES = {"last": (LastState, {"labels": ["negative", "positive"]}, ("positive", "negative")),
           "mean": (MeanPooled, {"pooling": "mean", "labels": list(LABELS.values())}, ("positive", "negative")),
           "tag": (Tagger, {"task": "tag", "labels": ["NOUN", "VERB", "ADJ", "OTHER"]}, ("ADJ", "VERB"))}


@pytest.mark.parametrize("name", list(MODULES))
def test_patching_a_task_model_equals_its_module_stepped_with_the_state_replaced(name: str) -> None:
    torch.manual_seed(3)
    cls, settings, (answer, wrong) = MODULES[name]
    m = cls().eval()
    loaded = _upload(m, settings)
    a, w = (settings["labels"].index(x) for x in (answer, wrong))
    rnn = next(mod for mod in m.modules() if isinstance(mod, torch.nn.RNNBase))
    emb = next(mod for mod in m.modules() if isinstance(mod, torch.nn.Embedding))
    with torch.no_grad():
        xs = {t: emb(_ids(t))[0] for t in (CLEAN, CORRUPT)}
        own = {t: (m(_ids(t))[0, -1] if name == "tag" else m(_ids(t))[0]) for t in (CLEAN, CORRUPT)}
        out, clean_states = _stepped(rnn, xs[CLEAN])
        np.testing.assert_allclose(READOUT[name](m, out), own[CLEAN], atol=TOL)  # the reference is the module's
        c = I.contrast(loaded, CLEAN, CORRUPT, answer, wrong)
        assert (c.answer, c.wrong, c.answer_id, c.wrong_id) == (answer, wrong, a, w)
        for text, metric in ((CLEAN, c.clean), (CORRUPT, c.corrupted)):
            assert metric.ld == pytest.approx(float(own[text][a] - own[text][w]), abs=TOL)
            assert metric.p_answer == pytest.approx(float(torch.softmax(own[text], -1)[a]), abs=1e-6)
        layout = I.layout(loaded)
        for kind in layout.kinds:
            for d, dir_ in enumerate(layout.directions):
                grid = I.patching(loaded, CLEAN, CORRUPT, answer, wrong, kind, "denoise", -1, dir_)
                ref = np.array([[float((lo := READOUT[name](m, _stepped(rnn, xs[CORRUPT], (layer, d, t, kind),
                                                                        clean_states)[0]))[a] - lo[w])
                                 for t in range(xs[CLEAN].shape[0])] for layer in range(rnn.num_layers)])
                np.testing.assert_allclose(grid.values, ref, atol=TOL, rtol=0)
                np.testing.assert_allclose(grid.restored, c.restored(ref), atol=1e-4)
    where = "the prompt's last token" if name == "tag" else "the whole prompt"
    assert where in c.reads and c.last_state == (name == "last")


def test_attribution_patching_of_a_classifier_is_the_gradient_times_the_difference() -> None:
    torch.manual_seed(4)
    m = LastState().eval()
    loaded = _upload(m, MODULES["last"][1])
    rnn, x = m.lstm, {t: m.embedding(_ids(t))[0].detach() for t in (CLEAN, CORRUPT)}
    with torch.no_grad():
        _, clean = _stepped(rnn, x[CLEAN])
    # the corrupted run's top-layer h as leaves: the gradient of LD through fc and the later steps
    out, seen = _stepped(rnn, x[CORRUPT])
    hs = [seen[(1, 0, t)]["h"] for t in range(x[CLEAN].shape[0])]
    logits = m.fc(out[-1])
    grads = torch.autograd.grad(logits[1] - logits[0], hs)
    ref = np.array([float(((clean[(1, 0, t)]["h"] - hs[t].detach()) * grads[t]).sum()) for t in range(len(hs))])
    est = I.attribution(loaded, CLEAN, CORRUPT, "positive", "negative")["h"]
    c = I.contrast(loaded, CLEAN, CORRUPT, "positive", "negative")
    np.testing.assert_allclose(est.values[1] - c.corrupted.ld, ref, atol=1e-5)


def test_ablating_a_unit_of_a_tagger_shows_its_labels() -> None:
    torch.manual_seed(5)
    m = Tagger().eval()
    labels = MODULES["tag"][1]["labels"]
    loaded = _upload(m, MODULES["tag"][1])
    ab = I.ablation(loaded, CLEAN, ("L0U2",), "zero", CORRUPT, "ADJ", "VERB")
    with torch.no_grad():
        p = torch.softmax(m(_ids(CLEAN))[0, -1].double(), -1)
    order = torch.argsort(p, descending=True)
    assert ab.before_tokens == tuple(labels[i] for i in order) and len(ab.after_tokens) == 4
    np.testing.assert_allclose(ab.before_probs, p[order].numpy(), atol=1e-6)
    assert ab.outputs == "labels of the clean prompt's last token"
    # unit 2 of the forward direction's h zeroed at every step (the site a unit names): the module stepped so
    def zero_unit(layer, d, h):
        return h.index_fill(1, torch.tensor([2]), 0.0) if (layer, d) == (0, 0) else h

    with torch.no_grad():
        out, _ = _stepped(m.lstm, m.embedding(_ids(CLEAN))[0], edit=zero_unit)
        after = torch.softmax(m.out(out[-1]).double(), -1)
    assert ab.components == ("layer 0 unit 2",)
    np.testing.assert_allclose(ab.after_probs, torch.sort(after, descending=True).values.numpy(), atol=1e-6)
    assert ab.after is not None and ab.after.ld == pytest.approx(float(torch.log(after[2] / after[1])), abs=1e-5)


def test_a_label_that_is_not_the_models_is_a_message() -> None:
    loaded = _upload(LastState().eval(), MODULES["last"][1])
    with pytest.raises(I.InterventionError, match=r"'Paris' is not one of the labels: negative, positive\."):
        I.contrast(loaded, CLEAN, CORRUPT, "Paris", "negative")
    with pytest.raises(I.InterventionError, match="Type the wrong label: negative, positive"):
        I.contrast(loaded, CLEAN, CORRUPT, "positive", " ")
    assert I.contrast(loaded, CLEAN, CORRUPT, "1", "NEGATIVE").answer == "positive"  # an index, and any case


@pytest.mark.parametrize("model_id, clean", [("builtin:sentiment-lstm", "The food was not good."),
                                             ("builtin:pos-bilstm", "Please turn on the light")])
def test_the_shipped_task_models_pairs_restore_their_label(model_id: str, clean: str) -> None:
    """The pairs the view offers the shipped task models: the clean prompt decides the answer label, the corrupted
    one the wrong label, and patching the whole top layer's forward h at the last position of a one-direction
    last-state classifier restores exactly 1."""
    loaded = load_model(model_id)
    assert clean in loaded.adapter.examples("contrast").sentences
    args = (clean, *E.CONTRASTS[clean])
    c = I.contrast(loaded, *args)
    assert c.clean.ld > 2 and c.corrupted.ld < 0  # each prompt decides its own label
    decide = loaded.caps.decision
    for text, metric in ((args[0], c.clean), (args[1], c.corrupted)):
        enc = decide.encode(text)
        with torch.no_grad():
            logits = decide.decision_logits(decide.embed_ids(torch.tensor([list(enc.ids)])))[0]
        logits = logits[-1] if decide.head.per_token else logits
        assert metric.ld == pytest.approx(float(logits[c.answer_id] - logits[c.wrong_id]), abs=1e-4)
    grid = I.patching(loaded, *args, "h")
    if c.last_state:
        assert grid.restored[-1, -1] == pytest.approx(1.0, abs=1e-5)


def test_a_hugging_face_classifier_is_said_to_be_one() -> None:
    loaded = load_model("pretrained:minilm-sentiment")
    with pytest.raises(I.InterventionError, match="sentence classifier with 2 labels .*only in recurrent classifiers"):
        I.layout(loaded)


def test_the_notebook_patches_a_classifier_as_the_view_does() -> None:
    from explorer import nb

    args = ("The food was not good.", "The food was very good.", "negative", "positive")
    res = nb.interventions("builtin:sentiment-lstm", *args, site="h")
    grid = I.patching(load_model("builtin:sentiment-lstm"), *args, "h")
    np.testing.assert_allclose(res.trace.restored, grid.restored, atol=1e-9)
    assert res.trace.rows == ("layer 0", "layer 1") and res.trace.cols[4] == "not"
