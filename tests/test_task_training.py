"""Training a classifier or tagger from the Models page: the user's labelled text read with clear errors, the run's
held-out accuracy recomputed with the model's own forward, the label names kept, snapshots that open."""
from __future__ import annotations

import pytest
import torch

from conftest import assert_no_exception, run_page
from explorer.data.labelled_text import read_labelled
from explorer.data.user_text import CorpusError
from explorer.loading.loaders import load_model
from explorer.training.corpus import labelled_corpus
from explorer.training.jobs import register_trained
from explorer.training.loop import train_model
from explorer.training.spec import TrainSpec

MOODS = [("the soup was lovely", "positive"), ("what a wonderful day", "positive"), ("i love this song", "positive"),
         ("the film was great fun", "positive"), ("a kind and happy crowd", "positive"),
         ("the service was slow and rude", "negative"), ("i hate waiting", "negative"),
         ("the room was dirty", "negative"), ("a sad and awful end", "negative"), ("the food was cold", "negative")]


def _csv(rows: list[tuple[str, str]]) -> str:
    return "text,label\n" + "\n".join(f'"{t}",{lab}' for t, lab in rows)


def test_sentence_labels_are_read_from_csv_with_a_header_and_quoted_commas() -> None:
    read = read_labelled(_csv([*MOODS, ("well, it was fine", "positive")]))
    assert read.task == "classify" and read.labels == ["positive", "negative"]
    assert read.examples[0] == (["the", "soup", "was", "lovely"], [(-1, 0)])
    assert read.examples[-1] == (["well", ",", "it", "was", "fine"], [(-1, 0)])  # the comma is the text's
    assert read.summary() == "11 sentences (49 words) with sentence labels: positive 6, negative 5."


def test_word_tags_are_read_from_conll_lines() -> None:
    sentence = "the DET\nold ADJ\nman NOUN\nruns VERB\n\n"
    read = read_labelled(sentence * 10 + "a\tDT\tDET\nrun\tNN\tNOUN\n")  # CoNLL: the last field is the tag
    assert read.task == "tag" and read.labels == ["DET", "ADJ", "NOUN", "VERB"]
    assert read.examples[0] == (["the", "old", "man", "runs"], [(0, 0), (1, 1), (2, 2), (3, 3)])
    assert read.examples[-1] == (["a", "run"], [(0, 0), (1, 2)])


@pytest.mark.parametrize("text, says", [
    ("", "No labelled text"), ("just words without a label\n" * 20, "Line 1: expected `text,label`"),
    (_csv([(t, "positive") for t, _ in MOODS]), "Only one label"), (_csv(MOODS[3:7]), "at least 10"),
    ("text,label\n" + "\n".join(f"w{i},label{i}" for i in range(70)), "more than 64 different labels"),
    ("the DET\nold ADJ\nman\n" * 20, "Line 3: expected `word tag`"),
])
def test_unusable_labelled_text_says_why(text: str, says: str) -> None:
    with pytest.raises(CorpusError, match=says):
        read_labelled(text)


def _spec(**fields) -> TrainSpec:
    base = dict(architecture="rnn_classifier", hidden_size=16, emb_dim=8, epochs=3, batch_size=4, name="mine",
                lr=1e-2)
    return TrainSpec(**{**base, **fields})


def test_a_classifier_trained_on_my_labels_reports_the_accuracy_its_own_forward_gives() -> None:
    read = read_labelled(_csv(MOODS * 4))
    spec = _spec(corpus="user", labels=read.labels, user_examples=read.examples, pooling="mean")
    result = train_model(spec, snapshots=3)
    loaded = load_model(register_trained(result))
    assert loaded.family == "rnn-classifier" and loaded.meta["task_settings"] == {"labels": ["positive", "negative"]}
    model, vocab = loaded.model, loaded.vocabs["vocab"]
    assert model.pooling == "mean" and model.head.out_features == 2
    held = labelled_corpus(spec).heldout  # the same seeded split
    right = 0
    with torch.no_grad():
        for words, [(_, label)] in held:
            ids = torch.tensor([[vocab.bos_id, *vocab.encode(words)]])
            right += int(model.decide(ids).argmax(-1)) == label
    assert result.meta["metrics"]["heldout_accuracy"] == pytest.approx(right / len(held))
    assert result.meta["metrics"]["heldout_targets"] == len(held) == 4
    assert [s["step"] for s in result.meta["snapshots"]][0] == 0 and len(result.meta["snapshots"]) == 3


