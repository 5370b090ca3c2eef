"""Figures of the masked-word view: MaskedTrace -> top-k bars per mask, the compared words in two sentences side by
side, caption text and the softmax with its numbers. Tokens reach Plotly only through `token_label` (HTML-escaped)."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.probes.masked_words import MASK, MaskedTrace
from explorer.viz.lstm_gates import label, plain
from explorer.viz.theme import Theme, figure
from explorer.viz.tokens import labels

__all__ = ["fill_bars", "word_bars", "sentence_text", "token_text", "equation", "plain", "token_label"]


FOLD = 370  # the fill-in bars' height under the sentence captions in the first screen (explorer.ui.charts.show)


def token_label(token: str) -> str:
    """A vocabulary token as a chart label: Ġ / ▁ as a leading dot, surrounding spaces dropped, HTML-escaped."""
    text = str(token).strip() or str(token)
    return label(labels([text])[0])


def fill_bars(trace: MaskedTrace, m: int, theme: Theme, title: str = "") -> go.Figure:
    """Horizontal bars: the k most probable tokens at mask m (best on top), probability on x. Compared words among
    them are coloured apart. Hover: token, probability, logit z, rank."""
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
    top = float(trace.probs[m].max()) if k else 1.0
    return figure([bar], {
        "title": {"text": title or f"{MASK} at token {trace.positions[m]}: top {k} of {trace.vocab_size:,}"},
        "xaxis": {"title": {"text": "p(token | context)"}, "range": [0, min(1.0, top * 1.25 + 0.02)]},
        "yaxis": {"tickvals": list(range(k)), "ticktext": names, "autorange": "reversed"},
        "height": 120 + 26 * k, "showlegend": False, "margin": {"l": 10}})


def word_bars(traces: Sequence[MaskedTrace], names: Sequence[str], theme: Theme) -> go.Figure:
    """Grouped bars: the probability of each compared word (x) at every mask of each sentence (one colour per
    sentence and mask; a word that is not one token has no bar and reads "—"). Hover: word, probability, rank."""
    data = []
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
                         "legend": {"orientation": "h", "y": -0.2}, "height": 360})


def token_text(trace: MaskedTrace, m: int, rank: int = 0) -> str:
    """The token of the given rank at mask m, as text for a caption (spaces trimmed, Markdown characters escaped)."""
    return plain(str(trace.top_tokens[m][rank]).strip())


def sentence_text(trace: MaskedTrace) -> str:
    """The tokens as fed, separated by middle dots (for a caption; Markdown characters escaped)."""
    return plain(" · ".join(trace.tokens))


def equation(trace: MaskedTrace, m: int = 0) -> str:
    """LaTeX: p(w) = e^{z_w − log Σ_v e^{z_v}} for the most probable token at mask m, with its numbers."""
    z, lse, p = float(trace.logits[m, 0]), float(trace.lse[m]), float(trace.probs[m, 0])
    return (rf"p(w_1 \mid \text{{context}}) = \frac{{e^{{z_{{w_1}}}}}}{{\sum_{{v=1}}^{{{trace.vocab_size}}} e^{{z_v}}}}"
            rf" = e^{{{z:.3f} - {lse:.3f}}} = {p:.4f}")
