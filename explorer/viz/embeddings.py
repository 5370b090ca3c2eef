"""Figures of the word-embedding view: WebGL scatter of a projected vocabulary (Scattergl / Scatter3d), two-axis
views, contextual paths through the layers, and the per-layer similarity of one word in two sentences."""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import plotly.colors as pc
import plotly.graph_objects as go

from explorer.viz.theme import Theme

NO_CLASS = "(no class)"
PLACED_FIT = "fitted"
PLACED_TRANSFORM = "transform"


@dataclass(frozen=True)
class Point:
    """A typed word in the projection: label, coordinates (dims,), how it was placed (fitted / transform)."""

    label: str
    coords: tuple[float, ...]
    placed: str


def class_colours(classes: Sequence[str], theme: Theme) -> dict[str, str]:
    palette = list(theme.categorical) + list(pc.qualitative.Dark24) + list(pc.qualitative.Light24)
    return {c: palette[i % len(palette)] for i, c in enumerate(sorted(set(classes) - {NO_CLASS}))} | {NO_CLASS: "#9e9e9e"}


def _scatter(dims: int, coords: np.ndarray, **kwargs) -> go.BaseTraceType:
    if dims == 3:
        kwargs.pop("selected", None)
        return go.Scatter3d(x=coords[:, 0], y=coords[:, 1], z=coords[:, 2], **kwargs)
    return go.Scattergl(x=coords[:, 0], y=coords[:, 1], **kwargs)


