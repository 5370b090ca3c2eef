"""Normal and projector styles for every figure.

Normal mode leaves colours of the layout to the Streamlit theme (light or dark); projector mode uses large
fonts, thick lines, white background with black text, and colour-blind-safe scales (cividis, Okabe–Ito, PuOr).
"""
from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

OKABE_ITO = ["#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#000000"]


@dataclass(frozen=True)
class Theme:
    """Style parameters shared by the figure builders."""

    name: str
    font_size: int
    title_size: int
    line_width: float
    marker_size: int
    sequential: str  # Plotly colorscale name for weights/probabilities (0..1)
    diverging: str  # for signed values (activations, differences)
    categorical: tuple[str, ...]
    streamlit_theme: bool  # let st.plotly_chart apply the Streamlit (light/dark) theme
    export_scale: int  # multiplier for the toolbar's image export (projector resolution)


NORMAL = Theme("normal", 13, 16, 2.0, 7, "Viridis", "RdBu_r", tuple(OKABE_ITO), True, 3)
PROJECTOR = Theme("projector", 22, 28, 4.5, 12, "Cividis", "PuOr_r", tuple(OKABE_ITO), False, 3)


def get_theme(projector: bool) -> Theme:
    return PROJECTOR if projector else NORMAL


def apply(fig: go.Figure, theme: Theme) -> go.Figure:
    """Apply fonts, line widths and (projector) high-contrast layout to `fig` in place; returns it."""
    fig.update_layout(
        font={"size": theme.font_size},
        title={"font": {"size": theme.title_size}},
        hoverlabel={"font": {"size": theme.font_size}},
        colorway=list(theme.categorical),
        margin={"l": 10, "r": 10, "t": 50 if fig.layout.title.text else 20, "b": 10},
    )
    if not theme.streamlit_theme:
        fig.update_layout(
            template="simple_white",
            paper_bgcolor="white",
            plot_bgcolor="white",
            font={"color": "black", "size": theme.font_size},
        )
        fig.update_xaxes(showline=True, linewidth=2, linecolor="black", tickfont={"size": theme.font_size})
        fig.update_yaxes(showline=True, linewidth=2, linecolor="black", tickfont={"size": theme.font_size})
    for trace in fig.data:
        if trace.type in ("scatter", "scattergl"):
            trace.update(line={"width": theme.line_width})
        if trace.type in ("heatmap",) and not trace.colorscale:
            trace.update(colorscale=theme.sequential)
    return fig


def export_config(theme: Theme, filename: str = "explorer", fmt: str = "png") -> dict:
    """Plotly config: the toolbar camera saves `fmt` ('png' or 'svg') at projector resolution."""
    return {
        "displaylogo": False,
        "toImageButtonOptions": {
            "format": fmt if fmt in ("png", "svg") else "png",
            "filename": filename,
            "width": 1920,
            "height": 1080,
            "scale": 1 if fmt == "svg" else 2,
        },
        "modeBarButtonsToRemove": ["lasso2d", "select2d"],
    }
