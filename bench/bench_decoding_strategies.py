"""Timing of the decoding view (app_pages/decoding_strategies.py) on the CPU; prints a table (medians of N runs).

    python bench/bench_decoding_strategies.py [--runs 5]

Work: 50 new tokens × 4 strategies (greedy, top-k, top-p, beam search with 4 beams), 1 sample each, no stop at
<eos> (so every column makes 50 tokens). Rows: bare generation (decode_all, no cache), bare page rerun (AppTest of
app_pages/overview.py), page rerun after changing the prompt (cache miss: generation + per-step probe + figures), page
rerun with nothing changed (cache hit), and the ratios. Target: page after a change <= 1.5 × bare generation.
Uses builtin:tiny-gpt; when that checkpoint is absent, a RANDOM explorer GPT of the same config (2 layers, 4 heads,
128 wide, block 64, the 776-word vocabulary of builtin:lstm-lm) saved as local:<folder>, and says so.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from _common import median_ms, open_page, runs_and_threads  # noqa: E402  (sets the environment first)

import torch  # noqa: E402

from explorer.adapters.generation import Strategy  # noqa: E402
from explorer.probes import decoding_strategies as D  # noqa: E402
from explorer.loading.catalogue import builtin_names  # noqa: E402
from explorer.loading.loaders import load_model  # noqa: E402

NOUNS = ["computer", "dog", "car", "table", "key", "cabinet", "train", "boat", "bus", "truck", "van", "plane"]
KINDS = ("greedy", "top-k", "top-p", "beam")
NEW = 50


def prompt(i: int) -> str:
    return f"the {NOUNS[i % len(NOUNS)]} which i had just put into the"


def model_id() -> tuple[str, str]:
    if "tiny-gpt" in builtin_names():
        return "builtin:tiny-gpt", "builtin:tiny-gpt (trained checkpoint)"
    from safetensors.torch import save_file

    from explorer.models.tiny_gpt import GPT, GPTConfig

    vocab = load_model("builtin:lstm-lm").vocabs["vocab"]
    config = {"vocab_size": len(vocab), "block_size": 64, "n_layer": 2, "n_head": 4, "n_embd": 128}
    torch.manual_seed(0)
    folder = Path(tempfile.mkdtemp()) / "bench-gpt"
    folder.mkdir()
    save_file(GPT(GPTConfig(**config)).state_dict(), str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({"architecture": "tiny_gpt", "config": config}))
    (folder / "vocab.json").write_text(json.dumps(vocab.to_json()))
    os.environ["EXPLORER_MODEL_PATH"] = str(folder.parent)
    return "local:bench-gpt", ("RANDOM explorer GPT of the tiny-gpt config (2 × 4 heads × 128, block 64, "
                               f"{len(vocab)} words); builtin:tiny-gpt is absent")


def main() -> None:
    runs = runs_and_threads(__doc__, 5)
    mid, described = model_id()
    loaded = load_model(mid, "cpu", "float32")
    strategies = tuple(Strategy(k) for k in KINDS)

    def bare(i: int):
        return D.decode_all(loaded, prompt(i), strategies, 0, NEW, 1, False)

    run = bare(0)  # warm up
    assert all(len(g.outputs[0].ids) == NEW for g in run.generations), [len(g.outputs[0].ids) for g in run.generations]
    per = {}
    for s in strategies:
        lm = loaded.caps.stepper
        pr = D.prepare_prompt(lm, prompt(1), NEW)
        per[s.kind] = median_ms(lambda i, s=s: D.generate(lm, pr, s, i, 1, False), runs)
    gen_ms = median_ms(lambda i: bare(i + 1), runs)

    home = open_page()
    bare_page_ms = median_ms(lambda i: home.run(), runs)

    at = open_page("app_pages/decoding_strategies.py", {"model": mid, "text": prompt(0), "strategies": ",".join(KINDS),
                                         "max_new": str(NEW), "n": "1", "eos": "0", "seed": "0"})
    at.run()

    def change(i: int) -> None:
        at.text_input(key="text").set_value(prompt(100 + i)).run()

    change_ms = median_ms(change, runs)
    assert not at.exception, [e.value for e in at.exception]
    same_ms = median_ms(lambda i: at.run(), runs)

    print(f"Decoding view, CPU ({torch.get_num_threads()} torch threads), {NEW} new tokens × {len(KINDS)} strategies "
          f"({', '.join(KINDS)}; beam = 4 beams), model: {described}")
    print(f"median of {runs} runs each\n")
    print(f"| {'measurement':<52} | {'ms':>8} |")
    print(f"|{'-' * 54}|{'-' * 10}|")
    rows = [(f"bare generation, {k} only", ms) for k, ms in per.items()]
    rows += [("bare generation, 4 strategies (decode_all, no cache)", gen_ms),
             ("bare page rerun (AppTest of app_pages/overview.py)", bare_page_ms),
             ("page rerun after changing the prompt", change_ms),
             ("page rerun, nothing changed (cached)", same_ms)]
    for name, ms in rows:
        print(f"| {name:<52} | {ms:>8.1f} |")
    r1 = change_ms / gen_ms
    r2 = change_ms / (gen_ms + bare_page_ms)
    print(f"| {'ratio page-after-change / bare generation':<52} | {r1:>8.2f} |")
    print(f"| {'ratio page-after-change / (generation + bare page)':<52} | {r2:>8.2f} |")
    print(f"\ntarget page rerun <= 1.5 × bare generation: {'met' if r1 <= 1.5 else 'NOT met'}; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (timings on a shared, busy machine vary a lot)")


if __name__ == "__main__":
    main()
