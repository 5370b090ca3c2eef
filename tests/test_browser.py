"""Real browser: every page opens in Debian's chromium with no exception box; screenshots in artifacts/."""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from testkit.browser import ROOT, streamlit_process, streamlit_server, wait_for_app
from explorer.views import HOME, VIEWS
from visual import UPDATE, check

pytestmark = pytest.mark.slow
SHOTS = Path(os.environ.get("EXPLORER_SCREENSHOTS", ROOT / "artifacts" / "screenshots"))
README_SHOTS = ROOT / "docs" / "screenshots"  # README's gallery: rewritten from these runs with the references


def publish(shot: Path, name: str) -> None:
    """With EXPLORER_UPDATE_SCREENSHOTS=1, copy a screenshot of this run into README's gallery as `name`."""
    if UPDATE:
        README_SHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, README_SHOTS / name)


@pytest.mark.parametrize("mode", ["normal", "projector"])
def test_every_page_renders_without_exception(browser, server, mode: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport={"width": 1600, "height": 2400})
    page = context.new_page()
    try:
        for view in VIEWS:
            if mode == "projector" and view.main:  # opened in projector mode, checked and shot in the test below
                continue
            path = "" if view is HOME else view.url_path  # users open the app at its root
            url = f"{server}/{path}" + ("?projector=1" if mode == "projector" else "")
            page.goto(url)
            wait_for_app(page, settle_ms=500 if view.main else 2500)  # a view settles again once its chart is drawn
            if view.main and page.locator('[data-testid="stException"]').count() == 0:
                page.locator(f".st-key-{view.main}").wait_for(timeout=180_000)  # a real model computes for seconds
                wait_for_app(page)
            exceptions = page.locator('[data-testid="stException"]')
            assert exceptions.count() == 0, f"{view.url_path}: {exceptions.first.inner_text()[:500]}"
            assert page.locator("h1").count() >= 1, view.url_path
            assert page.get_by_text("Page not found").count() == 0, view.url_path
            shot = SHOTS / f"{view.url_path}-{mode}.png"
            page.screenshot(path=str(shot), full_page=True)
            if mode == "normal" or not view.main:  # a view's projector shot is its first screen (below)
                publish(shot, shot.name)
    finally:
        context.close()


FIRST_SCREEN_PX = 430  # settings.fold_height(True): a whole folded chart


def first_screen(box: dict, height: int) -> bool:
    """Whether a main chart is in the first screen: all of it, or, when it is taller than the fold because its
    heatmap has more labelled rows than fit at a legible size (charts.fold_cap), its first FIRST_SCREEN_PX pixels."""
    return box["y"] + min(box["height"], FIRST_SCREEN_PX) <= height + 0.5


# what varies from run to run or machine to machine: the sidebar's settings (the devices), Streamlit's toolbar
VARYING = ['[data-testid="stSidebarUserContent"]', '[data-testid="stToolbar"]', '[data-testid="stStatusWidget"]']


SIZES = ((1280, 800), (1920, 1080))  # a projector's screens: each page is opened on the first, then resized


def resize(page, size: tuple[int, int]) -> None:
    """The page's viewport set to `size` (the second screen size of a page already open: the server's work does not
    depend on it), once the app has laid itself out again."""
    page.set_viewport_size({"width": size[0], "height": size[1]})
    page.wait_for_timeout(600)  # the window's resize event: the charts relayout
    wait_for_app(page, settle_ms=300)


