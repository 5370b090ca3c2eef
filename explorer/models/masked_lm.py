"""Tiny BERT-style masked language model: a bidirectional transformer encoder with a tied output layer.

Devlin et al. (2019) "BERT: pre-training of deep bidirectional transformers" (the masked-LM task: 15 % of the
tokens are chosen, 80 % of those replaced by [MASK], 10 % by a random token, 10 % kept; the model predicts the
chosen tokens from both sides). The blocks are explorer.models.tiny_gpt's, run without the causal mask: every
token attends to every other (padding excepted), pre-norm by default, a final LayerNorm, and logits
`lm_head(ln_f(x)) = ln_f(x) @ wte.weightᵀ + b` (the output layer's weight is the token embedding, tied as in BERT
and nanoGPT; its bias b is its own).

Attention is computed explicitly so the softmax weights can be recorded: `forward(idx, record={})` fills the dict
under the same names as the built-in GPT (`embed`, `pos_embed`, `blocks.{l}.resid_pre`, `blocks.{l}.ln1`,
`blocks.{l}.attn.q|k|v|scores|pattern|out`, `blocks.{l}.resid_mid`, `blocks.{l}.resid_post`, `ln_final`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn

from explorer.models.tiny_gpt import GPT, Block, GPTConfig, run_blocks


@dataclass
class MaskedLMConfig(GPTConfig):
    """GPTConfig's fields (the same blocks); positions: "learned" only (BERT's position_embeddings, which the adapters
    read)."""


class MaskedLM(nn.Module):
    """idx (B, T) token ids -> logits (B, T, V): at every position, the distribution over the token that belongs
    there, read from both sides (trained at the chosen positions only)."""

    def __init__(self, config: MaskedLMConfig) -> None:
        super().__init__()
        if config.norm not in ("pre", "post"):
            raise ValueError(f"norm must be 'pre' or 'post', got {config.norm!r}")
        if config.positions != "learned":
            raise ValueError(f"the masked LM has learned positions only, got {config.positions!r}")
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.block_size, config.n_embd)
        self.drop = nn.Dropout(config.dropout)
        self.h = nn.ModuleList([Block(config) for _ in range(config.n_layer)])
        self.ln_f = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=True)
        self.apply(GPT._init_weights)  # GPT-2's init, as the built-in GPT
        self.lm_head.weight = self.wte.weight  # tied: the checkpoint stores it once, as wte.weight
        for pn, p in self.named_parameters():  # GPT-2 scaled init of residual projections
            if pn.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    def position_embeddings(self, T: int) -> torch.Tensor:
        """(T, n_embd): the learned wpe rows."""
        return self.wpe.weight[:T]

    def forward(self, idx: torch.Tensor | None, record: dict | None = None, positions: bool = True,
                causal: bool = False, n_blocks: int | None = None, attention_mask: torch.Tensor | None = None,
                embeds: torch.Tensor | None = None, at: torch.Tensor | None = None) -> torch.Tensor | None:
        """idx (B, T) -> logits (B, T, V); with `at` (B, T) bool, only the logits of those positions, (K, V) in
        row-major order (training reads the chosen positions only: the output layer is most of the work).

        attention_mask (B, T): 1 for tokens, 0 for padding (padding keys get no weight; training batches).
        record: a dict that receives the activations (names in the module docstring; all (B, ...), pos_embed (T, C)).
        positions=False, causal=True and n_blocks (stop after that many blocks, no logits: returns None) are
        experiments on the trained model (the positional-encodings view's shuffle test). embeds (B, T, C): token
        embeddings used instead of wte(idx)."""
        keep = attention_mask.bool() if attention_mask is not None else None
        x = run_blocks(self, idx, record, positions, causal, n_blocks, embeds, keep)
        if x is None:
            return None
        return self.lm_head(x if at is None else x[at])              # (B, T, V) or (K, V)
