"""Masked words' cases for tests/test_nb_parity.py: two sentences side by side on the view's real-English masked LM
and on the generated English's, one sentence with two masks, a word masked from the menu, and a second model beside
the first: one that reads other tokens, one that cannot fill masks (view, page params, nb call)."""
from explorer import nb

A = "the keys to the cabinet [MASK] on the table ."
B = "the key to the cabinets [MASK] on the table ."
TWO = "the [MASK] to the [MASK] are here ."
FEED = "the dogs that the farmer feeds sleep in the garden ."

CASES = {
    **{f"masked-words, two sentences, {model}": (
        "masked-words", {"model": model, "text": A, "b": B},
        lambda model=model: nb.masked_words(model, A, b=B))
       for model in ("pretrained:minilm-mlm", "builtin:masked-lm")},
    "masked-words, two masks in one sentence": (
        "masked-words", {"model": "builtin:masked-lm", "text": TWO, "b": "", "k": "4", "words": "are"},
        lambda: nb.masked_words("builtin:masked-lm", TWO, k=4, words="are", b="")),
    "masked-words, a word masked from the menu": (
        "masked-words", {"model": "builtin:masked-lm", "text": FEED, "b": "", "mask": "6", "words": "sleeps"},
        lambda: nb.masked_words("builtin:masked-lm", FEED, words="sleeps", mask=6, b="")),
    "masked-words, a second model that reads other tokens": (
        "masked-words", {"model": "builtin:masked-lm", "text": TWO, "b": B, "compare": "builtin:masked-lm-wordnet"},
        lambda: nb.masked_words("builtin:masked-lm", TWO, b=B, compare="builtin:masked-lm-wordnet")),
    "masked-words, a second model without a masked-LM head": (
        "masked-words", {"model": "pretrained:minilm-mlm", "text": A, "b": "", "compare": "pretrained:minilm"},
        lambda: nb.masked_words("pretrained:minilm-mlm", A, b="", compare="pretrained:minilm")),
}
