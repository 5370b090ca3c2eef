"""Timing of the logit-lens, token-attribution and gradients-through-time views on the CPU (medians of N runs).

    python bench/bench_lens_attribution_gradients.py [--runs 7] [--threads 1]

Per view: the bare computation (the probe, no cache), the bare page rerun (AppTest of app_pages/overview.py), the page
rerun after a new sentence, and the ratio rerun / (bare computation + bare page). Target: ≤ 1.5. Also: integrated
gradients with 32 steps on builtin:tiny-gpt for every output of a 12-token sentence (target: under 1 s).
"""
from __future__ import annotations

from _common import median_script_ms, median_ms, open_page, print_rerun_table, runs_and_threads  # noqa: E402

import torch  # noqa: E402

from explorer.loading.loaders import load_model  # noqa: E402
from explorer.probes.token_attribution import attribution  # noqa: E402
from explorer.probes.gradients_through_time import gradients_through_time  # noqa: E402
from explorer.probes.logit_lens import logit_lens  # noqa: E402

NOUNS = ["dog", "car", "table", "key", "cabinet", "train", "boat", "bus", "truck", "van", "plane", "ship", "sofa"]


def sentence(i: int) -> str:
    """A different 11-word sentence (12 tokens with <bos>) each time, so no rerun is served from the cache."""
    return f"the {NOUNS[i % len(NOUNS)]} near the old {NOUNS[(i // 13) % len(NOUNS)]}s is on the big table ."


def main() -> None:
    runs = runs_and_threads(__doc__, 7)
    gpt = load_model("builtin:tiny-gpt")
    models = [load_model(f"builtin:{n}") for n in ("rnn-lm", "gru-lm", "lstm-lm")]
    cases = [
        ("Logit lens", "app_pages/logit_lens.py", {"model": "builtin:tiny-gpt"}, lambda s: logit_lens(gpt, s)),
        ("Token attribution (IG, at most 32 gradient evaluations per output)", "app_pages/token_attribution.py",
         {"model": "builtin:tiny-gpt", "steps": "32"},
         lambda s: attribution(gpt, s, "", 32)),
        ("Gradients through time (3 models)", "app_pages/gradients_through_time.py", {},
         lambda s: [gradients_through_time(m, s) for m in models]),
    ]
    home = open_page()
    bare_ms, bare_script = median_script_ms(lambda i: home.run(), runs)
    print(f"CPU, {torch.get_num_threads()} torch threads, medians of {runs} runs, 12-token sentences\n")
    for title, page, params, compute in cases:
        compute(sentence(0))
        probe_ms = median_ms(lambda i: compute(sentence(i + 1)), runs)
        at = open_page(page, {**params, "text": sentence(0)})
        at.run()

        def change(i: int) -> None:
            at.text_input(key="text").set_value(sentence(200 + i)).run()

        change_ms, change_script = median_script_ms(change, runs)
        assert not at.exception, [e.value for e in at.exception]
        print(f"## {title}")
        print_rerun_table([(f"bare computation ({title})", probe_ms)],
                          [("bare page rerun (app_pages/overview.py)", bare_ms, bare_script),
                           ("page rerun after a new sentence", change_ms, change_script)],
                          "ratio rerun / (computation + bare page)", change_ms / (probe_ms + bare_ms),
                          change_script / (probe_ms + bare_script))
        print()


if __name__ == "__main__":
    main()
