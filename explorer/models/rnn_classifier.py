"""Recurrent classifier and tagger: embedding -> Elman RNN / GRU / LSTM (one or two directions) -> Linear(D·H -> C).

The lab model of every NLP course: a sentence classifier (sentiment) pools the top layer's states into one vector
(`pooling`: "last", the final state of each direction as `torch.cat((h_n[-2], h_n[-1]), 1)` gives it; "mean";
"max"; "first") and reads it through the head; a tagger (part of speech) reads each token's state through it
(Graves & Schmidhuber 2005 bidirectional LSTM; Huang, Xu & Yu 2015 for tagging). Parameter names are torch's
(`rnn.weight_ih_l0`, `head.weight`), so the explorer reads this model as it reads a student's state dict
(explorer.adapters.recurrent) and recomputes every gate from `rnn`'s weights.
"""
from __future__ import annotations

import torch
import torch.nn as nn

from explorer.models.rnn_lm import CELLS, Hidden

TASKS = ("classify", "tag")
POOLINGS = ("last", "mean", "max", "first")


def pool(out: torch.Tensor, how: str, directions: int) -> torch.Tensor:
    """(B, T, D·H) top-layer states -> (B, D·H): `how` of POOLINGS. "last" is h_n of each direction: the forward
    half at the last token, the backward half at the first (what `torch.cat((h_n[-2], h_n[-1]), 1)` gives)."""
    if how == "mean":
        return out.mean(1)
    if how == "max":
        return out.max(1).values
    if how == "first":
        return out[:, 0]
    if directions == 2:
        H = out.shape[-1] // 2
        return torch.cat([out[:, -1, :H], out[:, 0, H:]], dim=-1)
    return out[:, -1]


class RNNClassifier(nn.Module):
    """ids (B, T) -> label logits (B, C) (task "classify") or (B, T, C) (task "tag").

    Args:
        vocab_size: V. emb_dim: E. hidden_size: H. num_layers: stacked recurrent layers. cell: "rnn", "gru" or
        "lstm". bidirectional: two directions (D = 2). num_labels: C. task: "classify" or "tag". pooling: how a
        sentence classifier reads its states (POOLINGS). dropout: on embeddings and before the head (0 = off).
    """

    def __init__(self, vocab_size: int, emb_dim: int, hidden_size: int, num_labels: int, num_layers: int = 1,
                 cell: str = "lstm", bidirectional: bool = False, task: str = "classify", pooling: str = "last",
                 dropout: float = 0.0) -> None:
        super().__init__()
        if cell not in CELLS or task not in TASKS or pooling not in POOLINGS:
            raise ValueError(f"cell in {CELLS}, task in {TASKS}, pooling in {POOLINGS}; got {cell}, {task}, {pooling}")
        self.task, self.pooling, self.directions = task, pooling, 2 if bidirectional else 1
        self.embedding = nn.Embedding(vocab_size, emb_dim)
        self.drop = nn.Dropout(dropout)
        kind = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}[cell]
        self.rnn: nn.RNNBase = kind(emb_dim, hidden_size, num_layers, batch_first=True, bidirectional=bidirectional,
                                    dropout=dropout if num_layers > 1 else 0.0)
        self.decoder = None  # no output layer over the vocabulary: it predicts no next word
        self.head = nn.Linear(self.directions * hidden_size, num_labels)

    def forward(self, ids: torch.Tensor, hidden: Hidden | None = None,
                record: dict | None = None) -> tuple[None, Hidden]:
        """The recurrence as the language models run it: ids (B, T) -> (None, hidden); record receives "embed"
        (B, T, E) and "out" (B, T, D·H). The labels are `decide(ids)`'s."""
        x = self.embedding(ids)
        out, hidden = self.rnn(x, hidden)
        if record is not None:
            record["embed"], record["out"] = x, out
        return None, hidden

    def decide(self, ids: torch.Tensor) -> torch.Tensor:
        """ids (B, T) -> (B, C) label logits of each sentence, or (B, T, C) of each token."""
        out, _ = self.rnn(self.drop(self.embedding(ids)))
        out = self.drop(out)
        return self.head(out if self.task == "tag" else pool(out, self.pooling, self.directions))
