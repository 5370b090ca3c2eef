"""What one request may cost, priced before it runs.

A view's work on a transformer is priced from the model's shape and the number of tokens it reads:

    time   ≈ rows · passes · (2·P·T + 4·L·d·T²) / F  +  calls · L · c
    memory ≈ what the result keeps (e.g. L·H·T² attention weights) + the forward's largest transient
             (H·T² scores of one layer, rows·T·d activations of every layer when gradients are kept)

P parameters, L layers, d width, H heads (read from the model's config, else from its modules), T tokens, rows
sequences side by side, passes forwards (×3 with a backward), calls separate forward calls; F this machine's
rate of a model's arithmetic per second of its device (`throughput()`, measured once per process: CPU
seconds on the CPU, a GPU's own seconds on a GPU) and c the fixed cost of one
layer call (LAYER_CALL_S). Settings:

  EXPLORER_REQUEST_SECONDS (5)       CPU seconds one request may take;
  EXPLORER_STREAMED_SECONDS (30)     … when it paints a first answer at once and refines it in place;
  EXPLORER_REQUEST_MB (400)          memory one request may take at its peak;
  EXPLORER_RESULTS_MB (256)          probe results the server keeps (explorer.runtime.result_cache);
  EXPLORER_SESSION_RESULTS_MB (128)  probe results one session keeps: a request's result must fit in it;
  EXPLORER_SESSION_LOAD_MB (1024)    weights one session may load (models not already loaded) in any 60 s.

A view cuts its text to the tokens that fit (`fit_tokens`, with a note naming the setting) or refuses the request
(`check`, a RequestOverBudget message naming the limit and its setting).
"""
from __future__ import annotations

import functools
import os
import time
from dataclasses import dataclass
from typing import Callable

import torch

from explorer.runtime.errors import ViewError

LAYER_CALL_S = 1e-3  # seconds of one layer call besides its arithmetic (Python, hooks, small kernels): SmolLM2
# the share of a large matrix product's rate that a model's forward of many tokens reaches (SmolLM2, 1 thread: 100
# tokens in 0.47–0.50 s; 32 path points of 16 tokens 1.45 s), and a generation step of one token per row (15 rows:
# 0.19 s a step)
EFFICIENCY = 0.65
STEP_EFFICIENCY = 0.4
FLOAT_BYTES = 4
# a forward and a backward to its inputs (the weights' gradients not computed) take 2.3–2.5 forwards (SmolLM2, 1
# thread, 8–32 path points of 16–64 tokens), and keep for the backward ~36 d floats per token and layer
# (2.2–2.4 MB per token of SmolLM2: 30 layers, d = 576)
INPUT_GRADIENT = 2.5
SAVED = 36


def positive_setting(name: str, default: float) -> float:
    """The number in environment variable `name`; `default` when it is unset, not a number, or not above 0."""
    try:
        value = float(os.environ.get(name, "") or default)
    except ValueError:
        value = default
    return value if value > 0 else default


def request_seconds() -> float:
    """CPU seconds one request may take (EXPLORER_REQUEST_SECONDS, default 5)."""
    return positive_setting("EXPLORER_REQUEST_SECONDS", 5.0)


def streamed_seconds() -> float:
    """CPU seconds a request may take when it paints a first answer at once, refines it in place and takes its turn
    in the heavy queue (integrated gradients' rounds, exact patching's rows; EXPLORER_STREAMED_SECONDS, default
    30): integrated gradients of SmolLM2's prediction after 16 tokens take ~25 s to 1 % (~180 gradient
    evaluations), so within 5 s they would stop at ~10 % where the path bends."""
    return positive_setting("EXPLORER_STREAMED_SECONDS", 30.0)


def request_bytes() -> int:
    """Bytes one request may take at its peak (EXPLORER_REQUEST_MB, default 400)."""
    return int(positive_setting("EXPLORER_REQUEST_MB", 400.0) * 2**20)


def result_bytes() -> int:
    """Bytes of probe results the server keeps (EXPLORER_RESULTS_MB, default 256; explorer.runtime.result_cache)."""
    return int(positive_setting("EXPLORER_RESULTS_MB", 256.0) * 2**20)


def session_result_bytes() -> int:
    """Bytes of probe results one session keeps (EXPLORER_SESSION_RESULTS_MB, default 128): a request's result must
    fit in it, else every rerun of the page would compute it again."""
    return int(positive_setting("EXPLORER_SESSION_RESULTS_MB", 128.0) * 2**20)


def session_load_bytes() -> int:
    """Bytes of weights one session may load in any 60 s, models already loaded not counted
    (EXPLORER_SESSION_LOAD_MB, default 1024: SmolLM2 twice, or hundreds of training snapshots of a built-in as a
    student plays through them): opening model after model by link cannot keep the server loading."""
    return int(positive_setting("EXPLORER_SESSION_LOAD_MB", 1024.0) * 2**20)


