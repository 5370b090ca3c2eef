"""What a weights file holds, as people save it: the model's tensors, where they were found, and the rest.

`unwrap(obj)` reads what safetensors or torch.load(weights_only=True) returned (explorer.files.safe_load does the
reading):

* a state dict {parameter name: tensor} (`torch.save(model.state_dict(), ...)`, safetensors);
* a training checkpoint: a dict with an entry that is a state dict (model_state_dict, state_dict, model, net, ...)
  beside epoch, optimizer_state_dict, loss, ...: that entry is used and the others are listed;
* a PyTorch Lightning .ckpt: its "state_dict" entry (beside optimizer_states, epoch, global_step, ...).

Then a wrapper prefix that every key shares is removed: "module." (nn.DataParallel / DistributedDataParallel),
"_orig_mod." (torch.compile), "model." / "net." / "network." (a LightningModule or wrapper holding the network).
`Weights.rows` says what was done, for the page; `Weights.extras` keeps the file's plain token lists and maps
(a vocabulary saved inside the checkpoint).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeGuard

import torch

PREFERRED = ("model_state_dict", "state_dict", "model", "net", "model_state", "network", "module", "weights")
WRAPPER_PREFIXES = {"module.": "nn.DataParallel / DistributedDataParallel", "_orig_mod.": "torch.compile",
                    "model.": "a wrapper module (e.g. a LightningModule's self.model)",
                    "net.": "a wrapper module", "network.": "a wrapper module"}


#: a plain value kept beside the weights: a list of tokens or a {token: id} / {id: token} map
Plain = list[str] | tuple[str, ...] | Mapping[str | int, str | int]


class NoWeightsError(ValueError):
    """The object holds no state dict; str() says what was found and what was expected."""


@dataclass
class Weights:
    """tensors: parameter name -> tensor; rows: (what, value) lines saying where they were read and what was
    changed; extras: plain lists and maps found beside them (name -> value; one level of nesting as "a.b");
    note: one sentence for the page when the weights were not a bare state dict with plain names (else "")."""

    tensors: dict[str, torch.Tensor]
    rows: list[tuple[str, str]] = field(default_factory=list)
    extras: dict[str, Plain] = field(default_factory=dict)
    note: str = ""


def describe(obj: object, limit: int = 8) -> str:
    """What an object holds, for messages: "emb.weight (10, 6), epoch (int), optimizer_state_dict (dict of 2)"."""
    if isinstance(obj, torch.Tensor):
        return f"a single tensor of shape {tuple(obj.shape)}"
    if not isinstance(obj, Mapping):
        return f"a {type(obj).__name__}" + (f" of {len(obj)} items" if isinstance(obj, (list, tuple)) else "")
    parts = [f"{k} {_kind(v)}" for k, v in list(obj.items())[:limit]]
    return ", ".join(parts) + (f", … ({len(obj)} entries)" if len(obj) > limit else "") if parts else "nothing"


def _kind(value: object) -> str:
    if isinstance(value, torch.Tensor):
        return str(tuple(value.shape))
    if isinstance(value, (Mapping, list, tuple)):
        return f"({type(value).__name__} of {len(value)})"
    return f"({type(value).__name__})"


def _state_dict(value: object) -> dict[str, torch.Tensor] | None:
    """value as {name: tensor} when it is a non-empty mapping of tensors, else None."""
    if isinstance(value, Mapping) and value and all(isinstance(v, torch.Tensor) for v in value.values()):
        return {str(k): v for k, v in value.items()}
    return None


def unwrap(obj: object) -> Weights:
    """The model's tensors in `obj` (see the module docstring). Raises NoWeightsError."""
    if not isinstance(obj, Mapping):
        raise NoWeightsError(f"holds {describe(obj)}, not a state dict. Expected a mapping from parameter names to "
                             "tensors (torch.save(model.state_dict(), ...)) or a training checkpoint holding one.")
    top = {str(k): v for k, v in obj.items() if isinstance(v, torch.Tensor)}
    entries = {str(k): sd for k, v in obj.items() if (sd := _state_dict(v)) is not None}
    if not top and not entries:
        raise NoWeightsError(
            f"holds no tensors: found {describe(obj)}. Expected a state dict (parameter name -> tensor, as saved by "
            "torch.save(model.state_dict(), ...)) or a training checkpoint with one such entry "
            f"({', '.join(PREFERRED[:4])}, ...).")
    if entries and (not top or any(k in entries for k in PREFERRED)):
        key = next((k for k in PREFERRED if k in entries), max(entries, key=lambda k: len(entries[k])))
        tensors = entries[key]
        others = sorted(str(k) for k in obj if str(k) != key)
        kind = ("a PyTorch Lightning checkpoint" if "pytorch-lightning_version" in obj or "optimizer_states" in obj
                else "a training checkpoint" if others else "a dict")
        where = f"the '{key}' entry of {kind}" + (f" (also held: {', '.join(others[:6])}"
                                                  f"{', …' if len(others) > 6 else ''})" if others else "")
        rows, note = [("weights", where)], f"The weights are {where}"
        if len(entries) > 1:
            rows.append(("other state dicts", ", ".join(f"'{k}'" for k in entries if k != key)))
    else:
        tensors, note = top, ""
        skipped = sorted(str(k) for k in obj if str(k) not in top)
        rows = [("weights", f"a state dict of {len(top)} tensors"
                 + (f" (other entries left aside: {', '.join(skipped[:6])})" if skipped else ""))]
    tensors, prefix_rows = strip_wrappers(tensors)
    note = "; ".join(filter(None, [note, *(f"prefix {v}" for _, v in prefix_rows)]))
    return Weights(tensors, rows + prefix_rows, _extras(obj), f"{note[:1].upper()}{note[1:]}." if note else "")


def strip_wrappers(tensors: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], list[tuple[str, str]]]:
    """Remove the wrapper prefixes (WRAPPER_PREFIXES) that every key shares, outermost first."""
    rows = []
    while tensors:
        prefix = next((p for p in WRAPPER_PREFIXES if all(k.startswith(p) and len(k) > len(p) for k in tensors)), None)
        if prefix is None:
            break
        tensors = {k[len(prefix):]: v for k, v in tensors.items()}
        rows.append(("key prefix", f"'{prefix}' removed from every key ({WRAPPER_PREFIXES[prefix]})"))
    return tensors, rows


def _plain(value: object) -> TypeGuard[Plain]:
    """A list of strings, or a mapping of strings/ints to strings/ints (what a vocabulary is saved as)."""
    if isinstance(value, (list, tuple)):
        return bool(value) and all(isinstance(v, str) for v in value)
    return isinstance(value, Mapping) and bool(value) and all(
        isinstance(k, (str, int)) and isinstance(v, (str, int)) for k, v in value.items())


def _extras(obj: Mapping[object, object]) -> dict[str, Plain]:
    """The plain lists and maps of obj and of its mapping entries ("entry.key")."""
    out: dict[str, Plain] = {}
    for key, value in obj.items():
        if _plain(value):
            out[str(key)] = value
        elif isinstance(value, Mapping) and _state_dict(value) is None:
            out.update({f"{key}.{k}": v for k, v in value.items() if _plain(v)})
    return out
