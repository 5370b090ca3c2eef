"""Figures of the logit lens: the layers × positions grid of top tokens, and one cell's top-k bars."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go

from explorer.text.escape import plotly_text
from explorer.viz.theme import CHAR_EM, Theme, figure, ink, plot_px
from explorer.viz.tokens import chart_labels, fit_label, labels, ticks

if TYPE_CHECKING:
    from explorer.probes.logit_lens import LensTrace


def numbering(layers: tuple[str, ...]) -> str:
    """How the rows are numbered, in words (layer l is transformer block l, counted from 0)."""
    if not layers:
        return ""
    if all(name.startswith("layer ") for name in layers):
        return (f"Layers count from 0: layer l is the output of transformer block l, from {layers[0]} (the first "
                f"block) to {layers[-1]} (the last, read as the model reads it).")
    return f"Layers count from 0: {', '.join(layers)}."


MAIN_ROWS = 12  # layers the main grid shows at most (a 30-layer model's grid would not fit in the first screen)


def grid_rows(n_layers: int, selected: int | None = None, most: int = MAIN_ROWS) -> list[int]:
    """The layers the main grid shows: all of them up to `most`, else every k-th counted down from the last one
    (which is the model's output), with the selected layer; ascending."""
    if n_layers <= most:
        return list(range(n_layers))
    stride = -(-n_layers // (most - 1))  # ceil: room left for the selected layer
    rows = set(range(n_layers - 1, -1, -stride)) | ({selected} if selected is not None else set())
    return sorted(r for r in rows if 0 <= r < n_layers)


def cell_text(text: list[list[str]], z: np.ndarray, y: list[str], colorscale: str, size: int) -> dict:
    """A text-only trace over a heatmap of values in [0, 1] (L, T): each cell's text in black or white by the
    luminance of its own colour (a heatmap's texttemplate draws every cell in one colour: grey on grey)."""
    cells = [(t, row, text[i][t], ink(colorscale, float(z[i, t]))) for i, row in enumerate(y)
             for t in range(len(text[i]))]
    return {"type": "scatter", "mode": "text", "x": [c[0] for c in cells], "y": [c[1] for c in cells],
            "text": [c[2] for c in cells], "textfont": {"size": size, "color": [c[3] for c in cells]},
            "hoverinfo": "skip", "showlegend": False}


def lens_grid(trace: LensTrace, theme: Theme, selected: tuple[int, int] | None = None,
              rows: list[int] | None = None, named: bool = False) -> go.Figure:
    """Rows: layers (last on top, named "layer l": the output of block l, from 0; `rows`: the layers to show,
    default all); columns: input positions. Cell text: the layer's top next token; colour: its probability; hover:
    the model's own final prediction there, with its rank and probability after that layer. named: the model's id in
    the title (two models side by side)."""
    rows = list(range(trace.top_probs.shape[0])) if rows is None else list(rows)
    L, T = len(rows), trace.top_probs.shape[1]
    final, inputs = chart_labels(trace.final_tokens), chart_labels(trace.tokens)
    custom = np.empty((L, T, 4), dtype=object)
    for i, layer in enumerate(rows):
        for t in range(T):
            custom[i, t] = (final[t], int(trace.final_rank[layer, t]) + 1, float(trace.final_prob[layer, t]),
                            inputs[t])
    text = [chart_labels(trace.top_tokens[layer]) for layer in rows]  # whole in the hover
    size = max(9, theme.font_size - 3)
    room = int(0.85 * plot_px(0.5 if named else 1) / T / (1.2 * CHAR_EM * size))  # characters a cell holds
    shown = [[plotly_text(fit_label(t, room)) for t in labels(trace.top_tokens[layer])] for layer in rows]
    every = len(rows) < trace.top_probs.shape[0]
    names = [trace.layers[layer] for layer in rows]
    z = trace.top_probs[rows]
    data = [{"type": "heatmap", "z": z, "text": text, "customdata": custom, "zmin": 0.0, "zmax": 1.0,
             "colorscale": theme.sequential, "colorbar": {"title": {"text": "p(top)"}},
             "hovertemplate": "after %{y}, at “%{customdata[3]}”<br>top next token: <b>%{text}</b> p = %{z:.4f}"
                              "<br>the model's prediction “%{customdata[0]}”: rank %{customdata[1]}, "
                              "p = %{customdata[2]:.4f}<extra></extra>",
             "x": list(range(T)), "y": names},
            cell_text(shown, z, names, theme.sequential, size)]
    title = "Logit lens: each layer's most probable next token" + \
        (f" ({L} of {trace.top_probs.shape[0]} layers)" if every else "")
    if named:
        title = f"{plotly_text(trace.model_id)}: {title}"
    layout = {"title": {"text": title},
              "height": max(260, 60 * L + 160), "xaxis": {**ticks(trace.tokens), "title": {"text": "after token"}},
              "yaxis": {"title": {"text": "after layer (from 0)"}, "type": "category"}}
    if selected is not None and selected[0] in rows:
        i, t = rows.index(selected[0]), selected[1]
        layout["shapes"] = [{"type": "rect", "x0": t - 0.5, "x1": t + 0.5, "y0": i - 0.5, "y1": i + 0.5,
                             "line": {"color": theme.categorical[5], "width": theme.line_width + 1}}]
    return figure(data, layout)


def lens_bars(tokens: tuple[str, ...], probs: np.ndarray, title: str, theme: Theme, mark: str = "") -> go.Figure:
    """The top-k next tokens of one cell; the model's own final prediction (mark) outlined."""
    names = chart_labels(tokens)
    colours = [theme.categorical[5] if t == mark else theme.categorical[4] for t in tokens]
    return figure([{"type": "bar", "x": list(range(len(names))), "y": probs, "text": names, "textposition": "outside",
                    "marker": {"color": colours}, "cliponaxis": False,
                    "hovertemplate": "%{text}: p = %{y:.4f}<extra></extra>"}],
                  {"title": {"text": title}, "height": 360, "showlegend": False,
                   "xaxis": {"tickvals": list(range(len(names))), "ticktext": names, "title": {"text": "token"}},
                   "yaxis": {"title": {"text": "probability"}, "rangemode": "tozero"}})


def tracked_difference(a: LensTrace, b_prob: np.ndarray, b_id: str, theme: Theme) -> go.Figure:
    """Layers × positions: the probability model B's lens gives to model A's own prediction at each position, minus
    A's (a: A's LensTrace; b_prob (L, T), explorer.probes.logit_lens.probability_of), from −1 to 1."""
    z = np.asarray(b_prob, dtype=np.float32) - np.asarray(a.final_prob, dtype=np.float32)
    final, inputs = chart_labels(a.final_tokens), chart_labels(a.tokens)
    custom = [[[final[t], inputs[t]] for t in range(z.shape[1])] for _ in range(z.shape[0])]
    return figure([{"type": "heatmap", "z": z, "customdata": custom, "zmin": -1.0, "zmid": 0.0, "zmax": 1.0,
                    "colorscale": theme.diverging, "colorbar": {"title": {"text": "B − A"}},
                    "x": list(range(z.shape[1])), "y": list(a.layers),
                    "hovertemplate": "after %{y}, at “%{customdata[1]}”<br>p(“%{customdata[0]}”): B − A = "
                                     "%{z:.4f}<extra></extra>"}], {
        "title": {"text": f"p of {plotly_text(a.model_id)}'s prediction: {plotly_text(b_id)} − "
                          f"{plotly_text(a.model_id)}"},
        "height": max(260, 60 * z.shape[0] + 160), "xaxis": {**ticks(a.tokens), "title": {"text": "after token"}},
        "yaxis": {"title": {"text": "after layer (from 0)"}, "type": "category"}})


def tracked_gap(a: LensTrace, b_prob: np.ndarray) -> float:
    """max |B − A| of tracked_difference."""
    return float(np.abs(np.asarray(b_prob) - np.asarray(a.final_prob)).max())
