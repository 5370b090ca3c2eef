"""Interventions' cases for tests/test_nb_parity.py: each site and method on the built-in GPT, a cell chosen on a
fitted colour range, a second model beside the first, an LSTM noised with a mean ablation, and a classifier on its
own pair (view, page params, nb call)."""
from explorer import nb

GPT = "builtin:tiny-gpt"
PAIR = ("the keys to the cabinet", "the key to the cabinet", "are", "is")
QUERY = {"text": PAIR[0], "corrupt": PAIR[1], "answer": PAIR[2], "wrong": PAIR[3]}
FOOD = ("The food was not good.", "The food was very good.", "negative", "positive")
CASES = {
    "interventions resid exact": (
        "interventions", {"model": GPT, **QUERY}, lambda: nb.interventions(GPT, *PAIR)),
    "interventions heads, both methods, an ablation": (
        "interventions", {"model": GPT, **QUERY, "site": "heads", "method": "both", "pos": "4",
                          "ablate": "L1H1,L0MLP"},
        lambda: nb.interventions(GPT, *PAIR, site="heads", method="both", pos=4, ablate="L1H1,L0MLP")),
    "interventions mlp estimate, noising, a cell on a fitted range": (
        "interventions", {"model": GPT, **QUERY, "site": "mlp", "method": "attribution", "direction": "noise",
                          "layer": "0", "col": "1", "range": "fit"},
        lambda: nb.interventions(GPT, *PAIR, site="mlp", method="attribution", direction="noise", layer=0, col=1,
                                 range="fit")),
    "interventions, a second model beside": (
        "interventions", {"model": GPT, **QUERY, "compare": "builtin:tiny-gpt@98"},
        lambda: nb.interventions(GPT, *PAIR, compare="builtin:tiny-gpt@98")),
    "interventions on an LSTM": (
        "interventions", {"model": "builtin:lstm-lm", **QUERY, "site": "c", "direction": "noise", "method": "both",
                          "ablate": "L0U5", "how": "mean"},
        lambda: nb.interventions("builtin:lstm-lm", *PAIR, site="c", direction="noise", method="both",
                                 ablate="L0U5", how="mean")),
    "interventions on a classifier": (
        "interventions", {"model": "builtin:sentiment-lstm", "text": FOOD[0], "corrupt": FOOD[1], "answer": FOOD[2],
                          "wrong": FOOD[3], "ablate": "L0U3", "how": "resample"},
        lambda: nb.interventions("builtin:sentiment-lstm", *FOOD, site="h", ablate="L0U3", how="resample")),
}
