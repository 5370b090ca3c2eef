"""Show Plotly figures with the current theme and a toolbar that exports PNG/SVG at projector resolution.

st.plotly_chart turns a Figure into a dict with `Figure.to_dict()`, a deep copy of every array (5-300 ms for a
large figure), then into JSON, on every rerun. `show` makes that JSON once per figure and theme
(explorer.viz.spec), keeps it on the figure (figures cached by a page are neither rebuilt nor re-serialised) and
hands it to Streamlit ready-made. A test checks that the chart sent to the browser is byte-for-byte the one
`st.plotly_chart(fig)` sends.
"""
from __future__ import annotations

import contextlib
import math
import time
from typing import Any, Hashable, Literal, Sequence, TypedDict, Unpack

import numpy as np
import plotly.graph_objects as go
import streamlit as st
from numpy.typing import NDArray
from plotly.basedatatypes import BaseFigure
from streamlit.dataframe_util import Data
from streamlit.delta_generator import DeltaGenerator
from streamlit.elements.lib.layout_utils import Height, Width

from explorer.presenters.presentation import Origin  # noqa: F401 (the pages' import)
from explorer.ui import settings
from explorer.viz.spec import Serialized, figure_spec, serialize
from explorer.viz.theme import MIN_TEXT_PX, Theme, apply, export_config, label_every


# After a view's main chart (fold=...) the script waits this long before it sends the rest of the page. Streamlit's
# frontend renders the elements that have arrived in one batch; without the pause, the main chart's delta is followed
# within milliseconds by the rest of the page's, and the browser draws them all before it paints the chart. With it,
# the browser draws the main chart first (bench/bench_browser.py: typing → seq2seq heatmap p95 0.65 → 0.54 s; the
# page below it arrives 40 ms later). The script thread sleeps: no CPU, no lock held.
PAINT_PAUSE_S = 0.04
_pause = time.sleep


BADGES = {"model": ("Model", "blue", "read from this model's own run."),
          "recomputed": ("Recomputed", "green", "recomputed from the model's weights."),
          "illustration": ("Illustration", "orange", "a formula on chosen numbers, not a model's run."),
          "file": ("Uploaded vectors", "violet", "read from the uploaded file.")}


RECORD = "_export_record"  # what this run of the page showed, in order (explorer.ui.export: the view as HTML)


def record(key: Hashable, item: tuple[object, ...]) -> None:
    """Keep `item` in this run's record under `key` (a later item of the same key, from a fragment's rerun,
    replaces it in place). References only: the HTML is built when it is downloaded."""
    rec = st.session_state.get(RECORD)
    if isinstance(rec, dict):
        rec[key] = item


class CaptionOptions(TypedDict, total=False):
    """st.caption's options a page may give."""

    unsafe_allow_html: bool
    help: str | None


class TableOptions(TypedDict, total=False):
    """st.dataframe's options a page may give."""

    width: Width
    height: Height | Literal["auto"]
    hide_index: bool | None
    column_order: Sequence[str] | None


def caption(text: str, **kwargs: Unpack[CaptionOptions]) -> DeltaGenerator:
    """st.caption, kept in the view's record (its exported HTML shows it)."""
    record(("text", text), ("text", text))
    return st.caption(text, **kwargs)


def badge_text(origin: Origin) -> str:
    label, colour, meaning = BADGES[origin.kind]
    return f":{colour}-badge[{label}] {origin.detail or meaning}"


def badge(origin: Origin) -> None:
    """The small label above a chart or table: Model / Recomputed / Illustration / Uploaded vectors, and why."""
    st.caption(badge_text(origin))


def table(data: Data, origin: Origin, **kwargs: Unpack[TableOptions]) -> DeltaGenerator:
    """st.dataframe (no index, full width unless given) under its origin badge."""
    badge(origin)
    record(("table", id(data)), ("table", data, badge_text(origin)))
    options: TableOptions = {"hide_index": True, "width": "stretch", **kwargs}
    return st.dataframe(data, **options)


class _Prebuilt(BaseFigure):
    """A figure whose `to_dict()` is a dict built beforehand (what st.plotly_chart asks a Figure for)."""

    def __init__(self, spec: dict) -> None:  # BaseFigure.__init__ is skipped on purpose: nothing else is used
        self._spec = spec

    def to_dict(self) -> dict:
        return self._spec


