"""Figures of the interventions view: a grid of restored fractions (layer × position or layer × head), exact
patching against its attribution estimate, and the next tokens before and after an ablation."""
from __future__ import annotations

import html

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.probes.interventions import Ablation, PatchGrid
from explorer.text.escape import plotly_text
from explorer.viz.theme import Theme, figure
from explorer.viz.tokens import chart_labels

MAX_NAMED_ROWS = 16  # rows named on the axis ("before layer 3"); deeper grids are numbered
SCALE = 1.0  # the default colour range: restored fractions in [−1, 1] (values beyond keep the end colour)


def columns(grid: PatchGrid, corrupt_tokens: Sequence[str]) -> list[str]:
    """Column labels: heads as they are; positions as the clean token, "clean/corrupted" where the prompts differ."""
    if grid.kind == "heads":
        return list(grid.cols)
    clean, corrupt = chart_labels(grid.cols), chart_labels(corrupt_tokens)
    return [a if a == b else f"{a}/{b}" for a, b in zip(clean, corrupt)]


def colour_range(grid: PatchGrid, how: str = "1") -> float:
    """The half-width of the colour scale: 1 (restored fractions), or "fit": the grid's largest |value|."""
    if how != "fit":
        return SCALE
    finite = np.abs(grid.restored[np.isfinite(grid.restored)])
    return float(finite.max()) if finite.size and finite.max() > 0 else SCALE


def restored_grid(grid: PatchGrid, labels: Sequence[str], title: str, theme: Theme,
                  selected: tuple[int, int] | None = None, scale: float = SCALE) -> go.Figure:
    """grid.restored (R, K): rows are layers (the first at the bottom), columns positions or heads; the theme's
    diverging colours from −scale to scale centred on 0; hover: the restored fraction and the patched logit
    difference."""
    R, K = grid.restored.shape
    custom = np.empty((R, K, 4), dtype=object)
    for i in range(R):
        for j in range(K):
            pp = grid.probabilities(i, j)
            probs = "" if pp is None else f"<br>p(answer) {pp[0]:.4f}, p(wrong) {pp[1]:.4f}"
            custom[i, j] = (labels[j], float(grid.values[i, j]), grid.rows[i], probs)
    named = R <= MAX_NAMED_ROWS  # a deep model's rows are numbered (layer l), so that they fit in the first screen
    show_text = named and R * K <= 240  # a value in every cell only where the cells are large enough to read
    rows = list(grid.rows) if named else list(range(R))
    data: list[dict[str, object]]  # a cell's text is added below
    data = [{"type": "heatmap", "z": grid.restored, "x": list(range(K)), "y": rows,
             "zmin": -scale, "zmax": scale, "colorscale": theme.diverging, "customdata": custom,
             "colorbar": {"title": {"text": "restored"}},
             "hovertemplate": "%{customdata[2]}, %{customdata[0]}<br>restored %{z:.3f}<br>patched logit "
                              "difference %{customdata[1]:.3f}%{customdata[3]}<extra></extra>"}]
    if show_text:
        data[0]["text"] = [[f"{v:.2f}".replace("-0.00", "0.00") for v in row] for row in grid.restored]
        data[0]["texttemplate"] = "%{text}"
        data[0]["textfont"] = {"size": max(9, theme.font_size - 4)}
    layout: dict[str, object] = {
        "title": {"text": title}, "height": int(min(1400, max(300, 22 * R + 170))),
        "xaxis": {"tickvals": list(range(K)), "ticktext": list(labels), "title": {"text": "head" if grid.kind == "heads"
                                                                                   else "position (clean/corrupted)"}},
        "yaxis": {"type": "category", "title": {"text": "layer (from 0)"}} if named else
                 {"title": {"text": _numbered_axis(grid)}, "range": [-0.5, R - 0.5]}}
    if selected is not None and 0 <= selected[0] < R and 0 <= selected[1] < K:
        i, j = selected
        layout["shapes"] = [{"type": "rect", "x0": j - 0.5, "x1": j + 0.5, "y0": i - 0.5, "y1": i + 0.5,
                             "line": {"color": theme.categorical[7 if theme.name == "projector" else 5],
                                      "width": theme.line_width + 1}}]
    return figure(data, layout)


def difference_grid(a: PatchGrid, b: PatchGrid, labels: Sequence[str], names: tuple[str, str],
                    theme: Theme) -> go.Figure:
    """b.restored − a.restored (R, K): two models' grids of the same site, direction and cells (same rows and
    columns), on a diverging scale from −2 to 2 (the difference of two fractions of about −1…1); hover: both."""
    R, K = a.restored.shape
    diff = np.asarray(b.restored, dtype=float) - np.asarray(a.restored, dtype=float)
    custom = np.stack([np.asarray(a.restored, dtype=float), np.asarray(b.restored, dtype=float)], axis=-1)
    named = R <= MAX_NAMED_ROWS
    data = [{"type": "heatmap", "z": diff, "x": list(range(K)), "y": list(a.rows) if named else list(range(R)),
             "zmin": -2 * SCALE, "zmax": 2 * SCALE, "colorscale": theme.diverging, "customdata": custom,
             "colorbar": {"title": {"text": "B − A"}},
             "hovertemplate": f"%{{y}}, %{{x}}<br>{html.escape(names[0])}: restored %{{customdata[0]:.3f}}<br>"
                              f"{html.escape(names[1])}: restored %{{customdata[1]:.3f}}<br>B − A %{{z:+.3f}}"
                              "<extra></extra>"}]
    if named and R * K <= 240:
        data[0]["text"] = [[f"{v:+.2f}".replace("-0.00", "0.00").replace("+0.00", "0.00") for v in row] for row in diff]
        data[0]["texttemplate"] = "%{text}"
        data[0]["textfont"] = {"size": max(9, theme.font_size - 4)}
    return figure(data, {
        "title": {"text": f"restored: {html.escape(names[1])} − {html.escape(names[0])}"},
        "height": int(min(1400, max(300, 22 * R + 170))),
        "xaxis": {"tickvals": list(range(K)), "ticktext": list(labels),
                  "title": {"text": "head" if a.kind == "heads" else "position (clean/corrupted)"}},
        "yaxis": {"type": "category", "title": {"text": "layer (from 0)"}} if named else
                 {"title": {"text": _numbered_axis(a)}, "range": [-0.5, R - 0.5]}})


