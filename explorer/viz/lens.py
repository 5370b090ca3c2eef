"""Figures of the logit lens: the layers × positions grid of top tokens, and one cell's top-k bars."""
from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go

from explorer.viz.theme import Theme, figure
from explorer.viz.tokens import labels, ticks


def lens_grid(trace: Any, theme: Theme, selected: tuple[int, int] | None = None) -> go.Figure:
    """Rows: layers (last on top); columns: input positions. Cell text: the layer's top next token; colour: its
    probability; hover: the model's own final prediction there, with its rank and probability at that layer."""
    L, T = trace.top_probs.shape
    final = labels(trace.final_tokens)
    custom = np.empty((L, T, 3), dtype=object)
    for layer in range(L):
        for t in range(T):
            custom[layer, t] = (final[t], int(trace.final_rank[layer, t]) + 1, float(trace.final_prob[layer, t]))
    text = [labels(row) for row in trace.top_tokens]
    data = [{"type": "heatmap", "z": trace.top_probs, "text": text, "texttemplate": "%{text}",
             "textfont": {"size": max(9, theme.font_size - 3)}, "customdata": custom, "zmin": 0.0, "zmax": 1.0,
             "colorscale": theme.sequential, "colorbar": {"title": {"text": "p(top)"}},
             "hovertemplate": "%{y} · after “%{x}”<br>top: <b>%{text}</b> p = %{z:.4f}<br>the model's prediction "
                              "“%{customdata[0]}”: rank %{customdata[1]}, p = %{customdata[2]:.4f}<extra></extra>",
             "x": list(range(T)), "y": list(trace.layers)}]
    layout = {"title": {"text": "Logit lens: each layer's most probable next token"},
              "height": max(260, 60 * L + 160), "xaxis": {**ticks(trace.tokens), "title": {"text": "after token"}},
              "yaxis": {"title": {"text": "layer"}}}
    if selected is not None:
        layer, t = selected
        layout["shapes"] = [{"type": "rect", "x0": t - 0.5, "x1": t + 0.5, "y0": layer - 0.5, "y1": layer + 0.5,
                             "line": {"color": theme.categorical[5], "width": theme.line_width + 1}}]
    return figure(data, layout)


def lens_bars(tokens: tuple[str, ...], probs: np.ndarray, title: str, theme: Theme, mark: str = "") -> go.Figure:
    """The top-k next tokens of one cell; the model's own final prediction (mark) outlined."""
    names = labels(tokens)
    colours = [theme.categorical[5] if t == mark else theme.categorical[4] for t in tokens]
    return figure([{"type": "bar", "x": list(range(len(names))), "y": probs, "text": names, "textposition": "outside",
                    "marker": {"color": colours}, "cliponaxis": False,
                    "hovertemplate": "%{text}: p = %{y:.4f}<extra></extra>"}],
                  {"title": {"text": title}, "height": 360, "showlegend": False,
                   "xaxis": {"tickvals": list(range(len(names))), "ticktext": names, "title": {"text": "token"}},
                   "yaxis": {"title": {"text": "probability"}, "rangemode": "tozero"}})
