"""Decoding strategies' cases for tests/test_nb_parity.py: each section under the outputs on the built-in GPT, a
second model beside the first, a recurrent LM, a word-level LM that leaves its unknown word out, and an
encoder-decoder (view, page params, nb call)."""
from explorer import nb

GPT = "builtin:tiny-gpt"
DOG = "the dog that the farmers feed"
SMALL = {"max_new": "8", "n": "2"}
CASES = {
    "decoding-strategies step": (
        "decoding-strategies", {"model": GPT, "text": DOG, **SMALL},
        lambda: nb.decoding_strategies(GPT, DOG, max_new=8, n=2)),
    "decoding-strategies step of a sampling column": (
        "decoding-strategies", {"model": GPT, "text": DOG, **SMALL, "col": "2", "step": "3", "view_t": "0.7",
                                "rep": "1.2"},
        lambda: nb.decoding_strategies(GPT, DOG, max_new=8, n=2, col=2, step=3, view_t=0.7, rep=1.2)),
    "decoding-strategies beam": (
        "decoding-strategies", {"model": GPT, "text": DOG, **SMALL, "section": "beam", "beam": "3"},
        lambda: nb.decoding_strategies(GPT, DOG, max_new=8, n=2, section="beam", beam=3)),
    "decoding-strategies tradeoff": (
        "decoding-strategies", {"model": GPT, "text": DOG, **SMALL, "section": "tradeoff", "x": "distinct-2",
                                "strategies": "greedy,sample,min-p"},
        lambda: nb.decoding_strategies(GPT, DOG, ("greedy", "sample", "min-p"), max_new=8, n=2, section="tradeoff",
                                       x="distinct-2")),
    "decoding-strategies, a second model beside": (
        "decoding-strategies", {"model": GPT, "text": DOG, **SMALL, "compare": "builtin:tiny-gpt@98", "step": "2"},
        lambda: nb.decoding_strategies(GPT, DOG, max_new=8, n=2, compare="builtin:tiny-gpt@98", step=2)),
    "decoding-strategies on a recurrent LM, no beam": (
        "decoding-strategies", {"model": "builtin:lstm-lm", "text": DOG, **SMALL, "section": "beam",
                                "strategies": "greedy,typical"},
        lambda: nb.decoding_strategies("builtin:lstm-lm", DOG, ("greedy", "typical"), max_new=8, n=2,
                                       section="beam")),
    "decoding-strategies, the unknown word left out": (
        "decoding-strategies", {"model": "builtin:rnn-lm-wordnet", "text": "The old man", **SMALL},
        lambda: nb.decoding_strategies("builtin:rnn-lm-wordnet", "The old man", max_new=8, n=2)),
    "decoding-strategies on an encoder-decoder": (
        "decoding-strategies", {"model": "builtin:seq2seq-bahdanau", "text": "the red car is fast .", **SMALL},
        lambda: nb.decoding_strategies("builtin:seq2seq-bahdanau", "the red car is fast .", max_new=8, n=2)),
}
