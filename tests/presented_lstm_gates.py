"""The recurrent cell's cases for tests/test_nb_parity.py: each section on the view's LSTM and on a GRU, an Elman
RNN's, your own pair of sentences, a second model beside the first, and a training step sorted as its trained model
(view, page params, nb call)."""
from explorer import nb
from explorer.presenters.lstm_gates import OWN_PAIR, SECTIONS

AGREEMENT = "the keys to the old cabinet are on the table ."

CASES = {
    **{f"lstm-gates {section} {model}": (
        "lstm-gates", {"model": model, "section": str(section), "text": AGREEMENT},
        lambda model=model, section=section: nb.lstm_gates(model, AGREEMENT, section=str(section)))
       for section in SECTIONS for model in ("builtin:lstm-lm-wordnet", "builtin:gru-lm")},
    "lstm-gates, an Elman RNN's unit and equations": (
        "lstm-gates", {"model": "builtin:rnn-lm", "text": AGREEMENT, "sort": "mean", "top": "16"},
        lambda: nb.lstm_gates("builtin:rnn-lm", AGREEMENT, sort="mean", top=16)),
    "lstm-gates, your own pair": (
        "lstm-gates", {"model": "builtin:lstm-lm", "text": AGREEMENT, "section": str(SECTIONS[3]), "pair": OWN_PAIR,
                       "b": "the keys to the old cabinet is"},
        lambda: nb.lstm_gates("builtin:lstm-lm", AGREEMENT, section=str(SECTIONS[3]), pair=OWN_PAIR,
                              b="the keys to the old cabinet is")),
    "lstm-gates, a second model beside": (
        "lstm-gates", {"model": "builtin:lstm-lm", "compare": "builtin:lstm-lm@127", "text": AGREEMENT, "gate": "f"},
        lambda: nb.lstm_gates("builtin:lstm-lm", AGREEMENT, gate="f", compare="builtin:lstm-lm@127")),
    "lstm-gates, a training step in its trained model's order": (
        "lstm-gates", {"model": "builtin:lstm-lm@127", "text": AGREEMENT},
        lambda: nb.lstm_gates("builtin:lstm-lm@127", AGREEMENT)),
}
