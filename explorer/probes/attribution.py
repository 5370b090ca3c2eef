"""Token attribution: how much each input token's embedding moves the logit of an output token.

For an output token y at position p, f(E) = logit_p,y(E) with E (N, C) the input token embeddings (as the model
adds them; position vectors are added by the model itself and are not attributed):
  gradient × input   a_i = Σ_c ∂f/∂E_ic · E_ic
  integrated grads   a_i = Σ_c E_ic · (1/m) Σ_k ∂f/∂E_ic (α_k E),  α_k = (k − ½)/m   (Sundararajan et al. 2017, with
                     the zero embedding as baseline and a midpoint Riemann sum of m steps)
Completeness: Σ_i a_i (IG) ≈ f(E) − f(0); the trace keeps the error |Σ_i a_i − (f(E) − f(0))| per output.

`attribution(loaded, text, target="", steps=32)` -> AttributionTrace:
  inputs (N,), segment (N,) 0 (1: the decoder inputs of an encoder-decoder); outputs (M,) the tokens attributed:
  for a decoder or RNN LM every next token of the text and the model's own prediction after it; for an
  encoder-decoder each output token (the model's greedy output, or `target`) onto the source and the previous
  targets; position (M,) the logit row read; gradient_x_input, integrated (M, N) (0 where an input cannot reach
  that output); logit, baseline_logit, completeness (M,).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from explorer import generation as G
from explorer.adapters.base import Unsupported
from explorer.adapters.text import no_text
from explorer.prefix_memo import prefix_memo

STEPS = 32
MAX_INPUTS = 64
MAX_OUTPUTS = 40


class AttributionError(ValueError):
    """The model cannot be attributed (no output layer, empty input); str() is for the user."""


@dataclass(frozen=True)
class AttributionTrace:
    model_id: str
    inputs: tuple[str, ...]
    segment: tuple[int, ...]
    outputs: tuple[str, ...]
    position: tuple[int, ...]
    gradient_x_input: np.ndarray
    integrated: np.ndarray
    logit: np.ndarray
    baseline_logit: np.ndarray
    completeness: np.ndarray
    steps: int
    baseline: str
    predicted: bool  # the last output is the model's own next-token prediction, not a token of the text
    reach: tuple[int, ...] = ()  # (M,) how many inputs (the first ones) can influence each output
    notes: tuple[str, ...] = ()

    @property
    def max_completeness(self) -> float:
        return float(self.completeness.max()) if self.completeness.size else 0.0


def _attribute_rows(F: Any, E: torch.Tensor, steps: int, reaches: list[int]) -> list[tuple]:
    """Per output row r: (gradient × input (N,), integrated gradients (N,), F(E)[r], F(0)[r], reach_r), for
    F: (B, N, C) embeddings -> (B, R) logits of the R outputs. One forward over the path's m midpoints and E itself
    (m + 1, N, C) serves every row, and each row takes one backward pass through the kept graph: the batch items
    are independent, so its gradient at E is the last item's and the path's are the others'."""
    alphas = torch.cat([(torch.arange(steps, dtype=E.dtype, device=E.device) + 0.5) / steps,
                        torch.ones(1, dtype=E.dtype, device=E.device)])            # (m + 1,): midpoints, then 1
    path = (alphas[:, None, None] * E.detach()[None]).requires_grad_(True)         # (m + 1, N, C)
    out = F(path)                                                                  # (m + 1, R)
    with torch.no_grad():
        zeros = F(torch.zeros_like(E)[None])[0]
    rows = []
    R = len(reaches)
    for r, reach in enumerate(reaches):
        (grads,) = torch.autograd.grad(out[:, r].sum(), path, retain_graph=r < R - 1)
        gxi = (grads[-1] * E).sum(-1).detach().cpu().numpy()
        ig = (grads[:-1].mean(0) * E).sum(-1).detach().cpu().numpy()
        gxi[reach:], ig[reach:] = 0.0, 0.0  # later inputs cannot reach this output (their gradient is 0 anyway)
        rows.append((gxi, ig, float(out[-1, r].detach()), float(zeros[r]), reach))
    return rows


