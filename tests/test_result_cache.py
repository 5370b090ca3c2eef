"""The probe-result cache (explorer.runtime.result_cache): bounded in bytes per process and per session, shared
between sessions, given up when a session ends, expiring; and its size measure against the buffers' own sizes."""
from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import pytest
import torch

from explorer.runtime.result_cache import OBJECT_BYTES, ResultCache, nbytes

MB = 2**20


def blob(n_mb: float) -> np.ndarray:
    return np.zeros(int(n_mb * MB), dtype=np.uint8)


@dataclass
class Trace:
    weights: np.ndarray
    hidden: torch.Tensor
    tokens: list[str]


def test_nbytes_counts_buffers_once_and_objects() -> None:
    a = np.zeros((100, 100), dtype=np.float32)
    t = torch.zeros(50, 20, dtype=torch.float64)
    trace = Trace(a, t, ["the", "dog"])
    expected = a.nbytes + t.numel() * 8 + len("the") + len("dog")
    assert expected <= nbytes(trace) <= expected + 10 * OBJECT_BYTES
    # views share their buffer: counted once
    views = [a[:10], a[10:], a.T, t[0], t[1:]]
    assert nbytes(views) <= a.nbytes + t.numel() * 8 + 10 * OBJECT_BYTES
    assert nbytes({"x": a, "y": (a, a)}) < a.nbytes + 10 * OBJECT_BYTES


def test_a_result_is_built_once_and_shared_between_sessions() -> None:
    cache = ResultCache(max_bytes=10 * MB, session_bytes=5 * MB)
    calls = []
    value = cache.get("k", "s1", lambda: calls.append(1) or blob(1))
    again = cache.get("k", "s2", lambda: calls.append(1) or blob(1))
    assert again is value and calls == [1] and cache.builds == 1
    assert cache.held("s1") == cache.held("s2") == nbytes(value)


def test_the_process_budget_drops_the_least_recently_used() -> None:
    cache = ResultCache(max_bytes=int(3.5 * MB), session_bytes=10 * MB)
    for i in range(3):
        cache.get(i, f"s{i}", lambda: blob(1))
    cache.get(0, "s0", lambda: blob(1))  # 0 used again: 1 is the oldest now
    cache.get(3, "s3", lambda: blob(1))
    assert len(cache) == 3 and cache.total() <= 3.5 * MB
    rebuilt = []
    cache.get(1, "s1", lambda: rebuilt.append(1) or blob(1))
    assert rebuilt == [1]
    kept = []
    cache.get(0, "s0", lambda: kept.append(1) or blob(1))
    assert kept == []


def test_one_session_cannot_push_out_the_class() -> None:
    """A session past its budget gives up its own oldest results; other sessions' results stay."""
    cache = ResultCache(max_bytes=100 * MB, session_bytes=int(2.5 * MB))
    teacher = cache.get("teacher", "t", lambda: blob(1))
    for i in range(10):
        cache.get(("long", i), "student", lambda: blob(1))
        assert cache.held("student") <= 2.5 * MB
    assert cache.get("teacher", "t", lambda: blob(1)) is teacher
    assert len(cache) == 3  # the teacher's and the student's last two


def test_a_shared_result_stays_while_another_session_holds_it() -> None:
    cache = ResultCache(max_bytes=100 * MB, session_bytes=int(1.5 * MB))
    shared = cache.get("shared", "a", lambda: blob(1))
    cache.get("shared", "b", lambda: blob(1))
    cache.get("other", "a", lambda: blob(1))  # a gives up "shared"; b still holds it
    assert cache.held("a") == nbytes(cache.get("other", "a", lambda: blob(1)))
    assert cache.get("shared", "b", lambda: blob(1)) is shared


def test_a_result_larger_than_a_session_may_hold_is_returned_not_kept() -> None:
    cache = ResultCache(max_bytes=100 * MB, session_bytes=2 * MB)
    big = cache.get("big", "s", lambda: blob(3))
    assert big.nbytes == 3 * MB and len(cache) == 0 and cache.total() == 0


def test_a_session_that_ends_gives_up_its_results() -> None:
    cache = ResultCache(max_bytes=100 * MB, session_bytes=50 * MB)
    cache.get("mine", "gone", lambda: blob(1))
    cache.get("ours", "gone", lambda: blob(1))
    cache.get("ours", "alive", lambda: blob(1))
    assert cache.end_session("gone") == 1
    assert len(cache) == 1 and cache.held("gone") == 0 and cache.held("alive") > MB


def test_results_expire() -> None:
    now = [0.0]
    cache = ResultCache(max_bytes=10 * MB, session_bytes=10 * MB, ttl_s=60, clock=lambda: now[0])
    first = cache.get("k", "s", lambda: blob(0.1))
    now[0] = 59
    assert cache.get("k", "s", lambda: blob(0.1)) is first
    now[0] = 61
    assert cache.get("k", "s", lambda: blob(0.1)) is not first and cache.builds == 2


def test_concurrent_asks_for_one_key_build_it_once() -> None:
    cache = ResultCache(max_bytes=10 * MB, session_bytes=10 * MB)
    started, release, calls = threading.Event(), threading.Event(), []

    def build() -> np.ndarray:
        calls.append(1)
        started.set()
        release.wait(5)
        return blob(0.1)

    out = []
    threads = [threading.Thread(target=lambda s=s: out.append(cache.get("k", s, build))) for s in ("a", "b", "c")]
    threads[0].start()
    started.wait(5)
    for t in threads[1:]:
        t.start()
    release.set()
    for t in threads:
        t.join(5)
    assert calls == [1] and len(out) == 3 and out[0] is out[1] is out[2]
    assert cache.held("a") == cache.held("b") == cache.held("c") > 0


def test_a_kept_result_is_read_only_for_every_session() -> None:
    cache = ResultCache(max_bytes=10 * MB, session_bytes=2 * MB)
    kept = cache.get("k", "a", lambda: Trace(np.ones(4), torch.ones(2), ["x"]))
    with pytest.raises(ValueError, match="read-only"):
        kept.weights[0] = 5.0  # a page writing into a shared result would change every session's view
    assert cache.get("k", "b", lambda: None).weights[0] == 1.0
    alone = cache.get("big", "a", lambda: blob(3))  # not kept: the caller's own
    alone[0] = 1


def test_a_cancelled_build_keeps_nothing_and_the_next_ask_builds() -> None:
    cache = ResultCache(max_bytes=10 * MB, session_bytes=10 * MB)

    def cancelled() -> np.ndarray:
        raise KeyboardInterrupt  # what a stopped script run raises through the probe

    with pytest.raises(KeyboardInterrupt):
        cache.get("k", "a", cancelled)
    assert len(cache) == 0 and not cache._key_locks
    assert cache.get("k", "a", lambda: blob(0.1)).nbytes == int(0.1 * MB) and cache.builds == 1
