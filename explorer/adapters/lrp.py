"""Layer-wise relevance propagation in one forward and one backward pass (Bach et al. 2015; AttnLRP, Achtibat et al.
ICML 2024; LSTM rules, Arras et al. 2017), for any model written in torch operations.

LRP as gradient × input of a forward pass whose backward follows the rules (AttnLRP's "efficient" form): the input's
relevance R_i = Σ_c E_ic · ∇̃_ic f, with ∇̃ the gradient of the rule-following backward. The rules, applied where an
operation reads the attributed input (a "live" tensor; parameters and constants are not live):
  linear maps (Linear, matmul by weights, additions)  ε-rule with ε → 0: plain gradient × input; an added constant
                                                      (a bias, a learned position vector, a mask) absorbs c · ∇̃_c f
  element-wise non-linearity y = σ(x)                 identity rule: ∇̃_x = σ(x) / x · ∇̃_y (relevance passes as is)
  LayerNorm, RMSNorm, √, 1/√, var, std, a divisor     the normaliser is a constant (identity rule on normalisation)
  product of two live tensors (x ⊙ y, x @ y)          uniform rule: half the relevance to each factor
  softmax (attention weights, SDPA)                   its own gradient (AttnLRP's softmax rule: not conservative)
  LSTM, GRU, Elman recurrences (torch.lstm, …)        unrolled; gates σ(·) take no relevance, the signal all
                                                      (signal-take-all, Arras et al.); tanh by the identity rule
Conservation: f(E) = Σ_i R_i + biases + positions + rest, where biases: the relevance absorbed by added tensors that
are the same at every position (Linear and LayerNorm biases), positions: by added tensors that are not (learned or
sinusoidal position vectors, segment vectors, masks, initial states), rest: what the softmax rule and ε did not
conserve (0 in a network without softmax).

`lrp(fn, x, model=None)` -> Relevance: fn maps x (M, N, C), M independent rows, to f (M,) (each row's f reads its own
row); relevance (M, N) and value, biases, positions, rest (M,). `install(model)`: the hooks of its activation modules,
once (the adapters call it at load).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Protocol, TypeAlias, cast

import numpy as np
import torch
import torch.nn.functional as F
from torch.autograd.function import BackwardCFunction, FunctionCtx
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

from explorer.adapters.base import Unsupported

Args: TypeAlias = tuple[Any, ...]  # a torch operation's arguments, as __torch_function__ gets them
Kwargs: TypeAlias = dict[str, object]
Op: TypeAlias = Callable[..., Any]  # a torch operation as __torch_function__ gets it
EPS = 1e-10  # the identity rule's stabiliser: σ(x) / (x ± EPS)
KINDS = ("biases", "positions")  # what added tensors absorb: the same at every position, or not


@dataclass(frozen=True)
class Relevance:
    """relevance (M, N): each row's input relevance R_i; value (M,): f explained; biases, positions (M,): absorbed
    by added tensors the same at every position, and by those that are not; rest (M,): f − Σ_i R_i − the absorbed
    (the softmax rule and ε)."""

    relevance: np.ndarray
    value: np.ndarray
    biases: np.ndarray
    positions: np.ndarray
    mixed: bool = False  # the rows were reordered inside (a packed batch), or a constant was added where they are not
    # the first axis (time first): biases and positions are their total / M, not each row's (run rows one at a time)

    @property
    def rest(self) -> np.ndarray:
        rest: np.ndarray = self.value - self.relevance.sum(1) - self.biases - self.positions
        return rest

    @property
    def conservation(self) -> np.ndarray:
        """(M,) |f − Σ_i R_i|: what the inputs' relevance misses of f."""
        miss: np.ndarray = np.abs(self.value - self.relevance.sum(1))
        return miss


