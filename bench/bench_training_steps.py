"""The training series: step switch time per view, series size on disk, and the training-time cost of snapshots.

    python bench/bench_training_steps.py                 # switch times (AppTest, 1 torch thread) and sizes
    python bench/bench_training_steps.py --overhead      # and train lstm-lm and tiny-gpt with and without 16 snapshots
    python bench/bench_training_steps.py --browser       # and the same switch in Debian's chromium, key to paint
    python bench/bench_training_steps.py --compare       # and the views' Compare with: a second model, whole page

Switch: each view is opened on builtin:lstm-lm or builtin:tiny-gpt at its trained checkpoint, then its training-step
slider is moved to every snapshot in turn (the first load of each snapshot included) and the rerun timed: request to
script end, as AppTest sees it. Printed: median, p95 and max per view, then a table for docs/watch-it-learn.md.

--browser: what a user sees. A real server and chromium open the view at the trained checkpoint, open the step
button's slider and press the left arrow key once per snapshot (to step 0, each snapshot's first load included);
the time runs on the page's own clock from the keydown to the animation frame in which the main chart's values have
changed (a fingerprint of its z, checked every frame).
"""
from __future__ import annotations

import argparse
import statistics
import time

from _common import ROOT  # noqa: E402  (sets the environment first)

VIEWS = [("app_pages/lstm_gates.py", "builtin:lstm-lm", {}),
         ("app_pages/self_attention.py", "builtin:tiny-gpt", {}),
         ("app_pages/logit_lens.py", "builtin:tiny-gpt", {}),
         ("app_pages/positional_encodings.py", "builtin:tiny-gpt", {"panel": "learned"}),
         ("app_pages/word_embeddings.py", "builtin:tiny-gpt", {"section": "neighbours", "nn": "red"}),
         ("app_pages/decoding_strategies.py", "builtin:lstm-lm", {}),
         ("app_pages/token_attribution.py", "builtin:tiny-gpt", {}),
         ("app_pages/interventions.py", "builtin:lstm-lm", {})]
TEXT = "the keys to the old cabinet are on the table ."


def switch_times(page: str, model: str, extra: dict[str, str]) -> list[float]:
    from streamlit.testing.v1 import AppTest

    from explorer.loading.catalogue import series_steps

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.run()
    at.switch_page(page)
    for key, value in {"model": model, **extra}.items():
        at.query_params[key] = value
    at.run()
    times = []
    for step in series_steps(model)[:-1]:
        slider = next(s for s in at.select_slider if s.key == "train_step")
        slider.set_value(step)
        start = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - start)
        if at.exception:
            raise RuntimeError(f"{page} at step {step}: {at.exception[0].value}")
    return times


BROWSER_VIEWS = [("lstm-gates", "builtin:lstm-lm", "heatmap", "gate=c"),
                 ("self-attention", "builtin:tiny-gpt", "head_heatmap", "mode=head&layer=1&head=2")]
# from the keydown to the first animation frame whose chart differs from the one before the key
_ARM = """k => { window.__switch = new Promise(resolve => {
  const fp = () => { const el = document.querySelector(`.st-key-${k} .js-plotly-plot`);
    if (!el || !el._fullData) return null; let s = 0;
    for (const row of el._fullData[0].z) for (const v of row) s += v * v; return s.toFixed(6); };
  const before = fp(); let t0 = null; setTimeout(() => resolve(-1), 30000);  // no change in 30 s: -1
  document.addEventListener('keydown', () => { t0 = performance.now(); }, {once: true, capture: true});
  const tick = () => { const now = fp(); if (t0 !== null && now !== null && now !== before)
      resolve(performance.now() - t0); else requestAnimationFrame(tick); };
  requestAnimationFrame(tick); }); }"""


def browser_switch_times() -> dict[str, list[float]]:
    from playwright.sync_api import sync_playwright

    from explorer.loading.catalogue import series_steps
    from testkit.browser import CHROMIUM, CHROMIUM_ARGS, streamlit_server, wait_for_app

    out: dict[str, list[float]] = {}
    with streamlit_server() as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        for view, model, key, extra in BROWSER_VIEWS:
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            page.goto(f"{base}/{view}?model={model}&text={TEXT}&{extra}")
            wait_for_app(page)
            page.locator(f".st-key-{key} .js-plotly-plot").wait_for(timeout=120_000)
            page.locator("[data-testid='stPopover'] button").filter(has_text="end").first.click()
            thumb = page.locator(".st-key-train_step input").first  # the slider's own range input
            thumb.wait_for(timeout=30_000)
            times = []
            for _ in series_steps(model)[:-1]:
                page.evaluate(_ARM, key)
                thumb.focus()
                page.keyboard.press("ArrowLeft")
                took = page.evaluate("() => window.__switch")
                if took < 0:
                    raise RuntimeError(f"{view}: the chart did not change within 30 s of the key")
                times.append(took / 1000)
                wait_for_app(page, settle_ms=300)
            out[f"{view} ({model.removeprefix('builtin:')})"] = times
            page.close()
        browser.close()
    return out


