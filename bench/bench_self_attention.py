"""Benchmark of the self-attention view (pretrained:minilm, CPU).

Prints medians of >= 5 runs:
  * 20 tokens: bare forward pass with attentions, bare page rerun (AppTest of a trivial script), the rerun after
    changing the sentence (head view, the default) as the browser asks for it: the view is an st.fragment, so
    only the fragment reruns; the budget is the issue's: rerun <= 1.5 x forward. The same change as a full-page
    rerun is printed too.
  * 512 tokens: model view rerun with a new text (forward + figures) and after changing the head (cached
    trace), the head view, and the chart data each sends to the browser (sum of the Plotly spec JSON sizes).
  * BertViz head_view and model_view (html_action="return") on the same 512-token input, in a subprocess with a
    timeout and a memory limit, as the reference.

Usage: python bench/bench_self_attention.py [--runs 5] [--threads N] [--bertviz-timeout 240] [--skip-bertviz]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import textwrap
import time

from _common import SCRIPT_MS, open_page  # noqa: E402  (sets the environment first, tests/ on the path)
from testkit.fragments import fragment_ids, page_states, run_fragment  # noqa: E402

PAGE = "app_pages/self_attention.py"
WORDS = ("the animal did not cross the street because it was too tired and the robot must obey the orders "
         "given it by people who were watching from the other side of the road").split()


def sentence(n_words: int, seed: int) -> str:
    """n_words words of WORDS, a different sentence for every seed (so no rerun is served from the cache)."""
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(n_words))


def text_of_tokens(tok, n_tokens: int, seed: int = 0) -> str:
    """A text whose encoding (with [CLS]/[SEP]) has exactly n_tokens tokens (or is cut to it)."""
    words = max(1, n_tokens)
    text = sentence(words, seed)
    while len(tok(text)["input_ids"]) > n_tokens:
        words -= 1
        text = sentence(words, seed)
    return text


def median_time(fn, runs: int) -> tuple[float, list[float]]:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), times


def chart_bytes(at) -> int:
    return sum(len(el.proto.spec) for el in at.get("plotly_chart"))


BERTVIZ = textwrap.dedent("""
    import json, resource, sys, time, torch
    limit = int(sys.argv[2]) * 2**30
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    from explorer.loading.loaders import load_model
    from bertviz import head_view, model_view
    m = load_model("pretrained:minilm")
    enc = m.tokenizer(sys.argv[1], return_tensors="pt", truncation=True, max_length=512)
    with torch.inference_mode():
        atts = m.model(**enc, output_attentions=True).attentions
    tokens = m.tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
    for name, fn in (("head_view", head_view), ("model_view", model_view)):
        t = time.perf_counter()
        try:
            html = fn(atts, tokens, html_action="return")
            size = len(html.data)
            del html
            print(json.dumps({"view": name, "seconds": time.perf_counter() - t, "bytes": size}), flush=True)
        except MemoryError:
            print(json.dumps({"view": name, "seconds": time.perf_counter() - t, "error": "MemoryError"}), flush=True)
