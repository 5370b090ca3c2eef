"""Uniform access to the self-attention of transformers: attention weights and the Q/K/V projections.

One small interface (`TransformerAdapter`), one adapter per family, in the spirit of the LLM Transparency
Tool's `TransparentLlm` and inseq's separate decoder-only / encoder-decoder adapters:

  TinyGPTAdapter     explorer.models.tiny_gpt.GPT  (blocks `h[i]`: `ln_1` -> `attn.c_attn` -> q, k, v)
  BertAdapter        Hugging Face BERT family      (`encoder.layer[i].attention.self.query/key/value`)
  GPT2Adapter        Hugging Face GPT-2 family     (`h[i].ln_1` -> `h[i].attn.c_attn` (Conv1D) -> q, k, v)
  HFGenericAdapter   any other HF encoder or decoder: attention probabilities only
  HFSeq2SeqAdapter   any HF encoder-decoder: encoder self-, decoder self- and cross-attention, probabilities only

Nothing is attached to the (shared) model: attentions come from the model's own outputs
(`output_attentions=True`, eager attention) and the layer inputs from `output_hidden_states=True`; Q, K, V are
recomputed by applying the layer's own projection modules to those inputs.

Shapes: B batch, T tokens (Tq queries, Tk keys), H heads, d head size, C model width, L layers.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

STREAM_LABELS = {
    "encoder": "Encoder self-attention",
    "decoder": "Decoder self-attention",
    "cross": "Cross-attention (decoder queries → encoder keys)",
}
BERT_TYPES = {"bert", "roberta", "xlm-roberta", "camembert", "electra", "data2vec-text", "ernie", "xmod"}
GPT2_TYPES = {"gpt2"}


class UnsupportedModel(ValueError):
    """The loaded model has no attention this view can read; the message is shown to the user."""


@dataclass
class Capture:
    """What one forward pass gives the view.

    attentions: stream -> list over layers of (B, H, Tq, Tk) softmax weights (the model's own outputs).
    layer_inputs: stream -> list over layers of (B, T, C): the hidden states entering each layer's
      self-attention (after the pre-norm for pre-LN models), only for adapters with Q/K/V arithmetic.
    """

    attentions: dict[str, list[torch.Tensor]]
    layer_inputs: dict[str, list[torch.Tensor]] = field(default_factory=dict)


class TransformerAdapter:
    """The interface: run a batch with attentions; recompute q, k, v of one layer from the weights."""

    name = "transformer"
    causal: bool = False
    streams: tuple[str, ...] = ("encoder",)
    arithmetic: bool = False  # q/k/v can be recomputed from the weights
    arithmetic_note: str = ""  # why not, when arithmetic is False

    def __init__(self, loaded: Any) -> None:
        self.loaded = loaded
        self.model = loaded.model

    @property
    def n_layers(self) -> int:
        return int(self.loaded.n_layers or 0)

    @property
    def n_heads(self) -> int:
        return int(self.loaded.n_heads or 0)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def run(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
            token_type_ids: torch.Tensor | None = None, decoder_input_ids: torch.Tensor | None = None) -> Capture:
        """input_ids (B, T) -> Capture. attention_mask (B, T): 1 = token, 0 = padding."""
        raise NotImplementedError

    def qkv(self, layer: int, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x (B, T, C) entering layer `layer`'s attention -> q, k, v each (B, H, T, d)."""
        raise UnsupportedModel(self.arithmetic_note or "Q/K/V are not available for this model.")

    def scaling(self, layer: int) -> float:
        """The factor the model multiplies q·k by (1/√d for all adapters here, unless the config changes it)."""
        raise UnsupportedModel(self.arithmetic_note)

    def _split_heads(self, t: torch.Tensor) -> torch.Tensor:
        B, T, C = t.shape
        return t.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2)


