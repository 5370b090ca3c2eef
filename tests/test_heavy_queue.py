"""Heavy computations take turns (explorer.runtime.heavy): `slots` at once, one per session, first come first
served, each waiting request told how many runs are ahead, and a request whose session moved on leaves the queue."""
from __future__ import annotations

import threading
import time

import pytest

from explorer.runtime.heavy import HeavyQueue, heavy_slots


def run_in_thread(queue: HeavyQueue, session: str, log: list, hold: threading.Event, seen: dict) -> threading.Thread:
    def work() -> None:
        with queue.turn(session, lambda ahead: seen.setdefault(session, []).append(ahead), poll_s=0.01):
            log.append(("start", session))
            hold.wait(5)
            log.append(("end", session))

    t = threading.Thread(target=work)
    t.start()
    return t


def wait_until(cond, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.005)


def test_one_slot_runs_one_at_a_time_in_arrival_order_and_says_the_place() -> None:
    queue, log, seen = HeavyQueue(1), [], {}
    holds = {s: threading.Event() for s in "abc"}
    threads = []
    for s in "abc":
        threads.append(run_in_thread(queue, s, log, holds[s], seen))
        wait_until(lambda s=s: ("start", "a") in log and (s == "a" or queue.waiting() >= "abc".index(s)))
    assert queue.running() == 1 and queue.waiting() == 2
    wait_until(lambda: 1 in seen.get("b", []) and 2 in seen.get("c", []))  # b: a ahead; c: a and b ahead
    for s in "abc":
        holds[s].set()
        wait_until(lambda s=s: ("end", s) in log)
    for t in threads:
        t.join(5)
    assert [e for e in log if e[0] == "start"] == [("start", "a"), ("start", "b"), ("start", "c")]
    assert log.index(("end", "a")) < log.index(("start", "b")) < log.index(("end", "b")) < log.index(("start", "c"))


def test_two_slots_but_one_per_session() -> None:
    queue, log, seen = HeavyQueue(2), [], {}
    hold = threading.Event()
    first = run_in_thread(queue, "a", log, hold, seen)
    wait_until(lambda: ("start", "a") in log)
    again = run_in_thread(queue, "a", log, hold, seen)  # the same session's second heavy run waits
    other = run_in_thread(queue, "b", log, hold, seen)  # another session takes the free slot
    wait_until(lambda: ("start", "b") in log)
    assert log.count(("start", "a")) == 1 and queue.running() == 2 and queue.waiting() == 1
    hold.set()
    for t in (first, again, other):
        t.join(5)
    assert log.count(("start", "a")) == 2 and queue.running() == 0 and queue.waiting() == 0


def test_a_waiting_request_whose_session_moved_on_leaves_the_queue() -> None:
    queue, log, seen = HeavyQueue(1), [], {}
    hold = threading.Event()
    busy = run_in_thread(queue, "a", log, hold, seen)
    wait_until(lambda: ("start", "a") in log)

    def stopped(ahead: int) -> None:
        raise KeyboardInterrupt  # what a stopped script run raises at its next message

    with pytest.raises(KeyboardInterrupt):
        with queue.turn("b", stopped):
            pass
    assert queue.waiting() == 0
    hold.set()
    busy.join(5)
    with queue.turn("c"):  # the queue goes on
        assert queue.running() == 1


def test_slots_setting(monkeypatch) -> None:
    monkeypatch.setenv("EXPLORER_HEAVY_SLOTS", "3")
    assert heavy_slots() == 3
    monkeypatch.setenv("EXPLORER_HEAVY_SLOTS", "0")
    assert heavy_slots() == 1
    monkeypatch.delenv("EXPLORER_HEAVY_SLOTS")
    import os
    assert heavy_slots() == max(1, (os.cpu_count() or 2) - 1)
