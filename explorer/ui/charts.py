"""Show Plotly figures with the current theme and a toolbar that exports PNG/SVG at projector resolution."""
from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
import streamlit as st

from explorer.ui import settings
from explorer.viz.theme import apply, export_config


def show(fig: go.Figure, key: str | None = None, filename: str = "explorer", **kwargs: Any) -> Any:
    """st.plotly_chart with the sidebar's theme and export format."""
    theme = settings.theme()
    apply(fig, theme)
    fmt = str(st.session_state.get("export_format", "png"))
    return st.plotly_chart(
        fig,
        key=key,
        theme="streamlit" if theme.streamlit_theme else None,
        config=export_config(theme, filename, fmt),
        **kwargs,
    )
