"""explorer.adapters.lrp against independent computations: the AttnLRP rules written out by hand on tiny random Hugging
Face models (GPT-2, Llama, BERT), the LSTM / GRU / Elman rules of Arras et al. unrolled by hand, what added tensors
absorb, several rows at once, thread-locality and packed sequences.

The hand rules patch the models' own modules with pytest's monkeypatch (restored after each use): LayerNorm / RMSNorm
with the std / rsqrt detached, the MLP activation through an identity-rule autograd Function (∇̃x = act(x)/x · g), the
gated MLP's product and attention's q·kᵀ and A·v with their gradients halved (eager_attention_forward and torch's
scaled_dot_product_attention wrapped to give query and key 1/4 of their gradient and value 1/2, as lxt 2.1 does);
relevance = (x · x.grad).sum(-1) of inputs_embeds. With transformers 5, lxt's own `patch_attention` fails ('dict'
object has no attribute 'get_interface'), which is why the rules are written here by hand.

What added tensors absorb (`absorbed`): biases are checked as such, the rest (position vectors, initial states) as
`positions`. Checked once outside the suite against lxt 2.1's own rule functions (its rules.py and patches.py from
its sdist, with its attention wrapper applied to transformers 5's eager_attention_forward): the same relevance to
7e-9 on tiny random Llama and GPT-2 models; lxt itself does not install beside this app's transformers.
"""
from __future__ import annotations

import inspect
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
import transformers
from transformers.models.bert import modeling_bert
from transformers.models.gpt2 import modeling_gpt2
from transformers.models.llama import modeling_llama

from explorer.adapters.base import Unsupported
from explorer.adapters.lrp import lrp as _lrp

TOL = 1e-6  # the hand rules, relative to the largest |R|
TAKES_MODEL = "model" in inspect.signature(_lrp).parameters


def lrp(fn: Callable, x: torch.Tensor, model: nn.Module | None = None):
    """explorer's lrp, told the model (for its activation modules' hooks) where it takes one."""
    return _lrp(fn, x, model=model) if TAKES_MODEL and model is not None else _lrp(fn, x)
TARGET, POSITION, N, C = 5, 2, 6, 32


# ------------------------------------------------------------------------------------------- the hand rules
class IdentityRule(torch.autograd.Function):
    """y = act(x), with the identity rule's backward ∇̃x = act(x) / x · g."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, act: Callable) -> torch.Tensor:
        y = act(x)
        ctx.save_for_backward(x, y)
        return y

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        x, y = ctx.saved_tensors
        return g * y / x, None


class ScaleGrad(torch.autograd.Function):
    """The identity, with the gradient multiplied by `factor`."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, factor: float) -> torch.Tensor:
        ctx.factor = factor
        return x.clone()

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        return g * ctx.factor, None


class IdentityAct(nn.Module):
    """An activation module replaced by its identity rule; counts its calls."""

    def __init__(self, act: Callable, calls: dict) -> None:
        super().__init__()
        self.act, self.calls = act, calls

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls["act"] = self.calls.get("act", 0) + 1
        return IdentityRule.apply(x, self.act)


def hand_layer_norm(self: nn.LayerNorm, x: torch.Tensor) -> torch.Tensor:
    centred = x - x.mean(-1, keepdim=True)
    std = torch.sqrt(centred.pow(2).mean(-1, keepdim=True) + self.eps).detach()
    return centred / std * self.weight + self.bias


def hand_rms_norm(self: nn.Module, x: torch.Tensor) -> torch.Tensor:
    x32 = x.to(torch.float32)  # as LlamaRMSNorm does
    inverse = torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.variance_epsilon).detach()
    return self.weight * (x32 * inverse).to(x.dtype)


def hand_gated_mlp(self: nn.Module, x: torch.Tensor) -> torch.Tensor:
    gate = IdentityRule.apply(self.gate_proj(x), self.act_fn)
    up = self.up_proj(x)
    return self.down_proj(ScaleGrad.apply(gate, 0.5) * ScaleGrad.apply(up, 0.5))