def test_each_views_main_chart_is_in_the_first_screen(browser, server) -> None:
    """Projector mode on a projector's screens (1280×800, then the same page at 1920×1080): every view renders
    without an exception and its main chart (View.main) is in the first screen (first_screen), below the sentence
    box, with no scrolling; the 1280×800 screenshots are compared with the committed references (tests/visual.py),
    and the whole page is shot at 1600×2400 as test_every_page_renders_without_exception shoots the others."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    context = browser.new_context(viewport={"width": SIZES[0][0], "height": SIZES[0][1]})
    page = context.new_page()
    problems = []
    try:
        page.goto(server)
        wait_for_app(page)
        for view in (v for v in VIEWS if v.main):
            page.set_viewport_size({"width": SIZES[0][0], "height": SIZES[0][1]})
            page.goto(f"{server}/{view.url_path}?projector=1")
            wait_for_app(page, settle_ms=500)  # it settles again (2.5 s) once the chart is there
            chart = page.locator(f".st-key-{view.main}")
            try:
                chart.wait_for(timeout=60_000)
            except PlaywrightTimeout:
                problems.append(f"{view.url_path}: no chart with key {view.main!r} on the page")
                continue
            wait_for_app(page)
            exceptions = page.locator('[data-testid="stException"]')
            if exceptions.count() or not page.locator("h1").count() or page.get_by_text("Page not found").count():
                problems.append(f"{view.url_path}: {exceptions.first.inner_text()[:500] if exceptions.count() else ''}"
                                " (an exception, no title, or not found)")
            for size in SIZES:
                if size != SIZES[0]:
                    resize(page, size)
                problems += _view_in_first_screen(page, view, size)
            resize(page, (1600, 2400))  # the whole page in projector mode, as test_every_page_renders shoots others
            page.screenshot(path=str(SHOTS / f"{view.url_path}-projector.png"), full_page=True)
    finally:
        context.close()
    problems = [p for p in problems if p]
    assert not problems, "\n".join(problems)


def _view_in_first_screen(page, view, size: tuple[int, int]) -> list[str]:
    """What is wrong with `view`'s page on a screen of `size` (nothing: []); its screenshot, compared with the
    reference at 1280×800."""
    width, height = size
    problems = []
    box = page.locator(f".st-key-{view.main}").bounding_box()
    top, bottom = box["y"], box["y"] + box["height"]
    if not (0 <= top and first_screen(box, height) and box["x"] + box["width"] <= width):
        problems.append(f"{view.url_path}: main chart at y {top:.0f}–{bottom:.0f}, the screen is {width}×{height}")
    sentence = page.locator(".st-key-_box_text, .st-key-text")
    if sentence.count():
        s = sentence.first.bounding_box()
        if s["y"] + s["height"] > top:
            problems.append(f"{view.url_path}: the sentence box (bottom {s['y'] + s['height']:.0f}) is not "
                            f"above the main chart (top {top:.0f}) at {width}×{height}")
    shot = SHOTS / f"{view.url_path}-projector-{width}x{height}.png"
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shot))  # what the class sees (README); the compared one masks what varies
    if size == (1280, 800):
        publish(shot, f"{view.url_path}-projector.png")
        masked = shot.with_name(shot.stem + "-masked.png")
        page.screenshot(path=str(masked), mask=[page.locator(m) for m in VARYING])
        problems.append(check(masked, f"{view.url_path}.png"))
    return problems


def test_a_view_link_works_as_the_first_request_to_a_fresh_server(browser) -> None:
    """A lecturer restarts the server and shares a link to a view: the first session opens that view directly.
    (With the page scripts in a folder named pages/, Streamlit's legacy multipage mode answered it with a
    "Page not found" dialog over the page.)"""
    with streamlit_server() as fresh:
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        page = context.new_page()
        try:
            page.goto(f"{fresh}/lstm-gates?model=builtin:lstm-lm")
            wait_for_app(page)
            page.wait_for_selector('[data-testid="stPlotlyChart"]', timeout=90_000)
            assert page.get_by_text("Page not found").count() == 0
            assert page.locator("h1").first.inner_text().startswith("Inside the recurrent cell")
        finally:
            context.close()


@pytest.mark.parametrize("query", ["", "?projector=1"], ids=["plain", "projector"])
def test_home_pages_own_overview_link_opens_home(browser, server, query: str) -> None:
    """/overview is Home's own path (explorer.views.HOME): it opens Home with no "Page not found" dialog (Streamlit
    serves its default page at "/" only), and "/" still does."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    try:
        for path in (f"/{HOME.url_path}{query}", f"/{query}"):
            page.goto(f"{server}{path}")
            wait_for_app(page)
            page.locator("h1").first.wait_for(timeout=30_000)
            assert page.get_by_text("Page not found").count() == 0, path
            assert page.locator('[data-testid="stException"]').count() == 0, path
            assert page.locator("h1").first.inner_text().startswith("Neural NLP Explorer"), path
            assert page.get_by_text("Models available offline").count() == 1, path
            if query:  # the sidebar's projector toggle read ?projector=1 on this page too
                assert page.locator(".st-key-projector input[type=checkbox]").is_checked(), path
    finally:
        context.close()