def test_a_tagger_on_the_shipped_parts_of_speech_reads_each_word_and_keeps_the_labels() -> None:
    spec = _spec(corpus="pos", task="tag", bidirectional=True, n_train=200, n_heldout=50, epochs=1)
    result = train_model(spec)
    loaded = load_model(register_trained(result))
    assert loaded.meta["task_settings"]["labels"] == ["noun", "verb", "adjective", "adverb", "other"]
    model, vocab = loaded.model, loaded.vocabs["vocab"]
    held = labelled_corpus(spec).heldout
    right = count = 0
    with torch.no_grad():
        for words, targets in held:
            logits = model.decide(torch.tensor([[vocab.bos_id, *vocab.encode(words)]]))[0]  # (T + 1, C)
            right += sum(int(logits[p + 1].argmax()) == lab for p, lab in targets)
            count += len(targets)
    assert result.meta["metrics"]["heldout_targets"] == count
    assert result.meta["metrics"]["heldout_accuracy"] == pytest.approx(right / count)


def test_the_models_page_trains_a_classifier_on_pasted_labels_and_links_the_decision_view() -> None:
    at = run_page("app_pages/catalogue.py")
    at.selectbox(key="train_recipe").set_value("LSTM classifier (a label per sentence: sentiment…)").run()
    at.radio(key="train_task_corpus").set_value("My labelled text").run()
    at.text_area(key="train_labelled").input("the DET\nman NOUN\n\n" * 12).run()
    assert at.warning and "word tags: choose the tagger" in at.warning[0].value  # the wrong recipe for tags
    at.text_area(key="train_labelled").input(_csv(MOODS * 2)).run()
    assert "with sentence labels\\: positive 10, negative 10." in " ".join(c.value for c in at.caption)
    for key, value in (("train_hidden", 8), ("train_emb", 8), ("train_epochs", 1)):
        at.number_input(key=key).set_value(value).run()
    at.checkbox(key="train_glove").uncheck().run()
    at.button(key="train_start").click().run()
    job = at.session_state["train_job"]
    assert job.wait(timeout=120) and job.status == "done", job.error
    at.run()
    assert_no_exception(at)
    assert job.spec.labels == ["positive", "negative"] and job.spec.user_examples is None  # freed after the run
    view = run_page("app_pages/decision.py", {"model": job.model_id, "text": "the soup was lovely"})
    assert_no_exception(view)
    assert not view.error and view.get("plotly_chart")


def _minilm_predictions(loaded, examples) -> list[int]:
    """The label the loaded Hugging Face model's own forward chooses for each (words, targets) example: at [CLS]
    through its sequence-classification forward, or at each word's first piece through its token-classification
    forward."""
    tok, model = loaded.tokenizer, loaded.model
    out = []
    with torch.no_grad():
        for words, targets in examples:
            enc = tok(words, is_split_into_words=True, return_tensors="pt")
            logits = model(**enc).logits[0]
            pieces = enc.word_ids(0)
            out += [int((logits if p < 0 else logits[pieces.index(p)]).argmax()) for p, _ in targets]
    return out


def test_minilm_fine_tuned_on_my_labels_keeps_only_its_trained_layers_and_reports_its_own_accuracy() -> None:
    from explorer.training.minilm_task import FROZEN

    read = read_labelled(_csv(MOODS * 4))
    spec = _spec(architecture="minilm_finetune", corpus="user", task="classify", labels=read.labels,
                 user_examples=read.examples, lr=1e-4, batch_size=8, epochs=1)
    result = train_model(spec, snapshots=2, snapshot_dtype="float16")
    uid = register_trained(result)
    loaded = load_model(uid)
    assert loaded.family == "encoder" and loaded.model.config.id2label == {0: "positive", 1: "negative"}
    assert loaded.meta["fine_tuned_from"] == "pretrained:minilm"
    from explorer.loading.uploads import bundle

    held = bundle(uid).state_dict
    assert {n.split(".")[3] for n in held if n.startswith("bert.encoder.layer.")} == {str(i) for i in
                                                                                      range(FROZEN, 6)}
    assert "bert.embeddings.word_embeddings.weight" not in held and "classifier.weight" in held
    heldout = labelled_corpus(spec).heldout
    gold = [lab for _, targets in heldout for _, lab in targets]
    said = _minilm_predictions(loaded, heldout)
    assert result.meta["metrics"]["heldout_accuracy"] == pytest.approx(
        sum(a == b for a, b in zip(said, gold)) / len(gold))
    first = load_model(f"{uid}@0")  # the snapshot before training: the package's layers and the new head
    assert first.meta["snapshot"]["step"] == 0
    assert not torch.equal(first.model.classifier.weight, loaded.model.classifier.weight)


