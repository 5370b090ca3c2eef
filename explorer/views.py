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
VIEWS.append(View("pages/sampling.py", "Decoding strategies", ":material/casino:", "sampling", "Greedy, temperature, top-k, top-p, typical, min-p and beam search side by side, with metrics."))