def projection_figure(words: Sequence[str], classes: Sequence[str | None], coords: np.ndarray, typed: Sequence[Point],
                      theme: Theme, title: str = "", axis_names: Sequence[str] = ("1", "2", "3"),
                      colour_by_class: bool = True) -> go.Figure:
    """WebGL scatter of the background (one trace per word class; hover shows the word) and the typed words
    (labelled, larger; diamonds where placed by `transform`). coords: (N, 2 or 3)."""
    dims = coords.shape[1]
    fig = go.Figure()
    cls = np.array([c or NO_CLASS for c in classes], dtype=object)
    words_arr = np.array(list(words), dtype=object)
    groups = sorted(set(cls), key=lambda c: (c == NO_CLASS, c)) if colour_by_class else [None]
    colours = class_colours(list(cls), theme)
    small = max(2, theme.marker_size // 2 - (1 if len(words) > 5000 else 0))
    rank = np.arange(1, len(words) + 1)
    for group in groups:
        mask = cls == group if group is not None else np.ones(len(cls), dtype=bool)
        if not mask.any():
            continue
        name = group if group is not None else "vocabulary"
        colour = colours.get(group, "#7f7f7f") if group is not None else theme.categorical[4]
        hover = "<b>%{text}</b><br>" + (f"class: {name}<br>" if group is not None else "") + \
            "frequency rank: %{customdata:,}<extra></extra>"
        fig.add_trace(_scatter(dims, coords[mask], mode="markers", name=name, text=words_arr[mask],
                               customdata=rank[mask], hovertemplate=hover,
                               marker={"size": small if dims == 2 else max(2, small - 1), "color": colour,
                                       "opacity": 0.35 if group == NO_CLASS else 0.8}))
    for placed, symbol, label in ((PLACED_FIT, "circle", "typed words"),
                                  (PLACED_TRANSFORM, "diamond", "typed words (placed by transform)")):
        pts = [p for p in typed if p.placed == placed]
        if not pts:
            continue
        xyz = np.array([p.coords for p in pts], dtype=np.float32)
        fig.add_trace(_scatter(dims, xyz, mode="markers+text", name=label, text=[p.label for p in pts],
                               textposition="top center", hovertemplate="<b>%{text}</b> (typed, " + placed + ")"
                               + "<extra></extra>",
                               textfont={"size": theme.font_size + 2},
                               marker={"size": theme.marker_size + 5, "color": "#d62728", "symbol": symbol,
                                       "line": {"width": 1.5, "color": "black"}}))
    names = list(axis_names)
    if dims == 3:
        fig.update_layout(scene={"xaxis_title": names[0], "yaxis_title": names[1], "zaxis_title": names[2]})
    else:
        fig.update_xaxes(title=names[0])
        fig.update_yaxes(title=names[1])
    fig.update_layout(title=title, height=640, legend={"itemsizing": "constant"})
    return fig


def axes_figure(words: Sequence[str], coords: np.ndarray, typed: Sequence[tuple[str, float, float]],
                x_label: str, y_label: str, theme: Theme) -> go.Figure:
    """Two-axis view: the background as faint points, typed words labelled. coords (N, 2)."""
    fig = go.Figure()
    fig.add_trace(go.Scattergl(x=coords[:, 0], y=coords[:, 1], mode="markers", name="vocabulary", text=list(words),
                               hovertemplate="<b>%{text}</b><br>x = %{x:.3f}<br>y = %{y:.3f}<extra></extra>",
                               marker={"size": max(3, theme.marker_size // 2), "color": "#9e9e9e", "opacity": 0.5}))
    if typed:
        fig.add_trace(go.Scattergl(x=[t[1] for t in typed], y=[t[2] for t in typed], mode="markers+text",
                                   name="typed words", text=[t[0] for t in typed], textposition="top center",
                                   textfont={"size": theme.font_size + 2},
                                   hovertemplate="<b>%{text}</b><br>x = %{x:.3f}<br>y = %{y:.3f}<extra></extra>",
                                   marker={"size": theme.marker_size + 4, "color": "#d62728"}))
    for value in (0.0, 1.0):
        fig.add_vline(x=value, line_dash="dot", line_color="#777")
        fig.add_hline(y=value, line_dash="dot", line_color="#777")
    fig.update_xaxes(title=x_label)
    fig.update_yaxes(title=y_label)
    fig.update_layout(height=560)
    return fig


def context_figure(tokens: Sequence[str], layer_names: Sequence[str], coords: np.ndarray, layer: int,
                   special: Sequence[bool], theme: Theme) -> go.Figure:
    """Each token's path through the layers (coords (L+1, T, 2)); the selected layer's points labelled."""
    L1, T, _ = coords.shape
    fig = go.Figure()
    scale = pc.sample_colorscale(theme.sequential, [i / max(1, L1 - 1) for i in range(L1)])
    for t in range(T):
        if special[t] or np.isnan(coords[:, t, 0]).all():
            continue
        fig.add_trace(go.Scatter(x=coords[:, t, 0], y=coords[:, t, 1], mode="lines", showlegend=False,
                                 line={"color": "rgba(128,128,128,0.45)", "width": 1}, hoverinfo="skip"))
    for li in range(L1):
        keep = [t for t in range(T) if not special[t] and not np.isnan(coords[li, t, 0])]
        if not keep:
            continue
        selected = li == layer
        fig.add_trace(go.Scatter(
            x=coords[li, keep, 0], y=coords[li, keep, 1], mode="markers+text" if selected else "markers",
            name=layer_names[li], text=[tokens[t] for t in keep], textposition="top center",
            customdata=np.array(keep), hovertemplate="<b>%{text}</b> (token %{customdata})<br>" + layer_names[li]
            + "<extra></extra>",
            marker={"size": theme.marker_size + (6 if selected else 0), "color": scale[li],
                    "line": {"width": 1.5 if selected else 0, "color": "black"}},
        ))
    fig.update_xaxes(title="PC 1")
    fig.update_yaxes(title="PC 2")
    fig.update_layout(height=560, legend_title_text="layer")
    return fig


def drift_figure(layer_names: Sequence[str], cos: np.ndarray, word: str, theme: Theme) -> go.Figure:
    """Cosine similarity per layer of one word in two sentences (line chart)."""
    fig = go.Figure(go.Scatter(x=list(layer_names), y=[float(c) for c in cos], mode="lines+markers", name=word,
                               hovertemplate="%{x}: cos = %{y:.4f}<extra></extra>",
                               marker={"size": theme.marker_size}))
    fig.update_yaxes(title=f"cos('{word}' in A, '{word}' in B)", range=[min(0.0, float(np.min(cos)) - 0.05), 1.02])
    fig.update_xaxes(title="layer")
    fig.update_layout(height=380)
    return fig


def coords_csv(words: Sequence[str], classes: Sequence[str | None], coords: np.ndarray,
               typed: Sequence[Point] = ()) -> str:
    """CSV of the projection: word, class, rank, x, y[, z], typed, placed."""
    dims = coords.shape[1]
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["word", "class", "frequency_rank", *"xyz"[:dims], "typed", "placed"])
    typed_labels = {p.label for p in typed if p.placed == PLACED_FIT}
    for i, (word, cls) in enumerate(zip(words, classes)):
        w.writerow([word, cls or "", i + 1, *(f"{v:.6g}" for v in coords[i]), int(word in typed_labels), "fitted"])
    for p in typed:
        if p.placed == PLACED_TRANSFORM:
            w.writerow([p.label, "", "", *(f"{v:.6g}" for v in p.coords), 1, "transform"])
    return out.getvalue()


def ranked_rows(words: Sequence[str], cos: Sequence[float]) -> list[dict]:
    return [{"rank": i + 1, "word": w, "cosine": round(float(c), 4)} for i, (w, c) in enumerate(zip(words, cos))]
