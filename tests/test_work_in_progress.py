"""Work in progress is visible, and a heavy view does not start a run on a half-typed sentence: a probe that computes
for over half a second says what, on which model and for which sentence (with its seconds); decoding, attribution
and interventions on a large model read their sentence on Enter, every other view while typing."""
from __future__ import annotations

import time
import urllib.parse

import pytest

from conftest import assert_no_exception, needs_smollm2, run_page
from explorer.probes.decoding_strategies import decode_all
from explorer.probes.interventions import attribution as attribution_patching
from explorer.probes.logit_lens import logit_lens
from explorer.probes.token_attribution import attribution
from explorer.runtime import model_state
from explorer.ui.cache import working_on
from explorer.views import BY_PATH, VIEWS


def test_the_message_names_the_work_the_model_and_the_sentence():
    said = working_on(attribution, "pretrained:smollm2", ("The capital of France is\n\tParis", "", 256))
    assert said == ("Computing gradient × input and integrated gradients on pretrained\\:smollm2 for “The capital of "
                    "France is↵⇥Paris”…")
    assert "attribution patching" in working_on(attribution_patching, "m", ("a", "b", "c", "d"))
    assert working_on(decode_all, "m", ("x" * 100,)).endswith("for “…" + "x" * 59 + "”…")
    assert working_on(logit_lens, "m", ("",)) == "Computing logit lens on m…"  # no sentence: none quoted


def test_heavy_views_are_declared():
    assert {v.url_path for v in VIEWS if v.heavy} == {"decoding-strategies", "token-attribution", "interventions"}


def _sentence_box(at):
    """(kind, label) of the sentence box (key "text"): a one-line text input, a text area, or the live input."""
    for kind, elements in (("input", at.text_input), ("area", at.text_area)):
        for el in elements:
            if el.key == "text":
                return kind, el.label
    return "live", None


@needs_smollm2
@pytest.mark.parametrize("view", ["decoding-strategies", "token-attribution", "interventions"])
def test_a_heavy_view_on_a_large_model_reads_on_enter(view):
    at = run_page(BY_PATH[view].script, {"model": "pretrained:smollm2", "max_new": "2", "n": "1",
                                         "outputs": "prediction", "steps": "8"}, timeout=300)
    assert_no_exception(at)
    kind, label = _sentence_box(at)
    assert kind == "input" and label.endswith("(Enter to run)"), (kind, label)


@pytest.mark.parametrize("view", ["decoding-strategies", "token-attribution", "logit-lens"])
def test_small_models_and_light_views_update_while_typing(view, monkeypatch):
    monkeypatch.setenv("EXPLORER_LIVE_INPUT", "1")
    at = run_page(BY_PATH[view].script, {"model": "builtin:tiny-gpt"})
    assert_no_exception(at)
    kind, label = _sentence_box(at)
    assert kind != "input" or not label.endswith("(Enter to run)"), (kind, label)


@pytest.mark.slow
@needs_smollm2
def test_the_browser_shows_what_is_being_computed():
    """On SmolLM2 the decoding view's run takes seconds: the page shows a progress bar naming the work, the model and
    the prompt, with each strategy's text as it is generated, and both are gone when the chart is drawn."""
    from playwright.sync_api import sync_playwright

    from testkit.browser import streamlit_server, wait_for_app
    from testkit.browser import CHROMIUM, CHROMIUM_ARGS

    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    with streamlit_server() as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        bar = page.locator('[data-testid="stProgress"]', has_text="Computing every decoding strategy")
        # the bar was not seen in 2 of ~10 full-suite runs (cause not found yet): a second prompt is tried once
        for attempt in range(2):
            prompt = f"Tell me about the number {int(time.time() * 10) % 1000000}"  # a prompt no cache holds
            query = urllib.parse.urlencode({"model": "pretrained:smollm2", "text": prompt, "max_new": "12", "n": "2"})
            page.goto(f"{base}/decoding-strategies?{query}")
            try:
                bar.first.wait_for(timeout=120_000)
                break
            except PlaywrightTimeout:
                if attempt:
                    raise
        said = bar.first.inner_text()
        assert "pretrained:smollm2" in said and "number" in said and "token" in said, said
        page.get_by_text("▌").first.wait_for(timeout=60_000)  # the text generated so far, under the bar
        page.wait_for_selector('[data-testid="stPlotlyChart"]', timeout=240_000)
        wait_for_app(page, timeout_ms=240_000)
        assert page.locator('[data-testid="stProgress"]').count() == 0 and page.get_by_text("▌").count() == 0
        browser.close()


@pytest.mark.parametrize("view, query", [
    ("token-attribution", {"method": "integrated gradients", "steps": "64"}),
    ("interventions", {"method": "both"}),
])
def test_a_first_answer_is_drawn_in_place_and_the_whole_one_follows(view, query, monkeypatch):
    """With every report drawn (no first-draw delay, no throttle), the views that refine in place draw their first
    answer (attribution: gradient × input; interventions: attribution patching's grid with exact rows filled in)
    and then the whole one: the page runs through every partial draw, and the charts it ends with are the final
    ones (the partial charts are replaced)."""
    import json

    from explorer.ui import cache

    monkeypatch.setattr(cache, "FIRST_DRAW_S", 0.0)
    monkeypatch.setattr(cache, "REDRAW_S", 0.0)
    drawn = []
    monkeypatch.setattr(cache.st, "progress", lambda value, text="": drawn.append((value, text)))
    cache.results().clear()  # computed here, not read from what another test kept
    loaded = cache.model_cache().get("builtin:tiny-gpt", "cpu", "float32", None)
    for owner in (loaded.adapter, loaded.caps.gradient, loaded.caps.lens):  # nor from the model's prefix memos
        if owner is not None:
            model_state.forget(owner)
    at = run_page(BY_PATH[view].script, {"model": "builtin:tiny-gpt", **query})
    assert_no_exception(at)
    assert len(drawn) >= 2 and drawn[0][0] == 0.0, drawn
    titles = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]
    if view == "token-attribution":
        assert "gradient × input" in drawn[0][1] and any("integrated gradients so far" in t for _, t in drawn), drawn
        assert titles[0].startswith("integrated gradients:"), titles
    else:
        assert any("patched runs" in t for _, t in drawn), drawn
        assert not any("exact in" in t for t in titles), titles  # the grid so far is gone: the final grids
        assert titles[0].startswith("Denoising"), titles
