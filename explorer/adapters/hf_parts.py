"""The capabilities of a Hugging Face model, each its own part of the adapter (explorer.adapters.parts): the adapter
(explorer.adapters.hf.HFAdapter) reads the model and runs it once; these read what each view needs besides.

  Stepper     start / step / reorder with the model's own KV cache (decoders; an encoder-decoder's decoder)
  Lens        each layer's state through the model's final norm (found by name) and get_output_embeddings()
  Attention   what the attention record holds: each layer's `scaling`, the head size
  Positions   the position table, rotary module, ALiBi slopes or relative bias, and layer 0 run without positions
  Tables      get_input_embeddings() with the tokenizer's tokens
  Gradient    logits from input embeddings (tables, stepping and the position scheme with it)
  Alignment   an encoder-decoder's cross-attention: what it computes
  Patching    the blocks found at load, run with patches (explorer.adapters.interventions)

Shapes: B batch, T tokens, C width, V vocabulary, H heads.
"""
from __future__ import annotations

import re
import sys
from typing import Any, Protocol, Sequence, cast

import numpy as np
import torch

from explorer.adapters import hf_attention as A
from explorer.adapters.base import CrossForm, Positions, PositionScheme, PositionTable, Record, Table, Unsupported, \
    causal_mask
from explorer.adapters.interventions import PatchesBlocks, TransformerSites
from explorer.adapters.parts import Part, Whole
from explorer.adapters.text import Encoded
from explorer.text.token_text import TokenText

BERT_TYPES = {"bert", "roberta", "xlm-roberta", "camembert", "electra", "data2vec-text", "ernie", "xmod"}
GPT2_TYPES = {"gpt2"}
FINAL_NORMS = ("ln_f", "norm", "final_layer_norm", "final_layernorm", "ln_final")
# settings of a model's GenerationConfig that every decoding strategy honours, as model.generate does
HONOURED = ("forced_bos_token_id", "forced_eos_token_id", "bad_words_ids", "suppress_tokens", "begin_suppress_tokens",
            "min_length", "min_new_tokens")
_CROSS = re.compile(r"encoder_attn|crossattention|cross_attn|encdecattention", re.IGNORECASE)


def base_model(model: torch.nn.Module) -> Any:
    """The Hugging Face base model under a task head. Its submodules are read by name and differ by family (`h`,
    `embeddings`, `encoder.layer`, ...): torch types each such attribute as `Tensor | Module`, so it is untyped."""
    return getattr(model, "base_model", model)


def final_norm_module(model: torch.nn.Module) -> torch.nn.Module | None:
    """The final norm of the model (its decoder's, for an encoder-decoder), found by name (FINAL_NORMS)."""
    base = base_model(model)
    for part in (base, getattr(base, "decoder", None)):
        module = next((getattr(part, n) for n in FINAL_NORMS
                       if isinstance(getattr(part, n, None), torch.nn.Module)),
                      None) if part is not None else None
        if module is not None:
            return cast(torch.nn.Module | None, module)
    return None


def logits_at(model: torch.nn.Module, keep: int | torch.Tensor, **kw: object) -> torch.Tensor:
    """The model's logits (B, K, V) only at positions `keep` (an int k: the last k; a tensor: those positions),
    the output layer run only there where the family takes Hugging Face's logits_to_keep."""
    try:
        logits = model(**kw, logits_to_keep=keep).logits
    except TypeError:  # a family without logits_to_keep
        logits = model(**kw).logits
    if logits.shape[1] == (keep if isinstance(keep, int) else len(keep)):
        return cast(torch.Tensor, logits)
    return cast(torch.Tensor, logits[:, -keep:] if isinstance(keep, int) else logits[:, keep])


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


def _rope_theta(cfg: object) -> float | None:
    """θ of a rotary model's config (rope_theta, or rope_parameters['rope_theta'] in newer configs)."""
    params = getattr(cfg, "rope_parameters", None)
    value = params.get("rope_theta") if isinstance(params, dict) else None
    value = value if value is not None else getattr(cfg, "rope_theta", None)
    return float(value) if isinstance(value, (int, float)) else None


def _unused(word: str) -> bool:
    return (word.startswith("[unused") and word.endswith("]")) or (word.startswith("<extra_id_") and word.endswith(">"))


