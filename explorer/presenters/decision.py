"""The decision view's presenter: a DecisionTrace (labels (C,); probs (C,) of a sentence, or (T, C) of each word;
prefix_probs (T, C): the model run on each prefix) and a LabelAttribution (integrated, gradient_x_input: (T,)) ->
the label bars of one or two sentences or a tagger's words × labels grid, the decision word by word, where the
explained label comes from (with the completeness of integrated gradients), a second model's own labels, and what
to notice."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ParamSpec, Protocol

import plotly.graph_objects as go

from explorer.metrics.faithfulness import ranking
from explorer.presenters.presentation import Origin, Presentation
from explorer.probes.decision import DecisionTrace, LabelAttribution
from explorer.text.escape import md
from explorer.viz import decision as viz
from explorer.viz.theme import Theme

Q = ParamSpec("Q")


class Build(Protocol):
    """How a figure is made: build(*args) (the notebook), or once and shared (the page: explorer.ui.cache.figure_of,
    with the same signature)."""

    def __call__(self, build: Callable[Q, go.Figure], *args: Q.args, **kwargs: Q.kwargs) -> go.Figure: ...


def _made(build: Callable[Q, go.Figure], *args: Q.args, **kwargs: Q.kwargs) -> go.Figure:
    return build(*args, **kwargs)


def label_option(trace: DecisionTrace, i: int) -> str:
    """The label menu's option i (-1: the model's choice)."""
    return "Explain: its choice" if i < 0 else f"Explain: {trace.labels[i]}"


def foil_option(trace: DecisionTrace, i: int) -> str:
    """The contrast menu's option i (-1: none)."""
    return "rather than: (nothing)" if i < 0 else f"rather than {trace.labels[i]}"


def last_word(trace: DecisionTrace) -> int:
    """A tagger's word explained by default: the last that is not a special token."""
    return max(i for i, s in enumerate(trace.special) if not s) if not all(trace.special) else 0


def question(trace: DecisionTrace, token: int, label: int, foil: int) -> tuple[int, int]:
    """(the label explained, the label it is contrasted with (-1: none)) for the menus' label and foil (-1: the
    model's choice; none) at `token` (a tagger's word; -1 for a classifier)."""
    shown = _chosen(trace, token) if label < 0 else label
    return shown, -1 if foil == shown else foil


def _chosen(trace: DecisionTrace, token: int) -> int:
    return int(trace.probs[token].argmax()) if trace.per_token else int(trace.probs.argmax())


def _own(trace: DecisionTrace) -> Origin:
    return Origin("model", f"softmax of {md(trace.model_id)}'s own head logits over its {len(trace.labels)} labels "
                           f"({md(trace.what)}).")


def main(trace: DecisionTrace, text: str, second: DecisionTrace | None, second_text: str, theme: Theme,
         made: Build = _made) -> Presentation:
    """The notes and the main chart: a tagger's grid ("tags"), or the label bars of `text` and of a second sentence
    beside it ("labels"; second: its trace, or None)."""
    p = Presentation()
    p.say("note", *trace.notes)
    if trace.per_token:
        p.figure("tags", made(viz.tag_grid, trace, theme), _own(trace), "decision-tags")
    else:
        traces, names = [trace], [viz.named("A", text)]
        if second is not None:
            traces.append(second)
            names.append(viz.named("B", second_text))
        p.figure("labels", made(viz.label_bars, tuple(traces), tuple(names), theme), _own(trace), "decision-labels")
    return p


def present(trace: DecisionTrace, attr: LabelAttribution, token: int, label: int, foil: int, method: str,
            reader: str, theme: Theme, other: DecisionTrace | None = None, other_id: str = "", failed: str = "",
            made: Build = _made, family: str = "") -> Presentation:
    """Below the main chart: the label chosen (at a tagger's `token`), the decision on each prefix ("prefixes"),
    where the explained label comes from ("attribution": `attr`, by `method`; label, foil as the menus give them,
    -1: the choice, none), and a second model's own labels ("compare"; other_id, failed: why it could not run).
    reader: the adapter that read the model; family: the model's (the measured faithfulness of the methods for it
    is named)."""
    p = Presentation()
    chosen = _chosen(trace, token)
    shown = chosen if label < 0 else label
    if foil == shown:
        p.say("warning", viz.no_contrast(trace, shown))
    p.say("caption", f"Chosen: {trace.labels[chosen]}" + ("" if trace.per_token else
          f" with p = {float(trace.probs[chosen]):.4f}") + f" · {trace.what} · read by {reader}.")
    if trace.prefix_probs is not None:
        p.heading("The decision word by word")
        p.figure("prefixes", made(viz.prefix_lines, trace, theme),
                 Origin("model", "each point is the model run on the prefix that ends with that word: a forward pass "
                                 "each."), "decision-prefixes")
        p.say("caption", viz.turns(trace))
    p.heading("Where the label comes from")
    if method == "LRP" and attr.lrp is not None:
        r = attr.lrp
        p.figure("attribution", made(viz.attribution_bars, attr, method, theme),
                 Origin("model", f"relevance of {md(trace.model_id)}'s own logit by the LRP rules (one forward and "
                                 f"one backward pass): f = {float(r.value[0]):+.4f}, the inputs' relevance "
                                 f"{float(r.relevance[0].sum()):+.4f}, biases {float(r.biases[0]):+.4f}, position "
                                 f"vectors {float(r.positions[0]):+.4f}, not conserved (the softmax rule, ε) "
                                 f"{float(r.rest[0]):+.4f}."), "decision-attribution")
        p.say("latex", viz.lrp_equation(attr))
        if attr.foil:
            p.say("caption", "LRP explains the logit difference, which is log p(label) − log p(foil) itself.")
        else:
            p.say("caption", "LRP explains the label's logit, where its relevance starts (a log-probability is not "
                             "a sum its rules can pass on); with a label to contrast it is log p(label) − log p(foil).")
    else:
        p.figure("attribution", made(viz.attribution_bars, attr, method, theme),
                 Origin("model", f"gradients of {md(attr.of)} through {md(trace.model_id)}'s own forward; integrated "
                                 f"gradients' completeness error {attr.relative:.2%} after {attr.evaluations} "
                                 "gradient evaluations."), "decision-attribution")
        p.say("latex", viz.equation(attr))
        p.say("warning", viz.completeness_warning(attr) or "")  # the page's and the notebook's, in the same words
    if (measured := ranking(family)) is not None:
        p.say("caption", measured.sentence(trace.model_id))
    if failed or other is not None:
        p.heading(f"Compared with {other_id}")
    if failed:
        p.say("warning", f"{other_id} cannot be compared here: {failed}")
    elif other is not None:
        if other.labels != trace.labels or other.per_token != trace.per_token:
            p.say("note", f"{other_id} is {other.what}: its labels are not {trace.model_id}'s, so its own are shown.")
        fig = made(viz.tag_grid, other, theme) if other.per_token else \
            made(viz.label_bars, (other,), (other_id,), theme)
        p.figure("compare", fig, Origin("model", f"softmax of {md(other_id)}'s own head logits."), "decision-compare")
    return p


def described(rows: Sequence[tuple[str, str]]) -> Presentation:
    """What was read from the model (the adapter's describe(): (what, value) rows), as a table."""
    p = Presentation()
    p.table("what was read from the model", {"what": [a for a, _ in rows], "value": [b for _, b in rows]},
            Origin("model"))
    return p


def notices(trace: DecisionTrace) -> list[str]:
    """What to notice, for a classifier or a tagger."""
    return viz.notice(trace)
