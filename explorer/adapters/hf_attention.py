"""What a Hugging Face model's attention multiplies, read from its own attention call: no hooks, no re-derivation.

Transformers sends the attention of most families (Llama, Qwen2, Mistral, Gemma, Phi-3, GPT-NeoX, OPT, BERT and its
kin, GPT-2, T5, BART, Marian, ...) through one function per implementation (`ALL_ATTENTION_FUNCTIONS`):
`fn(module, query, key, value, attention_mask, scaling=..., dropout=..., position_bias=..., softcap=..., ...)`,
with query and key already rotated (RoPE) and key/value still grouped (GQA). `install(model)`, called once when
the model is loaded, switches it to the implementation "explorer_eager": the family's own `eager_attention_forward`
(so every number is the family's own: T5's position bias, soft-capping, sliding windows included) which, while a
`recording()` block is open in the calling thread, also keeps what it was given. Concurrent sessions do not see
each other's recordings (a context variable), and outside a recording the model runs exactly as with "eager".

`arithmetic(call, n_heads)` turns one recorded call into per-head arrays (batch row 0):
  q (H, Tq, d), k and v (H, Tk, d) repeated to the query heads as the model repeats them, kv_head (H,) the key/value
  head each query head reads, scale (), bias (H, Tq, Tk) or None (T5's relative position bias), mask (Tq, Tk)
  additive (0 / −inf), softcap () or None: weights = softmax(softcap·tanh((s·q·kᵀ + bias)/softcap) + mask).
Rotary models: `rotary(model, ids)` gives the model's own cos/sin (its RotaryEmbedding module) and `unrotate`
undoes the rotation (pairs i and i + r/2, as `rotate_half` does) to show q and k before it.
"""
from __future__ import annotations

import contextvars
import re
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, TypedDict

import torch

if TYPE_CHECKING:
    from explorer.runtime.hf_runtime import PreTrainedModel

IMPLEMENTATION = "explorer_eager"
_CALLS: contextvars.ContextVar[list[Call] | None] = contextvars.ContextVar("explorer_attention_calls", default=None)
_REGISTERED = False
NEG = -1e30  # additive mask entries below this are "masked" (the model uses the dtype's minimum)


@dataclass(frozen=True)
class Call:
    """One attention call as the model made it (tensors detached, batch first)."""

    module: torch.nn.Module
    query: torch.Tensor          # (B, H, Tq, d)
    key: torch.Tensor            # (B, H_kv, Tk, d)
    value: torch.Tensor          # (B, H_kv, Tk, d)
    mask: torch.Tensor | None    # (B, 1, Tq, Tk) additive, or None (no mask)
    scaling: float | None
    position_bias: torch.Tensor | None  # (B or 1, H, Tq, Tk), T5
    softcap: float | None


class Arithmetic(TypedDict):
    """One call's per-head arrays, batch row 0 (`arithmetic`; the module docstring gives the shapes)."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    kv_head: torch.Tensor
    mask: torch.Tensor
    bias: torch.Tensor | None
    scale: float
    softcap: float | None


def _family_eager(module: torch.nn.Module) -> Any:
    fn = getattr(sys.modules.get(type(module).__module__), "eager_attention_forward", None)
    if fn is None:
        from explorer.runtime.hf_runtime import llama_eager_attention_forward as fn
    return fn


def explorer_eager(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                   attention_mask: torch.Tensor | None, **kwargs: Any) -> Any:
    """The family's own eager attention; inside `recording()`, the call is also kept."""
    out = _family_eager(module)(module, query, key, value, attention_mask, **kwargs)
    calls = _CALLS.get()
    if calls is not None:
        bias = kwargs.get("position_bias")
        calls.append(Call(module, query.detach(), key.detach(), value.detach(),
                          attention_mask.detach() if isinstance(attention_mask, torch.Tensor) else None,
                          kwargs.get("scaling"), bias.detach() if isinstance(bias, torch.Tensor) else None,
                          kwargs.get("softcap")))
    return out


def _register() -> None:
    global _REGISTERED
    if not _REGISTERED:
        from explorer.runtime.hf_runtime import ALL_MASK_ATTENTION_FUNCTIONS, AttentionInterface, AttentionMaskInterface

        AttentionInterface.register(IMPLEMENTATION, explorer_eager)
        AttentionMaskInterface.register(IMPLEMENTATION, ALL_MASK_ATTENTION_FUNCTIONS["eager"])  # eager's 4-D masks
        _REGISTERED = True


