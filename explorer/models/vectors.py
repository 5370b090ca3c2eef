"""A table of pretrained word vectors (GloVe: Pennington et al. 2014) as a module: one row per word, nothing else.

GloVe fits w_i · w̃_j + b_i + b̃_j ≈ log X_ij on a word–word co-occurrence matrix X; the published vectors (what
`weight` holds) are w + w̃. There is no context: a word has the same vector in every sentence.
"""
from __future__ import annotations

import torch
import torch.nn as nn


class WordVectors(nn.Module):
    """weight: (V, D) the vectors, row i for word id i (frozen)."""

    def __init__(self, weight: torch.Tensor) -> None:
        super().__init__()
        self.vectors = nn.Embedding.from_pretrained(weight, freeze=True)

    @property
    def weight(self) -> torch.Tensor:
        return self.vectors.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """ids (T,) -> (T, D) their vectors."""
        return self.vectors(ids)
