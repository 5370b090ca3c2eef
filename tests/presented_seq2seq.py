"""Seq2seq's cases for tests/test_nb_parity.py: each panel under the heatmap on the default model, a forced target,
a second model beside the first, a model without attention and a Luong one (view, page params, nb call)."""
from explorer import nb

RED = "the red car is fast ."
BAHDANAU = "builtin:seq2seq-bahdanau"
CASES = {
    "seq2seq step": (
        "seq2seq", {"model": BAHDANAU, "text": RED, "step": "2"}, lambda: nb.seq2seq(BAHDANAU, RED, step=2)),
    "seq2seq length": (
        "seq2seq", {"model": BAHDANAU, "text": RED, "panel": "length"},
        lambda: nb.seq2seq(BAHDANAU, RED, panel="length")),
    "seq2seq beam": (
        "seq2seq", {"model": BAHDANAU, "text": RED, "decoding": "beam", "beam": "3"},
        lambda: nb.seq2seq(BAHDANAU, RED, decoding="beam", beam=3)),
    "seq2seq forced": (
        "seq2seq", {"model": BAHDANAU, "text": RED, "target": "la voiture est rouge ."},
        lambda: nb.seq2seq(BAHDANAU, RED, target="la voiture est rouge .")),
    "seq2seq, a second model beside": (
        "seq2seq", {"model": BAHDANAU, "text": RED, "model2": "builtin:seq2seq-none", "step": "1"},
        lambda: nb.seq2seq(BAHDANAU, RED, model2="builtin:seq2seq-none", step=1)),
    "seq2seq without attention": (
        "seq2seq", {"model": "builtin:seq2seq-none", "text": RED, "step": "3"},
        lambda: nb.seq2seq("builtin:seq2seq-none", RED, step=3)),
    "seq2seq Luong, length beside a second model": (
        "seq2seq", {"model": "builtin:seq2seq-luong-dot", "text": RED, "model2": "builtin:seq2seq-bahdanau",
                    "panel": "length", "allcurves": "0"},
        lambda: nb.seq2seq("builtin:seq2seq-luong-dot", RED, model2=BAHDANAU, panel="length", allcurves=False)),
}
