"""Figures of the masked-word view: MaskedTrace -> top-k bars per mask, the compared words in two sentences side by
side and the softmax with its numbers. Tokens reach Plotly only through `token_label` (HTML-escaped)."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.probes.masked_words import MASK, MaskedTrace
from explorer.text.escape import plotly_text as label
from explorer.viz.theme import Theme, figure
from explorer.viz.tokens import labels

__all__ = ["fill_bars", "fill_difference", "largest_change", "word_bars", "equation", "token_label"]


FOLD = 370  # the fill-in bars' height under the sentence captions in the first screen (explorer.ui.charts.show)


def token_label(token: str) -> str:
    """A vocabulary token as a chart label: Ġ / ▁ as a leading dot, surrounding spaces dropped, HTML-escaped."""
    text = str(token).strip() or str(token)
    return label(labels([text])[0])


def fill_bars(trace: MaskedTrace, m: int, theme: Theme, title: str = "", top: float | None = None) -> go.Figure:
    """Horizontal bars: the k most probable tokens at mask m (best on top), probability on x. Compared words among
    them are coloured apart. Hover: token, probability, logit z, rank. top: the largest probability the x axis must
    hold (two models' bars on one scale); default: this trace's."""
    k = trace.probs.shape[1]
    names = [token_label(t) for t in trace.top_tokens[m]]
    compared = {p.strip() for p in trace.pieces if p}
    colours = [theme.categorical[5] if t.strip() in compared else theme.categorical[4] for t in trace.top_tokens[m]]
    custom = np.stack([trace.logits[m], np.arange(1, k + 1)], axis=1)
    bar = {"type": "bar", "orientation": "h", "x": trace.probs[m], "y": list(range(k)), "customdata": custom,
           "text": [f"{p:.1%}" for p in trace.probs[m]], "textposition": "outside", "cliponaxis": False,
           "marker": {"color": colours}, "hovertext": names,
           "hovertemplate": "%{hovertext}<br>p = %{x:.4f}<br>logit z = %{customdata[0]:.3f}<br>rank "
                            "%{customdata[1]:.0f}<extra></extra>"}
    top = top if top is not None else float(trace.probs[m].max()) if k else 1.0
    return figure([bar], {
        "title": {"text": title or f"{MASK} at token {trace.positions[m]}: top {k} of {trace.vocab_size:,}"},
        "xaxis": {"title": {"text": "p(token | context)"}, "range": [0, min(1.0, top * 1.25 + 0.02)]},
        "yaxis": {"tickvals": list(range(k)), "ticktext": names, "autorange": "reversed"},
        "height": 120 + 26 * k, "showlegend": False, "margin": {"l": 10}})


def fill_difference(a: MaskedTrace, at_a: MaskedTrace, m: int, names: tuple[str, str], theme: Theme) -> go.Figure:
    """p_B − p_A at mask m of model A's top tokens: `at_a` is model B's trace at A's tokens (masked_fill's ids).
    Bars right of zero: B gives the token more probability."""
    tokens = [token_label(t) for t in a.top_tokens[m]]
    diff = np.asarray(at_a.probs[m], dtype=float) - np.asarray(a.probs[m], dtype=float)
    custom = np.stack([a.probs[m], at_a.probs[m]], axis=1)
    bar = {"type": "bar", "orientation": "h", "x": diff, "y": list(range(len(tokens))), "customdata": custom,
           "hovertext": tokens, "marker": {"color": [theme.categorical[0] if d >= 0 else theme.categorical[3]
                                                      for d in diff]},
           "hovertemplate": f"%{{hovertext}}<br>{label(names[0])}: p = %{{customdata[0]:.4f}}<br>{label(names[1])}: "
                            "p = %{customdata[1]:.4f}<br>B − A = %{x:+.4f}<extra></extra>"}
    return figure([bar], {
        "title": {"text": f"{MASK} at token {a.positions[m]}: p({label(names[1])}) − p({label(names[0])})"},
        "xaxis": {"title": {"text": "B − A"}, "zeroline": True},
        "yaxis": {"tickvals": list(range(len(tokens))), "ticktext": tokens, "autorange": "reversed"},
        "height": 120 + 26 * len(tokens), "showlegend": False, "margin": {"l": 10}})


def largest_change(a: MaskedTrace, at_a: MaskedTrace) -> tuple[int, int, float]:
    """(mask, rank in A's top k, p_B − p_A) of the largest |p_B − p_A| among A's top tokens at every mask."""
    gap = np.asarray(at_a.probs, dtype=float) - np.asarray(a.probs, dtype=float)   # (M, k)
    m, j = np.unravel_index(int(np.abs(gap).argmax()), gap.shape)
    return int(m), int(j), float(gap[m, j])


def word_bars(traces: Sequence[MaskedTrace], names: Sequence[str], theme: Theme) -> go.Figure:
    """Grouped bars: the probability of each compared word (x) at every mask of each sentence (one colour per
    sentence and mask; a word that is not one token has no bar and reads "—"). Hover: word, probability, rank."""
    data: list[dict[str, object]] = []
    for trace, name in zip(traces, names):
        for m in range(len(trace)):
            series = name if len(trace) == 1 else f"{name}, {MASK} at token {trace.positions[m]}"
            probs = trace.word_probs[m]
            data.append({"type": "bar", "name": label(series), "x": [token_label(w) for w in trace.words],
                         "y": np.nan_to_num(probs), "customdata": trace.word_ranks[m],
                         "marker": {"color": theme.categorical[len(data) % len(theme.categorical)]},
                         "text": ["—" if np.isnan(p) else f"{p:.1%}" for p in probs], "textposition": "outside",
                         "cliponaxis": False, "hovertemplate": f"{label(series)}<br>%{{x}}: p = %{{y:.4f}}, rank "
                                                               "%{customdata:.0f}<extra></extra>"})
    return figure(data, {"title": {"text": f"The compared words at each {MASK}"}, "barmode": "group",
                         "yaxis": {"title": {"text": "p(word | context)"}, "rangemode": "tozero"},
                         "legend": {"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom"}, "height": 360})


def equation(trace: MaskedTrace, m: int = 0) -> str:
    """LaTeX: p(w) = e^{z_w − log Σ_v e^{z_v}} for the most probable token at mask m, with its numbers."""
    z, lse, p = float(trace.logits[m, 0]), float(trace.lse[m]), float(trace.probs[m, 0])
    return (rf"p(w_1 \mid \text{{context}}) = \frac{{e^{{z_{{w_1}}}}}}{{\sum_{{v=1}}^{{{trace.vocab_size}}} e^{{z_v}}}}"
            rf" = e^{{{z:.3f} - {lse:.3f}}} = {p:.4f}")