def _causal_rows(adapter: Any, E: torch.Tensor, ids: list[int], positions: list[int], targets: list[int],
                 steps: int) -> list[tuple]:
    """_attribute_rows of the outputs at `positions` (their next tokens `targets`) of a left-to-right model, E (N, C).

    The row at position p reads only the inputs 0 … p, so it is kept in the model's prefix memo under those ids (with
    its target and the steps) and only the rows whose prefix changed are computed, on the inputs they read: typing
    one more word costs one or two rows, not N. A model that does not generate (it may read both ways) has no memo.
    """
    N = E.shape[0]
    memo = prefix_memo(adapter, "attribution") if adapter.can_generate else None
    keys = [(steps, tuple(ids[:p + 1]), t) for p, t in zip(positions, targets)]
    rows = [memo.get(key) if memo is not None else None for key in keys]
    todo = [i for i, row in enumerate(rows) if row is None]
    if todo:
        dev = E.device
        pos_t = torch.tensor([positions[i] for i in todo], device=dev)
        tgt_t = torch.tensor([targets[i] for i in todo], device=dev)
        reads = positions[todo[-1]] + 1  # the inputs the last of these rows reads (positions increase)
        new = _attribute_rows(lambda e: adapter.logits_from_embeddings(e)[:, pos_t, tgt_t], E[:reads], steps,
                              [positions[i] + 1 for i in todo])
        for i, (gxi, ig, value, zero, reach) in zip(todo, new):
            rows[i] = (gxi[:reach].copy(), ig[:reach].copy(), value, zero, reach)
            if memo is not None:
                memo.put(keys[i], rows[i])
    return [(np.pad(gxi, (0, N - reach)), np.pad(ig, (0, N - reach)), value, zero, reach)
            for gxi, ig, value, zero, reach in rows]


def attribution(loaded: Any, text: str, target: str = "", steps: int = STEPS) -> AttributionTrace:
    """See the module docstring. Raises AttributionError."""
    adapter, mid = loaded.adapter, str(getattr(loaded, "id", "model"))
    steps = int(min(max(int(steps), 1), 256))
    enc = adapter.encode(text, max_tokens=MAX_INPUTS)
    if not enc.ids:
        raise AttributionError(" ".join(enc.notes) or "Type a sentence.")
    notes = list(enc.notes)
    dev = adapter.device
    ids = torch.tensor(list(enc.ids), dtype=torch.long, device=dev)
    try:
        if adapter.is_encoder_decoder:
            return _seq2seq(adapter, mid, enc, ids, target, steps, notes)
        E = adapter.embed_ids(ids).detach().float()
        with torch.no_grad():
            own = adapter.logits_from_embeddings(E[None])[0]
    except Unsupported as exc:
        raise AttributionError(str(exc)) from None
    N = len(ids)
    positions = list(range(max(0, N - 1 - MAX_OUTPUTS), N))
    if len(positions) < N:
        notes.append(f"Only the last {MAX_OUTPUTS} output positions are attributed.")
    targets = [int(ids[p + 1]) for p in positions[:-1]] + [int(own[-1].argmax())]
    rows = _causal_rows(adapter, E, list(enc.ids), positions, targets, steps)
    outputs = tuple(enc.tokens[p + 1] for p in positions[:-1]) + tuple(adapter.token_strings(targets[-1:]))
    return _trace(mid, tuple(enc.tokens), (0,) * N, outputs, tuple(positions), rows,
                  steps, True, notes)


def _seq2seq(adapter: Any, mid: str, enc: Any, ids: torch.Tensor, target: str, steps: int,
             notes: list[str]) -> AttributionTrace:
    dev = adapter.device
    if no_text(target or "") is None:
        out = adapter.encode(target, side="target")
        notes += list(out.notes)
        out_ids = list(out.ids)
    else:
        start = torch.tensor([adapter.decoder_start], dtype=torch.long, device=dev)
        out_ids = G.sample(adapter, ids[None], start, G.Strategy("greedy"), MAX_OUTPUTS)[0][0]
    if not out_ids:
        raise AttributionError("The output is empty: type a target or a source the model can translate.")
    dec = torch.tensor([*adapter.decoder_start, *out_ids[:-1]], dtype=torch.long, device=dev)
    S, T = len(ids), len(dec)
    E = torch.cat([adapter.embed_ids(ids).detach(), adapter.embed_ids(dec, side="target").detach()]).float()

    def logits(e: torch.Tensor) -> torch.Tensor:
        return adapter.logits_from_embeddings(e[:, :S], e[:, S:])

    t_idx, y_idx = torch.arange(T, device=dev), torch.tensor(out_ids, device=dev)
    rows = _attribute_rows(lambda e: logits(e)[:, t_idx, y_idx], E, steps, [S + t + 1 for t in range(T)])
    inputs = tuple(enc.tokens) + tuple(adapter.sequence_strings(dec.tolist()))
    return _trace(mid, inputs, (0,) * S + (1,) * T, tuple(adapter.sequence_strings(out_ids)), tuple(range(T)), rows,
                  steps, False, notes)


def _trace(mid: str, inputs: tuple[str, ...], segment: tuple[int, ...], outputs: tuple[str, ...],
           positions: tuple[int, ...], rows: list, steps: int, predicted: bool, notes: list[str]) -> AttributionTrace:
    gxi, ig, value, zero, reach = (np.array(x) for x in zip(*rows))
    return AttributionTrace(mid, inputs, segment, outputs, positions, gxi.astype(np.float32), ig.astype(np.float32),
                            value, zero, np.abs(ig.sum(1) - (value - zero)), steps, "the zero embedding", predicted,
                            tuple(int(r) for r in reach), tuple(dict.fromkeys(notes)))
