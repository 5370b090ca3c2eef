"""The views of the app, in navigation order (plain data: app.py and the home page read it).

A view is listed here only once its page exists and works. url_path never equals a page file's stem
("home", "models", ...): Streamlit serves such a path from the pages/ folder directly (its legacy
multipage mode) before app.py has run, bypassing the router and sidebar.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class View:
    script: str  # path of the page script, relative to the repository root
    title: str
    icon: str  # Streamlit material icon
    url_path: str
    summary: str  # one line for the home page
    section: str = "Views"


HOME = View("pages/home.py", "Home", ":material/home:", "overview", "What each view shows, the device, the models.", "Explorer")
MODELS = View(
    "pages/models.py", "Models", ":material/model_training:", "catalogue",
    "Pick, load or upload a model; see what is loaded, on which device, in which dtype; train a built-in model.",
    "Explorer",
)

VIEWS: list[View] = [HOME, MODELS]
VIEWS.append(View("pages/positional_encodings.py", "Positional encodings", ":material/timeline:", "positional-encodings", "Sinusoidal, learned and rotary positions, and why attention needs them."))
VIEWS.append(View("pages/lstm_gates.py", "Recurrent cell", ":material/memory:", "lstm-gates", "LSTM/GRU/Elman gates, cell and hidden states for your sentence, unit by unit."))
VIEWS.append(View("pages/self_attention.py", "Self-attention", ":material/hub:", "self-attention", "Per-head attention maps, rollout, masks and the Q·K/√d softmax arithmetic, live."))
VIEWS.append(View("pages/seq2seq_attention.py", "Seq2seq alignment", ":material/translate:", "seq2seq", "Bahdanau and Luong attention, HF cross-attention, step-by-step decoding and beam search."))
VIEWS.append(View("pages/word_embeddings.py", "Word embeddings", ":material/scatter_plot:", "word-embeddings", "PCA, t-SNE and UMAP of a whole vocabulary, neighbours, analogies and contextual embeddings."))
VIEWS.append(View("pages/sampling.py", "Decoding strategies", ":material/casino:", "decoding-strategies", "Greedy, temperature, top-k, top-p, typical, min-p and beam search side by side, with metrics."))
VIEWS.append(View("pages/lessons.py", "Lessons", ":material/school:", "lesson-plans", "Step-by-step lessons for class: each step opens a view in a given state, with what to notice and a question.", "Explorer"))

# ------------------------------------------------------------------------------------------------ view state
# The query parameters each view reads (its explorer.ui.state keys) and what a value must look like: "text",
# "model", "model or none", "int", "float", "bool", "ints" (comma-separated integers), a tuple (one of these; `int`
# inside accepts any integer) or a list (comma-separated, each one of these). Lessons (explorer/lessons.py) check
# their steps against it; tests/test_lessons.py checks it against the keys the page scripts use.
PARAMS: dict[str, dict[str, object]] = {
    "overview": {},
    "catalogue": {"model": "model"},
    "positional-encodings": {
        "panel": ("sinusoidal", "similarity", "rope", "learned", "sentence"), "model": "model", "text": "text",
        "d_model": "int", "n_pos": "int", "base": "float", "pos": "int", "dim": "int", "k": "int",
        "sim": ("dot", "cosine"), "rope_qk": ("ones", "random"), "seed": "int", "pca": (2, 3), "tok": "int",
    },
    "lstm-gates": {
        "model": "model", "text": "text", "layer": "int", "dir": ("forward", "backward"),
        "gate": ("i", "f", "g", "o", "c", "h", "r", "z", "n"), "sort": ("variance", "mean", "saturation", "index"),
        "top": "int", "section": ("One unit + equations", "Gate saturation", "Next tokens", "Compare two sentences"),
        "unit": "int", "t": "int", "pair": "text", "a": "text", "b": "text",
    },
    "self-attention": {
        "model": "model", "text": "text", "pair": "text", "mode": ("head", "model", "steps", "masks", "compare"),
        "pad": "int", "stream": ("encoder", "decoder", "cross"), "layer": "int", "head": "int", "heads": "ints",
        "token": "int", "hide": "bool", "agg": ("heads", "mean", "max", "rollout"), "compare": "text",
    },
    "seq2seq": {
        "model": "model", "model2": "model or none", "text": "text", "target": "text", "decoding": ("greedy", "beam"),
        "beam": "int", "layer": "int", "head": ("mean", int), "step": "int", "allcurves": "bool",
        "panel": ("step", "length", "beam"),
    },
    "word-embeddings": {
        "src": ("model", "file"), "model": "model", "table": "text", "text": "text", "method": ("pca", "tsne", "umap"),
        "dims": (2, 3), "n": "int", "nb": "int", "md": "float", "perp": "float", "metric": ("cosine", "euclidean"),
        "nn": "text", "k": "int", "a": "text", "b": "text", "c": "text", "ka": "int", "x1": "text", "x2": "text",
        "y1": "text", "y2": "text", "layer": "int", "cfit": ("all", "layer"), "s1": "text", "s2": "text", "dw": "text",
    },
    "decoding-strategies": {
        "model": "model", "text": "text", "strategies": ["greedy", "sample", "top-k", "top-p", "typical", "min-p", "beam"],
        "seed": "int", "max_new": "int", "temperature": "float", "n": "int", "k": "int", "p": "float",
        "typical": "float", "minp": "float", "beam": "int", "lp": "float", "rep": "float", "ngram": "int",
        "eos": "bool", "col": "int", "step": "int", "view_t": "float",
        "x": ("self-BLEU", "distinct-2", "distinct-1", "distinct-3"), "y": ("mean log-prob", "perplexity"),
    },
}
# The model families (keys of explorer.registry.FAMILIES) each view's model picker offers; None: any.
MODEL_FAMILIES: dict[str, tuple[str, ...] | None] = {
    "catalogue": None,
    "positional-encodings": ("encoder", "decoder"),
    "lstm-gates": ("rnn-lm", "state-dict"),
    "self-attention": ("decoder", "encoder", "encoder-decoder"),
    "seq2seq": ("seq2seq-rnn", "encoder-decoder"),
    "word-embeddings": ("word2vec", "rnn-lm", "decoder", "encoder", "encoder-decoder", "seq2seq-rnn", "state-dict"),
    "decoding-strategies": ("decoder", "rnn-lm", "encoder-decoder"),
}
