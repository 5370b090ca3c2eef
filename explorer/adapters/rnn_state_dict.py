"""Recurrent models seen uniformly: embedding -> stacked nn.RNN/GRU/LSTM weights -> optional output layer.

Two sources:
  * an explorer RNN language model (`registry` family "rnn-lm": `.embedding`, `.rnn`, `.decoder`);
  * a bare user state dict (family "state-dict"), whose architecture is inferred here from key names and
    tensor shapes: PyTorch names recurrent weights `<prefix>weight_ih_l{k}[_reverse]`, `weight_hh_l{k}`,
    `bias_ih_l{k}`, `bias_hh_l{k}`, stacking the gates in the rows (LSTM i, f, g, o; GRU r, z, n; Elman one
    block), so `weight_hh_l0.shape == (G * H, H)` tells the cell (G = 4, 3 or 1) and the hidden size H.

`recurrent_from_loaded(loaded)` returns a `RecurrentModel` (float32 tensors on the model's device) or raises
`RecurrentInferenceError` with a message that names the key or shape it expected. Nothing is attached to the
shared model: the tensors are read (and cast, when the model is in half precision) per call.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import torch

GATES: dict[str, tuple[str, ...]] = {"lstm": ("i", "f", "g", "o"), "gru": ("r", "z", "n"), "rnn": ("h",)}
CELL_NAMES = {"lstm": "LSTM", "gru": "GRU", "rnn": "Elman RNN"}
_N_GATES = {4: "lstm", 3: "gru", 1: "rnn"}
_RNN_KEY = re.compile(r"^(?P<prefix>.*?)(?P<kind>weight_ih|weight_hh|bias_ih|bias_hh|weight_hr)_l(?P<layer>\d+)(?P<rev>_reverse)?$")
_EMB_HINTS = ("emb", "embed", "wte", "word", "lookup", "encoder.weight", "tok")
_OUT_HINTS = ("decoder", "fc", "out", "head", "proj", "linear", "classifier", "lm", "logit", "softmax", "dense")


class RecurrentInferenceError(ValueError):
    """The weights cannot be read as an embedding + nn.RNN/GRU/LSTM (+ output layer); str() says why."""


@dataclass(frozen=True)
class CellWeights:
    """One layer and direction: W_ih (G*H, In), W_hh (G*H, H), b_ih (G*H,), b_hh (G*H,) (zeros if bias=False)."""

    w_ih: torch.Tensor
    w_hh: torch.Tensor
    b_ih: torch.Tensor
    b_hh: torch.Tensor


@dataclass
class RecurrentModel:
    """cell: "lstm" | "gru" | "rnn"; layers[l][d]: CellWeights (d = 0 forward, 1 backward).

    embedding: (V, E) or None; output_weight: (V_out, D*H) and output_bias: (V_out,) or None.
    inferred: (what, value) rows describing what was read, for the page; notes: messages for the user.
    """

    cell: str
    nonlinearity: str
    layers: list[list[CellWeights]]
    embedding: torch.Tensor | None
    output_weight: torch.Tensor | None = None
    output_bias: torch.Tensor | None = None
    inferred: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

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

    @property
    def gate_names(self) -> tuple[str, ...]:
        return GATES[self.cell]


# ------------------------------------------------------------------------------------- torch modules
def cell_kind(rnn: torch.nn.RNNBase) -> tuple[str, str]:
    """(cell, nonlinearity) of an nn.RNN / nn.GRU / nn.LSTM."""
    mode = getattr(rnn, "mode", "")
    if mode == "LSTM":
        return "lstm", "tanh"
    if mode == "GRU":
        return "gru", "tanh"
    if mode in ("RNN_TANH", "RNN_RELU"):
        return "rnn", "relu" if mode == "RNN_RELU" else "tanh"
    raise RecurrentInferenceError(f"Unsupported recurrent module {type(rnn).__name__} (mode {mode!r}).")


def weights_from_module(rnn: torch.nn.RNNBase, dtype: torch.dtype = torch.float32) -> list[list[CellWeights]]:
    """layers[l][d] read from an nn.RNN/GRU/LSTM's own parameters (cast to `dtype`)."""
    if getattr(rnn, "proj_size", 0):
        raise RecurrentInferenceError("LSTMs with projections (proj_size > 0) are not supported by this view.")
    params = dict(rnn.named_parameters())
    return _layers_from_tensors(params, "", rnn.num_layers, 2 if rnn.bidirectional else 1, dtype)


