"""A view, or a lesson, downloaded as one self-contained HTML file (explorer.viz.export): what the page showed in its
last run (explorer.ui.charts.record: title, charts with their badges, captions, tables, what to notice, the URL's
settings), built when the button is pressed."""
from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st

from explorer.text.escape import md_unescape
from explorer.ui.charts import RECORD
from explorer.viz.export import Section, standalone_html

if TYPE_CHECKING:
    from streamlit.dataframe_util import Data

    from explorer.lessons import Lesson

LESSON_RECORDS = "_lesson_records"  # (lesson id, step index) -> that step's last record, this browser session
HIDDEN_INPUTS = ("projector", "lesson", "lesson_step")
MAX_TABLE_ROWS = 200


def start(page: str) -> dict:
    """A new record for this run of `page` (called before the page runs)."""
    rec: dict = {"page": page}
    st.session_state[RECORD] = rec
    return rec


def _table_items(data: Data, badge: str) -> list[tuple]:
    """A table as a caption line of its rows (the HTML shows tables as text: no pandas in the viz layer)."""
    import pandas as pd

    frame = data if isinstance(data, pd.DataFrame) else pd.DataFrame(data)
    shown = frame.head(MAX_TABLE_ROWS)
    return [("text", badge), ("html", shown.to_html(index=False, escape=True, border=0, classes="table"))]


def section(rec: dict, heading: str = "", question: str = "", notice: str = "") -> Section:
    """The Section of a page's record (items in the order they were shown)."""
    title, summary = "", ""
    items: list[tuple] = []
    for key, item in rec.items():
        if key in ("page", "inputs"):
            continue
        kind = item[0]
        if kind == "title":
            title, summary = item[1], item[2]
        elif kind == "figure":
            fig, badge, overlay = item[1], item[2], item[3]
            if overlay is not None:
                base = fig.to_plotly_json()
                fig = {"data": [*base["data"], *overlay.to_plotly_json()["data"]], "layout": base["layout"]}
            items.append(("figure", fig, badge))
        elif kind == "table":
            items += _table_items(item[1], item[2])
        elif kind in ("text", "notice"):
            items.append(item)
    inputs = {k: md_unescape(v) for k, v in (rec.get("inputs") or {}).items() if k not in HIDDEN_INPUTS}
    return Section(title or rec.get("page", ""), summary, items, inputs, heading, question, notice)


def view_html(rec: dict) -> str:
    s = section(rec)
    return standalone_html(s.title, [s], footer=f"Exported from Neural NLP Explorer: the view {rec.get('page', '')} "
                                               "with the settings above. The charts are interactive (hover, zoom); "
                                               "no server is needed.")


def download_view(rec: dict, page: str) -> None:
    """The sidebar's "Download this view (HTML)": the record of this run, built into a file when pressed."""
    st.download_button("Download this view (HTML)", lambda: view_html(rec), file_name=f"{page}.html",
                       mime="text/html", icon=":material/download:", key="_export_view", width="stretch",
                       on_click="ignore",
                       help="One file with the interactive charts, the settings, badges and captions: it opens in "
                            "any browser without this server (a course page, a classroom without the server).")


def keep_step(lesson_id: str, index: int, rec: dict) -> None:
    """Remember this run's record as the step's (the lesson download holds every step opened in this session)."""
    st.session_state.setdefault(LESSON_RECORDS, {})[(lesson_id, index)] = rec


def lesson_html(lesson: Lesson, records: dict) -> str:
    """The lesson as one file: a section per step (the step's view as last shown in this session, with what to
    notice and the question), or, for a step not opened yet, its title, text and question and a line saying so."""
    sections = []
    for i, step in enumerate(lesson.steps):
        heading = f"{lesson.title} · Step {i + 1} of {len(lesson)}: {step.title}"
        rec = records.get((lesson.id, i))
        if rec is None:
            sections.append(Section(step.title, "", [("text", "This step was not opened in the session that "
                                                              "exported the lesson: its charts are not included.")],
                                    dict(step.params), heading, step.question, step.caption))
        else:
            sections.append(section(rec, heading, step.question, step.caption))
    opened = sum((lesson.id, i) in records for i in range(len(lesson)))
    return standalone_html(lesson.title, sections, footer=f"{lesson.title}: {opened} of {len(lesson)} steps with their "
                                                          "charts. Exported from Neural NLP Explorer; no server is "
                                                          "needed. Printed, each step is a page.")


def download_lesson(lesson: Lesson) -> None:
    records = st.session_state.get(LESSON_RECORDS, {})
    opened = sum((lesson.id, i) in records for i in range(len(lesson)))
    st.download_button("Download the lesson (HTML)", lambda: lesson_html(lesson, records),
                       file_name=f"{lesson.id}.html", mime="text/html", icon=":material/download:",
                       key="_export_lesson", type="tertiary", on_click="ignore",
                       help=f"One file, a section per step ({opened} of {len(lesson)} opened in this session carry "
                            "their charts; open the others to include theirs). Printed from the browser, each step "
                            "is a page: slides. `python -m explorer.ui.lesson_export` writes every step at once.")
