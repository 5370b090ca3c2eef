"""The logit lens (nostalgebraist 2020): what each layer would predict if the model stopped there.

Each layer's hidden state, read from the model's record (one forward pass), goes through the model's own final norm
and output layer (`adapter.unembed`): softmax(W_U · norm(h_l)). `logit_lens(loaded, text)` -> LensTrace:

  tokens (T,)                       the input as fed (<bos> first for the built-in LMs)
  layers (L,)                       layer names, first to last
  top_tokens, top_probs (L, T)      each layer's most probable next token at each position, and its probability
  final_tokens (T,)                 the model's own prediction at each position (argmax of its logits)
  final_rank, final_prob (L, T)     that token's rank (0 = top) and probability at each layer
  topk_tokens, topk_probs (L, T, K) the K most probable tokens per cell, for the bars
  lens_error                        max |last layer through the lens − the model's own logits|: the lens is only
                                    shown when this is below LENS_TOL (it reads the model as the model reads itself)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from explorer.adapters.base import Unsupported
from explorer.adapters.protocols import Loaded
from explorer.runtime.errors import ViewError

K = 10
MAX_TOKENS = 128
LENS_TOL = 1e-3


class LensError(ViewError, ValueError):
    """The model cannot be read through a logit lens; str() is for the user."""

    alert = "info"


@dataclass(frozen=True)
class LensTrace:
    """The lens over L layers and T positions (K alternatives per cell).

    tokens, special (T,): the input as fed; layers (L,): layer names, first to last; top_tokens (L, T) and top_probs
    (L, T): each layer's most probable next token and its probability; final_tokens (T,): the model's own prediction;
    final_rank, final_prob (L, T): that token's rank (0 = top) and probability at each layer; topk_tokens (L, T, K),
    topk_probs (L, T, K): the K most probable tokens per cell; lens_error: max |last layer through the lens − the
    model's logits|."""

    model_id: str
    tokens: tuple[str, ...]
    special: tuple[bool, ...]
    layers: tuple[str, ...]
    top_tokens: tuple[tuple[str, ...], ...]
    top_probs: np.ndarray
    final_tokens: tuple[str, ...]
    final_rank: np.ndarray
    final_prob: np.ndarray
    topk_tokens: tuple[tuple[tuple[str, ...], ...], ...]
    topk_probs: np.ndarray
    lens_error: float
    notes: tuple[str, ...] = ()

    def bars(self, layer: int, position: int) -> tuple[tuple[str, ...], np.ndarray]:
        """The K most probable next tokens (and probabilities) of one cell."""
        return self.topk_tokens[layer][position], self.topk_probs[layer, position]


def logit_lens(loaded: Loaded, text: str, k: int = K) -> LensTrace:
    """The lens over every layer and position of `text`. Raises LensError (no output layer, empty text, or a
    model whose last layer through the lens is not its own output)."""
    adapter = loaded.adapter
    mid = str(getattr(loaded, "id", "model"))
    if not adapter.lens_names:
        raise LensError(f"{mid} has no layers and output layer to read through a logit lens: pick a decoder (the "
                        "built-in GPT, a Hugging Face causal LM) or a recurrent language model.")
    enc = adapter.encode(text, max_tokens=MAX_TOKENS)
    if not enc.ids:
        raise LensError(" ".join(enc.notes) or "Type a sentence.")
    try:
        rec = adapter.run(enc, names=adapter.lens_names)
        states = adapter.lens_states(rec)
        with torch.inference_mode():
            logits = [adapter.unembed(x.to(adapter.device), normed).float().cpu() for _, x, normed in states]
    except Unsupported as exc:
        raise LensError(str(exc)) from None
    if "logits" not in rec:
        raise LensError(f"{mid} records no logits: it has no output layer over its vocabulary.")
    own = torch.from_numpy(rec["logits"]).float()
    error = float((logits[-1] - own).abs().max())
    name, last, normed = states[-1]
    if error > LENS_TOL and not normed:  # some models return their last state after the final norm: read it so
        with torch.inference_mode():
            again = adapter.unembed(last.to(adapter.device), True).float().cpu()
        if float((again - own).abs().max()) < error:
            logits[-1], error = again, float((again - own).abs().max())
    if error > LENS_TOL * max(1.0, float(own.abs().max())):
        raise LensError(f"{mid}'s last layer read through its final norm and output layer differs from its own logits "
                        f"by {error:.2g}: it transforms its last state in a way the lens does not know, so the lens "
                        "would not show what the model computes.")
    probs = torch.softmax(torch.stack(logits), dim=-1)                      # (L, T, V)
    final = own.argmax(dim=-1)                                              # (T,)
    kk = min(k, probs.shape[-1])
    top_p, top_i = probs.topk(kk, dim=-1)                                   # (L, T, K)
    final_p = probs.gather(-1, final.expand(probs.shape[0], -1)[..., None])[..., 0]
    rank = (probs > final_p[..., None]).sum(-1)
    topk_tokens = tuple(tuple(tuple(adapter.token_strings(row.tolist())) for row in layer) for layer in top_i)
    return LensTrace(mid, tuple(enc.tokens), tuple(bool(s) for s in (enc.special or (False,) * len(enc.ids))),
                     tuple(n for n, _, _ in states), tuple(tuple(t[0] for t in layer) for layer in topk_tokens),
                     top_p[..., 0].numpy(), tuple(adapter.token_strings(final.tolist())), rank.numpy(), final_p.numpy(),
                     topk_tokens, top_p.numpy(), error, tuple(enc.notes))