def _layers_from_tensors(params: dict[str, torch.Tensor], prefix: str, num_layers: int, num_dirs: int,
                         dtype: torch.dtype) -> list[list[CellWeights]]:
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


def recurrent_from_module(model: torch.nn.Module) -> RecurrentModel:
    """An explorer RNNLanguageModel (`.embedding`, `.rnn`, `.decoder`)."""
    rnn = getattr(model, "rnn", None)
    if not isinstance(rnn, torch.nn.RNNBase):
        raise RecurrentInferenceError("This model has no `.rnn` (nn.RNN/GRU/LSTM) to look inside.")
    cell, nonlinearity = cell_kind(rnn)
    emb = getattr(model, "embedding", None)
    dec = getattr(model, "decoder", None)
    embedding = emb.weight.detach().float() if isinstance(emb, torch.nn.Embedding) else None
    out_w = dec.weight.detach().float() if isinstance(dec, torch.nn.Linear) else None
    out_b = dec.bias.detach().float() if isinstance(dec, torch.nn.Linear) and dec.bias is not None else None
    rec = RecurrentModel(cell, nonlinearity, weights_from_module(rnn), embedding, out_w, out_b)
    rec.inferred = _describe(rec, "rnn.", "embedding.weight", "decoder.weight" if out_w is not None else None)
    return rec


# ------------------------------------------------------------------------------------ state dicts
def _group_rnn_keys(state: dict[str, Any]) -> dict[str, dict[tuple[str, int, int], str]]:
    """prefix -> {(kind, layer, direction): key} for every key that looks like an nn.RNN parameter."""
    groups: dict[str, dict[tuple[str, int, int], str]] = {}
    for key in state:
        m = _RNN_KEY.match(key)
        if m:
            groups.setdefault(m["prefix"], {})[(m["kind"], int(m["layer"]), 1 if m["rev"] else 0)] = key
    return groups


