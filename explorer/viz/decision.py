"""Figures of the decision view: DecisionTrace -> the label probabilities of one or two sentences, the decision after
each word, a tagger's words × labels grid; LabelAttribution -> each word's share of a label. Tokens and label names
reach Plotly only escaped (explorer.viz.tokens.chart_labels, explorer.text.escape.plotly_text)."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.probes.decision import DecisionTrace, LabelAttribution
from explorer.text.escape import plotly_text as esc
from explorer.viz.theme import Theme, figure
from explorer.viz.tokens import chart_labels, ticks

__all__ = ["label_bars", "prefix_lines", "tag_grid", "attribution_bars", "label_names", "equation", "notice", "turns",
           "named"]


def label_names(labels: Sequence[str]) -> list[str]:
    return [esc(str(label)) for label in labels]


def named(name: str, text: str, most: int = 36) -> str:
    """A legend entry: the sentence's name and its first `most` characters (one line)."""
    line = " ".join(text.split())
    return f"{name}: {line if len(line) <= most else line[:most - 1] + '…'}"


def _end(trace: DecisionTrace, most: int = 48) -> str:
    """The end of the sentence as the model read it (its words, not its special tokens), at most `most` characters."""
    from explorer.viz.tokens import labels

    line = " ".join(labels([t for t, s in zip(trace.tokens, trace.special) if not s])).replace("·", "")
    return line if len(line) <= most else "…" + line[-(most - 1):]


def label_bars(traces: Sequence[DecisionTrace], names: Sequence[str], theme: Theme) -> go.Figure:
    """Horizontal bars: p(label) for each label (rows), one colour per sentence (A, B), the chosen label's bar
    labelled. Hover: the label, p and the logit."""
    labels = label_names(traces[0].labels)
    data = []
    for k, (tr, name) in enumerate(zip(traces, names)):
        data.append({"type": "bar", "orientation": "h", "name": esc(name), "x": tr.probs, "y": labels,
                     "customdata": tr.logits, "marker": {"color": theme.categorical[(4 + k) % len(theme.categorical)]},
                     "text": [f"{p:.1%}" for p in tr.probs], "textposition": "outside", "cliponaxis": False,
                     "hovertemplate": f"{esc(name)}<br>%{{y}}: p = %{{x:.4f}}<br>logit %{{customdata:.3f}}"
                                      "<extra></extra>"})
    return figure(data, {"title": {"text": f"p(label | sentence): “{esc(_end(traces[0]))}”"}, "barmode": "group",
                         "xaxis": {"title": {"text": "probability"}, "range": [0, 1.12]},
                         "yaxis": {"autorange": "reversed", "automargin": True},
                         "legend": {"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom"},
                         "margin": {"t": 90},
                         "height": 150 + 34 * len(labels) * len(traces)})


def prefix_lines(trace: DecisionTrace, theme: Theme) -> go.Figure:
    """One line per label: p(label) of the model run on each prefix (x: the word the prefix ends with). Hover: the
    prefix's last word and p."""
    assert trace.prefix_probs is not None
    words = [i for i in range(len(trace.tokens)) if not trace.special[i]]
    x = list(range(len(words)))
    shown = chart_labels([trace.tokens[i] for i in words])
    data = []
    for c, label in enumerate(label_names(trace.labels)):
        data.append({"type": "scatter", "mode": "lines+markers", "name": label, "x": x,
                     "y": trace.prefix_probs[words, c], "customdata": shown,
                     "line": {"width": theme.line_width, "color": theme.categorical[c % len(theme.categorical)]},
                     "marker": {"size": theme.marker_size},
                     "hovertemplate": f"after “%{{customdata}}”: p({label}) = %{{y:.4f}}<extra></extra>"})
    return figure(data, {"title": {"text": "The decision word by word: the model run on each prefix"},
                         "xaxis": {**ticks([trace.tokens[i] for i in words]),
                                   "title": {"text": "the prefix ends with"}},
                         "yaxis": {"title": {"text": "p(label | prefix)"}, "range": [-0.02, 1.02]},
                         "legend": {"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom"}, "height": 380})


