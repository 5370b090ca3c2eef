"""Real browser: a view read at three training steps keeps its frame (colour range) while the model changes; the play
button steps through the snapshots; "Watch it learn" draws a point per snapshot. Screenshots, normal and projector,
in artifacts/screenshots/steps/ (look at them)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from testkit.browser import ROOT, wait_for_app
from explorer.loading.catalogue import series_steps

pytestmark = pytest.mark.slow
SHOTS = Path(os.environ.get("EXPLORER_SCREENSHOTS", ROOT / "artifacts" / "screenshots")) / "steps"
AGREEMENT = "the keys to the cabinet are on the table"
# the heatmap's colour range and a fingerprint of its values, from the chart the browser drew
CHART = """k => { const el = document.querySelector(`.st-key-${k} .js-plotly-plot`); if (!el) return null;
  const d = el._fullData[0]; let s = 0; for (const row of d.z) for (const v of row) s += v * v;
  return {zmin: d.zmin, zmax: d.zmax, sum: s, title: el.layout.title.text}; }"""  # sum of squares: rows of
# attention sum to 1 whatever the step
VIEWS = [  # view, model, three steps (the last: the trained model), chart key, its other parameters
    ("lstm-gates", "builtin:lstm-lm", (3, 127, 1878), "heatmap", f"gate=c&sort=variance&text={AGREEMENT}"),
    ("self-attention", "builtin:tiny-gpt", (5, 98, 1252), "head_heatmap", f"mode=head&layer=1&head=2&text={AGREEMENT}"),
]


def _open(page, url: str, key: str) -> dict:
    page.goto(url)
    wait_for_app(page, settle_ms=500)
    page.locator(f".st-key-{key} .js-plotly-plot").wait_for(timeout=90_000)
    wait_for_app(page)
    assert page.locator('[data-testid="stException"]').count() == 0, url
    return page.evaluate(CHART, key)


@pytest.mark.parametrize("mode", ["normal", "projector"])
@pytest.mark.parametrize("view, model, steps, key, params", VIEWS, ids=[v[0] for v in VIEWS])
def test_a_view_at_three_steps_keeps_its_frame(browser, server, mode, view, model, steps, key, params) -> None:
    assert set(steps) <= set(series_steps(model)) and steps[-1] == series_steps(model)[-1]
    SHOTS.mkdir(parents=True, exist_ok=True)
    width, height = (1280, 800) if mode == "projector" else (1600, 1000)
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    drawn = []
    try:
        for step in steps:
            url = f"{server}/{view}?model={model}&train_step={step}&{params}" + \
                ("&projector=1" if mode == "projector" else "")
            drawn.append(_open(page, url, key))
            label = "end" if step == steps[-1] else f"{step:,}"
            assert page.locator(".st-key-_step_popover, [data-testid='stPopover']").filter(
                has_text=label).count() >= 1, f"{view} at step {step}: no step button reading {label!r}"
            page.screenshot(path=str(SHOTS / f"{view}-step{step}-{mode}.png"))
    finally:
        context.close()
    ranges = {(d["zmin"], d["zmax"]) for d in drawn}
    assert len(ranges) == 1, f"{view}: the colour range moved with the step: {ranges}"
    sums = [round(d["sum"], 4) for d in drawn]
    assert len(set(sums)) == 3, f"{view}: the model did not change with the step: {sums}"


def test_play_steps_through_the_snapshots(browser, server) -> None:
    steps = series_steps("builtin:lstm-lm")
    context = browser.new_context(viewport={"width": 1600, "height": 1000})
    page = context.new_page()
    try:
        _open(page, f"{server}/lstm-gates?model=builtin:lstm-lm&text={AGREEMENT}", "heatmap")
        page.locator("[data-testid='stPopover'] button").filter(has_text="end").first.click()
        page.locator(".st-key-train_play button").filter(has_text="play_arrow").first.click()  # a Material icon
        seen: list[str] = []
        for _ in range(40):  # one step every 1.5 s
            page.wait_for_timeout(500)
            label = page.locator("[data-testid='stPopover'] button").filter(has_text="▶").first
            if label.count():
                words = [w.strip() for w in label.inner_text().replace("▶", "").split("\n")]
                text = next((w for w in words if w and w not in ("history", "expand_less", "expand_more")), "")
                if text and (not seen or seen[-1] != text):
                    seen.append(text)
            if len(seen) >= 4:
                break
        assert page.locator('[data-testid="stException"]').count() == 0
        shown = [int(s.replace(",", "")) for s in seen if s.replace(",", "").isdigit()]
        assert len(shown) >= 3 and shown == sorted(shown) and set(shown) <= set(steps), repr(seen)
        assert shown[1] == steps[steps.index(shown[0]) + 1]  # the next snapshot, none skipped
    finally:
        context.close()


@pytest.mark.parametrize("mode", ["normal", "projector"])
def test_watch_it_learn_draws_a_point_per_snapshot(browser, server, mode: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    width, height = (1280, 800) if mode == "projector" else (1600, 1000)
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    try:
        page.goto(f"{server}/training-curves?model=builtin:lstm-lm" + ("&projector=1" if mode == "projector" else ""))
        wait_for_app(page, settle_ms=500)
        page.locator(".st-key-curves .js-plotly-plot").wait_for(timeout=120_000)
        wait_for_app(page)
        assert page.locator('[data-testid="stException"]').count() == 0
        counts = page.evaluate("""() => document.querySelector('.st-key-curves .js-plotly-plot')._fullData
            .filter(d => d.visible !== false && d.x && d.x.length > 2).map(d => d.x.length)""")
        assert counts and max(counts) == len(series_steps("builtin:lstm-lm")), counts
        page.screenshot(path=str(SHOTS / f"training-curves-{mode}.png"))
    finally:
        context.close()
