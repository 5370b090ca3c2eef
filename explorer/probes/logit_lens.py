"""The logit lens (nostalgebraist 2020): what each layer would predict if the model stopped there.

Each layer's hidden state, read from the model's record (one forward pass), goes through the model's own final norm
and output layer (`adapter.unembed`): softmax(W_U · norm(h_l)). `logit_lens(loaded, text)` -> LensTrace:

  tokens (T,)                       the input as fed (<bos> first for the built-in LMs)
  layers (L,)                       layer names, first to last
  top_tokens, top_probs (L, T)      each layer's most probable next token at each position, and its probability
  final_tokens (T,)                 the model's own prediction at each position (argmax of its logits)
                                    (a word-level vocabulary's <unk>, any word outside it, is left out of the
                                    predictions and the top tokens: it is not a word; its probability is not changed)
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
from explorer.adapters.task_head import not_a_language_model
from explorer.adapters.protocols import Loaded, Unembeds, unembeds
from explorer.adapters.text import unknown_word_id, without_unknown
from explorer.runtime import budget
from explorer.runtime.errors import ViewError
from explorer.runtime.prefix_memo import PrefixMemo, prefix_memo

K = 10
MAX_TOKENS = 128
LENS_TOL = 1e-3


def tolerance(model: object) -> float:
    """How far (times the largest |logit|, at least 1) the last layer read through the lens may be from the model's
    own logits: LENS_TOL in float32; 8 of the dtype's epsilons for a model in half precision, whose own logits were
    rounded there (bfloat16: 0.0625; float16: 0.0078)."""
    first = next(model.parameters(), None) if isinstance(model, torch.nn.Module) else None
    if first is None or first.dtype == torch.float32 or not first.is_floating_point():
        return LENS_TOL
    return max(LENS_TOL, 8 * torch.finfo(first.dtype).eps)


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
    final_ids: tuple[int, ...] = ()  # (T,) the ids of final_tokens

    def bars(self, layer: int, position: int) -> tuple[tuple[str, ...], np.ndarray]:
        """The K most probable next tokens (and probabilities) of one cell."""
        return self.topk_tokens[layer][position], self.topk_probs[layer, position]

    def first_in_top(self, position: int, k: int = 10) -> int | None:
        """The first layer after which the model's own prediction at `position` is among the k most probable tokens
        (None: after none)."""
        hits = np.flatnonzero(self.final_rank[:, position] < k)
        return int(hits[0]) if hits.size else None


@dataclass(frozen=True)
class _Column:
    """One position's lens, every layer (L,): the top K ids (L, K) and probabilities, the model's own prediction,
    its probability and rank at each layer, and |last layer through the lens − the model's logits| there."""

    top_ids: torch.Tensor
    top_probs: torch.Tensor
    final: int
    final_prob: torch.Tensor
    rank: torch.Tensor
    error: float


ROWS = 128  # (layer, position) rows through the output layer at once: a (ROWS, V) block of logits at a time


