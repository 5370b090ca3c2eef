"""The figures of the training-curves view: what a model learned, when (explorer.training.curves.SeriesCurves)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.viz.theme import NORMAL, Theme, figure

LOSSES = ("held-out loss", "training loss")


def _x(steps: np.ndarray) -> np.ndarray:
    """Steps on a log axis: step + 1 (the initialisation, step 0, at 1)."""
    return np.asarray(steps, dtype=float) + 1


def curves_figure(steps: np.ndarray, curves: dict[str, np.ndarray], model: str, theme: Theme = NORMAL) -> go.Figure:
    """Losses (nats, top) and shares in [0, 1] (bottom) of each snapshot, against optimiser step + 1 on a log axis.
    steps (S,); curves: name -> (S,). Each point's customdata is [step, curve name] (a click opens a view there)."""
    x = _x(steps)
    data: list[dict[str, object]] = []
    for k, (name, values) in enumerate(curves.items()):
        loss = name in LOSSES
        data.append(dict(type="scatter", x=x, y=np.asarray(values, dtype=float), name=name, mode="lines+markers",
                         yaxis="y" if loss else "y2", line={"color": theme.categorical[k % len(theme.categorical)]},
                         customdata=[[int(s), name] for s in steps],
                         hovertemplate=f"{name}" + " = %{y:.3f}<br>step %{customdata[0]:,}<extra></extra>"))
    return figure(data, {
        "title": {"text": f"What {model} learned, when (held-out measures of each snapshot)"},
        "height": 560, "hovermode": "closest",
        "legend": {"orientation": "h", "x": 0.0, "y": 1.0, "yanchor": "bottom", "xanchor": "left"},
        "xaxis": {"type": "log", "title": {"text": "optimiser step + 1 (log scale)"}, "anchor": "y2"},
        "yaxis": {"title": {"text": "loss (nats)"}, "domain": [0.58, 1.0]},
        "yaxis2": {"title": {"text": "share of items"}, "domain": [0.0, 0.5], "range": [0, 1.02]},
    })


def heads_figure(steps: np.ndarray, scores: np.ndarray, title: str, theme: Theme = NORMAL) -> go.Figure:
    """One row per head (L·H rows, "L0H0" …), one column per snapshot: scores (S, L, H) in [0, 1] on a fixed colour
    range. customdata [step, layer, head] per cell."""
    S, L, H = scores.shape
    z = scores.reshape(S, L * H).T                                                 # (L·H, S)
    rows = [f"L{layer}H{head}" for layer in range(L) for head in range(H)]
    custom = [[[int(s), layer, head] for s in steps] for layer in range(L) for head in range(H)]
    return figure([dict(type="heatmap", z=z, x=[f"{int(s):,}" for s in steps], y=rows, zmin=0.0, zmax=1.0,
                        colorscale=theme.sequential, customdata=custom, colorbar={"title": {"text": "score"}},
                        hovertemplate="%{y} at step %{x}: %{z:.3f}<extra></extra>")], {
        "title": {"text": title}, "height": 160 + 26 * L * H,
        "xaxis": {"title": {"text": "optimiser step"}, "type": "category"},
        "yaxis": {"autorange": "reversed", "type": "category"},
    })


def table_rows(steps: np.ndarray, epochs: np.ndarray, curves: dict[str, np.ndarray], unit: np.ndarray
               ) -> list[dict[str, int | float | str | None]]:
    """One row per snapshot: step, epoch, each curve's value, the number unit chosen there."""
    rows = []
    for i, s in enumerate(steps):
        row: dict[str, int | float | str | None] = {"step": int(s), "epoch": int(epochs[i])}
        row.update({name: (None if np.isnan(v[i]) else round(float(v[i]), 4)) for name, v in curves.items()})
        if unit[i] >= 0:
            row["number unit"] = f"{row.get('number unit')} (unit {int(unit[i])})"
        rows.append(row)
    return rows


def selected(points: Sequence[Mapping[str, object]]) -> tuple[int | float | str, ...] | None:
    """The customdata of the first clicked point (a list in Plotly's selection event: the figures' [step, curve name]
    or [step, layer, head]), or None."""
    for p in points:
        custom = p.get("customdata")
        if isinstance(custom, (list, tuple)) and custom:
            return tuple(custom)
    return None
