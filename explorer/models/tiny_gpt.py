"""Tiny decoder-only transformer in the style of nanoGPT (karpathy/nanoGPT, model.py).

Vaswani et al. (2017) "Attention is all you need"; Radford et al. (2019) GPT-2 (pre-norm).
Attention is computed explicitly (no fused SDPA kernel) so the softmax weights can be returned:
`forward(idx, return_attentions=True)` gives one (B, n_head, T, T) tensor per layer, rows summing to 1
and the upper triangle (future positions) exactly 0.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class GPTConfig:
    vocab_size: int
    block_size: int
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0
    bias: bool = True
    norm: str = "pre"            # "pre" (GPT-2) or "post" (original transformer)
    positions: str = "learned"   # "learned" (GPT-2 wpe) or "sinusoidal" (Vaswani et al.)

    def to_dict(self) -> dict:
        return asdict(self)


def sinusoidal_positions(n_positions: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """(n_positions, d_model): PE[pos, 2i] = sin(pos / base^(2i/d)), PE[pos, 2i+1] = cos(pos / base^(2i/d))."""
    pos = torch.arange(n_positions, dtype=torch.float64).unsqueeze(1)           # (P, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)                    # (ceil(d/2),)
    angle = pos / torch.pow(torch.tensor(base, dtype=torch.float64), two_i / d_model)  # (P, ceil(d/2))
    pe = torch.zeros(n_positions, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return pe.float()


class CausalSelfAttention(nn.Module):
    """Multi-head masked self-attention: softmax(q k^T / sqrt(d_head) + mask) v."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)  # q, k, v (in that order)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head, self.n_embd = config.n_head, config.n_embd
        mask = torch.tril(torch.ones(config.block_size, config.block_size, dtype=torch.bool))
        self.register_buffer("bias", mask.view(1, 1, config.block_size, config.block_size), persistent=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x (B, T, C) -> y (B, T, C), att (B, n_head, T, T) after softmax."""
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        hs = C // self.n_head
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)   # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))           # (B, nh, T, T)
        att = att.masked_fill(~self.bias[:, :, :T, :T], float("-inf"))
        att = F.softmax(att, dim=-1)                                       # future weights exactly 0
        y = self.attn_dropout(att) @ v                                     # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y)), att


class MLP(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    """Pre-norm: x + attn(ln_1(x)), then x + mlp(ln_2(x)). Post-norm: ln_1(x + attn(x)), ln_2(x + mlp(x))."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.norm = config.norm
        self.ln_1 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.norm == "pre":
            a, att = self.attn(self.ln_1(x))
            x = x + a
            x = x + self.mlp(self.ln_2(x))
        else:
            a, att = self.attn(x)
            x = self.ln_1(x + a)
            x = self.ln_2(x + self.mlp(x))
        return x, att


class GPT(nn.Module):
    """idx (B, T) token ids -> logits (B, T, V). `ln_f` is applied in both norm modes."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        if config.norm not in ("pre", "post"):
            raise ValueError(f"norm must be 'pre' or 'post', got {config.norm!r}")
        if config.positions not in ("learned", "sinusoidal"):
            raise ValueError(f"positions must be 'learned' or 'sinusoidal', got {config.positions!r}")
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        if config.positions == "learned":
            self.wpe = nn.Embedding(config.block_size, config.n_embd)
        else:
            self.register_buffer("wpe", sinusoidal_positions(config.block_size, config.n_embd), persistent=False)
        self.drop = nn.Dropout(config.dropout)
        self.h = nn.ModuleList([Block(config) for _ in range(config.n_layer)])
        self.ln_f = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():  # GPT-2 scaled init of residual projections
            if pn.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def position_embeddings(self, T: int) -> torch.Tensor:
        """(T, n_embd): the learned wpe rows or the fixed sinusoidal table."""
        if self.config.positions == "learned":
            return self.wpe.weight[:T]
        return self.wpe[:T]

    def forward(self, idx: torch.Tensor, return_attentions: bool = False):
        """idx (B, T) -> logits (B, T, V) [, attentions: list over layers of (B, n_head, T, T)]."""
        B, T = idx.size()
        if T > self.config.block_size:
            raise ValueError(f"sequence of length {T} is longer than block_size {self.config.block_size}")
        x = self.drop(self.wte(idx) + self.position_embeddings(T))   # (B, T, C)
        attentions = []
        for block in self.h:
            x, att = block(x)
            attentions.append(att)
        logits = self.lm_head(self.ln_f(x))                            # (B, T, V)
        return (logits, attentions) if return_attentions else logits


TinyGPT = GPT
