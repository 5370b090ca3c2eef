"""Recurrent language models: embedding -> stacked nn.RNN/GRU/LSTM -> optional output layer.

Two sources, one adapter (`RecurrentAdapter`):
  * an explorer RNNLanguageModel (family "rnn-lm": `.embedding`, `.rnn`, `.decoder`);
  * a bare user state dict (family "state-dict") whose architecture is read from key names and tensor shapes:
    PyTorch names recurrent weights `<prefix>weight_ih_l{k}[_reverse]`, `weight_hh_l{k}`, `bias_ih_l{k}`,
    `bias_hh_l{k}`, stacking the gates in the rows (LSTM i, f, g, o; GRU r, z, n; Elman one block), so
    `weight_hh_l0.shape == (G * H, H)` tells the cell (G = 4, 3 or 1) and the hidden size H. The adapter builds a
    `RecurrentNet` from those tensors once, at load time: the state dict then runs (and generates) like a model.

Tied input/output embeddings are read either way they are saved: both keys holding the same tensor
(torch.save), or the output layer's bias alone (safetensors' save_model keeps one name of a shared tensor).

`run` feeds `<bos>` + sentence when the vocabulary has a beginning-of-sentence token (the built-in LMs were trained
on `<bos> sentence <eos>`; explorer.data.vocab recognises `<s>`, `[CLS]`, `<sos>`, ...), else the sentence as is,
runs the network's own forward once (logits, last-layer output), and recomputes every
gate of every layer from the weights with PyTorch's equations and gate order
(https://pytorch.org/docs/stable/generated/torch.nn.LSTM.html, ...GRU.html, ...RNN.html), from zero states:

LSTM (Hochreiter & Schmidhuber 1997): i = σ(W_ii x + b_ii + W_hi h₋ + b_hi), f, g = tanh(...), o;
    c = f ⊙ c₋ + i ⊙ g, h = o ⊙ tanh(c)
GRU (Cho et al. 2014): r = σ(...), z = σ(...), n = tanh(W_in x + b_in + r ⊙ (W_hn h₋ + b_hn)), h = (1 − z) ⊙ n + z ⊙ h₋
Elman (1990): h = tanh(W_ih x + b_ih + W_hh h₋ + b_hh) (or relu)

`rnn.max_abs_error` is max |h_recomputed − h_module| over the last layer (the module's own output).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Mapping, Protocol, Sequence, cast

import torch
import torch.nn as nn

from explorer.adapters.base import Acts, Adapter, Names, Record, Table, Unsupported, wants
from explorer.adapters.task_head import TASKS, TaskHead, label_names, task_settings
from explorer.models.rnn_classifier import POOLINGS, RNNClassifier, pool
from explorer.adapters.interventions import BlockCall, Layout, Metric, Patch, PatchedRun, by_site
from explorer.adapters.text import Encoded, VocabText, input_convention
from explorer.data.vocab import Vocab
from explorer.files.state_dicts import describe as describe_tensors
from explorer.models.rnn_lm import Hidden, RNNLanguageModel

GATES: dict[str, tuple[str, ...]] = {"lstm": ("i", "f", "g", "o"), "gru": ("r", "z", "n"), "rnn": ("h",)}
STATES: dict[str, tuple[str, ...]] = {"lstm": ("i", "f", "g", "o", "c", "h"), "gru": ("r", "z", "n", "h"),
                                      "rnn": ("h",)}
CELL_NAMES = {"lstm": "LSTM", "gru": "GRU", "rnn": "Elman RNN"}
DIRS = ("fwd", "bwd")
_N_GATES = {4: "lstm", 3: "gru", 1: "rnn"}
_MODES = {"LSTM": ("lstm", "tanh"), "GRU": ("gru", "tanh"), "RNN_TANH": ("rnn", "tanh"), "RNN_RELU": ("rnn", "relu")}
_RNN_KEY = re.compile(r"^(?P<prefix>.*?)(?P<kind>weight_ih|weight_hh|bias_ih|bias_hh|weight_hr)"
                      r"_l(?P<layer>\d+)(?P<rev>_reverse)?$")
_EMB_HINTS = ("emb", "embed", "wte", "word", "lookup", "encoder.weight", "tok")
_OUT_HINTS = ("decoder", "fc", "out", "head", "proj", "linear", "classifier", "lm", "logit", "softmax", "dense")


class RecurrentInferenceError(Unsupported):
    """The weights cannot be read as an embedding + nn.RNN/GRU/LSTM (+ output layer); str() says why."""


@dataclass(frozen=True)
class CellWeights:
    """One layer and direction: W_ih (G*H, In), W_hh (G*H, H), b_ih (G*H,), b_hh (G*H,) (zeros if bias=False)."""

    w_ih: torch.Tensor
    w_hh: torch.Tensor
    b_ih: torch.Tensor
    b_hh: torch.Tensor


@dataclass
class RecurrentWeights:
    """cell: "lstm" | "gru" | "rnn"; layers[l][d]: CellWeights (d = 0 forward, 1 backward), float32.

    embedding: (V, E), read from `embedding_key`; output_weight: (V_out, D*H) and output_bias: (V_out,) or None.
    inferred: (what, value) rows describing what was read, for the page; notes: messages for the user.
    """

    cell: str
    nonlinearity: str
    layers: list[list[CellWeights]]
    embedding: torch.Tensor | None  # None: the recurrence alone (a seq2seq encoder read for its gates)
    output_weight: torch.Tensor | None = None
    output_bias: torch.Tensor | None = None
    inferred: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    embedding_key: str = "embedding.weight"
    head_weight: torch.Tensor | None = None  # (C, D*H): a classifier's or tagger's head instead of an output layer
    head_bias: torch.Tensor | None = None  # (C,)
    head_key: str = ""

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @property
    def num_directions(self) -> int:
        return len(self.layers[0])

    @property
    def hidden_size(self) -> int:
        return int(self.layers[0][0].w_hh.shape[1])

    @property
    def input_size(self) -> int:
        return int(self.layers[0][0].w_ih.shape[1])


# ------------------------------------------------------------------------------------------- the cells
def cell_step(cell: str, gx: torch.Tensor, gh: torch.Tensor, h: torch.Tensor, c: torch.Tensor,
              nonlinearity: str = "tanh") -> dict[str, torch.Tensor]:
    """One step from gx = W_ih x_t + b_ih and gh = W_hh h₋ + b_hh (G·H each), h₋ and (LSTM) c₋ (H,):
    name -> (H,) for every gate and state of the module docstring's equations (PyTorch's gate order)."""
    if cell == "lstm":
        a_i, a_f, a_g, a_o = (gx + gh).chunk(4, dim=-1)
        i, f, g, o = torch.sigmoid(a_i), torch.sigmoid(a_f), torch.tanh(a_g), torch.sigmoid(a_o)
        c = f * c + i * g
        return {"i": i, "f": f, "g": g, "o": o, "c": c, "h": o * torch.tanh(c)}
    if cell == "gru":  # r and z from the sums; n adds r ⊙ (the recurrent half) only
        (x_r, x_z, x_n), (h_r, h_z, h_n) = gx.chunk(3, dim=-1), gh.chunk(3, dim=-1)
        r, z = torch.sigmoid(x_r + h_r), torch.sigmoid(x_z + h_z)
        n = torch.tanh(x_n + r * h_n)
        return {"r": r, "z": z, "n": n, "h": (1 - z) * n + z * h}
    return {"h": torch.relu(gx + gh) if nonlinearity == "relu" else torch.tanh(gx + gh)}


Edit = Callable[[int, dict[str, torch.Tensor]], dict[str, torch.Tensor]]  # (step t, its states) -> them, changed


def direction_steps(cell: str, w: CellWeights, x_part: torch.Tensor, reverse: bool = False,
                    nonlinearity: str = "tanh", edit: Edit | None = None) -> list[dict[str, torch.Tensor]]:
    """One layer, one direction from zero state, given x_part (..., T, G·H) = x W_ih^T + b_ih: T steps in input
    order, each name -> (..., H) for every gate and state, plus h_part (..., G·H) = h₋ W_hh^T + b_hh. `edit` may
    replace a step's states (e.g. an intervention's patch) before the next step reads them."""
    T, H = x_part.shape[-2], w.w_hh.shape[1]
    h = c = x_part.new_zeros(*x_part.shape[:-2], H)
    steps: list[dict[str, torch.Tensor]] = [{}] * T
    for t in (range(T - 1, -1, -1) if reverse else range(T)):
        gh = h @ w.w_hh.T + w.b_hh
        out = cell_step(cell, x_part[..., t, :], gh, h, c, nonlinearity)
        if edit is not None:
            out = edit(t, out)
        h, c = out["h"], out.get("c", c)
        steps[t] = {**out, "h_part": gh}
    return steps


def recompute_direction(cell: str, w: CellWeights, x: torch.Tensor, reverse: bool = False,
                        nonlinearity: str = "tanh") -> dict[str, torch.Tensor]:
    """One layer, one direction over x (T, In) from zero state: name -> (T, H) in input order, plus
    x_part / h_part (T, G*H), the input and recurrent halves of every gate's pre-activation."""
    T, H = x.shape[0], w.w_hh.shape[1]
    x_part = x @ w.w_ih.T + w.b_ih  # the input half of every gate, for all steps at once
    steps = direction_steps(cell, w, x_part, reverse, nonlinearity)
    names = STATES[cell] + ("h_part",)
    got = {n: torch.stack([s[n] for s in steps]) if T else x.new_zeros(0, w.w_hh.shape[0] if n == "h_part" else H)
           for n in names}
    got["x_part"] = x_part
    return got