# -------------------------------------------------------------------------------------- built-in GPT
class TinyGPTAdapter(TransformerAdapter):
    name = "built-in GPT"
    causal = True
    streams = ("decoder",)
    arithmetic = True

    def run(self, input_ids, attention_mask=None, token_type_ids=None, decoder_input_ids=None) -> Capture:
        # The same steps as GPT.forward, block by block, so that each block's input is kept.
        gpt = self.model
        T = input_ids.shape[1]
        if T > gpt.config.block_size:
            raise UnsupportedModel(f"{T} tokens exceed the model's context of {gpt.config.block_size}.")
        x = gpt.drop(gpt.wte(input_ids) + gpt.position_embeddings(T))
        attentions, inputs = [], []
        for block in gpt.h:
            inputs.append(block.ln_1(x) if block.norm == "pre" else x)
            x, att = block(x)
            attentions.append(att)
        return Capture({"decoder": attentions}, {"decoder": inputs})

    def qkv(self, layer, x):
        attn = self.model.h[layer].attn
        q, k, v = attn.c_attn(x).split(attn.n_embd, dim=2)
        return self._split_heads(q), self._split_heads(k), self._split_heads(v)

    def scaling(self, layer: int) -> float:
        return 1.0 / math.sqrt(self.model.config.n_embd // self.model.config.n_head)


# ------------------------------------------------------------------------------------- Hugging Face
def _base(model: torch.nn.Module) -> torch.nn.Module:
    return getattr(model, "base_model", model)


def _model_type(loaded: Any) -> str:
    return str(getattr(loaded.config, "model_type", "") or "")


class HFGenericAdapter(TransformerAdapter):
    """Any HF encoder-only or decoder-only model loaded with eager attention: probabilities only."""

    name = "Hugging Face"

    def __init__(self, loaded: Any) -> None:
        super().__init__(loaded)
        self.causal = loaded.family == "decoder"
        self.streams = ("decoder",) if self.causal else ("encoder",)
        mt = _model_type(loaded) or "this architecture"
        self.arithmetic_note = (
            f"The step-by-step Q·K/√d arithmetic is implemented for the built-in GPT, the BERT family and the GPT-2 "
            f"family. '{mt}' computes its scores differently (e.g. rotary or relative position terms, grouped "
            "key/value heads, other projection layouts), so recomputing them here could show numbers the model "
            "does not use: only the model's own attention probabilities are shown."
        )

    def _forward(self, **kwargs: Any) -> Any:
        return _base(self.model)(**kwargs, output_attentions=True, output_hidden_states=self.arithmetic,
                                 return_dict=True)

    def run(self, input_ids, attention_mask=None, token_type_ids=None, decoder_input_ids=None) -> Capture:
        kwargs: dict[str, Any] = {"input_ids": input_ids}
        if attention_mask is not None:
            kwargs["attention_mask"] = attention_mask
        if token_type_ids is not None:
            kwargs["token_type_ids"] = token_type_ids
        try:
            out = self._forward(**kwargs)
        except TypeError:  # models without token_type_ids
            kwargs.pop("token_type_ids", None)
            out = self._forward(**kwargs)
        atts = getattr(out, "attentions", None)
        if not atts or any(a is None for a in atts):
            raise UnsupportedModel(
                f"{self.loaded.id} returned no attention weights (it needs attn_implementation='eager')."
            )
        stream = self.streams[0]
        cap = Capture({stream: list(atts)})
        if self.arithmetic:
            hs = list(out.hidden_states)[: len(atts)]  # hidden_states[i] is the input of layer i
            cap.layer_inputs[stream] = [self._attn_input(i, h) for i, h in enumerate(hs)]
        return cap

    def _attn_input(self, layer: int, hidden: torch.Tensor) -> torch.Tensor:
        return hidden


class BertAdapter(HFGenericAdapter):
    """BERT family (post-LN): layer i's attention reads hidden_states[i] through attention.self.query/key/value."""

    name = "BERT family"
    arithmetic = True

    def _self(self, layer: int) -> Any:
        return _base(self.model).encoder.layer[layer].attention.self

    def qkv(self, layer, x):
        s = self._self(layer)
        return self._split_heads(s.query(x)), self._split_heads(s.key(x)), self._split_heads(s.value(x))

    def scaling(self, layer: int) -> float:
        s = self._self(layer)
        return float(getattr(s, "scaling", 1.0 / math.sqrt(s.attention_head_size)))


class GPT2Adapter(HFGenericAdapter):
    """GPT-2 family (pre-LN): layer i's attention reads ln_1(hidden_states[i]) through attn.c_attn (Conv1D)."""

    name = "GPT-2 family"
    arithmetic = True

    def _block(self, layer: int) -> Any:
        return _base(self.model).h[layer]

    def _attn_input(self, layer: int, hidden: torch.Tensor) -> torch.Tensor:
        return self._block(layer).ln_1(hidden)

    def qkv(self, layer, x):
        attn = self._block(layer).attn
        q, k, v = attn.c_attn(x).split(attn.split_size, dim=2)
        return self._split_heads(q), self._split_heads(k), self._split_heads(v)

    def scaling(self, layer: int) -> float:
        attn = self._block(layer).attn
        if hasattr(attn, "scaling"):
            return float(attn.scaling)
        s = 1.0 / math.sqrt(attn.head_dim) if attn.scale_attn_weights else 1.0
        return s / float(layer + 1) if attn.scale_attn_by_inverse_layer_idx else s


class HFSeq2SeqAdapter(HFGenericAdapter):
    """HF encoder-decoder: encoder self-attention, decoder self-attention (causal) and cross-attention."""

    name = "Hugging Face encoder–decoder"
    streams = ("encoder", "decoder", "cross")

    def __init__(self, loaded: Any) -> None:
        super().__init__(loaded)
        self.causal = False
        self.streams = ("encoder", "decoder", "cross")

    @property
    def n_layers(self) -> int:  # encoder layers; the decoder may differ (see the Capture's lists)
        cfg = self.loaded.config
        return int(getattr(cfg, "num_layers", None) or getattr(cfg, "encoder_layers", None) or self.loaded.n_layers or 0)

    @property
    def n_heads(self) -> int:
        cfg = self.loaded.config
        return int(getattr(cfg, "num_heads", None) or getattr(cfg, "encoder_attention_heads", None)
                   or self.loaded.n_heads or 0)

    def run(self, input_ids, attention_mask=None, token_type_ids=None, decoder_input_ids=None) -> Capture:
        if decoder_input_ids is None:
            raise UnsupportedModel("An encoder–decoder model needs a decoder input (the target text).")
        kwargs: dict[str, Any] = {"input_ids": input_ids, "decoder_input_ids": decoder_input_ids}
        if attention_mask is not None:
            kwargs["attention_mask"] = attention_mask
        out = self.model(**kwargs, output_attentions=True, return_dict=True)
        caps: dict[str, list[torch.Tensor]] = {}
        for stream, attr in (("encoder", "encoder_attentions"), ("decoder", "decoder_attentions"),
                             ("cross", "cross_attentions")):
            atts = getattr(out, attr, None)
            if not atts or any(a is None for a in atts):
                raise UnsupportedModel(f"{self.loaded.id} returned no {STREAM_LABELS[stream].lower()} weights.")
            caps[stream] = list(atts)
        return Capture(caps)


def adapter_for(loaded: Any) -> TransformerAdapter:
    """The adapter for a registry.LoadedModel; raises UnsupportedModel with a user-facing reason."""
    model = getattr(loaded, "model", None)
    if model is None:
        raise UnsupportedModel(
            f"{loaded.id} is a bare state dict: the self-attention view needs a transformer it can run "
            "(a built-in GPT, or a Hugging Face model folder with config.json)."
        )
    from explorer.models.tiny_gpt import GPT

    if isinstance(model, GPT):
        return TinyGPTAdapter(loaded)
    if not hasattr(model, "config") or loaded.family not in ("encoder", "decoder", "encoder-decoder"):
        raise UnsupportedModel(
            f"{loaded.id} is not a transformer (family: {loaded.family}); pick a built-in GPT, MiniLM or a "
            "Hugging Face encoder, decoder or encoder–decoder."
        )
    if getattr(loaded.config, "_attn_implementation", "eager") not in ("eager", None):
        raise UnsupportedModel(f"{loaded.id} was not loaded with eager attention, so it cannot return weights.")
    if loaded.family == "encoder-decoder":
        return HFSeq2SeqAdapter(loaded)
    mt = _model_type(loaded)
    base = _base(model)
    if mt in BERT_TYPES and hasattr(getattr(base, "encoder", None), "layer"):
        s = base.encoder.layer[0].attention.self
        if all(hasattr(s, n) for n in ("query", "key", "value")) and \
                getattr(loaded.config, "position_embedding_type", "absolute") == "absolute":
            return BertAdapter(loaded)
    if mt in GPT2_TYPES and hasattr(base, "h"):
        return GPT2Adapter(loaded)
    return HFGenericAdapter(loaded)
