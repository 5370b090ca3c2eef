"""Train the built-in checkpoints from their recipes (explorer.training.recipes): the command line.

    python -m explorer.training.train lstm-lm        # reproduce one shipped checkpoint in assets/builtin/
    python -m explorer.training.train all            # all of them, one after the other
    python -m explorer.training.train --list
    python -m explorer.training.train minilm-mlm     # pretrained:minilm-mlm (explorer.training.minilm_mlm), then export
    python -m explorer.training.train --evaluate lstm-lm-wordnet   # add the real-English evaluations to its JSON
    python -m explorer.training.train lstm-lm --snapshots 30 --out runs   # and keep 30 snapshots over training
    python -m explorer.training.train lstm-lm --snapshots 16 --snapshot-dtype float16   # the shipped series

The training itself is explorer.training.loop.train_model, shared with the app's Models page.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from explorer.training.recipes import BUILTINS, evaluate_builtin, train_builtin
from explorer.runtime.json_value import get
from explorer.training.spec import TrainProgress

if TYPE_CHECKING:
    from explorer.runtime.json_value import JSON


def _print_metrics(metrics: Mapping[str, JSON], indent: str = "  ") -> None:
    for k, v in metrics.items():
        if isinstance(v, dict):
            print(f"{indent}{k}:")
            _print_metrics(v, indent + "  ")
        else:
            print(f"{indent}{k}: {v:.4g}" if isinstance(v, float) else f"{indent}{k}: {v}")


def _show(p: TrainProgress) -> None:
    """One line at the end of each epoch."""
    if p.heldout_loss is not None:
        print(f"  epoch {p.epoch} step {p.step}/{p.total_steps} train {p.train_loss:.4f} "
              f"heldout {p.heldout_loss:.4f} ({p.elapsed:.0f}s)", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m explorer.training.train", description=(__doc__ or "").split("\n")[0])
    ap.add_argument("name", nargs="?", help=f"built-in to train: {', '.join(BUILTINS)} or 'all'")
    ap.add_argument("--list", action="store_true", help="list built-in names")
    ap.add_argument("--out", default=None, help="folder to write to (default assets/builtin)")
    ap.add_argument("--no-save", action="store_true")
    ap.add_argument("--evaluate", action="store_true",
                    help="do not train: compute the real-English evaluations of the saved checkpoint into its JSON")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch CPU threads (default 1: on a shared 2-core machine 2 OpenMP threads can be 10x "
                         "slower because they wait on each other; results agree across thread counts)")
    ap.add_argument("--snapshots", type=int, default=0,
                    help="keep this many snapshots of the weights over training, log-spaced in steps, in "
                         "<name>.snapshots.safetensors beside the checkpoint (default 0: none)")
    ap.add_argument("--snapshot-dtype", choices=("float32", "float16", "bfloat16"), default=None,
                    help="the snapshots' stored dtype (default: the recipe's; the shipped series are float16)")
    args = ap.parse_args(argv)
    if args.list or not args.name:
        print("\n".join([*BUILTINS, "minilm-mlm"]))
        return 0
    if args.name == "minilm-mlm":  # pretrained:minilm-mlm: its own resumable recipe, then its export
        from explorer.training import minilm_mlm

        while minilm_mlm.train(60.0, args.threads)["step"] < minilm_mlm.TOTAL_STEPS:
            pass
        return minilm_mlm.main(["--export", "--threads", str(args.threads)]) if not args.no_save else 0
    names = list(BUILTINS) if args.name == "all" else [args.name]
    for n in names:
        if n not in BUILTINS:
            print(f"unknown built-in {n!r}; choose from: {', '.join(BUILTINS)}, all", file=sys.stderr)
            return 2
    if args.evaluate:
        for n in names:
            print(f"== {n}", flush=True)
            _print_metrics(evaluate_builtin(n, args.out))
        return 0
    for n in names:
        print(f"== {n}", flush=True)
        res = train_builtin(n, folder=args.out, progress=_show, save=not args.no_save, threads=args.threads,
                            snapshots=args.snapshots, snapshot_dtype=args.snapshot_dtype)
        metrics = res.meta["metrics"]
        assert isinstance(metrics, dict)  # train_model's
        _print_metrics(metrics)
        print(f"  time: train {get(res.meta, 'train', 'seconds')}s, eval {get(res.meta, 'train', 'eval_seconds')}s",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