class HFCore(Whole, Protocol):
    """What the parts read from the Hugging Face adapter (explorer.adapters.hf.HFAdapter) they belong to."""

    @property
    def config(self) -> Any: ...  # the model's (text) config: fields differ by family, read by name
    @property
    def tokenizer(self) -> Any: ...  # a Hugging Face tokenizer, or None
    @property
    def display(self) -> TokenText | None: ...
    @property
    def model_type(self) -> str: ...
    @property
    def has_head(self) -> bool: ...  # get_output_embeddings() is not None
    @property
    def alibi(self) -> bool: ...  # BLOOM's ALiBi, read from its own modules
    @property
    def supports_padding(self) -> bool: ...
    @property
    def arithmetic_note(self) -> str: ...
    @property
    def bias_name(self) -> str: ...
    @property
    def patch_sites(self) -> TransformerSites | None: ...

    def stream_root(self, stream: str) -> torch.nn.Module | None: ...


class HFPart(Part[HFCore]):
    """A part of a Hugging Face adapter; the tokenizer and how its tokens are shown are the adapter's."""

    @property
    def tokenizer(self) -> Any:
        return self.core.tokenizer

    @property
    def display(self) -> TokenText | None:
        return self.core.display


class Stepper(HFPart):
    """Generation with the model's own KV cache: a decoder's, or an encoder-decoder's decoder after its encoder ran
    once on the source."""

    def generation_settings(self) -> dict[str, Any]:
        gen = getattr(self.core.model, "generation_config", None)
        return {k: getattr(gen, k) for k in HONOURED if gen is not None and getattr(gen, k, None) is not None}

    def start(self, ids: torch.Tensor, record: bool = False) -> tuple[torch.Tensor, Any, dict[str, torch.Tensor]]:
        model, mask = self.core.model, torch.ones_like(ids)
        if self.core.is_encoder_decoder:
            if not self.core.decoder_start:
                raise Unsupported(f"{self.id} has no decoder_start_token_id: its decoder has nowhere to start.")
            enc = model.get_encoder()(input_ids=ids, attention_mask=mask, return_dict=True)
            dec = torch.tensor([list(self.core.decoder_start)] * ids.shape[0], dtype=torch.long, device=ids.device)
            out = model(encoder_outputs=enc, attention_mask=mask, decoder_input_ids=dec, use_cache=True,
                        return_dict=True)
            return out.logits[:, -1, :].float(), (out.past_key_values, mask, enc), {}
        if not self.core.can_generate:
            raise Unsupported(f"{self.id} ({self.family}) has no language-model head that predicts the next token: "
                              "pick a causal LM (built-in tiny-gpt / RNN LMs, GPT-2 family) or an encoder-decoder.")
        out = model(input_ids=ids, attention_mask=mask, use_cache=True, return_dict=True)
        return out.logits[:, -1, :].float(), (out.past_key_values, mask), {}

    def step(self, state: Any, tokens: torch.Tensor,
             record: bool = False) -> tuple[torch.Tensor, Any, dict[str, torch.Tensor]]:
        if self.core.is_encoder_decoder:
            cache, mask, enc = state
            out = self.core.model(encoder_outputs=enc, attention_mask=mask, decoder_input_ids=tokens[:, None],
                                  past_key_values=cache, use_cache=True, return_dict=True)
            return out.logits[:, -1, :].float(), (out.past_key_values, mask, enc), {}
        cache, mask = state
        mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], dim=1)
        out = self.core.model(input_ids=tokens[:, None], attention_mask=mask, past_key_values=cache, use_cache=True,
                              return_dict=True)
        return out.logits[:, -1, :].float(), (out.past_key_values, mask), {}

    def reorder(self, state: Any, idx: torch.Tensor) -> Any:
        if self.core.is_encoder_decoder:
            cache, mask, enc = state
            cache.reorder_cache(idx)
            return (cache, mask[idx], type(enc)(last_hidden_state=enc.last_hidden_state[idx]))
        cache, mask = state
        cache.reorder_cache(idx)
        return (cache, mask[idx])


class Lens(HFPart):
    """The logit lens of a decoder: hidden_states through the final norm and the output layer."""

    lens_names: tuple[str, ...] = ("blocks.*.resid_pre", "blocks.*.resid_post", "ln_final", "logits")

    def unembed(self, x: torch.Tensor, normed: bool = False) -> torch.Tensor:
        """The final norm (found by name) unless `normed`, then get_output_embeddings(). The probe checks the last
        layer against the model's own logits and refuses the lens where they differ (an extra projection etc.)."""
        head = self.core.model.get_output_embeddings() if self.core.has_head else None
        if head is None:
            raise Unsupported(f"{self.id} has no language-model head to read its layers through.")
        norm = None if normed else final_norm_module(self.core.model)
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


