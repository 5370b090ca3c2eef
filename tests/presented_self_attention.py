"""Self-attention's cases for tests/test_nb_parity.py: each mode on a decoder and an encoder, and a second model
beside the first (view, page params, nb call)."""
from explorer import nb

CASES = {
    **{f"self-attention {mode} {model}": (
        "self-attention", {"model": model, "mode": mode, "layer": "1", "head": "1", "text": "the dog saw it",
                           "text2": "the cat saw it"},
        lambda model=model, mode=mode: nb.self_attention(model, "the dog saw it", layer=1, head=1, mode=mode,
                                                         text2="the cat saw it"))
       for mode in ("head", "model", "steps", "masks", "compare")
       for model in ("builtin:tiny-gpt", "pretrained:minilm")},
    "self-attention, a second model beside": (
        "self-attention", {"model": "builtin:tiny-gpt", "compare": "builtin:tiny-gpt@98", "layer": "1", "head": "0",
                           "text": "the dog saw it"},
        lambda: nb.self_attention("builtin:tiny-gpt", "the dog saw it", layer=1, compare="builtin:tiny-gpt@98")),
}
