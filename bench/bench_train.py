"""Benchmark: train the default `lstm-lm` from scratch and time it against its quality bar.

    python bench/bench_train.py [--name lstm-lm] [--threads 2]

Bar (issue 3): held-out perplexity >= 30 % below the add-k bigram and >= 90 % long-range (distance >= 4)
agreement accuracy, reached in under 3 minutes on a 2-core CPU. Nothing is saved. Prints a markdown table.
"""
from __future__ import annotations

import argparse
import sys
import time


import torch  # noqa: E402

from explorer.training.recipes import BUILTINS, train_builtin  # noqa: E402

BUDGET_S = 180.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--name", default="lstm-lm", choices=sorted(BUILTINS))
    ap.add_argument("--threads", type=int, default=1, help="1 by default: see explorer.training.train --help")
    args = ap.parse_args()
    t0 = time.perf_counter()
    res = train_builtin(args.name, save=False, threads=args.threads)
    wall = time.perf_counter() - t0
    m = res.meta["metrics"]
    rows = [("device", res.meta["train"]["device"] + f" ({torch.get_num_threads()} threads)"),
            ("torch", torch.__version__), ("epochs", res.meta["train"]["epochs"]),
            ("train seconds", res.meta["train"]["seconds"]), ("wall seconds (data+train+eval)", f"{wall:.1f}")]
    ok = wall < BUDGET_S
    if "bigram_perplexity" in m:
        red = m["perplexity_reduction_vs_bigram"]
        rows += [("held-out perplexity", f"{m['heldout_perplexity']:.2f}"),
                 ("add-k bigram perplexity", f"{m['bigram_perplexity']:.2f} (k={m['bigram_k']})"),
                 ("reduction vs bigram", f"{red:.1%} (bar >= 30%)")]
        ok &= red >= 0.30
    if "agreement" in m:
        acc = m["agreement"]["long_range_accuracy"]
        rows.append(("long-range agreement", f"{acc:.1%} (bar >= 90%)"))
        ok &= acc >= 0.90
    rows.append(("bar met in < 3 min", "yes" if ok else "NO"))
    print(f"| {args.name} | value |\n|---|---|")
    for k, v in rows:
        print(f"| {k} | {v} |")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
