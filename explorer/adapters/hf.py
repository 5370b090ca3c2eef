"""Hugging Face models: encoders, decoders (causal LMs) and encoder-decoders, behind the one adapter interface.

Text follows the model's own tokenizer with its special tokens ([CLS] … [SEP], <s> … </s>, …); a sentence pair is
two segments for an encoder. The record (names in explorer.adapters.base) comes from the model's own outputs, loaded
with eager attention (`output_attentions`, `output_hidden_states`): nothing is hooked on the shared model.
`blocks.{l}.resid_pre` is hidden_states[l]; the last hidden state is `blocks.{L−1}.resid_post`, or `ln_final` for
models that apply a final norm to it (GPT-2, Llama, T5's encoder, …).

Q, K, V (`blocks.{l}.attn.q|k|v` (H, T, d), `.scale`, `.mask`, and where the model has them `.bias` (H, T, T):
T5's relative position bias or BLOOM's ALiBi, `.kv_head` (H,) the key/value head each query head reads (grouped-
query attention), `.softcap`) are what the model's own attention call multiplied, read through the attention
interface (explorer.adapters.hf_attention) for every family that uses it, and from BLOOM's fused projection and
ALiBi tensor for BLOOM. Rotary models also record `.q_pre|.k_pre` (before the rotation, undone with the model's own
cos/sin) and `rope.cos|sin` (T, r), `rope.inv_freq` (r/2,). The probe checks softmax(s·q·kᵀ + bias + mask)
against the model's own weights and shows the arithmetic only when they agree.
"""
from __future__ import annotations

import re
from typing import Any, Sequence, cast

import numpy as np
import torch

from explorer.adapters import hf_attention as A
from explorer.adapters.interventions import PatchesBlocks, find_sites
from explorer.adapters.base import (Acts, Adapter, Attends, CrossForm, Names, Positions, PositionScheme, PositionTable,
                                    Record, Table, Unsupported, causal_mask)
from explorer.adapters.text import Encoded, encode_hf, no_typed_text, token_limit
from explorer.text.token_text import TokenText

BERT_TYPES = {"bert", "roberta", "xlm-roberta", "camembert", "electra", "data2vec-text", "ernie", "xmod"}
GPT2_TYPES = {"gpt2"}
FINAL_NORMS = ("ln_f", "norm", "final_layer_norm", "final_layernorm", "ln_final")
# settings of a model's GenerationConfig that every decoding strategy honours, as model.generate does
HONOURED = ("forced_bos_token_id", "forced_eos_token_id", "bad_words_ids", "suppress_tokens", "begin_suppress_tokens",
            "min_length", "min_new_tokens")


_CROSS = re.compile(r"encoder_attn|crossattention|cross_attn|encdecattention", re.IGNORECASE)


def _scalings(root: torch.nn.Module | None, cross: bool) -> dict[int, tuple[float, int | None]]:
    """layer -> (scaling, head size) of the attention modules under `root` (the cross-attention ones when `cross`,
    the self-attention ones otherwise): the `scaling` attribute each module multiplies q·kᵀ by in its forward.
    The layer is the first index in the module's name ("decoder.layers.3.encoder_attn" -> 3)."""
    found: dict[int, tuple[float, int | None]] = {}
    for name, module in (root.named_modules() if root is not None else ()):
        value = getattr(module, "scaling", None)
        index = re.search(r"(?:^|\.)(\d+)(?:\.|$)", name)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and index and \
                bool(_CROSS.search(name)) == cross:
            size = next((v for v in (getattr(module, n, None) for n in ("head_dim", "attention_head_size",
                                                                          "key_value_proj_dim"))
                         if isinstance(v, int)), None)
            found.setdefault(int(index.group(1)), (float(value), size))
    return found


def _rope_theta(cfg: Any) -> float | None:
    """θ of a rotary model's config (rope_theta, or rope_parameters['rope_theta'] in newer configs)."""
    params = getattr(cfg, "rope_parameters", None)
    value = params.get("rope_theta") if isinstance(params, dict) else None
    value = value if value is not None else getattr(cfg, "rope_theta", None)
    return float(value) if isinstance(value, (int, float)) else None


def _base(model: torch.nn.Module) -> Any:
    """The Hugging Face base model under a task head. Its submodules are read by name and differ by family (`h`,
    `embeddings`, `encoder.layer`, ...): torch types each such attribute as `Tensor | Module`, so it is untyped."""
    return getattr(model, "base_model", model)


def _first_int(*values: Any) -> int | None:
    for v in values:
        if isinstance(v, (list, tuple)):
            v = v[0] if v else None
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return None


def _ints(value: Any) -> tuple[int, ...]:
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,)
    if isinstance(value, (list, tuple)):
        return tuple(v for v in value if isinstance(v, int) and not isinstance(v, bool))
    return ()


