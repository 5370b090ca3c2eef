"""A closed tab's session is shut down once its reconnect window has passed, and its memory returned.

Streamlit keeps the session of a disconnected tab (its state, the files in its upload boxes as widget values, its
script) for server.disconnectedSessionTTL (120 s), so that a browser that reconnects finds it: in a store of up to
128 sessions whose expired entries leave only when the store is next written, and leave without being shut down.
A tab that had uploaded and opened a 100 MB model left ~260 MB resident after it closed, cycle after cycle
(bench/bench_memory.py reload: 457 -> 1,595 MiB in 4 cycles).

`install()` (app.py, every run; it acts once per process) starts a thread that, every SWEEP_S seconds, has the
event loop shut down (Runtime.close_session: its files and caches dropped) and empty (its session state: the loop
of Streamlit's runtime keeps a reference to the last session it served) each session that has been without a
websocket for longer than EXPLORER_RECONNECT_S (default 30 s: a dropped Wi-Fi or a laptop lid reconnects within it),
then collects the garbage and returns the free pages to the operating system (explorer.runtime.heap).
"""
from __future__ import annotations

import concurrent.futures
import threading
import time
from typing import TYPE_CHECKING

from streamlit import runtime

from explorer.runtime import heap
from explorer.runtime.budget import positive_setting

if TYPE_CHECKING:
    from streamlit.runtime.app_session import AppSession

SWEEP_S = 1.0
_STARTED: list[threading.Thread] = []
_LOCK = threading.Lock()


def reconnect_seconds() -> float:
    """How long a disconnected session waits for its browser (EXPLORER_RECONNECT_S, default 30)."""
    return float(positive_setting("EXPLORER_RECONNECT_S", 30.0))


def close_expired(first_seen: dict[str, float], now: float, window: float) -> list[str]:
    """On the event loop: shut down the stored (disconnected) sessions first seen without a websocket more than
    `window` seconds before `now`; `first_seen` (session id -> time) is kept up to date. Returns the closed ids."""
    rt = runtime.get_instance()
    manager = rt._session_mgr  # Streamlit's session manager: the active sessions and those stored for reconnect
    stored = {info.session.id: info.session for info in manager.list_sessions()
              if not rt.is_active_session(info.session.id)}
    for sid in list(first_seen):
        if sid not in stored:
            del first_seen[sid]
    closed = []
    for sid, session in stored.items():
        if now - first_seen.setdefault(sid, now) > window:
            rt.close_session(sid)
            _empty(session)
            first_seen.pop(sid, None)
            closed.append(sid)
    return closed


def _empty(session: AppSession) -> None:
    """Drop what a shut-down session's state holds. Streamlit's runtime loop keeps the last session it served in a
    local variable until it serves another, with its widget values (an upload box's files, copied) and each widget's
    metadata (a picker's format function, closing over the model it showed)."""
    try:
        state = session._session_state
        state.clear()  # values; the widgets' metadata stays in a cleared mapping
        state._new_widget_state.widget_metadata.clear()
    except AttributeError:  # another Streamlit's internals (tests/test_reconnect.py says when): the session is closed
        pass


def _sweep() -> None:
    first_seen: dict[str, float] = {}
    while True:
        time.sleep(SWEEP_S)
        try:
            if not runtime.exists():
                continue
            loop = runtime.get_instance()._get_async_objs().eventloop
            done: concurrent.futures.Future[list[str]] = concurrent.futures.Future()

            def on_loop() -> None:
                try:
                    done.set_result(close_expired(first_seen, time.monotonic(), reconnect_seconds()))
                except Exception as exc:  # a runtime shutting down: report, sweep again later
                    done.set_exception(exc)

            loop.call_soon_threadsafe(on_loop)
            if done.result(timeout=30):
                heap.collect(thaw=False)  # the sessions sit in reference cycles
                heap.trim()
        except Exception:  # never stop sweeping
            pass


def install() -> bool:
    """Start the sweeper (once per process); False without a Streamlit server (AppTest, scripts)."""
    if not runtime.exists():
        return False
    with _LOCK:
        if not _STARTED:
            _STARTED.append(threading.Thread(target=_sweep, name="reconnect-window", daemon=True))
            _STARTED[0].start()
    return True
