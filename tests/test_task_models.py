"""The shipped task models (explorer.training.task_models): builtin:sentiment-lstm and builtin:pos-bilstm read as
the explorer reads any model, their numbers equal to their own forward, and the figures docs/builtin-models.md
prints recomputed from the shipped checkpoints: held-out accuracy, the everyday sentences written for the tests (at
least 85 % for sentiment, 80 % for part of speech in context) and the mistakes made there."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from explorer.adapters import capabilities as C
from explorer.loading.loaders import load_model
from explorer.models.rnn_classifier import RNNClassifier
from explorer.probes import decision as P
from explorer.training import task_models as T

NAMES = ("sentiment-lstm", "pos-bilstm")
TARGET = {"sentiment-lstm": 0.85, "pos-bilstm": 0.80}


@pytest.fixture(scope="module", params=NAMES)
def shipped(request: pytest.FixtureRequest):
    loaded = load_model(f"builtin:{request.param}")
    return request.param, loaded


def test_a_shipped_task_model_is_read_as_any_model(shipped) -> None:
    name, loaded = shipped
    assert isinstance(loaded.model, RNNClassifier) and loaded.family == "rnn-classifier"
    assert loaded.caps.names == C.MAY_HAVE["rnn-classifier"]
    head = loaded.caps.decision.head
    if name == "sentiment-lstm":
        assert head.labels == ("negative", "positive") and head.pooling == "last" and not head.per_token
    else:
        assert head.labels == ("noun", "verb", "adjective", "adverb", "other") and head.per_token
    assert head.assumed == ()  # the built-ins say everything: nothing is assumed
    text = "the food was not bad at all ."
    trace = P.decide(loaded, text)
    ids = torch.tensor([list(loaded.adapter.encode(text).ids)])
    with torch.no_grad():
        theirs = loaded.model.decide(ids)[0].double()
    np.testing.assert_allclose(trace.logits, theirs.numpy(), atol=1e-5)
    if not head.per_token:  # each prefix: the model run on <bos> and the words so far
        for t in range(1, ids.shape[1]):
            with torch.no_grad():
                p = torch.softmax(loaded.model.decide(ids[:, :t + 1])[0].double(), -1).numpy()
            np.testing.assert_allclose(trace.prefix_probs[t], p, atol=1e-5)


def test_the_training_batches_run_each_sentence_as_it_runs_alone(shipped) -> None:
    """The trainer's packed batches give each sentence the logits the model gives it alone."""
    _, loaded = shipped
    model = loaded.model
    seqs = [[2, 5, 9, 11], [2, 7], [2, 30, 31, 32, 33, 34]]
    where = [(0, -1), (1, -1), (2, -1)] if model.task == "classify" else [(0, 3), (1, 1), (2, 5), (2, 2)]
    with torch.no_grad():
        got = T.logits_of(model, seqs, where)
        ref = [model.decide(torch.tensor([seqs[b]]))[0] for b, _ in where]
    ref_rows = torch.stack([r if p < 0 else r[p] for r, (_, p) in zip(ref, where)])
    torch.testing.assert_close(got, ref_rows, atol=1e-5, rtol=0)


def test_the_figures_in_the_docs_are_the_checkpoints_own(shipped) -> None:
    """Held-out and everyday accuracy and the everyday mistakes, recomputed from the shipped checkpoint and corpus,
    equal the checkpoint's meta (which docs/builtin-models.md prints), and meet the targets."""
    name, loaded = shipped
    recipe = T.RECIPES[name]
    vocab, metrics = loaded.vocabs["vocab"], loaded.meta["metrics"]
    heldout, labels = T.corpus(recipe, "heldout")
    held, _ = T.accuracy(loaded.model, heldout, vocab)
    assert held == pytest.approx(metrics["heldout_accuracy"], abs=1e-9) and len(heldout) == metrics["heldout_n"]
    tests = T.everyday(recipe, labels)
    right, predicted = T.accuracy(loaded.model, [e for _, e in tests], vocab)
    assert right == pytest.approx(metrics["everyday_accuracy"], abs=1e-9) and len(tests) == metrics["everyday_n"]
    mistakes = [s for (s, e), p in zip(tests, predicted) if p != e[1]]
    assert mistakes == [m["sentence"] for m in metrics["everyday_mistakes"]]
    assert right >= TARGET[name], f"{name}: {right:.1%} of the everyday sentences"
    from pathlib import Path

    docs = (Path(__file__).resolve().parent.parent / "docs" / "builtin-models.md").read_text(encoding="utf-8")
    assert f"{right:.1%}" in docs and f"{held:.1%}" in docs, name


