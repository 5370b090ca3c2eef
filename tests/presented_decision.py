"""The decision view's cases for tests/test_nb_parity.py: the default sentiment LSTM with a second sentence beside,
a contrastive question by gradient × input, a label contrasted with itself (the warning), integrated gradients short
of completeness, the shipped tagger at a chosen word, MiniLM's fine-tuned classifier and tagger, and a second model
of other labels (view, page params, nb call)."""
from explorer import nb

LSTM, TAGGER = "builtin:sentiment-lstm", "builtin:pos-bilstm"
FOOD, FILM = "the food was not bad at all .", "The film was not good at all."
RUN = "they went for a long run ."

CASES = {
    "decision sentiment-lstm, two sentences": (
        "decision", {"model": LSTM, "text": FOOD, "b": FILM},
        lambda: nb.classify(LSTM, FOOD, second=FILM)),
    "decision sentiment-lstm, positive rather than negative, gradient × input": (
        "decision", {"model": LSTM, "text": FOOD, "b": "", "label": "1", "foil": "0", "method": "gradient × input"},
        lambda: nb.classify(LSTM, FOOD, label=1, foil=0, method="gradient × input")),
    "decision sentiment-lstm, positive rather than negative, LRP": (
        "decision", {"model": LSTM, "text": FOOD, "b": "", "label": "1", "foil": "0", "method": "lrp"},
        lambda: nb.classify(LSTM, FOOD, label=1, foil=0, method="lrp")),
    "decision pos-bilstm, LRP": (
        "decision", {"model": TAGGER, "text": RUN, "method": "LRP"},
        lambda: nb.tag(TAGGER, RUN, method="LRP")),
    "decision sentiment-lstm, a label rather than itself": (
        "decision", {"model": LSTM, "text": FOOD, "b": "", "label": "0", "foil": "0"},
        lambda: nb.classify(LSTM, FOOD, label=0, foil=0)),
    "decision sentiment-lstm, 2 steps": (
        "decision", {"model": LSTM, "text": FOOD, "b": "", "steps": "2"},
        lambda: nb.classify(LSTM, FOOD, steps=2)),
    "decision pos-bilstm at “run”": (
        "decision", {"model": TAGGER, "text": RUN, "token": "5"},
        lambda: nb.tag(TAGGER, RUN, token=5)),
    "decision minilm-sentiment": (
        "decision", {"model": "pretrained:minilm-sentiment", "text": FOOD, "b": ""},
        lambda: nb.classify("pretrained:minilm-sentiment", FOOD)),
    "decision minilm-pos": (
        "decision", {"model": "pretrained:minilm-pos", "text": RUN},
        lambda: nb.tag("pretrained:minilm-pos", RUN)),
    "decision, a second model of other labels": (
        "decision", {"model": LSTM, "compare": TAGGER, "text": FOOD, "b": ""},
        lambda: nb.classify(LSTM, FOOD, compare=TAGGER)),
}