def infer_recurrent(state: dict[str, torch.Tensor], nonlinearity: str = "tanh") -> RecurrentModel:
    """Infer embedding + recurrent stack + output layer from a user state dict (see the module docstring)."""
    tensors = {k: v for k, v in state.items() if isinstance(v, torch.Tensor)}
    groups = _group_rnn_keys(tensors)
    if not groups:
        sample = ", ".join(sorted(tensors)[:6]) or "no tensors"
        raise RecurrentInferenceError(
            "No recurrent weights found: expected keys ending in weight_ih_l0 and weight_hh_l0 "
            "(as saved by torch.nn.LSTM / nn.GRU / nn.RNN, e.g. 'lstm.weight_ih_l0'), "
            f"found: {sample}{' …' if len(tensors) > 6 else ''}."
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
    layers = _layers_from_tensors(tensors, prefix, num_layers, num_dirs, torch.float32)
    _check_layer_inputs(layers, prefix, hidden, num_dirs)
    if cell == "rnn":
        notes.append(f"An Elman RNN's nonlinearity is not stored in its weights: assuming {nonlinearity}.")
    emb_key = _find_embedding(tensors, layers[0][0].w_ih.shape[1], prefix)
    if emb_key is None:
        raise RecurrentInferenceError(
            f"No embedding matrix found: expected a 2-D tensor of shape (vocabulary size, {layers[0][0].w_ih.shape[1]}) "
            f"(the input size of '{prefix}weight_ih_l0'), e.g. 'embedding.weight'.")
    embedding = tensors[emb_key].detach().float()
    out_key = _find_output(tensors, embedding.shape[0], hidden * num_dirs, exclude={emb_key})
    out_w = out_b = None
    if out_key is not None:
        out_w = tensors[out_key].detach().float()
        bias_key = out_key[: -len("weight")] + "bias"
        bias = tensors.get(bias_key)
        out_b = bias.detach().float() if isinstance(bias, torch.Tensor) and tuple(bias.shape) == (out_w.shape[0],) else None
    elif num_dirs == 1:
        notes.append(f"No output layer of shape ({embedding.shape[0]}, {hidden}) found: next-token predictions are not shown.")
    rec = RecurrentModel(cell, nonlinearity, layers, embedding, out_w, out_b, notes=notes)
    rec.inferred = _describe(rec, prefix, emb_key, out_key)
    return rec


def _pick_group(groups: dict[str, dict]) -> str:
    """The recurrent module to show: the one with a layer 0 (fewest-dots prefix, then alphabetical)."""
    usable = [p for p, ks in groups.items() if ("weight_ih", 0, 0) in ks and ("weight_hh", 0, 0) in ks]
    if not usable:
        p = next(iter(groups))
        raise RecurrentInferenceError(
            f"Found '{next(iter(groups[p].values()))}' but not both '{p}weight_ih_l0' and '{p}weight_hh_l0'.")
    return sorted(usable, key=lambda p: (p.count("."), p))[0]


def _infer_shape(tensors: dict[str, torch.Tensor], prefix: str, keys: dict) -> tuple[str, int, int, int]:
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
            for kind in ("bias_ih", "bias_hh"):
                key = keys.get((kind, layer, d))
                if key is not None and tuple(tensors[key].shape) != (gates * hidden,):
                    raise RecurrentInferenceError(
                        f"'{key}' has shape {tuple(tensors[key].shape)}; expected ({gates * hidden},).")
    return _N_GATES[gates], hidden, num_layers, num_dirs


def _check_layer_inputs(layers: list[list[CellWeights]], prefix: str, hidden: int, num_dirs: int) -> None:
    for layer in range(1, len(layers)):
        got = layers[layer][0].w_ih.shape[1]
        if got != hidden * num_dirs:
            raise RecurrentInferenceError(
                f"'{prefix}weight_ih_l{layer}' takes inputs of size {got}; expected {hidden * num_dirs} "
                f"(the hidden size {hidden} × {num_dirs} direction(s) of layer {layer - 1}).")


def _hint_rank(key: str, hints: tuple[str, ...]) -> int:
    low = key.lower()
    return 0 if any(h in low for h in hints) else 1


def _find_embedding(tensors: dict[str, torch.Tensor], emb_dim: int, rnn_prefix: str) -> str | None:
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


def _describe(rec: RecurrentModel, prefix: str, emb_key: str | None, out_key: str | None) -> list[tuple[str, str]]:
    rows = [
        ("cell", CELL_NAMES[rec.cell] + (f" ({rec.nonlinearity})" if rec.cell == "rnn" else "")),
        ("recurrent weights", f"{prefix}weight_ih_l0 … ({rec.num_layers} layer(s))"),
        ("layers", str(rec.num_layers)),
        ("directions", "bidirectional" if rec.num_directions == 2 else "forward only"),
        ("hidden size H", str(rec.hidden_size)),
        ("input size E", str(rec.input_size)),
        ("gate order (rows of W)", ", ".join(rec.gate_names)),
    ]
    if rec.embedding is not None:
        rows.append(("embedding", f"{emb_key} {tuple(rec.embedding.shape)}"))
    rows.append(("output layer", f"{out_key} {tuple(rec.output_weight.shape)}" if rec.output_weight is not None else "none"))
    return rows


# ------------------------------------------------------------------------------------- entry point
def recurrent_from_loaded(loaded: Any) -> RecurrentModel:
    """RecurrentModel of a registry.LoadedModel (family "rnn-lm" or "state-dict"), or RecurrentInferenceError."""
    if getattr(loaded, "model", None) is not None:
        rec = recurrent_from_module(loaded.model)
    elif getattr(loaded, "state_dict", None):
        nonlinearity = str((getattr(loaded, "meta", {}) or {}).get("nonlinearity", "tanh"))
        rec = infer_recurrent(loaded.state_dict, "relu" if nonlinearity == "relu" else "tanh")
    else:
        raise RecurrentInferenceError(f"{getattr(loaded, 'id', 'This model')} has neither a module nor a state dict.")
    vocab = (getattr(loaded, "vocabs", {}) or {}).get("vocab")
    if rec.embedding is None:
        raise RecurrentInferenceError("This model has no embedding matrix to read words with.")
    if vocab is None and getattr(loaded, "tokenizer", None) is None:
        raise RecurrentInferenceError(
            f"No vocabulary: add a vocab.json (a list of tokens, or a {{token: id}} map) with "
            f"{rec.embedding.shape[0]} entries, one per row of the embedding.")
    if vocab is not None and len(vocab) != rec.embedding.shape[0]:
        raise RecurrentInferenceError(
            f"The vocabulary has {len(vocab)} tokens but the embedding matrix has {rec.embedding.shape[0]} rows: "
            "they must match (one row per token id). Is this the vocab.json saved with these weights?")
    return rec
