"""Faithfulness of token attributions: deletion and insertion curves, and the area between them (ABPC).

For one output f (the log-probability of a token, or of a label) of inputs E (N, C) with a baseline B (N, C), and an
attribution a over the perturbable inputs P (the others, e.g. a rotary model's first token or a classifier's [CLS],
stay as they are), inputs are ranked by a, largest first (ties by position). With K = |P|:
  deletion   D_k = f(E with the k top-ranked inputs replaced by B's),          k = 0 … K
  insertion  I_k = f(E with all but the k top-ranked inputs replaced by B's),        k = 0 … K
  ABPC = mean_k (I_k − D_k)  (nats): large when the top-ranked inputs carry f, whatever the order of the rest.
A random ranking gives ABPC ≈ 0 in expectation; an attribution that ranks the inputs f depends on first scores high.

`curves(logits, E, B, row, order, positions)` -> (deletion (K+1,), insertion (K+1,)); `abpc(d, i)` -> float;
`measured()` the shipped table (assets/faithfulness.json, written by bench/bench_faithfulness.py) and
`ranking(family)` the row the token-attribution and decision views name for a model family.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

TABLE = Path(__file__).resolve().parents[2] / "assets" / "faithfulness.json"
# the measured model that stands for a family (explorer.adapters family names)
MEASURED_FOR = {"decoder": "pretrained:smollm2", "rnn-lm": "builtin:lstm-lm-wordnet",
                "rnn-classifier": "builtin:sentiment-lstm", "masked-lm": "builtin:masked-lm-wordnet",
                "encoder": "builtin:masked-lm-wordnet"}
Logits = Callable[..., torch.Tensor]  # (n, N, C) -> (n, N or len(keep), V)


def order_of(attribution: np.ndarray, perturbable: Sequence[int]) -> list[int]:
    """The perturbable inputs ranked by attribution, largest first (ties: the earlier input first)."""
    return sorted(perturbable, key=lambda i: (-float(attribution[i]), i))


@torch.no_grad()
def curves(logits: Logits, E: torch.Tensor, B: torch.Tensor, position: int, target: int, order: Sequence[int],
           positions: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(deletion (K+1,), insertion (K+1,)): log p(target) at logit row `position` as the inputs of `order` are
    replaced by the baseline's one by one, and put back into the baseline one by one (module docstring); one batch
    of 2 (K + 1) inputs. positions: the logits function takes keep= (only that row is computed)."""
    K = len(order)
    X = E[None].repeat(2 * (K + 1), 1, 1)
    for k in range(K + 1):
        for i in order[:k]:
            X[k, i] = B[i]  # deleted
        for i in order[k:]:
            X[K + 1 + k, i] = B[i]  # not inserted yet
    out = logits(X, keep=[position])[:, 0] if positions else logits(X)[:, position]
    f = torch.log_softmax(out.double(), -1)[:, target].cpu().numpy()
    return f[:K + 1], f[K + 1:]


def abpc(deletion: np.ndarray, insertion: np.ndarray) -> float:
    """The area between the insertion and deletion curves, per step (nats)."""
    return float(np.mean(insertion - deletion))


@dataclass(frozen=True)
class Ranking:
    """One measured model's row: the methods by mean ABPC (largest first) with their means and standard errors
    over `sentences` held-out sentences, and the seconds each took per sentence (median)."""

    model: str
    sentences: int
    methods: tuple[str, ...]
    abpc: tuple[float, ...]
    stderr: tuple[float, ...]
    seconds: tuple[float, ...]

    def sentence(self, shown: str = "") -> str:
        """The ranking in one plain sentence with its numbers; shown: the model on screen (when it is not the one
        measured, the sentence says the ranking is its family's)."""
        parts = [f"{m} {a:+.2f} ± {e:.2f} nats" for m, a, e in zip(self.methods, self.abpc, self.stderr)]
        whose = f"on {self.model}" if shown in ("", self.model) else \
            f"for this model's family, on {self.model} (not on {shown} itself)"
        return (f"Measured faithfulness {whose} ({self.sentences} held-out sentences; the area between the insertion "
                f"and deletion curves, larger is more faithful): " + " > ".join(parts) + ".")


@functools.cache
def measured() -> dict[str, Ranking]:
    """The shipped table by model id ({} when it has not been measured)."""
    if not TABLE.exists():
        return {}
    rows = json.loads(TABLE.read_text())["models"]
    out = {}
    for mid, row in rows.items():
        stats = sorted(((m, s["abpc"], s["stderr"], s["seconds"]) for m, s in row["methods"].items()),
                       key=lambda t: -t[1])
        out[mid] = Ranking(mid, int(row["sentences"]), *(tuple(t[j] for t in stats) for j in range(4)))
    return out


FAST = ("LRP", "gradient × input")  # one backward pass each: the answers a view can paint at once


def first_answer(family: str) -> str:
    """The fast method drawn while integrated gradients are computed: the more faithful one measured for `family`
    (gradient × input where nothing was measured)."""
    row = ranking(family)
    if row is None:
        return "gradient × input"
    return next(m for m in row.methods if m in FAST)


def ranking(family: str) -> Ranking | None:
    """The measured row that stands for `family` (None: no model of that family was measured)."""
    mid = MEASURED_FOR.get(family)
    return measured().get(mid) if mid else None
