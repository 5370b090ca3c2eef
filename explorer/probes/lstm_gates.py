"""Inside the recurrent cell: every gate, cell and hidden state of an LSTM / GRU / Elman RNN for one sentence.

The states come from the model's activation record (explorer.adapters.recurrent): recomputed from the model's own
weights with PyTorch's equations and gate order, from zero states, on the tokens the model was trained to read
(`<bos>` first for the built-in LMs and any vocabulary with a beginning-of-sentence token; else the text as is), and
checked against the framework's own module (`GateTrace.max_abs_error`).
The next-token predictions are the model's own logits on that run.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from explorer.adapters.protocols import Loaded
from explorer.adapters.recurrent import DIRS, GATES, STATES
from explorer.adapters.text import unknown_word_id, without_unknown
from explorer.runtime.errors import ViewError

MAX_TOKENS = 512
SATURATION_LOW, SATURATION_HIGH = 0.1, 0.9
SIGMOID_GATES = {"i", "f", "o", "r", "z"}
LABELS = {
    "i": "input gate i", "f": "forget gate f", "g": "candidate g", "o": "output gate o", "c": "cell state c",
    "h": "hidden state h", "r": "reset gate r", "z": "update gate z", "n": "candidate n",
}


class RNNGatesError(ViewError, ValueError):
    """The model cannot be read by this view; str() is a message for the user."""


# ------------------------------------------------------------------------------------------- trace
@dataclass(frozen=True)
class GateTrace:
    """Every state of the recurrent cell for one sentence.

    tokens: (T,) strings; ids: (T,) ints.
    gates: name -> (layers, directions, T, H) float32, names in `names` (LSTM i f g o c h; GRU r z n h; Elman h).
    next_ids / next_probs: (T, k) top-k next tokens after each position (language models; else (T, 0)), a word-level
    vocabulary's unknown-word token left out of them: `unknown_probs` (T,) its probability there (None: no such
    token); next_tokens: their strings. inferred: (what, value) rows (the adapter's describe()); notes: messages for
    the user;
    max_abs_error: max |h_recomputed − h_torch| on the last layer (the framework's own module's output).
    x_part / h_part: (layers, directions, T, G·H) W_ih x_t + b_ih and W_hh h_{t−1} + b_hh, every gate.
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
    special: tuple[bool, ...] = ()
    x_part: np.ndarray | None = None
    h_part: np.ndarray | None = None
    unknown_probs: np.ndarray | None = None
    unknown_token: str = ""

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


def rnn_gates(loaded: Loaded, text: str, max_tokens: int = MAX_TOKENS, top_k: int = 5) -> GateTrace:
    """The model's record for `text`, as it reads it (see GateTrace). Raises RNNGatesError for non-recurrent models."""
    if (adapter := loaded.caps.recurrence) is None:
        raise RNNGatesError(loaded.adapter.reason or f"{loaded.id} has no recurrent layers (nn.RNN / GRU / LSTM) "
                            "to look inside.")
    w = adapter.weights
    enc = adapter.encode(text, max_tokens=max_tokens)
    notes = tuple(w.notes) + tuple(enc.notes)
    H, L, D = w.hidden_size, w.num_layers, w.num_directions
    names = STATES[w.cell]
    if not enc.ids:
        empty = {n: np.zeros((L, D, 0, H), np.float32) for n in names}
        return GateTrace(model_id=str(loaded.id), cell=w.cell, nonlinearity=w.nonlinearity, tokens=(), ids=(),
                         gates=empty, next_ids=np.zeros((0, 0), np.int64), next_probs=np.zeros((0, 0), np.float32),
                         next_tokens=(), inferred=tuple(adapter.describe()), notes=notes, names=names)
    rec = adapter.run(enc)

    def stack(name: str) -> np.ndarray:  # (L, D, T, ...)
        return np.stack([np.stack([rec[f"rnn.{layer}.{DIRS[d]}.{name}"] for d in range(D)]) for layer in range(L)])

    gates = {n: stack(n) for n in names}
    next_ids, next_probs = np.zeros((len(enc), 0), np.int64), np.zeros((len(enc), 0), np.float32)
    unknown, unknown_probs = unknown_word_id(adapter), None
    if "logits" in rec:
        logits = rec["logits"].astype(np.float64)
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        if unknown is not None:  # <unk> is not a word: its probability in a column of its own, not in the ranking
            unknown_probs = p[:, unknown].astype(np.float32)
        k = min(top_k, p.shape[1] - (unknown is not None))
        next_ids = np.argsort(-without_unknown(p, unknown), axis=1, kind="stable")[:, :k]
        next_probs = np.take_along_axis(p, next_ids, axis=1).astype(np.float32)
    next_tokens = tuple(tuple(adapter.token_strings(row)) for row in next_ids.tolist())
    return GateTrace(model_id=str(loaded.id), cell=w.cell, nonlinearity=w.nonlinearity, tokens=tuple(enc.tokens),
                     ids=tuple(enc.ids), gates=gates, next_ids=next_ids, next_probs=next_probs,
                     next_tokens=next_tokens, inferred=tuple(adapter.describe()), notes=notes,
                     truncated=enc.truncated, n_unknown=enc.n_unknown, max_abs_error=float(rec["rnn.max_abs_error"]),
                     names=names, special=tuple(enc.special), x_part=stack("x_part"), h_part=stack("h_part"),
                     unknown_probs=unknown_probs,
                     unknown_token=adapter.token_strings([unknown])[0] if unknown is not None else "")


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
        return np.asarray(values.var(0))
    if by == "mean":
        return np.asarray(values.mean(0))
    if by == "saturation":
        if values.min() >= 0:  # gates in (0, 1)
            return np.asarray(((values < SATURATION_LOW) | (values > SATURATION_HIGH)).mean(0))
        return np.asarray((np.abs(values) > SATURATION_HIGH).mean(0))
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
    start = next((t for t in range(T) if a.ids[t] != b.ids[t]), T)  # what the model reads (ids), not labels
    score = np.abs(diff[start:]).mean(0) if start < T else np.zeros(diff.shape[1], np.float32)
    return Comparison(name, a.tokens[:T], b.tokens[:T], diff, score, start, tuple(notes))


def model_difference(a: GateTrace, b: GateTrace, name: str, layer: int, direction: int = 0
                     ) -> tuple[np.ndarray | None, str]:
    """Model B's state `name` minus model A's on the same sentence, (T, H), with "" — or (None, why) when the two do
    not have the same shape of state there (the tokens they read, the state, its layer, direction or size)."""
    if a.tokens != b.tokens:
        return None, "the two models read the sentence as different tokens"
    if name not in b.gates:
        return None, f"the second model has no {LABELS.get(name, name)}"
    A, B = a.gates[name], b.gates[name]
    if layer >= B.shape[0] or direction >= B.shape[1] or A.shape[-1] != B.shape[-1]:
        return None, f"the two models' states differ in shape ({A.shape[-1]} and {B.shape[-1]} units)"
    return B[layer, direction] - A[layer, direction], ""


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


def cell_terms(trace: GateTrace, layer: int, direction: int, t: int, unit: int) -> CellTerms:
    """The numbers of the equations for token t and unit j, read from the trace's record. Raises RNNGatesError for
    a trace without the equations' parts (x_part, h_part)."""
    if trace.x_part is None or trace.h_part is None:
        raise RNNGatesError(f"{trace.model_id}'s record has no parts of the gates' equations.")
    H = trace.hidden_size
    prev_t = t + 1 if direction else t - 1
    has_prev = 0 <= prev_t < len(trace)
    gate_names = GATES[trace.cell]
    rows = [g * H + unit for g in range(len(gate_names))]
    xp = trace.x_part[layer, direction, t, rows].tolist()
    hp = trace.h_part[layer, direction, t, rows].tolist()
    value = {n: float(trace.gates[n][layer, direction, t, unit]) for n in trace.names}
    prev = {"h": float(trace.gates["h"][layer, direction, prev_t, unit]) if has_prev else 0.0}
    if "c" in trace.gates:
        prev["c"] = float(trace.gates["c"][layer, direction, prev_t, unit]) if has_prev else 0.0
    return CellTerms(trace.cell, trace.nonlinearity, dict(zip(gate_names, xp)), dict(zip(gate_names, hp)), value, prev)


# ------------------------------------------------------------------------------------------- what to notice
@dataclass(frozen=True)
class GateNotice:
    """The numbers behind the view's "what to notice" for one cell (layer, direction).

    From two sentences a and b that differ first at token `start` and next at `end` + 1 (the subject and its verb of
    an agreement pair): `unit`, the unit whose `state` (c for an LSTM, else h) differs most at `end`; `diff_start`,
    `diff_end` its difference (b − a) there; `keep`, the gate that keeps the state (f: LSTM, z: GRU, "": Elman) and
    `keep_mean` its mean in sentence a over the tokens start + 1 … end (None without a gate). From one sentence's trace:
    `saturated` the share of the keeping gate's values below 0.1 or above 0.9 and `steady_units` the units that are
    so on at least 90 % of its tokens (of `units`); `max_c`, `max_h` the largest |c| and |h| (max_c None without c).
    carried is False when the pair gives no such tokens (then the pair's fields are 0)."""

    cell: str
    state: str
    keep: str
    units: int
    carried: bool = False
    unit: int = 0
    start: int = 0
    end: int = 0
    start_token: str = ""
    end_token: str = ""
    diff_start: float = 0.0
    diff_end: float = 0.0
    keep_mean: float | None = None
    saturated: float | None = None
    steady_units: int = 0
    max_c: float | None = None
    max_h: float = 0.0


def gate_notice(trace: GateTrace, a: GateTrace, b: GateTrace, layer: int = 0, direction: int = 0) -> GateNotice:
    """GateNotice of `trace` (the sentence shown) and the pair `a`, `b`."""
    state = "c" if "c" in trace.names else "h"
    keep = "f" if "f" in trace.names else ("z" if "z" in trace.names else "")
    notice = GateNotice(trace.cell, state, keep, trace.hidden_size,
                        max_h=float(np.abs(trace.gates["h"][layer, direction]).max()) if len(trace) else 0.0,
                        max_c=float(np.abs(trace.gates["c"][layer, direction]).max()) if "c" in trace.names and
                        len(trace) else None)
    if keep and len(trace):
        on = (trace.gates[keep][layer, direction] < SATURATION_LOW) | (trace.gates[keep][layer, direction] >
                                                                       SATURATION_HIGH)
        notice = replace(notice, saturated=float(on.mean()), steady_units=int((on.mean(0) >= 0.9).sum()))
    T = min(len(a), len(b))
    differ = [t for t in range(T) if a.ids[t] != b.ids[t]]
    if not differ or state not in a.names or state not in b.names:
        return notice
    start = differ[0]
    end = (differ[1] if len(differ) > 1 else T) - 1
    if end <= start:
        return notice
    diff = b.gates[state][layer, direction, :T] - a.gates[state][layer, direction, :T]  # (T, H)
    unit = int(np.abs(diff[end]).argmax())
    keep_mean = float(a.gates[keep][layer, direction, start + 1:end + 1, unit].mean()) if keep else None
    return replace(notice, carried=True, unit=unit, start=start, end=end, start_token=a.tokens[start],
                   end_token=a.tokens[end], diff_start=float(diff[start, unit]), diff_end=float(diff[end, unit]),
                   keep_mean=keep_mean)
