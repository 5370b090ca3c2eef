"""Snapshots of a model over its training: the weights at log-spaced optimiser steps, so that early change is seen.

`schedule(total, count)` -> the steps to keep: 0 (the initialisation) and `total` (the end of training) and steps
between them spaced evenly in log(step), at most `count` in all. A Snapshots collector, handed to
explorer.training.loop.train_model, keeps each one's weights (as stored: float16 by default, on the CPU) with its
step, epoch, the training examples' mean loss since the snapshot before, and the held-out loss of those weights.

Saved as one safetensors file beside the checkpoint (`<name>.snapshots.safetensors`: tensor "<i>/<parameter>" for
snapshot i) and a list in the checkpoint's meta["snapshots"] (step, epoch, train_loss, heldout_loss per snapshot);
`read(path, meta)` gives back each snapshot's info and state dict (float32 tensors of the stored values).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TypeVar

import torch
import torch.nn as nn

T = TypeVar("T")

if TYPE_CHECKING:
    from explorer.runtime.json_value import JSON, JSONDict

COUNT = 30  # snapshots per run by default


def schedule(total: int, count: int = COUNT) -> tuple[int, ...]:
    """The optimiser steps to snapshot, ascending: 0, `total` and up to count − 2 between, log-spaced (steps 1, 2, 3 …
    come first where the log spacing is finer than one step)."""
    if total <= 0 or count <= 1:
        return (0,)
    count = min(count, total + 1)
    if count == 2:
        return (0, total)
    # 1 … total in count − 1 points evenly spaced in log(step)
    logs = {round(math.exp(math.log(total) * i / (count - 2))) for i in range(count - 1)}
    steps = sorted({0, total} | {s for s in logs if 0 < s < total})
    k = 1
    while len(steps) < count:  # where rounding merged steps, fill in the earliest ones left out
        if k not in steps:
            steps.append(k)
            steps.sort()
        k += 1
    return tuple(steps)


@dataclass
class Snapshots:
    """The snapshots of one run: `steps` to take (schedule), `stored` their dtype. `take` is called by the training
    loop at each of those steps with the loss so far; `infos` and `states` hold what was taken, in order."""

    steps: tuple[int, ...]
    stored: torch.dtype = torch.float16
    infos: list[JSONDict] = field(default_factory=list)
    states: list[dict[str, torch.Tensor]] = field(default_factory=list)

    def due(self, step: int) -> bool:
        return step in self.steps

    def take(self, model: nn.Module, step: int, epoch: int, train_loss: float | None, heldout_loss: float | None,
             measures: Mapping[str, float | None] | None = None) -> None:
        """Keep `model`'s weights at `step`, with its losses and other held-out `measures` (e.g. a classifier's
        heldout_accuracy)."""
        self.states.append(_as_stored(model, self.stored))
        self.infos.append({"step": step, "epoch": epoch, "train_loss": train_loss, "heldout_loss": heldout_loss,
                           **(measures or {}), "dtype": str(self.stored).removeprefix("torch.")})

    def heldout_loss_as_stored(self, model: nn.Module, heldout_loss: Callable[[], T]) -> T:
        """heldout_loss() (or any held-out measure) of `model` with its weights rounded to the stored dtype (put back
        after)."""
        if self.stored == torch.float32:
            return heldout_loss()
        live = {k: v.detach().clone() for k, v in model.state_dict().items() if v.is_floating_point()}
        with torch.no_grad():
            model.load_state_dict(stored_weights(model, self.stored), strict=False)
            try:
                return heldout_loss()
            finally:
                model.load_state_dict(live, strict=False)

    def flat(self) -> dict[str, torch.Tensor]:
        """Every snapshot's weights as the series file holds them: tensor "<i>/<parameter>" for snapshot i."""
        return {f"{i}/{k}": v.contiguous() for i, state in enumerate(self.states) for k, v in state.items()}

    def save(self, path: Path) -> list[JSON]:
        """Write every snapshot's weights to `path` (safetensors); returns meta["snapshots"]."""
        from safetensors.torch import save_file

        save_file(self.flat(), str(path))
        return [dict(info) for info in self.infos]


def _as_stored(model: nn.Module, stored: torch.dtype) -> dict[str, torch.Tensor]:
    """(name -> tensor) a copy of the model's floating-point weights on the CPU in `stored`."""
    frozen = {n for n, p in model.named_parameters() if not p.requires_grad}  # a fine-tune's frozen layers
    return {k: v.detach().to("cpu", stored).clone() for k, v in model.state_dict().items()
            if v.is_floating_point() and k not in frozen}


def stored_weights(model: nn.Module, stored: torch.dtype) -> dict[str, torch.Tensor]:
    """(name -> float32 tensor) the model's floating-point weights as a snapshot stores them (rounded to `stored`)."""
    return {k: v.float() for k, v in _as_stored(model, stored).items()}


def read(path: Path, meta: Mapping[str, JSON]) -> list[tuple[JSON, dict[str, torch.Tensor]]]:
    """Each snapshot's info (meta["snapshots"]) and its state dict as float32 tensors, from a file written by save."""
    from explorer.loading.checkpoint import read_snapshot

    infos = meta.get("snapshots", [])
    assert isinstance(infos, list)  # the list save() returned
    return [(info, read_snapshot(path, i)[0]) for i, info in enumerate(infos)]