def tag_grid(trace: DecisionTrace, theme: Theme) -> go.Figure:
    """Heatmap: labels (rows) × tokens (columns) of p(label | token in its sentence); the chosen label is written in
    its cell. Special tokens are left out."""
    cols = [i for i in range(len(trace.tokens)) if not trace.special[i]]
    labels = label_names(trace.labels)
    z = trace.probs[cols].T  # (C, T')
    chosen = z.argmax(0)
    text = [["<b>" + labels[r] + "</b>" if chosen[j] == r else "" for j in range(len(cols))]
            for r in range(len(labels))]
    tokens = [trace.tokens[i] for i in cols]
    return figure([{"type": "heatmap", "z": z, "x": list(range(len(cols))), "y": labels, "zmin": 0, "zmax": 1,
                    "colorscale": theme.sequential, "text": text, "texttemplate": "%{text}",
                    "customdata": [chart_labels(tokens)] * len(labels), "colorbar": {"title": {"text": "p"}},
                    "hovertemplate": "“%{customdata}”: p(%{y}) = %{z:.4f}<extra></extra>"}],
                  {"title": {"text": "Each word's label in its sentence: p(label | word, context)"},
                   "xaxis": {**ticks(tokens), "side": "top"}, "yaxis": {"autorange": "reversed", "automargin": True},
                   "height": 200 + 34 * len(labels)})


def attribution_bars(attr: LabelAttribution, method: str, theme: Theme) -> go.Figure:
    """Bars: each token's attribution of f (integrated gradients, gradient × input or LRP), coloured by sign (the
    diverging scale's ends); special tokens kept by the baseline are grey. Hover: every method's value."""
    lrp = attr.lrp.relevance[0] if attr.lrp is not None else np.zeros_like(attr.integrated)
    values = {"integrated gradients": attr.integrated, "LRP": lrp}.get(method, attr.gradient_x_input)
    blue, red = theme.diverging_ends
    colours = ["#9e9e9e" if attr.special[i] else (red if v >= 0 else blue) for i, v in enumerate(values)]
    custom = np.stack([attr.gradient_x_input, attr.integrated, lrp], axis=1)
    bar = {"type": "bar", "x": list(range(len(values))), "y": values, "marker": {"color": colours},
           "customdata": custom, "hovertext": chart_labels(attr.tokens),
           "hovertemplate": "%{hovertext}<br>gradient × input %{customdata[0]:+.4f}<br>integrated gradients "
                            "%{customdata[1]:+.4f}<br>LRP %{customdata[2]:+.4f}<extra></extra>"}
    where = f" at “{esc(attr.tokens[attr.token])}”" if attr.token >= 0 else ""
    return figure([bar], {"title": {"text": f"Where {esc(attr.of)}{where} comes from: {method}"},
                          "xaxis": ticks(attr.tokens), "yaxis": {"title": {"text": "attribution (nats)"},
                                                                 "zeroline": True},
                          "showlegend": False, "height": 360})


def completeness_warning(attr: LabelAttribution) -> str | None:
    """What the view says when integrated gradients' sum misses f(E) − f(B) by more than 1 % (None: within 1 %)."""
    if attr.relative <= 0.01:
        return None
    return (f"Integrated gradients do not add up yet: their sum misses f(E) − f(B) by {attr.relative:.1%} after "
            f"{attr.evaluations} gradient evaluations. Raise the gradient evaluations under Options (steps= in "
            "the notebook).")


def no_contrast(trace: DecisionTrace, label: int) -> str:
    """What the view says when the label and its foil are one label."""
    return f"The label and the one it is contrasted with are both {trace.labels[label]}: no contrast is drawn."


