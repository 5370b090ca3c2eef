"""Training from the Models page (AppTest, tiny configuration): progress, a catalogue entry, opens in a view."""
from __future__ import annotations

import time

import pytest

from conftest import assert_no_exception, run_page
from explorer.loading.loaders import load_model
from explorer.views import views_for


def _train(at, recipe: str, **numbers) -> object:
    at.selectbox(key="train_recipe").set_value(recipe).run()
    for key, value in numbers.items():
        at.number_input(key=key).set_value(value).run()
    at.button(key="train_start").click().run()
    assert_no_exception(at)
    job = at.session_state["train_job"]
    assert job.wait(timeout=240), "training did not finish"
    at.run()
    return job


def test_training_a_tiny_lstm_from_the_page_gives_a_model_that_opens() -> None:
    at = run_page("app_pages/catalogue.py")
    job = _train(at, "LSTM language model", train_hidden=16, train_emb=8, train_epochs=2, train_n=300)
    assert job.status == "done", job.error
    assert job.points and job.points[-1]["heldout_loss"] is not None
    assert any(job.model_id.split(":")[1] in s.value for s in at.success)  # the id (its ":" escaped for Markdown)
    loaded = load_model(job.model_id)
    assert loaded.family == "rnn-lm" and loaded.model.rnn.hidden_size == 16
    # it is in the catalogue and a view (or the models page) opens it from the URL
    view = run_page("app_pages/catalogue.py", {"model": job.model_id})
    assert_no_exception(view)
    assert {m.label: m.value for m in view.metric}["Parameters"] == f"{loaded.n_params:,}"
    gates = run_page("app_pages/lstm_gates.py", {"model": job.model_id, "text": "the dog sleeps ."})
    assert_no_exception(gates)
    assert not gates.error and gates.get("plotly_chart")  # the freshly trained LSTM opens in the gates view
    # under the run: a link to each view of its family, and Watch it learn (it kept snapshots)
    linked = [(link.proto.label, link.proto.query_string) for link in at.get("page_link")]
    assert linked == [(f"Open in {v.title}", f"model={job.model_id.replace(':', '%3A')}")
                      for v in views_for("rnn-lm", series=True)]


def test_user_text_too_short_is_a_message() -> None:
    at = run_page("app_pages/catalogue.py")
    at.radio(key="train_corpus").set_value("My text").run()
    at.text_area(key="train_text").input("too short").run()
    assert_no_exception(at)
    assert at.warning and "short" in at.warning[0].value.lower()
    assert at.button(key="train_start").disabled


def test_stop_button_keeps_the_model_trained_so_far() -> None:
    at = run_page("app_pages/catalogue.py")
    at.number_input(key="train_epochs").set_value(50).run()
    at.number_input(key="train_n").set_value(2000).run()
    at.button(key="train_start").click().run()
    job = at.session_state["train_job"]
    deadline = time.time() + 60
    while not job.points and time.time() < deadline:
        time.sleep(0.2)
    job.stop()
    assert job.wait(timeout=120)
    at.run()
    assert_no_exception(at)
    assert job.status == "stopped" and job.model_id
    assert job.points[-1]["epoch"] < 50


def test_training_on_real_english_from_the_page() -> None:
    """The Models page's first corpus is real English (the WordNet corpus): the first N training lines, a vocabulary
    of at most the shipped models' 12,000 words, a held-out tenth from the corpus's own held-out split."""
    from explorer.data import wordnet_english

    at = run_page("app_pages/catalogue.py")
    assert at.radio(key="train_corpus").value == "Real English (WordNet)"
    job = _train(at, "GRU language model", train_hidden=16, train_emb=8, train_epochs=1, train_n=400)
    assert job.status == "done", job.error
    assert (job.spec.corpus, job.spec.max_vocab) == ("wordnet", 12_000)
    meta = load_model(job.model_id).meta
    assert meta["corpus"]["generator"] == "wordnet" and meta["corpus"]["n_train"] == 400
    assert meta["corpus"]["n_heldout"] == 40
    words = {w for s in wordnet_english.sentences("train")[:400] for w in s}
    assert set(meta["vocab"][4:]) == words  # every word of the 400 lines (fewer than 12,000), after the specials


