"""The Train section of the Models page: choose a recipe, train in the background, watch the loss, stop, use."""
from __future__ import annotations

import hashlib
from typing import TypedDict

import plotly.graph_objects as go
import streamlit as st

from explorer.training import budget as train_budget
from explorer.loading.catalogue import series_steps
from explorer.models.build import FAMILY_OF_ARCHITECTURE
from explorer.data.user_text import MAX_BYTES, MAX_CHARS, CorpusError, corpus_from_text, read_uploaded_text
from explorer.runtime.json_value import get
from explorer.text.escape import md, md_message
from explorer.training.corpus import REAL_ENGLISH
from explorer.training.spec import LABELLED, LIMITS, TrainSpec
from explorer.training.jobs import LINE, TrainingBusyError, TrainingJob
from explorer.ui import charts, settings
from explorer.ui.cache import session_id, upload_owner
from explorer.ui.training_tasks import task_data
from explorer.views import View, views_for

class Recipe(TypedDict, total=False):
    """The TrainSpec fields a recipe of the form sets."""

    architecture: str
    cell: str
    corpus: str
    attention: str
    bidirectional: bool
    task: str
    lr: float


RECIPES: dict[str, Recipe] = {
    "LSTM language model": dict(architecture="rnn_lm", cell="lstm"),
    "GRU language model": dict(architecture="rnn_lm", cell="gru"),
    "Elman RNN language model": dict(architecture="rnn_lm", cell="rnn"),
    "Tiny GPT (decoder-only transformer)": dict(architecture="tiny_gpt"),
    "word2vec (skip-gram, negative sampling)": dict(architecture="word2vec"),
    "Seq2seq translation (RNN encoder–decoder)": dict(architecture="seq2seq", corpus="translation"),
    "Seq2seq dates → ISO": dict(architecture="seq2seq", corpus="dates"),
    "LSTM classifier (a label per sentence: sentiment…)": dict(architecture="rnn_classifier", cell="lstm",
                                                               corpus="sentiment", task="classify"),
    "Bidirectional LSTM tagger (a label per word: part of speech…)": dict(
        architecture="rnn_classifier", cell="lstm", corpus="pos", task="tag", bidirectional=True),
    "Fine-tune MiniLM (a classifier or a tagger)": dict(architecture="minilm_finetune", corpus="sentiment",
                                                        task="classify", lr=1e-4),
}
ATTENTIONS = ["bahdanau", "luong-dot", "luong-general", "luong-concat", "none"]
CORPORA = {"Real English (WordNet)": "wordnet", "Everyday English (SmolLM2)": "everyday",
           "Generated English": "english", "My text": "user"}
WORDNET_VOCAB = 12_000  # the shipped real-English models' vocabulary (explorer.training.recipes)


def loss_figure(points: list[dict]) -> go.Figure:
    """Train loss (per report) and held-out loss (per epoch) against optimiser steps."""
    fig = go.Figure()
    fig.add_scatter(x=[p["step"] for p in points], y=[p["train_loss"] for p in points], name="train", mode="lines")
    held = [p for p in points if p["heldout_loss"] is not None]
    fig.add_scatter(x=[p["step"] for p in held], y=[p["heldout_loss"] for p in held], name="held-out",
                    mode="lines+markers")
    fig.update_layout(title="Loss (cross-entropy, nats)", xaxis_title="step", yaxis_title="loss", height=320)
    return fig


