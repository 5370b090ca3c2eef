"""Benchmark: train the default `lstm-lm` from scratch and time it against its quality bar; or (--app-wordnet) train
on real English as the Models page does, within the server's training limit (EXPLORER_MAX_TRAIN_SECONDS, 180 s).

    python bench/bench_train.py [--name lstm-lm] [--threads 2]
    python bench/bench_train.py --app-wordnet [--n-train 60000] [--hidden 128] [--emb 64]
    python bench/bench_train.py --app-finetune [--n-train 3000] [--threads 2]

--app-finetune: the Models page's "Fine-tune MiniLM" on the shipped opinions and parts of speech (N training
sentences, 2 epochs, 16 snapshots kept as the page keeps them, the server's budget applied): time and held-out
accuracy.

--app-wordnet: the Models page's LSTM recipe on "Real English (WordNet)" (explorer.ui.training: the first N training
lines, a 12,000-word vocabulary, the server's training budget applied), with the add-k bigram on the same lines for
comparison.

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
    ap.add_argument("--app-wordnet", action="store_true")
    ap.add_argument("--app-finetune", action="store_true")
    ap.add_argument("--n-train", type=int, default=60_000)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--emb", type=int, default=64)
    args = ap.parse_args()
    if args.app_wordnet:
        return app_wordnet(args)
    if args.app_finetune:
        return app_finetune(args)
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


def app_wordnet(args: argparse.Namespace) -> int:
    """The Models page's LSTM on the real-English corpus within the server's limit: time and held-out perplexity."""
    from explorer.training import budget as train_budget
    from explorer.training.loop import train_model
    from explorer.training.spec import TrainSpec

    torch.set_num_threads(args.threads)
    spec = TrainSpec(architecture="rnn_lm", cell="lstm", corpus="wordnet", num_layers=1, hidden_size=args.hidden,
                     emb_dim=args.emb, epochs=1, n_train=args.n_train, n_heldout=1000, max_vocab=12_000,
                     full_metrics=True, name="my-rnn-lm")
    spec = train_budget.apply(spec)
    t0 = time.perf_counter()
    res = train_model(spec, progress=lambda p: None)
    wall = time.perf_counter() - t0
    m, t = res.meta["metrics"], res.meta["train"]
    print(f"| Models page, LSTM on real English ({args.n_train:,} lines, hidden {args.hidden}, embeddings {args.emb}, "
          f"1 epoch, {torch.get_num_threads()} thread) | value |\n|---|---|")
    print(f"| vocabulary | {len(res.meta['vocab']):,} |\n| steps | {t['steps']} |\n| train seconds | {t['seconds']} |")
    print(f"| wall seconds (data + train + evaluation) | {wall:.1f} |\n| stopped by the time limit | {t['stopped']} |")
    print(f"| held-out perplexity | {m['heldout_perplexity']:.1f} |")
    print(f"| add-k bigram perplexity (same lines) | {m.get('bigram_perplexity', float('nan')):.1f} |")
    return 0 if not t["stopped"] else 1


def app_finetune(args: argparse.Namespace) -> int:
    """The Models page's MiniLM fine-tune on both shipped labelled corpora within the server's limit."""
    from explorer.training import budget as train_budget
    from explorer.training.loop import train_model
    from explorer.training.spec import TrainSpec

    torch.set_num_threads(args.threads)
    n = args.n_train if args.n_train != 60_000 else 3_000
    print(f"| Models page, fine-tune MiniLM ({n:,} sentences, 2 epochs, 16 snapshots, {torch.get_num_threads()} "
          "threads) | wall seconds | steps | stopped by the time limit | held-out accuracy |\n|---|---|---|---|---|")
    late = False
    for corpus, task in (("sentiment", "classify"), ("pos", "tag")):
        spec = train_budget.apply(TrainSpec(architecture="minilm_finetune", corpus=corpus, task=task, n_train=n,
                                            n_heldout=1000, epochs=2, lr=1e-4, name="my-minilm"))
        t0 = time.perf_counter()
        res = train_model(spec, progress=lambda p: None, snapshots=16, snapshot_dtype="float16")
        wall, m, t = time.perf_counter() - t0, res.meta["metrics"], res.meta["train"]
        print(f"| {corpus} | {wall:.1f} | {t['steps']} | {t['stopped']} | {m['heldout_accuracy']:.1%} of "
              f"{m['heldout_targets']:,} |")
        late |= wall > 300
    return 1 if late else 0


if __name__ == "__main__":
    sys.exit(main())
