"""Recurrent language model: embedding -> Elman RNN / GRU / LSTM -> linear decoder.

Elman (1990) "Finding structure in time"; Hochreiter & Schmidhuber (1997) LSTM; Cho et al. (2014) GRU;
the layout (and optional weight tying, Press & Wolf 2017) follows the PyTorch word_language_model example.

The recurrence is `torch.nn.RNN/GRU/LSTM` (batch_first=True) with its standard parameter names
(`weight_ih_l0`, `weight_hh_l0`, `bias_ih_l0`, `bias_hh_l0`, ...), so the views can recompute every
gate from `model.rnn`'s weights with PyTorch's own equations and check them against its outputs.
"""
from __future__ import annotations

import torch
import torch.nn as nn

CELLS = ("rnn", "gru", "lstm")

Hidden = torch.Tensor | tuple[torch.Tensor, torch.Tensor]


class RNNLanguageModel(nn.Module):
    """Word- or character-level LM.

    Args:
        vocab_size: V.
        emb_dim: E, size of the input embeddings.
        hidden_size: H.
        num_layers: stacked recurrent layers.
        cell: "rnn" (Elman, tanh), "gru" or "lstm".
        dropout: on embeddings, between layers and before the decoder (0 = off).
        tie_weights: share `decoder.weight` with `embedding.weight` (needs E == H).
    """

    def __init__(
        self,
        vocab_size: int,
        emb_dim: int,
        hidden_size: int,
        num_layers: int = 1,
        cell: str = "lstm",
        dropout: float = 0.0,
        tie_weights: bool = False,
    ) -> None:
        super().__init__()
        if cell not in CELLS:
            raise ValueError(f"cell must be one of {CELLS}, got {cell!r}")
        if tie_weights and emb_dim != hidden_size:
            raise ValueError("tie_weights needs emb_dim == hidden_size")
        self.vocab_size, self.emb_dim, self.hidden_size = vocab_size, emb_dim, hidden_size
        self.num_layers, self.cell, self.tie_weights = num_layers, cell, tie_weights
        self.embedding = nn.Embedding(vocab_size, emb_dim)
        self.drop = nn.Dropout(dropout)
        rnn_dropout = dropout if num_layers > 1 else 0.0
        self.rnn: nn.LSTM | nn.GRU | nn.RNN
        if cell == "lstm":
            self.rnn = nn.LSTM(emb_dim, hidden_size, num_layers, batch_first=True, dropout=rnn_dropout)
        elif cell == "gru":
            self.rnn = nn.GRU(emb_dim, hidden_size, num_layers, batch_first=True, dropout=rnn_dropout)
        else:
            self.rnn = nn.RNN(emb_dim, hidden_size, num_layers, nonlinearity="tanh", batch_first=True,
                              dropout=rnn_dropout)
        self.decoder = nn.Linear(hidden_size, vocab_size)
        if tie_weights:
            self.decoder.weight = self.embedding.weight
        self._init_weights()

    def _init_weights(self) -> None:
        nn.init.uniform_(self.embedding.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)
        if not self.tie_weights:
            nn.init.uniform_(self.decoder.weight, -0.1, 0.1)
        if self.cell == "lstm":  # forget-gate bias 1 (Jozefowicz et al. 2015): gate order i, f, g, o
            H = self.hidden_size
            for name, p in self.rnn.named_parameters():
                if name.startswith("bias_ih"):
                    with torch.no_grad():
                        p[H:2 * H].fill_(1.0)

    def forward(self, ids: torch.Tensor, hidden: Hidden | None = None,
                record: dict | None = None) -> tuple[torch.Tensor, Hidden]:
        """ids (B, T) -> logits (B, T, V), hidden (num_layers, B, H) [LSTM: (h, c)].

        record: a dict that receives "embed" (B, T, E) and "out" (B, T, H), the top layer's outputs."""
        x = self.drop(self.embedding(ids))          # (B, T, E)
        out, hidden = self.rnn(x, hidden)           # (B, T, H)
        logits = self.decoder(self.drop(out))       # (B, T, V)
        if record is not None:
            record["embed"], record["out"] = x, out
        return logits, hidden
