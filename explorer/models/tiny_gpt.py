"""Tiny decoder-only transformer in the style of nanoGPT (karpathy/nanoGPT, model.py).

Vaswani et al. (2017) "Attention is all you need"; Radford et al. (2019) GPT-2 (pre-norm).
Attention is computed explicitly (no fused SDPA kernel) so the softmax weights can be recorded:
`forward(idx, record={})` fills the dict with every activation under TransformerLens names (the explorer's
activation record), e.g. `blocks.{l}.attn.pattern` (B, n_head, T, T), rows summing to 1 and the upper triangle
(future positions) exactly 0.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Protocol

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


class SelfAttention(nn.Module):
    """Multi-head self-attention: softmax(q kᵀ / √d_head + M) v, where M is −inf above the diagonal (causal) and on
    padding keys (`keep` False), else 0."""

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

    def forward(self, x: torch.Tensor, record: dict | None = None, causal: bool = True,
                keep: torch.Tensor | None = None) -> torch.Tensor:
        """x (B, T, C) -> y (B, T, C). keep (B, T) bool: False on padding keys (None: no padding). record: receives
        q, k, v (B, nh, T, hs), scores (B, nh, T, T) before the mask, pattern (B, nh, T, T) after the softmax (masked
        weights exactly 0), out (B, T, C). causal=False removes the causal mask (the masked LM; on the GPT, an
        experiment: the trained model always masks)."""
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        hs = C // self.n_head
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)   # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))        # (B, nh, T, T)
        att = scores if keep is None else scores.masked_fill(~keep[:, None, None, :], float("-inf"))
        att = att.masked_fill(~self.bias[:, :, :T, :T], float("-inf")) if causal else att
        att = F.softmax(att, dim=-1)
        y = self.attn_dropout(att) @ v                                     # (B, nh, T, hs)
        y = self.resid_dropout(self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C)))
        if record is not None:
            record.update(q=q, k=k, v=v, scores=scores, pattern=att, out=y)
        return y


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
        self.attn = SelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor, record: dict | None = None, prefix: str = "",
                causal: bool = True, keep: torch.Tensor | None = None) -> torch.Tensor:
        """x (B, T, C) -> (B, T, C); keep (B, T) bool: False on padding keys. record: receives `{prefix}ln1` (what
        attention reads), `{prefix}attn.*` (see SelfAttention) and `{prefix}resid_mid`."""
        att: dict | None = {} if record is not None else None
        if self.norm == "pre":
            h = self.ln_1(x)
            x = x + self.attn(h, att, causal, keep)
            mid = x
            x = x + self.mlp(self.ln_2(x))
        else:
            h = x
            x = self.ln_1(x + self.attn(x, att, causal, keep))
            mid = x
            x = self.ln_2(x + self.mlp(x))
        if record is not None:
            record[prefix + "ln1"], record[prefix + "resid_mid"] = h, mid
            record.update({f"{prefix}attn.{k}": v for k, v in att.items()})
        return x


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

    def forward(self, idx: torch.Tensor | None, record: dict | None = None, positions: bool = True, causal: bool = True,
                n_blocks: int | None = None, embeds: torch.Tensor | None = None) -> torch.Tensor:
        """idx (B, T) -> logits (B, T, V).

        record: a dict that receives the activations under TransformerLens names: embed, pos_embed (T, C),
        blocks.{l}.resid_pre / ln1 / attn.q|k|v|scores|pattern|out / resid_mid / resid_post, ln_final
        (all (B, ...)). positions=False, causal=False and n_blocks (stop after that many blocks, no logits:
        returns None) are experiments on the trained model (the positional-encodings view's shuffle test).
        embeds (B, T, C): token embeddings used instead of wte(idx) (attribution differentiates against them)."""
        x = run_blocks(self, idx, record, positions, causal, n_blocks, embeds)
        if x is None:
            return None
        return self.lm_head(x)                                        # (B, T, V)


class Trunk(Protocol):
    """What run_blocks reads of a model: the built-in GPT's and the masked LM's modules of those names."""

    @property
    def config(self) -> GPTConfig: ...
    @property
    def wte(self) -> nn.Embedding: ...
    @property
    def drop(self) -> nn.Dropout: ...
    @property
    def h(self) -> nn.ModuleList: ...
    @property
    def ln_f(self) -> nn.LayerNorm: ...

    def position_embeddings(self, T: int) -> torch.Tensor: ...


def run_blocks(model: Trunk, idx: torch.Tensor | None, record: dict | None, positions: bool, causal: bool,
               n_blocks: int | None, embeds: torch.Tensor | None,
               keep: torch.Tensor | None = None) -> torch.Tensor | None:
    """The trunk of the built-in GPT and of the masked LM (explorer.models.masked_lm), which share its blocks:
    idx (B, T) or embeds (B, T, C) -> ln_f of the last block's output (B, T, C), recording what `forward` says;
    None after `n_blocks` blocks. keep (B, T) bool: False on padding keys."""
    given = embeds if embeds is not None else idx
    if given is None:
        raise ValueError("the blocks read token ids idx (B, T) or their embeddings (B, T, C)")
    T = given.shape[1]
    if T > model.config.block_size:
        raise ValueError(f"sequence of length {T} is longer than block_size {model.config.block_size}")
    tok, pos = (embeds if embeds is not None else model.wte(given)), model.position_embeddings(T)
    x = model.drop(tok + pos if positions else tok)                  # (B, T, C)
    if record is not None:
        record["embed"], record["pos_embed"] = tok, pos
    for layer, block in enumerate(model.h[:n_blocks] if n_blocks is not None else model.h):
        if record is not None:
            record[f"blocks.{layer}.resid_pre"] = x
        x = block(x, record, f"blocks.{layer}.", causal, keep)
        if record is not None:
            record[f"blocks.{layer}.resid_post"] = x
    if n_blocks is not None:
        return None
    x = model.ln_f(x)
    if record is not None:
        record["ln_final"] = x
    return x