def split_attention(fn: Callable, calls: dict, key: str) -> Callable:
    """fn(module, query, key, value, ...) with 1/4 of the gradient to query and key, 1/2 to value."""

    def wrapped(module, query, key_, value, *args, **kwargs):
        calls[key] = calls.get(key, 0) + 1
        return fn(module, ScaleGrad.apply(query, 0.25), ScaleGrad.apply(key_, 0.25), ScaleGrad.apply(value, 0.5),
                  *args, **kwargs)

    return wrapped


def split_sdpa(fn: Callable, calls: dict) -> Callable:
    def wrapped(query, key, value, *args, **kwargs):
        calls["sdpa"] = calls.get("sdpa", 0) + 1
        return fn(ScaleGrad.apply(query, 0.25), ScaleGrad.apply(key, 0.25), ScaleGrad.apply(value, 0.5), *args,
                  **kwargs)

    return wrapped


@contextmanager
def hand_rules(monkeypatch: pytest.MonkeyPatch, family: str, model: nn.Module) -> Iterator[dict]:
    """The model's modules patched with the hand rules inside the block; yields the wrappers' call counts. (A child
    module is swapped in its parent's _modules: monkeypatch.setattr would delete it on undo, as it is not in the
    instance's __dict__.)"""
    calls: dict[str, int] = {}
    with monkeypatch.context() as mp:
        mp.setattr(F, "scaled_dot_product_attention", split_sdpa(F.scaled_dot_product_attention, calls))
        if family == "gpt2":
            mp.setattr(nn.LayerNorm, "forward", hand_layer_norm)
            for block in model.transformer.h:
                mp.setitem(block.mlp._modules, "act", IdentityAct(block.mlp.act, calls))
            mp.setattr(modeling_gpt2, "eager_attention_forward",
                       split_attention(modeling_gpt2.eager_attention_forward, calls, "eager"))
        elif family == "llama":
            mp.setattr(modeling_llama.LlamaRMSNorm, "forward", hand_rms_norm)
            mp.setattr(modeling_llama.LlamaMLP, "forward", hand_gated_mlp)
            mp.setattr(modeling_llama, "eager_attention_forward",
                       split_attention(modeling_llama.eager_attention_forward, calls, "eager"))
        else:
            mp.setattr(nn.LayerNorm, "forward", hand_layer_norm)
            for layer in model.bert.encoder.layer:
                mp.setitem(layer.intermediate._modules, "intermediate_act_fn",
                           IdentityAct(layer.intermediate.intermediate_act_fn, calls))
            transform = model.cls.predictions.transform
            mp.setitem(transform._modules, "transform_act_fn", IdentityAct(transform.transform_act_fn, calls))
            mp.setattr(modeling_bert, "eager_attention_forward",
                       split_attention(modeling_bert.eager_attention_forward, calls, "eager"))
        yield calls


def grad_times_input(fn: Callable, x: torch.Tensor) -> tuple[np.ndarray, torch.Tensor]:
    """(x · ∇f).sum(-1) (M, N) and f, from the backward of whatever fn's modules do."""
    x = x.detach().clone().requires_grad_(True)
    f = fn(x)
    f.sum().backward()
    return (x * x.grad).sum(-1).detach().double().numpy(), f.detach()


def assert_close(actual, expected, tol: float, scale: float | None = None, what: str = "") -> None:
    actual, expected = np.asarray(actual, dtype=float), np.asarray(expected, dtype=float)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    scale = float(np.abs(expected).max()) if scale is None else scale
    err = float(np.abs(actual - expected).max())
    assert err <= tol * scale, f"{what}: max |error| {err:.3g} > {tol:g} · {scale:.3g}\n{actual}\n{expected}"


# ------------------------------------------------------------------------------------------------ the models
def tiny(family: str, attention: str, dtype: torch.dtype = torch.float64) -> nn.Module:
    """Random weights 5 times the usual spread (initializer_range 0.1): attention is not near uniform."""
    torch.manual_seed(0)
    if family == "gpt2":
        cfg = transformers.GPT2Config(vocab_size=64, n_embd=C, n_layer=2, n_head=4, n_positions=16, bos_token_id=0,
                                      eos_token_id=0, initializer_range=0.1)
        cfg._attn_implementation = attention
        model = transformers.GPT2LMHeadModel(cfg)
    elif family == "llama":
        cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=C, intermediate_size=48, num_hidden_layers=2,
                                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16,
                                       bos_token_id=0, eos_token_id=0, pad_token_id=0, initializer_range=0.1)
        cfg._attn_implementation = attention
        model = transformers.LlamaForCausalLM(cfg)
    else:
        cfg = transformers.BertConfig(vocab_size=64, hidden_size=C, num_hidden_layers=2, num_attention_heads=4,
                                      intermediate_size=48, max_position_embeddings=16, pad_token_id=0,
                                      initializer_range=0.1)
        cfg._attn_implementation = attention
        model = transformers.BertForMaskedLM(cfg)
    with torch.no_grad():  # non-zero biases: bias absorption exercised
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_(0, 0.05)
    return model.eval().to(dtype)


