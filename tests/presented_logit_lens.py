"""The logit lens's cases for tests/test_nb_parity.py: the default SmolLM2 (every few of its 30 layers, all of them
below) at its last cell and at a layer between the rows shown, a built-in transformer, a recurrent LM, and a second
model beside the first (view, page params, nb call)."""
from explorer import nb

PARIS = "The capital of France is"
SENT = "the keys to the old cabinet are on the table ."
GPT = "builtin:tiny-gpt"

CASES = {
    "logit-lens smollm2": (
        "logit-lens", {"model": "pretrained:smollm2", "text": PARIS},
        lambda: nb.logit_lens("pretrained:smollm2", PARIS)),
    "logit-lens smollm2, layer 4 at token 2": (
        "logit-lens", {"model": "pretrained:smollm2", "text": PARIS, "layer": "4", "pos": "2"},
        lambda: nb.logit_lens("pretrained:smollm2", PARIS, layer=4, pos=2)),
    "logit-lens tiny-gpt, layer 0 at token 6": (
        "logit-lens", {"model": GPT, "text": SENT, "layer": "0", "pos": "6"},
        lambda: nb.logit_lens(GPT, SENT, layer=0, pos=6)),
    "logit-lens lstm-lm": (
        "logit-lens", {"model": "builtin:lstm-lm", "text": SENT},
        lambda: nb.logit_lens("builtin:lstm-lm", SENT)),
    "logit-lens, a second model beside": (
        "logit-lens", {"model": GPT, "compare": "builtin:tiny-gpt@98", "text": SENT},
        lambda: nb.logit_lens(GPT, SENT, compare="builtin:tiny-gpt@98")),
}
