"""What one user sees in a real browser (Debian's chromium): cold start, first UMAP after a restart, typing → chart.

    python bench/bench_browser.py                      # all three
    python bench/bench_browser.py --only typing --samples 10
    python bench/bench_browser.py --only typing --samples 10 --new-sentences
    python bench/bench_browser.py --only typing --samples 10 --real   # the real model's views (SmolLM2)
    python bench/bench_browser.py --only typing --samples 12 --tasks  # the decision view on the task models

- cold start: from starting `streamlit run app.py` to the home page rendered (its title and the sidebar's
  settings) in an already running browser; then the first view with a model (self-attention, MiniLM) to its chart.
- first UMAP after a restart: a fresh server, the word-embeddings view opened on UMAP of MiniLM's whole words
  (the view's defaults otherwise) until a UMAP chart is painted.
- typing → chart: one browser session per view types a 20-token sentence (19 words, the last a noun no other
  sentence uses, a keystroke every 20 ms) and the time runs, on the page's own clock, from the last keystroke's
  input event until the first animation frame in which a chart's SVG text shows that noun (the 350 ms debounce of
  the live input included): on the main chart's token labels, or its title (decoding: the end of the prompt) or
  axis title (gradients: the last word is the predicted one). The seq2seq heatmap labels a source word its
  vocabulary lacks as "noun→<unk>". That is the first paint: a view that computes for seconds paints a first answer
  under a progress bar and refines it in place (decoding: the tokens so far; attribution: gradient × input, then
  integrated gradients by rounds); the whole answer is the frame with the noun and no progress bar left. A view
  that reads its box on Enter on this model (the label says "Enter to run") gets Enter after the last key.
  By default consecutive sentences differ in their last word only, as when one types on at the end of a sentence
  (the attribution and gradients views then reuse every earlier position: explorer.runtime.prefix_memo); with
  --new-sentences they differ from the second word on.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout: explorer/ and testkit/ (the wheel does not ship testkit)
os.environ.setdefault("EXPLORER_DEVICE", "cpu")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from testkit.browser import CHROMIUM, CHROMIUM_ARGS, streamlit_process  # noqa: E402
from testkit.load_scenario import NOUNS, wait_settled  # noqa: E402
from testkit.view_cases import CASES  # noqa: E402

TEMPLATE = "the girl near the river and the boy near the old house see the big dog with the {}"
# --new-sentences: the second word changes too, so no sentence shares more than "the" with the one before (no
# result of the earlier sentence's positions can be reused: explorer.runtime.prefix_memo)
NEW_TEMPLATE = "the {} near the river and the boy near the old house see the big dog with the {}"
TYPING_DELAY_MS = 20
# url path, query: every view's main chart shows the typed noun (in its SVG text): testkit/view_cases.py
VIEWS = [(path, case.typing) for path, case in CASES.items() if case.typing is not None]
# --real: the views a class opens on the packaged real model, SmolLM2-135M-Instruct (at their defaults for it)
REAL = [(path, "model=pretrained:smollm2") for path in ("logit-lens", "self-attention", "decoding-strategies",
                                                        "token-attribution")]
# --tasks: the decision view on the shipped task models (the sentiment classifier, the tagger)
TASKS = [("decision", "model=builtin:sentiment-lstm&b="), ("decision", "model=builtin:pos-bilstm"),
         ("decision", "model=pretrained:minilm-sentiment&b="), ("decision", "model=pretrained:minilm-pos")]
_IN_CHART = """noun => [...document.querySelectorAll('[data-testid="stPlotlyChart"] svg text')]
    .some(e => new RegExp('(^|[^a-z])' + noun + '([^a-z]|$)').test(e.textContent))"""
# typing → chart on the page's clock: the last input event (the keystroke, not Playwright's reply to it) ...
_LISTEN = "() => document.addEventListener('input', () => { window.__lastInput = performance.now(); }, true)"
# ... to the animation frame in which the noun is there (checked at every frame: the frame that paints it): the first
# paint, which may be a view's first answer refined in place under a progress bar (attribution's gradient × input in
# a chart; decoding's tokens so far, each column's text ending in ▌, under a bar that names the prompt) ...
_SO_FAR = """noun => [...document.querySelectorAll('[data-testid="stProgress"]')]
    .some(e => e.textContent.includes(noun))
    && [...document.querySelectorAll('[data-testid="stMarkdown"]')].some(e => e.textContent.includes('▌'))"""
_ELAPSED = f"noun => (({_IN_CHART})(noun) || ({_SO_FAR})(noun)) && performance.now() - window.__lastInput"
# ... and the frame in which the whole answer is there: the noun in a chart and no progress bar left
_DONE = (f"noun => ({_IN_CHART})(noun) && !document.querySelector('[data-testid=\"stProgress\"]') "
         "&& performance.now() - window.__lastInput")


async def _app_rendered(page, timeout_ms: float) -> None:
    await page.wait_for_selector('[data-testid="stMain"] h1', timeout=timeout_ms)
    await page.wait_for_selector('[data-testid="stSidebarUserContent"] >> text=Settings', timeout=timeout_ms)


async def cold_start(runs: int) -> list[tuple[float, float]]:
    """(seconds to the home page, seconds more to the self-attention chart) per fresh server."""
    from playwright.async_api import async_playwright

    out = []
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        for _ in range(runs):
            page = await (await browser.new_context(viewport={"width": 1400, "height": 1000})).new_page()
            t0 = time.perf_counter()
            with streamlit_process() as (base, _proc):
                await page.goto(base + "/", timeout=120_000)
                await _app_rendered(page, 120_000)
                home = time.perf_counter() - t0
                t1 = time.perf_counter()
                await page.goto(base + "/self-attention?model=pretrained:minilm", timeout=120_000)
                await page.wait_for_selector('[data-testid="stPlotlyChart"] svg text', timeout=120_000)
                out.append((home, time.perf_counter() - t1))
            await page.context.close()
        await browser.close()
    return out


async def first_umap(runs: int) -> list[float]:
    """Seconds from opening the word-embeddings view on UMAP (fresh server) to a painted UMAP chart."""
    from playwright.async_api import async_playwright

    out = []
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        for _ in range(runs):
            page = await (await browser.new_context(viewport={"width": 1400, "height": 1000})).new_page()
            with streamlit_process() as (base, _proc):
                await page.goto(base + "/", timeout=120_000)
                await _app_rendered(page, 120_000)
                t0 = time.perf_counter()
                await page.goto(base + "/word-embeddings?model=pretrained:minilm&method=umap", timeout=300_000)
                await page.wait_for_function(
                    """() => [...document.querySelectorAll('[data-testid="stPlotlyChart"] svg text')]
                        .some(e => /UMAP/.test(e.textContent))""", polling=100, timeout=600_000)
                out.append(time.perf_counter() - t0)
            await page.context.close()
        await browser.close()
    return out


async def typing(samples: int, new_sentences: bool = False, views: list[tuple[str, str]] | None = None
                 ) -> dict[str, tuple[list[float], list[float]]]:
    """Per view, seconds from the last keystroke to the typed noun painted in a chart (first paint), and to the
    whole answer (no progress bar left). A box labelled "(Enter to run)" (a view that computes for seconds on this
    model) gets Enter after the last key. new_sentences: each sentence differs from the one before from its second
    word on (else only in its last)."""
    views = VIEWS if views is None else views
    from playwright.async_api import async_playwright

    out: dict[str, tuple[list[float], list[float]]] = {}
    with streamlit_process() as (base, _proc):
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            page = await (await browser.new_context(viewport={"width": 1400, "height": 1000})).new_page()
            await page.goto(base + "/", timeout=120_000)  # a fresh server's first session opens the root URL
            await _app_rendered(page, 120_000)
            for k, (path, query) in enumerate(views):
                await page.goto(f"{base}/{path}?{query}&text=" + TEMPLATE.format("cat").replace(" ", "+"),
                                timeout=180_000)
                await wait_settled(page, 180)
                await page.evaluate(_LISTEN)
                times: list[float] = []
                whole: list[float] = []
                try:
                    for i in range(samples + 1):  # the first sentence warms the view up and is not counted
                        noun = NOUNS[(k * 7 + i) % len(NOUNS)]
                        box = page.locator("textarea.sentence-box__input").first
                        await box.click()
                        await box.press("Control+a")
                        sentence = NEW_TEMPLATE.format(NOUNS[(k * 7 + i + 10) % len(NOUNS)], noun) if new_sentences \
                            else TEMPLATE.format(noun)
                        await box.press_sequentially(sentence, delay=TYPING_DELAY_MS)
                        if "Enter to run" in await page.locator(".sentence-box__label").first.inner_text():
                            await box.press("Enter")
                        elapsed = await page.wait_for_function(_ELAPSED, arg=noun, polling="raf",
                                                               timeout=180_000)
                        done = await page.wait_for_function(_DONE, arg=noun, polling="raf", timeout=180_000)
                        if i:
                            times.append(await elapsed.json_value() / 1000)
                            whole.append(await done.json_value() / 1000)
                        await wait_settled(page, 60, settle_ms=300)
                except Exception as exc:  # say which view, keep the others' figures
                    shot = ROOT / "artifacts" / f"typing-{path}.png"
                    shot.parent.mkdir(parents=True, exist_ok=True)
                    await page.screenshot(path=str(shot))
                    print(f"{path}: {type(exc).__name__}: {str(exc).splitlines()[0]} (screenshot {shot})", flush=True)
                out[path if sum(v == path for v, _ in views) == 1 else f"{path} ({query})"] = (times, whole)
            await browser.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=["cold", "umap", "typing"], action="append")
    ap.add_argument("--runs", type=int, default=2, help="fresh servers for the cold start and first UMAP")
    ap.add_argument("--samples", type=int, default=8, help="typed sentences per view")
    ap.add_argument("--new-sentences", action="store_true",
                    help="each typed sentence differs from the one before from its second word on")
    ap.add_argument("--real", action="store_true", help="typing: the lens, self-attention, decoding and attribution "
                    "views on pretrained:smollm2 (instead of every view's small default)")
    ap.add_argument("--tasks", action="store_true", help="typing: the decision view on the shipped sentiment "
                    "classifier and part-of-speech tagger")
    args = ap.parse_args()
    only = set(args.only or ["cold", "umap", "typing"])
    if "cold" in only:
        for home, chart in asyncio.run(cold_start(args.runs)):
            print(f"cold start: home page {home:.2f} s after the process started; then self-attention (MiniLM) "
                  f"chart {chart:.2f} s", flush=True)
    if "umap" in only:
        for s in asyncio.run(first_umap(args.runs)):
            print(f"first UMAP of MiniLM's whole words after a restart: {s:.2f} s to the painted chart", flush=True)
    if "typing" in only:
        print("\n| view | samples | typing → first paint p50 | p95 | max | → whole answer p50 | p95 |\n"
              "|---|---|---|---|---|---|---|")
        for view, (times, whole) in asyncio.run(typing(args.samples, args.new_sentences,
                                                       REAL if args.real else TASKS if args.tasks else None)).items():
            xs, ws = np.array(times), np.array(whole)
            if not xs.size:
                print(f"| {view} | 0 | — | — | — | — | — |")
                continue
            print(f"| {view} | {xs.size} | {np.percentile(xs, 50):.2f} s | {np.percentile(xs, 95):.2f} s | "
                  f"{xs.max():.2f} s | {np.percentile(ws, 50):.2f} s | {np.percentile(ws, 95):.2f} s |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