def _tex(text: str) -> str:
    """A label name inside \\text{} (LaTeX's special characters escaped)."""
    from explorer.text.escape import latex_text

    return latex_text(text)


def equation(attr: LabelAttribution) -> str:
    """LaTeX: completeness of integrated gradients with the live numbers, Σ_i a_i = f(E) − f(B)."""
    f = rf"\log p(\text{{{_tex(attr.label)}}})" + (rf" - \log p(\text{{{_tex(attr.foil)}}})" if attr.foil else "")
    total = float(attr.integrated.sum())
    return (rf"f = {f}:\quad \sum_i a_i = {total:+.4f},\quad f(E) - f(B) = {attr.value:+.4f}"
            rf" - ({attr.baseline_value:+.4f}) = {attr.value - attr.baseline_value:+.4f}")


def lrp_equation(attr: LabelAttribution) -> str:
    """LaTeX: LRP's conservation with the live numbers, f = Σ_i R_i + biases + position vectors + rest."""
    r = attr.lrp
    if r is None:
        return ""
    f = rf"z_{{\text{{{_tex(attr.label)}}}}}" + (rf" - z_{{\text{{{_tex(attr.foil)}}}}}" if attr.foil else "")
    parts = [(float(r.relevance[0].sum()), r"\sum_i R_i"), (float(r.biases[0]), r"\text{biases}"),
             (float(r.positions[0]), r"\text{position vectors}"),
             (float(r.rest[0]), r"\text{softmax rule, }\varepsilon")]
    out = rf"f = {f} = {float(r.value[0]):+.4f} = "
    for j, (v, what) in enumerate(parts):
        sign = ("-" if v < 0 else "") if j == 0 else (" - " if v < 0 else " + ")
        out += rf"{sign}\underbrace{{{abs(v):.4f}}}_{{{what}}}"
    return out


def notice(trace: DecisionTrace) -> list[str]:
    """What to notice, for a classifier or a tagger (the live labels named)."""
    if trace.per_token:
        return ["A word's label is decided by its context: type “they run every day” and “a long run”, and watch "
                "the label under “run” change.",
                "The grid is the model's own probability of each label for each word; the bold name is its choice.",
                "Attribution shows which words of the sentence moved the explained word's label: a bidirectional "
                "tagger reads the words after it too."]
    points = [f"The bars are p(label) of the whole sentence: the softmax of the head's {len(trace.labels)} logits "
              "(hover a bar for its logit).",
              "Put a negation in sentence B (“not good”, “not bad at all”): a bag of words cannot turn the decision; "
              "a recurrent model can."]
    if trace.prefix_probs is not None:
        points.append("The lines are the model run on each prefix: where a line crosses, the decision turns. A "
                      "one-way recurrent classifier cannot revise a word it has read; it can only add to its state.")
    points.append("Integrated gradients add up to f(E) − f(B) (the equation above prints both); gradient × input "
                  "does not, and can point the other way on a saturated model.")
    return points


def turns(trace: DecisionTrace) -> str:
    """A caption (plain text): after which words the decision on the prefixes changes, with the live probabilities,
    or that it never does ("" when no prefix was run)."""
    assert trace.prefix_probs is not None
    words = [i for i, s in enumerate(trace.special) if not s and not np.isnan(trace.prefix_probs[i]).any()]
    if not words:
        return ""
    best = [int(trace.prefix_probs[i].argmax()) for i in words]
    flips = [(i, b) for i, b, before in zip(words[1:], best[1:], best) if b != before]
    if not flips:
        return (f"The decision stays {trace.labels[best[0]]} from the first word on (p after the last word: "
                f"{float(trace.prefix_probs[words[-1], best[-1]]):.3f}).")
    return "The decision turns after " + ", ".join(
        f"“{trace.tokens[i]}” (to {trace.labels[b]}, p = {float(trace.prefix_probs[i, b]):.3f})"
        for i, b in flips) + "."
