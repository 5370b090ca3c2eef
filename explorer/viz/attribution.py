"""Figures of token attribution: outputs × inputs heatmap, and one output's inputs as coloured text."""
from __future__ import annotations

import html
from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.viz.theme import Theme, figure
from explorer.viz.tokens import labels, ticks


def attribution_heatmap(values: np.ndarray, inputs: Sequence[str], outputs: Sequence[str], method: str,
                        theme: Theme, selected: int | None = None) -> go.Figure:
    """values (M, N): rows are the output tokens attributed, columns the input tokens; signed, diverging colours
    centred on 0 (red: raises the output's logit, blue: lowers it)."""
    M, N = values.shape
    peak = float(np.abs(values).max()) or 1.0
    out = labels(outputs)
    data = [{"type": "heatmap", "z": values, "x": list(range(N)), "y": list(range(M)), "zmin": -peak, "zmax": peak,
             "colorscale": theme.diverging, "colorbar": {"title": {"text": method}},
             "customdata": [[labels([inputs[j]])[0] for j in range(N)] for _ in range(M)],
             "hovertemplate": "output %{y}: “%{text}”<br>input %{x}: “%{customdata}”<br>%{z:.4f}<extra></extra>",
             "text": [[out[i]] * N for i in range(M)]}]
    layout = {"title": {"text": f"{method}: each output (row) onto the inputs"},
              "height": int(min(2000, max(320, 24 * M + 160))), "xaxis": {**ticks(inputs), "title": {"text": "input"}},
              "yaxis": {**ticks(out), "autorange": "reversed", "title": {"text": "output"}}}
    if selected is not None:
        layout["shapes"] = [{"type": "rect", "xref": "paper", "x0": 0, "x1": 1, "y0": selected - 0.5,
                             "y1": selected + 0.5, "line": {"color": theme.categorical[5], "width": theme.line_width}}]
    return figure(data, layout)


def attribution_html(inputs: Sequence[str], values: np.ndarray, reach: int) -> str:
    """The input tokens coloured by their attribution to one output (red +, blue −, opacity ∝ |value| / max);
    tokens beyond `reach` cannot influence it and are grey."""
    peak = float(np.abs(values[:reach]).max()) or 1.0
    parts = []
    for j, (tok, v) in enumerate(zip(labels(inputs), values)):
        if j >= reach:
            style = "opacity:0.35"
        else:
            a = min(1.0, abs(float(v)) / peak)
            colour = f"rgba(214,39,40,{0.1 + 0.7 * a:.2f})" if v >= 0 else f"rgba(31,119,180,{0.1 + 0.7 * a:.2f})"
            style = f"background:{colour}; border-radius:3px; padding:0 3px"
        parts.append(f"<span title='{float(v):+.4f}' style='{style}'>{html.escape(tok)}</span>")
    return "<div style='line-height:2.2; overflow-wrap:anywhere'>" + " ".join(parts) + "</div>"
