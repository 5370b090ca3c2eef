"""Per-page timing table (AppTest, CPU): median rerun after changing the sentence vs the compute it calls.

Usage: python bench/bench_pages.py [--runs 5] [--page app_pages/x.py]
For each registered page: run it once (model load, warm-up), then `runs` times type a NEW sentence and rerun.
'compute' is the time spent inside uncached probe calls during that rerun (explorer.ui.cache.COMPUTE_LOG);
'overhead' = rerun - compute is Streamlit + figure building. A page with no sentence input is rerun as is.
"""
from __future__ import annotations

import argparse
import statistics
import time

from _common import ROOT  # noqa: E402  (sets the environment first)

SENTENCES = [
    "the keys to the old cabinet are on the table .",
    "the dog that the farmers feed sleeps in the barn .",
    "the computer which i had just put into the machine room on the fifth floor crashed .",
    "a robot must obey the orders given it .",
    "the animal didn't cross the street because it was too tired .",
    "the children near the red car are happy .",
    "my friend said \" the cat is hungry \" and left .",
]



def bench_page(script: str, runs: int) -> dict:
    from streamlit.testing.v1 import AppTest

    from explorer.ui import cache

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.run()
    if script != "app_pages/overview.py":
        at.switch_page(script)
    at.run()  # warm: model loads, first compute
    has_text = any(w.key == "text" for w in at.text_input)
    reruns, computes = [], []
    for i in range(runs):
        if has_text:
            at.text_input(key="text").set_value(SENTENCES[i % len(SENTENCES)] + f" {i}" * (i // len(SENTENCES)))
        before = len(cache.COMPUTE_LOG)
        start = time.perf_counter()
        at.run()
        reruns.append(time.perf_counter() - start)
        computes.append(sum(s for _, s in cache.COMPUTE_LOG[before:]))
        if at.exception:
            raise RuntimeError(f"{script}: {at.exception[0].value}")
    rerun, compute = statistics.median(reruns), statistics.median(computes)
    return {"page": script, "text input": has_text, "rerun": rerun, "compute": compute, "overhead": rerun - compute}


def main() -> None:
    from explorer.views import VIEWS

    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--page", action="append")
    args = parser.parse_args()
    import logging

    logging.getLogger("streamlit").setLevel(logging.ERROR)
    pages = args.page or [v.script for v in VIEWS]
    import torch

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, device cpu, runs={args.runs}")
    print("| page | sentence changed | median rerun (s) | median compute (s) | rerun − compute (s) |")
    print("|---|---|---|---|---|")
    for script in pages:
        r = bench_page(script, args.runs)
        print(f"| {r['page']} | {'yes' if r['text input'] else 'no input'} | {r['rerun']:.3f} | {r['compute']:.3f} "
              f"| {r['overhead']:.3f} |")


if __name__ == "__main__":
    main()
