"""Figures of the word-embedding view: WebGL scatter of a projected vocabulary (Scattergl / Scatter3d), two-axis
views, contextual paths through the layers, and the per-layer similarity of one word in two sentences."""
from __future__ import annotations

import csv
import io
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np
import plotly.colors as pc
import plotly.graph_objects as go

from explorer.text.escape import latex_text, plotly_text
from explorer.viz.theme import Theme, figure

if TYPE_CHECKING:
    from explorer.probes.word_embeddings import Placed

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
    return ({c: palette[i % len(palette)] for i, c in enumerate(sorted(set(classes) - {NO_CLASS}))}
            | {NO_CLASS: "#9e9e9e"})


MAX_LEGEND = 12  # legend entries of a projection: the largest classes, then one entry for the rest
PROJECTOR_LEGEND = 7  # projector mode: the entries that fit beside a folded chart at 22 px (with "typed words")
OTHER_COLOUR = "#b0b0b0"


def legend_classes(classes: Sequence[str], most: int = MAX_LEGEND) -> tuple[dict[str, str], str | None]:
    """(class -> its legend entry, the name of the "rest" entry or None): each of the `most` - 1 largest classes
    (NO_CLASS counts as one) is its own entry, and the rest share one grey "n other classes" entry (a point's hover
    still names its class). Every class is its own entry when they fit."""
    counts = Counter(classes)
    if len(counts) <= most:
        return {c: c for c in counts}, None
    named = [c for c in counts if c != NO_CLASS]
    keep = set(sorted(named, key=lambda c: (-counts[c], c))[:most - 1 - (NO_CLASS in counts)])
    other = f"{len(named) - len(keep)} other classes"
    return {c: c if c in keep or c == NO_CLASS else other for c in counts}, other


def _scatter(dims: int, coords: np.ndarray, **kwargs) -> dict:
    """A scattergl (2-D) or scatter3d trace dict; coords (n, dims)."""
    if dims == 3:
        kwargs.pop("selected", None)
        return {"type": "scatter3d", "x": coords[:, 0], "y": coords[:, 1], "z": coords[:, 2], **kwargs}
    return {"type": "scattergl", "x": coords[:, 0], "y": coords[:, 1], **kwargs}


