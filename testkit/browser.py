"""Real-browser helpers: start `streamlit run app.py` on a free loopback port, drive Debian's chromium.

Used by the slow browser tests and by bench/ (never downloads a browser: /usr/bin/chromium or $CHROMIUM).
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections import deque
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from explorer.runtime.chromium import CHROMIUM, CHROMIUM_ARGS  # noqa: F401  (the harness's names for them)

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def streamlit_server(env: dict[str, str] | None = None, timeout: float = 90) -> Iterator[str]:
    """Start the real app server; yields its base URL and stops it afterwards."""
    with streamlit_process(env, timeout) as (base, _proc):
        yield base


@contextmanager
def streamlit_process(env: dict[str, str] | None = None, timeout: float = 90, launcher: list[str] | None = None,
                      cwd: Path | None = None) -> Iterator[tuple[str, subprocess.Popen]]:
    """Like `streamlit_server`, also yielding the server's Popen (its pid, e.g. to sample memory).

    The server's output is read continuously (a full pipe would block the server) and its last lines are kept
    in `proc.log_tail` (a deque of str). launcher: another command that starts the app and takes Streamlit's
    options (e.g. an installed wheel's `python -m explorer`), run in `cwd`.
    """
    port = free_port()
    # MALLOC_ARENA_MAX=2 as the Dockerfile and the manifests set it: glibc keeps a heap per thread, and a session's
    # script thread frees its model activations into its own, so RSS grows with the sessions served
    full_env = {"MALLOC_ARENA_MAX": "2", **os.environ, "HF_HUB_OFFLINE": "1", "EXPLORER_LIVE_INPUT": "1", **(env or {})}
    start = launcher or [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py")]
    cmd = [*start, "--server.headless", "true", "--server.port", str(port), "--server.address", "127.0.0.1",
           "--browser.gatherUsageStats", "false"]
    proc = subprocess.Popen(cmd, cwd=cwd or ROOT, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    proc.log_tail = deque(maxlen=400)  # type: ignore[attr-defined]
    threading.Thread(target=_drain, args=(proc.stdout, proc.log_tail), daemon=True).start()
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base, proc, timeout, lambda: "streamlit did not start: " + "".join(proc.log_tail)[-2000:])
        yield base, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def wait_healthy(base: str, proc: subprocess.Popen, timeout: float, failure: Callable[[], str]) -> None:
    """Poll `base`/_stcore/health until it answers 200; RuntimeError(failure()) if `proc` exits or time runs out."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(base + "/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(failure())
        time.sleep(0.2)


def _drain(stream, sink: deque) -> None:
    for line in iter(stream.readline, b""):
        sink.append(line.decode(errors="replace"))


def wait_for_app(page, timeout_ms: float = 90_000, settle_ms: int = 2500) -> None:
    """Wait until the app has rendered and the script is no longer running (Streamlit e2e style)."""
    page.wait_for_selector('[data-testid="stMain"] h1, [data-testid="stException"]', timeout=timeout_ms)
    # the app's own sidebar (rendered by app.py after st.navigation) marks a complete first run
    page.wait_for_selector('[data-testid="stSidebarUserContent"] >> text=Settings', timeout=timeout_ms)
    deadline = time.monotonic() + timeout_ms / 1000
    quiet_since = None
    while time.monotonic() < deadline:
        running = page.locator('[data-testid="stStatusWidget"]').count() > 0
        skeleton = page.locator('[data-testid="stSkeleton"]').count() > 0
        if running or skeleton:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.monotonic()
        elif (time.monotonic() - quiet_since) * 1000 >= settle_ms:
            return
        page.wait_for_timeout(100)
    raise TimeoutError("the app kept running")
