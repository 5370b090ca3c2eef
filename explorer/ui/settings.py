"""The sidebar's global settings (device, dtype, projector mode, live typing, export format).

They live in st.session_state (and projector mode also in ?projector=1 so lessons can switch it on).
"""
from __future__ import annotations

import os

import streamlit as st

from explorer.runtime import device as devices
from explorer.ui import state
from explorer.viz.theme import Theme, get_theme

# Every mode: Streamlit's header (the sidebar's arrow and the toolbar, an opaque band over the top of the page) is
# 2.75rem high instead of 3.75rem, and the page starts right under it, not 6rem below it: the title is not hidden
# behind it and a view's main chart fits in the first screen of a 1280×800 projector (tests/test_browser.py). A
# metric's label wraps onto a second line rather than end in "…"; the training-step button beside the model picker
# has narrow padding, so that its step ("end", "640") fits beside the picker at the projector's 20 px.
HEADER_CSS = """
[data-testid="stHeader"], [data-testid="stToolbar"] { height: 2.75rem; min-height: 2.75rem; }
[data-testid="stMainBlockContainer"] { padding-top: 2.75rem; }
[data-testid="stMetricLabel"] * { white-space: normal !important; text-overflow: clip !important; }
.st-key-train_step_button button { padding-left: 0.35rem; padding-right: 0.35rem; }
"""
# Every mode, between a keystroke and the new answer: Streamlit marks each element the running script has not drawn
# again yet data-stale="true" (and only fades it after 0.5 s). An output of the previous run (a chart, a table, a
# value, a selector of its tokens, a note about it) is hidden 0.1 s into the new run, until this run draws it again,
# so that it never stands beside the new sentence; in a chart's place "Updating…" shows from 0.4 s on. A quick rerun
# (a kept result) redraws everything within 0.1 s and nothing blinks. The sentence box, the sidebar and the lesson
# panel are never hidden. tests/test_browser.py checks it frame by frame.
STALE_CSS = """
[data-testid="stMain"] [data-stale="true"]:is(:has([data-testid="stPlotlyChart"]), :has([data-testid="stHtml"]),
  :has([data-testid="stCaptionContainer"]), :has([data-testid="stSelectbox"]), :has([data-testid="stMarkdown"]),
  :has([data-testid="stAlert"]), :has([data-testid="stDataFrame"]), :has([data-testid="stTable"]),
  :has([data-testid="stMetric"])):not(:has(.sentence-box__input)):not(.st-key-lesson_bar *) > * {
  visibility: hidden; transition: visibility 0s linear 0.1s; }
[data-testid="stMain"] [data-stale="true"]:has([data-testid="stPlotlyChart"])::after {
  content: "Updating…"; position: absolute; top: 35%; left: 0; right: 0; text-align: center; font-size: 1.2rem;
  opacity: 0; animation: explorer-updating 0s linear 0.4s forwards; pointer-events: none; }
@keyframes explorer-updating { to { opacity: 0.75; } }
"""
BASE_CSS = f"<style>{HEADER_CSS}{STALE_CSS}</style>"

