"""Show Plotly figures with the current theme and a toolbar that exports PNG/SVG at projector resolution.

st.plotly_chart turns a Figure into a dict with `Figure.to_dict()`, a deep copy of every array (5-300 ms for a
large figure, on every rerun). `show` builds that dict once per figure and theme without copying the arrays,
keeps it on the figure (figures cached by a page are not rebuilt), and hands it over ready-made. A test checks
that the chart sent to the browser is byte-for-byte the one `st.plotly_chart(fig)` sends.
"""
from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
import streamlit as st
from _plotly_utils.utils import convert_to_base64
from plotly.basedatatypes import BaseFigure

from explorer.ui import settings
from explorer.viz.theme import apply, export_config


class _Prebuilt(BaseFigure):
    """A figure whose `to_dict()` is a dict built beforehand (what st.plotly_chart asks a Figure for)."""

    def __init__(self, spec: dict) -> None:  # BaseFigure.__init__ is skipped on purpose: nothing else is used
        self._spec = spec

    def to_dict(self) -> dict:
        return self._spec


def _copy(value: Any) -> Any:
    """Copy dicts and lists (which convert_to_base64 rewrites in place), not the arrays and strings they hold."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value] if value and isinstance(value[0], (dict, list)) else list(value)
    return value


def figure_spec(fig: go.Figure) -> dict:
    """What `fig.to_dict()` returns (data, layout, numeric arrays as base64 typed arrays), without deep copies.
    The figure is left unchanged."""
    if fig._frame_objs:
        return fig.to_dict()
    # The template holds plain JSON values only: it is shared, neither copied nor walked by convert_to_base64
    # (put back afterwards at its own place in the key order).
    layout = {k: None if k == "template" else _copy(v) for k, v in fig._layout.items()}
    spec = {"data": [_copy(trace) for trace in fig._data], "layout": layout}
    convert_to_base64(spec)
    if "template" in layout:
        layout["template"] = fig._layout["template"]
    return spec


def _themed_spec(fig: go.Figure, theme: Any) -> dict:
    """fig's spec under `theme`, built once per (figure, theme); the figure must not change after it is shown."""
    cached = getattr(fig, "_explorer_spec", None)
    if cached is None or cached[0] != theme.name:
        apply(fig, theme)
        cached = (theme.name, figure_spec(fig))
        fig._explorer_spec = cached
    return cached[1]


def show(fig: go.Figure, key: str | None = None, filename: str = "explorer", overlay: go.Figure | None = None,
         **kwargs: Any) -> Any:
    """st.plotly_chart with the sidebar's theme and export format.

    overlay: a small figure whose traces are drawn on top of `fig` (e.g. the typed words over a cached
    30,000-point projection): only the overlay is converted when it alone changes.
    """
    theme = settings.theme()
    spec = _themed_spec(fig, theme)
    if overlay is not None:
        spec = {**spec, "data": spec["data"] + _themed_spec(overlay, theme)["data"]}
    fmt = str(st.session_state.get("export_format", "png"))
    return st.plotly_chart(
        _Prebuilt(spec),
        key=key,
        theme="streamlit" if theme.streamlit_theme else None,
        config=export_config(theme, filename, fmt),
        **kwargs,
    )
