"""Gradients through time: how far back a recurrent language model's prediction can reach (vanishing gradients).

For a sentence x_0 … x_{T−1} (as fed, <bos> first for the built-in LMs) and its last word w predicted at the last
position, with the network's own recurrence (autograd through its nn.RNN/GRU/LSTM):
  input_grad (T,)        ‖∂ log p(w | x_0 … x_{T−1}) / ∂x_t‖₂ for each input embedding x_t
  distance (T,)          (T − 1) − t: how many steps before the prediction x_t was read
  step_norms (T − 1,)    ‖∂s_t / ∂s_{t−1}‖₂ (largest singular value) of the full recurrent state s (h; with c for an
                         LSTM; every layer), along this sentence's own trajectory, t = 1 … T − 1
  products (T,)          ∏ of step_norms from t + 1 to T − 1 (1 at the last step): the bound the chain rule gives on
                         how much of a change at step t survives to the prediction
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.sparse.linalg import svds
import torch

from explorer.adapters.protocols import Loaded
from explorer.adapters.recurrent import state_step
from explorer.runtime.prefix_memo import PrefixMemo, prefix_memo
from explorer.runtime.errors import ViewError

MAX_TOKENS = 80


class GradientError(ViewError, ValueError):
    """The model has no recurrence or no output layer to differentiate; str() is for the user."""

    alert = "info"


@dataclass(frozen=True)
class GradientTrace:
    """How far back the prediction of `target` after T inputs reaches (the module docstring has the definitions).

    tokens (T,): the inputs, the target excluded; input_grad (T,), distance (T,), products (T,); step_norms (T − 1,);
    log_prob: log p(target | tokens), the model's own."""

    model_id: str
    cell: str
    tokens: tuple[str, ...]
    target: str
    log_prob: float
    input_grad: np.ndarray
    distance: np.ndarray
    step_norms: np.ndarray
    products: np.ndarray
    notes: tuple[str, ...] = ()

    @property
    def prob(self) -> float:
        return float(np.exp(self.log_prob))

    @property
    def decay(self) -> float:
        """input_grad at the farthest input ÷ at the nearest (how much of the signal reaches back)."""
        return float(self.input_grad[0] / self.input_grad[-1]) if self.input_grad[-1] > 0 else 0.0


def left_out_notes(ids: list[str], kinds: dict[str, str], kept: list[str]) -> list[str]:
    """The message for each model id the view was asked for (?models=) but cannot read, by name and kind.

    kinds: model id -> what it is in words (explorer.loading.catalogue.FAMILIES: "Transformer decoder (causal LM)",
    ...), for the ids that are known here; kept: the asked ids that the view shows."""
    shown = f"showing {', '.join(kept)}" if kept else "showing the built-in recurrent models instead"
    notes = []
    for mid in ids:
        kind = kinds.get(mid)
        what = (f"{mid} holds {kind.lower()}" if kind.endswith("s") else f"{mid} is a {kind}") if kind else \
            f"{mid} is not a recurrent model available here"
        notes.append(f"{what}: gradients through time are computed for recurrent models (the built-in RNN, GRU and "
                     f"LSTM language models, or a recurrent state dict), whose gradient flows back through one "
                     f"state update per word; it is left out, {shown}.")
    return notes


def spectral_norm(J: np.ndarray) -> float:
    """‖J‖₂, the largest singular value of an (S, S) matrix: ARPACK's Lanczos iteration (scipy svds, k = 1, from a
    fixed start), in float64; ~5x faster than a full SVD for the LSTM's 512 × 512 Jacobians (equal to
    torch.linalg.matrix_norm(J, 2) to 1e-9 relative, tests/test_probe_gradients_through_time.py)."""
    if min(J.shape) < 3:
        return float(np.linalg.norm(J, 2))
    return float(svds(J, k=1, v0=np.ones(J.shape[1]), return_singular_vectors=False)[0])