def test_models_page_url_loads_minilm(browser, server) -> None:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    try:
        page.goto(f"{server}/catalogue?model=pretrained:minilm")
        wait_for_app(page)
        body = page.locator('[data-testid="stMain"]').inner_text()
        assert "6 × 12" in body and "22,713,216" in body
        assert page.locator('[data-testid="stException"]').count() == 0
    finally:
        context.close()


def test_lesson_next_opens_each_step_in_its_state(browser, server) -> None:
    """Start a lesson and press Next: each view shows its step's settings and the lesson panel (the live input's extra
    rerun, which carries the previous step's widget values, must not bring them back)."""
    from urllib.parse import parse_qs, urlparse

    from explorer.lessons import load_dir

    lesson = load_dir()[0][0]
    context = browser.new_context(viewport={"width": 1600, "height": 1200})
    page = context.new_page()
    try:
        page.goto(server)
        wait_for_app(page)
        page.goto(f"{server}/lesson-plans")
        wait_for_app(page)
        page.locator(f".st-key-_start_{lesson.id} button").click()
        for i in range(4):
            wait_for_app(page)
            query = {k: v[0] for k, v in parse_qs(urlparse(page.url).query).items()}
            assert {k: query.get(k) for k in lesson.steps[i].query} == lesson.steps[i].query, f"step {i + 1}"
            assert f"Step {i + 1} of {len(lesson)}" in page.locator('[data-testid="stMain"]').inner_text()
            assert page.locator('[data-testid="stException"]').count() == 0
            if i == 3:
                SHOTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(SHOTS / "lesson-step.png"))
            else:
                page.locator(".st-key-_lesson_next button").click()
    finally:
        context.close()


README_STEP = ("03-self-attention", 1, 1280)  # the lesson step in README's gallery, on a 1280×800 projector
# a chart sized to the fold (show(fold=...)): the view's main chart in its mode; not the first answer a view draws in
# its place while it computes (keys *_so_far_*: attribution's gradient × input, interventions' estimated grid)
MAIN_CHART = '[class*="st-key-fold_"]:not([class*="_so_far_"])'
SCROLLER = '[data-testid="stMain"]'  # the element the page scrolls in


def _lesson_steps():
    from explorer.lessons import load_dir

    return [(lesson, i) for lesson in load_dir()[0] for i in range(len(lesson))]


