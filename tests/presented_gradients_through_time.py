"""Gradients through time's cases for tests/test_nb_parity.py: the view's real-English cells, and the generated
English's LSTM and GRU (view, page params, nb call)."""
from explorer import nb
from explorer.views import BY_PATH

DISTANCE = "the student near the old tables is"
DEFAULTS = list(BY_PATH["gradients-through-time"].params["models"].default)

CASES = {
    "gradients-through-time, the view's three cells": (
        "gradients-through-time", {"text": DISTANCE}, lambda: nb.gradients_through_time(DEFAULTS, DISTANCE)),
    "gradients-through-time, an LSTM and a GRU": (
        "gradients-through-time", {"models": "builtin:lstm-lm,builtin:gru-lm", "text": "the keys to the cabinet are"},
        lambda: nb.gradients_through_time(["builtin:lstm-lm", "builtin:gru-lm"], "the keys to the cabinet are")),
}
