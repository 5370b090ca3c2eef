"""Inside the recurrent cell: every gate, cell and hidden state of an LSTM / GRU / Elman RNN for one sentence.

The states are recomputed from the model's own weights with PyTorch's equations and gate order
(https://pytorch.org/docs/stable/generated/torch.nn.LSTM.html, ...GRU.html, ...RNN.html), starting from zero
states, and checked against the framework's own module on the same weights (`GateTrace.max_abs_error`).

LSTM (Hochreiter & Schmidhuber 1997; gate order i, f, g, o in the rows of W):
    i = σ(W_ii x + b_ii + W_hi h₋ + b_hi)   f = σ(...)   g = tanh(...)   o = σ(...)
    c = f ⊙ c₋ + i ⊙ g                        h = o ⊙ tanh(c)
GRU (Cho et al. 2014; order r, z, n):
    r = σ(W_ir x + b_ir + W_hr h₋ + b_hr)   z = σ(...)
    n = tanh(W_in x + b_in + r ⊙ (W_hn h₋ + b_hn))   h = (1 − z) ⊙ n + z ⊙ h₋
Elman (1990): h = tanh(W_ih x + b_ih + W_hh h₋ + b_hh)   (or relu)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from explorer.adapters.rnn_state_dict import (
    CellWeights,
    RecurrentInferenceError,
    RecurrentModel,
    recurrent_from_loaded,
)
from explorer.adapters.text import encode

MAX_TOKENS = 512
SATURATION_LOW, SATURATION_HIGH = 0.1, 0.9
SIGMOID_GATES = {"i", "f", "o", "r", "z"}
#: what each cell exposes, in display order
STATES: dict[str, tuple[str, ...]] = {
    "lstm": ("i", "f", "g", "o", "c", "h"),
    "gru": ("r", "z", "n", "h"),
    "rnn": ("h",),
}
LABELS = {
    "i": "input gate i", "f": "forget gate f", "g": "candidate g", "o": "output gate o", "c": "cell state c",
    "h": "hidden state h", "r": "reset gate r", "z": "update gate z", "n": "candidate n",
}


class RNNGatesError(ValueError):
    """The model cannot be read by this view; str() is a message for the user."""


# ------------------------------------------------------------------------------------------- cells
def _split(x: torch.Tensor, n: int) -> tuple[torch.Tensor, ...]:
    return tuple(x.chunk(n, dim=-1))


def lstm_step(gx: torch.Tensor, h: torch.Tensor, c: torch.Tensor, w: CellWeights) -> dict[str, torch.Tensor]:
    """One LSTM step; gx = W_ih x + b_ih (4H,). Returns i, f, g, o, c, h (H,) each."""
    a_i, a_f, a_g, a_o = _split(gx + h @ w.w_hh.T + w.b_hh, 4)
    i, f, g, o = torch.sigmoid(a_i), torch.sigmoid(a_f), torch.tanh(a_g), torch.sigmoid(a_o)
    c = f * c + i * g
    return {"i": i, "f": f, "g": g, "o": o, "c": c, "h": o * torch.tanh(c)}


def gru_step(gx: torch.Tensor, h: torch.Tensor, w: CellWeights) -> dict[str, torch.Tensor]:
    """One GRU step; gx = W_ih x + b_ih (3H,). Returns r, z, n, h."""
    x_r, x_z, x_n = _split(gx, 3)
    h_r, h_z, h_n = _split(h @ w.w_hh.T + w.b_hh, 3)
    r, z = torch.sigmoid(x_r + h_r), torch.sigmoid(x_z + h_z)
    n = torch.tanh(x_n + r * h_n)
    return {"r": r, "z": z, "n": n, "h": (1 - z) * n + z * h}


def elman_step(gx: torch.Tensor, h: torch.Tensor, w: CellWeights, nonlinearity: str = "tanh") -> dict[str, torch.Tensor]:
    """One Elman step; gx = W_ih x + b_ih (H,). Returns h."""
    a = gx + h @ w.w_hh.T + w.b_hh
    return {"h": torch.relu(a) if nonlinearity == "relu" else torch.tanh(a)}


def recompute_direction(cell: str, w: CellWeights, x: torch.Tensor, reverse: bool = False,
                        nonlinearity: str = "tanh") -> dict[str, torch.Tensor]:
    """Run one layer in one direction over x (T, In) from zero state: name -> (T, H) in input order."""
    T, H = x.shape[0], w.w_hh.shape[1]
    gx_all = x @ w.w_ih.T + w.b_ih  # the input half of every gate, for all steps at once
    h = x.new_zeros(H)
    c = x.new_zeros(H)
    steps: list[dict[str, torch.Tensor]] = [{}] * T
    for t in (range(T - 1, -1, -1) if reverse else range(T)):
        if cell == "lstm":
            out = lstm_step(gx_all[t], h, c, w)
            c = out["c"]
        elif cell == "gru":
            out = gru_step(gx_all[t], h, w)
        else:
            out = elman_step(gx_all[t], h, w, nonlinearity)
        h = out["h"]
        steps[t] = out
    return {name: torch.stack([s[name] for s in steps]) if T else x.new_zeros(0, H) for name in STATES[cell]}


def recompute(rec_or_cell: RecurrentModel | str, x: torch.Tensor, layers: list[list[CellWeights]] | None = None,
              nonlinearity: str = "tanh") -> dict[str, torch.Tensor]:
    """Stacked (bidirectional) recurrence over x (T, E): name -> (layers, directions, T, H).

    Layer l+1 reads [h_forward, h_backward] of layer l, as nn.LSTM/GRU/RNN do (no dropout: eval mode).
    """
    if isinstance(rec_or_cell, RecurrentModel):
        cell, layers, nonlinearity = rec_or_cell.cell, rec_or_cell.layers, rec_or_cell.nonlinearity
    else:
        cell = rec_or_cell
    assert layers is not None
    per_layer = []
    inp = x
    for row in layers:
        dirs = [recompute_direction(cell, w, inp, reverse=bool(d), nonlinearity=nonlinearity) for d, w in enumerate(row)]
        per_layer.append(dirs)
        inp = torch.cat([dd["h"] for dd in dirs], dim=-1)
    return {name: torch.stack([torch.stack([dd[name] for dd in dirs]) for dirs in per_layer]) for name in STATES[cell]}


def recompute_lstm(layers: list[list[CellWeights]], x: torch.Tensor) -> dict[str, torch.Tensor]:
    """LSTM states (layers, directions, T, H): i, f, g, o, c, h."""
    return recompute("lstm", x, layers)


def recompute_gru(layers: list[list[CellWeights]], x: torch.Tensor) -> dict[str, torch.Tensor]:
    """GRU states (layers, directions, T, H): r, z, n, h."""
    return recompute("gru", x, layers)


def recompute_elman(layers: list[list[CellWeights]], x: torch.Tensor, nonlinearity: str = "tanh") -> dict[str, torch.Tensor]:
    """Elman RNN states (layers, directions, T, H): h."""
    return recompute("rnn", x, layers, nonlinearity)


def torch_reference(rec: RecurrentModel, x: torch.Tensor) -> torch.Tensor:
    """h of the last layer (T, D*H) from a fresh torch.nn.LSTM/GRU/RNN loaded with the same weights."""
    kwargs = dict(input_size=rec.input_size, hidden_size=rec.hidden_size, num_layers=rec.num_layers,
                  bidirectional=rec.num_directions == 2, batch_first=True)
    if rec.cell == "lstm":
        module = torch.nn.LSTM(**kwargs)
    elif rec.cell == "gru":
        module = torch.nn.GRU(**kwargs)
    else:
        module = torch.nn.RNN(nonlinearity=rec.nonlinearity, **kwargs)
    state = {}
    for layer, row in enumerate(rec.layers):
        for d, w in enumerate(row):
            sfx = f"_l{layer}{'_reverse' if d else ''}"
            state.update({f"weight_ih{sfx}": w.w_ih, f"weight_hh{sfx}": w.w_hh, f"bias_ih{sfx}": w.b_ih,
                          f"bias_hh{sfx}": w.b_hh})
    module.load_state_dict(state)
    module = module.to(x.device).eval()
    out, _ = module(x.unsqueeze(0))
    return out[0]


# ------------------------------------------------------------------------------------------- trace
@dataclass(frozen=True)
class GateTrace:
    """Every state of the recurrent cell for one sentence.

    tokens: (T,) strings; ids: (T,) ints.
    gates: name -> (layers, directions, T, H) float32, names in `names` (LSTM i f g o c h; GRU r z n h; Elman h).
    next_ids / next_probs: (T, k) top-k next tokens after each position (language models; else (T, 0));
    next_tokens: their strings. inferred: (what, value) rows; notes: messages for the user;
    max_abs_error: max |h_recomputed − h_torch| on the last layer (torch module with the same weights).
    """

    model_id: str
    cell: str
    nonlinearity: str
    tokens: tuple[str, ...]
    ids: tuple[int, ...]
    gates: dict[str, np.ndarray]
    next_ids: np.ndarray
    next_probs: np.ndarray
    next_tokens: tuple[tuple[str, ...], ...]
    inferred: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()
    truncated: bool = False
    n_unknown: int = 0
    max_abs_error: float = 0.0
    names: tuple[str, ...] = field(default=())

    @property
    def num_layers(self) -> int:
        return int(self.gates["h"].shape[0]) if self.gates else 0

    @property
    def num_directions(self) -> int:
        return int(self.gates["h"].shape[1]) if self.gates else 0

    @property
    def hidden_size(self) -> int:
        return int(self.gates["h"].shape[3]) if self.gates else 0

    def __len__(self) -> int:
        return len(self.tokens)


def read_model(loaded: Any) -> RecurrentModel:
    """The recurrent weights of `loaded`, or RNNGatesError with what was expected."""
    try:
        return recurrent_from_loaded(loaded)
    except RecurrentInferenceError as exc:
        raise RNNGatesError(str(exc)) from None


def rnn_gates(loaded: Any, text: str, max_tokens: int = MAX_TOKENS, top_k: int = 5) -> GateTrace:
    """Encode `text` with the model's vocabulary and recompute every gate; see GateTrace."""
    rec = read_model(loaded)
    enc = encode(loaded, text, max_tokens=max_tokens)
    notes = tuple(rec.notes) + tuple(enc.notes)
    H, L, D = rec.hidden_size, rec.num_layers, rec.num_directions
    names = STATES[rec.cell]
    vocab = (getattr(loaded, "vocabs", {}) or {}).get("vocab")
    if not enc.ids:
        empty = {n: np.zeros((L, D, 0, H), np.float32) for n in names}
        return GateTrace(str(loaded.id), rec.cell, rec.nonlinearity, (), (), empty, np.zeros((0, 0), np.int64),
                         np.zeros((0, 0), np.float32), (), tuple(rec.inferred), notes, names=names)
    with torch.inference_mode():
        ids = torch.tensor(enc.ids, dtype=torch.long, device=rec.embedding.device)
        x = rec.embedding[ids]                                  # (T, E)
        states = recompute(rec, x)                              # name -> (L, D, T, H)
        h_last = torch.cat(list(states["h"][-1]), dim=-1)       # (T, D*H)
        error = float((h_last - torch_reference(rec, x)).abs().max())
        next_ids, next_probs = _next_tokens(rec, h_last, top_k)
    gates = {n: states[n].float().cpu().numpy() for n in names}
    next_tokens = tuple(tuple(vocab.decode(row) if vocab is not None else [str(i) for i in row]) for row in next_ids.tolist())
    return GateTrace(str(loaded.id), rec.cell, rec.nonlinearity, tuple(enc.tokens), tuple(enc.ids), gates,
                     next_ids, next_probs, next_tokens, tuple(rec.inferred), notes, enc.truncated, enc.n_unknown,
                     error, names)


