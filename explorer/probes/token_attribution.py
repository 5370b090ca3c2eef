"""Token attribution: how much each input token's embedding moves the logit of an output token.

For an output token y at position p, f(E) = logit_p,y(E) with E (N, C) the input token embeddings (as the model
adds them; position vectors are added by the model itself and are not attributed), and B (N, C) a baseline:
  gradient × input   a_i = Σ_c ∂f/∂E_ic · E_ic
  integrated grads   a_i = Σ_c (E_ic − B_ic) · ∫₀¹ ∂f/∂E_ic (B + α (E − B)) dα  (Sundararajan et al. 2017)
Completeness: Σ_i a_i = f(E) − f(B) exactly; the integral is computed, so the trace keeps each output's error
|Σ_i a_i − (f(E) − f(B))|, absolute and relative to |f(E) − f(B)|.

The baseline is the zero embedding (as in the paper) for models that add position vectors to the token embeddings
and for recurrent models. A model that adds nothing to them (rotary, ALiBi or relative positions: Llama, SmolLM2,
T5, …) cannot start from an input whose positions are all equal: the zero input is degenerate (every RMSNorm
divides ~0 by √ε; f along the path from it changes over some 40 orders of magnitude of α), and any other constant
input makes every position a copy of the first, which these models use as their attention sink (SmolLM2: massive
activations at every position; along the path each position loses them at its own α, and f jumps by tens of
logits within 10⁻³ of α). Their baseline keeps the first input as it is and puts the mean input embedding (the
average over the vocabulary's ordinary tokens) at every later position: the path is smooth, and the first input's
own share is not measured (it is `kept`).

The rule: adaptive composite Gauss–Legendre. The path α ∈ [0, 1] is cut into START equal intervals of NODES
Gauss–Legendre points each; each interval's quadrature of df/dα = Σ_i a_i is checked against the exact change
f(b) − f(a) (forward values at interval ends are cheap), and, output by output, the intervals with the largest
error are halved until the completeness error is within TOLERANCE of |f(E) − f(B)| (within FINE while the output
has spent fewer than CHEAP evaluations), or the output has spent `steps` gradient evaluations.

`attribution(loaded, text, target="", steps=STEPS)` -> AttributionTrace:
  inputs (N,), segment (N,) 0 (1: the decoder inputs of an encoder-decoder); outputs (M,) the tokens attributed:
  for a decoder or RNN LM every next token of the text and the model's own prediction after it; for an
  encoder-decoder each output token (the model's greedy output, or `target`) onto the source and the previous
  targets; position (M,) the logit row read; gradient_x_input, integrated (M, N) (0 where an input cannot reach
  that output); logit, baseline_logit, completeness, relative (M,); points (M,) Gauss–Legendre points of each
  output's final rule, evaluations (M,) gradient evaluations spent on it; edges (M,) its intervals' ends; kept:
  the inputs the baseline keeps (not attributed).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence, cast

import numpy as np
import torch

from explorer.adapters import generation as G
from explorer.adapters.base import Adapter, Unsupported
from explorer.adapters.protocols import Differentiates, Loaded
from explorer.adapters.text import Encoded, no_text
from explorer.runtime import budget
from explorer.runtime.device import is_large
from explorer.runtime.errors import ViewError
from explorer.runtime.prefix_memo import prefix_memo

STEPS = 256  # the most gradient evaluations an output may spend
MAX_STEPS = 1024
TOLERANCE = 0.01  # an output is done when |Σ a_i − (f(E) − f(B))| ≤ 1 % of |f(E) − f(B)| …
FINE, CHEAP = 0.001, 32  # … or 0.1 % while it has spent fewer than 32 evaluations (the old rule's cost)
NODES = 2  # Gauss–Legendre points per interval
START = 8  # equal intervals to start from
MIN_WIDTH = 2.0 ** -16  # narrower intervals are not halved (float32 noise in f)
CHUNK = 32  # path points per forward pass at most (fewer where their activations would not fit: `chunk`)
MAX_INPUTS = 64
MAX_OUTPUTS = 40
RULE = "adaptive composite Gauss–Legendre"


class AttributionError(ViewError, ValueError):
    """The model cannot be attributed (no output layer, empty input); str() is for the user."""

    alert = "info"


@dataclass(frozen=True)
class AttributionTrace:
    """N inputs attributed from M outputs (the module docstring has the definitions).

    inputs, segment (N,): the tokens as fed, 0 (1: an encoder-decoder's decoder inputs); outputs, position (M,): the
    tokens attributed and the logit row read; gradient_x_input, integrated (M, N): the attributions (0 where the input
    cannot reach that output); logit, baseline_logit (M,): f(E), f(B); edges: per output, its intervals' ends."""

    model_id: str
    inputs: tuple[str, ...]
    segment: tuple[int, ...]
    outputs: tuple[str, ...]
    position: tuple[int, ...]
    gradient_x_input: np.ndarray
    integrated: np.ndarray
    logit: np.ndarray
    baseline_logit: np.ndarray
    completeness: np.ndarray  # (M,) |Σ_i a_i − (logit − baseline_logit)|
    relative: np.ndarray  # (M,) completeness / |logit − baseline_logit|
    points: np.ndarray  # (M,) Gauss–Legendre points of the final rule
    evaluations: np.ndarray  # (M,) gradient evaluations spent (halved intervals' points included)
    edges: tuple[tuple[float, ...], ...]  # (M,) the ends of each output's intervals, 0 … 1
    steps: int  # the budget of gradient evaluations per output
    baseline: str
    predicted: bool  # the last output is the model's own next-token prediction, not a token of the text
    reach: tuple[int, ...] = ()  # (M,) how many inputs (the first ones) can influence each output
    notes: tuple[str, ...] = ()
    kept: tuple[int, ...] = ()  # the inputs the baseline keeps as they are (their integrated gradients are 0)
    rule: str = RULE
    tolerance: float = TOLERANCE
    provisional: str = ""  # what is not final yet, while it is computed ("": the whole result)
    capped: bool = False  # `steps` is what the per-request budget allows, fewer than asked (a note says so)

    @property
    def max_completeness(self) -> float:
        return float(self.completeness.max()) if self.completeness.size else 0.0

    @property
    def max_relative(self) -> float:
        return float(self.relative.max()) if self.relative.size else 0.0

    @property
    def integrating(self) -> bool:
        """Only gradient × input is known yet (a trace handed to progress before the integration's first round)."""
        return bool(np.isnan(self.baseline_logit).any())

    @property
    def unconverged(self) -> tuple[int, ...]:
        """The outputs whose relative completeness error is above the tolerance."""
        return tuple(int(i) for i in np.flatnonzero(self.relative > self.tolerance))


# ---------------------------------------------------------------------------------------------------- the rule
@dataclass(frozen=True)
class _Row:
    """One output to attribute: its logit row, token, and how many inputs (the first ones) it reads."""

    position: int
    target: int
    reach: int


@dataclass(frozen=True)
class _Result:
    gxi: np.ndarray  # (reach,)
    ig: np.ndarray  # (reach,)
    value: float  # f(E)
    base: float  # f(B)
    reach: int
    points: int
    evaluations: int
    edges: tuple[float, ...]


@dataclass(frozen=True)
class _Item:
    """One path point of a batch: the inputs it reads (reach), its α, the gradient item it is (-1: none) and the
    value items it answers."""

    reach: int
    alpha: float
    grad: int
    values: list[int]


Logits = Callable[..., torch.Tensor]  # (n, L, C) path points [, keep: positions] -> (n, L or len(keep), V) logits


def gauss_legendre(k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k Gauss–Legendre points and weights on [0, 1] (numpy's on [−1, 1], as Captum maps them)."""
    x, w = np.polynomial.legendre.leggauss(k)
    return (x + 1) / 2, w / 2


class _Path:
    """The straight path B + α (E − B) and the rows read along it. One pass evaluates a batch of items: gradient
    items (row, α) give that row's ∂f/∂x at α, value items give f alone (the interval ends and midpoints); a forward
    at an α serves every value item that asks for it. Items run in chunks of the inputs their rows read (the longest
    reach in the chunk), one backward per chunk: the items are independent and each contributes only its own row's
    logit. `positions`: the logits function computes only the positions its rows read (a decoder's output layer at
    those positions), else every position."""

    def __init__(self, logits: Logits, E: torch.Tensor, B: torch.Tensor, rows: list[_Row],
                 positions: bool = False, chunk: int = CHUNK) -> None:
        self.logits, self.E, self.B, self.D, self.rows, self.positions = logits, E, B, E - B, rows, positions
        self.chunk = max(1, int(chunk))

    def _points(self, alphas: list[float], L: int) -> torch.Tensor:
        alpha = torch.tensor(alphas, dtype=self.E.dtype, device=self.E.device)
        return self.B[None, :L] + alpha[:, None, None] * self.D[None, :L]

    def evaluate(self, grads: list[tuple[int, float]], values: Sequence[tuple[int, float]] = ()
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """((n, N) (E − B)_i · ∇_i f and (n, N) E_i · ∇_i f at each gradient item's α, (m,) f at each value item's)."""
        N, dev = self.E.shape[0], self.E.device
        along, times, vals = np.zeros((len(grads), N)), np.zeros((len(grads), N)), np.zeros(len(values))
        by_alpha: dict[tuple[int, float], list[int]] = {}  # one value per (reach, α): rows of one reach share it
        for j, (r, a) in enumerate(values):
            by_alpha.setdefault((self.rows[r].reach, float(a)), []).append(j)
        # a value at the α (and reach) of a gradient item is read from that item's forward
        batch = [_Item(self.rows[r].reach, a, i, by_alpha.pop((self.rows[r].reach, float(a)), []))
                 for i, (r, a) in enumerate(grads)]
        batch += [_Item(reach, a, -1, js) for (reach, a), js in by_alpha.items()]
        batch.sort(key=lambda item: item.reach)
        for s in range(0, len(batch), self.chunk):
            chunk = batch[s:s + self.chunk]
            L = max(item.reach for item in chunk)
            read = [(c, self.rows[grads[item.grad][0]]) for c, item in enumerate(chunk) if item.grad >= 0]
            valued = [(c, j, self.rows[values[j][0]]) for c, item in enumerate(chunk) for j in item.values]
            wanted = sorted({row.position for _, row in read} | {row.position for _, _, row in valued})
            column = {p: c for c, p in enumerate(wanted)} if self.positions else {p: p for p in wanted}
            x = self._points([item.alpha for item in chunk], L)
            with torch.enable_grad() if read else torch.no_grad():
                if read:
                    x.requires_grad_(True)
                logits = self.logits(x, keep=wanted) if self.positions else self.logits(x)
                if read:
                    at = torch.tensor([c for c, _ in read], device=dev)
                    pos = torch.tensor([column[row.position] for _, row in read], device=dev)
                    tgt = torch.tensor([row.target for _, row in read], device=dev)
                    (g,) = torch.autograd.grad(logits[at, pos, tgt].sum(), x)
                    for c, _ in read:
                        i = chunk[c].grad
                        along[i, :L] = (g[c] * self.D[:L]).sum(-1).double().cpu().numpy()
                        times[i, :L] = (g[c] * self.E[:L]).sum(-1).double().cpu().numpy()
            for c, j, row in valued:
                vals[j] = float(logits[c, column[row.position], row.target].detach())
        return along, times, vals


def _worst(part: dict, change: float, spent: int, steps: int, k: int) -> list[tuple[float, float]]:
    """The intervals of one row to halve next (none: the row is done). part: (a, b) -> [f(a), f(b), quadrature (N,)].
    Each interval's error is its quadrature's sum minus the exact f(b) − f(a); they add up to the completeness
    error. Halved: the worst intervals until they hold a fifth of the row's absolute error, within the budget."""
    err = {iv: v[2].sum() - (v[1] - v[0]) for iv, v in part.items()}
    goal = TOLERANCE if spent >= CHEAP else FINE
    if abs(sum(err.values())) <= goal * abs(change):
        return []
    worst = sorted((iv for iv in err if iv[1] - iv[0] >= 2 * MIN_WIDTH), key=lambda iv: -abs(err[iv]))
    total, acc, out = sum(abs(e) for e in err.values()), 0.0, []
    for iv in worst[:(steps - spent) // (2 * k)]:
        out.append(iv)
        acc += abs(err[iv])
        if acc >= 0.2 * total:
            break
    return out


Rounds = Callable[[list[_Result], float], None]  # on_round(each row's result so far, fraction done)


def _integrate(path: _Path, steps: int, on_round: Rounds | None = None) -> list[_Result]:
    """Integrated gradients (and gradient × input) of every row of `path` by the adaptive rule (module docstring).

    Round 0 evaluates every row's gradient at the input itself (gradient × input) and f(E). Each row keeps its own
    intervals; every later round evaluates, in one batch, every row's new Gauss–Legendre points and the values f it
    needs at the ends of its new intervals (the start's edges, then the halved intervals' midpoints); then each
    unfinished row halves its worst intervals. A row's result depends on that row alone: its prefix, its token and
    `steps`. on_round: called after each round with every row's result so far (after round 0: gradient × input,
    no integrated gradients yet: `base` is NaN) and the fraction of the work done."""
    R, N = len(path.rows), path.E.shape[0]
    k = min(NODES, steps)
    x, w = gauss_legendre(k)
    n0 = max(1, min(START, steps // k))
    e0 = np.linspace(0.0, 1.0, n0 + 1)
    f: dict[tuple[int, float], float] = {}  # (row, α) -> f
    parts: list[dict[tuple[float, float], np.ndarray | None]] = []
    for r, row in enumerate(path.rows):
        if bool(path.D[:row.reach].any()):
            parts.append({(float(e0[j]), float(e0[j + 1])): None for j in range(n0)})
        else:  # every input it reads is the baseline's: nothing to attribute, f(B) = f(E)
            parts.append({(0.0, 1.0): np.zeros(N)})
    ends = [(r, 1.0) for r in range(R)]
    _, gxi, vals = path.evaluate(ends, ends)  # round 0: the gradient at the input itself, and f(E)
    f.update(zip(ends, (float(v) for v in vals)))
    for r in range(R):
        if parts[r].get((0.0, 1.0)) is not None:
            f[(r, 0.0)] = f[(r, 1.0)]
    spent, open_rows = [0] * R, set(range(R))  # spent: integrated gradients' evaluations
    first: dict[int, float] = {}  # each row's relative completeness error after its first round
    shown = 0.0  # the fraction done last reported
    if on_round is not None:
        on_round(_so_far(path, gxi, parts, f, spent, k), 0.0)
    wanted = [(r, float(a)) for r in range(R) if parts[r].get((0.0, 1.0)) is None for a in e0[:-1]]
    while True:
        need = [(r, iv) for r in range(R) for iv, q in parts[r].items() if q is None]
        items = [(r, a + (b - a) * xj) for r, (a, b) in need for xj in x]
        along, _, vals = path.evaluate(items, wanted)
        f.update(zip(wanted, (float(v) for v in vals)))
        for i, (r, (a, b)) in enumerate(need):
            parts[r][(a, b)] = (b - a) * (w[:, None] * along[i * k:(i + 1) * k]).sum(0)
            spent[r] += k
        halve: list[tuple[int, tuple[float, float]]] = []
        done: list[float] = []
        for r in sorted(open_rows):
            change = f[(r, 1.0)] - f[(r, 0.0)]
            part = {iv: [f[(r, iv[0])], f[(r, iv[1])], q] for iv, q in parts[r].items()}
            worst = _worst(part, change, spent[r], steps, k)
            halve += [(r, iv) for iv in worst]
            if not worst:
                open_rows.discard(r)
            else:  # every quadrature of the row is known after the round
                quadrature = sum(float(np.sum(q)) for q in parts[r].values() if q is not None)
                error = abs(quadrature - change) / max(abs(change), 1e-30)
                first.setdefault(r, error)
                done.append(_fraction(first[r], error))
        if on_round is not None and halve:  # the error of a signed sum can rise again: the bar does not go back
            shown = max(shown, (R - len(done) + sum(done)) / R)
            on_round(_so_far(path, gxi, parts, f, spent, k), shown)
        if not halve:
            break
        wanted = [(r, (a + b) / 2) for r, (a, b) in halve]
        for r, (a, b) in halve:
            del parts[r][(a, b)]
            parts[r][(a, (a + b) / 2)] = parts[r][((a + b) / 2, b)] = None
    return _so_far(path, gxi, parts, f, spent, k)


def _fraction(first: float, error: float) -> float:
    """How far an output's completeness error has come from its first round's (`first`) to the goal, on a log
    scale, below 1 (it is not done)."""
    if first <= TOLERANCE or error >= first:
        return 0.0
    return min(0.95, float(np.log(first / error) / np.log(first / TOLERANCE)))


def _so_far(path: _Path, gxi: np.ndarray, parts: list[dict], f: dict[tuple[int, float], float], spent: list[int],
            k: int) -> list[_Result]:
    """Every row's result from what is evaluated: integrated gradients summed over its intervals whose quadrature
    is known (none before round 1: zeros, and f(B) NaN)."""
    out = []
    for r, row in enumerate(path.rows):
        ivs = sorted(parts[r])
        known = [q for q in (parts[r][iv] for iv in ivs) if q is not None]
        ig = np.sum(known, axis=0) if known else np.zeros(gxi.shape[1])
        edges = tuple(float(a) for a, _ in ivs) + (1.0,)
        out.append(_Result(gxi[r, :row.reach].copy(), ig[:row.reach].copy(), f[(r, 1.0)],
                           f.get((r, 0.0), float("nan")) if known else float("nan"), row.reach,
                           k * len(known) if spent[r] else 0, spent[r], edges))
    return out


# ------------------------------------------------------------------------------------------------ the baseline
def _mean_embedding(adapter: Differentiates, side: str) -> torch.Tensor:
    """(C,) the mean of the embeddings the model adds for the ordinary (not special) tokens of `side`'s table."""
    cache = adapter.__dict__.setdefault("_mean_embedding", {})
    if side not in cache:
        tables = adapter.tables()
        table = tables.get(side) or tables["input"]
        ids = torch.tensor([i for i, s in enumerate(table.special) if not s], device=adapter.device)
        with torch.no_grad():
            total = sum((adapter.embed_ids(chunk, side=side).double().sum(0) for chunk in ids.split(4096)),
                        torch.zeros((), dtype=torch.float64, device=adapter.device))
        cache[side] = (total / len(ids)).float()
    return cache[side]


def baseline_inputs(adapter: Differentiates, E: torch.Tensor,
                    starts: tuple[int, ...] = (0,)) -> tuple[torch.Tensor, str, tuple]:
    """(N, C) the baseline of every input, its name, and the inputs it keeps (module docstring). starts: where each
    segment begins (an encoder-decoder's decoder inputs are a second segment, with their own table)."""
    try:
        kind = adapter.position_scheme().kind
    except Unsupported:
        kind = "none"
    if kind not in ("rotary", "alibi", "relative"):
        return torch.zeros_like(E), "the zero embedding", ()
    B = torch.empty_like(E)
    for s, (a, b) in enumerate(zip(starts, (*starts[1:], E.shape[0]))):
        B[a:b] = _mean_embedding(adapter, "input" if s == 0 else "target").to(E)
        B[a] = E[a]
    first = "first input" if len(starts) == 1 else "first input of each part"
    return B, f"the mean input embedding after the {first} (kept as it is)", tuple(starts)


# ------------------------------------------------------------------------------------------------- the price
def chunk(shape: budget.Shape, reach: int) -> int:
    """Path points per forward and backward pass: CHUNK, or fewer where their activations (kept for the backward,
    `reach` tokens each) would take more than the per-request memory (SmolLM2, 64 tokens: 2 points; it took 4.4 GB
    for 32)."""
    one = budget.forward(shape, reach, backward="inputs", read=1).bytes
    return int(max(1, min(CHUNK, budget.request_bytes() // max(one, 1))))


def price(shape: budget.Shape, reaches: Sequence[int], steps: int) -> budget.Price:
    """The price of attributing outputs that read `reaches` inputs with at most `steps` gradient evaluations each
    (and one for gradient × input): forward and backward passes to the inputs of the model's output at one position
    (the value forwards at interval ends, about a quarter as many, are within INPUT_GRADIENT's margin), in batches
    of `chunk` points; its peak, one batch of the longest reach."""
    if not reaches:
        return budget.Price(0.0, 0)
    longest = max(reaches)
    per = chunk(shape, longest)
    seconds = sum(budget.forward(shape, t, passes=steps + 1, backward="inputs", read=1,
                                 calls=-(-(steps + 1) // per)).seconds for t in reaches)
    peak = budget.forward(shape, longest, rows=per, backward="inputs", read=1).bytes
    # gradient × input at once, then rounds: refined in place
    return budget.Price(seconds, peak, streamed=True, device=shape.device)


def within_budget(shape: budget.Shape, reaches: Sequence[int], steps: int) -> tuple[int, str]:
    """(steps, note): the gradient evaluations per output that fit in the per-request budget, at most `steps`, and
    the note saying so when they are fewer ("" when not). Raises RequestOverBudget when not even one fits."""
    fit = budget.fit_tokens(lambda s: price(shape, reaches, s), steps)
    if fit == steps:
        return steps, ""
    if not price(shape, reaches, fit).within():
        budget.check(price(shape, reaches, 1), f"Attributing {len(reaches)} output(s) of this {max(reaches):,}-token "
                     "text", "Shorten the sentence, or attribute the model's prediction only.")
    return int(fit), (f"Integrated gradients with up to {steps} gradient evaluations for each of {len(reaches)} "
                      f"output(s) would take {budget.describe(price(shape, reaches, steps))}, over "
                      f"{budget.limits(True, shape.device)}: "
                      f"at most {int(fit)} per output here; the completeness error says how far they get.")


# ------------------------------------------------------------------------------------------------- the probe
def in_float32(logits_from_embeddings: Callable[..., torch.Tensor], dtype: torch.dtype) -> Callable[..., torch.Tensor]:
    """A model's logits_from_embeddings(embeds (B, N, C), target=None, keep=None) -> (B, N', V) taking the probe's
    float32 embeddings and returning float32 logits, for a model whose weights are in `dtype` (bfloat16 or float16
    on a GPU: the embeddings enter it in that dtype; gradients flow back through the cast)."""
    if dtype == torch.float32:
        return logits_from_embeddings

    def logits(embeds: torch.Tensor, target: torch.Tensor | None = None, **kw: Any) -> torch.Tensor:
        return logits_from_embeddings(embeds.to(dtype), target.to(dtype) if target is not None else None,
                                      **kw).float()
    return logits


def _causal_rows(adapter: Differentiates, E: torch.Tensor, B: torch.Tensor, ids: list[int], positions: list[int],
                 targets: list[int], steps: int, on_round: Rounds | None = None, per: int = CHUNK,
                 dtype: torch.dtype = torch.float32) -> list[_Result]:
    """_integrate of the outputs at `positions` (their next tokens `targets`) of a left-to-right model, E (N, C)
    (float32; the model's weights in `dtype`).

    The row at position p reads only the inputs 0 … p, so it is kept in the model's prefix memo under those ids (with
    its target and the steps) and only the rows whose prefix changed are computed: typing one more word costs one or
    two rows, not N. A model that does not generate (it may read both ways) has no memo. on_round: as for
    _integrate, with every row (the memo's too).
    """
    memo = prefix_memo(adapter, "attribution") if adapter.can_generate else None
    keys = [(RULE, steps, tuple(ids[:p + 1]), t) for p, t in zip(positions, targets)]
    rows = [memo.get(key) if memo is not None else None for key in keys]
    todo = [i for i, row in enumerate(rows) if row is None]
    if todo:
        path = _Path(in_float32(adapter.logits_from_embeddings, dtype), E, B,
                     [_Row(positions[i], targets[i], positions[i] + 1) for i in todo], positions=True, chunk=per)

        def merged(results: list[_Result], fraction: float) -> None:
            every = list(rows)
            for i, result in zip(todo, results):
                every[i] = result
            on_round(cast(list[_Result], every), (len(rows) - len(todo) + fraction * len(todo)) / len(rows))  # type: ignore[misc]

        for i, result in zip(todo, _integrate(path, steps, merged if on_round is not None else None)):
            rows[i] = result
            if memo is not None:
                memo.put(keys[i], result)
    return rows


def default_outputs(loaded: Loaded) -> str:
    """The outputs the view attributes when the URL does not say: the prediction alone for a language model above
    explorer.runtime.device.LARGE_MODEL parameters (each row costs tens of its forward and backward passes), else
    all."""
    return "prediction" if is_large(getattr(loaded, "model", None)) and not loaded.adapter.is_encoder_decoder \
        else "all"


Progress = Callable[[float, str, AttributionTrace], None]  # progress(fraction, what, the trace so far)


def attribution(loaded: Loaded, text: str, target: str = "", steps: int = STEPS, outputs: str = "all",
                progress: Progress | None = None) -> AttributionTrace:
    """See the module docstring. outputs (decoders and RNN LMs): "all" (every next token and the prediction) or
    "prediction" (the model's own next token only). progress: called after each round of the integration with the
    trace so far (`provisional` says what is not final): gradient × input first, then integrated gradients as their
    completeness error falls. Raises AttributionError."""
    adapter, mid = loaded.adapter, str(getattr(loaded, "id", "model"))
    steps = int(min(max(int(steps), 1), MAX_STEPS))
    enc = adapter.encode(text, max_tokens=MAX_INPUTS)
    if not enc.ids:
        raise AttributionError(" ".join(enc.notes) or "Type a sentence.")
    notes = list(enc.notes)
    dev = adapter.device
    ids = torch.tensor(list(enc.ids), dtype=torch.long, device=dev)
    try:
        if adapter.is_encoder_decoder:
            return _seq2seq(adapter, budget.shape_of(loaded.model), mid, enc, ids, target, steps, notes, progress)
        raw = adapter.embed_ids(ids).detach()
        E, dtype = raw.float(), raw.dtype
        with torch.no_grad():
            own = in_float32(adapter.logits_from_embeddings, dtype)(E[None])[0]
        B, baseline, kept = baseline_inputs(adapter, E)
    except Unsupported as exc:
        raise AttributionError(str(exc)) from None
    N = len(ids)
    positions = list(range(max(0, N - 1 - MAX_OUTPUTS), N)) if outputs != "prediction" else [N - 1]
    if outputs != "prediction" and len(positions) < N:
        notes.append(f"Only the last {MAX_OUTPUTS} output positions are attributed.")
    targets = [int(ids[p + 1]) for p in positions[:-1]] + [int(own[-1].argmax())]
    shown = tuple(enc.tokens[p + 1] for p in positions[:-1]) + tuple(adapter.token_strings(targets[-1:]))
    shape = budget.shape_of(loaded.model)
    steps, capped = within_budget(shape, [p + 1 for p in positions], steps)
    notes += [capped] if capped else []

    def trace(rows: list[_Result], provisional: str = "") -> AttributionTrace:
        return _trace(mid, tuple(enc.tokens), (0,) * N, shown, tuple(positions), rows, steps, baseline, kept, True,
                      notes, provisional, bool(capped))

    rows = _causal_rows(adapter, E, B, list(enc.ids), positions, targets, steps, _reporter(trace, progress),
                        chunk(shape, positions[-1] + 1), dtype)
    return trace(rows)


def _reporter(trace: Callable[..., AttributionTrace], progress: Progress | None) -> Rounds | None:
    """The on_round of _integrate that hands `progress` the trace so far, saying what is not final."""
    if progress is None:
        return None

    def on_round(rows: list[_Result], fraction: float) -> None:
        partial = trace(rows, "gradient × input; integrated gradients being computed")
        if partial.integrating:
            what = partial.provisional
        else:
            what = (f"integrated gradients so far: completeness error up to {partial.max_relative:.1%} of the "
                    f"change (goal {TOLERANCE:.0%}), {int(partial.evaluations.sum())} gradient evaluations")
            partial = replace(partial, provisional=what)
        progress(fraction, what, partial)

    return on_round


def _seq2seq(adapter: Adapter, shape: budget.Shape, mid: str, enc: Encoded, ids: torch.Tensor, target: str,
             steps: int, notes: list[str], progress: Progress | None = None) -> AttributionTrace:
    dev = adapter.device
    if no_text(target or "") is None:
        out = adapter.encode(target, side="target")
        notes += list(out.notes)
        out_ids = list(out.ids)
    else:
        start = torch.tensor([adapter.decoder_start], dtype=torch.long, device=dev)
        out_ids = G.sample(adapter, ids[None], start, G.Strategy("greedy"), MAX_OUTPUTS)[0][0]
    if not out_ids:
        raise AttributionError("The output is empty: type a target or a source the model can translate.")
    dec = torch.tensor([*adapter.decoder_start, *out_ids[:-1]], dtype=torch.long, device=dev)
    S, T = len(ids), len(dec)
    raw = torch.cat([adapter.embed_ids(ids).detach(), adapter.embed_ids(dec, side="target").detach()])
    E, model_logits = raw.float(), in_float32(adapter.logits_from_embeddings, raw.dtype)
    B, baseline, kept = baseline_inputs(adapter, E, (0, S))
    steps, capped = within_budget(shape, [S + T] * T, steps)  # each point runs the whole decoder
    notes += [capped] if capped else []

    def logits(x: torch.Tensor) -> torch.Tensor:
        return model_logits(x[:, :S], x[:, S:])

    inputs = tuple(enc.tokens) + tuple(adapter.sequence_strings(dec.tolist()))

    def trace(rows: list[_Result], provisional: str = "") -> AttributionTrace:
        return _trace(mid, inputs, (0,) * S + (1,) * T, tuple(adapter.sequence_strings(out_ids)), tuple(range(T)),
                      rows, steps, baseline, kept, False, notes, provisional, bool(capped))

    path = _Path(logits, E, B, [_Row(t, y, S + t + 1) for t, y in enumerate(out_ids)], chunk=chunk(shape, S + T))
    return trace(_integrate(path, steps, _reporter(trace, progress)))


def _trace(mid: str, inputs: tuple[str, ...], segment: tuple[int, ...], outputs: tuple[str, ...],
           positions: tuple[int, ...], rows: list[_Result], steps: int, baseline: str, kept: tuple[int, ...],
           predicted: bool, notes: list[str], provisional: str = "", capped: bool = False) -> AttributionTrace:
    N = len(inputs)
    gxi = np.stack([np.pad(r.gxi, (0, N - r.reach)) for r in rows]).astype(np.float32)
    ig = np.stack([np.pad(r.ig, (0, N - r.reach)) for r in rows])
    value, base = np.array([r.value for r in rows]), np.array([r.base for r in rows])
    error = np.abs(ig.sum(1) - (value - base))
    change = np.abs(value - base)
    relative = np.divide(error, change, out=np.where(error > 0, np.inf, 0.0), where=change > 0)
    return AttributionTrace(mid, inputs, segment, outputs, positions, gxi, ig.astype(np.float32), value, base, error,
                            relative, np.array([r.points for r in rows]), np.array([r.evaluations for r in rows]),
                            tuple(r.edges for r in rows), steps, baseline, predicted,
                            tuple(r.reach for r in rows), tuple(dict.fromkeys(notes)), kept,
                            f"{RULE} ({min(NODES, steps)}-point rule on each interval)", TOLERANCE, provisional,
                            capped)
