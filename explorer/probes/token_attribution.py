"""Token attribution: how much each input token's embedding moves the log-probability (or the logit) of an output.

For an output token y at position p, f(E) = log p(y | E) = log softmax(logits_p(E))_y (or the logit logit_p,y(E),
`of="logit"`) with E (N, C) the input token embeddings (as the model adds them; position vectors are added by the
model itself and are not attributed), and B (N, C) a baseline:
  gradient × input   a_i = Σ_c ∂f/∂E_ic · E_ic
  integrated grads   a_i = Σ_c (E_ic − B_ic) · ∫₀¹ ∂f/∂E_ic (B + α (E − B)) dα  (Sundararajan et al. 2017)
Completeness: Σ_i a_i = f(E) − f(B) exactly; the integral is computed, so the trace keeps each output's error
|Σ_i a_i − (f(E) − f(B))|, absolute and relative to |f(E) − f(B)|. The log-probability is the default: a logit also
moves with what every other logit does (a softmax ignores a shift common to all), so along the path a large model's
logit swings by several times its end-to-end change while the log-probability rarely swings by twice its own, and
the integral to the same relative error takes several times fewer gradient evaluations (SmolLM2: ~120 → ~30).

The baseline is the zero embedding (as in the paper) for models that add position vectors to the token embeddings
and for recurrent models. A model that adds nothing to them (rotary, ALiBi or relative positions: Llama, SmolLM2,
T5, …) cannot start from an input whose positions are all equal: the zero input is degenerate (every RMSNorm
divides ~0 by √ε; f along the path from it changes over some 40 orders of magnitude of α), and any other constant
input makes every position a copy of the first, which these models use as their attention sink (SmolLM2: massive
activations at every position; along the path each position loses them at its own α, and f jumps by tens of
logits within 10⁻³ of α). Their baseline keeps the first input as it is and puts the mean input embedding (the
average over the vocabulary's ordinary tokens) at every later position: the path is smooth, and the first input's
own share is not measured (it is `kept`).

The rule: adaptive composite Simpson. The path α ∈ [0, 1] is cut into START equal intervals; Simpson's rule on
[a, b] reads the gradient at a, (a + b)/2 and b, and each gradient evaluation's forward pass also gives f there, so
each interval's quadrature of df/dα = Σ_i a_i is checked against the exact change f(b) − f(a) at no extra cost
(α = 1 is gradient × input's own evaluation). Output by output, the intervals with the largest error are halved —
the halves reuse the three points, two new gradient evaluations each — until the completeness error is within
TOLERANCE of |f(E) − f(B)|, or the output has spent `steps` gradient evaluations (α = 1 not counted).

`attribution(loaded, text, target="", steps=STEPS, of="log-probability")` -> AttributionTrace:
  inputs (N,), segment (N,) 0 (1: the decoder inputs of an encoder-decoder); outputs (M,) the tokens attributed:
  for a decoder or RNN LM every next token of the text and the model's own prediction after it; for an
  encoder-decoder each output token (the model's greedy output, or `target`) onto the source and the previous
  targets; position (M,) the logit row read; gradient_x_input, integrated (M, N) (0 where an input cannot reach
  that output); value, baseline_value, completeness, relative (M,): f(E), f(B) and the error; points (M,) the
  points of each output's final rule, evaluations (M,) gradient evaluations spent on it; edges (M,) its intervals'
  ends; kept: the inputs the baseline keeps (not attributed).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Sequence, cast

import numpy as np
import torch

from explorer.adapters import generation as G
from explorer.adapters.base import Unsupported
from explorer.adapters.task_head import not_a_language_model
from explorer.adapters.protocols import Differentiates, Loaded
from explorer.adapters.text import Encoded, no_text, unknown_word_id, without_unknown
from explorer.adapters.lrp import Relevance, lrp
from explorer.metrics.faithfulness import first_answer, ranking
from explorer.runtime import budget
from explorer.runtime.device import is_large
from explorer.runtime.errors import ViewError
from explorer.runtime import model_state
from explorer.runtime.prefix_memo import PrefixMemo, prefix_memo

STEPS = 256  # the most gradient evaluations an output may spend
MIN_STEPS, MAX_STEPS = 2, 1024  # Simpson's rule on [0, 1] reads α = 0 and ½ (and 1: gradient × input's)
TOLERANCE = 0.01  # an output is done when |Σ a_i − (f(E) − f(B))| ≤ 1 % of |f(E) − f(B)|
START = 8  # equal intervals to start from
SHARE = 0.35  # each round halves the worst intervals until they hold this share of the row's absolute error
OF = ("log-probability", "logit")  # what is attributed
MIN_WIDTH = 2.0 ** -16  # narrower intervals are not halved (float32 noise in f)
CHUNK = 32  # path points per forward pass at most (fewer where their activations would not fit: `chunk`)
MAX_INPUTS = 64
MAX_OUTPUTS = 40
RULE = "adaptive composite Simpson"


class AttributionError(ViewError, ValueError):
    """The model cannot be attributed (no output layer, empty input); str() is for the user."""

    alert = "info"


@dataclass(frozen=True)
class AttributionTrace:
    """N inputs attributed from M outputs (the module docstring has the definitions).

    inputs, segment (N,): the tokens as fed, 0 (1: an encoder-decoder's decoder inputs); outputs, position (M,): the
    tokens attributed and the logit row read; gradient_x_input, integrated (M, N): the attributions (0 where the input
    cannot reach that output); value, baseline_value (M,): f(E), f(B), f being `of` (the log-probability or the
    logit of the output token); edges: per output, its intervals' ends."""

    model_id: str
    inputs: tuple[str, ...]
    segment: tuple[int, ...]
    outputs: tuple[str, ...]
    position: tuple[int, ...]
    gradient_x_input: np.ndarray
    integrated: np.ndarray
    value: np.ndarray  # (M,) f(E)
    baseline_value: np.ndarray  # (M,) f(B)
    completeness: np.ndarray  # (M,) |Σ_i a_i − (value − baseline_value)|
    relative: np.ndarray  # (M,) completeness / |value − baseline_value|
    points: np.ndarray  # (M,) the points of the final rule (α = 1 included)
    evaluations: np.ndarray  # (M,) gradient evaluations spent (α = 1, gradient × input's, not counted)
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
    of: str = OF[0]  # what f is: "log-probability" or "logit" (of the output token at its position)
    lrp: Relevance | None = None  # LRP of each output's logit (minus its foil's): relevance (M, N), value (M,), …
    foil: str = ""  # the contrastive question: "" none, "second" (the most likely other token), or a typed word
    foils: tuple[str, ...] = ()  # (M,) each output's foil token ("" none): f is f(output) − f(foil)

    @property
    def max_completeness(self) -> float:
        return float(self.completeness.max()) if self.completeness.size else 0.0

    @property
    def max_relative(self) -> float:
        return float(self.relative.max()) if self.relative.size else 0.0

    @property
    def integrating(self) -> bool:
        """Only gradient × input is known yet (a trace handed to progress before the integration's first round)."""
        return bool(np.isnan(self.baseline_value).any())

    @property
    def relevance_only(self) -> bool:
        """Only LRP is known yet (a trace handed to progress before gradient × input's pass)."""
        return bool(np.isnan(self.value).any())

    @property
    def unconverged(self) -> tuple[int, ...]:
        """The outputs whose relative completeness error is above the tolerance."""
        return tuple(int(i) for i in np.flatnonzero(self.relative > self.tolerance))


# ---------------------------------------------------------------------------------------------------- the rule
@dataclass(frozen=True)
class _Row:
    """One output to attribute: its logit row, token, and how many inputs (the first ones) it reads; foil: a second
    token whose f is subtracted (a contrastive question: why the target rather than the foil), -1 for none."""

    position: int
    target: int
    reach: int
    foil: int = -1


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


Logits = Callable[..., torch.Tensor]  # (n, L, C) path points [, keep: positions] -> (n, L or len(keep), V) logits


def _read(logits: Logits, x: torch.Tensor, rows: Sequence[_Row], positions: bool, of: str) -> torch.Tensor:
    """(n,) f of each row from the model run on x (n, L, C), item c for rows[c]: its logit row (only the rows read,
    where `positions`: the logits function takes keep=), as `of` ("log-probability": log softmax; "logit"), of its
    target minus its foil's (-1: none)."""
    dev = x.device
    wanted = sorted({row.position for row in rows})
    column = {p: c for c, p in enumerate(wanted)} if positions else {p: p for p in wanted}
    out = logits(x, keep=wanted) if positions else logits(x)
    at = torch.arange(len(rows), device=dev)
    read = out[at, torch.tensor([column[row.position] for row in rows], device=dev)]  # (n, V)
    if of == "log-probability":
        read = torch.log_softmax(read, -1)
    f = read[at, torch.tensor([row.target for row in rows], device=dev)]
    if any(row.foil >= 0 for row in rows):  # f(target) − f(foil)
        foil = torch.tensor([max(row.foil, 0) for row in rows], device=dev)
        has = torch.tensor([row.foil >= 0 for row in rows], device=dev)
        f = f - torch.where(has, read[at, foil], torch.zeros_like(f))
    return f


class _Path:
    """The straight path B + α (E − B) and the rows read along it. One pass evaluates a batch of items (row, α): that
    row's ∂f/∂x at α and f there (the same forward). Items run in chunks of the inputs their rows read (the longest
    reach in the chunk), one backward per chunk: the items are independent and each contributes only its own row's
    f. `positions`: the logits function computes only the positions its rows read (a decoder's output layer at
    those positions), else every position. of: "log-probability" (f = log softmax of the logits) or "logit"."""

    def __init__(self, logits: Logits, E: torch.Tensor, B: torch.Tensor, rows: list[_Row],
                 positions: bool = False, chunk: int = CHUNK, of: str = OF[0]) -> None:
        self.logits, self.E, self.B, self.D, self.rows, self.positions = logits, E, B, E - B, rows, positions
        self.chunk, self.of = max(1, int(chunk)), of

    def _points(self, alphas: list[float], L: int) -> torch.Tensor:
        alpha = torch.tensor(alphas, dtype=self.E.dtype, device=self.E.device)
        return self.B[None, :L] + alpha[:, None, None] * self.D[None, :L]

    def evaluate(self, items: list[tuple[int, float]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """((n, N) (E − B)_i · ∇_i f, (n, N) E_i · ∇_i f and (n,) f, at each item's α for its row)."""
        N = self.E.shape[0]
        along, times, vals = np.zeros((len(items), N)), np.zeros((len(items), N)), np.zeros(len(items))
        order = sorted(range(len(items)), key=lambda i: self.rows[items[i][0]].reach)
        for s in range(0, len(order), self.chunk):
            chunk = order[s:s + self.chunk]
            rows = [self.rows[items[i][0]] for i in chunk]
            L = max(row.reach for row in rows)
            x = self._points([items[i][1] for i in chunk], L).requires_grad_(True)
            with torch.enable_grad():
                f = _read(self.logits, x, rows, self.positions, self.of)
                (g,) = torch.autograd.grad(f.sum(), x)
            for c, i in enumerate(chunk):
                along[i, :L] = (g[c] * self.D[:L]).sum(-1).double().cpu().numpy()
                times[i, :L] = (g[c] * self.E[:L]).sum(-1).double().cpu().numpy()
            vals[chunk] = f.detach().double().cpu().numpy()
        return along, times, vals


def relevance(logits: Logits, E: torch.Tensor, rows: list[_Row], positions: bool = False,
              chunk: int = CHUNK) -> Relevance:
    """LRP (explorer.adapters.lrp) of each row's logit of its target, minus its foil's: rows batched, `chunk` at a
    time, one forward and one backward pass each; relevance (len(rows), N), 0 beyond each row's reach."""
    N, parts = E.shape[0], []
    for s in range(0, len(rows), max(1, chunk)):
        batch = rows[s:s + max(1, chunk)]
        L = max(row.reach for row in batch)

        def f(x: torch.Tensor, batch: list[_Row] = batch) -> torch.Tensor:
            return _read(logits, x, batch, positions, "logit")

        part = lrp(f, E[None, :L].expand(len(batch), L, E.shape[1]))
        if part.mixed:  # a packed recurrence reordered the rows: each row's biases only from a pass of its own
            part = relevance(logits, E[:L], batch, positions, 1)
        rel = np.zeros((len(batch), N))
        for i, row in enumerate(batch):
            rel[i, :row.reach] = part.relevance[i, :row.reach]
        parts.append(Relevance(rel, part.value, part.biases, part.positions))
    return Relevance(np.concatenate([q.relevance for q in parts]), np.concatenate([q.value for q in parts]),
                     np.concatenate([q.biases for q in parts]), np.concatenate([q.positions for q in parts]))


def _worst(errors: dict[tuple[float, float], float], change: float, left: int) -> list[tuple[float, float]]:
    """The intervals of one row to halve next (none: the row is done). errors: each interval's quadrature sum minus
    the exact f(b) − f(a); they add up to the completeness error. Halved: the worst intervals until they hold SHARE
    of the row's absolute error, two gradient evaluations each within the `left` ones."""
    if abs(sum(errors.values())) <= TOLERANCE * abs(change):
        return []
    worst = sorted((iv for iv in errors if iv[1] - iv[0] >= 2 * MIN_WIDTH), key=lambda iv: -abs(errors[iv]))
    total, acc, out = sum(abs(e) for e in errors.values()), 0.0, []
    for iv in worst[:left // 2]:
        out.append(iv)
        acc += abs(errors[iv])
        if acc >= SHARE * total:
            break
    return out


Rounds = Callable[[list[_Result], float], None]  # on_round(each row's result so far, fraction done)


def _simpson(node: dict[float, tuple[np.ndarray, float]], a: float, b: float) -> np.ndarray:
    """(N,) Simpson's rule on [a, b] of each input's (E − B)_i · ∇_i f, from the gradients at a, (a + b)/2, b."""
    return np.asarray((b - a) / 6 * (node[a][0] + 4 * node[(a + b) / 2][0] + node[b][0]))


def _integrate(path: _Path, steps: int, on_round: Rounds | None = None, integrate: bool = True) -> list[_Result]:
    """Integrated gradients (and gradient × input) of every row of `path` by the adaptive rule (module docstring).

    Round 0 evaluates every row's gradient at the input itself (gradient × input, f(E), and Simpson's point α = 1).
    Each row keeps its own intervals and the points evaluated on them; every later round evaluates, in one batch,
    every open row's new points (the start's, then two per halved interval); then each unfinished row halves its
    worst intervals. A row's result depends on that row alone: its prefix, its token and `steps`. on_round: called
    after each round with every row's result so far (after round 0: gradient × input, no integrated gradients yet:
    `base` is NaN) and the fraction of the work done. integrate False: round 0 only (gradient × input)."""
    R = len(path.rows)
    steps = max(MIN_STEPS, steps)
    n0 = max(1, min(START, steps // 2))
    e0 = [j / n0 for j in range(n0)] + [1.0]
    nodes: list[dict[float, tuple[np.ndarray, float]]] = [{} for _ in range(R)]  # α -> ((N,) along, f)
    intervals: list[list[tuple[float, float]]] = []
    for row in path.rows:  # nothing to attribute where every input the row reads is the baseline's: f(B) = f(E)
        moves = bool(path.D[:row.reach].any())
        intervals.append([(e0[j], e0[j + 1]) for j in range(n0)] if moves else [])
    ends = [(r, 1.0) for r in range(R)]
    along, gxi, vals = path.evaluate(ends)  # round 0
    for r in range(R):
        nodes[r][1.0] = (along[r], float(vals[r]))
    spent, open_rows = [0] * R, {r for r in range(R) if intervals[r]}
    first: dict[int, float] = {}  # each row's relative completeness error after its first round
    shown = 0.0  # the fraction done last reported
    if on_round is not None:
        on_round(_so_far(path, gxi, intervals, nodes, spent), 0.0)
    if not integrate:
        return _so_far(path, gxi, intervals, nodes, spent)
    wanted = [(r, a) for r in sorted(open_rows) for a in sorted({x for a, b in intervals[r] for x in (a, (a + b) / 2)})]
    while wanted:
        along, _, vals = path.evaluate(wanted)
        for (r, a), g, v in zip(wanted, along, vals):
            nodes[r][a] = (g, float(v))
            spent[r] += 1
        halve: list[tuple[int, tuple[float, float]]] = []
        done: list[float] = []
        for r in sorted(open_rows):
            node = nodes[r]
            change = node[1.0][1] - node[0.0][1]
            errors = {(a, b): float(_simpson(node, a, b).sum()) - (node[b][1] - node[a][1]) for a, b in intervals[r]}
            worst = _worst(errors, change, steps - spent[r])
            halve += [(r, iv) for iv in worst]
            if not worst:
                open_rows.discard(r)
            else:
                error = abs(sum(errors.values())) / max(abs(change), 1e-30)
                first.setdefault(r, error)
                done.append(_fraction(first[r], error))
        if on_round is not None and halve:  # the error of a signed sum can rise again: the bar does not go back
            shown = max(shown, (R - len(done) + sum(done)) / R)
            on_round(_so_far(path, gxi, intervals, nodes, spent), shown)
        wanted = []
        for r, (a, b) in halve:
            m = (a + b) / 2
            intervals[r].remove((a, b))
            intervals[r] += [(a, m), (m, b)]
            wanted += [(r, (a + m) / 2), (r, (m + b) / 2)]
    return _so_far(path, gxi, intervals, nodes, spent)


def _fraction(first: float, error: float) -> float:
    """How far an output's completeness error has come from its first round's (`first`) to the goal, on a log
    scale, below 1 (it is not done)."""
    if first <= TOLERANCE or error >= first:
        return 0.0
    return min(0.95, float(np.log(first / error) / np.log(first / TOLERANCE)))


def _so_far(path: _Path, gxi: np.ndarray, intervals: list[list[tuple[float, float]]],
            nodes: list[dict[float, tuple[np.ndarray, float]]], spent: list[int]) -> list[_Result]:
    """Every row's result from what is evaluated: integrated gradients summed over its intervals (none before round 1:
    zeros, and f(B) NaN; a row with nothing to attribute: zeros, f(B) = f(E))."""
    out = []
    for r, row in enumerate(path.rows):
        node, ivs = nodes[r], sorted(intervals[r])
        value = node[1.0][1]
        if not ivs:
            out.append(_Result(gxi[r, :row.reach].copy(), np.zeros(row.reach), value, value, row.reach, 0, 0,
                               (0.0, 1.0)))
            continue
        known = all(x in node for a, b in ivs for x in (a, (a + b) / 2))
        ig = sum((_simpson(node, a, b) for a, b in ivs), np.zeros(gxi.shape[1])) if known else np.zeros(gxi.shape[1])
        edges = tuple(a for a, _ in ivs) + (1.0,)
        out.append(_Result(gxi[r, :row.reach].copy(), ig[:row.reach].copy(), value,
                           node[0.0][1] if known else float("nan"), row.reach, 2 * len(ivs) + 1 if known else 0,
                           spent[r], edges))
    return out


# ------------------------------------------------------------------------------------------------ the baseline
def _mean_embedding(adapter: Differentiates, side: str) -> torch.Tensor:
    """(C,) the mean of the embeddings the model adds for the ordinary (not special) tokens of `side`'s table."""
    def mean() -> torch.Tensor:
        tables = adapter.tables()
        table = tables.get(side) or tables["input"]
        ids = torch.tensor([i for i, s in enumerate(table.special) if not s], device=adapter.device)
        with torch.no_grad():
            total = sum((adapter.embed_ids(chunk, side=side).double().sum(0) for chunk in ids.split(4096)),
                        torch.zeros((), dtype=torch.float64, device=adapter.device))
        return (total / len(ids)).float()

    return model_state.kept(adapter, "mean embedding", side, mean)


def baseline_inputs(adapter: Differentiates, E: torch.Tensor,
                    starts: tuple[int, ...] = (0,)) -> tuple[torch.Tensor, str, tuple[int, ...]]:
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
    (each also gives f at its point), in batches of `chunk` points; its peak, one batch of the longest reach."""
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
    the note saying so when they are fewer ("" when not). Raises RequestOverBudget when not even MIN_STEPS fit."""
    fit = int(budget.fit_tokens(lambda s: price(shape, reaches, s), steps))
    if fit == steps:
        return steps, ""
    if fit < MIN_STEPS or not price(shape, reaches, fit).within():  # Simpson's rule on [0, 1] at least
        fit = MIN_STEPS
        budget.check(price(shape, reaches, fit), f"Attributing {len(reaches)} output(s) of this {max(reaches):,}-token "
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

    def logits(embeds: torch.Tensor, target: torch.Tensor | None = None, **kw: Sequence[int] | None) -> torch.Tensor:
        return logits_from_embeddings(embeds.to(dtype), target.to(dtype) if target is not None else None,
                                      **kw).float()
    return logits


def _causal_rows(adapter: Differentiates, E: torch.Tensor, B: torch.Tensor, ids: list[int], positions: list[int],
                 targets: list[int], steps: int, on_round: Rounds | None = None, per: int = CHUNK,
                 dtype: torch.dtype = torch.float32, of: str = OF[0], foils: Sequence[int] = (),
                 integrate: bool = True) -> list[_Result]:
    """_integrate of the outputs at `positions` (their next tokens `targets`) of a left-to-right model, E (N, C)
    (float32; the model's weights in `dtype`).

    The row at position p reads only the inputs 0 … p, so it is kept in the model's prefix memo under those ids (with
    its target and the steps) and only the rows whose prefix changed are computed: typing one more word costs one or
    two rows, not N. A model that does not generate (it may read both ways) has no memo. on_round: as for
    _integrate, with every row (the memo's too). foils: each row's foil token (-1: none).
    """
    foils = list(foils) or [-1] * len(positions)
    memo: PrefixMemo[_Result] | None = prefix_memo(adapter, "attribution") if adapter.can_generate else None
    keys = [(RULE, of, steps, integrate, tuple(ids[:p + 1]), t, q) for p, t, q in zip(positions, targets, foils)]
    rows = [memo.get(key) if memo is not None else None for key in keys]
    todo = [i for i, row in enumerate(rows) if row is None]
    if todo:
        path = _Path(in_float32(adapter.logits_from_embeddings, dtype), E, B,
                     [_Row(positions[i], targets[i], positions[i] + 1, foils[i]) for i in todo], positions=True,
                     chunk=per, of=of)

        def merged(results: list[_Result], fraction: float) -> None:
            every = list(rows)
            for i, result in zip(todo, results):
                every[i] = result
            on_round(cast(list[_Result], every), (len(rows) - len(todo) + fraction * len(todo)) / len(rows))  # type: ignore[misc]

        for i, result in zip(todo, _integrate(path, steps, merged if on_round is not None else None, integrate)):
            rows[i] = result
            if memo is not None:
                memo.put(keys[i], result)
    return cast(list[_Result], rows)  # every row filled: from the memo or computed


def default_outputs(loaded: Loaded) -> str:
    """The outputs the view attributes when the URL does not say: the prediction alone for a language model above
    explorer.runtime.device.LARGE_MODEL parameters (each row costs tens of its forward and backward passes), else
    all."""
    return "prediction" if is_large(getattr(loaded, "model", None)) and not loaded.adapter.is_encoder_decoder \
        else "all"


def default_method(loaded: Loaded) -> str:
    """The method the view opens with when the URL does not say: on a language model above
    explorer.runtime.device.LARGE_MODEL parameters, the fast method measured most faithful for its family when it
    is also the most faithful of all (explorer.metrics.faithfulness: LRP on SmolLM2), else integrated gradients."""
    row = ranking(str(getattr(loaded, "family", "")))
    fast = first_answer(str(getattr(loaded, "family", "")))
    if row is not None and is_large(getattr(loaded, "model", None)) and row.methods[0] == fast:
        return fast
    return "integrated gradients"


Progress = Callable[[float, str, AttributionTrace], None]  # progress(fraction, what, the trace so far)
SECOND = "second"  # the foil that is each output's most likely other token


def foil_ids(adapter: Differentiates, text: str, foil: str, scores: torch.Tensor, targets: list[int],
             notes: list[str], side: str = "input") -> tuple[list[int], str]:
    """(each output's foil token, -1 for none; the foil as asked) for the contrastive question "why the output rather
    than the foil": "" none; "second": the most likely token other than the output, from scores (M, V) the model's
    logits at each output's position; else a typed word, as the token the model would write for it after the text
    (its first token where it takes several; `side` "target": an encoder-decoder's output word). Raises
    AttributionError for a word the vocabulary does not have."""
    asked = " ".join(foil.split())
    if not asked:
        return [-1] * len(targets), ""
    if asked.lower() == SECOND:
        unknown, out = unknown_word_id(adapter), []
        for row, t in zip(scores, targets):
            ranked = without_unknown(row.detach().float().clone(), unknown)
            ranked[t] = float("-inf")
            out.append(int(ranked.argmax()))
        return out, SECOND
    if side == "target":
        ids = list(adapter.encode(asked, side="target").ids)
    else:
        before = list(adapter.encode(text, max_tokens=4 * MAX_INPUTS).ids)
        after = list(adapter.encode(f"{text.rstrip()} {asked}", max_tokens=4 * MAX_INPUTS).ids)
        at = next((i for i, (a, b) in enumerate(zip(before, after)) if a != b), min(len(before), len(after)))
        ids = after[at:]
    unknown = unknown_word_id(adapter)
    if not ids or (unknown is not None and ids[0] == unknown):
        raise AttributionError(f"“{asked}” is not in this model's vocabulary: choose another word to contrast with.")
    shown = adapter.token_strings(ids[:1])[0]
    if len(ids) > 1:
        notes.append(f"“{asked}” is {len(ids)} tokens for this model; the contrast is with its first, “{shown}”.")
    if ids[0] in targets:
        notes.append(f"Where the output is “{shown}” itself, nothing is contrasted (f − f = 0).")
    return [ids[0]] * len(targets), asked


def attribution(loaded: Loaded, text: str, target: str = "", steps: int = STEPS, outputs: str = "all",
                progress: Progress | None = None, of: str = OF[0], foil: str = "",
                method: str = "integrated gradients") -> AttributionTrace:
    """See the module docstring. outputs (decoders and RNN LMs): "all" (every next token and the prediction) or
    "prediction" (the model's own next token only). of: what is attributed, "log-probability" or "logit". foil: the
    contrastive question (foil_ids): each f becomes f(output) − f(foil), for every method. method: the one to be
    shown; LRP is always computed, gradient × input unless LRP alone is shown (`relevance_only`), integrated
    gradients only when they are shown (else `integrating`). progress: called with the trace so far (`provisional`
    says what is not final): LRP first, then gradient × input, then integrated gradients after each round of the
    integration as their completeness error falls. Raises AttributionError."""
    integrate = method == "integrated gradients"
    adapter, mid = loaded.caps.gradient, str(getattr(loaded, "id", "model"))
    if adapter is None and (task := not_a_language_model(loaded, "predicts no output token; its labels are "
                                                                 "attributed to the words in the Decision view")):
        raise AttributionError(task)
    if adapter is None:
        raise AttributionError(loaded.adapter.reason or f"{mid} has no language-model head that predicts an output "
                               "from its input (a next token, or a translation): pick a decoder, a recurrent language "
                               "model or an encoder–decoder.")
    steps = int(min(max(int(steps), MIN_STEPS), MAX_STEPS))
    if of not in OF:
        raise AttributionError(f"Attribute one of: {', '.join(OF)}.")
    enc = adapter.encode(text, max_tokens=MAX_INPUTS)
    if not enc.ids:
        raise AttributionError(" ".join(enc.notes) or "Type a sentence.")
    notes = list(enc.notes)
    dev = adapter.device
    ids = torch.tensor(list(enc.ids), dtype=torch.long, device=dev)
    try:
        if adapter.is_encoder_decoder:
            return _seq2seq(adapter, budget.shape_of(loaded.model), mid, enc, ids, target, steps, notes,
                            progress, of, foil, method)
        N = len(ids)
        positions = list(range(max(0, N - 1 - MAX_OUTPUTS), N)) if outputs != "prediction" else [N - 1]
        raw = adapter.embed_ids(ids).detach()
        E, dtype = raw.float(), raw.dtype
        with torch.no_grad():  # (len(positions), V): the logit rows read
            own = in_float32(adapter.logits_from_embeddings, dtype)(E[None], keep=positions)[0]
        B, baseline, kept = baseline_inputs(adapter, E)
    except Unsupported as exc:
        raise AttributionError(str(exc)) from None
    if outputs != "prediction" and len(positions) < N:
        notes.append(f"Only the last {MAX_OUTPUTS} output positions are attributed.")
    unknown = unknown_word_id(adapter)  # the prediction explained is a word, not <unk>
    targets = [int(ids[p + 1]) for p in positions[:-1]] + [int(without_unknown(own[-1], unknown).argmax())]
    if unknown is not None and int(own[-1].argmax()) == unknown:
        p_unk = float(torch.softmax(own[-1].double(), -1)[unknown])
        notes.append(f"The most probable next token is {adapter.token_strings([unknown])[0]} (any word outside the "
                     f"vocabulary, p = {p_unk:.3f}); the most probable word, "
                     f"{adapter.token_strings(targets[-1:])[0]}, is the prediction explained.")
    shown = tuple(enc.tokens[p + 1] for p in positions[:-1]) + tuple(adapter.token_strings(targets[-1:]))
    foils, asked = foil_ids(adapter, text, foil, own, targets, notes)
    shape = budget.shape_of(loaded.model)
    steps, capped = within_budget(shape, [p + 1 for p in positions], steps if integrate else MIN_STEPS)
    notes += [capped] if capped and integrate else []
    per = chunk(shape, positions[-1] + 1)
    rel = relevance(in_float32(adapter.logits_from_embeddings, dtype), E,
                    [_Row(p, t, p + 1, q) for p, t, q in zip(positions, targets, foils)], positions=True, chunk=per)
    named = tuple(adapter.token_strings([q])[0] if q >= 0 else "" for q in foils)

    def trace(rows: list[_Result], provisional: str = "") -> AttributionTrace:
        return replace(_trace(mid, tuple(enc.tokens), (0,) * N, shown, tuple(positions), rows, steps, baseline, kept,
                              True, notes, of, provisional, bool(capped)), lrp=rel, foil=asked, foils=named)

    first = _relevance_first(trace, [p + 1 for p in positions], progress)
    if method == "LRP":
        return trace(first)
    rows = _causal_rows(adapter, E, B, list(enc.ids), positions, targets, steps, _reporter(trace, progress),
                        per, dtype, of, foils, integrate)
    return trace(rows)


def _relevance_first(trace: Callable[..., AttributionTrace], reaches: list[int],
                     progress: Progress | None) -> list[_Result]:
    """The rows of a trace that holds LRP alone (gradient × input and the values NaN: `relevance_only`), handed to
    `progress` (LRP is one pass, drawn before gradient × input's)."""
    nan = float("nan")
    rows = [_Result(np.full(r, nan), np.zeros(r), nan, nan, r, 0, 0, (0.0, 1.0)) for r in reaches]
    if progress is not None:
        what = "LRP; gradient × input and integrated gradients being computed"
        progress(0.0, what, trace(rows, what))
    return rows


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


def _seq2seq(adapter: Differentiates, shape: budget.Shape, mid: str, enc: Encoded, ids: torch.Tensor, target: str,
             steps: int, notes: list[str], progress: Progress | None = None, of: str = OF[0], foil: str = "",
             method: str = "integrated gradients") -> AttributionTrace:
    integrate = method == "integrated gradients"
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
    steps, capped = within_budget(shape, [S + T] * T, steps if integrate else MIN_STEPS)  # each point: the decoder
    notes += [capped] if capped and integrate else []

    def logits(x: torch.Tensor) -> torch.Tensor:
        return model_logits(x[:, :S], x[:, S:])

    inputs = tuple(enc.tokens) + tuple(adapter.sequence_strings(dec.tolist()))
    if foil.strip():
        with torch.no_grad():
            own = logits(E[None])[0]
    foils, asked = foil_ids(adapter, "", foil, own if foil.strip() else E, out_ids, notes, side="target")
    rows = [_Row(t, y, S + t + 1, q) for (t, y), q in zip(enumerate(out_ids), foils)]
    per = chunk(shape, S + T)
    rel = relevance(logits, E, rows, chunk=per)
    named = tuple(adapter.token_strings([q])[0] if q >= 0 else "" for q in foils)

    def trace(rows: list[_Result], provisional: str = "") -> AttributionTrace:
        return replace(_trace(mid, inputs, (0,) * S + (1,) * T, tuple(adapter.sequence_strings(out_ids)),
                              tuple(range(T)), rows, steps, baseline, kept, False, notes, of, provisional,
                              bool(capped)), lrp=rel, foil=asked, foils=named)

    first = _relevance_first(trace, [row.reach for row in rows], progress)
    if method == "LRP":
        return trace(first)
    path = _Path(logits, E, B, rows, chunk=per, of=of)
    return trace(_integrate(path, steps, _reporter(trace, progress), integrate))


def _trace(mid: str, inputs: tuple[str, ...], segment: tuple[int, ...], outputs: tuple[str, ...],
           positions: tuple[int, ...], rows: list[_Result], steps: int, baseline: str, kept: tuple[int, ...],
           predicted: bool, notes: list[str], of: str, provisional: str = "", capped: bool = False) -> AttributionTrace:
    N = len(inputs)
    gxi = np.stack([np.pad(r.gxi, (0, N - r.reach)) for r in rows]).astype(np.float32)
    ig = np.stack([np.pad(r.ig, (0, N - r.reach)) for r in rows])
    value, base = np.array([r.value for r in rows]), np.array([r.base for r in rows])
    error = np.abs(ig.sum(1) - (value - base))
    change = np.abs(value - base)
    relative = np.divide(error, change, out=np.where(error > 0, np.inf, 0.0), where=change > 0)
    return AttributionTrace(
        model_id=mid, inputs=inputs, segment=segment, outputs=outputs, position=positions, gradient_x_input=gxi,
        integrated=ig.astype(np.float32), value=value, baseline_value=base, completeness=error, relative=relative,
        points=np.array([r.points for r in rows]), evaluations=np.array([r.evaluations for r in rows]),
        edges=tuple(r.edges for r in rows), steps=steps, baseline=baseline, predicted=predicted,
        reach=tuple(r.reach for r in rows), notes=tuple(dict.fromkeys(notes)), kept=kept, rule=RULE,
        tolerance=TOLERANCE, provisional=provisional, capped=capped, of=of)
