"""A view and a lesson as one self-contained HTML file (explorer.ui.export, explorer.viz.export): what the page
showed, in order, with the model's own numbers; nothing fetched from the network; every string escaped."""
from __future__ import annotations

import json
import re

import numpy as np
from streamlit.testing.v1 import AppTest

from explorer import lessons as L
from explorer.loading.loaders import load_model
from explorer.probes.lstm_gates import rnn_gates, unit_order
from explorer.ui.export import lesson_html, section, view_html
from testkit.browser import ROOT

TEXT = "the keys to the cabinet are on the table"


def _record(page: str, params: dict[str, str]) -> dict:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.run()
    at.switch_page(page)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception
    return at.session_state["_export_record"]


def _figures(html: str) -> list[dict]:
    """The figures of an exported file, as Plotly.newPlot receives them (data and layout JSON)."""
    out = []
    for m in re.finditer(r'Plotly\.newPlot\(\s*"([^"]+)",\s*(\[.*?\]),\s*(\{.*?\}),\s*\{', html, re.S):
        out.append({"id": m.group(1), "data": json.loads(m.group(2))})
    return out


def test_a_view_exports_its_charts_captions_and_settings_with_the_models_numbers() -> None:
    rec = _record("app_pages/lstm_gates.py", {"model": "builtin:lstm-lm", "text": TEXT, "gate": "c"})
    s = section(rec)
    assert s.title == "Inside the recurrent cell" and s.inputs["model"] == "builtin:lstm-lm"
    assert s.inputs["text"] == TEXT
    kinds = [item[0] for item in s.items]
    assert kinds[0] == "figure" and "text" in kinds and kinds[-1] == "notice"
    html = view_html(rec)
    trace = rnn_gates(load_model("builtin:lstm-lm"), TEXT)
    c = trace.gates["c"][0, 0]
    heat = _figures(html)[0]["data"][0]
    from plotly_arrays import plotly_array

    np.testing.assert_allclose(plotly_array(heat["z"]), c[:, unit_order(c, "variance", 64)], atol=1e-6)
    assert "Recomputed" in html and "What to notice" in html and "torch.nn" in html
    assert len(html) > 3_000_000  # plotly.js inside
    body = html[html.index("<body>"):]  # (plotly.js's own source names its web site in strings)
    assert re.findall(r'(?:src|href)="(https?:[^"]+)"', body) == [] and "<script src" not in html  # nothing fetched


def test_text_from_the_user_is_escaped_in_the_file() -> None:
    hostile = 'the <script>alert(1)</script> dog "and" cat'
    rec = _record("app_pages/lstm_gates.py", {"model": "builtin:lstm-lm", "text": hostile})
    html = view_html(rec)
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_a_lesson_exports_a_section_per_step_with_its_question() -> None:
    lesson = next(x for x in L.load_dir()[0] if x.id == "01-recurrent-gates")
    step = lesson.steps[0]
    rec = _record(L.view_script(step.page), step.query)
    html = lesson_html(lesson, {(lesson.id, 0): rec})
    assert html.count("<section>") == len(lesson)
    assert f"Step 1 of {len(lesson)}: {step.title}" in html
    for s in lesson.steps:
        if s.question:
            assert re.sub(r"\s+", " ", s.question.split("*")[0][:40]) in html.replace("&#x27;", "'")
    assert html.count("This step was not opened in the session") == len(lesson) - 1
    assert len(_figures(html)) >= 1