@functools.lru_cache(maxsize=8)
def throughput(device: str = "cpu", dtype: torch.dtype = torch.float32) -> float:
    """Floating-point operations per second a model's forward reaches on `device` in `dtype` (measured once per
    process and pair, ~0.1 s). CPU: EFFICIENCY × the best of five 512×1024·1024×1024 float32 products on the current
    torch threads, timed in the calling thread's CPU time, not the wall clock: measured while other sessions or
    processes keep the cores busy, a wall-clock rate came out half as fast (2 cores, 4 busy processes: 43 against 79
    GFLOP/s; CPU time: 81 against 90), and every request of that process was then priced twice as dear. A GPU:
    EFFICIENCY × the best of five 2048×2048·2048×2048 products in `dtype` on the wall clock (synchronised): its
    seconds are the device's, not the CPU's."""
    if device == "cpu":
        a, b = torch.randn(512, 1024), torch.randn(1024, 1024)
        best = float("inf")
        for _ in range(5):
            start = time.thread_time()
            a @ b
            best = min(best, time.thread_time() - start)
        return EFFICIENCY * 2 * 512 * 1024 * 1024 / max(best, 1e-6)
    n = 2048
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    sync = getattr(getattr(torch, torch.device(device).type, None), "synchronize", lambda: None)
    a @ b  # the first product loads the kernels
    sync()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        a @ b
        sync()
        best = min(best, time.perf_counter() - start)
    return EFFICIENCY * 2 * n ** 3 / max(best, 1e-7)


@dataclass(frozen=True)
class Shape:
    """What prices one forward of a model: parameters, layers, width, heads (0 when unknown: no T² term), and the
    parameters of its output layer (counted in params too; 0 when it has none found)."""

    params: int
    layers: int
    width: int
    heads: int
    head: int = 0
    device: str = "cpu"  # where its parameters are: a request's seconds are that device's
    dtype: torch.dtype = torch.float32

    def rate(self) -> float:
        """throughput() of this model's device and dtype."""
        return throughput(self.device, self.dtype)


_CONFIG_NAMES = {"layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers", "decoder_layers"),
                 "width": ("hidden_size", "n_embd", "d_model", "dim"),
                 "heads": ("num_attention_heads", "n_head", "num_heads", "encoder_attention_heads")}


def shape_of(model: object) -> Shape:
    """The Shape of `model`: parameters counted (tied once); layers, width and heads from its config when it has one,
    else from its nn.MultiheadAttention modules, else 1 layer and no attention term; the output layer from
    get_output_embeddings() (a Hugging Face model's)."""
    if not isinstance(model, torch.nn.Module):
        return Shape(0, 0, 0, 0)
    params = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
    config = getattr(model, "config", None)
    found = {}
    for field, names in _CONFIG_NAMES.items():
        values = [getattr(config, n, None) for n in names] if config is not None else []
        found[field] = next((int(v) for v in values if isinstance(v, int) and v > 0), 0)
    if not found["layers"]:
        mha = [m for m in model.modules() if isinstance(m, torch.nn.MultiheadAttention)]
        found = {"layers": len(mha) or 1, "width": mha[0].embed_dim if mha else 0,
                 "heads": mha[0].num_heads if mha else 0}
    reader = getattr(model, "get_output_embeddings", None)
    try:
        output = reader() if callable(reader) else None
    except (AttributeError, NotImplementedError):
        output = None
    weight = getattr(output, "weight", None)
    head = int(weight.numel()) if isinstance(weight, torch.Tensor) and weight.numel() < params else 0
    first = next(model.parameters(), None)
    device = first.device.type if first is not None else "cpu"
    dtype = first.dtype if first is not None and first.is_floating_point() else torch.float32
    return Shape(params, found["layers"], found["width"], found["heads"], head, device, dtype)


@dataclass(frozen=True)
class Price:
    """What a request is expected to cost: seconds of its device (the CPU's unless it runs on a GPU), bytes at its
    peak, bytes its result keeps."""

    seconds: float
    bytes: int
    kept: int = 0
    streamed: bool = False  # the work refines its answer in place: streamed_seconds() bounds it
    device: str = "cpu"

    def within(self) -> bool:
        """Within the request's time and memory, and its result within what a session keeps."""
        return (self.seconds <= (streamed_seconds() if self.streamed else request_seconds())
                and self.bytes <= request_bytes() and self.kept <= session_result_bytes())


def forward(shape: Shape, tokens: int, rows: int = 1, passes: int = 1, calls: int = 1, backward: bool | str = False,
            kept: int = 0, transient: int = 0, read: int | None = None) -> Price:
    """The price of `passes` forwards of `rows` sequences of `tokens` tokens in `calls` separate calls (backward=True:
    a backward too, ×3 time; "inputs": a backward to the inputs alone, the weights' gradients not computed,
    ×INPUT_GRADIENT; either keeps every layer's activations), the output layer computed at `read` positions (None:
    every token), the result keeping `kept` bytes and the work holding `transient` more bytes at its peak."""
    t = max(int(tokens), 1)
    head = min(shape.head, shape.params)
    at = t if read is None else max(int(read), 0)
    flops = rows * passes * (2 * (shape.params - head) * t + 2 * head * at + 4 * shape.layers * shape.width * t * t)
    factor = 3 if backward is True else INPUT_GRADIENT if backward else 1
    seconds = flops * factor / shape.rate() + calls * max(shape.layers, 1) * LAYER_CALL_S
    scores = rows * shape.heads * t * t * FLOAT_BYTES  # one layer's attention scores and weights
    activations = rows * t * shape.width * FLOAT_BYTES * (SAVED * max(shape.layers, 1) if backward else 8)
    return Price(seconds, int(kept + transient + 2 * scores + activations), int(kept), device=shape.device)


