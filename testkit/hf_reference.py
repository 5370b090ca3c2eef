"""The reference every generation test compares with: the same strategy through a Hugging Face model's own
`generate`, with its own generation settings kept and every other setting given explicitly."""
from __future__ import annotations

from typing import Any

import torch

from explorer.adapters.base import Adapter
from explorer.adapters.generation import DecodingError, Strategy


def generation_config(adapter: Adapter, strategy: Strategy, max_new: int, n: int = 1, stop_at_eos: bool = True) -> Any:
    """The `transformers.GenerationConfig` equivalent to `strategy` on this model (its own generation settings
    kept, everything else set explicitly)."""
    from transformers import GenerationConfig

    eos = list(adapter.eos_ids) if stop_at_eos else None
    kw: dict[str, Any] = dict(adapter.generation_settings(), max_new_tokens=max_new, do_sample=strategy.do_sample,
                              eos_token_id=eos, pad_token_id=adapter.pad_id if adapter.pad_id is not None else
                              (eos[0] if eos else None), repetition_penalty=strategy.repetition_penalty,
                              no_repeat_ngram_size=strategy.no_repeat_ngram_size, num_beams=1)
    kw.setdefault("min_length", 0)
    if strategy.min_new_tokens:
        kw["min_new_tokens"] = strategy.min_new_tokens
    if adapter.decoder_start:
        kw["decoder_start_token_id"] = adapter.decoder_start[0]
    if strategy.kind == "beam":
        kw.update(num_beams=strategy.num_beams, length_penalty=strategy.length_penalty, early_stopping=False)
    if strategy.do_sample:
        kw.update(num_return_sequences=n, temperature=strategy.temperature, top_k=0, top_p=1.0, typical_p=1.0)
        key = {"top-k": ("top_k", strategy.top_k), "top-p": ("top_p", strategy.top_p),
               "typical": ("typical_p", strategy.typical_p), "min-p": ("min_p", strategy.min_p)}.get(strategy.kind)
        if key:
            kw[key[0]] = key[1]
    return GenerationConfig(**kw)


def reference_generate(adapter: Adapter, model_input: tuple[int, ...], strategy: Strategy, seed: int, max_new: int,
                       n: int = 1) -> list[list[int]]:
    """The same strategy through the model's own `generate` (Hugging Face models), seeded with
    torch.manual_seed(seed): the generated ids of each returned row (end token included, padding cut)."""
    model = adapter.model
    if not hasattr(model, "generate") or not hasattr(model, "config"):
        raise DecodingError("model.generate exists only for Hugging Face models.")
    cfg = generation_config(adapter, strategy, max_new, n)
    x = torch.tensor([model_input], dtype=torch.long, device=adapter.device)
    with torch.random.fork_rng(devices=[]), torch.inference_mode():
        torch.manual_seed(seed)
        out = model.generate(input_ids=x, attention_mask=torch.ones_like(x), generation_config=cfg)
    skip = len(adapter.decoder_start) if adapter.is_encoder_decoder else x.shape[1]
    ends = set(adapter.eos_ids)
    rows = []
    for r in out[:, skip:].tolist():
        cut = next((i + 1 for i, t in enumerate(r) if t in ends), len(r))
        rows.append(r[:cut])
    return rows
