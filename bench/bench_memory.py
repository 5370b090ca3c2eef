"""What a class does to one replica's memory, measured against a real server (MALLOC_ARENA_MAX=2, as the image sets
it): each scenario prints the server's resident memory (RSS, MiB) as it goes and writes the figures as JSON.

  python bench/bench_memory.py churn [--sessions 200]   sessions opening and closing every view at its defaults
                                                        (first each view once: the RSS after each, what fills a replica)
  python bench/bench_memory.py reload [--cycles 4]      a ~100 MB uploaded model loaded, used and released, again
  python bench/bench_memory.py uploads                  six 240 MB files PUT at once; four in one session; released
  --app DIR: the checkout whose app.py to serve (default this one: compare with an older commit's worktree)
Sessions close as a tab closes; their memory is counted after the reconnect window (EXPLORER_RECONNECT_S, + 5 s).
The scenarios are testkit/memory_scenario.py's (tests/test_hostile_student.py replays them with limits).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from testkit.browser import streamlit_process  # noqa: E402
from testkit.memory_scenario import churn, reload, uploads  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenario", choices=("churn", "reload", "uploads"))
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--cycles", type=int, default=4)
    parser.add_argument("--app", type=Path, default=ROOT)
    parser.add_argument("--out", type=Path, default=ROOT / "artifacts" / "bench-memory.json")
    args = parser.parse_args()
    launcher = [sys.executable, "-m", "streamlit", "run", str(args.app / "app.py")]
    with streamlit_process(timeout=300, launcher=launcher, cwd=args.app) as (base, proc):
        scenario = {"churn": lambda: churn(base, proc.pid, args.sessions),
                    "reload": lambda: reload(base, proc.pid, args.cycles),
                    "uploads": lambda: uploads(base, proc.pid)}[args.scenario]
        figures = asyncio.run(scenario())
    figures["app"] = str(args.app)
    print(json.dumps(figures, indent=1))
    found = json.loads(args.out.read_text()) if args.out.is_file() else {}
    found[f"{args.scenario} ({args.app.name})"] = figures
    args.out.parent.mkdir(exist_ok=True)
    args.out.write_text(json.dumps(found, indent=1))


if __name__ == "__main__":
    main()