def projection_background(words: Sequence[str], classes: Sequence[str | None], coords: np.ndarray, theme: Theme,
                          title: str = "", axis_names: Sequence[str] = ("1", "2", "3"),
                          colour_by_class: bool = True, ranks: np.ndarray | None = None,
                          rank_label: str = "rank") -> go.Figure:
    """WebGL scatter of a projected vocabulary, one trace per word class; hover shows the word and its rank
    (ranks (N,), what `rank_label` says: frequency rank, token-id order...; default 1..N).
    coords (N, 2 or 3). Built once per fit: the typed words go on top as `typed_overlay`."""
    dims = coords.shape[1]
    cls = np.array([c or NO_CLASS for c in classes], dtype=object)
    words_arr = np.array([plotly_text(w) for w in words], dtype=object)
    most = MAX_LEGEND if theme.streamlit_theme else PROJECTOR_LEGEND
    shown, other = legend_classes(list(cls), most) if colour_by_class else ({}, None)
    legend = np.array([shown.get(c, c) for c in cls], dtype=object)  # the class, or "n other classes"
    groups = sorted(set(legend), key=lambda c: (c == NO_CLASS, c == other, c)) if colour_by_class else [None]
    colours = class_colours(sorted(set(legend) - {other}), theme) | ({other: OTHER_COLOUR} if other else {})
    small = max(2, theme.marker_size // 2 - (1 if len(words) > 5000 else 0))
    rank = np.asarray(ranks) if ranks is not None else np.arange(1, len(words) + 1)
    traces = []
    for group in groups:
        mask = legend == group if group is not None else np.ones(len(cls), dtype=bool)
        if not mask.any():
            continue
        name = group if group is not None else "vocabulary"
        colour = colours.get(group, OTHER_COLOUR) if group is not None else theme.categorical[4]
        hover = "<b>%{text}</b><br>" + ("class: %{customdata[1]}<br>" if group is not None else "") + \
            f"{rank_label}: %{{customdata[0]:,}}<extra></extra>"
        custom = np.stack([rank[mask].astype(object), cls[mask]], axis=1)
        traces.append(_scatter(dims, coords[mask], mode="markers", name=name, text=words_arr[mask].tolist(),
                               customdata=custom, hovertemplate=hover,
                               marker={"size": small if dims == 2 else max(2, small - 1), "color": colour,
                                       "opacity": 0.35 if group == NO_CLASS else 0.8}))
    names = list(axis_names)
    layout: dict = {"title": {"text": title}, "height": 640, "legend": {"itemsizing": "constant"}}
    if dims == 3:
        layout["scene"] = {f"{a}axis": {"title": {"text": names[i]}} for i, a in enumerate("xyz")}
    else:
        layout["xaxis"] = {"title": {"text": names[0]}}
        layout["yaxis"] = {"title": {"text": names[1]}}
    return figure(traces, layout)


LABEL_SIDES = ("top center", "bottom center", "middle right", "middle left", "top right", "bottom left")


def label_positions(coords: np.ndarray, near: float = 0.06) -> list[str]:
    """A text position for each point's label (coords (n, 2 or 3)) so that labels of close points do not overprint:
    each point, in order, takes the first side of LABEL_SIDES that no earlier point within `near` of the coordinate
    range (on the first two axes) has taken; e.g. "king" above and "queen", just beside it, below."""
    xy = np.asarray(coords, dtype=np.float64)[:, :2]
    span = np.ptp(xy, axis=0) if len(xy) else np.ones(2)
    span[span == 0] = 1.0
    unit = xy / span
    sides: list[str] = []
    for i in range(len(unit)):
        taken = {sides[j] for j in range(i) if np.abs(unit[j] - unit[i]).max() < near}
        sides.append(next((s for s in LABEL_SIDES if s not in taken), LABEL_SIDES[i % len(LABEL_SIDES)]))
    return sides


def typed_overlay(typed: Sequence[Point], dims: int, theme: Theme) -> go.Figure:
    """The typed words, labelled and larger (diamonds where placed by `transform`), as traces to draw over
    `projection_background` (explorer.ui.charts.show's overlay)."""
    traces = []
    for placed, symbol, label in ((PLACED_FIT, "circle", "typed words"),
                                  (PLACED_TRANSFORM, "diamond", "typed words (placed by transform)")):
        pts = [p for p in typed if p.placed == placed]
        if not pts:
            continue
        xyz = np.array([p.coords for p in pts], dtype=np.float32)
        traces.append(_scatter(dims, xyz, mode="markers+text", name=label, text=[plotly_text(p.label) for p in pts],
                               textposition=label_positions(xyz), hovertemplate="<b>%{text}</b> (typed, " + placed + ")"
                               + "<extra></extra>",
                               textfont={"size": theme.font_size + 2},
                               marker={"size": theme.marker_size + 5, "color": "#d62728", "symbol": symbol,
                                       "line": {"width": 1.5, "color": "black"}}))
    return figure(traces, {})


def axes_background(words: Sequence[str], coords: np.ndarray, x_label: str, y_label: str, theme: Theme) -> go.Figure:
    """Two-axis view: the vocabulary as faint points, with dotted lines at 0 and 1 on both axes. coords (N, 2)."""
    lines = [{"type": "line", "xref": "x" if d == "x" else "paper", "yref": "y" if d == "y" else "paper",
              "x0": v if d == "x" else 0, "x1": v if d == "x" else 1, "y0": v if d == "y" else 0,
              "y1": v if d == "y" else 1, "line": {"dash": "dot", "color": "#777"}}
             for v in (0.0, 1.0) for d in ("x", "y")]
    return figure([{"type": "scattergl", "x": coords[:, 0], "y": coords[:, 1], "mode": "markers", "name": "vocabulary",
                    "text": [plotly_text(w) for w in words],
                    "hovertemplate": "<b>%{text}</b><br>x = %{x:.3f}<br>y = %{y:.3f}<extra></extra>",
                    "marker": {"size": max(3, theme.marker_size // 2), "color": "#9e9e9e", "opacity": 0.5}}],
                  {"height": 560, "shapes": lines, "xaxis": {"title": {"text": x_label}},
                   "yaxis": {"title": {"text": y_label}}})


def axes_overlay(typed: Sequence[tuple[str, float, float]], theme: Theme) -> go.Figure:
    """The typed words (label, x, y) to draw over `axes_background`."""
    if not typed:
        return figure([], {})
    return figure([{"type": "scattergl", "x": [t[1] for t in typed], "y": [t[2] for t in typed],
                    "mode": "markers+text", "name": "typed words", "text": [plotly_text(t[0]) for t in typed],
                    "textposition": "top center", "textfont": {"size": theme.font_size + 2},
                    "hovertemplate": "<b>%{text}</b><br>x = %{x:.3f}<br>y = %{y:.3f}<extra></extra>",
                    "marker": {"size": theme.marker_size + 4, "color": "#d62728"}}], {})


def context_figure(tokens: Sequence[str], layer_names: Sequence[str], coords: np.ndarray, layer: int,
                   special: Sequence[bool], theme: Theme) -> go.Figure:
    """Each token's path through the layers (coords (L+1, T, 2): the embeddings, then after each layer; names in
    `layer_names`); the selected state's points labelled."""
    L1, T, _ = coords.shape
    traces = []
    scale = pc.sample_colorscale(theme.sequential, [i / max(1, L1 - 1) for i in range(L1)])
    for t in range(T):
        if special[t] or np.isnan(coords[:, t, 0]).all():
            continue
        traces.append({"type": "scatter", "x": coords[:, t, 0], "y": coords[:, t, 1], "mode": "lines",
                       "showlegend": False, "line": {"color": "rgba(128,128,128,0.45)", "width": 1},
                       "hoverinfo": "skip"})
    for li in range(L1):
        keep = [t for t in range(T) if not special[t] and not np.isnan(coords[li, t, 0])]
        if not keep:
            continue
        selected = li == layer
        traces.append({
            "type": "scatter", "x": coords[li, keep, 0], "y": coords[li, keep, 1],
            "mode": "markers+text" if selected else "markers", "name": layer_names[li],
            "text": [plotly_text(tokens[t]) for t in keep], "textposition": "top center", "customdata": np.array(keep),
            "hovertemplate": "<b>%{text}</b> (token %{customdata})<br>" + layer_names[li] + "<extra></extra>",
            "marker": {"size": theme.marker_size + (6 if selected else 0), "color": scale[li],
                       "line": {"width": 1.5 if selected else 0, "color": "black"}},
        })
    return figure(traces, {"height": 560, "legend": {"title": {"text": "hidden state"}},
                           "xaxis": {"title": {"text": "PC 1"}}, "yaxis": {"title": {"text": "PC 2"}}})


def drift_figure(layer_names: Sequence[str], cos: np.ndarray, word: str, theme: Theme) -> go.Figure:
    """Cosine similarity of one word in two sentences per hidden state (the embeddings, then after each layer;
    line chart)."""
    return figure([{"type": "scatter", "x": list(layer_names), "y": [float(c) for c in cos], "mode": "lines+markers",
                    "name": plotly_text(word), "hovertemplate": "%{x}: cos = %{y:.4f}<extra></extra>",
                    "marker": {"size": theme.marker_size}}],
                  {"height": 380, "xaxis": {"title": {"text": "hidden state"}},
                   "yaxis": {"title": {"text": f"cos('{plotly_text(word)}' in A, '{plotly_text(word)}' in B)"},
                             "range": [min(0.0, float(np.min(cos)) - 0.05), 1.02]}})


def coords_csv(words: Sequence[str], classes: Sequence[str | None], coords: np.ndarray,
               typed: Sequence[Point] = (), ranks: np.ndarray | None = None, rank_label: str = "rank") -> str:
    """CSV of the projection: word, class, rank (what rank_label says), x, y[, z], typed, placed."""
    dims = coords.shape[1]
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["word", "class", rank_label.replace(" ", "_").replace("-", "_"), *"xyz"[:dims], "typed", "placed"])
    ranks = np.asarray(ranks) if ranks is not None else np.arange(1, len(words) + 1)
    typed_labels = {p.label for p in typed if p.placed == PLACED_FIT}
    for i, (word, cls) in enumerate(zip(words, classes)):
        w.writerow([word, cls or "", int(ranks[i]), *(f"{v:.6g}" for v in coords[i]), int(word in typed_labels),
                    "fitted"])
    for p in typed:
        if p.placed == PLACED_TRANSFORM:
            w.writerow([p.label, "", "", *(f"{v:.6g}" for v in p.coords), 1, "transform"])
    return out.getvalue()


def ranked_rows(words: Sequence[str], cos: Sequence[float]) -> list[dict]:
    return [{"rank": i + 1, "word": w, "cosine": round(float(c), 4)} for i, (w, c) in enumerate(zip(words, cos))]


def compared_rows(words: Sequence[str], cos_a: Sequence[float], cos_b: Sequence[float],
                  names: tuple[str, str]) -> list[dict]:
    """The first model's neighbours with their cosine in both models and B − A (blank where B lacks the entry)."""
    def num(x: float) -> float | None:
        return None if np.isnan(x) else round(float(x), 4)

    return [{"rank": i + 1, "word": w, f"cos in {names[0]}": num(a), f"cos in {names[1]}": num(b),
             "B − A": num(b - a)} for i, (w, a, b) in enumerate(zip(words, cos_a, cos_b))]


def points(placed: Placed) -> list[Point]:
    """The typed words of a probes.embeddings.Placed as markers: fitted rows, and rows placed by transform."""
    return [Point(w, xyz, PLACED_FIT) for w, xyz in placed.fit] + \
        [Point(w, xyz, PLACED_TRANSFORM) for w, xyz in placed.transformed]


def axis_points(words: Sequence[str], coords: np.ndarray) -> list[tuple[str, float, float]]:
    """(word, x, y) of typed words on the two-axis view."""
    return [(w, float(p[0]), float(p[1])) for w, p in zip(words, coords)]


def tex(word: str | None) -> str:
    """A word inside \\text{} in st.latex (LaTeX's special characters escaped, at most 40 characters)."""
    return latex_text(str(word or "")[:40])
