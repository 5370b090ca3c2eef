"""Uniform next-token logits for every model that can generate text.

One small interface (`CausalLM`), one adapter per family (inseq keeps decoder-only and encoder-decoder
models as separate adapters behind one interface; so do we):

  TinyGPTLM      explorer.models.tiny_gpt.GPT: no KV cache in the model file, so each step re-reads the
                 context; beyond block_size the context slides (the last block_size tokens, as nanoGPT's
                 `generate` does)
  RNNLM          explorer.models.rnn_lm.RNNLanguageModel: the recurrent state is the cache
  HFDecoderLM    any Hugging Face causal LM (GPT-2 family, ...): `past_key_values` cache, as model.generate
  HFSeq2SeqLM    any Hugging Face encoder-decoder: the prompt is the encoder input; the decoder starts from
                 decoder_start_token_id; encoder outputs computed once, decoder cache as model.generate

All logits are float32 (B, V) for the next position. `State` is opaque; `reorder(state, idx)` keeps rows
`idx` (beam search). Nothing is attached to the shared model.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


class CannotGenerate(ValueError):
    """The loaded model cannot produce next-token logits; the message is shown to the user."""


@dataclass
class State:
    data: Any
    length: int  # tokens read so far (prompt + generated), per row


class CausalLM:
    """The interface. ids are LongTensors on `self.device`."""

    name = "lm"
    vocab_size: int
    bos_id: int | None = None
    eos_id: int | None = None
    pad_id: int | None = None
    context_len: int | None = None  # positions the model can read at once (None: unbounded)
    sliding: bool = False  # beyond context_len, the oldest tokens are dropped (built-in GPT)
    is_encoder_decoder = False
    hf = False

    def __init__(self, loaded: Any) -> None:
        self.loaded = loaded
        self.model = loaded.model
        self.device = torch.device(loaded.device)

    def prefill(self, ids: torch.Tensor) -> tuple[torch.Tensor, State]:
        """ids (B, T) -> logits (B, V) of the next token after ids, state."""
        raise NotImplementedError

    def step(self, state: State, tokens: torch.Tensor) -> tuple[torch.Tensor, State]:
        """tokens (B,) appended -> logits (B, V) of the next token, new state."""
        raise NotImplementedError

    def reorder(self, state: State, idx: torch.Tensor) -> State:
        raise NotImplementedError

    # text
    def token_strings(self, ids: list[int]) -> list[str]:
        raise NotImplementedError

    def decode(self, ids: list[int]) -> str:
        raise NotImplementedError


class TinyGPTLM(CausalLM):
    name = "explorer GPT"
    sliding = True

    def __init__(self, loaded: Any) -> None:
        super().__init__(loaded)
        cfg = self.model.config
        self.vocab_size, self.context_len = int(cfg.vocab_size), int(cfg.block_size)
        _vocab_ids(self, loaded)

    def _logits(self, ids: torch.Tensor) -> torch.Tensor:
        ctx = ids[:, -self.context_len:]
        return self.model(ctx)[:, -1, :].float()

    def prefill(self, ids):
        return self._logits(ids), State(ids, ids.shape[1])

    def step(self, state, tokens):
        ids = torch.cat([state.data, tokens[:, None]], dim=1)
        return self._logits(ids), State(ids, ids.shape[1])

    def reorder(self, state, idx):
        return State(state.data[idx], state.length)

    def token_strings(self, ids):
        return _vocab_tokens(self.loaded, ids)

    def decode(self, ids):
        return " ".join(_vocab_tokens(self.loaded, ids))


class RNNLM(CausalLM):
    name = "explorer RNN LM"

    def __init__(self, loaded: Any) -> None:
        super().__init__(loaded)
        self.vocab_size = int(self.model.vocab_size)
        _vocab_ids(self, loaded)

    def prefill(self, ids):
        logits, hidden = self.model(ids)
        return logits[:, -1, :].float(), State(hidden, ids.shape[1])

    def step(self, state, tokens):
        logits, hidden = self.model(tokens[:, None], state.data)
        return logits[:, -1, :].float(), State(hidden, state.length + 1)

    def reorder(self, state, idx):
        h = state.data
        h = tuple(x[:, idx] for x in h) if isinstance(h, tuple) else h[:, idx]
        return State(h, state.length)

    def token_strings(self, ids):
        return _vocab_tokens(self.loaded, ids)

    def decode(self, ids):
        return " ".join(_vocab_tokens(self.loaded, ids))


class HFDecoderLM(CausalLM):
    name = "Hugging Face causal LM"
    hf = True

    def __init__(self, loaded: Any) -> None:
        super().__init__(loaded)
        cfg = self.model.config
        text_cfg = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
        self.vocab_size = int(getattr(text_cfg, "vocab_size"))
        gen = getattr(self.model, "generation_config", None)
        tok = loaded.tokenizer
        self.bos_id = _first_int(getattr(gen, "bos_token_id", None), getattr(cfg, "bos_token_id", None),
                                 getattr(tok, "bos_token_id", None))
        self.eos_id = _first_int(getattr(gen, "eos_token_id", None), getattr(cfg, "eos_token_id", None),
                                 getattr(tok, "eos_token_id", None))
        self.pad_id = _first_int(getattr(gen, "pad_token_id", None), getattr(cfg, "pad_token_id", None),
                                 getattr(tok, "pad_token_id", None))
        for name in ("n_positions", "max_position_embeddings"):
            value = getattr(text_cfg, name, None)
            if isinstance(value, int) and value > 0:
                self.context_len = value
                break

    def prefill(self, ids):
        mask = torch.ones_like(ids)
        out = self.model(input_ids=ids, attention_mask=mask, use_cache=True, return_dict=True)
        return out.logits[:, -1, :].float(), State((out.past_key_values, mask), ids.shape[1])

    def step(self, state, tokens):
        cache, mask = state.data
        mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], dim=1)
        out = self.model(input_ids=tokens[:, None], attention_mask=mask, past_key_values=cache, use_cache=True,
                         return_dict=True)
        return out.logits[:, -1, :].float(), State((out.past_key_values, mask), state.length + 1)

    def reorder(self, state, idx):
        cache, mask = state.data
        cache.reorder_cache(idx)
        return State((cache, mask[idx]), state.length)

    def token_strings(self, ids):
        tok = self.loaded.tokenizer
        if tok is None:
            return [f"#{i}" for i in ids]
        out = []
        for i, t in zip(ids, tok.convert_ids_to_tokens(list(ids))):
            if not isinstance(t, str):  # an id the tokenizer does not know (model vocab padded beyond it)
                out.append(f"#{i}")
                continue
            try:
                out.append(tok.convert_tokens_to_string([t]))
            except Exception:
                out.append(t)
        return out

    def decode(self, ids):
        tok = self.loaded.tokenizer
        if tok is None:
            return " ".join(f"#{i}" for i in ids)
        try:
            return tok.decode(list(ids))
        except Exception:
            return "".join(self.token_strings(ids))


class HFSeq2SeqLM(HFDecoderLM):
    name = "Hugging Face encoder-decoder"
    is_encoder_decoder = True

    def __init__(self, loaded: Any) -> None:
        super().__init__(loaded)
        cfg = self.model.config
        gen = getattr(self.model, "generation_config", None)
        self.decoder_start_id = _first_int(getattr(gen, "decoder_start_token_id", None),
                                           getattr(cfg, "decoder_start_token_id", None), self.pad_id, self.bos_id)
        if self.decoder_start_id is None:
            raise CannotGenerate(f"{loaded.id} has no decoder_start_token_id: its decoder has nowhere to start.")
        self.context_len = None  # the decoder prefix grows from the start token; the source is the prompt

    def prefill(self, ids):
        """ids (B, T_src): the encoder input. The decoder reads only its start token."""
        mask = torch.ones_like(ids)
        enc = self.model.get_encoder()(input_ids=ids, attention_mask=mask, return_dict=True)
        dec = torch.full((ids.shape[0], 1), self.decoder_start_id, dtype=torch.long, device=ids.device)
        out = self.model(encoder_outputs=enc, attention_mask=mask, decoder_input_ids=dec, use_cache=True,
                         return_dict=True)
        return out.logits[:, -1, :].float(), State((out.past_key_values, mask, enc), 1)

    def step(self, state, tokens):
        cache, mask, enc = state.data
        out = self.model(encoder_outputs=enc, attention_mask=mask, decoder_input_ids=tokens[:, None],
                         past_key_values=cache, use_cache=True, return_dict=True)
        return out.logits[:, -1, :].float(), State((out.past_key_values, mask, enc), state.length + 1)

    def reorder(self, state, idx):
        cache, mask, enc = state.data
        cache.reorder_cache(idx)
        return State((cache, mask, enc), state.length)


def _first_int(*values: Any) -> int | None:
    for v in values:
        if isinstance(v, (list, tuple)):
            v = v[0] if v else None
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return None


def _vocab_ids(adapter: CausalLM, loaded: Any) -> None:
    vocab = loaded.vocabs.get("vocab")
    if vocab is not None:
        adapter.bos_id, adapter.eos_id, adapter.pad_id = vocab.bos_id, vocab.eos_id, vocab.pad_id


def _vocab_tokens(loaded: Any, ids: list[int]) -> list[str]:
    vocab = loaded.vocabs.get("vocab")
    if vocab is None:
        return [f"#{i}" for i in ids]
    itos = vocab.itos
    return [itos[i] if 0 <= i < len(itos) else f"#{i}" for i in ids]


def adapter_for(loaded: Any) -> CausalLM:
    """The adapter for a LoadedModel; raises CannotGenerate with a user-facing reason."""
    from explorer.models.rnn_lm import RNNLanguageModel
    from explorer.models.tiny_gpt import GPT

    model = getattr(loaded, "model", None)
    if model is None:
        raise CannotGenerate(f"{loaded.id} is a bare state dict without an architecture: it cannot generate text.")
    if isinstance(model, GPT):
        return TinyGPTLM(loaded)
    if isinstance(model, RNNLanguageModel):
        return RNNLM(loaded)
    cfg = getattr(model, "config", None)
    if cfg is not None and hasattr(model, "generate"):
        if getattr(cfg, "is_encoder_decoder", False):
            return HFSeq2SeqLM(loaded)
        if loaded.family == "decoder":
            return HFDecoderLM(loaded)
    raise CannotGenerate(
        f"{loaded.id} ({getattr(loaded, 'family', '?')}) has no language-model head that predicts the next token: "
        "pick a causal LM (built-in tiny-gpt / RNN LMs, GPT-2 family) or an encoder-decoder."
    )
