"""Load: N concurrent browser sessions type on the self-attention and recurrent-cell views of one real server.

Runs the scenario of tests/test_load.py (testkit/load_scenario.py) outside pytest and prints a table for
docs/serving.md: p50/p95/max seconds from the last keystroke to the rendered chart of that sentence, and the
server's peak RSS.

    python bench/bench_load.py                 # 10 sessions; figures also in artifacts/load.json
    python bench/bench_load.py --sessions 5

Needs Debian's chromium (/usr/bin/chromium or $CHROMIUM) and the playwright package; never downloads a browser.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout: explorer/ and testkit/ (the wheel does not ship testkit)
os.environ.setdefault("EXPLORER_DEVICE", "cpu")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from testkit.load_scenario import run_load, write_json  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=10, help="concurrent browser contexts (at most 10)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds allowed for each wait")
    ap.add_argument("--json", type=Path, default=ROOT / "artifacts" / "load.json")
    args = ap.parse_args()
    result = run_load(args.sessions, args.timeout)
    path = write_json(result, args.json)
    summary = result.summary()
    print(result.markdown())
    print()
    for view, fig in summary["per_view"].items():
        print(f"- {view}: {fig['samples']} sentences, p50 {fig['p50_s']:.2f} s, p95 {fig['p95_s']:.2f} s")
    print(f"- server RSS after warm-up {summary['server_rss_after_warmup_mib']} MiB, at the end "
          f"{summary['server_rss_end_mib']} MiB; server CPU after warm-up {summary['server_cpu_s_after_warmup']} s; "
          f"1-min load average {summary['load_average_start_end']} "
          f"(start, end); wall {summary['wall_s']} s")
    if result.errors or result.cross_talk:
        print("errors:", json.dumps(result.errors + result.cross_talk, indent=2))
    print(f"(figures in {path})")
    return 1 if result.errors or result.cross_talk else 0


if __name__ == "__main__":
    raise SystemExit(main())