def test_minilm_fine_tuned_as_a_tagger_reads_each_words_first_piece() -> None:
    spec = _spec(architecture="minilm_finetune", corpus="pos", task="tag", n_train=64, n_heldout=20, lr=1e-4,
                 batch_size=16, epochs=1)
    result = train_model(spec)
    loaded = load_model(register_trained(result))
    assert list(loaded.model.config.id2label.values()) == ["noun", "verb", "adjective", "adverb", "other"]
    heldout = labelled_corpus(spec).heldout
    gold = [lab for _, targets in heldout for _, lab in targets]
    said = _minilm_predictions(loaded, heldout)
    assert result.meta["metrics"]["heldout_targets"] == len(gold)
    assert result.meta["metrics"]["heldout_accuracy"] == pytest.approx(
        sum(a == b for a, b in zip(said, gold)) / len(gold))


def test_the_models_page_fine_tunes_minilm_as_a_tagger_on_the_shipped_parts_of_speech() -> None:
    at = run_page("app_pages/catalogue.py")
    at.selectbox(key="train_recipe").set_value("Fine-tune MiniLM (a classifier or a tagger)").run()
    assert at.number_input(key="train_hidden").disabled and at.number_input(key="train_layers").disabled
    at.radio(key="train_task_corpus").set_value("Parts of speech in context (WordNet 3.0's sentences)").run()
    for key, value in (("train_n", 40), ("train_epochs", 1)):
        at.number_input(key=key).set_value(value).run()
    at.button(key="train_start").click().run()
    job = at.session_state["train_job"]
    assert (job.spec.architecture, job.spec.task, job.spec.lr) == ("minilm_finetune", "tag", 1e-4)
    assert job.wait(timeout=180) and job.status == "done", job.error
    at.run()
    assert_no_exception(at)
    view = run_page("app_pages/decision.py", {"model": job.model_id, "text": "they run a long run"})
    assert_no_exception(view)
    assert not view.error and view.get("plotly_chart")
    assert job.result.meta["snapshots"][0]["step"] == 0  # the tagger before fine-tuning, read at step 0
    before = run_page("app_pages/decision.py", {"model": job.model_id, "text": "they run a long run",
                                                 "train_step": "0"})
    assert_no_exception(before)
    assert not before.error and before.get("plotly_chart")



def test_watch_it_learn_follows_a_classifiers_accuracy_and_decision_over_its_snapshots() -> None:
    """A classifier trained in the app with snapshots: each snapshot's recorded held-out accuracy is its own
    forward's on the held-out split (its weights as stored), the decision curve is each snapshot's probability of
    the trained model's label, and the view draws both and opens the Decision view at a clicked step."""
    import json

    import numpy as np

    from explorer.loading.catalogue import series_steps
    from explorer.probes.decision import decide
    from explorer.text.escape import md_unescape
    from explorer.training import curves as TC

    read = read_labelled(_csv(MOODS * 4))
    spec = _spec(corpus="user", labels=read.labels, user_examples=read.examples, epochs=4)
    uid = register_trained(train_model(spec, snapshots=4))
    steps = series_steps(uid)
    held = labelled_corpus(spec).heldout
    c = TC.series_curves(uid)
    assert c.sentence and set(c.curves) == {TC.LOSS, TC.TRAIN_LOSS, TC.ACCURACY, TC.DECISION}
    final = decide(load_model(uid), c.sentence)
    for i, step in enumerate(steps):
        snap = load_model(f"{uid}@{step}")
        vocab = snap.vocabs["vocab"]
        with torch.no_grad():
            right = sum(int(snap.model.decide(torch.tensor([[vocab.bos_id, *vocab.encode(w)]])).argmax(-1)) == lab
                        for w, [(_, lab)] in held)
        assert c.curves[TC.ACCURACY][i] == pytest.approx(right / len(held))
        assert c.curves[TC.DECISION][i] == pytest.approx(float(decide(snap, c.sentence).probs[final.chosen]))
    assert f"“{final.labels[final.chosen]}”, the trained model's label for “{c.sentence}”" in c.notes[0]
    assert TC.view_at(c, TC.ACCURACY, steps[1]) == ("decision", {"model": uid, "train_step": str(steps[1]),
                                                                "text": c.sentence})
    at = run_page("app_pages/training_curves.py", {"model": uid})
    assert_no_exception(at)
    drawn = {t["name"]: t["y"] for t in json.loads(at.get("plotly_chart")[0].proto.spec)["data"]}
    assert set(drawn) == set(c.curves)
    from plotly_arrays import plotly_array

    np.testing.assert_allclose(plotly_array(drawn[TC.ACCURACY]), c.curves[TC.ACCURACY], atol=1e-9)
    assert f"held-out accuracy: {c.curves[TC.ACCURACY][-1]:.3f} at the end" in " ".join(md_unescape(x.value)
                                                                                       for x in at.caption)