def test_the_tagger_reads_a_word_by_its_context() -> None:
    """The point of the tagger: "run" and "light" change label with their context."""
    loaded = load_model("builtin:pos-bilstm")
    cases = [("they went for a long run .", "run", "noun"), ("they run every morning .", "run", "verb"),
             ("please turn on the light .", "light", "noun"), ("this bag is very light .", "light", "adjective")]
    for text, word, label in cases:
        trace = P.decide(loaded, text)
        i = trace.tokens.index(word)
        assert trace.labels[int(trace.probs[i].argmax())] == label, (text, trace.probs[i])


# ------------------------------------------------------------- MiniLM fine-tuned (explorer.training.minilm_shipped)
MINILM = {"minilm-sentiment": ("sentiment-lstm", 0.85), "minilm-pos": ("pos-bilstm", 0.80)}


@pytest.fixture(scope="module", params=sorted(MINILM))
def fine_tuned(request: pytest.FixtureRequest):
    return request.param, load_model(f"pretrained:{request.param}")


def test_a_fine_tuned_minilm_is_the_package_with_its_trained_layers_put_over(fine_tuned) -> None:
    """Its first layers are the package's, its last layer, pooler and head the shipped tensors (float16 values), its
    labels in the config; the decision view's numbers are its own forward's."""
    from explorer.loading.pretrained import OVERLAYS, minilm_dir
    from explorer.files.safe_load import read_state_dict_file
    from explorer.training.minilm_task import FROZEN

    name, loaded = fine_tuned
    model, tok = loaded.model, loaded.tokenizer
    base = read_state_dict_file(minilm_dir() / "model.safetensors")
    own = model.state_dict()
    torch.testing.assert_close(own["bert.encoder.layer.0.attention.self.query.weight"],
                               base["encoder.layer.0.attention.self.query.weight"], atol=0, rtol=0)
    trained = read_state_dict_file(OVERLAYS[name])
    assert {k.split(".")[3] for k in trained if k.startswith("bert.encoder.layer.")} == {str(FROZEN)}
    for k, t in trained.items():
        torch.testing.assert_close(own[k], t.float(), atol=0, rtol=0)
    labels = ("negative", "positive") if name == "minilm-sentiment" else ("noun", "verb", "adjective", "adverb",
                                                                          "other")
    assert tuple(model.config.id2label.values()) == labels == loaded.caps.decision.head.labels
    text = "The film was not good at all."
    trace = P.decide(loaded, text)
    with torch.no_grad():
        theirs = model(**tok(text, return_tensors="pt")).logits[0].double().numpy()
    np.testing.assert_allclose(trace.logits, theirs, atol=1e-4)


def test_a_fine_tuned_minilms_figures_are_its_own(fine_tuned) -> None:
    """Held-out and everyday accuracy and the mistakes, recomputed from the shipped weights as loaded, equal the
    figures in its JSON (which docs/builtin-models.md prints), and meet the targets."""
    from pathlib import Path

    from explorer.training.minilm_shipped import figures

    name, loaded = fine_tuned
    metrics = loaded.meta["metrics"]
    again = figures(loaded.model, loaded.tokenizer, "sentiment" if name == "minilm-sentiment" else "pos")
    assert again["heldout_accuracy"] == pytest.approx(metrics["heldout_accuracy"], abs=1e-9)
    assert again["everyday_accuracy"] == pytest.approx(metrics["everyday_accuracy"], abs=1e-9)
    assert again["everyday_mistakes"] == metrics["everyday_mistakes"]
    assert again["everyday_accuracy"] >= MINILM[name][1]
    docs = (Path(__file__).resolve().parent.parent / "docs" / "builtin-models.md").read_text(encoding="utf-8")
    assert f"{again['everyday_accuracy']:.1%}" in docs and f"{again['heldout_accuracy']:.1%}" in docs, name


def test_the_fine_tuned_tagger_reads_a_word_by_its_context() -> None:
    loaded = load_model("pretrained:minilm-pos")
    cases = [("They went for a long run.", "run", "noun"), ("They run every morning.", "run", "verb"),
             ("Please turn on the light.", "light", "noun"), ("This bag is very light.", "light", "adjective")]
    for text, word, label in cases:
        trace = P.decide(loaded, text)
        i = trace.tokens.index(word)
        assert trace.labels[int(trace.probs[i].argmax())] == label, (text, trace.probs[i])
