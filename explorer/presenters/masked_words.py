"""Masked words' presenter: a MaskedTrace (probs, logits, top_ids: (M, k) at each of M masks; word_probs,
word_ranks: (M, W) of the compared words) and the view's settings -> the top-k fillers of each [MASK] of one or two
sentences, a second model's fillers of the same masks with p(B) − p(A), the compared words at every mask, the softmax
with its numbers, and what to notice.

The page draws the fillers in two columns (`fills`), the rest as it comes (`opening`, `other_model`, `rest`);
`present` joins the same parts for the notebook. Origin details are Markdown (the badge reads them): model ids in
them are escaped."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ParamSpec, Protocol

import plotly.graph_objects as go

from explorer.presenters.presentation import Origin, Presentation
from explorer.probes.masked_words import MASK, MaskedTrace
from explorer.text.escape import md
from explorer.viz import masked_words as viz
from explorer.viz.theme import Theme

Q = ParamSpec("Q")
FOLD = viz.FOLD  # the fill-in bars' height under the sentence captions in the first screen
NOTICES = [
    f"Agreement from both sides: in “the keys to the cabinet {MASK} on the table” the verb agrees with “keys”, "
    "not with the nearer “cabinet”; swap the numbers in sentence B and the plural and singular verbs trade places.",
    "The words after the mask matter: a causal language model could not use “on the table” to choose a verb.",
    "Each mask is filled independently: with two masks the model does not see its own guess for the other one.",
    "Pick a word to mask from the menu: the hidden word is compared automatically, with its rank among all tokens.",
]


class Build(Protocol):
    """How a figure is made: build(*args) (the notebook), or once and shared (the page: explorer.ui.cache.figure_of,
    with the same signature)."""

    def __call__(self, build: Callable[Q, go.Figure], *args: Q.args, **kwargs: Q.kwargs) -> go.Figure: ...


def _made(build: Callable[Q, go.Figure], *args: Q.args, **kwargs: Q.kwargs) -> go.Figure:
    return build(*args, **kwargs)


def mask_option(words: Sequence[str], i: int) -> str:
    """The mask menu's option i (-1: the masks typed)."""
    return f"the {MASK}s typed" if i < 0 else f"mask {i}: {words[i]}"


def _own(trace: MaskedTrace, model_id: str) -> Origin:
    return Origin("model", f"softmax of {md(model_id)}'s own logits at each {MASK}, over its {trace.vocab_size:,} "
                           "tokens.")


def _token(trace: MaskedTrace, m: int, rank: int = 0) -> str:
    return str(trace.top_tokens[m][rank]).strip()


def opening(trace: MaskedTrace, second: MaskedTrace | None = None) -> Presentation:
    """What the page says of its sentences: A's notes (when A has no mask, nothing else is drawn) and B's."""
    p = Presentation()
    p.say("note", *trace.notes)
    if second is not None:
        p.say("note", *(f"Sentence B: {note}" for note in second.notes))
    return p


def fill_names(trace: MaskedTrace, second: MaskedTrace | None = None) -> tuple[list[str], list[str]]:
    """The names of the fillers' figures: A's ("fill-<m>"), B's ("fill-B-<m>"; none without a second sentence that
    has a mask)."""
    return ([f"fill-{m}" for m in range(len(trace))],
            [f"fill-B-{m}" for m in range(len(second))] if second is not None and len(second) else [])


def fills(trace: MaskedTrace, second: MaskedTrace | None, theme: Theme, model_id: str,
          made: Build = _made) -> tuple[Presentation, list[Presentation]]:
    """The top-k fillers of each mask: (what is said above the two columns, what each column holds). Two sentences
    (second: B's trace, with a mask): a column each, its caption above its bars; one: the caption above, the masks
    alternating between the columns."""
    own = _own(trace, model_id)
    above, columns = Presentation(), [Presentation(), Presentation()]
    names_a, names_b = fill_names(trace, second)
    if second is not None and names_b:
        for column, tr, name, names in zip(columns, (trace, second), ("A", "B"), (names_a, names_b)):
            column.say("caption", f"{name} as the model reads it: " + " · ".join(tr.tokens))
            for m, figure in enumerate(names):
                column.figure(figure, made(viz.fill_bars, tr, m, theme, f"{name}: {MASK} at token {tr.positions[m]}",
                                           None), own, f"masked-{name}-{m}")
        return above, columns
    above.say("caption", "A as the model reads it: " + " · ".join(trace.tokens))
    for m, figure in enumerate(names_a):
        columns[m % 2].figure(figure, made(viz.fill_bars, trace, m, theme, "", None), own, f"masked-{m}")
    return above, columns


def same_reading(trace: MaskedTrace, other: MaskedTrace) -> bool:
    """Whether a second model reads the sentence as the same tokens of a vocabulary of the same size (then p(B) −
    p(A) of A's top tokens is drawn: `top_ids` asks the second model for them)."""
    return other.tokens == trace.tokens and other.vocab_size == trace.vocab_size