def reader(family: str, model: nn.Module) -> Callable[[torch.Tensor], torch.Tensor]:
    """f: one logit, at the last position (causal models) or at POSITION (the masked LM)."""
    if family == "bert":
        return lambda e: model(inputs_embeds=e).logits[:, POSITION, TARGET]
    return lambda e: model(inputs_embeds=e, use_cache=False).logits[:, -1, TARGET]


def embeddings(M: int, dtype: torch.dtype = torch.float64, seed: int = 1) -> torch.Tensor:
    torch.manual_seed(seed)
    return torch.randn(M, N, C, dtype=dtype)


MODELS = [("gpt2", "eager"), ("gpt2", "sdpa"), ("llama", "eager"), ("llama", "sdpa"), ("bert", "eager"),
          ("bert", "sdpa")]


# ----------------------------------------------------------------------------------- 1. the transformer rules
@pytest.mark.parametrize("family,attention", MODELS)
def test_transformer_relevance_equals_hand_rules(monkeypatch, family, attention):
    model = tiny(family, attention)
    fn, x = reader(family, model), embeddings(2)
    got = lrp(fn, x, model)
    with hand_rules(monkeypatch, family, model) as calls:
        want, f = grad_times_input(fn, x)
    # the hand rules did run: the attention wrapper of the chosen implementation, the activation (or gated MLP)
    assert calls.get("eager" if attention == "eager" else "sdpa", 0) == 2
    assert calls.get("sdpa" if attention == "eager" else "eager", 0) == 0
    if family != "llama":
        assert calls["act"] >= 2
    assert_close(got.relevance, want, TOL)
    assert_close(got.value, f.double().numpy(), 1e-9, scale=1.0)
    # and they matter: the plain gradient × input is far from it
    plain, _ = grad_times_input(fn, x)
    assert np.abs(plain - want).max() > 1e-2 * np.abs(want).max()


@pytest.mark.parametrize("batch_first", [True, False])
def test_torch_multihead_attention_is_refused(batch_first):
    """torch's nn.MultiheadAttention (the core of nn.Transformer*) runs as one fused torch function, whose inner
    products the rules cannot reach: LRP says so instead of returning plain gradient × input as relevance."""
    mha = nn.MultiheadAttention(8, 2, batch_first=batch_first).double().eval()
    x = torch.randn(2, 5, 8, dtype=torch.float64)

    def fn(e: torch.Tensor) -> torch.Tensor:
        t = e if batch_first else e.transpose(0, 1)
        out = mha(t, t, t, need_weights=False)[0]
        return (out if batch_first else out.transpose(0, 1))[:, -1].sum(-1)

    with pytest.raises(Unsupported, match="multi_head_attention_forward"):
        lrp(fn, x, mha)


# ------------------------------------------------------------------------------------ 2. the model's own value
@pytest.mark.parametrize("family,attention", MODELS)
def test_transformer_value_is_the_models_own(family, attention):
    model = tiny(family, attention, torch.float32)
    fn, x = reader(family, model), embeddings(2, torch.float32)
    with torch.no_grad():
        want = fn(x).double().numpy()
    np.testing.assert_allclose(lrp(fn, x, model).value, want, rtol=1e-5, atol=1e-5)


RNNS = {"lstm": lambda **k: nn.LSTM(**k), "gru": lambda **k: nn.GRU(**k),
        "rnn_tanh": lambda **k: nn.RNN(nonlinearity="tanh", **k),
        "rnn_relu": lambda **k: nn.RNN(nonlinearity="relu", **k)}


