"""Skip-gram with negative sampling (Mikolov et al. 2013, "Distributed representations of words and
phrases and their compositionality").

For a (center w_c, context w_o) pair and K noise words w_k ~ P_n(w) = U(w)^0.75 / Z:
    loss = -log sigma(u_o . v_c) - sum_k log sigma(-u_k . v_c)
where v = `in_embed` (the word vectors shown in the app) and u = `out_embed` (context vectors).
Frequent words can be subsampled: keep w with probability min(1, sqrt(t / f(w)) + t / f(w)) (word2vec C code).
"""
from __future__ import annotations

import random

import torch
import torch.nn as nn
import torch.nn.functional as F


class SkipGram(nn.Module):
    def __init__(self, vocab_size: int, dim: int = 64) -> None:
        super().__init__()
        self.vocab_size, self.dim = vocab_size, dim
        self.in_embed = nn.Embedding(vocab_size, dim)    # v: the word vectors
        self.out_embed = nn.Embedding(vocab_size, dim)   # u: context vectors
        nn.init.uniform_(self.in_embed.weight, -0.5 / dim, 0.5 / dim)
        nn.init.zeros_(self.out_embed.weight)

    def forward(self, center: torch.Tensor, context: torch.Tensor, negatives: torch.Tensor) -> torch.Tensor:
        """center (B,), context (B,), negatives (B, K) ids -> mean negative-sampling loss (scalar)."""
        v = self.in_embed(center)                                            # (B, D)
        u_o = self.out_embed(context)                                        # (B, D)
        u_k = self.out_embed(negatives)                                      # (B, K, D)
        pos = F.logsigmoid((u_o * v).sum(-1))                                # (B,)
        neg = F.logsigmoid(-torch.bmm(u_k, v.unsqueeze(2)).squeeze(2)).sum(-1)  # (B,)
        return -(pos + neg).mean()

    @property
    def vectors(self) -> torch.Tensor:
        """(V, D) word vectors (in_embed)."""
        return self.in_embed.weight

    @torch.no_grad()
    def nearest(self, word_id: int, k: int = 5, exclude: set[int] | None = None) -> list[tuple[int, float]]:
        """The k ids with the highest cosine similarity to word_id (itself and `exclude` left out)."""
        W = F.normalize(self.in_embed.weight, dim=1)
        sims = W @ W[word_id]
        sims[word_id] = -float("inf")
        for i in exclude or ():
            sims[i] = -float("inf")
        top = sims.topk(min(k, self.vocab_size - 1))
        return list(zip(top.indices.tolist(), top.values.tolist()))


def noise_distribution(counts: list[int] | torch.Tensor, power: float = 0.75) -> torch.Tensor:
    """Unigram^power, normalised: (V,). Zero-count ids (e.g. specials) get probability 0."""
    c = torch.as_tensor(counts, dtype=torch.float64).clamp(min=0)
    p = c.pow(power)
    return (p / p.sum()).float()


def keep_probability(counts: list[int] | torch.Tensor, t: float = 1e-3) -> torch.Tensor:
    """Subsampling keep probability per id (word2vec C code): min(1, (sqrt(f/t) + 1) * t / f)."""
    c = torch.as_tensor(counts, dtype=torch.float64)
    f = c / c.sum().clamp(min=1)
    keep = torch.where(f > 0, (torch.sqrt(f / t) + 1) * t / f.clamp(min=1e-12), torch.ones_like(f))
    return keep.clamp(max=1.0).float()


def skipgram_pairs(sentences: list[list[int]], window: int = 2, keep: torch.Tensor | None = None,
                   seed: int = 0, dynamic_window: bool = True) -> torch.Tensor:
    """(N, 2) (center, context) id pairs within `window` (shrunk at random per center as in word2vec)."""
    rng = random.Random(seed)
    pairs: list[tuple[int, int]] = []
    keep_list = keep.tolist() if keep is not None else None
    for sent in sentences:
        if keep_list is not None:
            sent = [w for w in sent if rng.random() < keep_list[w]]
        for i, c in enumerate(sent):
            w = rng.randint(1, window) if dynamic_window else window
            for j in range(max(0, i - w), min(len(sent), i + w + 1)):
                if j != i:
                    pairs.append((c, sent[j]))
    if not pairs:
        return torch.zeros(0, 2, dtype=torch.long)
    return torch.tensor(pairs, dtype=torch.long)


__all__ = ["SkipGram", "noise_distribution", "keep_probability", "skipgram_pairs"]