def _next_tokens(rec: RecurrentModel, h_last: torch.Tensor, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-k softmax(W_out h + b) after each position; empty (T, 0) for non-LMs and bidirectional models."""
    T = h_last.shape[0]
    if rec.output_weight is None or rec.num_directions != 1:
        return np.zeros((T, 0), np.int64), np.zeros((T, 0), np.float32)
    logits = h_last @ rec.output_weight.T
    if rec.output_bias is not None:
        logits = logits + rec.output_bias
    probs, idx = torch.softmax(logits.float(), dim=-1).topk(min(k, logits.shape[-1]), dim=-1)
    return idx.cpu().numpy(), probs.cpu().numpy().astype(np.float32)


# ---------------------------------------------------------------------------------- unit analysis
def saturation(trace: GateTrace, layer: int, direction: int = 0) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Karpathy et al. (2015): per sigmoid gate, per unit, the fraction of tokens with gate < 0.1 (left) and
    > 0.9 (right). name -> (left (H,), right (H,))."""
    out = {}
    for name in trace.names:
        if name in SIGMOID_GATES and len(trace):
            a = trace.gates[name][layer, direction]
            out[name] = ((a < SATURATION_LOW).mean(0), (a > SATURATION_HIGH).mean(0))
    return out


SORTS = ("variance", "mean", "saturation", "index")


def unit_scores(values: np.ndarray, by: str) -> np.ndarray:
    """Score per unit of a (T, H) array: variance over tokens, mean, saturation (fraction of tokens within
    0.1 of the range's ends: |v| > 0.9 for tanh states, v < 0.1 or > 0.9 for gates), or -index."""
    if values.shape[0] == 0 or by == "index":
        return -np.arange(values.shape[1], dtype=np.float64)
    if by == "variance":
        return values.var(0)
    if by == "mean":
        return values.mean(0)
    if by == "saturation":
        if values.min() >= 0:  # gates in (0, 1)
            return ((values < SATURATION_LOW) | (values > SATURATION_HIGH)).mean(0)
        return (np.abs(values) > SATURATION_HIGH).mean(0)
    raise ValueError(f"unknown sort {by!r}; use one of {SORTS}")


def unit_order(values: np.ndarray, by: str = "variance", top_n: int | None = None) -> np.ndarray:
    """Unit indices of a (T, H) array, highest score first (stable: ties keep index order), first top_n."""
    order = np.argsort(-unit_scores(values, by), kind="stable")
    return order[:top_n] if top_n else order


@dataclass(frozen=True)
class Comparison:
    """B − A of one state at aligned positions. diff: (T, H) with T = min(T_a, T_b); score: (H,) mean |diff|
    from the first position where the sentences differ (`start`) on; tokens_a / tokens_b: (T,)."""

    name: str
    tokens_a: tuple[str, ...]
    tokens_b: tuple[str, ...]
    diff: np.ndarray
    score: np.ndarray
    start: int
    notes: tuple[str, ...] = ()

    @property
    def order(self) -> np.ndarray:
        """Units by decreasing score (stable)."""
        return np.argsort(-self.score, kind="stable")


def compare(a: GateTrace, b: GateTrace, name: str, layer: int, direction: int = 0) -> Comparison:
    """Difference of state `name` between two sentences, position by position (to find e.g. number units)."""
    T = min(len(a), len(b))
    notes = []
    if len(a) != len(b):
        notes.append(f"The sentences have {len(a)} and {len(b)} tokens; positions 0..{T - 1} are compared.")
    diff = b.gates[name][layer, direction, :T] - a.gates[name][layer, direction, :T]
    start = next((t for t in range(T) if a.tokens[t] != b.tokens[t]), T)
    score = np.abs(diff[start:]).mean(0) if start < T else np.zeros(diff.shape[1], np.float32)
    return Comparison(name, a.tokens[:T], b.tokens[:T], diff, score, start, tuple(notes))


# -------------------------------------------------------------------------------------- equations
@dataclass(frozen=True)
class CellTerms:
    """The numbers of the cell's equations for one token t and unit j.

    x_part[g] = (W_i· x_t + b_i·)_j, h_part[g] = (W_h· h_{t−1} + b_h·)_j for each gate g; value[name] = the
    state at t; prev = {"h": h_{t−1,j}, "c": c_{t−1,j}} (zero before the first token; the previous token is
    t+1 for the backward direction).
    """

    cell: str
    nonlinearity: str
    x_part: dict[str, float]
    h_part: dict[str, float]
    value: dict[str, float]
    prev: dict[str, float]


def cell_terms(loaded: Any, trace: GateTrace, layer: int, direction: int, t: int, unit: int) -> CellTerms:
    """Fill the equations for token t and unit j from the model's weights and the trace's states."""
    rec = read_model(loaded)
    w = rec.layers[layer][direction]
    H = rec.hidden_size
    prev_t = t + 1 if direction else t - 1
    has_prev = 0 <= prev_t < len(trace)
    with torch.inference_mode():
        dev = w.w_ih.device
        if layer == 0:
            x_t = rec.embedding[trace.ids[t]]
        else:
            x_t = torch.from_numpy(np.concatenate([trace.gates["h"][layer - 1, d, t] for d in range(rec.num_directions)])).to(dev)
        h_prev = torch.from_numpy(trace.gates["h"][layer, direction, prev_t]).to(dev) if has_prev else torch.zeros(H, device=dev)
        rows = [g * H + unit for g in range(len(rec.gate_names))]
        xp = (w.w_ih[rows] @ x_t + w.b_ih[rows]).tolist()
        hp = (w.w_hh[rows] @ h_prev + w.b_hh[rows]).tolist()
    names = rec.gate_names
    value = {n: float(trace.gates[n][layer, direction, t, unit]) for n in trace.names}
    prev = {"h": float(h_prev[unit])}
    if "c" in trace.gates:
        prev["c"] = float(trace.gates["c"][layer, direction, prev_t, unit]) if has_prev else 0.0
    return CellTerms(rec.cell, rec.nonlinearity, dict(zip(names, xp)), dict(zip(names, hp)), value, prev)
