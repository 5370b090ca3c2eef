"""Shared set-up of the bench scripts: import path, offline CPU environment, AppTest as the server runs it.

Import it before torch/streamlit: `from _common import ROOT, median_ms`. Every bench runs AppTest with one
ScriptCache shared across reruns, as the server does (BENCH_COMPILE_EVERY_RUN=1 keeps AppTest's default of
compiling each page on every run), and waits for a run on an event instead of AppTest's 1 ms polling loop
(BENCH_APPTEST_POLLING=1 keeps the polling). The pause after a view's main chart (explorer.ui.charts.PAINT_PAUSE_S,
40 ms of sleep per main chart, so that a browser paints it before the rest of the page arrives) is left out: AppTest
has no browser, and a rerun's time here is the server's work (BENCH_PAINT_PAUSE=1 keeps it; bench_browser.py
measures what a user sees, with it).
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout: explorer/ and testkit/ (the wheel does not ship testkit)
os.environ["EXPLORER_LIVE_INPUT"] = "0"  # AppTest drives the plain text input
os.environ.setdefault("EXPLORER_DEVICE", "cpu")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def share_script_cache() -> None:
    """AppTest compiles (and rewrites for "magic") each page script on every run; the real server keeps one
    ScriptCache per process. Share one across AppTest runs so a rerun costs what a user waits for."""
    import streamlit.testing.v1.app_test as app_test
    from streamlit.runtime.scriptrunner.script_cache import ScriptCache
    from streamlit.testing.v1 import local_script_runner

    shared = ScriptCache()
    app_test.ScriptCache = lambda: shared  # type: ignore[assignment]
    local_script_runner.ScriptCache = lambda: shared  # type: ignore[assignment]


SCRIPT_MS: list[float] = []  # wall time of every script run (ScriptRunner._run_script), in ms


def _time_script_runs() -> None:
    """Record how long the server-side script run takes (what a Streamlit server does for a rerun: run the page,
    enqueue its elements), without AppTest's polling for the result."""
    from streamlit.runtime.scriptrunner import script_runner

    run = script_runner.ScriptRunner._run_script

    def timed(self, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return run(self, *args, **kwargs)
        finally:
            SCRIPT_MS.append((time.perf_counter() - t0) * 1000)

    script_runner.ScriptRunner._run_script = timed


def _wait_without_polling() -> None:
    """AppTest waits for a script run by polling it every millisecond from the main thread (a scan of all the
    run's events each time), which takes the GIL from the script thread hundreds of times per run and slows the
    Python parts of a model's forward pass by ~10%. A server's main thread has no such loop: here the main thread
    blocks on an event set when the run ends, as AppTest's own timeout handling expects."""
    import threading

    from streamlit.runtime.scriptrunner import ScriptRunnerEvent
    from streamlit.testing.v1 import local_script_runner

    def wait(runner, timeout: float = 3) -> None:
        done = threading.Event()

        def on_event(sender, event, **kwargs) -> None:
            if event == ScriptRunnerEvent.SHUTDOWN:
                done.set()

        runner.on_event.connect(on_event, weak=False)
        try:
            if runner.script_stopped() or done.wait(timeout):
                return
        finally:
            runner.on_event.disconnect(on_event)
        runner.request_stop()
        runner.join()
        raise RuntimeError(f"AppTest script run timed out after {timeout}(s)")

    local_script_runner.require_widgets_deltas = wait


def median_script_ms(fn: Callable[[int], object], runs: int) -> tuple[float, float]:
    """(median AppTest wall time, median server-side script time) of fn(i) for i in range(runs), in ms.
    fn must trigger exactly one script run (one AppTest.run())."""
    wall, script = [], []
    for i in range(runs):
        t0 = time.perf_counter()
        fn(i)
        wall.append((time.perf_counter() - t0) * 1000)
        script.append(SCRIPT_MS[-1])
    return statistics.median(wall), statistics.median(script)


def print_rerun_table(bare: list[tuple[str, float]], reruns: list[tuple[str, float, float]], ratio_name: str,
                      ratio: float, ratio_script: float, target: float = 1.5) -> None:
    """Markdown table: bare computations (ms, same in both columns), then reruns as (name, AppTest ms, script ms),
    then the ratio row; and whether the target is met under each measurement."""
    width = max(len(name) for name, *_ in [*bare, *reruns, (ratio_name,)])
    print("AppTest: wall time of AppTest.run(); script: the server-side script run alone (no AppTest polling)\n")
    print(f"| {'measurement':<{width}} | {'AppTest ms':>10} | {'script ms':>9} |")
    print(f"|{'-' * (width + 2)}|{'-' * 12}|{'-' * 11}|")
    for name, ms in bare:
        print(f"| {name:<{width}} | {ms:>10.1f} | {ms:>9.1f} |")
    for name, ms, sms in reruns:
        print(f"| {name:<{width}} | {ms:>10.1f} | {sms:>9.1f} |")
    print(f"| {ratio_name:<{width}} | {ratio:>10.2f} | {ratio_script:>9.2f} |")
    print(f"\ntarget ratio <= {target}: {'met' if ratio <= target else 'NOT met'} (AppTest), "
          f"{'met' if ratio_script <= target else 'NOT met'} (script); load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs")


def runs_and_threads(doc: str, runs: int, threads: int = 0,
                     threads_help: str = "torch threads (0: torch's default)") -> int:
    """Parse --runs and --threads for a bench whose docstring is `doc`; sets torch's thread count; returns the
    number of runs (at least 5)."""
    import argparse

    import torch

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--runs", type=int, default=runs)
    parser.add_argument("--threads", type=int, default=threads, help=threads_help)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    return max(5, args.runs)


def open_page(script: str | None = None, params: dict[str, str] | None = None, timeout: float = 300):
    """AppTest of app.py with `params` in the URL, switched to `script` (None: Home) and run; asserts the page drew
    without an exception or error. Later `at.run()` calls are reruns of that page."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=timeout)
    for key, value in (params or {}).items():
        at.query_params[key] = value
    at.run()
    if script:
        at.switch_page(script)
        at.run()
    assert not at.exception and not at.error, [e.value for e in at.exception] + [e.value for e in at.error]
    return at


def _without_paint_pause() -> None:
    """The script sleeps PAINT_PAUSE_S after each main chart for the browser's sake (no CPU, no lock): not work."""
    from explorer.ui import charts

    charts._pause = lambda seconds: None


def median_ms(fn: Callable[[int], object], runs: int) -> float:
    """Median wall time of fn(i) for i in range(runs), in milliseconds."""
    times = []
    for i in range(runs):
        t0 = time.perf_counter()
        fn(i)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


if os.environ.get("BENCH_COMPILE_EVERY_RUN") != "1":
    share_script_cache()
if os.environ.get("BENCH_APPTEST_POLLING") != "1":
    _wait_without_polling()
if os.environ.get("BENCH_PAINT_PAUSE") != "1":
    _without_paint_pause()
_time_script_runs()
