"""Watch it learn's cases for tests/test_nb_parity.py: a recurrent language model's curves and a transformer's with
its heads' induction scores (view, page params, nb call)."""
from explorer import nb

CASES = {
    "training-curves lstm-lm": (
        "training-curves", {"model": "builtin:lstm-lm"}, lambda: nb.training_curves("builtin:lstm-lm")),
    "training-curves tiny-gpt, induction heads": (
        "training-curves", {"model": "builtin:tiny-gpt", "score": "induction"},
        lambda: nb.training_curves("builtin:tiny-gpt", score="induction")),
}