def _numbered_axis(grid: PatchGrid) -> str:
    """The y axis title of a grid whose rows are numbered (short: the axis is the chart's height)."""
    return "before layer" if grid.kind == "resid" else "layer"


def rows_note(grid: PatchGrid) -> str:
    """What a numbered grid's rows are, for the caption under it ("" when the rows are named on the axis)."""
    if len(grid.rows) <= MAX_NAMED_ROWS:
        return ""
    if grid.kind == "resid":
        return (f"Row l is the residual stream before layer l (layers from 0); the top row, {len(grid.rows) - 1}, "
                f"is the stream {grid.rows[-1]}.")
    return "Row l is layer l (layers from 0)."


def exact_vs_estimate(exact: PatchGrid, estimate: PatchGrid, labels: Sequence[str], theme: Theme) -> go.Figure:
    """One point per cell: the exact restored fraction (x) against attribution patching's estimate (y), with the
    line y = x where the estimate would be right."""
    x, y = exact.restored.ravel(), estimate.restored.ravel()
    names = [f"{r}, {labels[j]}" for r in exact.rows for j in range(exact.restored.shape[1])]
    lo = float(min(np.nanmin(x), np.nanmin(y), -0.1))
    hi = float(max(np.nanmax(x), np.nanmax(y), 1.0))
    return figure([{"type": "scatter", "mode": "markers", "x": x, "y": y, "text": names, "name": "cells",
                    "marker": {"size": theme.marker_size, "color": theme.categorical[4], "opacity": 0.7},
                    "hovertemplate": "%{text}<br>exact %{x:.3f}<br>estimate %{y:.3f}<extra></extra>"},
                   {"type": "scatter", "mode": "lines", "x": [lo, hi], "y": [lo, hi], "name": "estimate = exact",
                    "line": {"color": theme.categorical[7], "dash": "dot", "width": theme.line_width},
                    "hoverinfo": "skip"}],
                  {"title": {"text": "Attribution patching against exact patching (one point per cell)"},
                   "height": 380, "xaxis": {"title": {"text": "exact restored"}},
                   "yaxis": {"title": {"text": "estimated restored"}},
                   "legend": {"orientation": "h", "y": 1.02, "yanchor": "bottom"}})


def _bars(tokens: list[str], probs: np.ndarray, colour: str, name: str = "", axis: str = "") -> dict[str, object]:
    """One bar per token, its label above the bar; axis "" or "2" (the second panel)."""
    return {"type": "bar", "x": list(range(len(tokens))), "y": probs, "text": tokens, "textposition": "outside",
            "cliponaxis": False, "marker": {"color": colour}, "xaxis": f"x{axis}", "yaxis": f"y{axis}",
            **({"name": name} if name else {}),
            "hovertemplate": (f"{name}: " if name else "") + "%{text} p = %{y:.4f}<extra></extra>"}


def ablation_bars(ablation: Ablation, theme: Theme) -> go.Figure:
    """The top next tokens before (left) and after (right) the ablation, as two bar charts side by side (nothing
    ablated: the tokens before only)."""
    before, after = chart_labels(ablation.before_tokens), chart_labels(ablation.after_tokens)
    what = ablation.outputs[0].upper() + ablation.outputs[1:]
    if not ablation.components:
        return figure([_bars(before, ablation.before_probs, theme.categorical[4])],
                      {"title": {"text": plotly_text(f"{what} (nothing ablated yet)")}, "height": 340,
                       "showlegend": False, "xaxis": {"tickvals": list(range(len(before))), "ticktext": before},
                       "yaxis": {"title": {"text": "probability"}, "rangemode": "tozero"}})
    data = [_bars(before, ablation.before_probs, theme.categorical[4], "before"),
            _bars(after, ablation.after_probs, theme.categorical[5], "after", "2")]
    top = float(max(ablation.before_probs.max(), ablation.after_probs.max()) * 1.25)
    short = what.split(" of ")[0].split(" after ")[0]  # "Next tokens", "Labels"
    title = (f"{short} before and after {ablation.how}-ablating {', '.join(ablation.components[:3])}"
             + (f" and {len(ablation.components) - 3} more" if len(ablation.components) > 3 else ""))
    return figure(data, {
        "title": {"text": plotly_text(title)},
        "height": 380, "showlegend": False, "grid": {"rows": 1, "columns": 2, "pattern": "independent"},
        "xaxis": {"tickvals": list(range(len(before))), "ticktext": before, "title": {"text": "before"}},
        "xaxis2": {"tickvals": list(range(len(after))), "ticktext": after, "title": {"text": "after"}},
        "yaxis": {"title": {"text": "probability"}, "range": [0, top]}, "yaxis2": {"range": [0, top]}})
