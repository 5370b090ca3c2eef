"""A presenter's answer (explorer.presenters.presentation.Presentation) drawn in the page, block by block in its
order: notes as st.info, warnings as st.warning, captions, formulas, lines of text, headings as subheaders, HTML,
figures under their origin badge (with their overlay), tables, numbers side by side (st.metric), and rows of figures
side by side. Every text from a model is escaped here (md_message)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import TypedDict

import streamlit as st

from explorer.presenters.presentation import Presentation
from explorer.text.escape import md_message
from explorer.ui import settings
from explorer.ui.charts import caption, show, table
from explorer.ui.widgets import what_to_notice
from explorer.viz.theme import Theme


class Place(TypedDict, total=False):
    """How the page places one figure: fold (True: the view's main chart, capped to the first screen; pixels: the
    cap in projector mode), share (the fraction of the width it is drawn in, set by a row), key (its widget key:
    the figure's name when not given), select (a click on a point reruns the page; the selection is then in
    st.session_state[key]). A table's Place: wide (drawn at the full width, not its content's)."""

    fold: bool | int
    share: float
    key: str
    select: bool
    wide: bool


def draw(p: Presentation, places: Mapping[str, Place] | None = None) -> None:
    """Draw every block of `p` in order; places: figure name -> how the page places it."""
    places = places or {}
    for kind, what in p.blocks:
        if kind == "figure":
            _figure(p, what, places.get(what, {}))
        elif kind == "row":
            names = what.split("|")
            for name, column in zip(names, st.columns(len(names), gap="small")):
                with column:
                    _figure(p, name, {"share": 1 / len(names), **places.get(name, {})})
        elif kind == "table":
            t = p.tables[what]
            table(t.data, t.origin, width="stretch" if places.get(what, {}).get("wide") else "content")
        elif kind == "note":
            st.info(md_message(what))
        elif kind == "warning":
            st.warning(md_message(what))
        elif kind == "caption":
            caption(md_message(what))
        elif kind == "latex":
            st.latex(what)
        elif kind == "html":
            st.html(p.markup[what])
        elif kind == "heading":
            st.subheader(md_message(what))
        elif kind == "line":
            st.markdown(md_message(what))
        elif kind == "metrics":
            numbers = p.numbers[what]
            if len(numbers.pairs) == 1 and not numbers.columns:
                st.metric(*numbers.pairs[0])
            else:
                for column, (label, value) in zip(st.columns(numbers.columns or len(numbers.pairs)), numbers.pairs):
                    column.metric(label, value)


def _figure(p: Presentation, name: str, place: Place) -> None:
    panel = p.figures[name]
    selectable = {"on_select": "rerun", "selection_mode": "points"} if place.get("select") else {}
    show(panel.figure, panel.origin, key=place.get("key", name), filename=panel.filename, overlay=panel.overlay,
         fold=place.get("fold", False), share=place.get("share", 1.0), **selectable)


def notice(points: list[str]) -> None:
    """A presenter's "what to notice" (plain text) in the page's expander."""
    what_to_notice([md_message(point) for point in points])


def theme() -> Theme:
    """The theme a presenter draws in: the sidebar's (projector mode or not)."""
    return settings.theme()
