"""Server capacity with simulated sessions over Streamlit's websocket protocol (no browsers).

    python bench/bench_serve.py                          # 10, 50, 100 sessions on one server
    python bench/bench_serve.py --sessions 10 20 30      # other sizes
    python bench/bench_serve.py --replicas 2             # two servers behind nginx (deploy/nginx/), sticky
    python bench/bench_serve.py --think 2 4 --duration 60
    python bench/bench_serve.py --real logit-lens self-attention --sessions 2 4 8   # the real model (SmolLM2)

The sessions are spread evenly over the self-attention (MiniLM), recurrent-cell (builtin:lstm-lm) and decoding
(builtin:tiny-gpt, its default settings) views. Each opens its view, then types a new 9-word sentence every
`think` seconds (uniform) and waits for the script to finish (testkit/serve_scenario.py). Printed: a row of
docs/serving.md's table per size (rerun p50/p95/max over all views, p95 per view, errors, cross-talk, peak RSS of the
servers, their CPU as % of one core) and the figures in artifacts/serve.json. The load generator's own CPU is printed
too: it shares the machine with the servers.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout: explorer/ and testkit/ (the wheel does not ship testkit)
os.environ.setdefault("EXPLORER_DEVICE", "cpu")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from testkit.browser import streamlit_process  # noqa: E402
from testkit.replicas import behind_nginx  # noqa: E402
from testkit.serve_scenario import REAL_VIEWS, VIEWS, cores, simulate, write_json  # noqa: E402


def header(views: dict) -> str:
    return ("| sessions | reruns | p50 | p95 | max | p95 per view (" + " / ".join(views) + ") | errors | cross-talk "
            "| peak RSS | server CPU |\n|---|---|---|---|---|---|---|---|---|---|")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, nargs="+", default=[10, 50, 100])
    ap.add_argument("--duration", type=float, default=60, help="seconds of typing after every session opened")
    ap.add_argument("--think", type=float, nargs=2, default=[2.0, 4.0], help="seconds between sentences")
    ap.add_argument("--replicas", type=int, default=1, help="> 1: that many servers behind nginx")
    ap.add_argument("--json", type=Path, default=ROOT / "artifacts" / "serve.json")
    ap.add_argument("--real", nargs="+", choices=list(REAL_VIEWS), help="sessions on the real model (SmolLM2) in "
                    "these views instead of the small models' three")
    args = ap.parse_args()
    views = {v: REAL_VIEWS[v] for v in args.real} if args.real else dict(VIEWS)
    ctx = streamlit_process() if args.replicas == 1 else behind_nginx(args.replicas)
    results = []
    with ctx as (base, procs):
        procs = procs if isinstance(procs, list) else [procs]
        pids = tuple(p.pid for p in procs)
        asyncio.run(simulate(base, len(views) * args.replicas, duration=3, think=(0.5, 1.0), server_pids=pids,
                             views_opened=views))  # load the models (each replica's)
        print(f"{args.replicas} server(s) on {cores()} cores; think {args.think[0]:g}-{args.think[1]:g} s, "
              f"{args.duration:g} s of typing per size\n")
        print(header(views))
        for n in args.sessions:
            result = asyncio.run(simulate(base, n, args.duration, tuple(args.think), server_pids=pids,
                                          views_opened=views))
            result.replicas = args.replicas
            results.append(result)
            print(result.row(), flush=True)
            extra = f"load generator CPU {100 * result.generator_cpu_seconds / result.wall_seconds:.0f} %"
            if result.upstreams:
                extra += f"; sessions per replica {sorted(result.upstreams.values())}"
            opens = sorted(result.opens)
            extra += f"; first runs p50 {opens[len(opens) // 2]:.2f} s, max {opens[-1]:.2f} s" if opens else ""
            print(f"  ({extra}; errors: {result.errors[:3]}; cross-talk: {result.cross_talk[:3]})", flush=True)
    path = write_json(results, args.json)
    print(f"\nfigures: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
