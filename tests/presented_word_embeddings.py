"""Word embeddings' cases for tests/test_nb_parity.py: each section on the built-in word2vec (neighbours beside a
second model's too) and MiniLM's shipped UMAP and contextual embeddings (view, page params, nb call)."""
from explorer import nb

WE = "word-embeddings"
W2V = "builtin:word2vec"
WORDS = "dog cat red green"

CASES = {
    "word-embeddings word2vec, neighbours": (
        WE, {"model": W2V, "text": WORDS, "nn": "dog"}, lambda: nb.word_embeddings(W2V, words=WORDS, nn="dog")),
    "word-embeddings word2vec, neighbours beside lstm-lm's": (
        WE, {"model": W2V, "text": WORDS, "compare": "builtin:lstm-lm"},
        lambda: nb.word_embeddings(W2V, words=WORDS, compare="builtin:lstm-lm")),
    "word-embeddings word2vec, analogies": (
        WE, {"model": W2V, "text": WORDS, "section": "analogies", "a": "dog", "b": "cat", "c": "red"},
        lambda: nb.word_embeddings(W2V, words=WORDS, section="analogies", a="dog", b="cat", c="red")),
    "word-embeddings word2vec, two axes in 3-D": (
        WE, {"model": W2V, "text": WORDS, "dims": "3", "section": "axes", "x1": "dog", "x2": "cat", "y1": "red",
             "y2": "green"},
        lambda: nb.word_embeddings(W2V, words=WORDS, dims=3, section="axes", x1="dog", x2="cat", y1="red",
                                   y2="green")),
    "word-embeddings minilm, shipped umap": (
        WE, {"model": "pretrained:minilm", "method": "umap", "text": "king queen zebra"},
        lambda: nb.word_embeddings("pretrained:minilm", words="king queen zebra", method="umap")),
    "word-embeddings minilm, contextual": (
        WE, {"model": "pretrained:minilm", "section": "contextual", "text": "the bank of the river"},
        lambda: nb.word_embeddings("pretrained:minilm", words="the bank of the river", section="contextual")),
}