def test_training_on_everyday_english_from_the_page() -> None:
    """The Models page's "Everyday English (SmolLM2)": the first N lines are SmolLM2's everyday sentences (then
    WordNet's), with the real-English vocabulary limit."""
    from explorer.data import everyday_english

    at = run_page("app_pages/catalogue.py")
    at.radio(key="train_corpus").set_value("Everyday English (SmolLM2)").run()
    job = _train(at, "GRU language model", train_hidden=16, train_emb=8, train_epochs=1, train_n=300)
    assert job.status == "done", job.error
    assert (job.spec.corpus, job.spec.max_vocab) == ("everyday", 12_000)
    meta = load_model(job.model_id).meta
    assert meta["corpus"]["generator"] == "everyday" and meta["corpus"]["n_train"] == 300
    words = {w for s in everyday_english.sentences("train")[:300] for w in s}
    assert set(meta["vocab"][4:]) == words and {"breakfast", "kitchen"} <= words


def test_every_architecture_the_corpus_choice_is_offered_for_trains_on_each_corpus() -> None:
    """The corpus radio is offered for every architecture but seq2seq: each of its corpora must be one that
    architecture trains on (word2vec was offered "Everyday English" and refused it)."""
    from explorer.training.spec import ARCH_CORPORA
    from explorer.ui.training import CORPORA, RECIPES
    from explorer.ui.training_tasks import TASK_CORPORA

    for recipe in RECIPES.values():
        arch = recipe["architecture"]
        if arch in ("rnn_classifier", "minilm_finetune"):  # their own data choice
            assert set(TASK_CORPORA.values()) == set(ARCH_CORPORA[arch]) and recipe["corpus"] in ARCH_CORPORA[arch]
        elif arch != "seq2seq":
            assert set(CORPORA.values()) <= set(ARCH_CORPORA[arch]), arch


# a shipped model of each architecture the Models page trains (None: its package is not installed here)
SHIPPED_OF = {"rnn_lm": "builtin:lstm-lm", "tiny_gpt": "builtin:tiny-gpt", "seq2seq": "builtin:seq2seq-bahdanau",
              "word2vec": "builtin:word2vec", "rnn_classifier": "builtin:sentiment-lstm",
              "minilm_finetune": "pretrained:minilm-sentiment"}


@pytest.mark.parametrize("architecture", sorted(SHIPPED_OF))
def test_a_run_links_the_views_its_family_opens(architecture: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The links under a finished run are its family's views (explorer.views.views_for: MAY_HAVE and each view's
    needs, no map of the page's own), with Watch it learn when it kept snapshots; and they are the views that take a
    model of that architecture once loaded (a shipped one: what it has)."""
    from explorer.loading import pretrained
    from explorer.models.build import FAMILY_OF_ARCHITECTURE
    from explorer.ui import training
    from explorer.views import TRAINING, VIEWS

    assert architecture in {r["architecture"] for r in training.RECIPES.values()}
    family = FAMILY_OF_ARCHITECTURE[architecture]
    for series in (False, True):
        monkeypatch.setattr(training, "series_steps", lambda _id, s=series: (0, 5) if s else ())
        assert training.trained_views("upload:run", architecture) == views_for(family, series=series)
    shipped = SHIPPED_OF[architecture]
    if shipped.startswith("pretrained:") and not pretrained.is_installed(shipped.split(":", 1)[1]):
        pytest.skip(f"{shipped} is not installed")
    has = load_model(shipped).caps.names
    takes = [v for v in VIEWS if v is not TRAINING and v.needs is not None and "model" in v.params
             and v.params["model"].kind == "model" and set(v.needs) <= has]
    assert views_for(family) == takes
