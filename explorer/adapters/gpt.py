"""The built-in GPT (explorer.models.tiny_gpt): the model records its own activations (`forward(record=...)`).

Text: `<bos>` + words, as it was trained. Generation has no KV cache in the model file, so each step re-reads the
context; beyond block_size the context slides (the last block_size tokens, as nanoGPT's `generate` does).
"""
from __future__ import annotations

import math
from typing import Sequence, cast

import numpy as np
import torch

from explorer.adapters.base import (Acts, Adapter, Attends, Names, Positions, PositionTable, Record, Table,
                                    causal_mask)
from explorer.adapters import lrp
from explorer.adapters.interventions import PatchesBlocks, TransformerSites
from explorer.adapters.protocols import Loaded
from explorer.adapters.text import Encoded, VocabText


class GPTAdapter(VocabText, PatchesBlocks, Attends, Positions, Adapter):
    name = "built-in GPT"
    causal = True
    streams = {"decoder": "blocks.{l}.attn"}
    can_generate = True
    sliding = True

    def __init__(self, loaded: Loaded) -> None:
        super().__init__(loaded)
        cfg = self.model.config
        self.vocab = loaded.vocabs.get("vocab")
        self.vocab_size, self.context_len = int(cfg.vocab_size), int(cfg.block_size)
        self.n_layers, self.n_heads = int(cfg.n_layer), int(cfg.n_head)
        if self.vocab is not None:
            self.bos_id, self.pad_id = self.vocab.bos_id, self.vocab.pad_id
            self.eos_ids = () if self.vocab.eos_id is None else (self.vocab.eos_id,)
        blocks = list(self.model.h)
        self.patch_sites = TransformerSites(blocks, [b.attn for b in blocks], [b.mlp for b in blocks],
                                      [b.attn.c_proj for b in blocks], self.n_heads, int(cfg.n_embd) // self.n_heads)
        self.patch_sites.install()  # once, at load: the hooks act only inside an intervention scope
        lrp.install(self.model)  # once, at load: the hooks act only where relevance is propagated

    def run(self, enc: Encoded, names: Names = None, target: Encoded | None = None, positions: bool = True,
            causal: bool = True, n_blocks: int | None = None, **options: object) -> Record:
        """The model's own record (GPT.forward), batch dimension removed; plus blocks.{l}.attn.scale and .mask.
        positions / causal / n_blocks: experiments (see GPT.forward)."""
        acts = Acts(names)
        T = len(enc.ids)
        with torch.inference_mode():
            rec: dict[str, torch.Tensor] = {}
            logits = self.model(torch.tensor([list(enc.ids)], device=self.device), record=rec, positions=positions,
                                causal=causal, n_blocks=n_blocks)
            for name, value in rec.items():
                acts.put(name, value if name == "pos_embed" else value[0])
            mask = causal_mask(T) if causal else torch.zeros(T, T)
            scale = torch.tensor(1.0 / math.sqrt(self.model.config.n_embd // self.n_heads), dtype=torch.float64)
            for layer in range(n_blocks or self.n_layers):
                acts.put(f"blocks.{layer}.attn.mask", mask)
                acts.put(f"blocks.{layer}.attn.scale", scale)
            if logits is not None:
                acts.put("logits", logits[0])
        return Record(enc, acts.out)

    def scalings(self, stream: str) -> tuple[float | None, ...]:
        """1/√(head size) in every layer (explorer.models.tiny_gpt.SelfAttention)."""
        return (1.0 / math.sqrt(self.head_size(stream)),) * self.n_layers

    def head_size(self, stream: str) -> int:
        return int(self.model.config.n_embd) // self.n_heads

    def first_attention(self, enc: Encoded, positions: bool, causal: bool) -> tuple[np.ndarray, str]:
        """(T, C) output of block 0's attention (before the residual) on the input embeddings, with or without the
        position vectors and the causal mask (the positional-encodings view's shuffle test)."""
        rec = self.run(enc, names=("blocks.0.attn.out",), positions=positions, causal=causal, n_blocks=1)
        what = "layer 0 self-attention with the model's own weights (ln_1, c_attn, c_proj)" + \
            ("" if causal else ", causal mask removed")
        return rec["blocks.0.attn.out"], what

    # ------------------------------------------------------------------ generation
    lens_names = ("blocks.*.resid_post", "ln_final", "logits")

    def unembed(self, x: torch.Tensor, normed: bool = False) -> torch.Tensor:
        x = x.to(self.model.lm_head.weight.dtype)  # float32 states meet a half-precision model in its dtype
        return cast(torch.Tensor, self.model.lm_head(x if normed else self.model.ln_f(x)))

    def lens_states(self, rec: Record) -> list[tuple[str, torch.Tensor, bool]]:
        """After block l: blocks.{l}.resid_post (the last one is read after ln_f, as the model reads it)."""
        L = len(rec.layers("blocks.{l}.resid_post"))
        return [(f"layer {layer}", torch.from_numpy(rec[f"blocks.{layer}.resid_post"]), False) for layer in range(L)]

    def embed_ids(self, ids: torch.Tensor, side: str = "input") -> torch.Tensor:
        return cast(torch.Tensor, self.model.wte(ids))

    def logits_from_embeddings(self, embeds: torch.Tensor, target: torch.Tensor | None = None,
                               keep: Sequence[int] | None = None) -> torch.Tensor:
        logits = self.model(None, embeds=embeds)
        return cast(torch.Tensor, logits if keep is None else logits[:, list(keep)])

    def _block_logits(self, ids: torch.Tensor) -> torch.Tensor:
        return cast(torch.Tensor, self.model(ids)[:, -1, :])

    def _logits(self, ids: torch.Tensor) -> torch.Tensor:
        return cast(torch.Tensor, self.model(ids[:, -int(self.context_len or ids.shape[1]):])[:, -1, :].float())

    # The generation state is the ids read so far (B, T): the model has no KV cache, each step re-reads them.
    def start(self, ids: torch.Tensor, record: bool = False
              ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        return self._logits(ids), ids, {}

    def step(self, state: torch.Tensor, tokens: torch.Tensor,
             record: bool = False) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        ids = torch.cat([state, tokens[:, None]], dim=1)
        return self._logits(ids), ids, {}

    def reorder(self, state: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        return state[idx]

    # ------------------------------------------------------------------ tables
    def tables(self) -> dict[str, Table]:
        from explorer.data.vocab import SPECIALS

        weight = self.model.wte.weight
        words = tuple(self.token_strings(range(weight.shape[0])))
        freq = dict(self.vocab.freq) if self.vocab is not None and self.vocab.freq else None
        return {"input": Table("wte (token embeddings)", weight, words, tuple(w in SPECIALS for w in words), freq)}

    def position_table(self) -> PositionTable:
        kind = self.model.config.positions
        weight = self.model.wpe.weight if kind == "learned" else self.model.wpe
        return PositionTable("wpe", kind, weight)