PROJECTOR_CSS = """
<style>""" + HEADER_CSS + STALE_CSS + """
[data-testid="stMainBlockContainer"] { padding-left: 2.5rem; padding-right: 2.5rem; }
[data-testid="stMain"] h1 { font-size: 2.4rem !important; padding-top: 0; }
[data-testid="stMain"] [data-testid="stVerticalBlock"] { gap: 0.7rem; }
[data-testid="stMain"] h2 { font-size: 2.4rem !important; }
[data-testid="stMain"] h3 { font-size: 2.0rem !important; }
[data-testid="stMarkdownContainer"] p, [data-testid="stMarkdownContainer"] li { font-size: 1.35rem; }
[data-testid="stWidgetLabel"] p, [data-testid="stCaptionContainer"] { font-size: 1.25rem !important; }
[data-testid="stSidebar"] [data-testid="stMarkdownContainer"] p { font-size: 1.15rem; }
input, textarea, [data-baseweb="select"] div { font-size: 1.25rem !important; }
/* model names are long ("SmolLM2-135M-Instruct"): 18 px, so that they fit their box beside a lesson panel too */
.st-key-model input, .st-key-model2 input { font-size: 1.15rem !important; }
/* tables: Markdown ones and st.dataframe (drawn on a canvas with fixed pixel sizes: scaled) */
[data-testid="stMarkdownContainer"] td, [data-testid="stMarkdownContainer"] th { font-size: 1.2rem; }
[data-testid="stMarkdownContainer"] code, [data-testid="stMarkdownContainer"] td code { font-size: 1.15rem; }
[data-testid="stMain"] [data-testid="stDataFrame"] { zoom: 1.35; }
/* the lesson panel beside a lesson step's view: a narrow column, 18 px text */
.st-key-lesson_bar [data-testid="stMarkdownContainer"] p { font-size: 1.15rem; }
/* the live sentence box (explorer.ui.sentence_box; its text area takes the input rule above): its label and "?" */
.sentence-box__label { font-size: 1.25rem !important; }
.sentence-box__help { font-size: 0.9em !important; }
/* every other text at 18 px or more: the badges over charts, chips of a multiselect, token strips (st.html) */
[data-testid="stMain"] .stMarkdownBadge, [data-testid="stMain"] [data-testid="stMultiSelectTagsContainer"] span {
  font-size: 1.15rem !important; }
/* a multiselect's chips wrap onto further lines rather than scroll out of its box (one chip hid the next) */
[data-testid="stMain"] [data-testid="stMultiSelectTagsContainer"] {
  flex-wrap: wrap !important; overflow: visible !important; }
[data-testid="stMain"] [data-testid="stMultiSelect"] div:has(> [data-testid="stMultiSelectTagsContainer"]),
[data-testid="stMain"] [data-testid="stMultiSelectTagsContainer"] {
  height: auto !important; max-height: none !important; }
[data-testid="stMain"] [data-testid="stHtml"] { font-size: 1.15rem; }
/* a spinner's seconds so far (st.spinner(show_time=True), a span beside its text; Streamlit draws it at 14 px) */
[data-testid="stSpinner"] [role="status"] ~ span { font-size: 1.15rem !important; }
</style>
"""


def live_default() -> bool:
    return os.environ.get("EXPLORER_LIVE_INPUT", "1").strip().lower() not in ("0", "false", "no", "off")


def sidebar() -> None:
    """Render the global settings in the sidebar (called once per run by app.py)."""
    with st.sidebar:
        st.markdown("**Settings**")
        available = devices.available_devices()
        state.seed("device", available[0], str, lambda d: d in available)
        if st.session_state.get("device") not in available:
            st.session_state["device"] = available[0]
        dev = st.selectbox("Device", available, key="device", format_func=devices.describe,
                           help="Auto picks cuda, then mps, then cpu.")
        allowed = devices.dtypes_for(dev)
        if st.session_state.get("dtype") not in allowed:
            st.session_state["dtype"] = "float32"
        st.selectbox("Precision", allowed, key="dtype",
                     help="float32 everywhere; bfloat16/float16 only on a GPU.")
        state.toggle("Projector mode", key="projector", default=False,
                     help="Larger fonts, thicker lines, high-contrast colour-blind-safe scales.")
        st.session_state.setdefault("live", live_default())
        st.toggle("Update while typing", key="live", help="Off: the views update when you press Enter.")
        st.toggle("Sentence on several lines", key="multiline",
                  help="A text box where Enter starts a new line and a pasted tab stays a tab (code, chat messages): "
                       "the views update on Ctrl+Enter or when you click away. A sentence with a line break opens "
                       "in it anyway.")
        st.session_state.setdefault("export_format", "png")
        st.radio("Chart export (toolbar camera)", ["png", "svg"], key="export_format", horizontal=True,
                 help="PNG at 3840×2160 or SVG (vector), from each chart's toolbar.")
    st.html(PROJECTOR_CSS if projector() else BASE_CSS)  # style only: takes no room on the page


def device() -> str:
    return str(st.session_state.get("device") or devices.default_device())


def dtype() -> str:
    return str(st.session_state.get("dtype") or "float32")


def fold_height(projector_mode: bool | None = None) -> int:
    """The most pixels a view's main chart may take so that it fits, under the page's header, model and sentence
    row and one row of controls, in the first screen of a 1280×800 projector (projector mode) or laptop."""
    return 430 if (projector() if projector_mode is None else projector_mode) else 470


def projector() -> bool:
    return bool(st.session_state.get("projector", False))


def projector_requested() -> bool:
    """Projector mode before the sidebar's toggle exists in this run: the session's choice, else ?projector=1."""
    if "projector" in st.session_state:
        return projector()
    try:
        return st.query_params.get("projector") in ("1", "true")
    except Exception:
        return False


def theme() -> Theme:
    return get_theme(projector())