def _columns(adapter: Unembeds, states: list[tuple[str, torch.Tensor, bool]], own: torch.Tensor,
             positions: list[int], k: int, track: list[int] | None = None) -> tuple[dict[int, _Column], bool]:
    """The lens at `positions`: each layer's state there through the final norm and output layer, in blocks of ROWS
    rows (one read of the output layer's weights per block; no (L, T, V) array is ever held), and whether the last
    layer had to be read as already normed to equal the model's logits. track: the token id followed at each position
    (its probability and rank; default the model's own prediction there: its most probable word, a word-level
    vocabulary's unknown-word token left out, as it is of each cell's top k)."""
    idx = torch.tensor(positions, dtype=torch.long)
    M, L = len(positions), len(states)
    unknown = unknown_word_id(adapter)
    final = without_unknown(own[idx], unknown).argmax(dim=-1) if track is None else \
        torch.tensor(track, dtype=torch.long)[idx]                                                     # (M,)
    kk = min(k, own.shape[-1] - (unknown is not None))
    top_p, top_i = torch.zeros(L, M, kk), torch.zeros(L, M, kk, dtype=torch.long)
    final_p, rank = torch.zeros(L, M), torch.zeros(L, M, dtype=torch.long)
    error = torch.zeros(M)

    device = adapter.device

    def read(layers: list[int], normed: bool) -> None:
        """Fill the arrays of `layers` (every position), their states read through the lens (normed: as they are)."""
        X = torch.cat([states[i][1][idx] for i in layers])                  # (len · M, C), layer-major
        for r0 in range(0, X.shape[0], ROWS):  # softmax, top-k and ranks on the model's device: (n, V) stays there
            logits = adapter.unembed(X[r0:r0 + ROWS].to(device), normed).float()                  # (n, V)
            at = torch.arange(r0, r0 + logits.shape[0])
            lay, m = torch.tensor(layers)[at // M], at % M
            probs = torch.softmax(logits, dim=-1)
            i = without_unknown(probs, unknown).topk(kk, dim=-1)[1]  # ranked without <unk>
            p = probs.gather(-1, i)  # the model's own probabilities
            fp = probs.gather(-1, final[m].to(device)[:, None])[:, 0]
            top_p[lay, m], top_i[lay, m], final_p[lay, m] = p.cpu(), i.cpu(), fp.cpu()
            rank[lay, m] = (probs > fp[:, None]).sum(-1, dtype=torch.int32).cpu().long()  # int32: 2× faster here
            last = lay == L - 1
            if bool(last.any()):
                mine = own[idx][m[last]].to(device)
                error[m[last]] = (logits[last.to(device)] - mine).abs().amax(dim=-1).float().cpu()

    with torch.inference_mode():
        for flag in (False, True):
            layers = [i for i, (_, _, normed) in enumerate(states) if normed is flag]
            if layers:
                read(layers, flag)
        renormed = False
        if float(error.max()) > LENS_TOL and not states[-1][2]:  # some models return their last state after the norm
            before = (top_p[-1].clone(), top_i[-1].clone(), final_p[-1].clone(), rank[-1].clone(), error.clone())
            read([L - 1], True)
            renormed = float(error.max()) < float(before[-1].max())
            if not renormed:
                top_p[-1], top_i[-1], final_p[-1], rank[-1], error = before
    return {t: _Column(top_i[:, m], top_p[:, m], int(final[m]), final_p[:, m], rank[:, m], float(error[m]))
            for m, t in enumerate(positions)}, renormed


def price(shape: budget.Shape, tokens: int) -> budget.Price:
    """The price of the lens over `tokens` tokens: one forward keeping every layer's states, and the output layer
    at every layer and position (L + 1 rows per token, in blocks of ROWS rows of V logits)."""
    vocab = shape.head // shape.width if shape.head and shape.width else 0
    return budget.forward(shape, tokens, read=tokens * (max(shape.layers, 1) + 2),
                          transient=budget.layer_bytes(shape, tokens, 2) + 3 * ROWS * vocab * budget.FLOAT_BYTES)


def _no_lens(loaded: Loaded, mid: str) -> str:
    """Why `loaded` has no logit lens (the adapter's own reason first)."""
    a, caps = loaded.adapter, loaded.caps
    if task := not_a_language_model(loaded, "predicts no next word, so its layers cannot be read as predictions"):
        return task
    why = "has no layers and next-token prediction"
    if caps.fill_in is not None:  # an encoder: its layers read the sentence both ways
        why = "has no language-model head that predicts the next token (it reads the sentence both ways)"
    elif unembeds(a) or (caps.attention is not None and not a.is_encoder_decoder):  # layers, no next-token head
        why = "has no language-model head that predicts the next token"
    return a.reason or (f"{mid} {why}, so there is no next-token prediction to read its layers through: pick a "
                        "decoder (the built-in GPT, a Hugging Face causal LM) or a recurrent language model.")


def logit_lens(loaded: Loaded, text: str, k: int = K) -> LensTrace:
    """The lens over every layer and position of `text`. Raises LensError (no output layer, empty text, or a
    model whose last layer through the lens is not its own output).

    A left-to-right model's column at position p reads only the tokens 0 … p: columns are kept in the model's
    prefix memo (explorer.runtime.prefix_memo) under those tokens, so typing on at the end of a sentence unembeds only
    the new positions (the forward pass still runs over the whole sentence)."""
    mid = str(getattr(loaded, "id", "model"))
    if (adapter := loaded.caps.lens) is None:
        raise LensError(_no_lens(loaded, mid))
    enc = adapter.encode(text, max_tokens=budget.cap_tokens(loaded.model, MAX_TOKENS, price))
    if not enc.ids:
        raise LensError(" ".join(enc.notes) or "Type a sentence.")
    try:
        rec = adapter.run(enc, names=adapter.lens_names)
        states = adapter.lens_states(rec)
        if "logits" not in rec:
            with torch.inference_mode():  # a model without a language-model head: its adapter says why (Unsupported)
                adapter.unembed(states[-1][1][:1].to(adapter.device), states[-1][2])
            raise LensError(f"{mid} records no logits: it has no output layer over its vocabulary.")
        own = torch.from_numpy(rec["logits"]).float()
        memo: PrefixMemo[_Column] = prefix_memo(adapter, f"lens:{k}")
        keys = [tuple(enc.ids[:t + 1]) for t in range(len(enc.ids))]
        cols: dict[int, _Column] = {}
        if memo is not None:
            cols = {t: c for t, c in ((t, memo.get(key)) for t, key in enumerate(keys)) if c is not None}
        todo = [t for t in range(len(enc.ids)) if t not in cols]
        if todo:
            new, _ = _columns(adapter, states, own, todo, k)
            cols.update(new)
            if memo is not None:
                for t in todo:
                    memo.put(keys[t], new[t])
    except Unsupported as exc:
        raise LensError(str(exc)) from None
    error = max(c.error for c in cols.values())
    if error > tolerance(loaded.model) * max(1.0, float(own.abs().max())):
        raise LensError(f"{mid}'s last layer read through its final norm and output layer differs from its own logits "
                        f"by {error:.2g}: it transforms its last state in a way the lens does not know, so the lens "
                        "would not show what the model computes.")
    T = len(enc.ids)
    top_i = torch.stack([cols[t].top_ids for t in range(T)], dim=1)        # (L, T, K)
    top_p = torch.stack([cols[t].top_probs for t in range(T)], dim=1)
    final_p = torch.stack([cols[t].final_prob for t in range(T)], dim=1)  # (L, T)
    rank = torch.stack([cols[t].rank for t in range(T)], dim=1)
    final = [cols[t].final for t in range(T)]
    topk_tokens = tuple(tuple(tuple(adapter.token_strings(row.tolist())) for row in layer) for layer in top_i)
    return LensTrace(model_id=mid, tokens=tuple(enc.tokens),
                     special=tuple(bool(s) for s in (enc.special or (False,) * len(enc.ids))),
                     layers=tuple(n for n, _, _ in states),
                     top_tokens=tuple(tuple(t[0] for t in layer) for layer in topk_tokens),
                     top_probs=top_p[..., 0].numpy(), final_tokens=tuple(adapter.token_strings(final)),
                     final_rank=rank.numpy(), final_prob=final_p.numpy(), topk_tokens=topk_tokens,
                     topk_probs=top_p.numpy(), lens_error=error, notes=tuple(enc.notes),
                     final_ids=tuple(int(i) for i in final))


def probability_of(loaded: Loaded, text: str, ids: tuple[int, ...]) -> np.ndarray:
    """(L, T): the probability the lens of `loaded` gives, after each layer and at each position t of `text`, to the
    token ids[t] (e.g. another model's own predictions there: LensTrace.final_ids). Raises LensError when the text is
    not T tokens for this model or an id is outside its vocabulary."""
    mid = str(getattr(loaded, "id", "model"))
    if (adapter := loaded.caps.lens) is None:
        raise LensError(_no_lens(loaded, mid))
    enc = adapter.encode(text, max_tokens=budget.cap_tokens(loaded.model, MAX_TOKENS, price))
    if len(enc.ids) != len(ids):
        raise LensError(f"{mid} reads the text as {len(enc.ids)} tokens, not {len(ids)}.")
    try:
        rec = adapter.run(enc, names=adapter.lens_names)
        states = adapter.lens_states(rec)
        own = torch.from_numpy(rec["logits"]).float()
        if ids and max(ids) >= own.shape[-1]:
            raise LensError(f"{mid}'s vocabulary has {own.shape[-1]:,} tokens: it has no token {max(ids):,}.")
        cols, _ = _columns(adapter, states, own, list(range(len(ids))), 1, list(ids))
    except Unsupported as exc:
        raise LensError(str(exc)) from None
    return torch.stack([cols[t].final_prob for t in range(len(ids))], dim=1).numpy()
