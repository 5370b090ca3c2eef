"""Positional encodings' cases for tests/test_nb_parity.py: the three formula panels, a model's own positions (a
learned table, at a training step, beside a second model's, and a rotary model's) and a sentence with its words
shuffled on an encoder and a decoder (view, page params, nb call)."""
from explorer import nb

PE = "positional-encodings"
GPT = "builtin:tiny-gpt"

CASES = {
    "positional-encodings sinusoidal": (
        PE, {"panel": "sinusoidal", "d_model": "16", "n_pos": "50", "pos": "3", "dim": "2"},
        lambda: nb.positional_encodings(d=16, n=50, pos=3, dim=2)),
    "positional-encodings relative positions": (
        PE, {"panel": "similarity", "sim": "cosine", "k": "3", "n_pos": "40", "d_model": "32", "pos": "7"},
        lambda: nb.positional_encodings(panel="similarity", sim="cosine", k=3, n=40, d=32, pos=7)),
    "positional-encodings rotary formula, random q and k": (
        PE, {"panel": "rope", "rope_qk": "random", "seed": "4", "pos": "12"},
        lambda: nb.positional_encodings(panel="rope", rope_qk="random", seed=4, pos=12)),
    "positional-encodings minilm's learned table": (
        PE, {"panel": "learned", "model": "pretrained:minilm", "pca": "3", "sim": "cosine", "pos": "40"},
        lambda: nb.positional_encodings("pretrained:minilm", panel="learned", pca=3, sim="cosine", pos=40)),
    "positional-encodings tiny-gpt's table beside a training step's": (
        PE, {"panel": "learned", "model": GPT, "compare": f"{GPT}@98"},
        lambda: nb.positional_encodings(GPT, compare=f"{GPT}@98")),
    "positional-encodings a training step on its trained model's scale": (
        PE, {"panel": "learned", "model": f"{GPT}@98", "pos": "5"},
        lambda: nb.positional_encodings(f"{GPT}@98", pos=5)),
    "positional-encodings smollm2's rotary positions": (
        PE, {"panel": "learned", "model": "pretrained:smollm2"},
        lambda: nb.positional_encodings("pretrained:smollm2", panel="learned")),
    "positional-encodings minilm's sentence, shuffled": (
        PE, {"panel": "sentence", "model": "pretrained:minilm", "text": "The man bit the dog.", "seed": "2",
             "tok": "3"},
        lambda: nb.positional_encodings("pretrained:minilm", text="The man bit the dog.", seed=2, tok=3)),
    "positional-encodings tiny-gpt's sentence, shuffled": (
        PE, {"panel": "sentence", "model": GPT, "text": "the dog saw the cat"},
        lambda: nb.positional_encodings(GPT, text="the dog saw the cat")),
}