def recurrent_reader(net: nn.Module, batch_first: bool, steps: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """f: a fixed weighting of every output, final hidden and (LSTM) final cell state, row by row."""
    g = torch.Generator().manual_seed(7)
    D, H, L = 2 if net.bidirectional else 1, net.hidden_size, net.num_layers
    w_out, w_h, w_c = (torch.randn(steps, D * H, generator=g), torch.randn(L * D, H, generator=g),
                       torch.randn(L * D, H, generator=g))

    def fn(x: torch.Tensor) -> torch.Tensor:
        out, hidden = net(x if batch_first else x.transpose(0, 1))
        out = out if batch_first else out.transpose(0, 1)
        h, c = hidden if isinstance(hidden, tuple) else (hidden, None)
        f = (out * w_out.to(x.dtype)).sum((1, 2)) + (h.transpose(0, 1) * w_h.to(x.dtype)).sum((1, 2))
        return f if c is None else f + (c.transpose(0, 1) * w_c.to(x.dtype)).sum((1, 2))

    return fn


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("kind", list(RNNS))
def test_recurrent_value_is_the_models_own(kind, bidirectional, bias, batch_first):
    torch.manual_seed(3)
    net = RNNS[kind](input_size=3, hidden_size=4, num_layers=2, bias=bias, bidirectional=bidirectional,
                     batch_first=batch_first).eval()
    x = torch.randn(3, 5, 3)
    fn = recurrent_reader(net, batch_first, 5)
    with torch.no_grad():
        want = fn(x).double().numpy()
    np.testing.assert_allclose(lrp(fn, x, net).value, want, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------ 3. the recurrences by hand
def rows_leaf(b: torch.Tensor | None, M: int, leaves: list) -> torch.Tensor | int:
    """A bias as an (M, ...) leaf, one copy per row, whose gradient is ∂f_m/∂b (summed over its uses); 0 if none."""
    if b is None:
        return 0
    leaf = b.detach().double().expand(M, *b.shape).clone().requires_grad_(True)
    leaves.append(leaf)
    return leaf


def hand_recurrence(kind: str, net: nn.Module, head: nn.Linear, x: torch.Tensor, h0: torch.Tensor | None = None,
                    c0: torch.Tensor | None = None):
    """Arras et al.'s signal-take-all LRP of f = head(h_T), an explicit loop: R (M, N), f, Σ b·∂̃f/∂b and
    Σ s0·∂̃f/∂s0 of the initial states (M,)."""
    M, T, _ = x.shape
    H = net.hidden_size
    x = x.detach().double().clone().requires_grad_(True)
    W_ih, W_hh = net.weight_ih_l0.detach().double(), net.weight_hh_l0.detach().double()
    leaves: list[torch.Tensor] = []
    b_ih = rows_leaf(net.bias_ih_l0 if net.bias else None, M, leaves)
    b_hh = rows_leaf(net.bias_hh_l0 if net.bias else None, M, leaves)
    b_head = rows_leaf(head.bias, M, leaves)
    h = torch.zeros(M, H, dtype=torch.float64) if h0 is None else h0.double().clone().requires_grad_(True)
    c = torch.zeros(M, H, dtype=torch.float64) if c0 is None else c0.double().clone().requires_grad_(True)
    states = [s for s in (h, c) if s.requires_grad]
    for t in range(T):
        gi, gh = x[:, t] @ W_ih.T + b_ih, h @ W_hh.T + b_hh
        if kind == "lstm":
            i, f, g, o = (gi + gh).split(H, -1)
            i, f, o = torch.sigmoid(i).detach(), torch.sigmoid(f).detach(), torch.sigmoid(o).detach()
            c = f * c + i * IdentityRule.apply(g, torch.tanh)
            h = o * IdentityRule.apply(c, torch.tanh)
        elif kind == "gru":
            (ri, zi, ni), (rh, zh, nh) = gi.split(H, -1), gh.split(H, -1)
            r, z = torch.sigmoid(ri + rh).detach(), torch.sigmoid(zi + zh).detach()
            n = IdentityRule.apply(ni + r * nh, torch.tanh)
            h = (1 - z) * n + z * h
        else:
            h = IdentityRule.apply(gi + gh, torch.tanh if kind == "rnn_tanh" else torch.relu)
    f = h @ head.weight.detach().double()[0] + (b_head[:, 0] if head.bias is not None else 0)
    f.sum().backward()
    R = (x * x.grad).sum(-1).detach().numpy()
    biases = sum((leaf * leaf.grad).reshape(M, -1).sum(1) for leaf in leaves) if leaves else torch.zeros(M)
    constants = sum((s * s.grad).sum(1) for s in states) if states else torch.zeros(M)
    return R, f.detach().numpy(), biases.detach().double().numpy(), constants.detach().double().numpy()


def one_layer(kind: str, bias: bool) -> tuple[nn.Module, nn.Linear]:
    torch.manual_seed(11)
    net = RNNS[kind](input_size=3, hidden_size=4, num_layers=1, bias=bias, batch_first=True).double().eval()
    head = nn.Linear(4, 1, bias=bias).double()
    with torch.no_grad():
        for name, p in [*net.named_parameters(), *head.named_parameters()]:
            if "bias" in name:
                p.normal_(0, 0.5)
    return net, head


def absorbed(r) -> dict[str, np.ndarray]:
    """What added tensors absorbed, by kind, under the names this Relevance has: biases, lookups, constants (or, in
    the variant of lrp.py that splits by shape only, biases and positions)."""
    return {k: np.asarray(getattr(r, k), dtype=float) for k in ("biases", "lookups", "constants", "positions")
            if hasattr(r, k)}


def not_biases(r) -> np.ndarray:
    """All that added tensors other than parameters' biases absorbed (lookups + constants, or positions)."""
    return sum((v for k, v in absorbed(r).items() if k != "biases"), np.zeros_like(np.asarray(r.value, dtype=float)))


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("kind", list(RNNS))
def test_recurrence_relevance_equals_hand_unrolling(kind, bias):
    """Relevance, value and what the biases absorb, against the explicit loop; conservation: rest ≈ 0."""
    net, head = one_layer(kind, bias)
    torch.manual_seed(12)
    x = torch.randn(3, 7, 3, dtype=torch.float64)
    got = lrp(lambda e: head(net(e)[0][:, -1])[:, 0], x)
    R, f, biases, _ = hand_recurrence(kind, net, head, x)
    scale = np.abs(f).max()
    assert_close(got.relevance, R, TOL)
    assert_close(got.value, f, 1e-12, scale=1.0)
    assert_close(got.value, got.relevance.sum(1) + sum(absorbed(got).values()), TOL, scale=scale)
    assert_close(got.rest, np.zeros(3), TOL, scale=scale)  # no softmax: conserved
    # b_ih, b_hh (at every step, the first included) and the head's bias; the zero initial state adds nothing else
    assert_close(got.biases, biases, TOL, scale=scale, what="biases")
    assert_close(not_biases(got), np.zeros(3), TOL, scale=scale, what="not biases")
    if bias:
        assert np.abs(biases).max() > 1e-2 * scale  # the biases do absorb something
    else:
        assert np.all(got.biases == 0)
        assert_close(got.relevance.sum(1), got.value, TOL, scale=scale)


@pytest.mark.parametrize("kind", ["lstm", "gru", "rnn_tanh"])
def test_recurrence_initial_state_is_not_a_bias(kind):
    """A given initial state h0 (c0) absorbs Σ s0 · ∂̃f/∂s0, a constant (lookups + constants, or positions); the
    biases only Σ b · ∂̃f/∂b (module docstring: biases are Linear / LayerNorm biases, initial states are not)."""
    net, head = one_layer(kind, True)
    torch.manual_seed(13)
    x = torch.randn(3, 7, 3, dtype=torch.float64)
    h0, c0 = torch.randn(1, 3, 4, dtype=torch.float64), torch.randn(1, 3, 4, dtype=torch.float64)
    state = (h0, c0) if kind == "lstm" else h0
    got = lrp(lambda e: head(net(e, state)[0][:, -1])[:, 0], x)
    R, f, biases, constants = hand_recurrence(kind, net, head, x, h0[0], c0[0] if kind == "lstm" else None)
    scale = np.abs(f).max()
    assert_close(got.relevance, R, TOL)
    assert_close(got.rest, np.zeros(3), TOL, scale=scale)
    assert_close(got.biases + not_biases(got), biases + constants, TOL, scale=scale, what="all absorbed")
    assert_close(got.biases, biases, TOL, scale=scale, what="biases")
    assert_close(not_biases(got), constants, TOL, scale=scale, what="initial state (not biases)")


# ----------------------------------------------------------------------------------------- 4. conservation
@pytest.mark.parametrize("bias", [True, False])
def test_mlp_conserves_and_biases_absorb_their_share(bias):
    torch.manual_seed(21)
    mlp = nn.Sequential(nn.Linear(C, 16, bias=bias), nn.Tanh(), nn.Linear(16, 16, bias=bias), nn.ReLU(),
                        nn.Linear(16, 1, bias=bias)).double()
    if bias:
        with torch.no_grad():
            for layer in mlp[::2]:
                layer.bias.normal_(0, 0.3)
    x = embeddings(3)
    got = lrp(lambda e: mlp(e)[..., 0].sum(1), x, mlp)
    # by hand: tanh and ReLU by the identity rule, each bias a per-row leaf
    e = x.clone().requires_grad_(True)
    h, leaves = e, []
    for layer in mlp:
        if isinstance(layer, nn.Linear):
            h = h @ layer.weight.detach().T + rows_leaf(None if layer.bias is None else layer.bias[None], 3, leaves)
        else:
            h = IdentityRule.apply(h, layer)
    f = h[..., 0].sum(1)
    f.sum().backward()
    R = (e * e.grad).sum(-1).detach().numpy()
    biases = sum((b * b.grad).reshape(3, -1).sum(1) for b in leaves).detach().numpy() if bias else np.zeros(3)
    scale = float(np.abs(f.detach().numpy()).max())
    assert_close(got.relevance, R, TOL)
    assert_close(got.value, f.detach().numpy(), 1e-12, scale=1.0)
    assert_close(got.biases, biases, TOL, scale=scale)
    assert np.all(not_biases(got) == 0)
    assert_close(got.value, got.relevance.sum(1) + sum(absorbed(got).values()), TOL, scale=scale)
    assert_close(got.rest, np.zeros(3), TOL, scale=scale)
    if bias:
        assert np.abs(biases).max() > 1e-2 * scale
    else:
        assert np.all(got.biases == 0)
        assert_close(got.relevance.sum(1), got.value, TOL, scale=scale)


def test_gpt2_lookups_biases_and_rest_measured(monkeypatch):
    """lookups = Σ wpe ⊙ ∂̃f/∂wpe, biases = Σ b ⊙ ∂̃f/∂b under the hand rules; rest = what is left, non-zero (the
    softmax rule does not conserve)."""
    model = tiny("gpt2", "eager")
    fn, x = reader("gpt2", model), embeddings(1)
    got = lrp(fn, x, model)
    model.zero_grad(set_to_none=True)
    with hand_rules(monkeypatch, "gpt2", model):
        R, f = grad_times_input(fn, x)
    wpe = model.transformer.wpe.weight
    with torch.no_grad():
        lookups = float((wpe * wpe.grad).sum())
        biases = float(sum((p * p.grad).sum() for name, p in model.named_parameters() if name.endswith("bias")))
    value = float(f[0])
    scale = abs(value) + np.abs(R).sum() + abs(biases) + abs(lookups)
    assert abs(lookups) > 1e-4 * scale and abs(biases) > 1e-4 * scale
    assert_close(got.relevance, R, TOL)
    assert_close(got.biases, [biases], TOL, scale=scale)
    # the only other added tensors: the position vectors and the causal mask (0 where attended, no gradient where
    # masked, so it absorbs nothing)
    assert_close(not_biases(got), [lookups], TOL, scale=scale)
    if hasattr(got, "lookups"):
        assert_close(got.lookups, [lookups], TOL, scale=scale)
        assert_close(got.constants, [0.0], TOL, scale=scale)
    rest = value - R.sum() - biases - lookups
    assert_close(got.rest, [rest], TOL, scale=scale)
    assert_close(got.rest, got.value - got.relevance.sum(1) - sum(absorbed(got).values()), 1e-12, scale=scale)
    assert abs(rest) > 1e-3 * scale  # measured, not assumed 0


# ------------------------------------------------------------------------------------------- 5. several rows
def assert_rows_match(fn: Callable, x: torch.Tensor, model: nn.Module | None = None, mixed: bool = False) -> None:
    """Each row's relevance and value as alone; its absorbed shares too, unless the pass says its rows were `mixed`
    (a constant added where the rows are not the first axis: then only the total over the rows is known, and the
    probes run the rows one at a time)."""
    together = lrp(fn, x, model)
    assert together.mixed == mixed
    alone_rows = [lrp(fn, x[m:m + 1], model) for m in range(x.shape[0])]
    for m, alone in enumerate(alone_rows):
        assert_close(together.relevance[m], alone.relevance[0], TOL, what=f"row {m} relevance")
        scale = abs(alone.value[0]) + np.abs(alone.relevance).sum() + sum(abs(v[0]) for v in absorbed(alone).values())
        assert_close(together.value[m], alone.value[0], TOL, scale=scale, what=f"row {m} value")
        for kind, v in absorbed(alone).items():
            if mixed:  # each row holds the mean of the rows
                mean = sum(a_.__getattribute__(kind)[0] for a_ in alone_rows) / len(alone_rows)
                assert_close(absorbed(together)[kind][m], mean, TOL, scale=scale, what=f"row {m} {kind} (mean)")
            else:
                assert_close(absorbed(together)[kind][m], v[0], TOL, scale=scale, what=f"row {m} {kind}")
        if not mixed:
            assert_close(together.rest[m], alone.rest[0], TOL, scale=scale, what=f"row {m} rest")


def test_rows_are_independent_gpt2():
    model = tiny("gpt2", "eager")
    x = embeddings(3)
    assert_rows_match(reader("gpt2", model), x, model, mixed=True)  # Conv1D's addmm: rows × positions first


def test_rows_are_independent_llama():
    model = tiny("llama", "eager")
    x = embeddings(3)
    assert_rows_match(reader("llama", model), x, model)


def recurrent_with_biases(seed: int, **kwargs) -> tuple[nn.Module, nn.Linear]:
    torch.manual_seed(seed)
    net = nn.LSTM(3, 4, **kwargs).double().eval()
    head = nn.Linear(net.hidden_size * (2 if net.bidirectional else 1), 1).double()
    with torch.no_grad():
        for name, p in [*net.named_parameters(), *head.named_parameters()]:
            if "bias" in name:
                p.normal_(0, 0.5)
    return net, head


def test_rows_are_independent_lstm():
    """Two layers, both directions, time-first inside nn.LSTM; the head reads the last step row by row."""
    net, head = recurrent_with_biases(31, num_layers=2, bidirectional=True)
    x = torch.randn(3, 5, 3, dtype=torch.float64)
    assert_rows_match(lambda e: head(net(e.transpose(0, 1))[0][-1])[:, 0], x)


@pytest.mark.parametrize("steps", [5, 6])
def test_rows_are_independent_time_first_head(steps):
    """The head's bias added at every step of the time-first (N, M, H) output: each row's share is its own."""
    net, head = recurrent_with_biases(32, bias=False)
    x = torch.randn(3, steps, 3, dtype=torch.float64)
    assert_rows_match(lambda e: torch.tanh(head(net(e.transpose(0, 1))[0])).sum(0)[:, 0], x, mixed=True)


# ---------------------------------------------------------------------------------------- 6. thread-locality
def test_rules_stay_in_their_thread():
    """lrp in a loop in one thread; meanwhile plain gradient × input in this one is the ordinary gradient's, and
    the other thread's relevance stays what it is alone."""
    model = tiny("gpt2", "eager", torch.float32)
    fn, x = reader("gpt2", model), embeddings(1, torch.float32)
    plain, _ = grad_times_input(fn, x)
    reference = lrp(fn, x, model).relevance
    assert np.abs(plain - reference).max() > 1e-2 * np.abs(plain).max()  # the two differ: a leak would show
    stop, busy, done, failures = threading.Event(), threading.Event(), [0], []

    def propagate() -> None:
        while not stop.is_set():
            busy.set()
            try:
                assert_close(lrp(fn, x, model).relevance, reference, TOL)
            except Exception as exc:  # noqa: BLE001 - reported below
                failures.append(exc)
                return
            finally:
                busy.clear()
            done[0] += 1

    thread = threading.Thread(target=propagate)
    thread.start()
    try:
        end, rounds, overlapping = time.monotonic() + 2.5, 0, 0  # long enough to catch shared state
        while time.monotonic() < end and thread.is_alive():
            during = busy.is_set()
            got, _ = grad_times_input(fn, x)
            overlapping += during and busy.is_set()
            assert_close(got, plain, 1e-6)
            rounds += 1
    finally:
        stop.set()
        thread.join(10)
    assert not failures, failures
    assert overlapping >= 10 and done[0] >= 10, (rounds, overlapping, done[0])


# --------------------------------------------------------------------------------------- 7. packed sequences
def ordinary_gradient_after() -> None:
    """Nothing stays behind: a plain forward has its ordinary gradient (GELU's own derivative, not the identity
    rule)."""
    torch.manual_seed(42)
    gelu = nn.Sequential(nn.Linear(3, 4), nn.GELU(), nn.Linear(4, 1))
    x = torch.randn(2, 5, 3)
    e = x.clone().requires_grad_(True)
    gelu(e).sum().backward()
    with torch.no_grad():
        h = x @ gelu[0].weight.T + gelu[0].bias
        normal = torch.distributions.Normal(0.0, 1.0)
        slope = normal.cdf(h) + h * normal.log_prob(h).exp()  # d gelu(h) / dh
        want = (gelu[2].weight[0] * slope) @ gelu[0].weight
    assert_close(e.grad, want, 1e-5)


@pytest.mark.parametrize("lengths", [[7, 4], [4, 7]])
@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_packed_sequence_unsupported_or_exact(kind, lengths):
    """A packed batch: either lrp says it cannot (Unsupported, with a message that says why), or each row's relevance
    is that of its own sequence, unrolled by hand to its length (0 beyond), and the value is the model's own."""
    net, head = one_layer(kind, True)
    torch.manual_seed(43)
    x = torch.randn(2, 7, 3, dtype=torch.float64)

    def fn(e: torch.Tensor) -> torch.Tensor:
        packed = nn.utils.rnn.pack_padded_sequence(e, torch.tensor(lengths), batch_first=True, enforce_sorted=False)
        hidden = net(packed)[1]
        return head((hidden[0] if isinstance(hidden, tuple) else hidden)[-1])[:, 0]

    try:
        got = lrp(fn, x)
    except Unsupported as exc:
        assert "packed" in str(exc)
    else:
        with torch.no_grad():
            assert_close(got.value, fn(x).numpy(), 1e-12, scale=1.0)
        total = 0.0
        for m, n in enumerate(lengths):
            R, f, biases, _ = hand_recurrence(kind, net, head, x[m:m + 1, :n])
            assert_close(got.relevance[m, :n], R[0], TOL)
            assert np.all(got.relevance[m, n:] == 0)
            total += biases[0]
        # the rows are reordered inside: what the biases absorb is right in total
        absorbed_total = sum(v.sum() for v in absorbed(got).values())
        assert_close(absorbed_total, total, TOL, scale=float(np.abs(got.value).max()))
        assert_close(got.rest.sum(), 0.0, TOL, scale=float(np.abs(got.value).max()))
    ordinary_gradient_after()


# ------------------------------------------------------------------------------- 8. lxt's own rule functions
def test_equals_lxt_own_rule_functions(tmp_path):
    """bench/check_lxt.py: lxt 2.1's efficient rules.py and patches.py (its sdist from the package index, not
    installed: lxt itself does not install beside this app) applied to tiny Llama and GPT-2 give the same relevance
    to 1e-6 of its largest value. Skipped only where the package index cannot be reached."""
    import importlib.util
    import subprocess
    import sys as _sys
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("check_lxt", Path(__file__).resolve().parent.parent / "bench" /
                                                  "check_lxt.py")
    assert spec is not None and spec.loader is not None
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    try:
        rules, patches = check._lxt(tmp_path)
    except subprocess.CalledProcessError as exc:  # no package index here
        pytest.skip(f"lxt's sdist could not be downloaded: {exc}")
    try:
        for family in ("llama", "gpt2"):
            diff, peak = check.compare(family, 0, rules, patches)
            assert diff <= 1e-6 * peak, (family, diff, peak)
    finally:
        for name in ("lxt.efficient.rules", "lxt.efficient.patches"):
            _sys.modules.pop(name, None)