def test_every_lesson_steps_main_chart_is_in_the_first_screen(browser, server) -> None:
    """Every step of every shipped lesson, opened by its link on a projector's screen (1280×800, then the same page
    at 1920×1080): the view's main chart starts in the first screen with at least its first FIRST_SCREEN_PX pixels
    (a whole folded chart) on it, the lesson panel stands beside the view, not above it, and everything on the page
    can be read from the back of the room (testkit.legibility: no chart text cut or overlapping, none under 18 px,
    no toolbar over a chart's text, every control's label whole). Screenshots of each step in
    artifacts/screenshots/lessons (what the class sees)."""
    from testkit.legibility import legibility_problems

    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    from explorer.lessons import step_url

    shots = SHOTS / "lessons"
    shots.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport={"width": SIZES[0][0], "height": SIZES[0][1]})
    page = context.new_page()
    problems: list[str] = []
    tops: dict[tuple[int, int], dict[str, list[int]]] = {size: {} for size in SIZES}
    try:
        page.goto(server)
        wait_for_app(page)
        for lesson, i in _lesson_steps():
            name = f"{lesson.id} step {i + 1}"
            page.set_viewport_size({"width": SIZES[0][0], "height": SIZES[0][1]})
            page.goto(step_url(lesson, i, server))
            chart = page.locator(MAIN_CHART).first
            try:
                chart.wait_for(timeout=90_000)
            except PlaywrightTimeout:
                problems.append(f"{name}: no main chart")
                continue
            wait_for_app(page, settle_ms=300)
            exceptions = page.locator('[data-testid="stException"]')
            if exceptions.count():
                problems.append(f"{name}: {exceptions.first.inner_text()[:300]}")
            for size in SIZES:
                if size != SIZES[0]:
                    resize(page, size)
                width, height = size
                box, panel = chart.bounding_box(), page.locator(".st-key-lesson_bar").bounding_box()
                top, bottom = box["y"], box["y"] + box["height"]
                tops[size][f"{lesson.id}/{i + 1}"] = [round(top), round(bottom)]
                if top < 0 or not first_screen(box, height):
                    problems.append(f"{name}: main chart at y {top:.0f}–{bottom:.0f}, the screen is {width}×{height}")
                if panel is None or panel["x"] < box["x"] + box["width"]:
                    problems.append(f"{name}: the lesson panel is not beside the chart at {width}×{height} ({panel})")
                for what in (".st-key-_lesson_prev", ".st-key-lesson_notes", ".st-key-_lesson_all"):  # the question
                    part = page.locator(what).bounding_box()  # is between the buttons and the notes
                    if part is None or part["y"] + part["height"] > height:
                        problems.append(f"{name}: {what} ends below the first screen at {width}×{height} ({part})")
                if "projector=1" not in page.url:
                    problems.append(f"{name}: projector mode is off ({page.url})")
                problems += [f"{name} at {width}×{height}: {p}" for p in legibility_problems(page)]
                shot = shots / f"{lesson.id}-{i + 1:02d}-{width}x{height}.png"
                page.screenshot(path=str(shot), timeout=120_000)  # 85 steps × 2 beside other tests: a slow one waits
                if (lesson.id, i + 1, width) == README_STEP:
                    publish(shot, "lesson-step.png")
    finally:
        context.close()
    for (width, height), by_step in tops.items():
        (shots / f"chart-tops-{width}x{height}.json").write_text(json.dumps(by_step, indent=1))  # y of each chart, px
        starts = [top for top, _ in by_step.values()]
        print(f"{width}×{height}: main chart tops {min(starts, default=0)}–{max(starts, default=0)} px over "
              f"{len(by_step)} steps")
    assert not problems, "\n".join(problems)


def _scroll_top(page) -> float:
    return page.evaluate(f"() => document.querySelector('{SCROLLER}').scrollTop")


def test_each_lesson_step_opens_at_the_top_of_its_view(browser, server) -> None:
    """Start a lesson from the Lessons page scrolled to its end, then press Next with the step scrolled down: each
    step opens at the top of its view (Streamlit keeps the scroll position across st.switch_page)."""
    from explorer.lessons import load_dir

    lesson = load_dir()[0][-1]  # the last card: the page must be scrolled to reach it
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    try:
        page.goto(f"{server}/lesson-plans")
        wait_for_app(page)
        page.evaluate(f"() => {{ const m = document.querySelector('{SCROLLER}'); m.scrollTop = m.scrollHeight; }}")
        page.wait_for_timeout(300)
        assert _scroll_top(page) > 500
        page.evaluate(f"() => document.querySelector('.st-key-_start_{lesson.id} button').click()")
        page.locator(".st-key-lesson_bar").wait_for(timeout=60_000)
        wait_for_app(page)
        assert "Step 1 of" in page.locator(".st-key-lesson_bar").inner_text()
        assert _scroll_top(page) == 0
        page.evaluate(f"() => {{ const m = document.querySelector('{SCROLLER}'); m.scrollTop = m.scrollHeight; }}")
        page.wait_for_timeout(300)
        assert _scroll_top(page) > 200
        page.evaluate("() => document.querySelector('.st-key-_lesson_next button').click()")
        page.get_by_text("Step 2 of").first.wait_for(timeout=60_000)
        wait_for_app(page)
        assert _scroll_top(page) == 0
    finally:
        context.close()


PROJECTOR_PAGES = ("seq2seq", "logit-lens?model=pretrained:smollm2", "decoding-strategies?model=pretrained:smollm2",
                   "self-attention?mode=steps", "word-embeddings",
                   "logit-lens?lesson=05-real-language-model&lesson_step=1&model=pretrained:smollm2")  # beside a panel
TRUNCATED_SELECTS = """() => [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stSelectbox"] input')]
    .filter(i => i.scrollWidth > i.clientWidth + 1).map(i => i.value)"""
TEXT_SIZES = """() => [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stMarkdownContainer"] td')]
    .map(td => parseFloat(getComputedStyle(td).fontSize))"""