def generation(shape: Shape, prompt: int, rows: int, new: int) -> Price:
    """The price of generating `new` tokens for `rows` rows after a `prompt`-token prompt read once (its state copied
    to each row): the prompt's forward, then one forward of one token per row and step over a cache of
    rows × layers × (prompt + new) keys and values."""
    read = forward(shape, prompt)
    length = max(int(prompt), 1) + new
    per_step = rows * (2 * shape.params + 4 * shape.layers * shape.width * length)
    step_rate = shape.rate() * STEP_EFFICIENCY / EFFICIENCY
    seconds = read.seconds + new * (per_step / step_rate + max(shape.layers, 1) * LAYER_CALL_S)
    cache = 2 * max(shape.layers, 1) * rows * length * shape.width * FLOAT_BYTES
    return Price(seconds, read.bytes + cache, read.kept, device=shape.device)


def attention_bytes(shape: Shape, tokens: int, arrays: int = 3) -> int:
    """Bytes of `arrays` (L, H, T, T) float32 arrays (attention weights and scores of every layer and head)."""
    return arrays * max(shape.layers, 1) * max(shape.heads, 1) * tokens * tokens * FLOAT_BYTES


def layer_bytes(shape: Shape, tokens: int, arrays: int) -> int:
    """Bytes of `arrays` (L, T, d) float32 arrays (hidden states, queries, keys, values of every layer)."""
    return arrays * max(shape.layers, 1) * tokens * max(shape.width, 1) * FLOAT_BYTES


class RequestOverBudget(ViewError):
    """A request priced above the per-request budget; `str(exc)` names the limit and its setting."""

    alert = "warning"


def _mb(n: int) -> str:
    mb = n / 2**20
    return f"{mb:,.0f} MB" if mb >= 10 else f"{mb:.2g} MB"


def describe(price: Price) -> str:
    """'~7.2 s and ~610 MB' of a price."""
    return f"~{price.seconds:.1f} s and ~{_mb(price.bytes)}"


def limits(streamed: bool = False, device: str = "cpu") -> str:
    """The budget, as said in messages: "this server's budget per request: 5 s of CPU, 400 MB, a result of 128 MB;
    settings EXPLORER_REQUEST_SECONDS, EXPLORER_REQUEST_MB and EXPLORER_SESSION_RESULTS_MB" (streamed: the seconds
    of work refined in place, EXPLORER_STREAMED_SECONDS; device: whose seconds, "5 s of GPU" on cuda)."""
    seconds, name = (streamed_seconds(), "EXPLORER_STREAMED_SECONDS") if streamed else \
        (request_seconds(), "EXPLORER_REQUEST_SECONDS")
    unit = "CPU" if device == "cpu" else "GPU" if device == "cuda" else device
    return (f"this server's budget per request: {seconds:g} s of {unit}"
            f"{' for work refined in place' if streamed else ''}"
            f", {_mb(request_bytes())}, a result of {_mb(session_result_bytes())}; settings {name}, "
            "EXPLORER_REQUEST_MB and EXPLORER_SESSION_RESULTS_MB")


def check(price: Price, what: str, advice: str = "") -> None:
    """Raise RequestOverBudget (naming `what`, its price and the limits) unless `price` is within the budget."""
    if not price.within():
        raise RequestOverBudget(f"{what} would take {describe(price)}, over {limits(price.streamed, price.device)}."
                                + (f" {advice}" if advice else ""))


class TokenCap(int):
    """A number of tokens a view reads at most, with why (shown in the note of a cut text)."""

    why: str

    def __new__(cls, value: int, why: str) -> TokenCap:
        cap = super().__new__(cls, value)
        cap.why = why
        return cap


def cap_tokens(model: object, most: int, price: Callable[[Shape, int], Price] | None = None) -> TokenCap:
    """fit_tokens for `model` (its Shape read once): `price(shape, t)`, by default one forward that keeps a few
    (L, T, d) arrays (hidden states of every layer)."""
    shape = shape_of(model)
    priced = price or (lambda s, t: forward(s, t, kept=layer_bytes(s, t, 2), transient=layer_bytes(s, t, 2)))
    return fit_tokens(lambda t: priced(shape, t), most)


def fit_tokens(price: Callable[[int], Price], most: int) -> TokenCap:
    """The largest number of tokens t ≤ `most` whose `price(t)` is within the budget (at least 1), as a TokenCap
    that says why when it is below `most`."""
    if price(most).within():
        return TokenCap(most, "this view's limit")
    low, high = 1, most
    while low < high:
        mid = (low + high + 1) // 2
        if price(mid).within():
            low = mid
        else:
            high = mid - 1
    over = price(most)
    return TokenCap(low, limits(over.streamed, over.device))