""")


def run_bertviz(text: str, timeout: float, mem_gb: int) -> list[dict]:
    t = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-c", BERTVIZ, text, str(mem_gb)], capture_output=True,
                              text=True, timeout=timeout)
        out = proc.stdout
        rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        if proc.returncode != 0:
            rows.append({"view": "(process)", "error": f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}"})
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        rows.append({"view": "(rest)", "error": f"timed out after {time.perf_counter() - t:.0f} s"})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--bertviz-timeout", type=float, default=240)
    ap.add_argument("--bertviz-mem-gb", type=int, default=12)
    ap.add_argument("--skip-bertviz", action="store_true")
    ap.add_argument("--no-magic", action="store_true",
                    help="runner.magicEnabled=false: AppTest recompiles each script with Streamlit's magic AST pass "
                         "on every run (a server caches the bytecode), which costs ~0.5 ms per line of page")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0 = torch's default)")
    args = ap.parse_args()
    runs = max(5, args.runs)

    import torch
    from streamlit.testing.v1 import AppTest

    from explorer.loading.loaders import load_model

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    if args.no_magic:
        from streamlit import config

        config.set_option("runner.magicEnabled", False)
    print(f"magic {'off' if args.no_magic else 'on'}, torch threads {torch.get_num_threads()}, CPUs {os.cpu_count()}, "
          f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    m = load_model("pretrained:minilm")
    tok = m.tokenizer
    rows: list[tuple[str, float, str]] = []

    # ---------------------------------------------------------------- 20 tokens
    texts = [text_of_tokens(tok, 20, seed) for seed in range(runs + 2)]

    def forward(text: str):
        enc = tok(text, return_tensors="pt")
        with torch.inference_mode():
            m.model(**enc, output_attentions=True)

    forward(texts[0])
    it = iter(texts * 3)
    fwd, _ = median_time(lambda: forward(next(it)), runs)

    bare_at = AppTest.from_string("import streamlit as st\nst.write('bare')", default_timeout=60)
    bare_at.run()
    bare, _ = median_time(lambda: bare_at.run(), runs)

    at = open_page(PAGE, {"model": "pretrained:minilm", "text": texts[0]})
    page_tree, [fid] = page_states(at), fragment_ids(at)
    seeds = iter(texts[1:] + [text_of_tokens(tok, 20, 100 + i) for i in range(3 * runs)])

    def rerun_new_text():  # what the browser asks for: the sentence is inside the view's st.fragment
        at.text_input(key="text").set_value(next(seeds))
        run_fragment(at, fid, page_tree)
        assert not at.exception

    rerun_new_text()  # warm (imports, first figure)
    n_before = len(SCRIPT_MS)
    pg, _ = median_time(rerun_new_text, runs)
    script = statistics.median(SCRIPT_MS[n_before:]) / 1000

    full_at = open_page(PAGE, {"model": "pretrained:minilm", "text": texts[0]})

    def full_rerun_new_text():
        full_at.text_input(key="text").set_value(next(seeds)).run()
        assert not full_at.exception

    full_rerun_new_text()
    n_before = len(SCRIPT_MS)
    full, _ = median_time(full_rerun_new_text, runs)
    full_script = statistics.median(SCRIPT_MS[n_before:]) / 1000
    budget = 1.5 * fwd
    rows += [
        ("20 tokens: bare forward with attentions", fwd, ""),
        ("20 tokens: bare page rerun (trivial AppTest script)", bare, ""),
        ("20 tokens: rerun after changing the sentence (head view; the view's fragment)", pg,
         f"(rerun − AppTest's own cost, the bare rerun) / forward = {(pg - bare) / fwd:.2f}; "
         f"rerun / forward = {pg / fwd:.2f}"),
        ("20 tokens: the same rerun, server-side script run only (what the server does)", script,
         f"ratio script / forward = {script / fwd:.2f}; budget 1.5 × forward = {budget * 1000:.1f} ms "
         f"-> {'OK' if script <= budget else 'OVER'}"),
        ("20 tokens: the same change as a full-page rerun (app shell, sidebar, lesson bar)", full,
         f"server-side script {full_script * 1000:.1f} ms; (rerun − bare) / forward = {(full - bare) / fwd:.2f}"),
    ]

    def rerun_same():
        full_at.run()

    same, _ = median_time(rerun_same, runs)
    rows.append(("20 tokens: full-page rerun, nothing changed (cached trace)", same, ""))

    # ---------------------------------------------------------------- 512 tokens
    long_texts = [text_of_tokens(tok, 512, seed) for seed in range(3)]
    n = len(tok(long_texts[0])["input_ids"])
    fwd512, _ = median_time(lambda: forward(long_texts[0]), runs)
    rows.append((f"{n} tokens: bare forward with attentions", fwd512, ""))
    at = open_page(PAGE, {"model": "pretrained:minilm", "text": long_texts[0], "mode": "model", "token": "-1"})
    size_model = chart_bytes(at)
    long_iter = iter(long_texts[1:] * runs)
    t_new, _ = median_time(lambda: at.text_input(key="text").set_value(next(long_iter)).run(), 2)
    rows.append((f"{n} tokens: model view, new text (forward + probe + figures), median of 2", t_new,
                 f"chart data {size_model / 2**20:.2f} MB"))
    heads = iter(list(range(1, 12)) * 2)
    t_head, _ = median_time(lambda: _select(at, "head", next(heads)), runs)
    rows.append((f"{n} tokens: model view rerun after changing the head (cached)", t_head,
                 f"chart data {chart_bytes(at) / 2**20:.2f} MB; < 3 s -> {'OK' if t_head < 3 else 'OVER'}"))
    at2 = open_page(PAGE, {"model": "pretrained:minilm", "text": long_texts[0], "mode": "head", "token": "-1"})
    t_hv, _ = median_time(lambda: _select(at2, "head", next(heads)), runs)
    rows.append((f"{n} tokens: head view rerun after changing the head (cached)", t_hv,
                 f"chart data {chart_bytes(at2) / 2**20:.2f} MB"))

    print()
    print(f"{'measurement':<78} {'median':>10}  notes")
    for name, secs, note in rows:
        print(f"{name:<78} {secs * 1000:>8.1f} ms  {note}")

    if not args.skip_bertviz:
        print(f"\nBertViz reference on the same {n}-token input (subprocess, timeout {args.bertviz_timeout:.0f} s, "
              f"memory limit {args.bertviz_mem_gb} GB):")
        for r in run_bertviz(long_texts[0], args.bertviz_timeout, args.bertviz_mem_gb):
            if "error" in r:
                print(f"  {r['view']:<12} {r['error']}" + (f" after {r['seconds']:.1f} s" if "seconds" in r else ""))
            else:
                print(f"  {r['view']:<12} {r['seconds']:8.1f} s   HTML {r['bytes'] / 2**20:8.1f} MB")


def _select(at, key: str, value) -> None:
    next(s for s in at.selectbox if s.key == key).set_value(value).run()
    assert not at.exception


if __name__ == "__main__":
    main()
