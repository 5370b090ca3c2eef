"""Real browser: every page opens in Debian's chromium with no exception box; screenshots in artifacts/."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from testkit.browser import CHROMIUM, CHROMIUM_ARGS, ROOT, streamlit_server, wait_for_app
from explorer.views import HOME, VIEWS
from visual import check

pytestmark = pytest.mark.slow
SHOTS = Path(os.environ.get("EXPLORER_SCREENSHOTS", ROOT / "artifacts" / "screenshots"))


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"chromium not found at {CHROMIUM} (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture(scope="module")
def server():
    with streamlit_server() as base:
        yield base


@pytest.mark.parametrize("mode", ["normal", "projector"])
def test_every_page_renders_without_exception(browser, server, mode: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport={"width": 1600, "height": 2400})
    page = context.new_page()
    try:
        for view in VIEWS:
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
            page.screenshot(path=str(SHOTS / f"{view.url_path}-{mode}.png"), full_page=True)
    finally:
        context.close()


# what varies from run to run or machine to machine: the sidebar's settings (the devices), Streamlit's toolbar
VARYING = ['[data-testid="stSidebarUserContent"]', '[data-testid="stToolbar"]', '[data-testid="stStatusWidget"]']


@pytest.mark.parametrize("size", [(1280, 800), (1920, 1080)], ids=["1280x800", "1920x1080"])
def test_each_views_main_chart_is_in_the_first_screen(browser, server, size: tuple[int, int]) -> None:
    """Projector mode on a projector's screen: every view's main chart (View.main) lies inside the first viewport,
    below the sentence box, with no scrolling; the 1280×800 screenshots are compared with the committed
    references (tests/visual.py)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    width, height = size
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    problems = []
    try:
        page.goto(server)
        wait_for_app(page)
        for view in (v for v in VIEWS if v.main):
            page.goto(f"{server}/{view.url_path}?projector=1")
            wait_for_app(page, settle_ms=500)  # it settles again (2.5 s) once the chart is there
            chart = page.locator(f".st-key-{view.main}")
            try:
                chart.wait_for(timeout=60_000)
            except PlaywrightTimeout:
                problems.append(f"{view.url_path}: no chart with key {view.main!r} on the page")
                continue
            wait_for_app(page)
            box = chart.bounding_box()
            top, bottom = box["y"], box["y"] + box["height"]
            if not (0 <= top and bottom <= height and box["x"] + box["width"] <= width):
                problems.append(f"{view.url_path}: main chart at y {top:.0f}–{bottom:.0f}, the screen is {height}")
            sentence = page.locator(".st-key-_st_keyup_text, .st-key-text")
            if sentence.count():
                s = sentence.first.bounding_box()
                if s["y"] + s["height"] > top:
                    problems.append(f"{view.url_path}: the sentence box (bottom {s['y'] + s['height']:.0f}) is not "
                                    f"above the main chart (top {top:.0f})")
            shot = SHOTS / f"{view.url_path}-projector-{width}x{height}.png"
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shot))  # what the class sees (README); the compared one masks what varies
            if size == (1280, 800):
                masked = shot.with_name(shot.stem + "-masked.png")
                page.screenshot(path=str(masked), mask=[page.locator(m) for m in VARYING])
                problems.append(check(masked, f"{view.url_path}.png"))
    finally:
        context.close()
    problems = [p for p in problems if p]
    assert not problems, "\n".join(problems)


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
    """Start a lesson and press Next: each view shows its step's settings and the lesson bar (the live input's extra
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


def test_projector_mode_enlarges_the_live_sentence_box(browser, server) -> None:
    """The live input draws in its own shadow DOM with fixed pixel sizes, out of reach of the projector CSS's font
    rules: projector mode scales it like the other inputs (its text box at least 1.3× as tall)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1200})
    page = context.new_page()
    heights = {}
    try:
        for mode, query in (("normal", ""), ("projector", "?projector=1")):
            page.goto(f"{server}/lstm-gates{query}")
            wait_for_app(page)
            box = page.locator("input.stkeyup__input").first
            box.wait_for(timeout=60_000)
            heights[mode] = box.bounding_box()["height"]
        assert heights["projector"] >= 1.3 * heights["normal"], heights
    finally:
        context.close()


@pytest.mark.parametrize("mode", ["normal", "projector"])
def test_learned_positions_slider_redraws_its_line(browser, server, mode: str) -> None:
    """The learned-positions panel in a real browser: moving the position slider (an st.fragment) redraws the
    similarity line for the new position, with no exception; screenshots in artifacts/."""
    context = browser.new_context(viewport={"width": 1600, "height": 2400})
    page = context.new_page()
    try:
        page.goto(server)  # the app's root first, as users do (see README: the first session of a process)
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
    finally:
        context.close()
