"""A whole lesson as one self-contained HTML file (and PDF slides), every step computed, without a browser session:

    python -m explorer.ui.lesson_export 01-recurrent-gates -o lesson.html [--pdf lesson.pdf] [--projector]

Each step's view runs once in Streamlit's AppTest with the step's settings (as the lesson opens it); what it shows
(explorer.ui.charts.record) becomes the step's section (explorer.viz.export). --pdf prints the file with Debian's
chromium (Playwright, no download): one step a page."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable

from explorer import lessons as L
from explorer.ui.charts import RECORD
from explorer.ui.export import lesson_html
from explorer.runtime.paths import app_root


def step_record(step: L.Step, projector: bool = False, timeout: float = 600) -> dict:
    """The record of one step's view run with the step's settings (AppTest of the whole app: its navigation, the
    page, the record started before it)."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(app_root() / "app.py"), default_timeout=timeout)
    at.run()
    at.switch_page(L.view_script(step.page))
    for key, value in {**step.query, **({"projector": "1"} if projector else {})}.items():
        at.query_params[key] = value
    at.run()
    if at.exception:
        raise RuntimeError(f"step '{step.title}' ({step.page}): {at.exception[0].value}")
    return at.session_state[RECORD]


def export_lesson(lesson: L.Lesson, projector: bool = False, progress: Callable[[str], object] = print) -> str:
    records = {}
    for i, step in enumerate(lesson.steps):
        progress(f"step {i + 1} of {len(lesson)}: {step.title} ({step.page})")
        records[(lesson.id, i)] = step_record(step, projector)
    return lesson_html(lesson, records)


def print_pdf(html_file: Path, pdf: Path) -> None:
    """Print an exported file to PDF with chromium (its own print layout: a section a page, landscape A4)."""
    from playwright.sync_api import sync_playwright

    from explorer.runtime.chromium import CHROMIUM, CHROMIUM_ARGS

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(html_file.resolve().as_uri())
        page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot .main-svg').length > 0")
        page.emulate_media(media="print")
        page.evaluate("() => fitSlides(700)")  # what the browser's own print does (beforeprint)
        page.pdf(path=str(pdf), format="A4", landscape=True, print_background=True)
        browser.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("lesson", help="a shipped lesson's id (its file name without the suffix) or a lesson file")
    ap.add_argument("-o", "--output", type=Path, help="the HTML file (default: <lesson id>.html)")
    ap.add_argument("--pdf", type=Path, help="also print it to this PDF")
    ap.add_argument("--projector", action="store_true", help="the projector theme (larger type)")
    args = ap.parse_args(argv)
    source = Path(args.lesson)
    found = L.parse_bytes(source.read_bytes(), source.name) if source.is_file() else \
        next((x for x in L.load_dir()[0] if x.id == args.lesson), None)
    if found is None:
        print(f"No lesson '{args.lesson}': {', '.join(x.id for x in L.load_dir()[0])}", file=sys.stderr)
        return 2
    lesson = found
    out = args.output or Path(f"{lesson.id}.html")
    out.write_text(export_lesson(lesson, args.projector), encoding="utf-8")
    print(f"{out}: {out.stat().st_size / 2**20:.1f} MiB, {len(lesson)} steps")
    if args.pdf:
        print_pdf(out, args.pdf)
        print(f"{args.pdf}: {args.pdf.stat().st_size / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
