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

from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence, cast

import torch

from explorer.adapters import hf_attention as A
from explorer.adapters import hf_parts as parts
from explorer.adapters import lrp
from explorer.adapters.base import Acts, Adapter, Names, Record, Unsupported, causal_mask
from explorer.adapters.decision import Logits
from explorer.adapters.task_head import TASKS, TaskHead, label_names
from explorer.adapters.hf_parts import FINAL_NORMS, base_model as _base
from explorer.adapters.interventions import TransformerSites, find_sites
from explorer.adapters.protocols import Reads
from explorer.adapters.text import Encoded, encode_hf, no_typed_text, token_limit
from explorer.text.token_text import TokenText

if TYPE_CHECKING:
    from explorer.runtime.hf_runtime import PreTrainedModel


def _first_int(*values: object) -> int | None:
    for v in values:
        if isinstance(v, (list, tuple)):
            v = v[0] if v else None
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return None


def _ints(value: object) -> tuple[int, ...]:
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,)
    if isinstance(value, (list, tuple)):
        return tuple(v for v in value if isinstance(v, int) and not isinstance(v, bool))
    return ()


class HFAdapter(Adapter):
    """A Hugging Face encoder or decoder loaded with eager attention: its text and its one forward pass. What else
    it can do is composed of parts (explorer.adapters.hf_parts), given by `part(name)`."""

    supports_padding = True  # run(..., pad=n) appends n padding tokens
    patch_sites: TransformerSites | None = None

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
        lrp.install(self.model)  # once, at load: the hooks act only where relevance is propagated
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
        if str((loaded.meta or {}).get("task", "")) in TASKS:  # a classifier or tagger: its head decides
            self.task_head, self.decision_fns = _task(self, self.model, self.family)
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

    def token_strings(self, ids: Iterable[int]) -> list[str]:
        """Each id shown on its own (explorer.text.token_text: `·` for a space, bytes decoded)."""
        if self.display is None:
            return [f"#{int(i)}" for i in ids]
        return [self.display.text(int(i)) for i in ids]

    def sequence_strings(self, ids: Iterable[int]) -> list[str]:
        """The ids of one sequence, shown as in a sentence (a character split over tokens shown in each)."""
        if self.display is None:
            return [f"#{int(i)}" for i in ids]
        return self.display.texts([int(i) for i in ids])

    def piece_strings(self, ids: Iterable[int]) -> list[str]:
        """The tokenizer's own piece names (##, Ġ, ▁ markers kept)."""
        ids = [int(i) for i in ids]
        if self.tokenizer is None:
            return [f"#{i}" for i in ids]
        return [str(t) if t is not None else f"#{i}" for i, t in zip(ids, self.tokenizer.convert_ids_to_tokens(ids))]

    def detokenize(self, ids: Sequence[int]) -> str:
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

    def _put_arithmetic(self, acts: Acts, calls: list[A.Call], hidden: list[torch.Tensor], attention_mask: torch.Tensor,
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
                if (value := a[key]) is not None:
                    acts.put(f"{name}.{key}", value)
            acts.put(f"{name}.scale", torch.tensor(a["scale"], dtype=torch.float64))
            if a["softcap"]:
                acts.put(f"{name}.softcap", torch.tensor(a["softcap"], dtype=torch.float64))
            if rope is not None and site[0] != "cross" and a["q"].shape[1] == T:
                acts.put(f"{name}.q_pre", A.unrotate(a["q"], *rope))
                acts.put(f"{name}.k_pre", A.unrotate(a["k"], *rope))

    def _bloom(self, hidden: list[torch.Tensor], attention_mask: torch.Tensor) -> list[A.Arithmetic]:
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
        out: list[A.Arithmetic] = []
        for block, h in zip(base.h, hidden):
            attn = block.self_attention
            q, k, v = (t[0].float() for t in attn._reshape(attn.query_key_value(block.input_layernorm(h))))
            out.append({"q": q, "k": k, "v": v, "kv_head": torch.arange(H), "mask": mask,
                        "bias": attn.beta * alibi[:, None, :].expand(H, T, T), "scale": float(attn.inv_norm_factor),
                        "softcap": None})
        return out

    lens_names: tuple[str, ...] = ("blocks.*.resid_pre", "blocks.*.resid_post", "ln_final", "logits")

    def _final_norm(self, prefix: str) -> bool:
        base = _base(self.model)
        part = {"encoder.": getattr(base, "encoder", None),
                "decoder.": getattr(base, "decoder", None)}.get(prefix, base)
        return any(isinstance(getattr(part, n, None), torch.nn.Module) for n in FINAL_NORMS)

    def _put_embeddings(self, acts: Acts, ids: torch.Tensor) -> None:
        acts.put("embed", self.model.get_input_embeddings()(ids))
        try:
            table = parts.PositionsPart(self).position_table()
        except Unsupported:
            return
        acts.put("pos_embed", table.weight[table.offset: table.offset + ids.shape[0]])

    def stream_root(self, stream: str) -> torch.nn.Module | None:
        """The module holding attention stream `stream`'s layers (an encoder-decoder's encoder or decoder)."""
        if stream in ("decoder", "cross") and self.is_encoder_decoder:
            return self.model.get_decoder() if hasattr(self.model, "get_decoder") else None
        if stream == "encoder" and self.is_encoder_decoder:
            return self.model.get_encoder() if hasattr(self.model, "get_encoder") else None
        return cast(torch.nn.Module | None, _base(self.model))

    @property
    def n_heads(self) -> int:
        names = ("num_attention_heads", "n_head", "num_heads", "encoder_attention_heads")
        return next((v for v in (getattr(self.config, n, None) for n in names) if isinstance(v, int)), 0)

    # ------------------------------------------------------------------ what else it can do
    def part(self, name: str) -> Reads:
        """Its part for capability `name` (explorer.adapters.hf_parts.PARTS), or itself: what the part reads is the
        model's own, and explorer.adapters.capabilities.of decides from it whether the model has the capability."""
        made = parts.PARTS.get(name)
        return made(self) if made is not None else self


def _task(adapter: HFAdapter, model: PreTrainedModel,
          family: str) -> tuple[TaskHead, tuple[Callable[[torch.Tensor], torch.Tensor], Logits]]:
    """The decision of a Hugging Face *ForSequenceClassification / *ForTokenClassification: labels from
    config.id2label, the model's own head on input embeddings (inputs_embeds: position and segment vectors are added
    by the model itself)."""
    import inspect

    task = str(adapter.loaded.meta.get("task"))
    cfg = model.config
    n = _first_int(getattr(cfg, "num_labels", None)) or len(getattr(cfg, "id2label", None) or {}) or 2
    labels, why = label_names(n, getattr(cfg, "id2label", None))
    cls = type(model).__name__
    if task == TASKS[1]:
        pooling = ""
    elif family == "decoder":
        pooling = f"the final state of the last token, through its score layer ({cls}'s own rule)"
    else:
        pooling = f"the final state of the first token ([CLS] or <s>), through {cls}'s own head"
    head_module = next((m for name in ("classifier", "score", "qa_outputs", "sequence_summary", "logits_proj")
                        if isinstance(m := getattr(model, name, None), torch.nn.Module)), None)
    weight = getattr(head_module, "weight", None) if head_module is not None else None
    if weight is None and head_module is not None:
        weight = next((p for p in head_module.parameters() if p.dim() == 2), None)
    source = f"{cls}: {type(head_module).__name__ if head_module is not None else 'its head'}" + (
        f" {tuple(weight.shape)}" if isinstance(weight, torch.Tensor) else "")
    head = TaskHead(task, labels, pooling, pairs=task == TASKS[0] and family == "encoder",
                    assumed=(why,) if why else (), source=source)
    takes_segments = "token_type_ids" in inspect.signature(model.forward).parameters
    embeddings = model.get_input_embeddings()

    def logits(embeds: torch.Tensor, segments: torch.Tensor | None = None) -> torch.Tensor:
        mask = torch.ones(embeds.shape[:2], dtype=torch.long, device=embeds.device)
        extra = {"token_type_ids": segments} if segments is not None and takes_segments else {}
        out = model(inputs_embeds=embeds.to(cast(torch.dtype, embeddings.weight.dtype)), attention_mask=mask, **extra)
        return cast(torch.Tensor, out.logits).float()

    return head, (lambda ids: cast(torch.Tensor, embeddings(ids)), logits)


# -------------------------------------------------------------------------------------- encoder-decoder
class HFSeq2SeqAdapter(HFAdapter):
    """HF encoder-decoder: encoder self-, decoder self- and cross-attention; the decoder generates."""

    is_encoder_decoder = True
    supports_padding = False

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
