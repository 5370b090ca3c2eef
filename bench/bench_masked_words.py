"""Timing of the masked-word view (app_pages/masked_words.py) on the CPU; prints a table (medians of N runs).

    python bench/bench_masked_words.py [--runs 7]

Rows: bare probe (masked_fill on a 10-word sentence with one [MASK], no cache), bare page rerun (AppTest of
app_pages/overview.py), page rerun after changing the sentence (probe cache miss; the second sentence stays cached),
page rerun with nothing changed (cache hit), and the ratio page-after-change / (bare probe + bare page).
Target: ratio <= 1.5. On the view's default model (explorer.views: pretrained:minilm-mlm), then on builtin:masked-lm
(the generated English's, which the masked-words lesson pins).
"""
from __future__ import annotations

# _common sets the environment: import it first
from _common import median_ms, median_script_ms, open_page, print_rerun_table, runs_and_threads

import torch  # noqa: E402

from explorer import views  # noqa: E402
from explorer.loading.loaders import load_model  # noqa: E402
from explorer.probes.masked_words import masked_fill  # noqa: E402

NOUNS = ["cabinet", "desk", "shelf", "sofa", "bed", "chair", "lamp", "cupboard", "bench", "drawer", "mirror",
         "wardrobe", "bookcase", "stool", "car", "bus", "truck", "train", "boat", "van", "taxi", "plane", "ship"]


def sentence(i: int) -> str:
    return f"the keys to the {NOUNS[i % len(NOUNS)]} [MASK] on the {NOUNS[(i // len(NOUNS)) % len(NOUNS)]} ."


def default_model() -> str:
    """The masked-word view's default model, as its page opens it."""
    return str(views.BY_PATH["masked-words"].params["model"].default)


def bench(mid: str, runs: int) -> None:
    loaded = load_model(mid, "cpu", "float32")
    masked_fill(loaded, sentence(0), 10, "is, are")  # warm up
    probe_ms = median_ms(lambda i: masked_fill(loaded, sentence(i + 1), 10, "is, are"), runs)

    home = open_page()
    bare_ms, bare_script = median_script_ms(lambda i: home.run(), runs)

    at = open_page("app_pages/masked_words.py", {"model": mid, "text": sentence(0)})
    at.run()  # everything cached from here on

    def change(i: int) -> None:
        at.text_input(key="text").set_value(sentence(100 + i)).run()

    change_ms, change_script = median_script_ms(change, runs)
    assert not at.exception, [e.value for e in at.exception]
    same_ms, same_script = median_script_ms(lambda i: at.run(), runs)

    ratio = change_ms / (probe_ms + bare_ms)
    ratio_script = change_script / (probe_ms + bare_script)
    print(f"Masked-word view, CPU ({torch.get_num_threads()} torch threads), 10-word sentence with one [MASK] and "
          f"a second sentence side by side, model: {mid}")
    print(f"median of {runs} runs each; page bytecode cached as on the real server\n")
    print_rerun_table([("bare probe (masked_fill, no cache)", probe_ms)],
                      [("bare page rerun (app_pages/overview.py)", bare_ms, bare_script),
                       ("page rerun after changing the sentence", change_ms, change_script),
                       ("page rerun, nothing changed (cached probe)", same_ms, same_script)],
                      "ratio change / (probe + bare page)", ratio, ratio_script)


def main() -> None:
    runs = runs_and_threads(__doc__, 7)
    for mid in dict.fromkeys((default_model(), "builtin:masked-lm")):
        bench(mid, runs)
        print()


if __name__ == "__main__":
    main()