TABLE_ZOOM = """() => [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stDataFrame"]')]
    .map(d => parseFloat(getComputedStyle(d).zoom))"""


def test_projector_mode_is_legible_at_1280x800(browser, server) -> None:
    """Projector mode on a 1280×800 projector: the sidebar is collapsed, no choice in a select box is cut off (model
    names included), data tables are scaled to 18 px (their 13 px canvas × 1.35) and a Markdown table's cells would be
    at least 18 px (the views draw none since seq2seq's became data tables), and the word-embedding legend has at most
    MAX_LEGEND entries."""
    from explorer.viz.word_embeddings import MAX_LEGEND

    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    problems, cells, tables = [], [], []
    try:
        for path in PROJECTOR_PAGES:
            page.goto(f"{server}/{path}{'&' if '?' in path else '?'}projector=1")
            page.locator(MAIN_CHART).first.wait_for(timeout=120_000)
            wait_for_app(page, settle_ms=500)
            if page.locator('[data-testid="stSidebar"][aria-expanded="true"]').count():
                problems.append(f"{path}: the sidebar is open")
            cut = page.evaluate(TRUNCATED_SELECTS)
            if cut:
                problems.append(f"{path}: cut off in their box: {cut}")
            cells += page.evaluate(TEXT_SIZES)
            tables += page.evaluate(TABLE_ZOOM)
            if path == "word-embeddings":
                entries = page.locator('[data-testid="stMain"] .legend .traces').count()
                if not 0 < entries <= MAX_LEGEND + 2:  # the classes, and the typed words' one or two entries
                    problems.append(f"{path}: {entries} legend entries")
    finally:
        context.close()
    assert min(cells, default=18.0) >= 18, cells
    assert tables and min(tables) >= 1.35, tables
    assert not problems, "\n".join(problems)


SPINNER_PAGE = """
import time
import streamlit as st
from explorer.ui.settings import PROJECTOR_CSS

st.html(PROJECTOR_CSS)
st.title("A probe that takes a while")
with st.spinner("Computing integrated gradients on **pretrained:smollm2** for “The capital of France is”",
                show_time=True):
    time.sleep(30)
"""
SPINNER_SIZES = """() => [...document.querySelectorAll('[data-testid="stSpinner"] [role="status"] p, '
  + '[data-testid="stSpinner"] [role="status"] ~ span')]
  .map(e => [e.textContent, parseFloat(getComputedStyle(e).fontSize)])"""


def test_a_spinners_seconds_are_legible_in_projector_mode(browser, tmp_path: Path) -> None:
    """A probe that runs over half a second shows a spinner saying what it computes, with the seconds so far
    (explorer.ui.cache.probe: st.spinner(show_time=True)); in projector mode both are 18 px or more, as every other
    text. Streamlit draws the seconds at 14 px: CI once found "(0.3 seconds)" at 14 px in a lesson step."""
    from testkit.legibility import legibility_problems

    script = tmp_path / "spinner_page.py"
    script.write_text(SPINNER_PAGE)
    with streamlit_process(launcher=[sys.executable, "-m", "streamlit", "run", str(script)]) as (base, _proc):
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        page = context.new_page()
        try:
            page.goto(base)
            page.locator('[data-testid="stSpinner"] [role="status"] ~ span').wait_for(timeout=60_000)
            sizes = page.evaluate(SPINNER_SIZES)
            problems = legibility_problems(page, hover=False)
        finally:
            context.close()
    assert [text.startswith("Computing integrated gradients") for text, _ in sizes] == [True, False], sizes
    assert sizes[1][0].endswith("seconds)") and all(px >= 18 for _, px in sizes), sizes
    assert problems == []


