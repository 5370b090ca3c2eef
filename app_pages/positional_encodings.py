"""Positional encodings: sinusoidal, learned and rotary positions, and why attention needs them."""
from __future__ import annotations

import streamlit as st

from explorer.ui import position_panels as PP
from explorer.ui.widgets import page_header

c = PP.c
page_header("Positional encodings",
            "Attention alone sees a bag of vectors: positions are how a transformer knows word order.")
# The panel menu and the panel's controls share one row, right under the title: the panel's first chart follows.
c_panel, c_row = st.columns([1.2, 3.3], vertical_alignment="bottom")
with c_panel:
    panel: str = c.selectbox("panel", format_func=PP.PANELS.get, label_visibility="collapsed")
PP.PANEL_FUNCTIONS[panel](c_row)