def state_step(weights: RecurrentWeights, state: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The whole network's recurrent state one step on: state (S,) = [h of every layer; c of every layer for an
    LSTM] (S = L·H or 2·L·H, forward direction), x (E,) -> the next state (S,). Plain tensor operations (so that
    torch.func can take its Jacobian), the same equations as the module."""
    L, H, lstm = weights.num_layers, weights.hidden_size, weights.cell == "lstm"
    hs, cs = state[: L * H].view(L, H), (state[L * H:].view(L, H) if lstm else state[: L * H].view(L, H))
    new_h, new_c, inp = [], [], x
    for layer, row in enumerate(weights.layers):
        w = row[0]
        out = cell_step(weights.cell, inp @ w.w_ih.T + w.b_ih, hs[layer] @ w.w_hh.T + w.b_hh, hs[layer], cs[layer],
                        weights.nonlinearity)
        new_h.append(out["h"])
        new_c.append(out.get("c", out["h"]))
        inp = out["h"]
    return torch.cat(new_h + (new_c if lstm else []))


def recompute(weights: RecurrentWeights, x: torch.Tensor) -> list[list[dict[str, torch.Tensor]]]:
    """Stacked (bidirectional) recurrence over x (T, E): [layer][direction] -> name -> (T, ...).

    Layer l+1 reads [h_forward, h_backward] of layer l, as nn.LSTM/GRU/RNN do (no dropout: eval mode)."""
    out = []
    inp = x
    for row in weights.layers:
        dirs = [recompute_direction(weights.cell, w, inp, bool(d), weights.nonlinearity) for d, w in enumerate(row)]
        out.append(dirs)
        inp = torch.cat([dd["h"] for dd in dirs], dim=-1)
    return out


# ------------------------------------------------------------------------------------- torch modules
def cell_kind(rnn: nn.RNNBase) -> tuple[str, str]:
    """(cell, nonlinearity) of an nn.RNN / nn.GRU / nn.LSTM."""
    mode = getattr(rnn, "mode", "")
    if mode not in _MODES:
        raise RecurrentInferenceError(f"Unsupported recurrent module {type(rnn).__name__} (mode {mode!r}).")
    return _MODES[mode]


def _layers_from_tensors(params: dict[str, torch.Tensor], prefix: str, num_layers: int, num_dirs: int,
                         dtype: torch.dtype = torch.float32) -> list[list[CellWeights]]:
    layers = []
    for layer in range(num_layers):
        row = []
        for d in range(num_dirs):
            sfx = f"_l{layer}{'_reverse' if d else ''}"
            w_ih = params[f"{prefix}weight_ih{sfx}"].detach().to(dtype)
            w_hh = params[f"{prefix}weight_hh{sfx}"].detach().to(dtype)
            zeros = torch.zeros(w_hh.shape[0], dtype=dtype, device=w_hh.device)
            b_ih = params.get(f"{prefix}bias_ih{sfx}")
            b_hh = params.get(f"{prefix}bias_hh{sfx}")
            row.append(CellWeights(w_ih, w_hh, zeros if b_ih is None else b_ih.detach().to(dtype),
                                   zeros if b_hh is None else b_hh.detach().to(dtype)))
        layers.append(row)
    return layers


def weights_of(rnn: nn.RNNBase, embedding: nn.Embedding | None = None,
               decoder: nn.Module | None = None) -> RecurrentWeights:
    """The float32 weights of an nn.RNN/GRU/LSTM (with the embedding and output layer around it, if given)."""
    if getattr(rnn, "proj_size", 0):
        raise RecurrentInferenceError("LSTMs with projections (proj_size > 0) are not supported by this view.")
    cell, nonlinearity = cell_kind(rnn)
    layers = _layers_from_tensors(dict(rnn.named_parameters()), "", rnn.num_layers, 2 if rnn.bidirectional else 1)
    out_w = decoder.weight.detach().float() if isinstance(decoder, nn.Linear) else None
    out_b = decoder.bias.detach().float() if isinstance(decoder, nn.Linear) and decoder.bias is not None else None
    emb = embedding.weight.detach().float() if embedding is not None else None
    return RecurrentWeights(cell, nonlinearity, layers, emb, out_w, out_b)


# ------------------------------------------------------------------------------ patching the recurrence
def unroll(weights: RecurrentWeights, x: torch.Tensor, patches: Sequence[Patch] = (), keep: Names = ()
           ) -> tuple[torch.Tensor, dict[str, list[torch.Tensor]]]:
    """The stacked recurrence over x (B, T, E) from zero states, with `patches` on rnn.{l}.{dir}.h | .c applied as each
    step is made -> (the last layer's output (B, T, D·H), the kept sites: name -> T tensors (B, H), one per step in
    input order, in the autograd graph). Layer l+1 reads [h_fwd; h_bwd] of layer l, as nn.LSTM/GRU/RNN do."""
    edits = by_site(patches)
    kept: dict[str, list[torch.Tensor]] = {}
    B, T = x.shape[:2]
    inp = x
    for layer, row in enumerate(weights.layers):
        outs = []
        for d, w in enumerate(row):
            names = {s: f"rnn.{layer}.{DIRS[d]}.{s}" for s in ("h", "c")}

            def edit(t: int, out: dict[str, torch.Tensor], names: dict[str, str] = names) -> dict[str, torch.Tensor]:
                for s in ("c", "h"):  # a patched c is what the next step reads; this step's h is o ⊙ tanh(c) before it
                    for p in edits.get(names[s], ()) if s in out else ():
                        out[s] = p.apply_step(t, out[s])
                return out

            steps = direction_steps(weights.cell, w, inp @ w.w_ih.T + w.b_ih, bool(d), weights.nonlinearity, edit)
            for s in ("h", "c") if weights.cell == "lstm" else ("h",):
                if keep and wants(keep, names[s]):
                    kept[names[s]] = [step[s] for step in steps]
            outs.append(torch.stack([step["h"] for step in steps], dim=1) if T else x.new_zeros(B, 0, w.w_hh.shape[1]))
        inp = torch.cat(outs, dim=-1)
    return inp, kept



class PatchesRecurrence:
    """The Intervenes capability of a recurrent network: `unroll` over the adapter's `weights` (its embedding
    included), read out by its output layer after the last token (a language model) or, where the adapter set
    `readout`, by its task head (a classifier: the pooled states; a tagger: the last token's state)."""

    weights: RecurrentWeights
    readout: Callable[[torch.Tensor], torch.Tensor] | None = None  # top-layer states (B, T, D·H) -> labels (B, C)

    def intervention_layout(self) -> Layout | None:
        w = self.weights
        if w is None or w.embedding is None or (w.output_weight is None and self.readout is None):
            return None
        kinds = ("h", "c") if w.cell == "lstm" else ("h",)
        dirs = ("fwd", "bwd")[: w.num_directions]
        return Layout(w.num_layers, kinds, 0, dirs,
                      f"{w.num_layers} {w.cell.upper()} layer(s) of {w.hidden_size} units")

    def _unrolled(self, ids: torch.Tensor, patches: Sequence[Patch], keep: Names, grad: bool = False
                  ) -> tuple[torch.Tensor, dict[str, list[torch.Tensor]]]:
        w = self.weights
        assert w.embedding is not None  # intervention_layout said so
        x = w.embedding[ids.to(w.embedding.device)]
        if grad:
            x = x.detach().requires_grad_(True)
        out, kept = unroll(w, x, patches, keep)
        if self.readout is not None:
            return self.readout(out), kept
        assert w.output_weight is not None  # intervention_layout said so
        logits = out[:, -1] @ w.output_weight.T
        return (logits + w.output_bias if w.output_bias is not None else logits), kept

    def patched_logits(self, ids: torch.Tensor, patches: Sequence[Patch] = (), keep: Names = (),
                       calls: bool = False) -> PatchedRun:
        with torch.inference_mode():
            logits, kept = self._unrolled(ids, patches, keep)
        return PatchedRun(logits.float(), {n: torch.stack(v, dim=1) for n, v in kept.items()}, None)

    def resume_logits(self, layer: int, hidden: torch.Tensor, patches: Sequence[Patch],
                      calls: dict[int, BlockCall]) -> torch.Tensor:
        raise NotImplementedError("recurrent networks are run whole (they are small)")

    def site_gradients(self, ids: torch.Tensor, keep: Names, metric: Metric
                       ) -> tuple[torch.Tensor, dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        with torch.enable_grad():
            logits, kept = self._unrolled(ids, (), keep, grad=True)
            value = metric(logits.float())
            names = list(kept)
            flat = [t for n in names for t in kept[n]]
            grads = torch.autograd.grad(value, flat, allow_unused=True) if flat else ()
        out_v, out_g, i = {}, {}, 0
        for n in names:
            steps = kept[n]
            g = [gr if gr is not None else torch.zeros_like(st) for gr, st in zip(grads[i:i + len(steps)], steps)]
            out_v[n] = torch.stack([st[0].detach() for st in steps])
            out_g[n] = torch.stack([gg[0] for gg in g])
            i += len(steps)
        return value.detach(), out_v, out_g


def _linear(weight: torch.Tensor | None, bias: torch.Tensor | None) -> nn.Linear | None:
    """An nn.Linear holding `weight` (out, in) and `bias` (out,) (None: no bias), or None without a weight."""
    if weight is None:
        return None
    layer = nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None)
    with torch.no_grad():
        layer.weight.copy_(weight)
        if bias is not None:
            layer.bias.copy_(bias)
    return layer


class RecurrentNet(nn.Module):
    """A recurrent LM assembled from a user's tensors: embedding -> rnn -> optional decoder (no dropout).

    Same interface as explorer.models.rnn_lm.RNNLanguageModel: forward(ids, hidden, record) -> (logits, hidden)."""

    def __init__(self, weights: RecurrentWeights) -> None:
        super().__init__()
        w = weights
        if w.embedding is None:
            raise RecurrentInferenceError("No embedding matrix: a recurrent language model reads ids through one.")
        self.embedding = nn.Embedding.from_pretrained(w.embedding, freeze=True)
        kwargs = dict(input_size=w.input_size, hidden_size=w.hidden_size, num_layers=w.num_layers,
                      bidirectional=w.num_directions == 2, batch_first=True)
        self.rnn = {"lstm": nn.LSTM, "gru": nn.GRU}.get(w.cell, nn.RNN)(
            **kwargs, **({"nonlinearity": w.nonlinearity} if w.cell == "rnn" else {}))
        state = {}
        for layer, row in enumerate(w.layers):
            for d, cw in enumerate(row):
                sfx = f"_l{layer}{'_reverse' if d else ''}"
                state.update({f"weight_ih{sfx}": cw.w_ih, f"weight_hh{sfx}": cw.w_hh, f"bias_ih{sfx}": cw.b_ih,
                              f"bias_hh{sfx}": cw.b_hh})
        self.rnn.load_state_dict(state)
        self.decoder = _linear(w.output_weight, w.output_bias)  # over the vocabulary (a language model)
        self.head = _linear(w.head_weight, w.head_bias)  # over the labels (a classifier or tagger)
        self.to(w.embedding.device).eval()

    def forward(self, ids: torch.Tensor, hidden: Hidden | None = None,
                record: dict[str, torch.Tensor] | None = None) -> tuple[torch.Tensor | None, Hidden]:
        """ids (B, T) -> logits (B, T, V) or None, hidden."""
        x = self.embedding(ids)
        out, hidden = self.rnn(x, hidden)
        if record is not None:
            record["embed"], record["out"] = x, out
        return (self.decoder(out) if self.decoder is not None else None), hidden


# ------------------------------------------------------------------------------------ state dicts
def _group_rnn_keys(state: dict[str, torch.Tensor]) -> dict[str, dict[tuple[str, int, int], str]]:
    """prefix -> {(kind, layer, direction): key} for every key that looks like an nn.RNN parameter."""
    groups: dict[str, dict[tuple[str, int, int], str]] = {}
    for key in state:
        m = _RNN_KEY.match(key)
        if m:
            groups.setdefault(m["prefix"], {})[(m["kind"], int(m["layer"]), 1 if m["rev"] else 0)] = key
    return groups


def infer_recurrent(state: dict[str, torch.Tensor], nonlinearity: str = "tanh") -> RecurrentWeights:
    """Infer embedding + recurrent stack + output layer from a user state dict (see the module docstring)."""
    tensors = {k: v for k, v in state.items() if isinstance(v, torch.Tensor)}
    groups = _group_rnn_keys(tensors)
    if not groups:
        raise RecurrentInferenceError(
            "No recurrent weights found: expected keys ending in weight_ih_l0 and weight_hh_l0 "
            "(as saved by torch.nn.LSTM / nn.GRU / nn.RNN, e.g. 'lstm.weight_ih_l0'), "
            f"found: {describe_tensors(dict(sorted(tensors.items()))) if tensors else 'no tensors'}."
        )
    prefix = _pick_group(groups)
    keys = groups[prefix]
    notes = []
    if len(groups) > 1:
        others = ", ".join(repr(p or "(no prefix)") for p in groups if p != prefix)
        notes.append(f"Several recurrent modules found; showing '{prefix or '(no prefix)'}' (others: {others}).")
    if any(k[0] == "weight_hr" for k in keys):
        raise RecurrentInferenceError(
            f"'{prefix}weight_hr_l0' is an LSTM projection (proj_size > 0), which this view does not support.")
    cell, hidden, num_layers, num_dirs = _infer_shape(tensors, prefix, keys)
    layers = _layers_from_tensors(tensors, prefix, num_layers, num_dirs)
    if cell == "rnn":
        notes.append(f"An Elman RNN's nonlinearity is not stored in its weights: assuming {nonlinearity}.")
    emb_key = _find_embedding(tensors, layers[0][0].w_ih.shape[1])
    if emb_key is None:
        found = {k: t for k, t in tensors.items() if t.dim() == 2 and not _RNN_KEY.match(k)}
        raise RecurrentInferenceError(
            f"No embedding matrix found: expected a 2-D tensor of shape (vocabulary size, "
            f"{layers[0][0].w_ih.shape[1]}) (the input size of '{prefix}weight_ih_l0'), e.g. 'embedding.weight'; the "
            f"other 2-D tensors are: {describe_tensors(found) if found else 'none'}.")
    embedding = tensors[emb_key].detach().float()
    V, D_H = embedding.shape[0], hidden * num_dirs
    out_key = _find_output(tensors, V, D_H, exclude={emb_key})
    out_w = out_b = None
    tied = ""
    if out_key is not None:
        out_w = tensors[out_key].detach().float()
        bias = tensors.get(out_key[: -len("weight")] + "bias")
        out_b = (bias.detach().float() if isinstance(bias, torch.Tensor) and tuple(bias.shape) == (out_w.shape[0],)
                 else None)
        if tensors[out_key].data_ptr() == tensors[emb_key].data_ptr():
            tied = f"tied to {emb_key} (the same tensor)"
    elif (bias_key := _lone_output_bias(tensors, V, emb_key)) is not None and embedding.shape[1] == D_H:
        out_key, out_w, out_b = emb_key, embedding, tensors[bias_key].detach().float()
        tied = f"tied: one tensor saved once, {emb_key} is the embedding and, with '{bias_key}', the output layer"
    head_key = _find_head(tensors, V, D_H, exclude={emb_key}) if out_key is None else None
    head_w = head_b = None
    if head_key is not None:
        head_w = tensors[head_key].detach().float()
        bias = tensors.get(head_key[: -len("weight")] + "bias")
        head_b = (bias.detach().float() if isinstance(bias, torch.Tensor) and tuple(bias.shape) == (head_w.shape[0],)
                  else None)
    elif out_key is None and num_dirs == 1:
        notes.append(f"No output layer of shape ({V}, {hidden}) found: next-token predictions are not shown.")
    w = RecurrentWeights(cell, nonlinearity, layers, embedding, out_w, out_b, notes=notes, embedding_key=emb_key,
                         head_weight=head_w, head_bias=head_b, head_key=head_key or "")
    w.inferred = _describe(w, prefix, emb_key, out_key, tied)
    return w


def _find_head(tensors: dict[str, torch.Tensor], vocab_size: int, in_dim: int, exclude: set[str]) -> str | None:
    """A task head: a 2-D '<name>.weight' of shape (C, in_dim), 2 <= C < vocab_size labels, read from the recurrent
    layer's states (a classifier's or tagger's Linear(H or 2H -> C)); the one with an output-like name first."""
    from explorer.adapters.task_head import MAX_LABELS

    cands = [k for k, t in tensors.items()
             if k not in exclude and t.dim() == 2 and t.shape[1] == in_dim and 2 <= t.shape[0] < vocab_size
             and t.shape[0] <= MAX_LABELS and t.is_floating_point() and not _RNN_KEY.match(k) and k.endswith("weight")]
    return sorted(cands, key=lambda k: (_hint_rank(k, _OUT_HINTS), k))[0] if cands else None


def _lone_output_bias(tensors: dict[str, torch.Tensor], vocab_size: int, emb_key: str) -> str | None:
    """A (V,) '<name>.bias' whose '<name>.weight' is absent or is the embedding itself: an output layer tied to the
    embedding and saved once (safetensors' save_model keeps one of the names, e.g. 'decoder.weight' of PyTorch's
    word_language_model with --tied)."""
    for key, t in sorted(tensors.items()):
        if key.endswith("bias") and not _RNN_KEY.match(key) and tuple(t.shape) == (vocab_size,) \
                and t.is_floating_point():
            weight = key[: -len("bias")] + "weight"
            if weight == emb_key or weight not in tensors:
                return key
    return None


def _pick_group(groups: dict[str, dict[tuple[str, int, int], str]]) -> str:
    """The recurrent module to show: the one with a layer 0 (fewest-dots prefix, then alphabetical)."""
    usable = [p for p, ks in groups.items() if ("weight_ih", 0, 0) in ks and ("weight_hh", 0, 0) in ks]
    if not usable:
        p = next(iter(groups))
        raise RecurrentInferenceError(
            f"Found '{next(iter(groups[p].values()))}' but not both '{p}weight_ih_l0' and '{p}weight_hh_l0'.")
    return sorted(usable, key=lambda p: (p.count("."), p))[0]


def _infer_shape(tensors: dict[str, torch.Tensor], prefix: str,
                 keys: dict[tuple[str, int, int], str]) -> tuple[str, int, int, int]:
    """(cell, H, num_layers, num_directions) from weight_hh_l0's shape (G*H, H) and the keys present."""
    w_hh = tensors[keys[("weight_hh", 0, 0)]]
    if w_hh.dim() != 2 or w_hh.shape[1] == 0 or w_hh.shape[0] % w_hh.shape[1]:
        raise RecurrentInferenceError(
            f"'{prefix}weight_hh_l0' has shape {tuple(w_hh.shape)}; expected (G*H, H) with G = 4 (LSTM), "
            "3 (GRU) or 1 (Elman RNN).")
    hidden = int(w_hh.shape[1])
    gates = int(w_hh.shape[0]) // hidden
    if gates not in _N_GATES:
        raise RecurrentInferenceError(
            f"'{prefix}weight_hh_l0' has shape {tuple(w_hh.shape)}: {gates} × H rows, but an LSTM has 4 × H, "
            "a GRU 3 × H and an Elman RNN 1 × H.")
    num_layers = 1 + max(layer for (_, layer, _) in keys)
    num_dirs = 2 if any(d == 1 for (_, _, d) in keys) else 1
    for layer in range(num_layers):
        for d in range(num_dirs):
            for kind in ("weight_ih", "weight_hh"):
                if (kind, layer, d) not in keys:
                    raise RecurrentInferenceError(
                        f"Missing '{prefix}{kind}_l{layer}{'_reverse' if d else ''}' "
                        f"(layers 0..{num_layers - 1}, {'bi' if num_dirs == 2 else 'uni'}directional).")
            for kind, cols in (("weight_hh", hidden), ("weight_ih", None)):
                t = tensors[keys[(kind, layer, d)]]
                if t.dim() != 2 or t.shape[0] != gates * hidden or (cols is not None and t.shape[1] != cols):
                    raise RecurrentInferenceError(
                        f"'{keys[(kind, layer, d)]}' has shape {tuple(t.shape)}; expected "
                        f"({gates * hidden}, {cols if cols is not None else 'input size'}).")
            if layer and d == 0 and t.shape[1] != hidden * num_dirs:  # t: weight_ih, read from layer - 1
                raise RecurrentInferenceError(
                    f"'{prefix}weight_ih_l{layer}' takes inputs of size {t.shape[1]}; expected {hidden * num_dirs} "
                    f"(the hidden size {hidden} × {num_dirs} direction(s) of layer {layer - 1}).")
            for kind in ("bias_ih", "bias_hh"):
                key = keys.get((kind, layer, d))
                if key is not None and tuple(tensors[key].shape) != (gates * hidden,):
                    raise RecurrentInferenceError(
                        f"'{key}' has shape {tuple(tensors[key].shape)}; expected ({gates * hidden},).")
    return _N_GATES[gates], hidden, num_layers, num_dirs


def _hint_rank(key: str, hints: tuple[str, ...]) -> int:
    return 0 if any(h in key.lower() for h in hints) else 1


def _find_embedding(tensors: dict[str, torch.Tensor], emb_dim: int) -> str | None:
    cands = [k for k, t in tensors.items()
             if t.dim() == 2 and t.shape[1] == emb_dim and t.is_floating_point() and not _RNN_KEY.match(k)
             and k.endswith("weight")]
    if not cands:
        return None
    return sorted(cands, key=lambda k: (_hint_rank(k, _EMB_HINTS), -_hint_rank(k, _OUT_HINTS), k.count("."), k))[0]


def _find_output(tensors: dict[str, torch.Tensor], vocab_size: int, in_dim: int, exclude: set[str]) -> str | None:
    cands = [k for k, t in tensors.items()
             if k not in exclude and t.dim() == 2 and tuple(t.shape) == (vocab_size, in_dim)
             and t.is_floating_point() and not _RNN_KEY.match(k) and k.endswith("weight")]
    if not cands:
        return None
    return sorted(cands, key=lambda k: (_hint_rank(k, _OUT_HINTS), k))[0]


def _describe(w: RecurrentWeights, prefix: str, emb_key: str | None, out_key: str | None,
              tied: str = "") -> list[tuple[str, str]]:
    output = f"{out_key} {tuple(w.output_weight.shape)}" if w.output_weight is not None else "none"
    return [
        ("cell", CELL_NAMES[w.cell] + (f" ({w.nonlinearity})" if w.cell == "rnn" else "")),
        ("recurrent weights", f"{prefix}weight_ih_l0 … ({w.num_layers} layer(s))"),
        ("layers", str(w.num_layers)),
        ("directions", "bidirectional" if w.num_directions == 2 else "forward only"),
        ("hidden size H", str(w.hidden_size)),
        ("input size E", str(w.input_size)),
        ("gate order (rows of W)", ", ".join(GATES[w.cell])),
        ("embedding", f"{emb_key} {tuple(w.embedding.shape) if w.embedding is not None else '(none)'}"),
        ("output layer", output + (f", {tied}" if tied else "")),
    ]


# --------------------------------------------------------------------------------------------- adapter
class Source(Protocol):
    """What the recurrent adapter reads of a loaded model besides what every adapter reads (its id, model and
    device): the meta, the raw tensors of a bare state dict and the vocabularies (explorer.adapters.protocols.Loaded
    has them; that module names this one, so this one does not name it back)."""

    @property
    def meta(self) -> Mapping[str, object] | None: ...
    @property
    def state_dict(self) -> dict[str, torch.Tensor] | None: ...
    @property
    def vocabs(self) -> Mapping[str, Vocab] | None: ...


class RecurrentAdapter(VocabText, PatchesRecurrence, Adapter):
    """Built-in RNN LMs and user state dicts with nn.RNN/GRU/LSTM weights (see the module docstring).

    Text (explorer.adapters.text.VocabText): `<bos>` + words or characters when the vocabulary has a
    beginning-of-sentence token (as the built-in LMs were trained), else the text as is; unknown -> <unk>, or
    left out and listed when the vocabulary has no unknown token."""

    recurrent = True
    loaded: Source
    vocab: Vocab  # __init__ refuses a model without one
    net: RNNLanguageModel | RecurrentNet | RNNClassifier

    def __init__(self, loaded: Source) -> None:
        super().__init__(loaded)
        if self.model is not None:
            self.net = self.model
            self.weights = weights_of(self.model.rnn, self.model.embedding, self.model.decoder)
            self.weights.inferred = _describe(self.weights, "rnn.", "embedding.weight",
                                              "decoder.weight" if self.weights.output_weight is not None else None)
        else:
            nonlinearity = "relu" if str((loaded.meta or {}).get("nonlinearity", "tanh")) == "relu" else "tanh"
            self.weights = infer_recurrent(loaded.state_dict or {}, nonlinearity)
            self.net = RecurrentNet(self.weights)
        w = self.weights
        self.name = f"{CELL_NAMES[w.cell]} ({'built-in' if self.model is not None else 'inferred from the state dict'})"
        vocab = (loaded.vocabs or {}).get("vocab")
        assert w.embedding is not None  # RecurrentNet refused weights without one
        emb = f"'{w.embedding_key}' {tuple(w.embedding.shape)}"
        if vocab is None:
            raise RecurrentInferenceError(
                f"No vocabulary: add a vocab.json (a list of tokens, a {{token: id}} map, torchtext's itos/stoi) or "
                f"a tokenizer.json with {w.embedding.shape[0]} entries, one per row of the embedding {emb}.")
        self.vocab = vocab
        if len(self.vocab) != w.embedding.shape[0]:
            raise RecurrentInferenceError(
                f"The vocabulary has {len(self.vocab)} tokens but the embedding matrix has {w.embedding.shape[0]} "
                f"rows ({emb}): they must match (one row per token id). Is this the vocabulary saved with these "
                "weights?")
        self.can_generate = w.output_weight is not None and w.num_directions == 1
        self.vocab_size = int(w.output_weight.shape[0]) if w.output_weight is not None and self.can_generate else 0
        self.bos_id, self.pad_id = self.vocab.bos_id, self.vocab.pad_id
        self.eos_ids = () if self.vocab.eos_id is None else (self.vocab.eos_id,)
        head = getattr(self.net, "head", None)
        if isinstance(head, nn.Linear):  # a classifier's or tagger's head instead of an output layer
            self._read_task(head)

    def _read_task(self, linear: nn.Linear) -> None:
        """The decision of a recurrent classifier or tagger: its task settings from the JSON beside the weights
        (explorer.adapters.decision), what they do not say assumed and said."""
        settings = task_settings(self.loaded.meta)
        if isinstance(self.net, RNNClassifier):  # a built-in: its own task and pooling, its labels from its meta
            settings.update(task=TASKS[1] if self.net.task == "tag" else TASKS[0], pooling=self.net.pooling)
        labels, why = label_names(linear.out_features, settings.get("labels"))
        assumed = [why] if why else []
        task = str(settings.get("task") or "")
        if task not in TASKS:
            task = TASKS[0]
            assumed.append("Task: weights do not say whether a model labels the sentence or each word; read as a "
                           "sentence classifier (a JSON beside the weights with {\"task\": \"tag\"} says otherwise).")
        pooling = str(settings.get("pooling") or "")
        if task == TASKS[0] and pooling not in POOLINGS:
            pooling = "last"
            assumed.append("Pooling: weights do not say how the states become one vector; assumed 'last' (h_n, "
                           "as `fc(h_n[-1])` reads it; a JSON beside the weights with {\"pooling\": \"mean\"}, "
                           "\"max\" or \"first\" says otherwise).")
        shape = tuple(linear.weight.shape)
        head = TaskHead(task, labels, pooling, False, tuple(assumed),
                        source=f"{self.weights.head_key or 'head.weight'} {shape}")
        rnn, embedding, directions = self.net.rnn, self.net.embedding, self.weights.num_directions

        def logits(embeds: torch.Tensor, segments: torch.Tensor | None = None) -> torch.Tensor:
            out, _ = rnn(embeds)
            return cast(torch.Tensor, linear(out if head.per_token else pool(out, head.pooling, directions)))

        self.task_head, self.decision_fns = head, (lambda ids: cast(torch.Tensor, embedding(ids)), logits)

        def readout(out: torch.Tensor) -> torch.Tensor:  # (B, T, D·H) -> (B, C): what interventions patch toward
            x = out[:, -1] if head.per_token else pool(out, head.pooling, directions)
            return cast(torch.Tensor, linear(x.to(linear.weight.dtype))).float()

        self.readout = readout

    @property
    def cell(self) -> str:
        return str(self.weights.cell)

    # ------------------------------------------------------------------ run
    def run(self, enc: Encoded, names: Names = None, target: Encoded | None = None, **options: object) -> Record:
        """embed (T, E), rnn.{l}.{dir}.* (see the module docstring), rnn.{l}.out (T, D·H), logits (T, V),
        rnn.max_abs_error ()."""
        acts = Acts(names)
        w = self.weights
        assert w.embedding is not None  # __init__ refused weights without one
        with torch.inference_mode():
            ids = torch.tensor([list(enc.ids)], dtype=torch.long, device=w.embedding.device)
            rec: dict[str, torch.Tensor] = {}
            logits, _ = self.net(ids, record=rec)
            x = w.embedding[ids[0]]
            acts.put("embed", x)
            if acts.want("rnn.*"):
                layers = recompute(w, x)
                for layer, dirs in enumerate(layers):
                    for d, states in enumerate(dirs):
                        for name, value in states.items():
                            acts.put(f"rnn.{layer}.{DIRS[d]}.{name}", value)
                    acts.put(f"rnn.{layer}.out", torch.cat([dd["h"] for dd in dirs], dim=-1))
                h_last = torch.cat([dd["h"] for dd in layers[-1]], dim=-1)
                acts.put("rnn.max_abs_error", (h_last - rec["out"][0].float()).abs().max())
            if logits is not None and w.num_directions == 1:
                acts.put("logits", logits[0])
        return Record(enc, acts.out)

    # ------------------------------------------------------------------ generation
    # ------------------------------------------------------------------ lens and gradients
    lens_names = ("rnn.*.out", "logits")

    def unembed(self, x: torch.Tensor, normed: bool = False) -> torch.Tensor:
        """The output layer W_out h + b on any layer's output of the same width (the last layer's is the model's
        own)."""
        if self.net.decoder is None or x.shape[-1] != self.net.decoder.in_features:
            raise Unsupported(f"{self.id}: its layers' outputs do not have the output layer's width.")
        # float32 states into a half-precision model's output layer
        return cast(torch.Tensor, self.net.decoder(x.to(self.net.decoder.weight.dtype)))

    def lens_states(self, rec: Record) -> list[tuple[str, torch.Tensor, bool]]:
        return [(f"{self.name.split(' (')[0]} layer {layer}", torch.from_numpy(rec[f"rnn.{layer}.out"]), True)
                for layer in rec.layers("rnn.{l}.out")]

    def embed_ids(self, ids: torch.Tensor, side: str = "input") -> torch.Tensor:
        return cast(torch.Tensor, self.net.embedding(ids))

    def logits_from_embeddings(self, embeds: torch.Tensor, target: torch.Tensor | None = None,
                               keep: Sequence[int] | None = None) -> torch.Tensor:
        """(B, T, E) -> (B, T, V) (keep: only those positions): the network's own recurrence and output layer on
        given input embeddings."""
        if not self.can_generate:
            raise Unsupported(f"{self.id} has no output layer over its vocabulary (or reads both directions).")
        out, _ = self.net.rnn(embeds)
        assert self.net.decoder is not None  # can_generate: there is an output layer
        return cast(torch.Tensor, self.net.decoder(out if keep is None else out[:, list(keep)]))

    def start(self, ids: torch.Tensor, record: bool = False) -> tuple[torch.Tensor, Hidden, dict[str, torch.Tensor]]:
        if not self.can_generate:
            raise Unsupported(f"{self.id} has no output layer over its vocabulary (or reads both directions): "
                              "it does not predict next tokens.")
        logits, hidden = self.net(ids)
        return logits[:, -1, :].float(), hidden, {}

    def step(self, state: Hidden, tokens: torch.Tensor,
             record: bool = False) -> tuple[torch.Tensor, Hidden, dict[str, torch.Tensor]]:
        logits, hidden = self.net(tokens[:, None], state)
        return logits[:, -1, :].float(), hidden, {}

    def reorder(self, state: Hidden, idx: torch.Tensor) -> Hidden:
        return (state[0][:, idx], state[1][:, idx]) if isinstance(state, tuple) else state[:, idx]

    # ------------------------------------------------------------------ tables
    def tables(self) -> dict[str, Table]:
        assert self.weights.embedding is not None  # __init__ refused weights without one
        V = self.weights.embedding.shape[0]
        words = tuple(self.token_strings(range(V)))
        notes = () if self.model is not None else (f"Vocabulary: {self.vocab.summary()}.",)
        return {"input": Table(f"{self.weights.embedding_key} (input embeddings)", self.weights.embedding, words,
                               tuple(i in self.vocab.special_ids for i in range(V)), dict(self.vocab.freq) or None,
                               subword=self.vocab.level == "subword", notes=notes)}

    def describe(self) -> tuple[tuple[str, str], ...]:
        """Where the weights and vocabulary were read (user files), the architecture read from them, the vocabulary
        and how text is fed."""
        rows = (self.loaded.meta or {}).get("found", ())  # (what, value) pairs (explorer.loading.loaders)
        found = tuple((str(a), str(b)) for a, b in rows) if isinstance(rows, (list, tuple)) else ()
        task = self.task_head.rows() if self.task_head is not None else ()
        return found + tuple(self.weights.inferred) + task + (("vocabulary", self.vocab.summary()),
                                                              ("input", input_convention(self.vocab, self.feeds_bos)))