COMPARE = [("app_pages/decoding_strategies.py", {"model": "builtin:lstm-lm", "text": "the dog that the farmers"},
            "builtin:lstm-lm@127"),
           ("app_pages/masked_words.py", {"model": "builtin:masked-lm",
                                          "text": "the keys to the cabinet [MASK] on the table ."},
            "builtin:masked-lm-wordnet"),
           ("app_pages/word_embeddings.py", {"model": "builtin:lstm-lm", "section": "neighbours", "nn": "dog"},
            "builtin:lstm-lm@43"),
           ("app_pages/interventions.py", {"model": "builtin:tiny-gpt"}, "builtin:tiny-gpt@272")]


def compare_times(page: str, params: dict[str, str], other: str) -> tuple[float, float]:
    """(seconds of the page run that adds the second model, of the next run on a new sentence): AppTest's whole
    script run, the first model's results already cached."""
    from streamlit.testing.v1 import AppTest

    def run(query: dict[str, str]) -> float:
        at = AppTest.from_file(str(ROOT / page), default_timeout=300)
        for key, value in query.items():
            at.query_params[key] = value
        start = time.perf_counter()
        at.run()
        if at.exception:
            raise RuntimeError(f"{page}: {at.exception[0].value}")
        return time.perf_counter() - start

    run(params)
    first = run({**params, "compare": other})
    text = {"text": params["text"] + " ."} if "text" in params else {}
    return first, run({**params, "compare": other, **text})


def overhead(name: str) -> tuple[float, float]:
    from explorer.training.recipes import train_builtin

    plain = train_builtin(name, save=False).meta["train"]["seconds"]
    kept = train_builtin(name, save=False, snapshots=16, snapshot_dtype="float16").meta["train"]["seconds"]
    return plain, kept


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--overhead", action="store_true")
    ap.add_argument("--browser", action="store_true")
    ap.add_argument("--compare", action="store_true")
    args = ap.parse_args()
    import logging

    import torch

    logging.getLogger("streamlit").setLevel(logging.ERROR)
    torch.set_num_threads(1)
    sizes = {p.name: p.stat().st_size for p in (ROOT / "assets" / "builtin").glob("*.snapshots.safetensors")}
    print("series on disk:", ", ".join(f"{k} {v / 2**20:.1f} MiB" for k, v in sorted(sizes.items())),
          f"(total {sum(sizes.values()) / 2**20:.1f} MiB)")
    print("| view | model | switches | median | p95 | max |\n|---|---|---|---|---|---|")
    for page, model, extra in VIEWS:
        t = sorted(switch_times(page, model, extra))
        p95 = t[min(len(t) - 1, round(0.95 * (len(t) - 1)))]
        print(f"| {page.split('/')[-1][:-3]} | {model} | {len(t)} | {statistics.median(t):.3f} s | {p95:.3f} s "
              f"| {t[-1]:.3f} s |", flush=True)
    if args.browser:
        print("| view (model), in chromium | switches | key to paint, median | p95 | max |\n|---|---|---|---|---|")
        for name, t in browser_switch_times().items():
            t = sorted(t)
            p95 = t[min(len(t) - 1, round(0.95 * (len(t) - 1)))]
            print(f"| {name} | {len(t)} | {statistics.median(t):.3f} s | {p95:.3f} s | {t[-1]:.3f} s |", flush=True)
    if args.compare:
        print("| view | compared with | adding it | next sentence |\n|---|---|---|---|")
        for page, params, other in COMPARE:
            first, again = compare_times(page, params, other)
            print(f"| {page.split('/')[-1][:-3]} | {other} | {first:.2f} s | {again:.2f} s |", flush=True)
    if args.overhead:
        print("| model | training without snapshots | with 16 | overhead |\n|---|---|---|---|")
        for name in ("lstm-lm", "tiny-gpt"):
            plain, kept = overhead(name)
            print(f"| {name} | {plain:.1f} s | {kept:.1f} s | {100 * (kept / plain - 1):+.1f} % |", flush=True)


if __name__ == "__main__":
    main()