def gradients_through_time(loaded: Loaded, text: str) -> GradientTrace:
    """See the module docstring. Raises GradientError."""
    adapter, mid = loaded.caps.recurrence, str(getattr(loaded, "id", "model"))
    if adapter is None:
        raise GradientError(f"{mid} has no recurrence to differentiate through time: pick a recurrent language model "
                            "(builtin:rnn-lm, gru-lm, lstm-lm, or your own nn.RNN/GRU/LSTM state dict).")
    net, dev = adapter.net, adapter.device
    if not adapter.can_generate or net.decoder is None:
        raise GradientError(f"{mid} has no output layer over its vocabulary (or reads both directions): there is no "
                            "prediction to differentiate.")
    enc = adapter.encode(text, max_tokens=MAX_TOKENS)
    if len(enc.ids) < 3:
        raise GradientError(" ".join(enc.notes) or "Type a sentence of at least two words.")
    ids = torch.tensor(list(enc.ids), dtype=torch.long, device=dev)
    x = net.embedding(ids[:-1]).detach().float().requires_grad_(True)           # (T, E): inputs, target excluded
    out, _ = net.rnn(x[None])
    logp = torch.log_softmax(net.decoder(out[0, -1]).float(), dim=-1)[ids[-1]]
    (grad,) = torch.autograd.grad(logp, x)
    if getattr(adapter.weights, "num_directions", 1) != 1:
        raise GradientError(f"{mid} reads in both directions: its prediction has no single past to go back through.")
    weights = adapter.weights
    lstm = weights.cell == "lstm"
    state = torch.zeros((2 if lstm else 1) * weights.num_layers * weights.hidden_size, device=dev)
    # norm k = ‖∂s_{k+1}/∂s_k‖ reads only x_0 … x_{k+1}: kept in the model's prefix memo under those ids, so
    # typing on at the end of the sentence computes only the new steps' Jacobians (their SVDs are most of the cost)
    memo: PrefixMemo[float] = prefix_memo(adapter, "gradients")
    keys = [tuple(enc.ids[:k + 2]) for k in range(x.shape[0] - 1)]
    norms = [memo.get(key) for key in keys]
    todo = [k for k, norm in enumerate(norms) if norm is None]
    if todo:
        with torch.no_grad():
            xs = x.detach()
            states = [state_step(weights, state, xs[0])]                           # s_0 … s_{last needed}
            for t in range(1, todo[-1] + 1):
                states.append(state_step(weights, states[-1], xs[t]))
            at, inputs = torch.stack([states[k] for k in todo]), xs[[k + 1 for k in todo]]
            # the needed steps' Jacobians ∂s_{k+1}/∂s_k: (K, S, S); vectorised over the steps for a small state (the
            # Elman and GRU LMs: 2x faster), step by step for a large one (the LSTM's 512: vmap is 1.6x slower there)
            step_jacobian = torch.func.jacrev(state_step, argnums=1)
            if state.numel() <= 256:
                J = torch.func.vmap(step_jacobian, in_dims=(None, 0, 0))(weights, at, inputs)
            else:
                J = torch.stack([step_jacobian(weights, s, u) for s, u in zip(at, inputs)])
        for k, j in zip(todo, J.detach().cpu().double().numpy()):
            norms[k] = norm = spectral_norm(j)
            memo.put(keys[k], norm)
    norms_a = np.array(norms, dtype=np.float64)
    products = np.append(np.cumprod(norms_a[::-1])[::-1], 1.0)                  # (T,): ∏_{u=t+1}^{T−1}
    T = x.shape[0]
    cell = {"lstm": "LSTM", "gru": "GRU"}.get(weights.cell, "Elman RNN")
    return GradientTrace(model_id=mid, cell=cell, tokens=tuple(enc.tokens[:-1]), target=enc.tokens[-1],
                         log_prob=float(logp.detach()),
                         input_grad=grad.norm(dim=-1).detach().cpu().numpy().astype(np.float64),
                         distance=np.arange(T - 1, -1, -1), step_norms=norms_a, products=products,
                         notes=tuple(enc.notes))
