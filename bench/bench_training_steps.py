"""The training series: step switch time per view, series size on disk, and the training-time cost of snapshots.

    python bench/bench_training_steps.py                 # switch times (AppTest, 1 torch thread) and sizes
    python bench/bench_training_steps.py --overhead      # and train lstm-lm and tiny-gpt with and without 16 snapshots

Switch: each view is opened on builtin:lstm-lm or builtin:tiny-gpt at its trained checkpoint, then its training-step
slider is moved to every snapshot in turn (the first load of each snapshot included) and the rerun timed: request to
script end, as AppTest sees it. Printed: median, p95 and max per view, then a README table.
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


def overhead(name: str) -> tuple[float, float]:
    from explorer.training.recipes import train_builtin

    plain = train_builtin(name, save=False).meta["train"]["seconds"]
    kept = train_builtin(name, save=False, snapshots=16, snapshot_dtype="float16").meta["train"]["seconds"]
    return plain, kept


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--overhead", action="store_true")
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
    if args.overhead:
        print("| model | training without snapshots | with 16 | overhead |\n|---|---|---|---|")
        for name in ("lstm-lm", "tiny-gpt"):
            plain, kept = overhead(name)
            print(f"| {name} | {plain:.1f} s | {kept:.1f} s | {100 * (kept / plain - 1):+.1f} % |", flush=True)


if __name__ == "__main__":
    main()