def install(model: PreTrainedModel) -> bool:
    """Switch `model` to explorer_eager (once, at load); False for families whose attention does not go through
    the attention interface (BLOOM, Falcon): they keep eager attention."""
    if not hasattr(sys.modules.get(type(model).__module__), "ALL_ATTENTION_FUNCTIONS"):
        return False  # the family computes attention in its own layer code
    _register()
    try:
        model.set_attn_implementation(IMPLEMENTATION)
    except (ValueError, TypeError, AttributeError):
        return False
    return bool(model.config._attn_implementation == IMPLEMENTATION)


@contextmanager
def recording() -> Iterator[list[Call]]:
    """Collect the attention calls made in this block by models installed with `install`."""
    calls: list[Call] = []
    token = _CALLS.set(calls)
    try:
        yield calls
    finally:
        _CALLS.reset(token)


def arithmetic(call: Call) -> Arithmetic:
    """Per-head arrays of one call, batch row 0 (see the module docstring)."""
    q, k, v = call.query[0].float(), call.key[0].float(), call.value[0].float()
    groups = q.shape[0] // k.shape[0]
    kv_head = torch.arange(q.shape[0]) // groups
    mask = call.mask[0, 0].float() if call.mask is not None else torch.zeros(q.shape[1], k.shape[1])
    mask = torch.where(mask < NEG, torch.tensor(float("-inf")), mask)
    bias = call.position_bias[0].float() if call.position_bias is not None else None
    bias = bias if bias is not None and bool(bias.any()) else None  # T5's cross-attention passes zeros
    return {"q": q, "k": k[kv_head], "v": v[kv_head], "kv_head": kv_head, "mask": mask, "bias": bias,
            "scale": float(call.scaling) if call.scaling is not None else q.shape[-1] ** -0.5,
            "softcap": float(call.softcap) if call.softcap else None}


def weights(a: Arithmetic) -> torch.Tensor:
    """(H, Tq, Tk) the softmax the call computes, recomputed from its parts."""
    scores = a["q"] @ a["k"].transpose(-1, -2) * a["scale"]
    if a["bias"] is not None:
        scores = scores + a["bias"]
    if a["softcap"]:
        scores = torch.tanh(scores / a["softcap"]) * a["softcap"]
    return torch.softmax(scores + a["mask"], dim=-1)


_CROSS = re.compile(r"encoder_attn|crossattention|cross_attn|encdecattention", re.IGNORECASE)


def where(model: torch.nn.Module) -> dict[int, tuple[str, int]]:
    """id(attention module) -> (stream, layer in its name): stream "cross", "encoder", "decoder" or "" (a single
    stack). Calls come in layer order within a stream, which is what gives a shared module its layer."""
    out: dict[int, tuple[str, int]] = {}
    two = bool(getattr(model.config, "is_encoder_decoder", False))
    for name, module in model.named_modules():
        index = re.search(r"(?:^|\.)(\d+)(?:\.|$)", name)
        if index is None or not hasattr(module, "scaling"):
            continue
        stream = "cross" if _CROSS.search(name) else ("decoder" if "decoder" in name else "encoder") if two else ""
        out.setdefault(id(module), (stream, int(index.group(1))))
    return out


# ---------------------------------------------------------------------------------------------------- RoPE
def rotary_module(model: torch.nn.Module) -> torch.nn.Module | None:
    """The model's own rotary embedding module (one per model in these families), or None."""
    return next((m for m in model.modules() if type(m).__name__.endswith("RotaryEmbedding")), None)


def rotary(model: torch.nn.Module, positions: torch.Tensor, dtype: torch.dtype = torch.float32
           ) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(cos, sin), each (T, r): what the model's rotary module gives for `positions` (T,); None without one."""
    rot = rotary_module(model)
    if rot is None:
        return None
    probe = torch.zeros(1, len(positions), 1, dtype=dtype, device=positions.device)
    cos, sin = rot(probe, positions[None])
    return cos[0].float(), sin[0].float()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(…, r) -> (−x[r/2:], x[:r/2]): the pairing of Llama-style RoPE (dimension i with i + r/2)."""
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (…, T, d) rotated on its first r = cos.shape[-1] dimensions: x·cos + rotate_half(x)·sin."""
    r = cos.shape[-1]
    return torch.cat([x[..., :r] * cos + rotate_half(x[..., :r]) * sin, x[..., r:]], dim=-1)


def unrotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """The inverse of `rotate` (cos² + sin² may carry the model's attention scaling a²: divided out)."""
    r = cos.shape[-1]
    a2 = cos * cos + sin * sin
    return torch.cat([(x[..., :r] * cos - rotate_half(x[..., :r]) * sin) / a2, x[..., r:]], dim=-1)