class Attention(HFPart):
    """What the attention entries of the record hold, read from each layer's attention module."""

    @property
    def supports_padding(self) -> bool:
        return self.core.supports_padding

    @property
    def arithmetic_note(self) -> str:
        return self.core.arithmetic_note

    @property
    def bias_name(self) -> str:
        return self.core.bias_name

    def scalings(self, stream: str) -> tuple[float | None, ...]:
        """Read from each layer's attention module (its `scaling`: 1/√d for most families, 1 for T5, 1/(√d·(l+1))
        for GPT-2 with scale_attn_by_inverse_layer_idx)."""
        found = _scalings(self.core.stream_root(stream), stream == "cross")
        return tuple(found.get(i, (None,))[0] for i in range(max(found) + 1)) if found else ()

    def head_size(self, stream: str) -> int:
        sizes = {size for _, size in _scalings(self.core.stream_root(stream), stream == "cross").values() if size}
        return sizes.pop() if len(sizes) == 1 else 0


class Alignment(Attention, Stepper):
    """An encoder-decoder's cross-attention (its decoder generates)."""

    attention_kind = "cross"

    def cross_form(self) -> CrossForm:
        """softmax(s_l · Q Kᵀ) with s_l read from each decoder layer's cross-attention module."""
        scaling = self.scalings("cross")
        return CrossForm("cross", scaling=scaling, head_dim=self.head_size("cross"),
                         source="the `scaling` attribute of each decoder layer's cross-attention module" if scaling else
                         "no cross-attention module with a `scaling` attribute was found: the factor is not shown")


