"""Real browser: a view downloaded from the app's sidebar (Download this view) and a lesson written by
`python -m explorer.ui.lesson_export` open offline in chromium (nothing requested but the file), with working charts
holding the view's numbers; the lesson prints to PDF one step a page. Screenshots in artifacts/screenshots/export/."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from explorer import lessons as L
from explorer.loading.loaders import load_model
from explorer.probes.lstm_gates import rnn_gates, unit_order
from testkit.browser import ROOT, streamlit_server, wait_for_app

pytestmark = pytest.mark.slow
SHOTS = Path(os.environ.get("EXPLORER_SCREENSHOTS", ROOT / "artifacts" / "screenshots")) / "export"
TEXT = "the keys to the cabinet are on the table"
DRAWN = "() => document.querySelectorAll('.js-plotly-plot .main-svg').length"


def _open_offline(browser, path: Path, shot: str) -> tuple[object, list[str]]:
    context = browser.new_context(viewport={"width": 1280, "height": 900}, offline=True)
    page = context.new_page()
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url))
    page.goto(path.resolve().as_uri())
    page.wait_for_function(f"() => ({DRAWN})() > 0", timeout=60_000)
    page.wait_for_timeout(500)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / shot))
    return page, [u for u in asked if not u.startswith("file:")]


def test_a_view_downloaded_from_the_app_opens_offline_with_its_numbers(browser, tmp_path) -> None:
    with streamlit_server() as base:
        context = browser.new_context(viewport={"width": 1600, "height": 1000}, accept_downloads=True)
        page = context.new_page()
        page.goto(f"{base}/lstm-gates?model=builtin:lstm-lm&gate=c&text={TEXT}")
        wait_for_app(page)
        page.locator(".st-key-heatmap .js-plotly-plot").wait_for(timeout=120_000)
        wait_for_app(page)
        with page.expect_download(timeout=120_000) as download:
            page.get_by_role("button", name="Download this view (HTML)").first.click()
        path = tmp_path / "view.html"
        download.value.save_as(path)
        context.close()
    page, asked = _open_offline(browser, path, "lstm-gates-view.png")
    assert asked == []
    z = np.array(page.evaluate("() => Array.from(document.querySelector('.js-plotly-plot')._fullData[0].z, "
                               "row => Array.from(row))"), dtype=float)
    c = rnn_gates(load_model("builtin:lstm-lm"), TEXT).gates["c"][0, 0]
    np.testing.assert_allclose(z, c[:, unit_order(c, "variance", 64)], atol=1e-5)
    assert page.locator("h1").first.inner_text() == "Inside the recurrent cell"
    assert "What to notice" in page.locator("body").inner_text()


def test_a_lesson_file_opens_offline_and_prints_one_step_a_page(browser, tmp_path) -> None:
    lesson = next(x for x in L.load_dir()[0] if x.id == "01-recurrent-gates")
    html, pdf = tmp_path / "lesson.html", tmp_path / "lesson.pdf"
    subprocess.run([sys.executable, "-m", "explorer.ui.lesson_export", lesson.id, "-o", str(html), "--pdf", str(pdf)],
                   check=True, cwd=ROOT, timeout=900)
    page, asked = _open_offline(browser, html, "lesson-01.png")
    assert asked == []
    assert page.locator("section").count() == len(lesson)
    assert page.evaluate(DRAWN) >= len(lesson)  # a chart in every step, drawn
    text = page.locator("body").inner_text()
    assert "This step was not opened" not in text and f"Step {len(lesson)} of {len(lesson)}" in text
    pages = len(re.findall(rb"/Type\s*/Page[^s]", pdf.read_bytes()))
    assert pages == len(lesson), f"{pages} PDF pages for {len(lesson)} steps"
