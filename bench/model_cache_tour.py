"""The model cache over a scripted tour of every view (issue 35): each view's default model(s), in the order of the
navigation (explorer/views.py), loaded as its page loads them, the whole tour twice over; how many times a loader
ran under the old bound (at most 4 models, no byte bound) and under the default one (EXPLORER_MAX_MODEL_MB, 2048 MB
of weights). Real models on the CPU in float32 (their real sizes). Prints a Markdown table.

    python bench/model_cache_tour.py
"""
from __future__ import annotations

import os
import time
from collections import Counter

from _common import ROOT  # sets the import path and the offline environment first

# The head a page asks for (get_model(..., task=)); only Hugging Face models load differently with one.
TASKS = {"masked-words": "masked-lm"}


def tour() -> list[tuple[str, str, str | None]]:
    """(view, model id, task) in the order a user clicking through every view's default model loads them."""
    from explorer import views

    steps: list[tuple[str, str, str | None]] = []
    for view in views.VIEWS:
        for name, param in view.params.items():
            if param.kind in ("model", "model or none") and param.default not in (None, "none"):
                steps.append((view.url_path, str(param.default), TASKS.get(view.url_path)))
            elif name == "models" and param.kind == "choices":
                steps += [(view.url_path, str(mid), TASKS.get(view.url_path)) for mid in param.default]
    return steps


def run(label: str, max_models: int | None, max_bytes: int | None, steps: list) -> dict:
    from explorer.loading.loaders import load_model
    from explorer.loading.model_cache import ModelCache

    seconds: list[float] = []
    loaded: Counter[str] = Counter()

    def timed_load(model_id: str, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return load_model(model_id, *args, **kwargs)
        finally:
            seconds.append(time.perf_counter() - t0)
            loaded[model_id] += 1

    cache = ModelCache(max_models=max_models, max_bytes=max_bytes, loader=timed_load)
    peak = 0
    for _ in range(2):  # the whole tour twice over
        for _view, model_id, task in steps:
            cache.get(model_id, "cpu", "float32", task)
            peak = max(peak, cache.total_bytes)
    out = {"label": label, "loads": cache.loads, "load_s": sum(seconds), "peak_mib": peak / 2**20,
           "held": len(cache.loaded()),
           "reloaded": ", ".join(f"{mid.split(':', 1)[1]} ×{n}" for mid, n in loaded.most_common() if n > 1) or "none"}
    cache.clear()
    return out


def main() -> None:
    os.chdir(ROOT)  # as the app runs
    from explorer.loading.model_cache import DEFAULT_MAX_MODEL_MB

    steps = tour()
    distinct = len({(mid, task if mid.startswith(("hf:", "pretrained:", "local:")) else None)
                    for _, mid, task in steps})
    print("Tour (once; the bench runs it twice):", ", ".join(f"{v}: {m}" for v, m, _ in steps))
    pages = len(dict.fromkeys(view for view, _, _ in steps))
    print(f"{pages} pages, {len(steps)} models asked for per tour ({2 * len(steps)} in all); {distinct} distinct\n")
    from explorer.loading.loaders import load_model

    for mid, task in dict.fromkeys((mid, task) for _, mid, task in steps):  # warm-up: imports, converted files
        load_model(mid, "cpu", "float32", task)
    rows = [run("before: at most 4 models (the old default), no byte bound", 4, 2**62, steps),
            run(f"after: {DEFAULT_MAX_MODEL_MB} MB of weights (the default), count cap 64", None, None, steps)]
    print("| cache bound | model loads over 2 tours | distinct models | loaded more than once | loading time | "
          "peak bytes held | held at the end |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['label']} | **{r['loads']}** | {distinct} | {r['reloaded']} | {r['load_s']:.1f} s | "
              f"{r['peak_mib']:.0f} MiB | {r['held']} models |")
    print(f"\nload average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