class HFAdapter(PatchesBlocks, Attends, Positions, Adapter):
    """Any Hugging Face encoder or decoder loaded with eager attention."""

    supports_padding = True

    def __init__(self, loaded: Any) -> None:
        super().__init__(loaded)
        self.tokenizer = loaded.tokenizer
        self.display = TokenText.of_tokenizer(self.tokenizer) if self.tokenizer is not None else None
        cfg = self.model.config
        self.config = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
        self.model_type = str(getattr(cfg, "model_type", "") or "")
        self.family = loaded.family
        self.causal = self.family == "decoder"
        self.streams = {"decoder" if self.causal else "encoder": "blocks.{l}.attn"}
        self.name = f"Hugging Face {self.model_type or 'model'}"
        self.recorded = A.install(self.model)  # once, at load: the model's attention calls can be read
        self.sites = A.where(self.model)
        self.alibi = self.model_type == "bloom" and hasattr(_base(self.model), "h")
        self.arith = self.recorded or self.alibi
        self.bias_name = "ALiBi (slope m_h × key position j)" if self.alibi else \
            "relative position bias (learned per head and distance bucket)"
        self.arithmetic_note = "" if self.arith else (
            f"'{self.model_type or 'this architecture'}' computes its attention inside its own layer code, not "
            "through Transformers' attention interface, so its q and k cannot be read as the model multiplies them: "
            "only the model's own attention probabilities are shown.")
        sources = (getattr(self.model, "generation_config", None), cfg, self.tokenizer)  # the first that says wins
        self.eos_ids = next((ids for ids in (_ints(getattr(s, "eos_token_id", None)) for s in sources) if ids), ())
        self.bos_id = _first_int(*(getattr(s, "bos_token_id", None) for s in sources))
        self.pad_id = _first_int(*(getattr(s, "pad_token_id", None) for s in sources))
        self.vocab_size = int(getattr(self.config, "vocab_size", 0) or 0)
        self.has_head = self.model.get_output_embeddings() is not None  # a language-model head gives logits
        self.can_generate = self.causal and self.has_head
        for name in ("n_positions", "max_position_embeddings"):
            value = getattr(self.config, name, None)
            if isinstance(value, int) and value > 0:
                self.context_len = value
                break
        if self.can_generate:  # a causal LM: its blocks, found once, can be patched (explorer.adapters.interventions)
            layers = _first_int(*(getattr(self.config, n, None)
                                  for n in ("num_hidden_layers", "n_layer", "num_layers")))
            width = _first_int(*(getattr(self.config, n, None) for n in ("hidden_size", "n_embd", "d_model")))
            self.patch_sites = find_sites(_base(self.model), layers or 0, self.n_heads, width or 0)
            if self.patch_sites is not None:
                self.patch_sites.install()  # the hooks act only inside an intervention scope

    # ------------------------------------------------------------------ text
    def encode(self, text: str, side: str = "input", pair: str = "", max_tokens: int | None = None) -> Encoded:
        """The tokenizer with its special tokens, on the text as typed; `pair` is a second segment (encoders only)."""
        empty = no_typed_text(text)
        if empty is not None:
            return empty
        if self.tokenizer is None:
            return Encoded((), (), (f"{self.id} has no tokenizer saved with it, so it cannot read text. Save one next "
                                    "to the weights (tokenizer.save_pretrained(<folder>)) and reload.",))
        limit, whose = token_limit(self.loaded, max_tokens)
        enc = encode_hf(self.tokenizer, text, limit, text_pair=pair or None, target=side == "target", whose=whose,
                        display=self.display)
        if not enc.ids and not enc.blank:
            return Encoded((), (), enc.notes + (f"The tokenizer of {self.id} gives no tokens for this text.",))
        return enc

    def token_strings(self, ids: Any) -> list[str]:
        """Each id shown on its own (explorer.text.token_text: `·` for a space, bytes decoded)."""
        if self.display is None:
            return [f"#{int(i)}" for i in ids]
        return [self.display.text(int(i)) for i in ids]

    def sequence_strings(self, ids: Any) -> list[str]:
        """The ids of one sequence, shown as in a sentence (a character split over tokens shown in each)."""
        if self.display is None:
            return [f"#{int(i)}" for i in ids]
        return self.display.texts([int(i) for i in ids])

    def piece_strings(self, ids: Any) -> list[str]:
        """The tokenizer's own piece names (##, Ġ, ▁ markers kept)."""
        if self.tokenizer is None:
            return [f"#{int(i)}" for i in ids]
        return [str(t) if t is not None else f"#{i}" for i, t in zip(ids, self.tokenizer.convert_ids_to_tokens(
            [int(i) for i in ids]))]

    def detokenize(self, ids: Any) -> str:
        if self.tokenizer is None:
            return " ".join(f"#{i}" for i in ids)
        try:
            return str(self.tokenizer.decode(list(ids), skip_special_tokens=self.is_encoder_decoder))
        except Exception:
            return "".join(self.token_strings(ids))

    # ------------------------------------------------------------------ one forward pass
    def _inputs(self, enc: Encoded, pad: int) -> dict[str, torch.Tensor]:
        ids = list(enc.ids) + [self._pad_id()] * pad
        kw = {"input_ids": torch.tensor([ids], dtype=torch.long, device=self.device),
              "attention_mask": torch.tensor([[1] * len(enc.ids) + [0] * pad], dtype=torch.long, device=self.device)}
        if enc.segments and any(enc.segments):
            kw["token_type_ids"] = torch.tensor([list(enc.segments) + [0] * pad], dtype=torch.long, device=self.device)
        return kw

    def _pad_id(self) -> int:
        tok = self.tokenizer
        pad = getattr(tok, "pad_token_id", None) if tok is not None else None
        pad = pad if pad is not None else getattr(tok, "eos_token_id", None)
        if pad is None:
            raise Unsupported("This tokenizer has no padding token.")
        return int(pad)

    def padded(self, enc: Encoded, pad: int) -> Encoded:
        """enc with `pad` padding tokens appended (flagged special), as `run(..., pad=pad)` feeds them."""
        if not pad:
            return enc
        pid = self._pad_id()
        return Encoded(enc.ids + (pid,) * pad, enc.tokens + tuple(self.token_strings([pid])) * pad, enc.notes,
                       enc.truncated, enc.n_unknown, enc.special + (True,) * pad,
                       enc.segments + (0,) * pad if enc.segments else ())

    def run(self, enc: Encoded, names: Names = None, target: Encoded | None = None, pad: int = 0,
            **options: Any) -> Record:
        """The record of the module docstring. pad: padding tokens appended with attention_mask 0."""
        acts = Acts(names)
        kw = self._inputs(enc, pad)
        want_logits = acts.want("logits") and self.has_head
        arithmetic = self.arith and acts.want("blocks.*.attn.q*", "blocks.*.attn.k*", "blocks.*.attn.v", "rope.*")
        with torch.inference_mode(), A.recording() as calls:
            out = self._forward(self.model if want_logits else _base(self.model), kw, acts, "blocks.*")
            T = kw["input_ids"].shape[1]
            mask = causal_mask(T) if self.causal else torch.zeros(T, T)
            mask[:, T - pad:] = float("-inf") if pad else 0.0
            hidden = list(getattr(out, "hidden_states", None) or ())
            self._put_stream(acts, "", getattr(out, "attentions", None), mask, hidden)
            if arithmetic:
                self._put_arithmetic(acts, calls, hidden, kw["attention_mask"], T)
            if acts.want("embed", "pos_embed"):
                self._put_embeddings(acts, kw["input_ids"][0])
            if want_logits:
                acts.put("logits", out.logits[0])
        return Record(self.padded(enc, pad), acts.out)

    def _forward(self, module: torch.nn.Module, kw: dict[str, Any], acts: Acts, blocks: str) -> Any:
        """One forward pass with the model's own attentions and hidden states, when the record asks for them."""
        flags = {"output_attentions": acts.want(f"{blocks}.attn.*", "cross.*"), "return_dict": True,
                 "output_hidden_states": acts.want(f"{blocks}.resid_*", "*ln_final", f"{blocks}.ln1",
                                                   f"{blocks}.attn.q", f"{blocks}.attn.k", f"{blocks}.attn.v")}
        try:
            return module(**kw, **flags)
        except TypeError:  # models without token_type_ids
            kw.pop("token_type_ids", None)
            return module(**kw, **flags)

    def _put_stream(self, acts: Acts, prefix: str, atts: Any, mask: torch.Tensor, hidden: list[torch.Tensor]) -> None:
        """Record one stack of layers: its attention patterns and masks, and its hidden states."""
        if acts.want(f"{prefix}blocks.*.attn.*") and (not atts or any(a is None for a in atts)):
            raise Unsupported(f"{self.id} returned no attention weights (it needs attn_implementation='eager').")
        for layer, a in enumerate(atts or ()):
            acts.put(f"{prefix}blocks.{layer}.attn.pattern", a[0])
            acts.put(f"{prefix}blocks.{layer}.attn.mask", mask)
        if not hidden:
            return
        L = len(hidden) - 1
        for layer in range(L):
            acts.put(f"{prefix}blocks.{layer}.resid_pre", hidden[layer][0])
        last = "ln_final" if self._final_norm(prefix) else f"blocks.{L - 1}.resid_post"
        acts.put(prefix + last, hidden[L][0])

    def _put_arithmetic(self, acts: Acts, calls: list[Any], hidden: list[torch.Tensor], attention_mask: torch.Tensor,
                        T: int, prefixes: dict[str, str] | None = None) -> None:
        """Record q, k, v, scale, mask (and bias, kv_head, softcap; rope.* and q_pre/k_pre for rotary models) of
        every attention call, under the record name of its stream and layer."""
        prefixes = prefixes or {"": "blocks.{l}.attn"}
        if self.recorded:  # the k-th call of a stream is its layer k (ALBERT calls one shared module every layer)
            count: dict[str | None, int] = {}
            parts = []
            for c in calls:
                stream = self.sites.get(id(c.module), (None,))[0]
                count[stream] = count.get(stream, -1) + 1
                parts.append(((stream, count[stream]), A.arithmetic(c)))
        else:
            parts = [(("", layer), a) for layer, a in enumerate(self._bloom(hidden, attention_mask))]
        rope = A.rotary(self.model, torch.arange(T, device=self.device))
        if rope is not None:
            acts.put("rope.cos", rope[0])
            acts.put("rope.sin", rope[1])
            inv = getattr(A.rotary_module(self.model), "inv_freq", None)
            if isinstance(inv, torch.Tensor):
                acts.put("rope.inv_freq", inv)
        for site, a in parts:
            if site is None or site[0] not in prefixes:
                continue
            name = prefixes[site[0]].format(l=site[1])
            for key in ("q", "k", "v", "kv_head", "mask", "bias"):
                if a[key] is not None:
                    acts.put(f"{name}.{key}", a[key])
            acts.put(f"{name}.scale", torch.tensor(a["scale"], dtype=torch.float64))
            if a["softcap"]:
                acts.put(f"{name}.softcap", torch.tensor(a["softcap"], dtype=torch.float64))
            if rope is not None and site[0] != "cross" and a["q"].shape[1] == T:
                acts.put(f"{name}.q_pre", A.unrotate(a["q"], *rope))
                acts.put(f"{name}.k_pre", A.unrotate(a["k"], *rope))

    def _bloom(self, hidden: list[torch.Tensor], attention_mask: torch.Tensor) -> list[dict[str, Any]]:
        """BLOOM's attention per layer from its own modules: q, k, v from the fused query_key_value of
        input_layernorm(hidden_states[l]), ALiBi from the family's build_alibi_tensor (slope_h · key position), and
        1/√d (inv_norm_factor): the arrays `hf_attention.arithmetic` gives for the other families."""
        import sys

        base = _base(self.model)
        build = sys.modules[type(base).__module__].build_alibi_tensor
        H = base.config.n_head
        alibi = build(attention_mask, H, torch.float32)[:H, 0]                      # (H, Tk)
        T = attention_mask.shape[1]
        mask = causal_mask(T).to(attention_mask.device).masked_fill(attention_mask[0] == 0, float("-inf"))
        out = []
        for block, h in zip(base.h, hidden):
            attn = block.self_attention
            q, k, v = (t[0].float() for t in attn._reshape(attn.query_key_value(block.input_layernorm(h))))
            out.append({"q": q, "k": k, "v": v, "kv_head": torch.arange(H), "mask": mask,
                        "bias": attn.beta * alibi[:, None, :].expand(H, T, T), "scale": float(attn.inv_norm_factor),
                        "softcap": None})
        return out

    lens_names: tuple[str, ...] = ("blocks.*.resid_pre", "blocks.*.resid_post", "ln_final", "logits")

    def _final_norm_module(self) -> torch.nn.Module | None:
        base = _base(self.model)
        for part in (base, getattr(base, "decoder", None)):
            module = next((getattr(part, n) for n in FINAL_NORMS
                           if isinstance(getattr(part, n, None), torch.nn.Module)),
                          None) if part is not None else None
            if module is not None:
                return cast(torch.nn.Module | None, module)
        return None

    def unembed(self, x: torch.Tensor, normed: bool = False) -> torch.Tensor:
        """The final norm (found by name) unless `normed`, then get_output_embeddings(). The probe checks the last
        layer against the model's own logits and refuses the lens where they differ (an extra projection etc.)."""
        head = self.model.get_output_embeddings() if self.has_head else None
        if head is None:
            raise Unsupported(f"{self.id} has no language-model head to read its layers through.")
        norm = None if normed else self._final_norm_module()
        weight = getattr(head, "weight", None)  # states kept in float32 meet a half-precision model in its dtype
        x = x.to(weight.dtype) if isinstance(weight, torch.Tensor) and weight.is_floating_point() else x
        return cast(torch.Tensor, head(norm(x) if norm is not None else x))

    def lens_states(self, rec: Record) -> list[tuple[str, torch.Tensor, bool]]:
        """After block l: hidden_states[l + 1] (before the final norm), the last one as the model returns it (after
        its final norm when it has one: ln_final)."""
        L = len(rec.layers("blocks.{l}.resid_pre"))
        out = [(f"layer {layer}", torch.from_numpy(rec[f"blocks.{layer + 1}.resid_pre"]), False)
               for layer in range(L - 1)]
        last = "ln_final" if "ln_final" in rec else f"blocks.{L - 1}.resid_post"
        return out + [(f"layer {L - 1}", torch.from_numpy(rec[last]), last == "ln_final")]

    def embed_ids(self, ids: torch.Tensor, side: str = "input") -> torch.Tensor:
        return cast(torch.Tensor, self.model.get_input_embeddings()(ids))

    def _logits_at(self, keep: int | torch.Tensor, **kw: Any) -> torch.Tensor:
        """The model's logits (B, K, V) only at positions `keep` (an int k: the last k; a tensor: those positions),
        the output layer run only there where the family takes Hugging Face's logits_to_keep."""
        try:
            logits = self.model(**kw, logits_to_keep=keep).logits
        except TypeError:  # a family without logits_to_keep
            logits = self.model(**kw).logits
        if logits.shape[1] == (keep if isinstance(keep, int) else len(keep)):
            return cast(torch.Tensor, logits)
        return cast(torch.Tensor, logits[:, -keep:] if isinstance(keep, int) else logits[:, keep])

    def _block_logits(self, ids: torch.Tensor) -> torch.Tensor:
        """ids (B, T) -> the model's own logits (B, V) after the last token (only that position unembedded)."""
        return self._logits_at(1, input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False,
                               return_dict=True)[:, -1]

    def logits_from_embeddings(self, embeds: torch.Tensor, target: torch.Tensor | None = None,
                               keep: Sequence[int] | None = None) -> torch.Tensor:
        if not self.has_head:
            raise Unsupported(f"{self.id} has no language-model head: there is no output token to attribute.")
        mask = torch.ones(embeds.shape[:2], dtype=torch.long, device=embeds.device)
        if target is not None:
            out = self.model(inputs_embeds=embeds, attention_mask=mask, decoder_inputs_embeds=target, use_cache=False,
                             return_dict=True)
            return cast(torch.Tensor, out.logits)
        if keep is None:
            return cast(torch.Tensor, self.model(inputs_embeds=embeds, attention_mask=mask, use_cache=False,
                                        return_dict=True).logits)
        return self._logits_at(torch.tensor(list(keep), dtype=torch.long, device=embeds.device),
                               inputs_embeds=embeds, attention_mask=mask, use_cache=False, return_dict=True)

    def _final_norm(self, prefix: str) -> bool:
        base = _base(self.model)
        part = {"encoder.": getattr(base, "encoder", None),
                "decoder.": getattr(base, "decoder", None)}.get(prefix, base)
        return any(isinstance(getattr(part, n, None), torch.nn.Module) for n in FINAL_NORMS)

    def _put_embeddings(self, acts: Acts, ids: torch.Tensor) -> None:
        acts.put("embed", self.model.get_input_embeddings()(ids))
        try:
            table = self.position_table()
        except Unsupported:
            return
        acts.put("pos_embed", table.weight[table.offset: table.offset + ids.shape[0]])

    def _stream_root(self, stream: str) -> torch.nn.Module | None:
        if stream in ("decoder", "cross") and self.is_encoder_decoder:
            return self.model.get_decoder() if hasattr(self.model, "get_decoder") else None
        if stream == "encoder" and self.is_encoder_decoder:
            return self.model.get_encoder() if hasattr(self.model, "get_encoder") else None
        return cast(torch.nn.Module | None, _base(self.model))

    def scalings(self, stream: str) -> tuple[float | None, ...]:
        """Read from each layer's attention module (its `scaling`: 1/√d for most families, 1 for T5, 1/(√d·(l+1))
        for GPT-2 with scale_attn_by_inverse_layer_idx)."""
        found = _scalings(self._stream_root(stream), stream == "cross")
        return tuple(found.get(i, (None,))[0] for i in range(max(found) + 1)) if found else ()

    def head_size(self, stream: str) -> int:
        sizes = {size for _, size in _scalings(self._stream_root(stream), stream == "cross").values() if size}
        return sizes.pop() if len(sizes) == 1 else 0

    @property
    def n_heads(self) -> int:
        names = ("num_attention_heads", "n_head", "num_heads", "encoder_attention_heads")
        return next((v for v in (getattr(self.config, n, None) for n in names) if isinstance(v, int)), 0)

    # ------------------------------------------------------------------ generation
    def generation_settings(self) -> dict[str, Any]:
        gen = getattr(self.model, "generation_config", None)
        return {k: getattr(gen, k) for k in HONOURED if gen is not None and getattr(gen, k, None) is not None}

    def start(self, ids: torch.Tensor, record: bool = False) -> tuple[torch.Tensor, Any, dict[str, torch.Tensor]]:
        if not self.can_generate:
            raise Unsupported(f"{self.id} ({self.family}) has no language-model head that predicts the next token: "
                              "pick a causal LM (built-in tiny-gpt / RNN LMs, GPT-2 family) or an encoder-decoder.")
        mask = torch.ones_like(ids)
        out = self.model(input_ids=ids, attention_mask=mask, use_cache=True, return_dict=True)
        return out.logits[:, -1, :].float(), (out.past_key_values, mask), {}

    def step(self, state: Any, tokens: torch.Tensor,
             record: bool = False) -> tuple[torch.Tensor, Any, dict[str, torch.Tensor]]:
        cache, mask = state
        mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], dim=1)
        out = self.model(input_ids=tokens[:, None], attention_mask=mask, past_key_values=cache, use_cache=True,
                         return_dict=True)
        return out.logits[:, -1, :].float(), (out.past_key_values, mask), {}

    def reorder(self, state: Any, idx: torch.Tensor) -> Any:
        cache, mask = state
        cache.reorder_cache(idx)
        return (cache, mask[idx])

    # ------------------------------------------------------------------ tables
    def tables(self) -> dict[str, Table]:
        weight = self.model.get_input_embeddings().weight
        n_rows = weight.shape[0]
        tok = self.tokenizer
        if tok is None:
            words, special = tuple(f"<id {i}>" for i in range(n_rows)), (False,) * n_rows
        else:
            n_tok = len(tok)
            names = self.token_strings(range(min(n_rows, n_tok)))
            words = tuple(names) + tuple(f"<id {i}>" for i in range(len(names), n_rows))
            specials = set(getattr(tok, "all_special_ids", []) or [])
            special = tuple(i in specials or i >= n_tok or _unused(w) for i, w in enumerate(words))
        return {"input": Table("get_input_embeddings()", weight, words, special, None, subword=tok is not None)}

    def position_table(self) -> PositionTable:
        """The first embedding module named for positions (position_embeddings, embed_positions, wpe, …) of the
        model (its encoder for an encoder-decoder): "sinusoidal" when its class says so (Marian, Pegasus), else
        learned. The row of position 0 is its `offset` (BART, OPT: 2), or padding_idx + 1 where the embeddings
        count positions from the padding id (RoBERTa)."""
        root = self._stream_root("encoder") if self.is_encoder_decoder else _base(self.model)
        for name, module in (root.named_modules() if root is not None else ()):
            leaf = name.rsplit(".", 1)[-1].lower()
            if isinstance(module, torch.nn.Embedding) and ("pos" in leaf or leaf == "wpe") and "relative" not in leaf:
                parent = root.get_submodule(name.rsplit(".", 1)[0]) if "." in name and root is not None else root
                offset = getattr(module, "offset", None)
                if not isinstance(offset, int):  # RoBERTa-style embeddings count positions from padding_idx + 1
                    pad = getattr(parent, "padding_idx", None) if type(parent).__name__.endswith("Embeddings") else None
                    offset = pad + 1 if isinstance(pad, int) else 0
                kind = "sinusoidal" if "sinusoidal" in type(module).__name__.lower() else "learned"
                return PositionTable(name, kind, module.weight, offset)
        if A.rotary_module(self.model) is not None:
            raise Unsupported(f"{self.id} has no position table: it uses rotary embeddings (RoPE) inside attention. "
                              "The model's positions panel shows its own rotation.")
        raise Unsupported(f"{self.id} has no position table: no embedding module named for positions was found.")

    def position_scheme(self) -> PositionScheme:
        """Read from the model: a position table (learned), its rotary module (θ, rotated dimensions, pairing), BLOOM's
        ALiBi (slopes) or T5's relative position bias (buckets, distance)."""
        scheme = super().position_scheme()
        if scheme.kind != "none":
            return scheme
        rot = A.rotary_module(self.model)
        if rot is not None:
            inv = getattr(rot, "inv_freq", None)
            r = 2 * len(inv) if isinstance(inv, torch.Tensor) else 0
            theta = _rope_theta(self.config)
            d = self.head_size("decoder" if self.causal else "encoder") or r
            return PositionScheme("rotary", (("rotary module", type(rot).__name__),
                                             ("θ (rope_theta)", f"{theta:g}" if theta else "not in the config"),
                                             ("rotated dimensions", f"{r} of {d} per head"),
                                             ("pairing", f"dimension i with i + {r // 2} (rotate_half)")))
        if self.alibi:
            slopes = self.alibi_slopes()
            return PositionScheme("alibi", (("bias", "slope m_h × key position, per head"),
                                            ("slopes", ", ".join(f"{x:.4g}" for x in slopes))))
        bias = self._relative_module()
        if bias is not None:
            return PositionScheme("relative", (("module", "relative_attention_bias (first layer, shared by all)"),
                                               ("buckets", str(bias.relative_attention_num_buckets)),
                                               ("max distance", str(bias.relative_attention_max_distance))))
        return scheme

    def input_note(self) -> str:
        """Read from the modules: the token embedding's scale (embed_scale), a segment (token type) table, and the
        norms on the embedding path (names containing 'emb' and 'norm')."""
        root = self._stream_root("encoder") if self.is_encoder_decoder else _base(self.model)
        scale = getattr(self.model.get_input_embeddings(), "embed_scale", None)
        scale = float(scale) if isinstance(scale, (int, float, torch.Tensor)) else 1.0
        parts = [f"E is the token embedding × {scale:g} (its embed_scale)"] if scale != 1.0 else []
        names = [n for n, _ in (root.named_modules() if root is not None else ())]
        if any(n.endswith("token_type_embeddings") for n in names):
            parts.append("the segment (token type 0) vector is added too")
        norms = [n for n, m in (root.named_modules() if root is not None else ())
                 if "norm" in type(m).__name__.lower() and "emb" in n.lower()]
        if norms:
            parts.append(f"the sum goes through {', '.join(norms)} before layer 0")
        return "; ".join(parts) + "." if parts else ""

    def rotary(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        table = A.rotary(self.model, torch.arange(n, device=self.device))
        if table is None:
            raise Unsupported(f"{self.id} has no rotary position embedding.")
        return table[0].cpu().numpy(), table[1].cpu().numpy()

    def alibi_slopes(self) -> np.ndarray:
        if not self.alibi:
            raise Unsupported(f"{self.id} has no ALiBi bias.")
        import sys

        base = _base(self.model)
        build = sys.modules[type(base).__module__].build_alibi_tensor
        H = base.config.n_head
        alibi = build(torch.ones(1, 2, dtype=torch.long, device=self.device), H, torch.float32)
        return np.asarray(alibi[:H, 0, 1].cpu().numpy())  # m_h · 1

    def _relative_module(self) -> Any:
        return next((m for m in self.model.modules() if getattr(m, "has_relative_attention_bias", False)
                     and hasattr(m, "compute_bias")), None)

    def relative_bias(self, n: int) -> np.ndarray:
        module = self._relative_module()
        if module is None:
            raise Unsupported(f"{self.id} has no relative position bias.")
        with torch.inference_mode():
            return np.asarray(module.compute_bias(n, n, device=self.device)[0].float().cpu().numpy())

    def first_attention(self, enc: Encoded, positions: bool, causal: bool) -> tuple[np.ndarray, str]:
        """(T, C) output of layer 0's attention on the input embeddings, with or without position vectors
        (causal=False removes a decoder's mask): the positional-encodings view's shuffle test. BERT and GPT-2
        families; returns the output and a description of what was run."""
        ids = torch.tensor(list(enc.ids), dtype=torch.long, device=self.device)
        base = _base(self.model)
        with torch.inference_mode():
            x = self.model.get_input_embeddings()(ids)
            table = self.position_table()
            if positions:
                x = x + table.weight[table.offset: table.offset + len(ids)]
            if self.model_type in BERT_TYPES and hasattr(getattr(base, "encoder", None), "layer"):
                emb = base.embeddings
                if getattr(emb, "token_type_embeddings", None) is not None:
                    x = x + emb.token_type_embeddings.weight[0]
                x = emb.LayerNorm(x)[None]
                out = base.encoder.layer[0].attention(x)
                out = out[0] if isinstance(out, tuple) else out
                what = "layer 0 self-attention (BertAttention: attention, output projection, residual, LayerNorm)"
            elif self.model_type in GPT2_TYPES and hasattr(base, "h"):
                block, T = base.h[0], len(ids)
                mask = causal_mask(T).to(x.device)[None, None] if causal else None
                out = block.attn(block.ln_1(x[None]), attention_mask=mask)[0]
                what = "layer 0 self-attention with the model's own modules (ln_1, attn: c_attn, c_proj)" + \
                    ("" if causal else ", causal mask removed")
            else:
                raise Unsupported(f"The shuffle test runs layer 0 of the BERT and GPT-2 families and the built-in GPT; "
                                  f"{self.id} is '{self.model_type}'.")
        return out[0].float().cpu().numpy(), what


def _unused(word: str) -> bool:
    return (word.startswith("[unused") and word.endswith("]")) or (word.startswith("<extra_id_") and word.endswith(">"))


# -------------------------------------------------------------------------------------- encoder-decoder
class HFSeq2SeqAdapter(HFAdapter):
    """HF encoder-decoder: encoder self-, decoder self- and cross-attention; the decoder generates."""

    is_encoder_decoder = True
    supports_padding = False
    attention_kind = "cross"
    lens_names = ()  # the logit lens reads decoder-only models

    def __init__(self, loaded: Any) -> None:
        super().__init__(loaded)
        self.causal = False
        self.streams = {"encoder": "encoder.blocks.{l}.attn", "decoder": "decoder.blocks.{l}.attn",
                        "cross": "cross.{l}"}
        self.can_generate = hasattr(self.model, "generate") and hasattr(self.model, "get_encoder")
        gen = getattr(self.model, "generation_config", None)
        start = _first_int(getattr(gen, "decoder_start_token_id", None),
                           getattr(self.model.config, "decoder_start_token_id", None), self.pad_id, self.bos_id)
        self.decoder_start = (start,) if start is not None else ()
        self.context_len = None  # the decoder prefix grows from the start token; the source is the prompt

    def cross_form(self) -> CrossForm:
        """softmax(s_l · Q Kᵀ) with s_l read from each decoder layer's cross-attention module."""
        scaling = self.scalings("cross")
        return CrossForm("cross", scaling=scaling, head_dim=self.head_size("cross"),
                         source="the `scaling` attribute of each decoder layer's cross-attention module" if scaling else
                         "no cross-attention module with a `scaling` attribute was found: the factor is not shown")

    def run(self, enc: Encoded, names: Names = None, target: Encoded | None = None, pad: int = 0,
            **options: Any) -> Record:
        """The encoder's record (prefix `encoder.`), and with a target the decoder's (`decoder.`), the
        cross-attention (`cross.{l}.pattern`) and logits. The decoder reads [start] + target[:-1]."""
        acts = Acts(names)
        kw: dict[str, Any] = dict(self._inputs(enc, 0))
        S, read = kw["input_ids"].shape[1], None
        streams = {"encoder": "encoder.blocks.{l}.attn", "decoder": "decoder.blocks.{l}.attn", "cross": "cross.{l}"}
        arithmetic = self.recorded and acts.want(*(p.format(l="*") + ".q*" for p in streams.values()))
        with torch.inference_mode(), A.recording() as calls:
            if target is None:
                out = self._forward(self.model.get_encoder(), kw, acts, "encoder.blocks.*")
                self._put_stream(acts, "encoder.", out.attentions, torch.zeros(S, S), list(out.hidden_states or ()))
                if arithmetic:
                    self._put_arithmetic(acts, calls, [], kw["attention_mask"], S, {"encoder": streams["encoder"]})
                return Record(enc, acts.out)
            if not self.decoder_start:
                raise Unsupported(f"{self.id} defines no decoder_start_token_id, so its decoder cannot be started.")
            dec = [*self.decoder_start, *target.ids[:-1]]
            read = Encoded(tuple(dec), (*self.token_strings(self.decoder_start), *target.tokens[:-1]), (), False, 0,
                           (True, *target.special[:-1]))
            kw.update(decoder_input_ids=torch.tensor([dec], dtype=torch.long, device=self.device), use_cache=False)
            out = self._forward(self.model, kw, acts, "*coder.blocks.*")
            self._put_stream(acts, "encoder.", out.encoder_attentions, torch.zeros(S, S),
                             list(out.encoder_hidden_states or ()))
            self._put_stream(acts, "decoder.", out.decoder_attentions, causal_mask(len(dec)),
                             list(out.decoder_hidden_states or ()))
            for layer, a in enumerate(out.cross_attentions or ()):
                acts.put(f"cross.{layer}.pattern", a[0])
                acts.put(f"cross.{layer}.mask", torch.zeros(a.shape[-2], a.shape[-1]))
            if arithmetic:
                self._put_arithmetic(acts, calls, [], kw["attention_mask"], S, streams)
            acts.put("logits", out.logits[0])
        return Record(enc, acts.out, read)

    def start(self, ids: torch.Tensor, record: bool = False) -> tuple[torch.Tensor, Any, dict[str, torch.Tensor]]:
        if not self.decoder_start:
            raise Unsupported(f"{self.id} has no decoder_start_token_id: its decoder has nowhere to start.")
        mask = torch.ones_like(ids)
        enc = self.model.get_encoder()(input_ids=ids, attention_mask=mask, return_dict=True)
        dec = torch.tensor([list(self.decoder_start)] * ids.shape[0], dtype=torch.long, device=ids.device)
        out = self.model(encoder_outputs=enc, attention_mask=mask, decoder_input_ids=dec, use_cache=True,
                         return_dict=True)
        return out.logits[:, -1, :].float(), (out.past_key_values, mask, enc), {}

    def step(self, state: Any, tokens: torch.Tensor,
             record: bool = False) -> tuple[torch.Tensor, Any, dict[str, torch.Tensor]]:
        cache, mask, enc = state
        out = self.model(encoder_outputs=enc, attention_mask=mask, decoder_input_ids=tokens[:, None],
                         past_key_values=cache, use_cache=True, return_dict=True)
        return out.logits[:, -1, :].float(), (out.past_key_values, mask, enc), {}

    def reorder(self, state: Any, idx: torch.Tensor) -> Any:
        cache, mask, enc = state
        cache.reorder_cache(idx)
        return (cache, mask[idx], type(enc)(last_hidden_state=enc.last_hidden_state[idx]))