def test_the_live_sentence_box_wraps_a_long_sentence_at_projector_sizes(browser, server) -> None:
    """The live sentence box (explorer.ui.sentence_box) in projector mode: its text at the other inputs' 20 px
    (1.25× the normal box's), and a long sentence wrapped onto lines, all of it in view (a one-line input scrolled
    it out of sight); typing into it reruns the view on the typed sentence."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    sizes, long = {}, ("the quick brown fox jumps over the lazy dog while the children of the village watch from "
                       "the old stone bridge")
    try:
        for mode, query in (("normal", ""), ("projector", "?projector=1")):
            page.goto(f"{server}/lstm-gates{query}")
            wait_for_app(page)
            box = page.locator("textarea.sentence-box__input").first
            box.wait_for(timeout=60_000)
            sizes[mode] = box.evaluate("b => parseFloat(getComputedStyle(b).fontSize)")
        assert sizes["projector"] >= 18 and sizes["projector"] >= 1.2 * sizes["normal"], sizes
        one_line = box.bounding_box()["height"]
        box.fill(long)
        box.press("Enter")
        wait_for_app(page)
        box = page.locator("textarea.sentence-box__input").first
        assert box.input_value() == long  # Enter sent it and added no line break
        shown = box.evaluate("b => ({client: b.clientHeight, scroll: b.scrollHeight, width: b.clientWidth})")
        assert shown["scroll"] <= shown["client"] + 1, shown  # all of it in view: nothing scrolled away
        assert box.bounding_box()["height"] >= 1.5 * one_line, (box.bounding_box(), one_line)  # wrapped: 2+ lines
        page.screenshot(path=str(SHOTS / "sentence-box-projector-1280x800.png"))
        assert "children+of+the+village" in page.url or "children%20of%20the%20village" in page.url, page.url
    finally:
        context.close()


@pytest.mark.parametrize("mode", ["normal", "projector"])
def test_learned_positions_slider_redraws_its_line(browser, server, mode: str) -> None:
    """The learned-positions panel in a real browser: moving the position slider (an st.fragment) redraws the
    similarity line for the new position, with no exception; screenshots in artifacts/."""
    context = browser.new_context(viewport={"width": 1600, "height": 2400})
    page = context.new_page()
    try:
        page.goto(server)  # the app's root first, as users do (see docs/serving.md: the first session of a process)
        wait_for_app(page)
        query = "panel=learned&model=pretrained:minilm&pos=10" + ("&projector=1" if mode == "projector" else "")
        page.goto(f"{server}/positional-encodings?{query}")
        wait_for_app(page)
        page.locator("text=of position 10 with every position").first.wait_for(timeout=90_000)
        slider = page.locator('.st-key-pos input[type="range"]')  # react-aria's slider input
        slider.focus()
        slider.press("ArrowRight")
        page.locator("text=of position 11 with every position").first.wait_for(timeout=30_000)
        wait_for_app(page)
        assert page.locator('[data-testid="stException"]').count() == 0
        assert len(page.locator('[data-testid="stPlotlyChart"]').all()) == 4  # the heatmaps stayed
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"positional-encodings-learned-{mode}.png"), full_page=True)
        publish(SHOTS / f"positional-encodings-learned-{mode}.png", f"positional-encodings-learned-{mode}.png")
    finally:
        context.close()


# Between a keystroke and the new answer, every animation frame: how many visible charts (SVG text) and selectors
# show the old word, the new word, whether a run is under way (an element Streamlit marks data-stale), and whether an
# indicator shows in the page (a spinner, a progress bar, or "Updating…" in a chart's place: explorer.ui.settings)
_RECORD_FRAMES = r"""([old, neo]) => { const frames = window.__frames = []; const t0 = performance.now();
  const gen = (window.__gen = (window.__gen || 0) + 1);
  const vis = e => e.checkVisibility({visibilityProperty: true});
  const has = (s, w) => new RegExp('(^|[^a-z])' + w + '([^a-z]|$)').test(s);
  const step = () => { if (gen !== window.__gen) return;
    const f = {t: performance.now() - t0, old: 0, neo: 0, run: 0, ind: 0};
    for (const c of document.querySelectorAll('[data-testid="stMain"] [data-testid="stPlotlyChart"]')) {
      if (!vis(c)) continue; const s = [...c.querySelectorAll('svg text')].map(e => e.textContent).join(' ');
      f.old += has(s, old); f.neo += has(s, neo); }
    for (const c of document.querySelectorAll('[data-testid="stMain"] [data-testid="stSelectbox"]'))
      f.old += vis(c) && has(c.textContent, old);
    f.run = document.querySelectorAll('[data-testid="stMain"] [data-stale="true"]').length;
    f.ind = [...document.querySelectorAll('[data-testid="stMain"] :is([data-testid="stSpinner"], '
                                          + '[data-testid="stProgress"])')].filter(vis).length
      + [...document.querySelectorAll('[data-testid="stMain"] [data-stale="true"]')]
          .filter(e => getComputedStyle(e, '::after').content.includes('Updating')
                       && parseFloat(getComputedStyle(e, '::after').opacity) > 0).length;
    frames.push(f); if (f.t < 60000) requestAnimationFrame(step); };
  requestAnimationFrame(step); }"""
# The run's stale outputs are hidden from 0.1 s on and "Updating…" shows from 0.4 s on, each a CSS delay that runs
# from the frame in which the browser first styles the stale mark; Plotly then paints each redrawn chart in a frame of
# its own. On two cores a frame lasts 0.2-0.4 s while Streamlit renders a rerun, so the first frame painted after a
# deadline may still show what the deadline ends (CI: the old picture in one frame 301 and 438 ms into the run, after
# frames of 229 and 378 ms): each check starts from the frame after. It times the browser's frames: run alone (serial).
OLD_GONE_MS = 300
INDICATOR_MS = 600
STALE_PAGES = ("logit-lens?model=pretrained:smollm2", "lstm-gates?model=builtin:lstm-lm-wordnet",
               "token-attribution?model=builtin:tiny-gpt-wordnet")


@pytest.mark.serial
@pytest.mark.parametrize("path", STALE_PAGES, ids=[p.split("?")[0] for p in STALE_PAGES])
def test_no_chart_or_selector_of_the_old_sentence_beside_the_new_one(browser, server, path: str) -> None:
    """Typing a new last word, frame by frame: from the second frame painted OLD_GONE_MS after the rerun begins, no
    visible chart or selector shows the old word (explorer.ui.settings.STALE_CSS hides what the run has not redrawn),
    and from the second frame painted INDICATOR_MS into the run, every frame without the new answer (no chart with the
    new word yet, the server still running) shows an indicator."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    sentence = "the girl near the river and the boy near the old house see the big dog with the {}"
    try:
        page.goto(server)
        wait_for_app(page)
        page.goto(f"{server}/{path}&text=" + sentence.format("cat").replace(" ", "+"))
        wait_for_app(page)
        page.locator('[data-testid="stPlotlyChart"] svg text', has_text="cat").first.wait_for(timeout=180_000)
        for old, neo in (("cat", "horse"), ("horse", "sheep")):
            box = page.locator("textarea.sentence-box__input").first
            box.click()
            box.press("Control+End")
            for _ in old:
                box.press("Backspace")
            page.evaluate(_RECORD_FRAMES, [old, neo])
            box.press_sequentially(neo, delay=20)
            if "Enter to run" in page.locator(".sentence-box__label").first.inner_text():
                box.press("Enter")
            page.wait_for_function(
                "n => [...document.querySelectorAll('[data-testid=\"stPlotlyChart\"] svg text')]"
                ".some(e => e.textContent.includes(n)) && !document.querySelector('[data-testid=\"stProgress\"]')"
                " && !document.querySelector('[data-stale=\"true\"]')", arg=neo, timeout=120_000)
            frames = page.evaluate("window.__frames")
            start = next(f["t"] for f in frames if f["run"])
            done = next(f["t"] for f in frames if f["t"] > start and not f["run"] and f["neo"])
            after_gone = [f for f in frames if start + OLD_GONE_MS < f["t"]][1:]
            old_shown = [round(f["t"] - start) for f in after_gone if f["old"]]
            assert not old_shown, (f"{path}: the old word '{old}' is still shown {old_shown} ms into the run",
                                   [(round(f["t"] - start), f["old"], f["neo"], f["run"], f["ind"]) for f in frames
                                    if -50 < f["t"] - start < 900])
            waiting = [f for f in frames if start + INDICATOR_MS < f["t"] < done][1:]
            bare = [round(f["t"] - start) for f in waiting if f["run"] and not f["neo"] and not f["ind"]]
            assert not bare, f"{path}: no indicator {bare} ms into a run of {done - start:.0f} ms"
            assert frames[-1]["neo"] and not frames[-1]["old"]
        assert page.locator('[data-testid="stException"]').count() == 0
    finally:
        context.close()
