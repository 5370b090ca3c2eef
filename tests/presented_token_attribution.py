"""Token attribution's cases for tests/test_nb_parity.py: integrated gradients on the default SmolLM2 (short of
completeness: the warning), a built-in transformer's every output (a chosen row, gradient × input, the logit), a
recurrent LM, an encoder-decoder, a snapshot coloured on its trained model's scale, and a second model beside the
first (view, page params, nb call)."""
from explorer import nb

EIFFEL = "The Eiffel Tower is in the city of"
SENT = "the keys to the old cabinet are on the table ."
GPT = "builtin:tiny-gpt"

CASES = {
    "token-attribution smollm2, 8 steps": (
        "token-attribution", {"model": "pretrained:smollm2", "steps": "8", "text": EIFFEL,
                              "method": "integrated gradients"},
        lambda: nb.token_attribution("pretrained:smollm2", EIFFEL, "integrated gradients", steps=8)),
    "token-attribution smollm2, its default: LRP": (
        "token-attribution", {"model": "pretrained:smollm2", "text": EIFFEL},
        lambda: nb.token_attribution("pretrained:smollm2", EIFFEL)),
    "token-attribution tiny-gpt, output 3, 16 steps": (
        "token-attribution", {"model": GPT, "text": SENT, "steps": "16", "out": "3"},
        lambda: nb.token_attribution(GPT, SENT, steps=16, out=3)),
    "token-attribution tiny-gpt, gradient × input": (
        "token-attribution", {"model": GPT, "text": SENT, "method": "gradient × input"},
        lambda: nb.token_attribution(GPT, SENT, method="gradient × input")),
    "token-attribution tiny-gpt, the logit, the prediction only": (
        "token-attribution", {"model": GPT, "text": SENT, "of": "logit", "outputs": "prediction"},
        lambda: nb.token_attribution(GPT, SENT, of="logit", outputs="prediction")),
    "token-attribution tiny-gpt, LRP, rather than the runner-up": (
        "token-attribution", {"model": GPT, "text": SENT, "method": "lrp", "foil": "second"},
        lambda: nb.token_attribution(GPT, SENT, method="lrp", foil="second")),
    "token-attribution lstm-lm, gradient × input rather than a word": (
        "token-attribution", {"model": "builtin:lstm-lm", "text": SENT, "method": "gradient × input", "foil": "car",
                              "out": "4"},
        lambda: nb.token_attribution("builtin:lstm-lm", SENT, method="gradient × input", foil="car", out=4)),
    "token-attribution seq2seq-bahdanau, LRP": (
        "token-attribution", {"model": "builtin:seq2seq-bahdanau", "text": "the red car is fast .", "method": "LRP"},
        lambda: nb.token_attribution("builtin:seq2seq-bahdanau", "the red car is fast .", method="LRP")),
    "token-attribution lstm-lm": (
        "token-attribution", {"model": "builtin:lstm-lm", "text": SENT},
        lambda: nb.token_attribution("builtin:lstm-lm", SENT)),
    "token-attribution seq2seq-bahdanau": (
        "token-attribution", {"model": "builtin:seq2seq-bahdanau", "text": "the red car is fast ."},
        lambda: nb.token_attribution("builtin:seq2seq-bahdanau", "the red car is fast .")),
    "token-attribution, a snapshot on its trained model's scale": (
        "token-attribution", {"model": "builtin:tiny-gpt@98", "text": SENT, "steps": "16"},
        lambda: nb.token_attribution("builtin:tiny-gpt@98", SENT, steps=16)),
    "token-attribution, a second model beside": (
        "token-attribution", {"model": GPT, "compare": "builtin:tiny-gpt@98", "text": SENT, "steps": "16"},
        lambda: nb.token_attribution(GPT, SENT, steps=16, compare="builtin:tiny-gpt@98")),
}