# ----------------------------------------------------------------------------------------------- the rules
class _Identity(torch.autograd.Function):
    """y = fn(x) with the identity rule's backward: ∇̃_x = y / x · ∇̃_y."""

    @staticmethod
    def forward(ctx: FunctionCtx, fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        y = fn(x)
        ctx.save_for_backward(y / torch.where(x >= 0, x + EPS, x - EPS))
        return y

    @staticmethod
    def backward(ctx: BackwardCFunction, g: torch.Tensor) -> tuple[None, torch.Tensor]:
        (ratio,) = ctx.saved_tensors
        return None, ratio * g


class _ScaleCtx(Protocol):
    """_Scale's ctx: the factor its forward keeps for its backward."""

    factor: float


class _Scale(torch.autograd.Function):
    """The identity forward with the gradient scaled by `factor` (the uniform rule: 1/2 to each factor)."""

    @staticmethod
    def forward(ctx: _ScaleCtx, x: torch.Tensor, factor: float) -> torch.Tensor:
        ctx.factor = factor
        return x.view_as(x)

    @staticmethod
    def backward(ctx: _ScaleCtx, g: torch.Tensor) -> tuple[torch.Tensor, None]:
        return g * ctx.factor, None


def identity_rule(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    return cast(torch.Tensor, _Identity.apply(fn, x))


def uniform_rule(x: torch.Tensor, factor: float = 0.5) -> torch.Tensor:
    return cast(torch.Tensor, _Scale.apply(x, factor))


_local = threading.local()
NONLINEAR = {"gelu", "silu", "relu", "relu_", "tanh", "sigmoid", "softplus", "elu", "selu", "celu", "leaky_relu",
             "mish", "hardtanh", "relu6", "hardswish", "hardsigmoid", "pow", "__pow__", "square"}
NORMALISERS = {"rsqrt", "sqrt", "var", "std", "norm", "vector_norm", "linalg_vector_norm"}
PRODUCTS = {"mul", "__mul__", "__rmul__", "multiply", "mul_", "__imul__"}
MATMULS = {"matmul", "__matmul__", "__rmatmul__", "bmm", "mm", "einsum"}
SUMS = {"add", "__add__", "__radd__", "add_", "__iadd__", "sub", "__sub__", "__rsub__", "rsub", "sub_", "__isub__",
        "subtract"}
DIVISIONS = {"div", "__truediv__", "true_divide", "divide", "div_", "__itruediv__"}
NOT_LIVE = {"zeros_like", "ones_like", "full_like", "empty_like", "rand_like", "randn_like", "new_zeros", "new_ones",
            "new_full", "new_empty", "new_tensor", "detach", "detach_", "sign"}
RECURRENCES = {"lstm", "gru", "rnn_tanh", "rnn_relu"}
COMPOSITES = {"multi_head_attention_forward", "group_norm", "instance_norm", "local_response_norm"}  # their inner
# operations run outside the rules (one torch function to the mode): refused


def _live(t: object) -> bool:
    return isinstance(t, torch.Tensor) and bool(getattr(t, "_lrp_live", False))


def _mark(out: object) -> object:
    for t in tree_flatten(out)[0]:
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            t._lrp_live = True  # type: ignore[attr-defined]
    return out


class Rules(TorchFunctionMode):
    """The rules (module docstring) for the torch operations run inside `with Rules(M):`, in this thread only.
    addends: (kind, leaf) the constants added to live tensors, as leaves whose gradient says what they absorbed,
    broadcast to the live tensor's shape (M rows first)."""

    def __init__(self, rows: int) -> None:
        super().__init__()
        self.rows = rows
        self.addends: list[tuple[str, torch.Tensor]] = []
        self.mixed = False  # a packed batch reorders the rows (by length)

    # -- what added constants absorb
    def plus(self, live: torch.Tensor, const: torch.Tensor | float | None, sign: float = 1.0,
             kind: str | None = None) -> torch.Tensor:
        """live + sign · const, the constant kept as a leaf that absorbs relevance, as `kind` ("biases" or
        "positions"; None: by its shape, "positions" where it differs between positions)."""
        if const is None:
            return live
        if not isinstance(const, torch.Tensor):
            return live + sign * const
        if kind is None:
            kind = "positions" if const.dim() >= 2 and any(d > 1 for d in const.shape[:-1]) else "biases"
        shape = torch.broadcast_shapes(live.shape, const.shape)
        leaf = const.detach().broadcast_to(shape).requires_grad_(True)
        self.addends.append((kind, leaf))
        return live + leaf if sign > 0 else live - leaf

    def __torch_function__(self, func: Op, types: object, args: Args = (), kwargs: Kwargs | None = None) -> object:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if getattr(_local, "inside", 0):  # within an activation module: its output gets the identity rule
            return func(*args, **kwargs)
        if not any(_live(a) for a in tree_flatten((args, kwargs))[0]):
            return func(*args, **kwargs)
        if name in NOT_LIVE:
            return func(*args, **kwargs)
        if name in COMPOSITES:
            raise Unsupported(f"LRP has no rule for {name} (torch's fused {name.replace('_', ' ')}): this model "
                              "cannot be explained by LRP here; gradient × input and integrated gradients can.")
        rule = _RULES.get(name)
        out = rule(self, func, args, kwargs) if rule is not None else func(*args, **kwargs)
        return out if name in NORMALISERS else _mark(out)  # a normaliser is a constant


def _nonlinear(r: Rules, func: Op, args: Args, kwargs: Kwargs) -> object:
    x, rest = args[0], args[1:]
    if not _live(x) or (func.__name__ in ("pow", "__pow__") and isinstance(rest[0], torch.Tensor)):
        return func(*args, **kwargs)
    return identity_rule(lambda t: func(t, *rest, **kwargs), x)


def _normaliser(r: Rules, func: Op, args: Args, kwargs: Kwargs) -> object:
    out = func(*args, **kwargs)
    return tuple(o.detach() for o in out) if isinstance(out, tuple) else out.detach()


def _division(r: Rules, func: Op, args: Args, kwargs: Kwargs) -> object:
    if len(args) > 1 and _live(args[1]):  # a divisor computed from the input: a normaliser, held constant
        args = (args[0], args[1].detach(), *args[2:])
    return func(*args, **kwargs)


def _product(r: Rules, func: Op, args: Args, kwargs: Kwargs) -> object:
    out = func(*args, **kwargs)
    return uniform_rule(out) if len(args) > 1 and _live(args[0]) and _live(args[1]) else out


def _matmul(r: Rules, func: Op, args: Args, kwargs: Kwargs) -> object:
    operands = args[1:] if func.__name__ == "einsum" else args[:2]
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    out = func(*args, **kwargs)
    return uniform_rule(out) if sum(_live(o) for o in operands) >= 2 else out


def _sum(r: Rules, func: Op, args: Args, kwargs: Kwargs) -> object:
    name = func.__name__
    if len(args) < 2 or "alpha" in kwargs or name.endswith("_") or name.startswith("__i"):
        return func(*args, **kwargs)  # in place: not recorded (what it adds counts in the rest)
    a, b = args[0], args[1]
    sa, sb = (-1.0, 1.0) if "rsub" in name else (1.0, -1.0) if "sub" in name else (1.0, 1.0)  # sa·a + sb·b
    if _live(a) and isinstance(b, torch.Tensor) and not _live(b):
        return r.plus(a if sa > 0 else -a, b, sb)
    if _live(b) and isinstance(a, torch.Tensor) and not _live(a):
        return r.plus(b if sb > 0 else -b, a, sa)
    return func(*args, **kwargs)


def _linear(r: Rules, func: Op, args: Args, kwargs: Kwargs) -> object:
    x, w = args[0], args[1]
    b = args[2] if len(args) > 2 else cast("torch.Tensor | None", kwargs.get("bias"))
    if not _live(x) or _live(w):
        return func(*args, **kwargs)
    return r.plus(F.linear(x, w), b, kind="biases")


def _addmm(r: Rules, func: Op, args: Args, kwargs: Kwargs) -> object:
    bias, m1, m2 = args[0], args[1], args[2]
    if _live(bias) or kwargs or len(args) > 3:
        return func(*args, **kwargs)
    out = torch.matmul(m1, m2) if func.__name__ != "addmv" else torch.mv(m1, m2)
    if _live(m1) and _live(m2):
        out = uniform_rule(out)
    return r.plus(out, bias, kind="biases")


def _layer_norm(r: Rules, func: Op, args: Args, kwargs: Kwargs) -> object:
    x, shape = args[0], args[1]
    params = dict(zip(("weight", "bias", "eps"), args[2:]), **kwargs)
    dims = tuple(range(-len(shape), 0))
    mean = x.mean(dims, keepdim=True)
    centred = x - mean
    var = centred.detach().pow(2).mean(dims, keepdim=True)
    y = centred / torch.sqrt(var + params.get("eps", 1e-5))
    if params.get("weight") is not None:
        y = y * params["weight"]
    return r.plus(y, params.get("bias"), kind="biases")


def _rms_norm(r: Rules, func: Op, args: Args, kwargs: Kwargs) -> object:
    x, shape = args[0], args[1]
    params = dict(zip(("weight", "eps"), args[2:]), **kwargs)
    dims = tuple(range(-len(shape), 0))
    eps = params.get("eps") or torch.finfo(x.dtype).eps
    y = x * torch.rsqrt(x.detach().pow(2).mean(dims, keepdim=True) + eps)
    return y * params["weight"] if params.get("weight") is not None else y


def _normalize(r: Rules, func: Op, args: Args, kwargs: Kwargs) -> object:
    x = args[0]
    p, dim, eps = (list(args[1:]) + [None, None, None])[:3]
    p, dim = kwargs.get("p", p if p is not None else 2.0), kwargs.get("dim", dim if dim is not None else 1)
    eps = kwargs.get("eps", eps if eps is not None else 1e-12)
    return x / x.detach().norm(p, dim, keepdim=True).clamp_min(eps)


def _attention(r: Rules, func: Op, args: Args, kwargs: Kwargs) -> object:
    q, k, v = args[:3]
    if _live(q) and _live(k):  # softmax(q kᵀ) v: q kᵀ and A v are products of live tensors: ½ · ½ to q and k
        q, k = uniform_rule(q, 0.25), uniform_rule(k, 0.25)
        v = uniform_rule(v, 0.5) if _live(v) else v
    return func(q, k, v, *args[3:], **kwargs)


RULE = Callable[["Rules", Op, Args, Kwargs], object]
_RULES: dict[str, RULE] = {
    **{n: _nonlinear for n in NONLINEAR}, **{n: _normaliser for n in NORMALISERS},
    **{n: _product for n in PRODUCTS}, **{n: _matmul for n in MATMULS}, **{n: _sum for n in SUMS},
    **{n: _division for n in DIVISIONS}, "linear": _linear, "addmm": _addmm, "addmv": _addmm,
    "layer_norm": _layer_norm, "rms_norm": _rms_norm, "normalize": _normalize,
    "scaled_dot_product_attention": _attention,
}


# ------------------------------------------------------------------------------------------ the recurrences
def _recurrence(r: Rules, func: Op, args: Args, kwargs: Kwargs) -> object:
    """torch.lstm / gru / rnn_tanh / rnn_relu, padded (input, hx, params, has_biases, num_layers, dropout, train,
    bidirectional, batch_first) or packed (data, batch_sizes, hx, params, has_biases, num_layers, dropout, train,
    bidirectional), unrolled with the LSTM rules of Arras et al. (module docstring)."""
    kind = func.__name__
    sizes = args[1] if len(args) > 1 and isinstance(args[1], torch.Tensor) and not args[1].is_floating_point() \
        else None
    if kwargs or len(args) != 9:
        raise Unsupported(f"LRP cannot read this call of {kind}.")
    if sizes is not None:
        data, _, hx, params, has_biases, layers, _, _, bidirectional = args
        batch_first, r.mixed = True, r.mixed or int(sizes[0]) > 1
        lengths = (sizes[None, :] > torch.arange(int(sizes[0]))[:, None]).sum(1)  # (B,) sorted, longest first
        x = data.new_zeros(int(sizes[0]), len(sizes), data.shape[-1])
        starts = torch.cat([sizes.new_zeros(1), sizes.cumsum(0)[:-1]])
        for t, (s0, n) in enumerate(zip(starts.tolist(), sizes.tolist())):
            x[:n, t] = data[s0:s0 + n]
        x = _live_if(x, data)
    else:
        x, hx, params, has_biases, layers, _, _, bidirectional, batch_first = args
        lengths = None
    if not isinstance(params, (list, tuple)) or (kind == "lstm" and not isinstance(hx, (list, tuple))):
        raise Unsupported(f"LRP cannot read this call of {kind}.")
    dirs = 2 if bidirectional else 1
    per = len(params) // (layers * dirs)
    if per != (4 if has_biases else 2):
        raise Unsupported(f"LRP does not unroll a {kind} with projections (proj_size).")
    if not batch_first:
        x = _live_if(x.transpose(0, 1), x)
    h0, c0 = (hx[0], hx[1]) if kind == "lstm" else (hx, None)
    finals_h, finals_c = [], []
    for layer in range(layers):
        outs = []
        for d in range(dirs):
            j = layer * dirs + d
            w = params[j * per:(j + 1) * per]
            b_ih, b_hh = (w[2], w[3]) if has_biases else (None, None)
            seq, h, c = _unroll(r, kind, x, h0[j], c0[j] if c0 is not None else None, w[0], w[1], b_ih, b_hh,
                                d == 1, lengths)
            outs.append(seq)
            finals_h.append(h)
            if c is not None:
                finals_c.append(c)
        x = _live_if(torch.cat(outs, -1), *outs) if dirs == 2 else outs[0]
    finals = (torch.stack(finals_h),) + ((torch.stack(finals_c),) if kind == "lstm" else ())
    if sizes is not None:  # packed again: each step's first sizes[t] rows
        out = _live_if(torch.cat([x[:n, t] for t, n in enumerate(sizes.tolist())]), x)
        return (out, *finals)
    return (x if batch_first else _live_if(x.transpose(0, 1), x), *finals)


def _live_if(t: torch.Tensor, *sources: torch.Tensor | None) -> torch.Tensor:
    """t, marked live when any of `sources` is (inside a rule the mode does not mark)."""
    if any(_live(s) for s in sources):
        t._lrp_live = True  # type: ignore[attr-defined]
    return t


def _bias(r: Rules, t: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    """t + b, b absorbed as a bias where t is live."""
    if b is None:
        return t
    return _live_if(r.plus(t, b, kind="biases"), t) if _live(t) else t + b


def _add(r: Rules, a: torch.Tensor, b: torch.Tensor, kind: str = "positions") -> torch.Tensor:
    """a + b; where one is a constant (an initial state's part) it is absorbed as `kind`."""
    if _live(a) and _live(b):
        return _live_if(a + b, a)
    if _live(a) or _live(b):
        live, const = (a, b) if _live(a) else (b, a)
        return _live_if(r.plus(live, const, kind=kind), live)
    return a + b


def _act(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    return _live_if(identity_rule(fn, x), x) if _live(x) else fn(x)


def _parts(t: torch.Tensor, size: int) -> list[torch.Tensor]:
    return [_live_if(p, t) for p in t.split(size, -1)]


def _unroll(r: Rules, kind: str, x: torch.Tensor, h: torch.Tensor, c: torch.Tensor | None, w_ih: torch.Tensor,
            w_hh: torch.Tensor, b_ih: torch.Tensor | None, b_hh: torch.Tensor | None, reverse: bool,
            lengths: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """One layer and direction over x (B, T, I) from h, c (B, H): (B, T, H) outputs and the final h, c. Gates
    (σ) are held constant: the signal takes all the relevance. lengths (B,): a packed batch's, each sequence's
    state kept past its end (its outputs there are not read)."""
    T, H = x.shape[1], w_hh.shape[1]
    inputs = _bias(r, _live_if(F.linear(x, w_ih), x), b_ih)  # (B, T, G·H): every step's input part at once
    out: list[torch.Tensor] = []
    before = (h, c)
    for t in (range(T - 1, -1, -1) if reverse else range(T)):
        h, c = before
        gi, hw = _live_if(inputs[:, t], inputs), _live_if(F.linear(h, w_hh), h)
        if kind == "lstm":
            i, f, g, o = _parts(_bias(r, _add(r, gi, hw), b_hh), H)
            i, f, o = torch.sigmoid(i).detach(), torch.sigmoid(f).detach(), torch.sigmoid(o).detach()
            g = _act(torch.tanh, g)
            c = _add(r, _live_if(f * cast(torch.Tensor, c), c), _live_if(i * g, g))
            h = _live_if(o * _act(torch.tanh, c), c)
        elif kind == "gru":
            (ri, zi, ni), (rh, zh, nh) = _parts(gi, H), _parts(hw, H)
            br, bz, bn = b_hh.split(H) if b_hh is not None else (0.0, 0.0, None)
            rg, z = torch.sigmoid(ri + rh + br).detach(), torch.sigmoid(zi + zh + bz).detach()
            n = _add(r, ni, _live_if(rg * nh, nh))
            n = _act(torch.tanh, _bias(r, n, rg * bn if bn is not None else None))
            h = _add(r, _live_if((1 - z) * n, n), _live_if(z * h, h))
        else:
            h = _act(torch.tanh if kind == "rnn_tanh" else torch.relu, _bias(r, _add(r, gi, hw), b_hh))
        if lengths is not None:  # a finished (or, in reverse, not yet started) sequence keeps its state
            on = (t < lengths.to(x.device))[:, None]
            h = _live_if(torch.where(on, h, before[0]), h, before[0])
            c = _live_if(torch.where(on, c, before[1]), c, before[1]) if c is not None and before[1] is not None \
                else c
        before = (h, c)
        out.append(h)
    if reverse:
        out.reverse()
    return _live_if(torch.stack(out, 1), h), h, c


_RULES.update({n: _recurrence for n in RECURRENCES})


# --------------------------------------------------------------------------------- activation modules
ACTIVATION_MODULES = ("torch.nn.modules.activation", "transformers.activations")
NOT_ACTIVATIONS = {"Softmax", "LogSoftmax", "Softmin", "Softmax2d", "MultiheadAttention", "GLU", "Threshold"}


def _is_activation(module: torch.nn.Module) -> bool:
    cls = type(module)
    return cls.__module__ in ACTIVATION_MODULES and cls.__name__ not in NOT_ACTIVATIONS


def _pre(module: torch.nn.Module, args: Args) -> None:
    if getattr(_local, "rules", None) is not None:
        _local.inside = getattr(_local, "inside", 0) + 1


def _post(module: torch.nn.Module, args: Args, out: object) -> object:
    if getattr(_local, "rules", None) is None:
        return None
    _local.inside -= 1
    if _local.inside or not args or not _live(args[0]) or not isinstance(out, torch.Tensor):
        return None
    return _mark(identity_rule(lambda t: out.detach(), args[0]))  # y = the module's own output


def install(model: torch.nn.Module) -> None:
    """Hooks on the model's activation modules, once, at load (they act only in a thread propagating relevance): an
    activation written out in torch operations (GELU's tanh form, e.g. GPT-2's gelu_new) gets the identity rule as a
    whole."""
    for module in model.modules():
        if _is_activation(module) and not getattr(module, "_lrp_installed", False):
            module.register_forward_pre_hook(_pre)
            module.register_forward_hook(_post)
            setattr(module, "_lrp_installed", True)


# ---------------------------------------------------------------------------------------------- the pass
def lrp(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, model: torch.nn.Module | None = None) -> Relevance:
    """Relevance of x (M, N, C) for f = fn(x) (M,), row m of f reading row m of x only: one forward pass under the
    rules and one backward pass (module docstring). model: the model fn runs, when its activation modules may not
    have the hooks yet (`install`: the adapters install them at load)."""
    if model is not None:
        install(model)
    x = x.detach().clone().requires_grad_(True)
    x._lrp_live = True  # type: ignore[attr-defined]
    M = x.shape[0]
    rules = Rules(M)
    _local.rules, _local.inside = rules, 0
    try:
        with torch.enable_grad(), rules:
            f = fn(x)
    finally:
        _local.rules = None
    leaves = [leaf for _, leaf in rules.addends]
    grads = torch.autograd.grad(f.sum(), [x, *leaves], allow_unused=True)
    R = (x.detach() * grads[0]).sum(-1).double().cpu().numpy() if grads[0] is not None else np.zeros(x.shape[:2])
    absorbed = {k: torch.zeros(M, dtype=torch.float64, device=x.device) for k in KINDS}
    parts = [(kind, torch.where(g != 0, leaf.detach() * g, torch.zeros((), dtype=g.dtype, device=g.device)))
             for (kind, leaf), g in zip(rules.addends, grads[1:]) if g is not None]
    if M > 1 and any(not part.shape or part.shape[0] != M for _, part in parts):
        rules.mixed = True  # a constant's rows are not its first axis: only the total over the rows is known
    for kind, part in parts:
        absorbed[kind] += part.double().reshape(M, -1).sum(1) if not rules.mixed else part.double().sum() / M
    out = {k: v.cpu().numpy() for k, v in absorbed.items()}
    return Relevance(R, f.detach().double().cpu().numpy(), out["biases"], out["positions"], rules.mixed and M > 1)
