"""Per-head self-attention: model + text -> AttentionTrace (numpy), plus the pure arithmetic the view shows.

`attention_trace` reads the model's activation record (one forward pass, explorer.adapters) and keeps:
  attentions (L, H, Tq, Tk)  the model's own softmax weights (float32; float16 when L·H·Tq·Tk > 2**22, to keep
                             the cached trace small: ~38 MB instead of 75 MB for MiniLM at 512 tokens)
  thumbnails (L, H, t, t)    each head max-pooled to at most `thumb` × `thumb` (the model view)
  rollout    (L, T, T)       Abnar & Zuidema (2020): Ã_l = rownorm(0.5·mean_h A_l + 0.5·I), R_l = Ã_l · R_{l-1}
  q, k, v    (L, H, T, d)    the record's blocks.{l}.attn.q|k|v, as the model multiplies them (after RoPE; k and v
                             repeated to the query heads under grouped-query attention)
  mask       (Tq, Tk)        the additive mask the model applied: 0 or −inf (causal and padding); masks (L, Tq, Tk)
                             per layer when they differ (sliding windows)
  bias       (L, H, Tq, Tk)  a position term the model adds to the scores (T5's relative bias, BLOOM's ALiBi), or None
  q_pre, k_pre (L, H, T, d)  rotary models: q and k before the rotation; rope_cos / rope_sin (T, r) the model's own

Everything else (hiding special tokens, aggregations, the step-by-step table) is a pure function of a trace.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence, TypedDict, TypeVar, cast, overload

import numpy as np
import torch
import torch.nn.functional as F

from explorer.adapters.protocols import HasAttention, Loaded
from explorer.adapters.base import Record, Unsupported
from explorer.adapters import examples
from explorer.data.examples import NATURAL, PRONOUN
from explorer.adapters.text import Encoded
from explorer.runtime import budget
from explorer.runtime.errors import ViewError

STREAM_LABELS = {
    "encoder": "Encoder self-attention",
    "decoder": "Decoder self-attention",
    "cross": "Cross-attention (decoder queries → encoder keys)",
}

FLOAT16_ABOVE = 2**22  # attention entries above which the trace stores float16
CHECK_TOL = 1e-4  # recomputed softmax(QKᵀ·s + M) must equal the model's weights to this, else no arithmetic

PRESETS = NATURAL["attention"]  # natural-English examples (explorer.data.examples); views ask the model for its own
D = TypeVar("D")


@dataclass(frozen=True)
class AttentionTrace:
    """One forward pass, one attention stream ("encoder", "decoder" or "cross").

    tokens (Tq,) query tokens; key_tokens (Tk,) key tokens (== tokens except for cross-attention);
    special / key_special: True for special tokens ([CLS], [SEP], <s>, </s>, <bos>, [PAD]);
    padding (Tk,) True for padding keys; segments (Tq,) 0/1 sentence of a pair.
    attentions (L, H, Tq, Tk); thumbnails (L, H, tq, tk); rollout (L, Tq, Tk) or None (cross-attention);
    mask (Tq, Tk) additive 0/−inf; q, k (L, H, T, d), v (L, H, T, d) or None; scales (L,) the factor on q·k.
    bias (L, H, Tq, Tk) or None: T5's relative position bias / BLOOM's ALiBi (bias_name says which); kv_head (L, H)
    the key/value head each query head reads; softcaps (L,) or (); q_pre, k_pre (L, H, T, d) and rope_cos,
    rope_sin (T, r), rope_inv_freq (r/2,): rotary models (q_pre rotated by cos/sin at its position is q).
    """

    model_id: str
    stream: str = ""
    streams: tuple[str, ...] = ()
    causal: bool = False
    tokens: tuple[str, ...] = ()
    key_tokens: tuple[str, ...] = ()
    special: tuple[bool, ...] = ()
    key_special: tuple[bool, ...] = ()
    padding: tuple[bool, ...] = ()
    segments: tuple[int, ...] = ()
    attentions: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 0, 0), np.float32))
    thumbnails: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 0, 0), np.float32))
    rollout: np.ndarray | None = None
    mask: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    q: np.ndarray | None = None
    k: np.ndarray | None = None
    v: np.ndarray | None = None
    scales: tuple[float, ...] = ()
    arithmetic_note: str = ""  # why q/k/v are None
    check_error: float | None = None  # max |softmax(QKᵀ·s + M) − model| over the checked layers
    scaling: tuple[float | None, ...] = ()  # per layer, the factor on q·k read from the model (None: not read)
    head_size: int = 0  # d, the size of one head's q and k (0: not read)
    masks: np.ndarray | None = None
    bias: np.ndarray | None = None
    bias_name: str = ""
    kv_head: np.ndarray | None = None
    softcaps: tuple[float, ...] = ()
    q_pre: np.ndarray | None = None
    k_pre: np.ndarray | None = None
    rope_cos: np.ndarray | None = None
    rope_sin: np.ndarray | None = None
    rope_inv_freq: np.ndarray | None = None
    notes: tuple[str, ...] = ()
    adapter: str = ""

    @property
    def n_layers(self) -> int:
        return int(self.attentions.shape[0]) if self.attentions.ndim == 4 else 0

    @property
    def n_heads(self) -> int:
        return int(self.attentions.shape[1]) if self.attentions.ndim == 4 else 0

    @property
    def has_arithmetic(self) -> bool:
        return self.q is not None

    @property
    def stream_label(self) -> str:
        return STREAM_LABELS.get(self.stream, self.stream)


class AttentionError(ViewError, ValueError):
    """No attention to show: the model is not a transformer this view can run, or it could not run on this input."""

    alert = "warning"


def _empty(model_id: str, notes: tuple[str, ...] = ()) -> AttentionTrace:
    """A trace with no token to read: its `notes` say why."""
    return AttentionTrace(model_id=model_id, notes=notes)


# --------------------------------------------------------------------------------------------- probe
def attention_trace(loaded: Loaded, text: str, pair: str = "", stream: str = "", pad: int = 0,
                    thumb: int = 48, arithmetic: bool = True) -> AttentionTrace:
    """The record of `loaded` on `text` (and `pair`: second sentence for encoders, target text for encoder-decoders).

    stream: "encoder" | "decoder" | "cross" ("" = the model's first). pad: extra padding tokens appended with
    attention_mask 0 (shows the padding mask; HF encoders and decoders). thumb: thumbnail size of the model view.
    arithmetic: also read Q, K, V (and check them against the model's own attention) for the step-by-step view.
    Bad text gives notes (no tokens: an empty trace); raises AttentionError (class docstring).
    """
    mid = str(getattr(loaded, "id", "model"))
    if (adapter := loaded.caps.attention) is None:
        raise AttentionError(_not_a_transformer(loaded, mid))
    shape = budget.shape_of(loaded.model)
    cap = budget.fit_tokens(lambda t: price(shape, t, arithmetic), adapter.max_tokens)
    src, tgt, notes = _inputs(adapter, text or "", pair or "", cap)
    if not src.ids or (tgt is not None and not tgt.ids):
        return _empty(mid, tuple(dict.fromkeys(notes + list(tgt.notes if tgt is not None else ()))))
    stream = stream if stream in adapter.streams else next(iter(adapter.streams))
    prefix = adapter.streams[stream]
    pad = _padding(adapter, pad, len(src.ids), notes)
    rec = _read_record(adapter, mid, src, tgt, _wanted(prefix, arithmetic), pad)
    atts = torch.from_numpy(rec.stack(prefix + ".pattern"))                   # (L, H, Tq, Tk)
    masks = torch.from_numpy(rec.stack(prefix + ".mask")).float()             # (L, Tq, Tk)
    qkv = _arithmetic(rec, prefix, adapter, masks, atts) if arithmetic else _Arithmetic()
    attentions, thumbs, roll = _maps(atts, thumb, notes)
    return AttentionTrace(
        model_id=mid, stream=stream, streams=tuple(adapter.streams), causal=stream == "decoder",
        **_tokens(rec, stream, pad), attentions=attentions, thumbnails=thumbs, rollout=roll,
        mask=masks[0].numpy().astype(np.float32), q=qkv.q, k=qkv.k, v=qkv.v, scales=qkv.scales,
        arithmetic_note=qkv.note, check_error=qkv.check,
        scaling=adapter.scalings(stream), head_size=adapter.head_size(stream), bias=qkv.bias,
        masks=masks.numpy() if bool((masks != masks[:1]).any()) else None, **qkv.extra,
        notes=tuple(dict.fromkeys(notes)), adapter=adapter.name,
    )


def price(shape: budget.Shape, tokens: int, arithmetic: bool = True) -> budget.Price:
    """What `attention_trace` costs on `tokens` tokens: one forward; the trace keeps up to three (L, H, T, T) arrays
    (two without the arithmetic), and the work holds about four more and eight (L, T, d) arrays at its peak (the
    model's attentions, the record, the stacked copies: measured on SmolLM2, +602 MB at 300 tokens, +228 MB at 150)."""
    kept = budget.attention_bytes(shape, tokens, 3 if arithmetic else 2)
    return budget.forward(shape, tokens, kept=kept,
                          transient=budget.attention_bytes(shape, tokens, 4) + budget.layer_bytes(shape, tokens, 8))


@dataclass(frozen=True)
class AttentionShape:
    """What does not depend on the text: the layers and heads of one attention stream, for the pickers."""

    model_id: str
    adapter: str
    stream: str
    causal: bool
    n_layers: int
    n_heads: int
    scaling: tuple[float | None, ...] = ()  # per layer, the factor on q·k read from the model (None: not read)
    head_size: int = 0  # d, the size of one head's q and k (0: not read)

    @property
    def stream_label(self) -> str:
        return STREAM_LABELS.get(self.stream, self.stream)


def attention_shape(loaded: Loaded, stream: str = "") -> AttentionShape:
    """The layers and heads of `stream` ("" = the model's first), read from the attention patterns the model records
    for one word: the record's own count, whatever the family calls them in its config (no probe is run: no
    budget, arithmetic, thumbnails or rollout). Raises AttentionError when the model cannot be shown at all."""
    mid = str(getattr(loaded, "id", "model"))
    if (adapter := loaded.caps.attention) is None:
        raise AttentionError(_not_a_transformer(loaded, mid))
    stream = stream if stream in adapter.streams else next(iter(adapter.streams))
    src, tgt, _ = _inputs(adapter, "a", "")  # a word and the model's own special tokens (a decoder's target too)
    if not src.ids or (tgt is not None and not tgt.ids):  # a vocabulary without "a": its first word
        src, tgt, _ = _inputs(adapter, adapter.token_strings([0])[0], "")
    pattern = adapter.streams[stream] + ".pattern"
    rec = _read_record(adapter, mid, src, tgt, [pattern.format(l="*")], 0)
    layers = rec.layers(pattern)
    heads = int(rec[pattern.format(l=layers[0])].shape[0]) if layers else 0
    return AttentionShape(mid, adapter.name, stream, stream == "decoder", len(layers), heads,
                          adapter.scalings(stream), adapter.head_size(stream))


def _not_a_transformer(loaded: Loaded, mid: str) -> str:
    """The error of a model without self-attention to show."""
    what = "a bare state dict" if loaded.model is None else f"not a transformer (family: {loaded.family})"
    return (f"{mid} is {what}: the self-attention view needs a transformer it can run (a built-in GPT, MiniLM, or a "
            "Hugging Face encoder, decoder or encoder–decoder).")


def _inputs(adapter: HasAttention, text: str, pair: str,
            cap: int | None = None) -> tuple[Encoded, Encoded | None, list[str]]:
    """(input encoding, the decoder's target for encoder-decoders, notes: the input's own first): the adapter's own
    input convention; each side cut to `cap` tokens (the per-request budget's)."""
    notes: list[str] = []
    if adapter.is_encoder_decoder:
        if not pair.strip():
            notes.append("The decoder reads the same text as the encoder; type a target in the second box to change "
                         "it.")
        src = adapter.encode(text, max_tokens=cap)
        tgt = adapter.encode(pair if pair.strip() else text, side="target", max_tokens=cap)
        return src, tgt, list(src.notes) + notes
    if pair.strip() and adapter.family != "encoder":
        notes.append("Sentence pairs are for encoders (two inputs joined by [SEP]); the second text is ignored.")
        pair = ""
    src = adapter.encode(text, pair=pair, max_tokens=cap)
    return src, None, list(src.notes) + notes


def _padding(adapter: HasAttention, pad: int, n_tokens: int, notes: list[str]) -> int:
    """The padding tokens to append: `pad`, none where the adapter takes no padding mask (a note says so), at most
    what fits after `n_tokens` in the model's context."""
    pad = max(0, int(pad))
    if pad and not adapter.supports_padding:
        notes.append("Padding is shown for Hugging Face encoders and decoders (the built-in GPT takes no padding "
                     "mask: right padding cannot change earlier tokens of a causal model anyway).")
        pad = 0
    return int(min(pad, max(0, adapter.max_tokens - n_tokens)))


def _wanted(prefix: str, arithmetic: bool) -> list[str]:
    """The record names to compute: the pattern and mask of every layer, and what the arithmetic reads (Q, K, V,
    the scale and the model's extra terms, the rotary tables)."""
    every = prefix.format(l="*")
    names = [every + n for n in (".pattern", ".mask")]
    if arithmetic:
        names += [every + n for n in (".q", ".k", ".v", ".scale", ".bias", ".kv_head", ".softcap", ".q_pre",
                                      ".k_pre")] + ["rope.*"]
    return names


def _read_record(adapter: HasAttention, mid: str, src: Encoded, tgt: Encoded | None, names: list[str],
                 pad: int) -> Record:
    """The record of one forward pass. Raises AttentionError saying why the model could not run on this input."""
    try:
        return cast(Record, adapter.run(src, names=names, target=tgt, pad=pad))
    except Unsupported as exc:
        raise AttentionError(str(exc)) from None
    except (RuntimeError, ValueError, IndexError) as exc:
        raise AttentionError(f"{mid} could not run on this input: {type(exc).__name__}: {str(exc)[:200]}") from None


class _TokenFields(TypedDict):
    """The trace's token fields (AttentionTrace's)."""

    tokens: tuple[str, ...]
    key_tokens: tuple[str, ...]
    special: tuple[bool, ...]
    key_special: tuple[bool, ...]
    padding: tuple[bool, ...]
    segments: tuple[int, ...]


class _RopeFields(TypedDict, total=False):
    """The trace's rotary fields (AttentionTrace's), present for rotary models only."""

    q_pre: np.ndarray
    k_pre: np.ndarray
    rope_cos: np.ndarray
    rope_sin: np.ndarray
    rope_inv_freq: np.ndarray | None


class _ExtraFields(_RopeFields, total=False):
    """The trace's fields of the model's extra attention terms (AttentionTrace's)."""

    softcaps: tuple[float, ...]
    kv_head: np.ndarray | None
    bias_name: str


def _tokens(rec: Record, stream: str, pad: int) -> _TokenFields:
    """The trace's token fields: queries (Tq,) are the decoder's tokens for the decoder and cross streams, keys
    (Tk,) the decoder's for the decoder stream (else the input's); the last `pad` keys are padding."""
    queries = rec.input if stream == "encoder" or rec.target is None else rec.target
    keys = rec.target if stream == "decoder" and rec.target is not None else rec.input
    return _TokenFields(tokens=tuple(queries.tokens), key_tokens=tuple(keys.tokens),
                        special=tuple(bool(x) for x in queries.special),
                        key_special=tuple(bool(x) for x in keys.special),
                        padding=(False,) * (len(keys.ids) - pad) + (True,) * pad,
                        segments=tuple(queries.segments or (0,) * len(queries.ids)))


@dataclass(frozen=True)
class _Arithmetic:
    """What the step-by-step view reads, kept only when softmax(QKᵀ·s + M) recomputed from it matches the model.

    q, k, v (L, H, T, d) or None; bias (L, H, Tq, Tk) or None; scales (L,) the factor on q·k; check: max |recomputed
    − model| (None: not read); note: why q is None; extra: the trace's softcaps, kv_head, bias_name and rotary fields.
    """

    q: np.ndarray | None = None
    k: np.ndarray | None = None
    v: np.ndarray | None = None
    bias: np.ndarray | None = None
    scales: tuple[float, ...] = ()
    check: float | None = None
    note: str = ""
    extra: _ExtraFields = field(default_factory=_ExtraFields)


def _arithmetic(rec: Record, prefix: str, adapter: HasAttention, masks: torch.Tensor,
                atts: torch.Tensor) -> _Arithmetic:
    """Q, K, V, the scales and the model's extra terms (bias, soft-cap) of every layer, checked against the model's
    own weights atts (L, H, Tq, Tk) under masks (L, Tq, Tk) on the first and last layers."""
    if not rec.layers(prefix + ".q"):
        return _Arithmetic(note=adapter.arithmetic_note)
    q, k, v = (torch.from_numpy(rec.stack(prefix + n)).float() for n in (".q", ".k", ".v"))
    scales = tuple(float(x) for x in rec.stack(prefix + ".scale"))
    bias = _optional(rec, prefix + ".bias", None)
    bias_t = torch.from_numpy(bias).float() if bias is not None else None
    caps = tuple(float(x) for x in _optional(rec, prefix + ".softcap", ()))
    check = _check(q, k, scales, masks, bias_t, caps, atts)
    if check <= CHECK_TOL:
        extra: _ExtraFields = {"softcaps": caps, "kv_head": _optional(rec, prefix + ".kv_head", None),
                               "bias_name": adapter.bias_name if bias_t is not None else "", **_rope(rec, prefix)}
        return _Arithmetic(q.numpy(), k.numpy(), v.numpy(), bias_t.numpy() if bias_t is not None else None, scales,
                           check, "", extra)
    return _Arithmetic(scales=scales, check=check, note=(
        f"Recomputing softmax(s·QKᵀ + bias + M) from what this model's attention multiplied differs from its own "
        f"attention by {check:.2g} (> {CHECK_TOL:g}), so the arithmetic is not shown."))


def _optional(rec: Record, name: str, default: D) -> np.ndarray | D:
    """rec.stack(name) (L, ...) when the record holds `name` for some layer, else `default`."""
    return rec.stack(name) if rec.layers(name) else default


def _rope(rec: Record, prefix: str) -> _RopeFields:
    """Rotary models: q_pre, k_pre (L, H, T, d) before the rotation and the model's rope_cos, rope_sin (T, r),
    rope_inv_freq (r/2,); {} for other models."""
    if not (rec.layers(prefix + ".q_pre") and "rope.cos" in rec):
        return {}
    return _RopeFields(q_pre=rec.stack(prefix + ".q_pre"), k_pre=rec.stack(prefix + ".k_pre"),
                       rope_cos=rec["rope.cos"], rope_sin=rec["rope.sin"], rope_inv_freq=rec.get("rope.inv_freq"))


def _scores(q: torch.Tensor, k: torch.Tensor, scale: float, bias: torch.Tensor | None,
            softcap: float | None) -> torch.Tensor:
    """One layer's attention scores before the mask: softcap·tanh((q kᵀ·s + bias) / softcap), q and k (H, T, d),
    bias (H, Tq, Tk) or None -> (H, Tq, Tk)."""
    scores = q @ k.transpose(-1, -2) * scale
    if bias is not None:
        scores = scores + bias
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    return scores


def _check(q: torch.Tensor, k: torch.Tensor, scales: tuple[float, ...], masks: torch.Tensor,
           bias: torch.Tensor | None, softcaps: tuple[float, ...], atts: torch.Tensor) -> float:
    """Max |softmax(softcap(q kᵀ·s + bias) + M) − model| over the first and last layers (all heads)."""
    worst = 0.0
    for layer in sorted({0, q.shape[0] - 1}):
        scores = _scores(q[layer], k[layer], scales[layer], bias[layer] if bias is not None else None,
                         softcaps[layer] if softcaps else None)
        p = torch.softmax(scores + masks[layer], dim=-1)
        worst = max(worst, float((p - atts[layer]).abs().max()))
    return worst


def _maps(atts: torch.Tensor, thumb: int, notes: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """atts (L, H, Tq, Tk) -> (attentions as kept: float16 above FLOAT16_ABOVE entries, a note then says so;
    thumbnails (L, H, ≤thumb, ≤thumb); rollout (L, T, T), None for cross-attention)."""
    Tq, Tk = atts.shape[-2], atts.shape[-1]
    store = np.float16 if atts.numel() > FLOAT16_ABOVE else np.float32
    attentions = atts.numpy().astype(store)
    # Short inputs: the thumbnails are the maps themselves (one array, cached and pickled once)
    thumbs = attentions if store is np.float32 and max(Tq, Tk) <= thumb else _thumbnails(atts, thumb)
    roll = rollout(atts.mean(dim=1)).numpy() if Tq == Tk else None
    if store is np.float16:
        notes.append(f"{Tq:,} tokens: the attention maps are kept as float16 (about 3 significant digits) to keep "
                     "the view light; rollout and thumbnails were computed in float32.")
    return attentions, thumbs, roll


def _thumbnails(atts: torch.Tensor, size: int) -> np.ndarray:
    """(L, H, Tq, Tk) -> (L, H, ≤size, ≤size) by max-pooling (peaks stay visible)."""
    L, H, Tq, Tk = atts.shape
    out = (min(size, Tq), min(size, Tk))
    if out == (Tq, Tk):
        return atts.cpu().numpy().astype(np.float32)
    pooled = F.adaptive_max_pool2d(atts.reshape(L * H, 1, Tq, Tk), out)
    return pooled.reshape(L, H, *out).cpu().numpy().astype(np.float32)


# ------------------------------------------------------------------------------------ pure arithmetic
@overload
def rollout(mean_attn: np.ndarray) -> np.ndarray: ...
@overload
def rollout(mean_attn: torch.Tensor) -> torch.Tensor: ...
def rollout(mean_attn: np.ndarray | torch.Tensor) -> np.ndarray | torch.Tensor:
    """Attention rollout (Abnar & Zuidema 2020). mean_attn (L, T, T) head-averaged -> (L, T, T): R_l.

    Ã_l = rownorm(0.5·A_l + 0.5·I); R_0 = Ã_0; R_l = Ã_l · R_{l−1}. Works on torch tensors and numpy arrays.
    """
    if isinstance(mean_attn, np.ndarray):
        return rollout(torch.from_numpy(mean_attn.astype(np.float32))).numpy()
    L, T, _ = mean_attn.shape
    eye = torch.eye(T, dtype=mean_attn.dtype, device=mean_attn.device)
    out = []
    r = eye
    for layer in range(L):
        a = 0.5 * mean_attn[layer] + 0.5 * eye
        a = a / a.sum(dim=-1, keepdim=True)
        r = a @ r
        out.append(r)
    return torch.stack(out)


def compare_mismatch(a: AttentionTrace, b: AttentionTrace, layer: int, heads: Sequence[int]) -> str:
    """Why model B's attention on a sentence cannot be set against model A's at `layer` and `heads` ("" when it can:
    the same query and key tokens, and that layer and those heads exist in B)."""
    if a.tokens != b.tokens or a.key_tokens != b.key_tokens:
        return "the two models read the sentence as different tokens"
    if layer >= b.n_layers:
        return f"it has {b.n_layers} layer{'s' if b.n_layers != 1 else ''}, no layer {layer}"
    if max(heads) >= b.n_heads:
        return f"it has {b.n_heads} heads per layer, no head {max(heads)}"
    return ""


def head_matrix(trace: AttentionTrace, layer: int, heads: tuple[int, ...] | list[int],
                how: str = "heads") -> np.ndarray:
    """(Tq, Tk) float32: how = "heads" (one head, or the mean of the chosen heads), "mean"/"max" over all heads,
    "rollout" (the rollout up to `layer`)."""
    if how == "rollout" and trace.rollout is not None:
        return np.asarray(trace.rollout[layer], dtype=np.float32)
    a = trace.attentions[layer]
    if how == "mean":
        return np.asarray(a.astype(np.float32).mean(axis=0))
    if how == "max":
        return np.asarray(a.max(axis=0).astype(np.float32))
    heads = list(heads) or [0]
    if len(heads) == 1:
        return np.asarray(a[heads[0]].astype(np.float32))
    return np.asarray(a[heads].astype(np.float32).mean(axis=0))


@dataclass(frozen=True)
class Hidden:
    """A matrix with special tokens removed. rows/cols: kept indices; renormalised: rows rescaled to sum 1;
    removed_mass: mean weight (over kept rows) the hidden keys held before renormalising."""

    matrix: np.ndarray
    rows: tuple[int, ...]
    cols: tuple[int, ...]
    renormalised: bool
    removed_mass: float


def hide_special(matrix: np.ndarray, special_q: tuple[bool, ...], special_k: tuple[bool, ...],
                 renormalise: bool = True) -> Hidden:
    """Drop special-token rows and columns; rescale each remaining row to sum to 1 (when it had weight)."""
    rows = tuple(i for i, s in enumerate(special_q) if not s)
    cols = tuple(j for j, s in enumerate(special_k) if not s)
    if not rows or not cols:
        return Hidden(matrix, tuple(range(matrix.shape[0])), tuple(range(matrix.shape[1])), False, 0.0)
    sub = matrix[np.ix_(rows, cols)].astype(np.float32)
    kept = sub.sum(axis=1, keepdims=True)
    removed = float(np.mean(1.0 - kept)) if sub.size else 0.0
    changed = len(cols) < matrix.shape[1]
    if renormalise and changed:
        sub = np.divide(sub, kept, out=np.zeros_like(sub), where=kept > 0)
    return Hidden(sub, rows, cols, renormalise and changed, removed)


@dataclass(frozen=True)
class Steps:
    """softmax(q·kⱼ·s + Mⱼ) for one query token, then z = Σⱼ aⱼ vⱼ (the lecture's "robot" table).

    q (d,); keys (Tk, d); values (Tk, d); dots (Tk,) q·kⱼ; scaled (Tk,) q·kⱼ·s; mask (Tk,) 0/−inf;
    probs (Tk,) recomputed softmax; model_probs (Tk,) the model's own; weighted (Tk, d) aⱼ·vⱼ; z (d,).
    top: the key with the largest weight; max_logit / denominator: aⱼ = exp(scaledⱼ − max_logit) / denominator.
    bias (Tk,) the model's position term added to scaled (bias_name says which) or None; softcap: scores pass
    through softcap·tanh(·/softcap) when set; kv_head: the key/value head this query head reads (grouped-query
    attention: kv_groups query heads share it); q_pre / keys_pre (d,), (Tk, d): rotary models, before the rotation;
    inv_freq (r/2,): the model's rotation frequencies θ_i (the query turns by position × θ_i).
    """

    layer: int
    head: int
    query: int
    query_token: str
    key_tokens: tuple[str, ...]
    d: int
    scale: float
    q: np.ndarray
    keys: np.ndarray
    values: np.ndarray
    dots: np.ndarray
    scaled: np.ndarray
    mask: np.ndarray
    probs: np.ndarray
    model_probs: np.ndarray
    weighted: np.ndarray
    z: np.ndarray
    top: int = 0
    max_logit: float = 0.0
    denominator: float = 1.0
    bias: np.ndarray | None = None
    bias_name: str = ""
    softcap: float | None = None
    kv_head: int = 0
    kv_groups: int = 1
    q_pre: np.ndarray | None = None
    keys_pre: np.ndarray | None = None
    inv_freq: np.ndarray | None = None
    rope_error: float = 0.0  # max |rotate(q_pre, cos, sin) − q| and the same for every key
    theta_error: float = 0.0  # max |cos(position·inv_freq) − the model's cos| at the query's position
    logits: np.ndarray | None = None  # (Tk,) what the softmax reads: scaled (+ bias, soft-capped) + mask

    @property
    def standard_scale(self) -> bool:
        """The model scales q·k by 1/√d (and not by another factor)."""
        return bool(abs(self.scale * np.sqrt(self.d) - 1) < 1e-6)

    @property
    def max_error(self) -> float:
        return float(np.max(np.abs(self.probs - self.model_probs))) if self.probs.size else 0.0

    @property
    def angles(self) -> np.ndarray | None:
        """(r/2,) the query's rotation angles, position × θ_i (radians); None without RoPE."""
        return self.query * self.inv_freq if self.inv_freq is not None else None

    @property
    def rotated(self) -> int:
        """How many of the d dimensions the rotary embedding turns (r); 0 without RoPE."""
        return 2 * len(self.inv_freq) if self.inv_freq is not None else 0


def rotate(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """x (…, d) turned on its first r = cos.shape[-1] dimensions as Llama-style RoPE does: dimension i pairs with
    i + r/2, x·cos + rotate_half(x)·sin, rotate_half(x) = (−x[r/2:], x[:r/2])."""
    r = cos.shape[-1]
    half = np.concatenate([-x[..., r // 2:r], x[..., :r // 2]], axis=-1)
    return np.concatenate([x[..., :r] * cos + half * sin, x[..., r:]], axis=-1)


def step_by_step(trace: AttentionTrace, layer: int, head: int, query: int) -> Steps | None:
    """The arithmetic of one attention row from the model's own Q, K, V (and bias, soft-cap); None when the trace
    has no Q/K/V."""
    if not trace.has_arithmetic or trace.q is None or trace.k is None or trace.v is None:
        return None
    q = trace.q[layer, head, query].astype(np.float64)
    keys = trace.k[layer, head].astype(np.float64)
    values = trace.v[layer, head].astype(np.float64)
    scale = trace.scales[layer]
    dots = keys @ q
    scaled = dots * scale
    bias = trace.bias[layer, head, query].astype(np.float64) if trace.bias is not None else None
    logits = scaled + bias if bias is not None else scaled.copy()
    cap = trace.softcaps[layer] if trace.softcaps else None
    if cap:
        logits = np.tanh(logits / cap) * cap
    mask = (trace.masks[layer] if trace.masks is not None else trace.mask)[query].astype(np.float64)
    logits = logits + mask
    top = float(np.max(logits))
    e = np.exp(logits - top)
    probs = e / e.sum()
    weighted = probs[:, None] * values
    kv = trace.kv_head[layer] if trace.kv_head is not None else np.arange(trace.n_heads)
    q_pre, k_pre, inv_freq = trace.q_pre, trace.k_pre, trace.rope_inv_freq
    rope = q_pre is not None and k_pre is not None and inv_freq is not None
    rope_error, theta_error = _rope_errors(trace, layer, head, query, q, keys) if rope else (0.0, 0.0)
    return Steps(layer, head, query, trace.tokens[query], trace.key_tokens, int(q.shape[0]), float(scale),
                 q.astype(np.float32), keys.astype(np.float32), values.astype(np.float32), dots, scaled, mask,
                 probs, trace.attentions[layer, head, query].astype(np.float64), weighted, weighted.sum(axis=0),
                 int(np.argmax(probs)), top, float(e.sum()), bias, trace.bias_name, cap, int(kv[head]),
                 int(np.sum(kv == kv[head])),
                 q_pre[layer, head, query] if q_pre is not None and rope else None,
                 k_pre[layer, head] if k_pre is not None and rope else None,
                 inv_freq.astype(np.float64) if inv_freq is not None and rope else None, rope_error, theta_error,
                 logits)


def _rope_errors(trace: AttentionTrace, layer: int, head: int, query: int, q: np.ndarray,
                 keys: np.ndarray) -> tuple[float, float]:
    """(max |rotate(q_pre, cos, sin) − q| and the same for every key, max |cos(position·θ_i) − the model's cos| at
    the query's position): the model's rotary tables agree with its q, keys (Tk, d) and with RoPE's definition."""
    assert trace.rope_cos is not None and trace.rope_sin is not None and trace.q_pre is not None \
        and trace.k_pre is not None and trace.rope_inv_freq is not None  # step_by_step's `rope`
    cos, sin = trace.rope_cos.astype(np.float64), trace.rope_sin.astype(np.float64)
    q_pre, k_pre = trace.q_pre[layer, head].astype(np.float64), trace.k_pre[layer, head].astype(np.float64)
    rope_error = float(max(np.abs(rotate(q_pre[query], cos[query], sin[query]) - q).max(),
                           np.abs(rotate(k_pre, cos[:len(keys)], sin[:len(keys)]) - keys).max()))
    mine = np.cos(query * np.tile(trace.rope_inv_freq.astype(np.float64), 2))
    theta_error = float(np.abs(mine - cos[query] / np.sqrt(cos[query] ** 2 + sin[query] ** 2)).max())
    return rope_error, theta_error


def head_row(trace: AttentionTrace, layer: int, head: int, query: int) -> np.ndarray:
    """(Tk,) float32: the weights query token `query` gives every key in (layer, head)."""
    return np.asarray(trace.attentions[layer, head, query].astype(np.float32))


def find_token(tokens: tuple[str, ...], word: str) -> int:
    """Index of the first token equal to `word` (ignoring case and the shown mark of a leading space, ·), or -1."""
    from explorer.text.token_text import SPACE

    want = word.strip().lstrip(SPACE).strip().lower()  # a token as shown ("·it") is found as its word
    for i, t in enumerate(tokens):
        if t.lstrip(SPACE).strip().lower() == want:
            return i
    return -1


def default_query(tokens: tuple[str, ...], special: tuple[bool, ...]) -> int:
    """'it' when present (the presets), else the last non-special token."""
    i = find_token(tokens, "it")
    if i >= 0:
        return i
    for j in range(len(tokens) - 1, -1, -1):
        if not special[j]:
            return j
    return max(0, len(tokens) - 1)


# ------------------------------------------------------------------------------------------- what to notice
@dataclass(frozen=True)
class PronounShift:
    """Where a pronoun looks in two sentences (explorer.data.examples.PRONOUN_PAIRS), over every layer and head.

    change: the largest |a_A − a_B| of one weight of the pronoun's row, over layers, heads and the keys both sentences
    have (0: its row is the same in both); change_at: its (layer, head). shift_at: the (layer, head) where the pronoun
    gives `first` more weight than `second` in A and `second` more than `first` in B, with the largest smaller margin
    of the two (None: no head does); weights_a, weights_b: (weight on first, weight on second) there; n_shift: how
    many heads do; n_heads: L × H; sentences: (A, B)."""

    word: str
    first: str
    second: str
    change: float = 0.0
    change_at: tuple[int, int] = (0, 0)
    shift_at: tuple[int, int] | None = None
    weights_a: tuple[float, float] = (0.0, 0.0)
    weights_b: tuple[float, float] = (0.0, 0.0)
    n_shift: int = 0
    n_heads: int = 0
    sentences: tuple[str, str] = ("", "")


def pronoun_example(loaded: Loaded, stream: str = "") -> PronounShift | None:
    """pronoun_shift on the model's own pronoun pair (explorer.adapters.examples.pronoun_pair: the pair whose deciding
    word it can read); None when its example sentences have no pair (a built-in's generated English) or the shift
    cannot be read."""
    pair = examples.pronoun_pair(loaded.adapter)
    return pronoun_shift(loaded, *pair, *PRONOUN, stream) if pair else None


def second_text(loaded: Loaded) -> str:
    """What a second text given with the sentence is to this model: "target" (an encoder-decoder: the text its
    decoder reads), "segment" (an encoder: a second sentence joined to the first by [SEP]) or "" (nothing)."""
    if loaded.caps.alignment is not None:
        return "target"
    attention = loaded.caps.attention
    return "segment" if attention is not None and attention.family == "encoder" else ""


def compare_default(loaded: Loaded) -> str:
    """The second sentence the two-sentence comparison opens on: the pronoun pair's second where the model offers
    the pair, else its second example sentence ("" when it has none)."""
    return examples.compare_default(loaded.adapter)


def pronoun_shift(loaded: Loaded, a: str, b: str, word: str = "it", first: str = "animal", second: str = "street",
                  stream: str = "") -> PronounShift | None:
    """Where `word` looks in sentence `a` and in sentence `b` (see PronounShift), from the model's own weights; None
    when a sentence gives no tokens or `word`, `first` or `second` is not a token of both."""
    ta = attention_trace(loaded, a, "", stream, 0, thumb=1, arithmetic=False)
    tb = attention_trace(loaded, b, "", stream, 0, thumb=1, arithmetic=False)
    if not ta.tokens or not tb.tokens:
        return None
    at = [(find_token(t.tokens, word), find_token(t.key_tokens, first), find_token(t.key_tokens, second))
          for t in (ta, tb)]
    if min(min(x) for x in at) < 0:
        return None
    (qa, fa, sa), (qb, fb, sb) = at
    ra = ta.attentions[:, :, qa, :].astype(np.float64)  # (L, H, Tk)
    rb = tb.attentions[:, :, qb, :].astype(np.float64)
    n = min(ra.shape[-1], rb.shape[-1])
    diff = np.abs(ra[..., :n] - rb[..., :n]).max(-1)  # (L, H)
    change_at = np.unravel_index(int(diff.argmax()), diff.shape)
    margin = np.minimum(ra[..., fa] - ra[..., sa], rb[..., sb] - rb[..., fb])  # > 0: first in A, second in B
    shifting = margin > 0
    at_shift = np.unravel_index(int(margin.argmax()), margin.shape)
    lh = (int(at_shift[0]), int(at_shift[1]))
    return PronounShift(
        word, first, second, float(diff.max()), (int(change_at[0]), int(change_at[1])),
        lh if shifting.any() else None, (float(ra[lh][fa]), float(ra[lh][sa])), (float(rb[lh][fb]), float(rb[lh][sb])),
        int(shifting.sum()), int(margin.size), (a, b))


@dataclass(frozen=True)
class AttentionNotice:
    """The numbers behind the view's "what to notice", from the model's own weights on one sentence.

    row_error: max |Σ_k a_qk − 1| over layers, heads and real query tokens; causal: the stream masks later tokens;
    above: the largest weight above the diagonal (None for cross-attention); n_heads: L × H; special_heads: heads whose
    largest weight, averaged over the query tokens, goes to a special token (specials: those tokens, as shown);
    first_heads: heads whose largest weight so goes to the first key token, `first`; rollout: (mean over rows of the
    largest rollout weight at layer 0, the same at the last layer), None without rollout; rollout_key: the key that
    most rows of the last layer's rollout weigh most."""

    text: str
    row_error: float = 0.0
    causal: bool = False
    above: float | None = None
    n_layers: int = 0
    n_heads: int = 0
    special_heads: int = 0
    specials: tuple[str, ...] = ()
    first_heads: int = 0
    first: str = ""
    rollout: tuple[float, float] | None = None
    rollout_key: str = ""
    showcase: Showcase | None = None  # the head the view opens on (showcase_head), from the same run


def attention_notice(loaded: Loaded, text: str, stream: str = "") -> AttentionNotice | None:
    """AttentionNotice of `loaded` on `text` (the page passes the model's own example sentence), with the head the view
    opens on: one run of the model for both. None when `text` gives no tokens."""
    tr = attention_trace(loaded, text, "", stream, 0, thumb=1, arithmetic=False)
    if not tr.tokens:
        return None
    A = tr.attentions.astype(np.float64)  # (L, H, Tq, Tk)
    L, H, Tq, Tk = A.shape
    above = None
    if tr.stream != "cross":
        above = float(A[..., np.triu(np.ones((Tq, Tk), dtype=bool), 1)].max()) if Tq > 1 else 0.0
    top = A.mean(2).argmax(-1)  # (L, H): each head's most weighed key, averaged over the query tokens
    special = np.array(tr.key_special, dtype=bool)
    specials = tuple(dict.fromkeys(t for t, s in zip(tr.key_tokens, tr.key_special) if s))
    rollout, key = None, ""
    if tr.rollout is not None:
        R = tr.rollout.astype(np.float64)
        rollout = (float(R[0].max(-1).mean()), float(R[-1].max(-1).mean()))
        key = tr.key_tokens[int(np.bincount(R[-1].argmax(-1), minlength=Tk).argmax())]
    return AttentionNotice(
        text, float(np.abs(A.sum(-1) - 1.0).max()), tr.causal, above, L, L * H, int(special[top].sum()), specials,
        int((top == 0).sum()), tr.key_tokens[0], rollout, key, showcase=showcase_head(tr, text))


@dataclass(frozen=True)
class Showcase:
    """The head a view opens on for `text`: (layer, head), its score (the mean, over the query tokens, of the largest
    weight a row gives one key that is neither the query itself, a special token nor, in a causal model, the first
    token, where most heads park their weight), the number of heads compared and the rule in words."""

    text: str
    layer: int = 0
    head: int = 0
    score: float = 0.0
    n_heads: int = 0
    rule: str = ""


def showcase_head(tr: AttentionTrace, text: str) -> Showcase | None:
    """The head whose rows put the most weight on one real token of `text` (the page opens on it when no layer and
    head are asked for): a visible pattern (previous token, the same word, a pronoun's antecedent) rather than the
    near-uniform or sink-only maps of many heads. Scores every head of `tr`, the model's own attention on `text`
    (read once with the notice: attention_notice). None when the sentence is too short to compare heads."""
    A = tr.attentions.astype(np.float64)  # (L, H, Tq, Tk)
    L, H, Tq, Tk = A.shape
    keys = ~np.array(tr.key_special, dtype=bool)
    rows = ~np.array(tr.special, dtype=bool) if len(tr.special) == Tq else np.ones(Tq, dtype=bool)
    sink = ""
    if tr.causal and Tk > 2:
        keys[0] = False  # the first token: the sink of a causal model (every row can reach it)
        rows[:2] = False  # rows 0 and 1 see at most the first token and themselves
        sink = " nor the first token"
    if not keys.any() or not rows.any():
        return None
    if tr.stream != "cross" and Tq == Tk:  # a token attending to itself draws only the diagonal: not counted
        A = A * (1.0 - np.eye(Tq))
    score = A[:, :, rows][..., keys].max(-1).mean(-1)  # (L, H)
    layer, head = (int(i) for i in np.unravel_index(int(np.argmax(score)), score.shape))
    rule = (f"of the {L * H} heads, the one whose rows give one other token (not itself, a special token{sink}) "
            f"the most weight, on average {float(score[layer, head]):.2f}")
    return Showcase(text, layer, head, float(score[layer, head]), L * H, rule)
