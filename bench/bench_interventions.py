"""Timing of the interventions view on one CPU thread (medians of N runs, each on a new pair of prompts).

    python bench/bench_interventions.py [--runs 5] [--threads 1] [--only builtin|smollm2]

Exact activation patching of the residual stream (every layer before each block and after the last × every
position, one patched run per cell, batched by layer and resumed from that layer), every other grid, and
attribution patching of every grid at once (one forward and backward of the corrupted prompt, one forward of the
clean one), on the built-in GPT (12-token prompts) and on SmolLM2-135M (30 layers, 10-token prompts). Targets:
built-in residual grid < 0.3 s; SmolLM2 residual grid < 10 s, attribution of every grid < 1 s. Then the page:
a rerun after changing only the highlighted cell (everything cached: no model runs).
"""
from __future__ import annotations

import argparse
import sys

from _common import median_ms, open_page, runs_and_threads  # noqa: E402

import torch  # noqa: E402

from explorer.loading import pretrained  # noqa: E402
from explorer.loading.loaders import load_model  # noqa: E402
from explorer.probes import interventions as I  # noqa: E402

NOUNS = ["dog", "car", "table", "key", "cabinet", "train", "boat", "bus", "truck", "plane", "ship", "sofa"]
CITIES = [("Eiffel Tower", "Paris"), ("Colosseum", "Rome"), ("Big Ben", "London"), ("Space Needle", "Seattle"),
          ("Brandenburg Gate", "Berlin"), ("Sagrada Familia", "Barcelona"), ("Golden Gate Bridge", "San Francisco")]


def builtin_pair(i: int) -> tuple[str, str, str, str]:
    """12 tokens with <bos>: the subject's number differs (keys / key); a new attractor noun each run."""
    noun = NOUNS[i % len(NOUNS)]
    return (f"the keys to the old {noun} near the big red {NOUNS[(i + 3) % len(NOUNS)]}",
            f"the key to the old {noun} near the big red {NOUNS[(i + 3) % len(NOUNS)]}", "are", "is")


TEMPLATES = ("The {} is in the city of", "The famous {} is in the city of", "The {} stands in the city of",
             "Tourists visit the {} in the city of")


def smollm2_pair(model, i: int, tokens: int = 10) -> tuple[str, str, str, str]:
    """Two landmarks in one template whose prompts both have `tokens` tokens (a new pair for each i)."""
    adapter = model.adapter
    pairs = []
    for template in TEMPLATES:
        for x, cx in CITIES:
            for y, cy in CITIES:
                clean, corrupt = template.format(x), template.format(y)
                if x != y and cx.split()[0] != cy.split()[0] and \
                        len(adapter.encode(clean).ids) == len(adapter.encode(corrupt).ids) == tokens:
                    pairs.append((clean, corrupt, cx, cy))
    if not pairs:
        raise SystemExit(f"no pair of {tokens} tokens")
    return pairs[i % len(pairs)]


def time_model(title: str, model, pair, runs: int) -> None:
    args = pair(0)
    I.patching(model, *args, I.layout(model).kinds[0])  # warm-up
    n_tokens = len(I.contrast(model, *args).ids)
    rows = []
    for kind in I.layout(model).kinds:
        ms = median_ms(lambda i: I.patching(model, *pair(i + 1), kind), runs)
        grid = I.patching(model, *pair(1), kind)
        rows.append((f"exact patching: {I.KINDS[kind]} ({grid.runs} patched runs)", ms))
    rows.append(("attribution patching: every grid", median_ms(lambda i: I.attribution(model, *pair(i + 1)), runs)))
    print(f"## {title}, {n_tokens}-token prompts, {I.layout(model).n_layers} layers\n")
    print("| computation | median |\n|---|---|")
    for name, ms in rows:
        print(f"| {name} | {ms / 1000:.3f} s |")
    print()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=["builtin", "smollm2"], action="append")
    known, rest = ap.parse_known_args()
    sys.argv[1:] = rest
    runs = runs_and_threads(__doc__, 5, threads=1)
    only = set(known.only or ["builtin", "smollm2"])
    print(f"CPU, {torch.get_num_threads()} torch thread(s), medians of {runs} runs, a new pair of prompts each run\n")
    if "builtin" in only:
        time_model("builtin:tiny-gpt", load_model("builtin:tiny-gpt"), builtin_pair, runs)
        lstm = load_model("builtin:lstm-lm")
        time_model("builtin:lstm-lm", lstm, builtin_pair, runs)
    if "smollm2" in only and pretrained.is_installed("smollm2"):
        model = load_model("pretrained:smollm2")
        time_model("pretrained:smollm2", model, lambda i: smollm2_pair(model, i), runs)
    at = open_page("app_pages/interventions.py", {"model": "builtin:tiny-gpt"})
    at.run()
    rows = len(at.selectbox(key="layer").options)

    def highlight(i: int) -> None:
        at.selectbox(key="layer").set_value(i % rows).run()

    ms = median_ms(highlight, runs)
    assert not at.exception, [e.value for e in at.exception]
    print(f"Page rerun after changing only the highlighted cell (builtin:tiny-gpt): {ms:.0f} ms (cached grid)")


if __name__ == "__main__":
    main()