def _themed_spec(fig: go.Figure, theme: Theme, cap: int | None = None, share: float = 1.0) -> dict | Serialized:
    """fig's serialised spec under `theme` (its height at most `cap` pixels when given; `share`: the fraction of the
    view's width it is drawn in), built once per (figure, theme, cap); the figure must not change after it is
    shown."""
    cached = fig.__dict__.get("_explorer_spec")
    if cached is None or cached[0] != (theme.name, cap):
        if fig.__dict__.get("_explorer_theme") != theme.name:
            apply(fig, theme, share)
            fig._explorer_theme = theme.name
        spec = figure_spec(fig)
        layout = spec["layout"]
        height = layout.get("height")
        if cap is not None and isinstance(height, (int, float)) and height > cap:
            layout["height"] = cap
            rows = _heatmap_rows(fig)
            if rows and isinstance(layout.get("yaxis"), dict):  # row labels no taller than a row (~200 px of axes)
                fit = max(1, int(0.95 * (cap - 200) / rows))
                size = max(12 if theme.streamlit_theme else MIN_TEXT_PX, min(theme.font_size, fit))
                layout["yaxis"]["tickfont"] = {**(layout["yaxis"].get("tickfont") or {}), "size": size}
                if fit < size:  # labels never overprint (projector: never under MIN_TEXT_PX); the hover names all
                    _label_every(layout["yaxis"], spec.get("data") or [], math.ceil(size / fit))
        cached = ((theme.name, cap), serialize(spec))
        fig._explorer_spec = cached
    return cached[1]


def _label_every(yaxis: dict, data: Sequence[dict], n: int) -> None:
    """Label only every n-th row of a heatmap's y axis: its own tick array thinned, or its text rows made one."""
    if yaxis.get("tickvals") is not None and yaxis.get("ticktext") is not None:
        label_every(yaxis, n)
        return
    rows = next((list(t["y"]) for t in data if t.get("type") == "heatmap" and _text_rows(t.get("y"))), None)
    if rows:
        yaxis.update(tickmode="array", tickvals=rows[::n], ticktext=rows[::n])


def fold_cap(fig: go.Figure, theme: Theme, fold: int) -> int:
    """The height a view's main chart gets so that it fits in the first screen: `fold` pixels, or more when the
    figure has so many labelled heatmap rows (tokens) that `fold` would leave each row less than a line of its font
    (then the row labels get a smaller font, down to 12 px, where the height stays short of that)."""
    return max(fold, 150 + theme.font_size * _heatmap_rows(fig))


def _heatmap_rows(fig: go.Figure) -> int:
    """The rows of the figure's heatmaps when each is labelled (tokens, layers: text on the rows or the y axis's
    ticktext); 0 for numeric rows (e.g. 2,048 positions), which need no room per row."""
    labelled_axis = bool(((fig._layout.get("yaxis") or {}).get("ticktext")))
    return max((len(t["z"]) for t in fig._data if t.get("type") == "heatmap" and t.get("z") is not None
                and (labelled_axis or _text_rows(t.get("y")))), default=0)


def _text_rows(y: Sequence[object] | NDArray[np.generic] | None) -> bool:
    """Whether a heatmap's y values are text labels (checked on the first: one type per axis)."""
    return y is not None and len(y) > 0 and isinstance(y[0], str)


def show(fig: go.Figure, origin: Origin, key: str | None = None, filename: str = "explorer",
         overlay: go.Figure | None = None, fold: bool | int = False, share: float = 1.0, **kwargs: Any) -> Any:
    """st.plotly_chart with the sidebar's theme and export format, under the badge saying what its numbers are.

    fold=True: the view's main chart (its key is View.main): its height is capped (fold_cap) so that it shows in
    the first screen with the controls above it; fold=<pixels>: the cap in projector mode when more than one row of
    controls or outputs sits above the chart (scaled to the normal mode's smaller fonts). The browser paints a
    folded chart before the rest of the page arrives (PAINT_PAUSE_S).

    overlay: a small figure whose traces are drawn on top of `fig` (e.g. the typed words over a cached
    30,000-point projection): only the overlay is converted when it alone changes.
    share: the fraction of the view's width the chart is drawn in (a column of st.columns(2): 0.5), so that projector
    mode fits its title and token ticks to it.
    """
    badge(origin)
    record(("figure", key or id(fig)), ("figure", fig, badge_text(origin), overlay))
    if st.session_state.get(RECORD) is not None:
        st.session_state[RECORD]["inputs"] = st.query_params.to_dict()
    theme = settings.theme()
    cap = None
    if fold:
        pixels = (settings.fold_height() if fold is True
                  else int(fold * settings.fold_height() / settings.fold_height(True)))
        cap = fold_cap(fig, theme, pixels)
    spec = _themed_spec(fig, theme, cap, share)
    if overlay is not None:
        top = _themed_spec(overlay, theme)
        if isinstance(spec, Serialized) and isinstance(top, Serialized):
            spec = spec.with_overlay(top)
        else:
            spec = {**spec, "data": spec["data"] + top["data"]}
    fmt = str(st.session_state.get("export_format", "png"))
    # a folded chart sits in a container keyed "fold_<key>" (CSS class st-key-fold_<key>; a first answer drawn in the
    # chart's place while it computes has a key with "_so_far_", which the browser test leaves out): the test finds
    # the main chart of whatever mode a view is in as the page's first such element
    with st.container(key=f"fold_{key}" if key else None) if fold else contextlib.nullcontext():
        shown = st.plotly_chart(
            _Prebuilt(spec),
            key=key,
            theme="streamlit" if theme.streamlit_theme else None,
            config=export_config(theme, filename, fmt),
            **kwargs,
        )
    if fold:
        _pause(PAINT_PAUSE_S)
    return shown
