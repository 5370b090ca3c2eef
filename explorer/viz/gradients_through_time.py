"""Figures of gradients through time: the gradient reaching each input against its distance, and the per-step
Jacobian norms, one line per model."""
from __future__ import annotations

import html
import math
from typing import TYPE_CHECKING, Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.text.escape import plotly_text
from explorer.viz.theme import Theme, figure
from explorer.viz.tokens import chart_labels

if TYPE_CHECKING:
    from explorer.probes.gradients_through_time import GradientTrace


def gradient_lines(traces: Sequence[GradientTrace], theme: Theme) -> go.Figure:
    """‖∂ log p(w) / ∂x_t‖ against the distance (T − 1) − t, log scale, one line per model; the y axis names the
    predicted word w (the models' common target)."""
    targets = {tr.target for tr in traces}
    w = f"“{html.escape(targets.pop())}”" if len(targets) == 1 else "w_T"
    data = [{"type": "scatter", "x": tr.distance, "y": tr.input_grad, "mode": "lines+markers",
             "name": f"{tr.cell} · {plotly_text(tr.model_id.removeprefix('builtin:'))}",
             "text": chart_labels(tr.tokens),
             "line": {"color": theme.categorical[i % len(theme.categorical)]},
             "hovertemplate": f"{tr.cell}<br>“%{{text}}”, %{{x}} steps back<br>‖∂ log p / ∂x‖ = "
                              f"%{{y:.4g}}<extra></extra>"}
            for i, tr in enumerate(traces)]
    return figure(data, {"height": 420, "legend": {"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom"},
                         "margin": {"t": 40},
                         "xaxis": {"title": {"text": "steps before the prediction (T − 1 − t)"}},
                         "yaxis": {"title": {"text": f"‖∂ log p({w}) / ∂x_t‖"}, "type": "log",
                                   **log_ticks([v for tr in traces for v in np.ravel(tr.input_grad)])}})


def jacobian_lines(traces: Sequence[GradientTrace], theme: Theme) -> go.Figure:
    """Per model: each step's ‖∂s_t/∂s_{t−1}‖₂ (dots) and their product from step t to the prediction (line)."""
    data = []
    for i, tr in enumerate(traces):
        colour = theme.categorical[i % len(theme.categorical)]
        data.append({"type": "scatter", "x": tr.distance, "y": tr.products, "mode": "lines",
                     "name": f"{tr.cell}: product of step norms", "line": {"color": colour},
                     "hovertemplate": f"{tr.cell}: ∏ norms over the last %{{x}} steps = %{{y:.4g}}<extra></extra>"})
        data.append({"type": "scatter", "x": tr.distance[1:], "y": tr.step_norms, "mode": "markers",
                     "name": f"{tr.cell}: ‖∂s_t/∂s_t−1‖", "marker": {"color": colour, "symbol": "circle-open"},
                     "hovertemplate": f"{tr.cell}: step norm %{{y:.4g}}<extra></extra>"})
    return figure(data, {"title": {"text": "Per-step Jacobian norms and their product (the chain-rule bound)"},
                         "height": 420, "xaxis": {"title": {"text": "steps before the prediction"}},
                         "yaxis": {"title": {"text": "spectral norm"}, "type": "log",
                                   **log_ticks([v for tr in traces for arr in (tr.products, tr.step_norms)
                                                for v in np.ravel(arr)])}})


def log_ticks(values: Sequence[float], most: int = 8) -> dict[str, list[float] | list[str]]:
    """Ticks of a log axis over `values` that each read as a number on their own: 1, 2 and 5 of each decade when the
    values span three decades or less, else whole decades (every k-th, at most `most`), written 0.001, 100 or 1e-07
    (Plotly's own "D2" ticks write 5, 2, 1, 5, 2, 0.1, 5: the decade of a 2 or a 5 is not said)."""
    finite = [float(v) for v in values if np.isfinite(v) and v > 0]
    if not finite:
        return {}
    lo, hi = math.floor(math.log10(min(finite))), math.ceil(math.log10(max(finite)))
    hi = max(hi, lo + 1)
    if hi - lo <= 3:
        ticks = [m * 10.0 ** e for e in range(lo, hi + 1) for m in (1, 2, 5)]
    else:
        step = math.ceil((hi - lo + 1) / most)
        ticks = [10.0 ** e for e in range(lo, hi + 1, step)]
    return {"tickvals": ticks, "ticktext": [_number(t) for t in ticks]}


def _number(value: float) -> str:
    """0.001 … 10000 as decimals, others as 1e-07 / 2e+05."""
    return f"{value:.10f}".rstrip("0").rstrip(".") if 1e-3 <= value < 1e5 else f"{value:.0e}"
