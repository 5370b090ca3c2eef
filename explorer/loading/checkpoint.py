"""Checkpoints: `<name>.safetensors` (weights) + `<name>.json` (meta). Loading never unpickles anything.

meta schema:
    {"name": str, "architecture": key of explorer.models.build.ARCHITECTURES, "config": build_model kwargs,
     "vocab": [str] | "src_vocab": [str] + "tgt_vocab": [str] (seq2seq),
     "corpus": {"generator": "english"|"wordnet"|"everyday"|"translation"|"dates"|"user", "seed", "n_train",
                "n_heldout", "level"},
     "metrics": {...}, "train": {"epochs", "seconds", "device", "torch"}, "description": str,
     "snapshots": [{"step", "epoch", "train_loss", "heldout_loss", …}] (optional: a run's snapshots)}

A run's snapshots (explorer.training.snapshots) sit beside it in `<name>.snapshots.safetensors`: tensor "<i>/<key>"
is parameter <key> of snapshot i, listed as meta["snapshots"][i].
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn
from safetensors.torch import save_file

from explorer.models.build import ARCHITECTURES

Meta = dict[str, Any]  # a checkpoint's JSON meta (config, corpus, metrics, vocabularies)

REQUIRED_KEYS = ("name", "architecture", "config")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ValueError(f"invalid checkpoint name {name!r}: use letters, digits, '.', '_' or '-'")


def trained_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """_unique_state_dict without the parameters that were not trained (requires_grad off: a fine-tune's frozen
    layers, which its base model holds)."""
    frozen = {n for n, p in model.named_parameters() if not p.requires_grad}
    return {k: t for k, t in _unique_state_dict(model).items() if k not in frozen}


def _unique_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """state_dict with tied (shared-storage) parameters stored once, as contiguous CPU tensors."""
    out: dict[str, torch.Tensor] = {}
    seen: dict[tuple[int, int, tuple[int, ...], tuple[int, ...]], str] = {}
    for key, t in model.state_dict().items():
        ident = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()))
        if ident in seen:
            continue  # tied weight: rebuilt by the constructor (e.g. tie_weights=True)
        seen[ident] = key
        out[key] = t.detach().to("cpu").contiguous().clone()
    return out


def _vocab_sizes_ok(meta: Meta) -> None:
    cfg = meta["config"]
    arch = meta["architecture"]
    if arch == "seq2seq":
        for vk, ck in (("src_vocab", "src_vocab_size"), ("tgt_vocab", "tgt_vocab_size")):
            if vk in meta and len(meta[vk]) != cfg.get(ck):
                raise ValueError(f"meta {vk!r} has {len(meta[vk])} tokens but config {ck} = {cfg.get(ck)}")
    elif "vocab" in meta and len(meta["vocab"]) != cfg.get("vocab_size"):
        raise ValueError(f"meta 'vocab' has {len(meta['vocab'])} tokens but config vocab_size = "
                         f"{cfg.get('vocab_size')}")


def validate_meta(meta: Meta) -> None:
    """Raise ValueError if the meta dict misses required keys or is inconsistent."""
    if not isinstance(meta, dict):
        raise ValueError("checkpoint meta must be a JSON object")
    missing = [k for k in REQUIRED_KEYS if k not in meta]
    if missing:
        raise ValueError(f"checkpoint meta is missing keys: {missing}")
    if meta["architecture"] not in ARCHITECTURES:
        raise ValueError(f"unknown architecture {meta['architecture']!r}; expected one of {sorted(ARCHITECTURES)}")
    if not isinstance(meta["config"], dict):
        raise ValueError("checkpoint meta 'config' must be an object")
    if meta["architecture"] == "seq2seq":
        if "src_vocab" not in meta or "tgt_vocab" not in meta:
            raise ValueError("seq2seq checkpoint meta needs 'src_vocab' and 'tgt_vocab'")
    elif "vocab" not in meta:
        raise ValueError("checkpoint meta is missing key 'vocab'")
    for k in ("vocab", "src_vocab", "tgt_vocab"):
        if k in meta and not (isinstance(meta[k], list) and all(isinstance(t, str) for t in meta[k])):
            raise ValueError(f"meta {k!r} must be a list of strings")
    _vocab_sizes_ok(meta)


def save_checkpoint(model: nn.Module, meta: Meta, folder: Path, name: str,
                    dtype: torch.dtype | None = None) -> tuple[Path, Path]:
    """Write folder/<name>.safetensors (floating-point tensors in `dtype`, default as they are) and
    folder/<name>.json; returns (weights_path, meta_path)."""
    _check_name(name)
    meta = dict(meta)
    meta["name"] = name
    validate_meta(meta)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    weights_path, meta_path = folder / f"{name}.safetensors", folder / f"{name}.json"
    state = {k: t.to(dtype) if dtype is not None and t.is_floating_point() else t
             for k, t in _unique_state_dict(model).items()}
    save_file(state, str(weights_path),
              metadata={"format": "pt", "architecture": meta["architecture"]})
    meta_path.write_text(json.dumps(meta, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    try:  # safetensors writes 0600; checkpoints are meant to be readable by the app's user
        weights_path.chmod(0o644)
    except OSError:
        pass
    return weights_path, meta_path


def read_meta(meta_path: Path) -> Meta:
    try:
        meta: Meta = json.loads(Path(meta_path).read_text(encoding="utf-8"))  # validate_meta: a dict of the keys
    except json.JSONDecodeError as e:
        raise ValueError(f"{Path(meta_path).name} is not valid JSON: {e}") from e
    validate_meta(meta)
    return meta


SERIES_SUFFIX = ".snapshots.safetensors"


def series_path(weights_path: Path) -> Path:
    """Where the snapshots of the checkpoint whose weights are `weights_path` (<name>.safetensors) are kept."""
    return weights_path.with_name(weights_path.name[: -len(".safetensors")] + SERIES_SUFFIX)


def series_steps(meta: object) -> tuple[int, ...]:
    """The optimiser steps of the snapshots that meta["snapshots"] lists, in order; () when it lists none or is not
    a list of {"step": int ≥ 0} in ascending order."""
    infos = meta.get("snapshots") if isinstance(meta, dict) else None
    if not isinstance(infos, list) or not infos:
        return ()
    steps = [i.get("step") if isinstance(i, dict) else None for i in infos]
    if not all(type(s) is int and s >= 0 for s in steps) or steps != sorted(set(steps)):  # type: ignore[type-var]
        return ()
    return tuple(steps)  # type: ignore[arg-type]


def read_snapshot(path: Path, index: int) -> tuple[dict[str, torch.Tensor], str]:
    """({parameter: float32 tensor}, the dtype they were stored in) of snapshot `index` in a series file: only its
    tensors are read (safetensors maps the file), so a step of a long series loads in milliseconds."""
    from safetensors import safe_open

    prefix = f"{index}/"
    with safe_open(str(path), framework="pt") as f:
        keys = [k for k in f.keys() if k.startswith(prefix)]
        if not keys:
            raise ValueError(f"{path.name} holds no snapshot {index}")
        tensors = {k[len(prefix):]: f.get_tensor(k) for k in keys}
    stored = sorted({str(t.dtype).removeprefix("torch.") for t in tensors.values()})
    return {k: t.float() for k, t in tensors.items()}, "/".join(stored)
