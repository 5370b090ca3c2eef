"""The built-in masked LM (explorer.models.masked_lm): read like the built-in GPT (the model records itself), without
the causal mask: every token attends to every other.

Text: `<bos>` + words + `<eos>`, as it was trained; `[MASK]` or `<mask>` typed anywhere (any case) is the model's
`<mask>` token. It predicts masked words, not the next token, so it does not generate.
"""
from __future__ import annotations

import re
from copy import copy
from dataclasses import replace
import numpy as np
import torch

from explorer.adapters.base import Adapter, Names, Record, Unsupported
from explorer.adapters.gpt import GPTAdapter
from explorer.adapters.protocols import Loaded
from explorer.adapters.text import Encoded, encode_vocab, no_text, token_limit
from explorer.data.vocab import tokenize_words

MASK_SPELLINGS = re.compile(r"\[\s*mask\s*\]|<\s*mask\s*>", re.IGNORECASE)  # what a user may type for the mask


class MaskedLMAdapter(GPTAdapter):
    name = "built-in masked LM"
    causal = False
    streams = {"encoder": "blocks.{l}.attn"}
    can_generate = False
    sliding = False
    has_head = True  # logits over the vocabulary at every position

    def __init__(self, loaded: Loaded) -> None:
        super().__init__(loaded)
        self.eos_ids = ()
        vocab = self.vocab
        self.mask_id = vocab.specials.get("mask") if vocab is not None else None
        self.mask_token = vocab.itos[self.mask_id] if vocab is not None and self.mask_id is not None else ""
        self._reader = None
        if vocab is not None and self.mask_id is not None:  # the vocabulary, reading typed masks as <mask>
            self._reader = copy(vocab)
            self._reader.splitter = self._pieces

    def _pieces(self, text: str) -> list[tuple[str, int | None]]:
        """(piece, id) of the words of `text` (lowercased, as trained), a typed mask as (<mask>, its id)."""
        out: list[tuple[str, int | None]] = []
        vocab = self.vocab
        assert vocab is not None  # the splitter of `_reader`, which only a vocabulary has
        for i, part in enumerate(MASK_SPELLINGS.split(text)):
            if i:
                out.append((self.mask_token, self.mask_id))
            out += [(t, vocab.stoi.get(t)) for t in tokenize_words(part, vocab.lower)]
        return out

    def encode(self, text: str, side: str = "input", pair: str = "", max_tokens: int | None = None) -> Encoded:
        """<bos> + the words (a typed [MASK] / <mask> as <mask>) + <eos>, cut to the model's positions."""
        if self.vocab is None or self.vocab.bos_id is None or self.vocab.eos_id is None:
            return Adapter.encode(self, text)  # no vocabulary to read text with: says so
        empty = no_text(text)
        if empty is not None:
            return empty
        limit, whose = token_limit(self.loaded, max_tokens)
        enc = encode_vocab(self._reader or self.vocab, text, max(limit - 1, 1), bos=True, whose=whose,
                           display=self.display)
        eos = self.vocab.eos_id
        return replace(enc, ids=enc.ids + (eos,), tokens=enc.tokens + (self.vocab.itos[eos],),
                       special=enc.special + (True,))

    def run(self, enc: Encoded, names: Names = None, target: Encoded | None = None, positions: bool = True,
            causal: bool = False, n_blocks: int | None = None, **options: object) -> Record:
        """The model's own record, with no causal mask (blocks.{l}.attn.mask all 0); causal=True is an experiment."""
        return super().run(enc, names, target, positions=positions, causal=causal, n_blocks=n_blocks, **options)

    def first_attention(self, enc: Encoded, positions: bool, causal: bool) -> tuple[np.ndarray, str]:
        """(T, C) output of block 0's attention (before the residual) on the input embeddings."""
        rec = self.run(enc, names=("blocks.0.attn.out",), positions=positions, causal=causal, n_blocks=1)
        what = "layer 0 self-attention with the model's own weights (ln_1, c_attn, c_proj), bidirectional" + \
            (", causal mask added" if causal else " (no causal mask, as trained)")
        return rec["blocks.0.attn.out"], what

    def start(self, ids: torch.Tensor, record: bool = False
              ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        raise Unsupported(f"{self.id} is a masked language model: it predicts masked words from both sides, not the "
                          "next token, so it does not generate. Open it in the masked-word view.")
