"""The Models page's form for training a classifier or tagger (explorer.training.decision_task): which data, which
labels, how a sentence is pooled."""
from __future__ import annotations

import streamlit as st

from explorer.data.labelled_text import read_labelled
from explorer.data.user_text import CorpusError, read_uploaded_text
from explorer.models.rnn_classifier import POOLINGS
from explorer.text.escape import md_message
from explorer.training.minilm_task import FROZEN
from explorer.training.spec import TrainSpec

TASK_CORPORA = {"Opinions (negative / positive, SmolLM2's sentences)": "sentiment",
                "Parts of speech in context (WordNet 3.0's sentences)": "pos", "My labelled text": "user"}
POOLING_HELP = {"last": "the last state (each direction's final one)", "mean": "the mean of the states",
                "max": "the element-wise maximum of the states", "first": "the first state"}
EXAMPLE = "text,label\nthe soup was lovely,positive\nthe service was slow and rude,negative"


def task_data(spec: TrainSpec) -> TrainSpec | None:
    """Fill in a classifier's or tagger's data (a shipped corpus or the user's labelled text), its pooling and its
    word vectors; None (with a message in the page) when the user's text cannot be read. A recurrent recipe is a
    classifier or a tagger; MiniLM fine-tunes to whichever the data asks."""
    if spec.architecture == "minilm_finetune":
        trained = "its last layer" if FROZEN == 5 else f"its last {6 - FROZEN} layers"
        st.caption(f"MiniLM's word pieces and first {FROZEN} of its 6 layers stay as the package has them; {trained}, "
                   "BERT's pooler and a new head are trained (a sentence's label is read from [CLS], a word's tag "
                   "from its first word piece). The size fields above do not apply.")
        source = TASK_CORPORA[st.radio("Data", list(TASK_CORPORA), horizontal=True, key="train_task_corpus")]
        spec.corpus, spec.task = source, {"sentiment": "classify", "pos": "tag"}.get(source, "")
        return _user_data(spec) if source == "user" else _shipped(spec)
    tagger = spec.task == "tag"
    offered = [k for k, v in TASK_CORPORA.items() if v != ("sentiment" if tagger else "pos")]
    source = TASK_CORPORA[st.radio("Data", offered, horizontal=True, key="train_task_corpus")]
    c1, c2 = st.columns(2)
    spec.glove = c1.checkbox("Start the word vectors from GloVe (50-d)", True, key="train_glove",
                             help="Each word GloVe 6B knows starts from its GloVe vector (the embedding size becomes "
                                  "50), so that a word seen rarely still has a meaning; the vectors are trained with "
                                  "the rest. Off: they start at random.")
    if not tagger:
        spec.pooling = c2.selectbox("The sentence is read from", POOLINGS, key="train_pooling",
                                    format_func=lambda p: POOLING_HELP[p])
    spec.corpus = source
    spec.max_vocab = min(spec.max_vocab or 12_000, 12_000)
    return _user_data(spec) if source == "user" else _shipped(spec)


def _shipped(spec: TrainSpec) -> TrainSpec:
    spec.n_heldout = 1000
    return spec


def _user_data(spec: TrainSpec) -> TrainSpec | None:
    """The user's labelled text, pasted or uploaded; a recurrent recipe's task must be the text's."""
    st.caption("Sentence labels as CSV lines `text,label`, or word tags as `word tag` lines (CoNLL) with a blank "
               "line between sentences. One sentence in ten is held out to measure the accuracy.")
    text = st.text_area("Paste labelled text", key="train_labelled", height=120, placeholder=EXAMPLE)
    upload = st.file_uploader("…or upload a .csv or .txt file", type=["csv", "txt", "tsv", "conll"],
                              key="train_labelled_file")
    try:
        if upload is not None:
            text = read_uploaded_text(upload.getvalue())
        read = read_labelled(text)
    except CorpusError as exc:
        st.warning(md_message(exc))
        return None
    st.caption(md_message(read.summary()))
    if spec.task and read.task != spec.task:
        st.warning("These are " + ("word tags: choose the tagger above." if read.task == "tag" else
                                   "sentence labels: choose the classifier above."))
        return None
    spec.task, spec.labels, spec.user_examples = read.task, read.labels, read.examples
    return spec