class PositionsPart(Attention, Positions):
    """How the model knows word order, read from its modules."""

    def position_table(self) -> PositionTable:
        """The first embedding module named for positions (position_embeddings, embed_positions, wpe, …) of the
        model (its encoder for an encoder-decoder): "sinusoidal" when its class says so (Marian, Pegasus), else
        learned. The row of position 0 is its `offset` (BART, OPT: 2), or padding_idx + 1 where the embeddings
        count positions from the padding id (RoBERTa)."""
        core = self.core
        root = core.stream_root("encoder") if core.is_encoder_decoder else base_model(core.model)
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
        if A.rotary_module(core.model) is not None:
            raise Unsupported(f"{self.id} has no position table: it uses rotary embeddings (RoPE) inside attention. "
                              "The model's positions panel shows its own rotation.")
        raise Unsupported(f"{self.id} has no position table: no embedding module named for positions was found.")

    def position_scheme(self) -> PositionScheme:
        """Read from the model: a position table (learned), its rotary module (θ, rotated dimensions, pairing), BLOOM's
        ALiBi (slopes) or T5's relative position bias (buckets, distance)."""
        scheme = super().position_scheme()
        if scheme.kind != "none":
            return scheme
        rot = A.rotary_module(self.core.model)
        if rot is not None:
            inv = getattr(rot, "inv_freq", None)
            r = 2 * len(inv) if isinstance(inv, torch.Tensor) else 0
            theta = _rope_theta(self.core.config)
            d = self.head_size("decoder" if self.causal else "encoder") or r
            return PositionScheme("rotary", (("rotary module", type(rot).__name__),
                                             ("θ (rope_theta)", f"{theta:g}" if theta else "not in the config"),
                                             ("rotated dimensions", f"{r} of {d} per head"),
                                             ("pairing", f"dimension i with i + {r // 2} (rotate_half)")))
        if self.core.alibi:
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
        core = self.core
        root = core.stream_root("encoder") if core.is_encoder_decoder else base_model(core.model)
        scale = getattr(core.model.get_input_embeddings(), "embed_scale", None)
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
        table = A.rotary(self.core.model, torch.arange(n, device=self.device))
        if table is None:
            raise Unsupported(f"{self.id} has no rotary position embedding.")
        return table[0].cpu().numpy(), table[1].cpu().numpy()

    def alibi_slopes(self) -> np.ndarray:
        if not self.core.alibi:
            raise Unsupported(f"{self.id} has no ALiBi bias.")
        base = base_model(self.core.model)
        build = sys.modules[type(base).__module__].build_alibi_tensor
        H = base.config.n_head
        alibi = build(torch.ones(1, 2, dtype=torch.long, device=self.device), H, torch.float32)
        return np.asarray(alibi[:H, 0, 1].cpu().numpy())  # m_h · 1

    def _relative_module(self) -> Any:
        return next((m for m in self.core.model.modules() if getattr(m, "has_relative_attention_bias", False)
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
        model, model_type = self.core.model, self.core.model_type
        ids = torch.tensor(list(enc.ids), dtype=torch.long, device=self.device)
        base = base_model(model)
        with torch.inference_mode():
            x = model.get_input_embeddings()(ids)
            table = self.position_table()
            if positions:
                x = x + table.weight[table.offset: table.offset + len(ids)]
            if model_type in BERT_TYPES and hasattr(getattr(base, "encoder", None), "layer"):
                emb = base.embeddings
                if getattr(emb, "token_type_embeddings", None) is not None:
                    x = x + emb.token_type_embeddings.weight[0]
                x = emb.LayerNorm(x)[None]
                out = base.encoder.layer[0].attention(x)
                out = out[0] if isinstance(out, tuple) else out
                what = "layer 0 self-attention (BertAttention: attention, output projection, residual, LayerNorm)"
            elif model_type in GPT2_TYPES and hasattr(base, "h"):
                block, T = base.h[0], len(ids)
                mask = causal_mask(T).to(x.device)[None, None] if causal else None
                out = block.attn(block.ln_1(x[None]), attention_mask=mask)[0]
                what = "layer 0 self-attention with the model's own modules (ln_1, attn: c_attn, c_proj)" + \
                    ("" if causal else ", causal mask removed")
            else:
                raise Unsupported(f"The shuffle test runs layer 0 of the BERT and GPT-2 families and the built-in GPT; "
                                  f"{self.id} is '{model_type}'.")
        return out[0].float().cpu().numpy(), what


class Tables(HFPart):
    """The input embedding table, each row shown as its token."""

    def tables(self) -> dict[str, Table]:
        weight = self.core.model.get_input_embeddings().weight
        n_rows = weight.shape[0]
        tok = self.core.tokenizer
        if tok is None:
            words, special = tuple(f"<id {i}>" for i in range(n_rows)), (False,) * n_rows
        else:
            n_tok = len(tok)
            names = self.token_strings(range(min(n_rows, n_tok)))
            words = tuple(names) + tuple(f"<id {i}>" for i in range(len(names), n_rows))
            specials = set(getattr(tok, "all_special_ids", []) or [])
            special = tuple(i in specials or i >= n_tok or _unused(w) for i, w in enumerate(words))
        return {"input": Table("get_input_embeddings()", weight, words, special, None, subword=tok is not None)}


class Gradient(Tables, Stepper, PositionsPart):
    """Logits as a differentiable function of the input token embeddings (token attribution)."""

    def embed_ids(self, ids: torch.Tensor, side: str = "input") -> torch.Tensor:
        return cast(torch.Tensor, self.core.model.get_input_embeddings()(ids))

    def logits_from_embeddings(self, embeds: torch.Tensor, target: torch.Tensor | None = None,
                               keep: Sequence[int] | None = None) -> torch.Tensor:
        model = self.core.model
        if not self.core.has_head:
            raise Unsupported(f"{self.id} has no language-model head: there is no output token to attribute.")
        mask = torch.ones(embeds.shape[:2], dtype=torch.long, device=embeds.device)
        if target is not None:
            out = model(inputs_embeds=embeds, attention_mask=mask, decoder_inputs_embeds=target, use_cache=False,
                        return_dict=True)
            return cast(torch.Tensor, out.logits)
        if keep is None:
            return cast(torch.Tensor, model(inputs_embeds=embeds, attention_mask=mask, use_cache=False,
                                            return_dict=True).logits)
        return logits_at(model, torch.tensor(list(keep), dtype=torch.long, device=embeds.device),
                         inputs_embeds=embeds, attention_mask=mask, use_cache=False, return_dict=True)


class Patching(Lens, PatchesBlocks):
    """A causal LM run with activations patched at its blocks (found and hooked once, at load)."""

    def __init__(self, core: HFCore) -> None:
        super().__init__(core)
        self.patch_sites: TransformerSites | None = core.patch_sites

    def _block_logits(self, ids: torch.Tensor) -> torch.Tensor:
        """ids (B, T) -> the model's own logits (B, V) after the last token (only that position unembedded)."""
        return logits_at(self.core.model, 1, input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False,
                         return_dict=True)[:, -1]


PARTS: dict[str, type[HFPart]] = {"stepper": Stepper, "lens": Lens, "gradient": Gradient, "attention": Attention,
                                  "positions": PositionsPart, "alignment": Alignment, "patching": Patching,
                                  "tables": Tables}