def top_ids(trace: MaskedTrace) -> tuple[tuple[int, ...], ...]:
    """A's top tokens at each mask, as masked_fill asks another model for them."""
    return tuple(tuple(int(i) for i in row) for row in trace.top_ids)


def other_model(trace: MaskedTrace, other: MaskedTrace | None, at_a: MaskedTrace | None, failed: str, model_id: str,
                other_id: str, theme: Theme, made: Build = _made) -> Presentation:
    """A second model's fillers of the same masks of sentence A, on one scale with A's ("cmp-a-<m>", "cmp-b-<m>"),
    and p(B) − p(A) of A's top tokens ("cmp-diff-<m>": at_a, the second model's trace at them) where both read the
    same tokens of the same vocabulary; failed: why the second model could not run."""
    p = Presentation()
    p.heading(f"Compared with {other_id}")  # the same sentence A, the same masks
    why = failed or ("" if other is None or len(other) else " ".join(other.notes))
    if why or other is None:
        p.say("warning", f"{other_id} cannot be compared here: " + why)
        return p
    own, theirs = _own(trace, model_id), Origin("model", f"softmax of {md(other_id)}'s own logits at each {MASK}.")
    for m in range(min(len(trace), len(other))):
        top = max(float(trace.probs[m].max()), float(other.probs[m].max()))
        row = [(f"cmp-{side}-{m}", made(viz.fill_bars, tr, m, theme, f"{name}: {MASK} at token {tr.positions[m]}",
                                        top), origin, f"masked-{m}-{side}")
               for side, tr, name, origin in (("a", trace, model_id, own), ("b", other, other_id, theirs))]
        if at_a is not None:
            row.append((f"cmp-diff-{m}", viz.fill_difference(trace, at_a, m, (model_id, other_id), theme),
                        Origin("model", "the difference of the two models' own probabilities of the same tokens."),
                        f"masked-{m}-difference"))
        p.row(*row)
    if at_a is None:
        p.say("note", f"No difference is drawn: {other_id} does not read this sentence as the same tokens of the "
                      f"same vocabulary as {model_id}.")
    else:
        m, j, gap = viz.largest_change(trace, at_a)
        p.say("caption", f"Both bars on one scale. Largest change among {model_id}'s top {trace.probs.shape[1]} at "
                         f"each {MASK}: “{_token(trace, m, j)}” {gap:+.4f} (p = {float(trace.probs[m, j]):.4f} "
                         f"in {model_id}, {float(at_a.probs[m, j]):.4f} in {other_id}).")
    return p


def rest(trace: MaskedTrace, second: MaskedTrace | None, model_id: str, reader: str, theme: Theme) -> Presentation:
    """Below the fillers: how the model reads (reader: its adapter's name), the compared words at every mask of each
    sentence ("compared-chart"), and the softmax with the numbers of A's first mask."""
    p = Presentation()
    p.say("caption", f"{model_id} · {reader} · bidirectional: every token attends to every other, so the words after "
                     f"each {MASK} count as much as the words before it.")
    traces, names = ([trace, second], ["A", "B"]) if second is not None and len(second) else ([trace], ["A"])
    if any(tr.words for tr in traces):
        p.heading("Compared words")
        p.figure("compared-chart", viz.word_bars(traces, names, theme), _own(trace, model_id), "masked-words")
        best = [(n, tr.words[0], float(tr.word_probs[0, 0]), int(tr.word_ranks[0, 0]))
                for n, tr in zip(names, traces) if tr.words and tr.pieces[0]]
        if best:
            p.say("caption", "Live: " + "; ".join(f"in {n}, “{w}” gets p = {pr:.4f} (rank {r:,} of "
                                                  f"{trace.vocab_size:,})" for n, w, pr, r in best) + ".")
    p.heading("Where the probabilities come from")
    p.say("latex", viz.equation(trace, 0))
    p.say("caption", f"z_v is the model's output score (logit) for token v at the first {MASK} of A: its last layer's "
                     f"vector there, through the output layer. The most probable token, “{_token(trace, 0)}”, "
                     f"has z = {trace.logits[0, 0]:.3f}; the softmax divides e^z by the sum over all "
                     f"{trace.vocab_size:,} tokens (log of the sum {trace.lse[0]:.3f}). The distribution's entropy is "
                     f"{trace.entropy[0]:.3f} nats. Hover a bar for its token's logit and rank.")
    return p


def present(trace: MaskedTrace, second: MaskedTrace | None, model_id: str, reader: str, theme: Theme,
            other_id: str = "", other: MaskedTrace | None = None, at_a: MaskedTrace | None = None,
            failed: str = "", made: Build = _made) -> Presentation:
    """The view as one answer (the notebook's): the notes, the fillers of A's masks ("fill-<m>") and of B's
    ("fill-B-<m>"), a second model's (other_model, when other_id is given), and the rest."""
    p = opening(trace, second)
    if not len(trace):
        return p
    above, columns = fills(trace, second, theme, model_id, made)
    p.add(above)
    for column in columns:
        p.add(column)
    if other_id:
        p.add(other_model(trace, other, at_a, failed, model_id, other_id, theme, made))
    return p.add(rest(trace, second, model_id, reader, theme))