def _spec_form() -> TrainSpec | None:
    budget = train_budget.TrainBudget.from_env()
    cap = budget.seconds / 60  # the server's limit, in the field's minutes
    recipe_name = st.selectbox("Architecture", list(RECIPES), key="train_recipe")
    recipe = RECIPES[recipe_name].copy()
    arch = recipe["architecture"]
    c1, c2, c3, c4 = st.columns(4)
    sized = arch != "minilm_finetune"  # MiniLM's size is its own
    layers = c1.number_input("Layers", 1, LIMITS["num_layers"], 1, key="train_layers", disabled=not sized)
    hidden = c2.number_input("Hidden size" if arch != "word2vec" else "Vector size", 4, LIMITS["hidden_size"],
                             64, step=4, key="train_hidden", disabled=not sized)
    emb = c3.number_input("Embedding size", 4, LIMITS["emb_dim"], 32, step=4, key="train_emb",
                          disabled=arch in ("tiny_gpt", "word2vec", "minilm_finetune"))
    epochs = c4.number_input("Epochs", 1, LIMITS["epochs"], 2, key="train_epochs")
    c5, c6, c7 = st.columns(3)
    n_train = c5.number_input("Training sentences (of the chosen corpus)", 10, LIMITS["n_train"], 2000,
                              step=500, key="train_n")
    minutes = c6.number_input("Time limit (minutes)", min(0.1, cap), cap, min(3.0, cap), step=0.5, key="train_minutes",
                              help=f"At most {cap:g} min on this server (EXPLORER_MAX_TRAIN_SECONDS = "
                                   f"{budget.seconds:g} s): data, training and the held-out evaluation.")
    heads = c7.number_input("Attention heads", 1, LIMITS["n_head"], 4, key="train_heads", disabled=arch != "tiny_gpt")
    st.number_input("Snapshots to keep", 0, 30, 16, key="train_snapshots",
                    help="Copies of the weights at log-spaced steps of the run (0, 1, 2, 3, 5, … the end), in float16: "
                         "every view then reads the model at any of these steps (its Training step slider), and "
                         "Watch it learn draws what it learned when. 0: none.")
    if arch == "seq2seq" and recipe.get("corpus") == "translation":
        recipe["attention"] = st.selectbox("Attention", ATTENTIONS, key="train_attention")
    elif arch == "seq2seq":
        recipe["attention"] = "bahdanau"
    spec = TrainSpec(**recipe, num_layers=int(layers), hidden_size=int(hidden), emb_dim=int(emb), epochs=int(epochs),
                     n_train=int(n_train), n_heldout=max(1, min(1000, int(n_train) // 10)), n_head=int(heads),
                     max_seconds=float(minutes) * 60, name="my-" + arch.replace("_", "-"),
                     description=f"{recipe_name} trained in the app.")
    if arch in LABELLED:
        return task_data(spec)
    if arch != "seq2seq":
        source = st.radio("Corpus", list(CORPORA), horizontal=True, key="train_corpus",
                          help="Real English: WordNet 3.0's example sentences and definitions (172,393 training "
                               "lines, 1.46M words), the first N lines. Everyday English: 20,126 sentences SmolLM2 "
                               "wrote about everyday life (349,382 words), then WordNet's lines. Generated English: "
                               "this project's grammar (776 words).")
        spec.corpus = CORPORA[source]
        if spec.corpus in REAL_ENGLISH:
            spec.max_vocab = min(WORDNET_VOCAB, spec.max_vocab or WORDNET_VOCAB)
        if source == "My text":
            level = st.radio("Tokens", ["word", "char"], horizontal=True, key="train_level")
            text = st.text_area(f"Paste text to train on (at most {MAX_CHARS:,} characters)", key="train_text",
                                height=120, max_chars=MAX_CHARS)
            upload = st.file_uploader(f"…or upload a .txt file (UTF-8, at most {MAX_BYTES / 1e6:g} MB and "
                                      f"{MAX_CHARS:,} characters)", type=["txt"], key="train_txt")
            try:
                tokens = _corpus(upload.getvalue() if upload is not None else text, level)
            except CorpusError as exc:
                st.warning(md_message(exc))
                return None
            spec.corpus, spec.level, spec.user_tokens = "user", level, tokens
            st.caption(f"{len(tokens):,} sentences, {sum(len(t) for t in tokens):,} tokens.")
            note = train_budget.vocab_note(tokens, budget.vocab)
            if note:
                st.info(md_message(note))
    return spec


CORPUS = "_train_corpus"  # session state: (digest of the text or file, level) -> its sentences, or the error


def _corpus(source: str | bytes, level: str) -> list[list[str]]:
    """The sentences of a pasted text or an uploaded file's bytes, read once per distinct text in this session (a
    rerun of the page, e.g. another setting changed, does not read a million characters again). CorpusError (kept
    too) when it cannot be a corpus: too long, too short, binary, not UTF-8."""
    data = source.encode("utf-8", "surrogatepass") if isinstance(source, str) else source
    key = (hashlib.sha256(data).hexdigest(), isinstance(source, str), level)
    held = st.session_state.get(CORPUS)
    if held is None or held[0] != key:
        try:
            text = source if isinstance(source, str) else read_uploaded_text(source)
            held = (key, corpus_from_text(text, level=level))
        except CorpusError as exc:
            held = (key, exc)
        st.session_state[CORPUS] = held
    if isinstance(held[1], CorpusError):
        raise held[1]
    return held[1]


def trained_views(model_id: str, architecture: str) -> list[View]:
    """The views a model just trained (`model_id`, of `architecture`) opens in: those of its family
    (explorer.views.views_for), with Watch it learn when it kept snapshots."""
    return views_for(FAMILY_OF_ARCHITECTURE[architecture], series=bool(series_steps(model_id)))


def _open_links(model_id: str, architecture: str, per_row: int = 4) -> None:
    """Links that open the trained model in each view it opens in, `per_row` a row."""
    views = trained_views(model_id, architecture)
    for first in range(0, len(views), per_row):
        for col, view in zip(st.columns(per_row), views[first:first + per_row]):
            with col:
                st.page_link(view.script, label=f"Open in {view.title}", icon=view.icon,
                             query_params={"model": model_id})


def _job_panel() -> None:
    """The session's job: a live panel that polls every second while it runs, then (after one full rerun) a still
    panel that does not poll."""
    job: TrainingJob | None = st.session_state.get("train_job")
    if job is None:
        return
    if job.running:
        _live_panel(job)
    else:
        _finished_panel(job)


def _loss_chart(job: TrainingJob) -> None:
    if job.points:
        charts.show(loss_figure(job.points), charts.Origin("model", "the training run's own loss, as it was computed."),
                    key="train_loss_chart", filename="training-loss")


@st.fragment(run_every=1.0)
def _live_panel(job: TrainingJob) -> None:
    if not job.running:
        st.rerun()  # the whole page, once: it draws the finished panel, which does not poll
    last = job.points[-1] if job.points else None
    label = (f"epoch {last['epoch']}, step {last['step']}/{job.total_steps}, loss {last['train_loss']:.3f}, "
             f"{last['elapsed']:.0f} s" if last else "preparing the corpus…")
    st.progress(job.fraction, text=f"Training {md(job.spec.name)}: {label} (at most {job.spec.max_seconds:g} s)")
    if st.button("Stop training", key="train_stop"):
        job.stop()
    _loss_chart(job)


def _finished_panel(job: TrainingJob) -> None:
    _loss_chart(job)
    if job.status == "failed":
        st.error(f"Training failed: {md(job.error)}")
    elif job.status == "cancelled":
        st.warning(md(job.error))
    elif job.status in ("done", "stopped") and job.result is not None:
        metrics = job.result.meta.get("metrics", {})
        summary = ", ".join(f"{k} {v:.3g}" for k, v in (metrics.items() if isinstance(metrics, dict) else ())
                            if isinstance(v, float))
        word = "Stopped early" if job.status == "stopped" else "Trained"
        st.success(f"{word}: {md(job.model_id)} ({get(job.result.meta, 'train', 'seconds')} s). {summary}")
        for note in job.notes:
            st.info(md_message(note))
        _open_links(job.model_id, job.spec.architecture)
        # a callable: the zip is built when the button is pressed, once per job (TrainingJob.zip_bytes keeps it)
        st.download_button("Download .safetensors + JSON (zip)", job.zip_bytes,
                           file_name=f"{job.spec.name}.zip", mime="application/zip", key="train_download")


def train_section() -> None:
    """Render the Train section (form, start button, live progress panel)."""
    st.subheader("Train a model")
    st.caption("Training runs in the background on the selected device; other users are not blocked. "
               "The result joins the catalogue and opens in every view.")
    spec = _spec_form()
    job: TrainingJob | None = st.session_state.get("train_job")
    busy = job is not None and job.running
    if st.button("Start training", type="primary", disabled=spec is None or busy, key="train_start") \
            and spec is not None:
        _start(spec)
    if st.session_state.get(WAITING) is not None:
        _in_line()
    _job_panel()


WAITING = "_train_waiting"  # session state: the spec of a run waiting for its turn in the training line


def _start(spec: TrainSpec) -> None:
    """Start `spec` now, or put this session in the training line (explorer.training.jobs.LINE) with its spec."""
    try:
        st.session_state["train_job"] = TrainingJob(spec, device=settings.device(), owner=upload_owner(),
                                                    snapshots=int(st.session_state.get("train_snapshots", 0)),
                                                    session=session_id()).start()
        st.session_state.pop(WAITING, None)
    except TrainingBusyError as exc:
        st.session_state[WAITING] = spec
        st.info(md_message(exc))
    except ValueError as exc:
        st.session_state.pop(WAITING, None)
        st.error(md_message(exc))


@st.fragment(run_every=2.0)
def _in_line() -> None:
    """While this session waits for the training slot: its place in line, renewed every 2 s (a closed tab gives it
    up), and its run started when its turn comes."""
    spec: TrainSpec | None = st.session_state.get(WAITING)
    if spec is None:
        return
    if not LINE.refusal(session_id()):
        _start(spec)
        if st.session_state.get(WAITING) is None:
            st.rerun()  # the whole page: the live panel of the run just started
    place = LINE.wait(session_id())
    st.info(f"Waiting for the training slot: number {place} in line. {md(spec.name)} starts by itself when its turn "
            "comes; keep this tab open.")
    if st.button("Leave the line", key="train_leave"):
        LINE.leave(session_id())
        st.session_state.pop(WAITING, None)
        st.rerun()
